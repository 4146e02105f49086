"""The command line: a thin door onto the registry's tools.

Parsing is Typer's (cli/app.py), but for the commands cli/fast.py parses without it, always
to the very request Typer would build (tests/test_fast_parse.py), leaving every error, --help
and completion to Typer. Every outcome, usage errors included, is one envelope on stdout and
the exit code of its error. Only --help, --version and shell completion print anything else.

The package, by job: options.py (the global options, declared once), prescan.py (argv read
before Typer: the command it names, options given twice), params.py (a command's parameters
from its request type's fields), convert.py (what was typed as the request; the constraint
check), invoke.py (run one command), app.py (the Typer app, built from the registry, and run),
fast.py (the hot commands parsed without Typer), doors.py
(`mcp`, `call`, `completion`), output.py and tables.py (printing), progress.py, complete.py.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Any, NoReturn

from swarmctl.cli import fast
from swarmctl.cli.inert import inert
from swarmctl.cli.output import OutputFailed, emit, errors_on_stderr, is_utf8
from swarmctl.cli.prescan import command_in, printing_as
from swarmctl.envelope import Meta, SwarmError, failure, raise_terminated, terminating_signals
from swarmctl.envelope import exit_code as exit_status_of


def main(argv: list[str] | None = None) -> NoReturn:
    for signum in terminating_signals():  # as Ctrl-C (a SIGHUP that `nohup` ignores stays ignored)
        if signum == signal.SIGTERM or signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, raise_terminated)
    if sys.stdin is None or sys.stdout is None or sys.stderr is None:
        _open_closed_std_streams()
    sys.stderr = _BestEffort(sys.stderr)
    status = run(sys.argv[1:] if argv is None else argv)
    # Everything is written and the store closed: leave without tearing the interpreter down,
    # which costs a short command a sixth of its time (measured in bench/core.py). A signal now
    # has nothing left to stop: blocked, it neither cuts the flush nor prints a traceback.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *terminating_signals()})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    except OSError as exc:  # what print() left buffered (--help, --version) met a full disk
        os.write(2, f"{OutputFailed(exc).line(ran=False)}\n".encode("utf-8", "backslashreplace"))
        status = status or OUTPUT_FAILED
    os._exit(status)


class _BestEffort:
    """stderr, for people: what cannot be written there (a full disk, a closed pipe) is lost,
    and never costs the command its answer on stdout, nor its exit code (a warning printed
    before the envelope failed a command whose write was made, as if stdout had failed)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _open_closed_std_streams() -> None:
    """Started with stdin, stdout or stderr closed (`swarmctl ... >&-`; Python then makes it
    None): it reads and writes /dev/null, so that the command runs and exits as it would
    have, and no file opened later takes its descriptor (output meant for the terminal would
    go into it)."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(devnull := os.open(os.devnull, os.O_RDWR), fd)
                if devnull != fd:
                    os.close(devnull)
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))


def run(args: list[str]) -> int:
    """Run the CLI on `args`; return the exit status."""
    if (bad := _not_utf8(args)) is not None:
        return bad
    try:
        if fast.version_asked(args, os.environ):
            return fast.print_version()
        try:
            parsed = fast.parse(args, os.environ)
            if parsed is None:
                # Typer (and Click) only for what the fast parse leaves to it: their import is
                # most of a short command's start (bench/core.py).
                from swarmctl.cli import app
        except KeyboardInterrupt as exc:  # while the command line was read: nothing ran
            return _interrupted_early(args, exc)
        return fast.run(parsed) if parsed is not None else app.run(args)
    except OutputFailed as exc:
        print(exc.line(), file=sys.stderr)
        return OUTPUT_FAILED
    except OSError as exc:  # print() of --help, --version, a schema: a closed pipe ends quietly, exit 0
        if exc.filename is not None:  # a file's error, not stdout's: a defect, shown as one
            raise
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is buffered goes nowhere
        except (OSError, ValueError):
            pass
        if exc.errno == errno.EPIPE:  # `--help | head -1`: ends quietly, as a command's envelope does
            return 0
        print(OutputFailed(exc).line(ran=False), file=sys.stderr)
        return OUTPUT_FAILED


# stdout could not be written (a full disk): as coreutils and Click exit on a write error.
OUTPUT_FAILED = 1


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
    printing = printing_as(args, os.environ)
    if not printing.quiet and not errors_on_stderr(printing):
        print(f"Error: {inert(error.message)}", file=sys.stderr)
    tool = command_in(args)
    emit(failure(tool.name if tool else None, error, Meta()), printing, tool)
    return exit_status_of("E_INVALID_ARG")


def _interrupted_early(args: list[str], exc: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM before any tool ran: E_INTERRUPTED, as once it runs (it was a
    traceback, and SIGTERM's exit status 1, which says a command ran)."""
    from swarmctl.envelope import interrupted

    tool = command_in(args)
    envelope = failure(tool.name if tool else None, interrupted(exc), Meta())
    emit(envelope, printing_as(args, os.environ), tool)
    return exit_status_of("E_INTERRUPTED")

