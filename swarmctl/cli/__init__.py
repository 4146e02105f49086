"""The command line: a thin door onto the registry's tools.

Parsing is Typer's; every outcome, usage errors included, is one envelope on stdout and the
exit code of its error. Only --help, --version and shell completion print anything else.

The package, by job: options.py (the global options, declared once), prescan.py (argv read
before Typer: the command it names, options given twice), params.py (a command's parameters
from its request type's fields), convert.py (what was typed as the request; the constraint
check), invoke.py (run one command), app.py (the Typer app, built from the registry), doors.py
(`mcp`, `call`, `completion`), output.py and tables.py (printing), progress.py, complete.py.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.exceptions import Abort

from swarmctl import registry
from swarmctl.cli.app import build
from swarmctl.cli.inert import inert
from swarmctl.cli.options import Globals
from swarmctl.cli.output import emit, is_utf8
from swarmctl.cli.prescan import command_in, quiet_given, tools_for
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, Terminated, failure
from swarmctl.envelope import exit_code as exit_status_of


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
        return _usage_error(exc, quiet=quiet_given(args))
    except UsageError as exc:
        return _usage_error(exc, quiet=quiet_given(args))
    except Abort:
        print("Aborted.", file=sys.stderr)
        return 130
    return status if isinstance(status, int) else 0


def _shown(value: str) -> str:
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _not_utf8_where(args: list[str]) -> tuple[dict[str, Any], str] | None:
    """Where an argument (or SWARMCTL_* variable) is not valid UTF-8, and its name for people."""
    for i, arg in enumerate(args):
        if not is_utf8(arg):
            option = args[i - 1] if i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] else None
            where = {"argument": i + 1, "value": _shown(arg), **({"option": option} if option else {})}
            return where, f"argument {i + 1} ('{_shown(arg)}'{', the value of ' + option if option else ''})"
    for key, value in os.environ.items():
        if key.startswith("SWARMCTL_") and not is_utf8(value):
            return {"variable": key, "value": _shown(value)}, f"{key} ('{_shown(value)}')"
    return None


def _not_utf8(args: list[str]) -> int | None:
    """An argument (or SWARMCTL_* variable) that is not valid UTF-8 is bad usage, named: Python
    hands such bytes over as lone surrogates, which no store or JSON reader should receive."""
    found = _not_utf8_where(args)
    if found is None:
        return None
    where, named = found
    error = SwarmError(
        "E_INVALID_ARG",
        f"{named} is not valid UTF-8",
        details=where,
        hint="Give text as UTF-8 (check the terminal's or the script's encoding).",
    )
    print(f"Error: {inert(error.message)}", file=sys.stderr)
    tool = command_in(args)
    emit(failure(tool.name if tool else None, error, Meta()), Globals(), tool)
    return exit_status_of("E_INVALID_ARG")


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _usage_error(exc: UsageError, quiet: bool = False) -> int:
    """Bad usage is an envelope too: E_INVALID_ARG, the usage text in details and on stderr."""
    click_ctx = exc.ctx
    tool = registry.by_command(tuple(click_ctx.command_path.split()[1:])) if click_ctx is not None else None
    usage = click_ctx.get_usage() if click_ctx is not None else None
    where = click_ctx.command_path if click_ctx is not None else "swarmctl"
    # With no command Click "fails" with the whole help as its message: say what is missing.
    message = f"missing command: `{where}` needs one" if isinstance(exc, NoArgsIsHelpError) else exc.format_message()
    error = SwarmError("E_INVALID_ARG", message, details={"usage": usage}, hint=f"Run `{where} --help` for usage.")
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
