"""Running a workflow's commands. (Whether a process named in the store still lives is
swarmctl/pids.py's question.)

Commands run with an argv (never a shell), in their own process group, with the workflow's
directory as working directory and the environment of swarmctl plus the step's `env`. Their
output goes to temporary files, so a chatty command cannot fill memory or block on a pipe;
only the tails are kept. On timeout the whole group gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Mapping, NamedTuple

TAIL_BYTES = 4096
KILL_GRACE_S = 1.0


class CommandOutcome(NamedTuple):
    exit_code: int | None  # None: it never started, or was killed
    signal: str | None
    timed_out: bool
    duration_ms: int
    stdout_tail: str
    stderr_tail: str
    error: str | None  # why it could not start

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    def summary(self) -> str:
        if self.error:
            return self.error
        if self.timed_out:
            return "timed out (the process group was killed)"
        if self.signal:
            return f"killed by {self.signal}"
        return f"exited with status {self.exit_code}"


def resolve_program(argv0: str, base_dir: Path) -> str:
    """A program path relative to the workflow file's directory; a bare name is found on PATH."""
    if "/" in argv0 and not os.path.isabs(argv0):
        return str((base_dir / argv0).resolve())
    return argv0


def program_problem(argv0: str, base_dir: Path, environ: Mapping[str, str]) -> str | None:
    """Why `argv0` would not start, as far as can be told without starting it."""
    import shutil

    program = resolve_program(argv0, base_dir)
    if "/" in program:
        if not os.path.isfile(program):
            return f"no such program: {program}"
        if not os.access(program, os.X_OK):
            return f"not executable: {program}"
        return None
    if shutil.which(program, path=environ.get("PATH", os.defpath)) is None:
        return f"{program} is not on PATH"
    return None


def run_command(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float
) -> CommandOutcome:
    """Run `argv` to completion or timeout. KeyboardInterrupt kills the group and propagates."""
    import signal
    import subprocess
    import tempfile

    started = time.monotonic()
    argv = [resolve_program(argv[0], cwd), *argv[1:]]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group, which a timeout kills whole
            )
        except OSError as exc:
            return CommandOutcome(None, None, False, _ms(started), "", "", f"cannot start {argv[0]}: {exc.strerror or exc}")
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        code = proc.returncode
        return CommandOutcome(
            exit_code=code if code is not None and code >= 0 and not timed_out else None,
            signal=signal.Signals(-code).name if code is not None and code < 0 else None,
            timed_out=timed_out,
            duration_ms=_ms(started),
            stdout_tail=_tail(out),
            stderr_tail=_tail(err),
            error=None,
        )


def _kill_group(proc: Any) -> None:
    import signal
    import subprocess

    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                # The leader is gone; make sure nothing else of its group lingers.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(f: Any) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - TAIL_BYTES))
    data = f.read()
    text = data.decode("utf-8", errors="replace")
    return ("…" + text) if size > TAIL_BYTES else text


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
