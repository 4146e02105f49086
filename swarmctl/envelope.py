"""The envelope: the one JSON object every command prints and every MCP tool returns.

This module is the single place where error codes, their exit codes and the envelope's
shape are decided. It imports nothing slow: every command goes through it.
"""

import json
import os
from typing import Any, NamedTuple

API_VERSION = 1


class ErrorCode(NamedTuple):
    code: str
    exit: int
    when: str


# code -> exit status. Scripts branch on these; never renumber one.
ERROR_CODES: dict[str, ErrorCode] = {
    c.code: c
    for c in [
        ErrorCode(
            "E_INVALID_ARG",
            2,
            "arguments that do not fit the request type, a field named twice, "
            "a value out of range, bad usage",
        ),
        ErrorCode("E_CAS_MISMATCH", 3, "a ref is not what the operation expected; nothing was written"),
        ErrorCode("E_NOT_FOUND", 4, "no such op, ref, changeset, transaction or workflow"),
        ErrorCode("E_NOT_A_REPO", 5, "no store at the given or discovered path"),
        ErrorCode("E_IDENTITY_REQUIRED", 6, "a mutation without `--as` / `SWARMCTL_AS`"),
        ErrorCode(
            "E_FORBIDDEN", 6, "the actor may not do this: store policy, or a store (directory or file, named in `details.file`) this process may not read or write"
        ),
        ErrorCode(
            "E_REFUSED",
            7,
            "refused by a safety rule: rollback blockers, unacknowledged unknown effects, a stale preview",
        ),
        ErrorCode(
            "E_STATE",
            7,
            "not allowed in the current state (no open transaction, a transaction already open, ...)",
        ),
        ErrorCode(
            "E_NOTHING_TO_UNDO", 7, "the operation moved no ref, or a revert or restore has nothing to take back"
        ),
        ErrorCode(
            "E_BUSY",
            8,
            "the store stayed locked past the timeout; safe to retry; a workflow run that meets it once the "
            "workflow exists names it (`details.workflow`, `next`: its status): resume it, do not run its file again",
        ),
        ErrorCode("E_STORE_CORRUPT", 9, "the store fails its own checks; nothing was written"),
        ErrorCode(
            "E_STORE_VERSION",
            9,
            "the store was written by a newer swarmctl (a newer store format); nothing was written",
        ),
        ErrorCode(
            "E_STEP_FAILED",
            10,
            "a workflow step failed (a command exited non-zero or timed out, a store step was refused): "
            "the workflow is `failed` and can be resumed with --retry or rolled back; or a step's undo failed "
            "in a rollback: the workflow is `rollback_failed`, `details.results` holds each step's outcome",
        ),
        ErrorCode(
            "E_UNAVAILABLE",
            11,
            "the store's database server cannot be reached (or this installation has no driver for it: `details.driver`), has no connection free or dropped the connection, "
            "the disk that holds the store (or the server's) is full, or this process may open no more files, "
            "or an `mcp --http` server is stopping (`details.stopping: true`); "
            "nothing was written "
            "(or, when the connection dropped during COMMIT and the outcome could not be found, "
            "`details.commit_unknown: true`; or, when the disk failed to store a committed change, "
            "`details.reason: sync_failed` and `details.committed` naming its ops, in the store now: "
            "do not retry those); safe to retry; a workflow run that meets it once the workflow "
            "exists names it (`details.workflow`, `next`: its status): resume it, do not run its file again",
        ),
        ErrorCode(
            "E_INTERRUPTED",
            130,
            "stopped by Ctrl-C, SIGTERM or SIGHUP; a store change in progress was rolled back, a workflow step in flight is recorded as interrupted; a signal that came once the change was committed names the ops it wrote (`details.committed`)",
        ),
        ErrorCode("E_INTERNAL", 70, "a bug; the message says so and carries a correlation id"),
    ]
}


def exit_code(code: str) -> int:
    return ERROR_CODES[code].exit


