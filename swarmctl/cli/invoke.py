"""Running one command: its request built, its tool run, its envelope printed, its exit code.

Every command the registry makes ends here, parsed by Typer (cli/app.py) or not (cli/fast.py). An argument the CLI itself cannot turn
into the request (an option given twice, a K=V without =, a file it cannot read, a value
outside its field's constraints) is bad usage: its error carries the usage text, which also
goes to stderr. Ctrl-C or SIGTERM while the tool runs still ends in an envelope.
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import Any, Callable, ContextManager

from swarmctl import runner
from swarmctl.cli.inert import inert
from swarmctl.cli.options import Globals
from swarmctl.cli.output import emit, errors_on_stderr, prints_json_text, wants_color
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, exit_status, failure, internal_error, interrupted
from swarmctl.spec import Tool


def invoke(tool: Tool, globals_: Globals, make_request: Callable[[], Any], usage: str | None = None) -> int:
    """Build the request, run the tool, print the envelope; return its exit status."""
    ctx = Context(repo=globals_.repo, actor=globals_.actor, json_text=prints_json_text(globals_))
    try:
        request = make_request()
    except SwarmError as exc:
        if exc.code == "E_INVALID_ARG" and usage:
            exc.details.setdefault("usage", usage)
            if not globals_.quiet:
                error_line = "" if errors_on_stderr(globals_) else f"\nError: {inert(exc.message)}"
                print(f"{usage}{error_line}", file=sys.stderr)
        envelope = failure(tool.name, exc, Meta(auth=ctx.auth))
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while a file it names was read: nothing ran
        envelope = failure(tool.name, interrupted(exc), Meta(auth=ctx.auth))
    except Exception as exc:
        import traceback  # here: only a bug gets this far, and it costs every command to import

        traceback.print_exc()
        envelope = failure(tool.name, internal_error(exc), Meta(auth=ctx.auth))
    else:
        return _answer(lambda: _run(tool, request, ctx, globals_), tool.name, ctx, globals_, tool)
    emit(envelope, globals_, tool)
    return exit_status(envelope)


def call(globals_: Globals, name: str, read_arguments: Callable[[], str]) -> int:
    """`swarmctl call NAME JSON`: the tool run on the JSON arguments `read_arguments` gives
    (the word, or stdin), its envelope printed; return its exit status. (Typer parses it in
    cli/doors.py, or cli/fast.py does.)"""
    ctx = Context(repo=globals_.repo, actor=globals_.actor, json_text=prints_json_text(globals_))
    try:
        from swarmctl import registry
        from swarmctl.calls import call_text

        tools = registry.Named()
        op = name if name in tools else None  # the tool's module imported: most of a call's start
    except KeyboardInterrupt as exc:  # nothing ran yet: said as once it runs, never exit 130 with no envelope
        envelope = failure(None, interrupted(exc), Meta(auth=ctx.auth))
        emit(envelope, globals_, None)
        return exit_status(envelope)

    def run() -> dict[str, Any]:
        try:
            envelope = call_text(name, read_arguments(), ctx, tools)
        except SwarmError as exc:  # the arguments could not be read (stdin too big, not UTF-8)
            return failure(op, exc, Meta(auth=ctx.auth))
        ignored = envelope["meta"].get("ignored")
        if ignored:
            print(f"swarmctl call: {name} does not know {', '.join(map(repr, ignored))}: ignored", file=sys.stderr)
        return envelope

    return _answer(run, op, ctx, globals_, tools.get(name))


def _answer(run: Callable[[], dict[str, Any]], op: str | None, ctx: Context, globals_: Globals, tool: Tool | None) -> int:
    """Run the tool (`run` gives its envelope) and print the envelope; return its exit status.

    Ctrl-C or SIGTERM while the tool runs rolls its write back, and the envelope says so. Once a
    write committed, one has nothing left to stop: the envelope is printed with interrupts held,
    and one that came before that (the tool had returned, its envelope not yet printed) is
    answered as one after the commit inside the tool is (`details.committed`), never exit 130
    with stdout empty. One that comes once the envelope is out is dropped."""
    started = time.perf_counter()
    emitting = printed = False
    try:
        envelope = run()
        with _held_once_written(ctx):
            emitting = True
            emit(envelope, globals_, tool)
            printed = True
    except KeyboardInterrupt as exc:
        if printed:
            return exit_status(envelope)
        if emitting:  # a second one, cut the envelope short: there is nothing more to say
            raise
        envelope = _interrupted(op, exc, ctx, started)
        with _held_once_written(ctx):
            emit(envelope, globals_, tool)
    return exit_status(envelope)


def _held_once_written(ctx: Context) -> ContextManager[None]:
    """Interrupts held while the envelope of a command that wrote is printed (a command that
    did not write may be cut short: it changed nothing)."""
    if getattr(ctx._store, "committed", None):
        from swarmctl import stopping

        return stopping.interrupts_held(deliver=False)
    return nullcontext()


def stdin_text() -> str:
    """`call TOOL -`: the arguments from stdin, read to at most SWARMCTL_MAX_INPUT_BYTES and one
    byte more, never to its end."""
    from swarmctl import limits

    return utf8(limits.read_bounded(sys.stdin.buffer, "stdin"), "stdin")


def utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SwarmError("E_INVALID_ARG", f"{what} is not UTF-8 text: {exc}", details={"input": what}) from None


def _run(tool: Tool, request: Any, ctx: Context, globals_: Globals) -> dict[str, Any]:
    ctx.progress = _progress_reporter(globals_)
    ctx.on_warning = _warn
    started = time.perf_counter()
    interrupted = False
    try:
        return runner.run(tool, request, ctx)
    except KeyboardInterrupt as exc:
        interrupted = True
        return _interrupted(tool.name, exc, ctx, started)
    finally:
        if ctx.progress is not None:
            ctx.progress.close(interrupted)


def _interrupted(op: str | None, exc: KeyboardInterrupt, ctx: Context, started: float) -> dict[str, Any]:
    """The envelope of a tool stopped by Ctrl-C or SIGTERM (runner.stopped)."""
    return runner.stopped(op, exc, ctx, int((time.perf_counter() - started) * 1000))


def _warn(message: str) -> None:
    print(f"swarmctl: warning: {inert(message)}", file=sys.stderr)


def _progress_reporter(globals_: Globals) -> Any:
    """Progress for people on stderr, only when it is a terminal (Rich is imported only then)."""
    if globals_.quiet:
        return None
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    from swarmctl.cli.progress import StepProgress

    return StepProgress(sys.stderr, color=wants_color(globals_.color))
