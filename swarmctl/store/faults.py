"""Fault injection for tests: points where a test can stop a process (a writer in the one
transaction helper, to kill it; a reader of a workflow, to let others act), off unless
SWARMCTL_FAULT names one."""

from __future__ import annotations

import os


_ACTIONS = ("pause-before-commit", "pause-after-commit", "pause-before-pids", "pause-after-call", "fail-sync")
_paused: set[str] = set()
_stopped_s = [0.0]  # the seconds this process has waited at fault points


def stopped_s() -> float:
    """The seconds this process has waited at fault points so far (0.0 unless a test paused it):
    a clock that measures how long work took (`call --lines`'s group) leaves them out, so a
    test that holds a process at a point does not change what it tests, however long it holds."""
    return _stopped_s[0]


def _fault(action: str) -> str | None:
    """The PATH of SWARMCTL_FAULT=ACTION:PATH when it names `action` (None: off, or another)."""
    spec = os.environ.get("SWARMCTL_FAULT")
    if not spec:
        return None
    given, _, path = spec.partition(":")
    if given not in _ACTIONS or not path:
        raise RuntimeError(f"SWARMCTL_FAULT must be one of {', '.join(_ACTIONS)}, then :PATH, not {spec!r}")
    return path if given == action else None


def _wait_at(path: str) -> None:
    """Write PATH (this process's pid) and wait until a test removes it, at most an hour."""
    import time
    from pathlib import Path

    Path(path).write_text(str(os.getpid()))
    # Short sleeps, not one long one: a signal that comes after Python last looked for one but
    # before the sleep began (a test sends it the moment PATH appears) does not end the sleep,
    # and is handled only when the sleep ends. One sleep of an hour hung such a test, seen on
    # a busy machine; here it is handled within 50 ms.
    started = time.monotonic()
    try:
        while Path(path).exists() and time.monotonic() < started + 3600:
            time.sleep(0.05)
    finally:
        _stopped_s[0] += time.monotonic() - started


def pause_before_pids() -> None:
    """SWARMCTL_FAULT=pause-before-pids:PATH: the first time this process has read a workflow's
    rows and is about to ask whether the processes they name live, write PATH (this process's
    pid) and wait until a test removes it (at most an hour), so that another process can end
    in between, as it may on a busy machine."""
    path = _fault("pause-before-pids")
    if path is None or path in _paused:
        return
    _paused.add(path)
    _wait_at(path)


def pause_before_commit() -> None:
    """Fault injection for tests, off unless SWARMCTL_FAULT=pause-before-commit:PATH is set:
    with everything of the transaction written but not committed, write PATH (this process's
    pid) and sleep until a test removes PATH (at most an hour), so that a test can kill the
    process at exactly this point, or act while it waits there and then let it commit."""
    path = _fault("pause-before-commit")
    if path is not None:
        _wait_at(path)


def pause_after_commit() -> None:
    """SWARMCTL_FAULT=pause-after-commit:PATH: as pause_before_commit, just after the COMMIT, so
    that a test can signal a process whose change is written but whose envelope is not."""
    path = _fault("pause-after-commit")
    if path is not None:
        _wait_at(path)


def pause_after_call() -> None:
    """SWARMCTL_FAULT=pause-after-call:PATH: as pause_after_commit, once a call of `call --lines`
    has returned its envelope (its write made, in its group), before the batch has it."""
    path = _fault("pause-after-call")
    if path is not None:
        _wait_at(path)


def fail_sync() -> None:
    """SWARMCTL_FAULT=fail-sync:PATH: the disk sync after a commit fails as a dying disk's does
    (EIO), once: PATH is written first (so that a test knows the commit came this far), and
    while it is there the syncs that follow work."""
    path = _fault("fail-sync")
    if path is not None and not os.path.exists(path):
        import errno
        from pathlib import Path

        Path(path).write_text(str(os.getpid()))
        raise OSError(errno.EIO, os.strerror(errno.EIO))
