"""Running a tool: the one path both doors take from a request to an envelope."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from swarmctl import registry
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, failure, internal_error, interrupted, interrupted_after_commit, success
from swarmctl.spec import Tool, plain
from swarmctl.store import translated
from swarmctl.tools.common import worded


def run(tool: Tool, request: Any, ctx: Context) -> dict[str, Any]:
    """Run `tool` on a validated request and return its envelope. Never raises."""
    started = time.perf_counter()
    ctx.readonly = not tool.mutates and tool.needs_store
    ctx.tools = ctx.tools or registry.by_name
    try:
        _refuse_nul(request)
        result = plain(tool.run(ctx, request))
        error = None
    except SwarmError as exc:
        error = worded(exc)
    except Exception as exc:  # a bug (say so, with an id to find it by), or a driver's failure
        error = translated(exc, ctx._store) or internal_error(exc)
    finally:
        ctx.close()
    meta = Meta(
        repo=ctx.repo_path,
        elapsed_ms=_elapsed_ms(started),
        resolved=ctx.resolved,
        auth=ctx.auth,
    )
    envelope = failure(tool.name, error, meta) if error else success(tool.name, result, meta)
    return runnable_in(envelope, ctx)


def stopped(op: str | None, exc: KeyboardInterrupt, ctx: Context, elapsed_ms: int = 0, *, lost: bool = False) -> dict[str, Any]:
    """The envelope of a call a signal stopped (Ctrl-C, SIGTERM, SIGHUP), at every door: its
    write rolled back, or, when the signal came once it was committed, the ops it wrote
    (`details.committed`: never "rolled back, not written" of a change that is in the store; a
    client would make it twice). `lost`: what the call wrote was lost with its group after all
    (`call --lines`). A workflow's executor says itself what it stopped (`exc.details`); its
    steps' ops are its record, not a change the signal came too late for."""
    committed = [] if lost else list(getattr(ctx._store, "committed", None) or [])
    after_commit = committed and not getattr(exc, "details", None)
    error = interrupted_after_commit(exc, committed) if after_commit else interrupted(exc)
    return runnable_in(failure(op, error, Meta(repo=ctx.repo_path, elapsed_ms=elapsed_ms, auth=ctx.auth)), ctx)


def runnable_in(envelope: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """`runnable_next` with the store and the actor of `ctx` (one it took on trust, or from the
    database's login: not a token's, which the shell has no way to act as)."""
    return runnable_next(envelope, envelope["meta"].get("repo"), ctx.actor if ctx.auth in ("trust", "database") else None)


# A file's content is kept as bytes, where a NUL is a byte like any other.
_BYTES_FIELDS = ("files",)


def _refuse_nul(request: Any) -> None:
    """A NUL character in any text of a request is E_INVALID_ARG, on every kind of store:
    PostgreSQL cannot keep one in text, so no store does (a file's content may hold one)."""
    names = [f.name for f in dataclasses.fields(request)] if dataclasses.is_dataclass(request) else []
    for name in names:
        value = getattr(request, name)
        if name in _BYTES_FIELDS and isinstance(value, dict):
            value = list(value)  # its paths are text; its contents are bytes (which `plain` refuses)
        else:
            value = plain(value)
        if _has_nul(value):
            raise SwarmError(
                "E_INVALID_ARG",
                f"{name} contains a NUL character (U+0000), which no store keeps in text",
                details={"field": name},
                hint="Remove the NUL character.",
            )


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def runnable_next(envelope: dict[str, Any], repo: str | None, actor: str | None) -> dict[str, Any]:
    """Make each `next` (the error's, the result's) run as written from any directory in a
    clean environment: its argv, and the same command where a hint spells it, name the store
    (as `meta.repo` shows it) and the actor. `arguments` (what MCP calls) stay as they are."""
    words = [*(["--repo", repo] if repo else []), *(["--as", actor] if actor else [])]
    if not words:
        return envelope
    body = envelope["error"] if not envelope["ok"] else envelope["result"]
    if not isinstance(body, dict):
        return envelope
    calls = body.get("next")
    spelled = False  # whether the hint spells a next call
    for call in calls if isinstance(calls, list) else [calls]:
        if not isinstance(call, dict) or not isinstance(call.get("argv"), list) or call["argv"][:1] != ["swarmctl"]:
            continue
        before = call["argv"]
        call["argv"] = ["swarmctl", *words, *before[1:]]
        if isinstance(body.get("hint"), str):
            import shlex  # here: only an envelope naming a next call needs it

            after = body["hint"].replace(f"`{shlex.join(before)}`", f"`{shlex.join(call['argv'])}`")
            spelled, body["hint"] = spelled or after != body["hint"], after
    if spelled:  # the hint's other commands run as written beside it (`workflow status ID`, `resume ID`)
        body["hint"] = _with_store_words(body["hint"], words)
    return envelope


def _with_store_words(hint: str, words: list[str]) -> str:
    """Each command in `hint` (`swarmctl AREA ...`, in backquotes) that names no store yet, with
    `words` (--repo, --as) after `swarmctl`."""
    import re
    import shlex

    def runnable(found: re.Match[str]) -> str:
        command = found.group(1)
        if command.split()[0] not in registry.AREAS or "--repo" in command.split():
            return found.group(0)
        return f"`swarmctl {shlex.join(words)} {command}`"

    return re.sub(r"`swarmctl ([^`]+)`", runnable, hint)


def run_json(tool: Tool, arguments: Any, ctx: Context) -> dict[str, Any]:
    """Run `tool` on JSON arguments (MCP, `swarmctl call`): validated by the request type."""
    started = time.perf_counter()
    from swarmctl import arguments as json_arguments

    try:
        request, ignored = json_arguments.read_request(tool, arguments)
    except SwarmError as exc:
        meta = Meta(elapsed_ms=_elapsed_ms(started), auth=ctx.auth)
        return failure(tool.name, exc, meta)
    envelope = run(tool, request, ctx)
    if ignored:  # after `auth`, and only when something was ignored
        envelope["meta"]["ignored"] = ignored
    return envelope


def _elapsed_ms(started: float) -> int:
    """Milliseconds since `started`; never negative, even on a clock that went back."""
    return max(0, int((time.perf_counter() - started) * 1000))