class SwarmError(Exception):
    """A failure a caller can act on: a stable code, a message, and what to do next."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        hint: str | None = None,
        next: dict[str, Any] | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.hint = hint
        self.next = next

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": _clip_middle(self.message, MESSAGE_MAX),
            "details": _clip(self.details, DETAIL_MAX),
            "hint": _clip_middle(self.hint, MESSAGE_MAX),
            "next": self.next,
        }


# Errors echo what they were given; a 5 MB ref name must not come back as a 20 MB envelope.
MESSAGE_MAX = 1000
DETAIL_MAX = 8192


def _clip_middle(text: str | None, limit: int) -> str | None:
    """A message or hint cut in its middle, where what it echoes is (`invalid ref name 'aaa…':
    it is longer than 255 characters`): its end says what is wrong, and stays."""
    if text is None or len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail]}… [{len(text) - limit} more characters] …{text[-tail:]}"


def _clip(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… [{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v, limit) for v in value]
    return value


def internal_error(exc: BaseException) -> SwarmError:
    """Wrap an unexpected exception: say it is a bug, with an id to find it by. (Nothing is
    imported here: the last resort must work where an import cannot, as in a process with no
    file descriptor left.)"""
    return bug(f"internal error (a bug in swarmctl): {type(exc).__name__}: {exc}", {"exception": type(exc).__name__})


def bug(message: str, details: dict[str, Any]) -> SwarmError:
    """E_INTERNAL: `message` (which says it is a bug) with a correlation id to find it by, in the
    message and in `details` (first)."""
    correlation_id = os.urandom(6).hex()
    return SwarmError(
        "E_INTERNAL",
        f"{message} [correlation id {correlation_id}]",
        details={"correlation_id": correlation_id, **details},
        hint="Please report this with the correlation id and the command you ran.",
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM, or SIGHUP (the terminal closed, the ssh session dropped), raised where the
    process is, like Ctrl-C: transactions roll back on the way out."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(f"signal {signal_name}")
        self.signal_name = signal_name


def raise_terminated(signum: int, frame: Any) -> None:
    """The handler of SIGTERM and SIGHUP wherever swarmctl takes them as it takes Ctrl-C."""
    import signal

    raise Terminated(signal.Signals(signum).name)


def terminating_signals() -> tuple[int, ...]:
    """The signals besides SIGINT that stop a command as Ctrl-C does. Where one is ignored (SIGHUP
    under `nohup`), whoever takes them leaves it ignored: `nohup swarmctl ...` goes on when the
    terminal closes."""
    import signal

    return (signal.SIGTERM, signal.SIGHUP)


def interrupted(exc: KeyboardInterrupt) -> SwarmError:
    """E_INTERRUPTED for Ctrl-C (SIGINT), SIGTERM or SIGHUP, naming the one that came. What was in
    flight may have said what it was and what to do (`exc.details`, `hint`, `next`: a workflow)."""
    name = exc.signal_name if isinstance(exc, Terminated) else "SIGINT"
    return SwarmError(
        "E_INTERRUPTED",
        f"interrupted by {name if name != 'SIGINT' else 'SIGINT (Ctrl-C)'} before the command finished",
        details={"signal": name, **getattr(exc, "details", {})},
        # What stopped in flight may say what to do instead (a workflow: never run its file again).
        hint=getattr(exc, "hint", None) or "A store change in progress was rolled back, not written; a workflow "
        "step in flight is recorded as interrupted (`swarmctl workflow status` shows it). Check, then run the command again.",
        next=getattr(exc, "next", None),
    )


def interrupted_after_commit(exc: KeyboardInterrupt, ops: list[int]) -> SwarmError:
    """E_INTERRUPTED for a signal that came once the command's change was committed (as `ops`):
    the change is written, and the command must not be run again for it."""
    error = interrupted(exc)
    written = f"op {ops[0]}" if len(ops) == 1 else f"ops {ops[0]} to {ops[-1]}"
    error.message = error.message.replace("before the command finished", f"after its change was written ({written})")
    error.details = {**error.details, "committed": ops}
    error.hint = (f"The change is in the store as {written}: running the command again would make it again. "
                  + (f"`swarmctl op show {ops[0]}` shows it; `swarmctl op undo {ops[0]}` takes it back." if len(ops) == 1
                     else "`swarmctl op log` shows them."))
    return error


class Meta:
    """The envelope's `meta`: where, how long, what was resolved, how the actor was established."""

    def __init__(
        self,
        repo: str | None = None,
        elapsed_ms: int = 0,
        resolved: dict[str, Any] | None = None,
        auth: str = "none",
    ) -> None:
        self.repo = repo
        self.elapsed_ms = elapsed_ms
        self.resolved = resolved if resolved is not None else {}
        self.auth = auth

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "elapsed_ms": self.elapsed_ms,
            "resolved": self.resolved,
            "auth": self.auth,
        }


def success(op: str | None, result: Any, meta: Meta) -> dict[str, Any]:
    return {"ok": True, "op": op, "api": API_VERSION, "result": result, "meta": meta.to_dict()}


def failure(op: str | None, error: SwarmError, meta: Meta) -> dict[str, Any]:
    return {"ok": False, "op": op, "api": API_VERSION, "error": error.to_dict(), "meta": meta.to_dict()}


# Characters JSON may leave raw in a string that many readers (Python's str.splitlines,
# JavaScript before ES2019) take for line breaks: escaped, the envelope is one line for all.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def dumps(envelope: dict[str, Any]) -> str:
    """The compact form: one line, no spaces, keys in the order built. The wire format.

    A list of records kept as JSON text (spec.JsonTexts) is written in as it is: the encoder
    writes a placeholder for it, a string no envelope holds otherwise (store text and requests
    never hold a NUL), which is then replaced by the records."""
    spliced: dict[str, str] = {}

    def as_placeholder(value: Any) -> str:
        texts = getattr(value, "json_texts", None)
        if texts is None:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        placeholder = f"\x00records-{len(spliced)}\x00"
        spliced[json.dumps(placeholder)] = "[" + ",".join(texts) + "]"
        return placeholder

    # An envelope is a tree of plain values, never a cycle: the encoder need not look for one.
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, check_circular=False, default=as_placeholder)
    for placeholder, records in spliced.items():
        text = text.replace(placeholder, records, 1)
    return line_safe(text)


def line_safe(text: str) -> str:
    """JSON text with the characters some readers take for line breaks escaped (_LINE_BREAKS)."""
    for char, escaped in _LINE_BREAKS.items():
        if char in text:  # only ever inside a string: JSON has no other place for it
            text = text.replace(char, escaped)
    return text


def exit_status(envelope: dict[str, Any]) -> int:
    return 0 if envelope["ok"] else exit_code(envelope["error"]["code"])
