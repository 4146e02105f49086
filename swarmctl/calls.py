"""Calling a tool by its name with JSON arguments: the path `swarmctl call` and the MCP server share.

Both doors end in `runner.run_json` (validation by the request type, unknown fields ignored);
this module adds what comes before it: finding the tool by name, and reading the arguments as
JSON, where a field named twice is E_INVALID_ARG rather than last-one-wins; and, for
`swarmctl call --lines`, reading one call from each line of JSON Lines.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from swarmctl import jsontext, runner, stopping
from swarmctl.context import Context, OpenStores
from swarmctl.envelope import Meta, SwarmError, exit_status, failure, interrupted
from swarmctl.spec import Tool
from swarmctl.store import faults


def unknown_tool(name: str, tools: Mapping[str, Tool]) -> SwarmError:
    """E_NOT_FOUND, naming the tool `name` is a near miss of (`op-log`, `undoo`), as a field's is."""
    from swarmctl.fields import near_miss

    meant = near_miss(name, sorted(tools))  # every name (the registry loads each area only when asked)
    return SwarmError(
        "E_NOT_FOUND",
        f"no tool {name!r}" + (f": did you mean {meant!r}?" if meant else ""),
        details={"tool": name, **({"did_you_mean": meant} if meant else {}), "tools": sorted(tools)},
        hint="`details.tools` lists the tools; `swarmctl schema` prints their request types.",
    )


def call_tool(
    name: str,
    arguments: Any,
    ctx: Context,
    tools: Mapping[str, Tool],
    *,
    rejected: SwarmError | None = None,
) -> dict[str, Any]:
    """The envelope of tool `name` run on JSON `arguments`. Never raises.

    `rejected` is what was wrong with the arguments' JSON text, found before it was parsed
    (a field named twice): the call fails with it and runs nothing.
    """
    tool = tools.get(name)
    if tool is None:
        return failure(None, unknown_tool(name, tools), Meta(auth=ctx.auth))
    if rejected is not None:
        return failure(tool.name, rejected, Meta(auth=ctx.auth))
    return runner.run_json(tool, arguments, ctx)


