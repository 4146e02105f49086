"""Running a workflow's commands. (Whether a process named in the store still lives is
swarmctl/pids.py's question; where a run's commands start, group.py's.)

Commands run with an argv (never parsed by a shell), with the workflow's directory as working
directory, the environment of swarmctl plus the step's `env`, and stdin from /dev/null. Their
output goes to temporary files, so a chatty command cannot fill memory or block on a pipe;
only the tails are kept. On timeout the whole process group gets SIGTERM, then SIGKILL.

No command runs whose process group the store does not know. A command starts in a process
group that exists before it does, led by a holder process (group.py's `CommandGroup`):
`run_command` first hands the group to `on_start` (the executor saves it with the step), then
starts the command straight into it. If swarmctl dies before that, no command starts: the
holder ends with swarmctl, and the step saved `running` reads `interrupted` (its effect is
unknown, though nothing ran). If swarmctl dies while the command runs, the group lives on with
the command (and what it started), and the step reads `running` until they end.

While a command runs, SIGTERM to swarmctl raises KeyboardInterrupt, as Ctrl-C does: the group
is killed, the caller saves the step, and the interrupt goes on to the door.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from swarmctl import pids, secrets
from swarmctl.envelope import raise_terminated, terminating_signals
from swarmctl.tools.workflow.group import CommandGroup

TAIL_BYTES = 4096
# How much of the end of an output is scrubbed of secrets before its tail is cut from it: a
# secret is hidden whole, never cut in two first (which would leave a part no scrub finds).
SCRUB_BYTES = 1 << 20
KILL_GRACE_S = 1.0
# The grace a swarmctl run as a step's command (a workflow that runs another) takes: half its
# parent's, given in its environment, so that it has killed its own command's group (another
# group, which its parent's kill does not reach) before its parent's grace ends and it is killed.
GRACE_VARIABLE = "SWARMCTL_KILL_GRACE_S"
# How long a killed command's processes may take to end before swarmctl stops waiting for them
# (a process stuck in the kernel ignores even SIGKILL until it returns).
KILLED_GONE_S = 10.0
# The longest a wait for a command sleeps before it looks again (see _wait), and how often its
# output is held to what is kept of it (group.OutputFile.bound).
WAKE_S = 1.0
BOUND_S = 0.1


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

    if not os.path.isdir(base_dir):  # where it runs, gone since the workflow was made
        return f"its working directory {base_dir} does not exist"
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
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    group: CommandGroup | None = None,
    on_start: Callable[[pids.ProcessId], None] | None = None,
    hidden: Sequence[str] = (),
    tick: tuple[Callable[[], None], float] | None = None,
    inherit_env: bool = False,
) -> CommandOutcome:
    """Run `argv` to completion or timeout, in `group` (a group of its own when None).
    `inherit_env`: `env` is this process's own environment, which the command inherits (as it
    is: passing a copy costs more). `on_start` gets the command's process group (its leader)
    before the command starts; if it raises, the command never starts. `tick`, a function and a
    period in seconds, is called every period while the command runs. Any exception while the
    command runs (KeyboardInterrupt, see `terminate_as_interrupt`) kills the group and
    propagates. The output tails keep nothing of `hidden` (values to scrub, in any of their
    encodings) nor of a value assigned to a secret-named key (`secrets.redact_text`)."""
    if group is None:
        with CommandGroup() as own:
            return run_command(argv, cwd=cwd, env=env, timeout_s=timeout_s, group=own, on_start=on_start,
                               hidden=hidden, tick=tick, inherit_env=inherit_env)
    import subprocess

    started = time.monotonic()
    proc = None
    child_grace = f"{kill_grace_s() / 2:.3f}"
    if inherit_env:
        os.environ[GRACE_VARIABLE] = child_grace  # what it inherits, as it is
    else:
        env = {**env, GRACE_VARIABLE: child_grace}
    try:
        try:
            proc = _start(argv, cwd, None if inherit_env else env, group, on_start)
        except OSError as exc:  # only now is it worth asking why (a PATH search costs)
            problem = program_problem(argv[0], cwd, env) or exc.strerror or str(exc)
            return CommandOutcome(None, None, False, _ms(started), "", "", f"cannot start {argv[0]}: {problem}")
        _wait(proc, timeout_s, tick, group)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:
        # An interrupt, even one that came while the command started, before swarmctl had its
        # pid (the command may already run in the group): the group goes with it. (Another
        # interrupt while it is killed is this one again.)
        if group.leader is not None:
            _kill_group(proc, group.leader.pid)
        raise
    if timed_out:
        assert group.leader is not None
        if (came := _kill_group(proc, group.leader.pid)) is not None:
            raise came  # the step is saved interrupted, the group gone
    else:
        group.ended(proc.pid)
    outcome = _finished(proc, timed_out, started, group.stdout.file, group.stderr.file, hidden)
    group.stdout.done()
    group.stderr.done()
    return outcome


def _start(
    argv: list[str], cwd: Path, env: Mapping[str, str] | None, group: CommandGroup,
    on_start: Callable[[pids.ProcessId], None] | None,
) -> Any:
    """Hand the group to `on_start`, then start the command in it. A group whose holder was
    reaped before the command could join it is gone: the command goes into a new one, handed
    to `on_start` first."""
    import subprocess

    for attempt in (1, 2):
        leader = group.ready()
        if on_start is not None:
            on_start(leader)
        out, err = group.stdout.for_command(), group.stderr.for_command()
        try:
            return subprocess.Popen(
                [resolve_program(argv[0], cwd), *argv[1:]],
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                process_group=leader.pid,
            )
        except PermissionError:  # EPERM from joining a group that is gone (EACCES: not executable)
            if attempt == 2 or group.ready() == leader:
                raise
        finally:
            os.close(out)
            os.close(err)
    raise AssertionError("unreachable")


def _finished(proc: Any, timed_out: bool, started: float, out: Any, err: Any, hidden: Sequence[str]) -> CommandOutcome:
    import signal

    code = proc.returncode
    return CommandOutcome(
        exit_code=code if code is not None and code >= 0 and not timed_out else None,
        signal=signal.Signals(-code).name if code is not None and code < 0 else None,
        timed_out=timed_out,
        duration_ms=_ms(started),
        stdout_tail=_tail(out, hidden),
        stderr_tail=_tail(err, hidden),
        error=None,
    )


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does (in the main thread,
    unless the signal is ignored). Without this, either would end swarmctl at once and leave
    the command running with nobody to kill it or save its step (a closed terminal's SIGHUP
    does not reach the command, in the terminal's background)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in terminating_signals()}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait(
    proc: Any, timeout_s: float, tick: tuple[Callable[[], None], float] | None = None, group: CommandGroup | None = None,
) -> None:
    """Wait for the command to end, or raise TimeoutExpired, calling `tick` every period, and
    holding the output files of `group` to what is read of them every BOUND_S. On a pidfd
    (Linux 5.3+) the wait ends the moment the process does; Popen.wait(timeout) polls,
    sleeping up to 50 ms a time."""
    import select
    import subprocess

    deadline = time.monotonic() + timeout_s
    period = tick[1] if tick is not None else timeout_s
    next_tick = time.monotonic() + period
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here: poll
        pidfd = None
    try:
        poller = select.poll()
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            if tick is not None and now >= next_tick:
                tick[0]()
                next_tick = time.monotonic() + period
            if group is not None:
                group.stdout.bound(SCRUB_BYTES)
                group.stderr.bound(SCRUB_BYTES)
            # At most WAKE_S at a time: a Ctrl-C that came just before the poll began does not
            # end it (Python handles a signal between statements, and poll's EINTR is past).
            until = min(deadline, next_tick, now + (WAKE_S if group is None else BOUND_S)) - time.monotonic()
            if pidfd is not None and poller.poll(max(0.0, until) * 1000):
                break
            if pidfd is None and _exited(proc, until):
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    proc.wait()  # it has exited: reap it


def _exited(proc: Any, within_s: float) -> bool:
    import subprocess

    try:
        proc.wait(timeout=max(0.0, within_s))
        return True
    except subprocess.TimeoutExpired:
        return False


def _kill_group(proc: Any | None, pgid: int) -> KeyboardInterrupt | None:
    """SIGTERM to the command's group (its holder too); SIGKILL to what is left of it once the
    command ends, or after its grace (`kill_grace_s`); then wait until every process of the group has ended,
    so that a caller (and whoever reads the step next) never sees a killed command still running.
    `proc` None: the command may have started without swarmctl getting its pid (an interrupt
    came while it started); the group's end is waited on instead, and what of it was
    swarmctl's own child is reaped (the holder's Popen then finds its child gone, and says 0).
    A Ctrl-C or SIGTERM that comes meanwhile (a second one, as people press Ctrl-C twice) ends
    the grace at once, never the killing: the group is killed and waited for all the same, and
    that interrupt is returned for the caller to raise (None: none came)."""
    import signal
    import subprocess

    came: KeyboardInterrupt | None = None
    try:
        _signal_group(pgid, signal.SIGTERM)
        if proc is None:
            pids.wait_group_gone(pgid, kill_grace_s())
        else:
            try:
                proc.wait(timeout=kill_grace_s())
            except subprocess.TimeoutExpired:
                pass
    except KeyboardInterrupt as exc:  # no more grace
        came = exc
    while True:
        try:
            _signal_group(pgid, signal.SIGKILL)  # what is left of the group: the command, if it did not end
            if proc is not None:
                proc.wait()
            pids.wait_group_gone(pgid, KILLED_GONE_S)
            if proc is None:
                _reap(pgid)
            return came
        except KeyboardInterrupt as exc:  # killed already: it is waited for all the same
            came = came or exc


@lru_cache(maxsize=1)
def kill_grace_s() -> float:
    """KILL_GRACE_S, or less where a parent swarmctl said so (GRACE_VARIABLE; read once: this
    process then sets it for its own commands)."""
    try:
        given = float(os.environ.get(GRACE_VARIABLE, ""))
    except ValueError:
        return KILL_GRACE_S
    return min(KILL_GRACE_S, max(0.05, given)) if given > 0 else KILL_GRACE_S


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _reap(pgid: int) -> None:
    """Reap this process's ended children of group `pgid`."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _tail(f: Any, hidden: Sequence[str]) -> str:
    """The last TAIL_BYTES of an output, scrubbed before it is cut; at each cut, what is left
    of a hidden value is hidden too."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return ""
    f.seek(max(0, size - SCRUB_BYTES))
    text = f.read().decode("utf-8", errors="replace")
    if size > SCRUB_BYTES:
        text = secrets.scrub_cut(text, hidden, start=True)
    text = secrets.redact_text(secrets.scrub_values(text, hidden)) or ""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= TAIL_BYTES and size <= SCRUB_BYTES:
        return text
    kept = data[-TAIL_BYTES:].decode("utf-8", errors="ignore")  # a character cut in two is dropped
    return "…" + secrets.scrub_cut(kept, hidden, start=True)


def _ms(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))  # never negative: a clock may be faked
