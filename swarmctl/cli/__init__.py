"""The command line: a thin door onto the registry's tools.

Parsing is Typer's; every outcome, usage errors included, is one envelope on stdout and the
exit code of its error. Only --help, --version and shell completion print anything else.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from typing import Any, Callable, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.exceptions import Abort

from swarmctl import registry, runner
from swarmctl.cli.app import Globals, build, tools_for
from swarmctl.cli.inert import inert
from swarmctl.cli.output import emit, is_utf8
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, Terminated, exit_status, failure, internal_error, interrupted
from swarmctl.envelope import exit_code as exit_status_of
from swarmctl.spec import Tool


def main(argv: list[str] | None = None) -> NoReturn:
    signal.signal(signal.SIGTERM, _on_sigterm)
    status = run(sys.argv[1:] if argv is None else argv)
    # Everything is written and the store closed: leave without tearing the interpreter down,
    # which costs a short command a sixth of its time (measured in bench/core.py).
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(status)


def run(args: list[str]) -> int:
    """Run the CLI on `args`; return the exit status."""
    if (bad := _not_utf8(args)) is not None:
        return bad
    completing = any(key.endswith("_COMPLETE") and key.startswith("_SWARMCTL") for key in os.environ)
    command = typer.main.get_command(build(None if completing else tools_for(args)))
    try:
        status = command.main(args, prog_name="swarmctl", standalone_mode=False, obj={"argv": list(args)})
    except NoArgsIsHelpError as exc:
        if exc.ctx is not None and exc.ctx.parent is None:
            # Bare `swarmctl`: the help on stdout, exit 0, as `--help` (and gh and kubectl) do.
            print(exc.ctx.get_help())
            return 0
        return _usage_error(exc, quiet=_quiet(args))
    except UsageError as exc:
        return _usage_error(exc, quiet=_quiet(args))
    except Abort:
        print("Aborted.", file=sys.stderr)
        return 130
    return status if isinstance(status, int) else 0


def _quiet(args: list[str]) -> bool:
    """-q/--quiet anywhere on the command line (before `--`), for errors found before it is parsed."""
    words = args[: args.index("--")] if "--" in args else args
    return "-q" in words or "--quiet" in words


def _not_utf8(args: list[str]) -> int | None:
    """An argument (or SWARMCTL_* variable) that is not valid UTF-8 is bad usage, named: Python
    hands such bytes over as lone surrogates, which no store or JSON reader should receive."""
    where = None
    for i, arg in enumerate(args):
        if not is_utf8(arg):
            option = args[i - 1] if i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] else None
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            where = {"argument": i + 1, "value": shown, **({"option": option} if option else {})}
            named = f"argument {i + 1} ('{shown}'{', the value of ' + option if option else ''})"
            break
    else:
        for key, value in os.environ.items():
            if key.startswith("SWARMCTL_") and not is_utf8(value):
                shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                where, named = {"variable": key, "value": shown}, f"{key} ('{shown}')"
                break
    if where is None:
        return None
    error = SwarmError(
        "E_INVALID_ARG",
        f"{named} is not valid UTF-8",
        details=where,
        hint="Give text as UTF-8 (check the terminal's or the script's encoding).",
    )
    print(f"Error: {inert(error.message)}", file=sys.stderr)
    tool = _command_in(args)
    emit(failure(tool.name if tool else None, error, Meta()), Globals(), tool)
    return exit_status_of("E_INVALID_ARG")


def _command_in(args: list[str]) -> Tool | None:
    """The tool an argument list names, found without parsing it (for an error's `op`)."""
    words = [a for a in args if not a.startswith("-") and is_utf8(a)]
    for start in range(len(words)):
        for count in (2, 1):
            if (tool := registry.by_command(tuple(words[start : start + count]))) is not None:
                return tool
    return None


def invoke(tool: Tool, globals_: Globals, make_request: Callable[[], Any], usage: str | None = None) -> NoReturn:
    """Called by each command: build the request, run the tool, print the envelope, exit.

    An argument the CLI itself cannot turn into the request (an option given twice, a K=V
    without =, a file it cannot read) is bad usage: its error carries the usage text, which
    also goes to stderr. Ctrl-C or SIGTERM while the tool runs still ends in an envelope.
    """
    ctx = Context(repo=globals_.repo, actor=globals_.actor)
    try:
        request = make_request()
    except SwarmError as exc:
        if exc.code == "E_INVALID_ARG" and usage:
            exc.details.setdefault("usage", usage)
            if not globals_.quiet:
                print(f"{usage}\nError: {inert(exc.message)}", file=sys.stderr)
        envelope = failure(tool.name, exc, Meta(auth=ctx.auth))
    except Exception as exc:
        traceback.print_exc()
        envelope = failure(tool.name, internal_error(exc), Meta(auth=ctx.auth))
    else:
        ctx.progress = _progress_reporter(globals_)
        ctx.on_warning = _warn
        started = time.perf_counter()
        try:
            envelope = runner.run(tool, request, ctx)
        except KeyboardInterrupt as exc:
            elapsed_ms = int((time.perf_counter() - started) * 1000)
            envelope = failure(tool.name, interrupted(exc), Meta(repo=ctx.repo_path, elapsed_ms=elapsed_ms, auth=ctx.auth))
        finally:
            if ctx.progress is not None:
                ctx.progress.close()
    emit(envelope, globals_, tool)
    raise typer.Exit(exit_status(envelope))


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
    from swarmctl.cli.app import wants_color
    from swarmctl.cli.progress import StepProgress

    return StepProgress(sys.stderr, color=wants_color(globals_.color))


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _usage_error(exc: UsageError, quiet: bool = False) -> int:
    """Bad usage is an envelope too: E_INVALID_ARG, the usage text in details and on stderr."""
    click_ctx = exc.ctx
    tool = None
    if click_ctx is not None:
        path = tuple(click_ctx.command_path.split()[1:])
        tool = registry.by_command(path)
    usage = click_ctx.get_usage() if click_ctx is not None else None
    where = click_ctx.command_path if click_ctx is not None else "swarmctl"
    # With no command Click "fails" with the whole help as its message: say what is missing.
    message = f"missing command: `{where}` needs one" if isinstance(exc, NoArgsIsHelpError) else exc.format_message()
    error = SwarmError(
        "E_INVALID_ARG",
        message,
        details={"usage": usage},
        hint=f"Run `{where} --help` for usage.",
    )
    if not quiet:
        if isinstance(exc, NoArgsIsHelpError):
            exc.show(file=sys.stderr)  # the help text, ours
        else:
            # As Click's `exc.show()`, which would echo a bad argument as given, controls and all.
            if click_ctx is not None:
                print(f"{usage}\nTry '{where} {click_ctx.help_option_names[0]}' for help.\n", file=sys.stderr)
            print(f"Error: {inert(message)}", file=sys.stderr)
    globals_ = click_ctx.find_object(Globals) if click_ctx is not None else None
    auth = Context(actor=globals_.actor if globals_ else None).auth
    globals_ = globals_ or Globals()
    globals_.quiet = globals_.quiet or quiet
    emit(failure(tool.name if tool else None, error, Meta(auth=auth)), globals_, tool)
    return exit_status_of("E_INVALID_ARG")