def call_text(name: str, text: str, ctx: Context, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """As `call_tool`, with the arguments as JSON text (`swarmctl call`)."""
    if name not in tools:
        return call_tool(name, None, ctx, tools)
    try:
        arguments = jsontext.parse_arguments(text)
    except SwarmError as exc:
        return call_tool(name, None, ctx, tools, rejected=exc)
    return call_tool(name, arguments, ctx, tools)


# --- `swarmctl call --lines`: many calls, one JSON object a line ---------------------------

LINE_FIELDS = ("tool", "arguments", "id")


def call_line(
    line: str, ctx: Context, tools: Mapping[str, Tool], before: Callable[[Tool], None] | None = None
) -> dict[str, Any]:
    """The envelope of one line of `swarmctl call --lines`: `{"tool": NAME, "arguments": {...},
    "id": ...}` (`arguments` optional, `{}`; `id` optional, any JSON value, echoed as `meta.id`).
    A line that is not such an object is E_INVALID_ARG and runs nothing. `before(tool)` is
    called just before a tool runs. Never raises (but what `before` raises)."""
    try:
        call = jsontext.parse_arguments(line, "the line")
    except SwarmError as exc:
        return _refused_line(line, exc, ctx, tools)
    if not isinstance(call, dict):
        return failure(None, _bad_line("a line must be a JSON object", {}), Meta(auth=ctx.auth))
    unknown = [key for key in call if key not in LINE_FIELDS]
    name = call.get("tool")
    if unknown:
        error = _bad_line(f"unknown field(s) {', '.join(map(repr, unknown))} in a call", {"fields": unknown})
        envelope = failure(name if name in tools else None, error, Meta(auth=ctx.auth))
    elif not isinstance(name, str):
        envelope = failure(None, _bad_line('a call names its tool as a string: "tool": NAME', {"field": "tool"}), Meta(auth=ctx.auth))
    else:
        try:
            if before is not None and name in tools:
                before(tools[name])
            envelope = call_tool(name, call.get("arguments", {}), ctx, tools)
            faults.pause_after_call()
        except KeyboardInterrupt as exc:  # the call it stopped, for its envelope (Batch.stopped_by)
            exc.line_call = {"op": name if name in tools else None, **({"id": call["id"]} if "id" in call else {})}  # type: ignore[attr-defined]
            raise
    if "id" in call:
        envelope["meta"]["id"] = call["id"]
    return envelope


def _refused_line(line: str, exc: SwarmError, ctx: Context, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """A line refused whole (a field named twice, too big, too deep): under its tool and `id`
    where the line names each once, so that a caller matching answers by `id` finds it (as MCP
    answers a call whose arguments name a field twice under its request's id)."""
    pairs = None
    if "max_bytes" not in exc.details:  # not past the size bound: read again, keeping every pair,
        try:                             # as Python reads JSON (a lone surrogate, 1e400 and all)
            pairs = jsontext.read_pairs_leniently(line)
        except (ValueError, RecursionError):
            pass
    keys = [key for key, _ in pairs] if isinstance(pairs, jsontext.Pairs) else []
    name = pairs.get("tool") if keys.count("tool") == 1 else None
    envelope = failure(name if isinstance(name, str) and name in tools else None, exc, Meta(auth=ctx.auth))
    if keys.count("id") == 1 and jsontext.is_plain_scalar(pairs.get("id")):
        envelope["meta"]["id"] = pairs.get("id")  # a scalar id, echoed as it came
    return envelope


def _bad_line(message: str, details: dict[str, Any]) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        message,
        details={**details, "known": list(LINE_FIELDS)},
        hint='Write one call a line: {"tool": "ref_set", "arguments": {"name": "main", "target": "3f9a"}, "id": 1}.',
    )


# --- group commit: the calls `call --lines` has in hand commit together -----------------------

# A group holds the store's write lock: at most this many calls, or this long, before it
# commits and another process may write.
GROUP_CALLS = 256
GROUP_SECONDS = 0.2
# After a group, the lock is left free for this share of the time the group held it: about the
# share of time it was free between one-call transactions, so other writers wait no longer.
FAIR_SHARE = 0.2
# The exit status of a batch whose reader closed stdout before it ended (unless a call before
# had failed): 128 + SIGPIPE, what a shell reports for a process that a closed pipe ended. Lines
# not yet read were never run, so the batch did not succeed, and a script (`set -o pipefail`)
# must be able to tell.
READER_GONE = 141


class Batch:
    """The calls of `swarmctl call --lines`, on one open store, each envelope passed to `emit`
    (False from it: the reader is gone, run nothing more), and the exit status of the first
    failure in `status` (READER_GONE when the reader went first).

    Group commit: the calls the door has in hand (those one read of stdin brought, up to
    GROUP_CALLS or GROUP_SECONDS) commit together, each a savepoint of one transaction
    (SqliteStore.begin_group), and their envelopes are emitted after that transaction's commit
    and its one sync: no envelope says a write happened before it is on disk. The door calls
    `flush` before it waits for more lines, so a caller who writes a line and waits gets its
    answer. A tool that may use the store other than through its call's connection, or start a
    process (`group_commit` False), runs alone, after the calls before it committed.
    """

    def __init__(self, context: Callable[[OpenStores], Context], emit: Callable[[dict[str, Any]], bool],
                 stop_on_error: bool = False) -> None:
        from swarmctl import registry

        self.tools, self.stores = registry.Named(), OpenStores()
        self.context, self.emit, self.stop_on_error = context, emit, stop_on_error
        self.status = 0
        self._pending: list[dict[str, Any]] = []  # the envelopes of the open group's calls
        self._group_lost = False  # whether the last group's commit lost its writes
        self._opened = 0.0

    def call(self, read: Callable[[], str]) -> bool:
        """Run the call `read()` gives (what it raises is the call's error); False: stop."""
        ctx = self.context(self.stores)
        try:
            envelope = call_line(read(), ctx, self.tools, self._before)
        except SwarmError as exc:
            envelope = failure(None, exc, Meta(auth=ctx.auth))
        except _ReaderGone:
            return False
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: this call rolled back; no more run
            self.stopped_by(exc, Meta(repo=ctx.repo_path, auth=ctx.auth), ctx)
            return False
        self._pending.append(envelope)
        stopping = self.stop_on_error and not envelope["ok"]
        full = len(self._pending) >= GROUP_CALLS or self._age() >= GROUP_SECONDS
        if stopping or full or not self.stores.grouping:
            return self.flush() and not stopping
        return True

    def stopped_by(self, exc: KeyboardInterrupt, meta: Meta | None = None, ctx: Context | None = None) -> None:
        """Ctrl-C or SIGTERM: during a call (rolled back; its envelope has the call's `op` and
        `meta.id`), between two (the door waiting for a line), or held back while a group's
        envelopes were printed. The calls before it are answered first; then one E_INTERRUPTED
        envelope, whose exit status is the batch's."""
        stopped = getattr(exc, "line_call", {})
        answered = self.flush()  # the calls before it ended: theirs first; the group's commit, with its write
        if ctx is not None:  # what it wrote once it joined its group, committed with it (unless lost)
            envelope = runner.stopped(stopped.get("op"), exc, ctx, lost=self._group_lost)
        else:
            envelope = failure(None, interrupted(exc), meta or Meta())
        if "id" in stopped:
            envelope["meta"]["id"] = stopped["id"]
        if answered:
            self._deliver(envelope)
        self.status = exit_status(envelope)

    def flush(self) -> bool:
        """Commit the open group, then emit its envelopes; False when the reader is gone. Then
        leave the store's write lock free for a fifth of the time the group held it."""
        held = self._age() if self.stores.grouping else 0.0
        with stopping.interrupts_held():  # a Ctrl-C or SIGTERM now comes once every committed call is answered
            lost = self.stores.end_groups()
            self._group_lost = lost is not None
            for envelope in self._pending:
                if lost is not None and envelope["ok"]:
                    envelope = lost_with_group(envelope, lost)
                if not self._deliver(envelope):
                    return False
                if not envelope["ok"]:
                    self.status = self.status or exit_status(envelope)
            self._pending.clear()
        # Another writer waits for the lock by trying again now and then (SQLite's busy handler,
        # every 100 ms once it has waited a while), and gets it only if it is free when it tries:
        # groups back to back would leave it free a few percent of the time, and a long batch
        # would keep other agents waiting for seconds.
        if self.stores.wrote:
            time.sleep(held * FAIR_SHARE)
        return True

    def _age(self) -> float:
        """The seconds since the open group's first call, less any a test held this process at a
        fault point (faults.stopped_s): a group under test is the group it would be."""
        return time.monotonic() - faults.stopped_s() - self._opened

    def _deliver(self, envelope: dict[str, Any]) -> bool:
        if self.emit(envelope):
            return True
        self.status = self.status or READER_GONE
        return False

    def close(self) -> None:
        self.stores.close()  # a group not flushed is rolled back: its calls were never answered

    def _before(self, tool: Tool) -> None:
        if not tool.group_commit:
            if not self.flush():
                raise _ReaderGone
        elif not self.stores.grouping:
            self.stores.grouping, self._opened = True, time.monotonic() - faults.stopped_s()


class _ReaderGone(Exception):
    """The door's reader is gone: run nothing more."""


def lost_with_group(envelope: dict[str, Any], lost: SwarmError) -> dict[str, Any]:
    """The envelope of a call whose write was undone with its group's: `lost`, with its meta."""
    failed = failure(envelope["op"], lost, Meta())
    failed["meta"] = envelope["meta"]
    return failed
