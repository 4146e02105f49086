"""The command line: a thin door onto the registry's tools.

Parsing is Typer's; every outcome, usage errors included, is one envelope on stdout and the
exit code of its error. Only --help, --version and shell completion print anything else.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any, Callable, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.exceptions import Abort

from swarmctl import registry, runner
from swarmctl.cli.app import Globals, build, tools_for
from swarmctl.cli.output import emit
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, exit_status, failure, internal_error
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
                print(f"{usage}\nError: {exc.message}", file=sys.stderr)
        envelope = failure(tool.name, exc, Meta(auth=ctx.auth))
    except Exception as exc:
        traceback.print_exc()
        envelope = failure(tool.name, internal_error(exc), Meta(auth=ctx.auth))
    else:
        ctx.progress = _progress_reporter(globals_)
        try:
            envelope = runner.run(tool, request, ctx)
        except KeyboardInterrupt as exc:
            envelope = failure(tool.name, _interrupted(exc), Meta(repo=ctx.repo_path, auth=ctx.auth))
        finally:
            if ctx.progress is not None:
                ctx.progress.close()
    emit(envelope, globals_, tool)
    raise typer.Exit(exit_status(envelope))


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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, like Ctrl-C: transactions roll back on the way out."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _interrupted(exc: KeyboardInterrupt) -> SwarmError:
    signal_name = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT (Ctrl-C)"
    return SwarmError(
        "E_INTERRUPTED",
        f"interrupted by {signal_name} before the command finished",
        details={"signal": signal_name.split()[0]},
        hint="A store change in progress was rolled back, not written; a workflow step in flight is "
        "recorded as interrupted (`swarmctl workflow status` shows it). Check, then run the command again.",
    )


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
        exc.show(file=sys.stderr)
    globals_ = click_ctx.find_object(Globals) if click_ctx is not None else None
    auth = Context(actor=globals_.actor if globals_ else None).auth
    globals_ = globals_ or Globals()
    globals_.quiet = globals_.quiet or quiet
    emit(failure(tool.name if tool else None, error, Meta(auth=auth)), globals_, tool)
    return exit_status_of("E_INVALID_ARG")
