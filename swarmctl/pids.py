"""Processes named in the store: whether the one that saved a record, or the process group of a
command it started, still lives. The one place that answers "is it alive?".

A process is named by its pid and its start time (field 22 of /proc/PID/stat, in clock ticks
since boot): a pid the kernel has since given to another process has another start time, so
it is not mistaken for the one that saved the record. A store lives on one machine (SQLite in
WAL mode needs shared memory), so a pid in the store always means a process on this machine.
A zombie has finished: it acts no more, so it counts as gone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class ProcessId(NamedTuple):
    pid: int
    start: str | None  # None where /proc is not there to ask


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat from field 3 (state) on, or None if there is no such process."""
    try:  # os.open and one read: a step reads its command's start time on its way to run it
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            stat = os.read(fd, 4096).decode("utf-8", "replace")
        finally:
            os.close(fd)
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return stat[stat.rindex(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """The start time of `pid` (clock ticks since boot), or None if it does not exist or is a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 overall


def me() -> ProcessId:
    return ProcessId(os.getpid(), start_time(os.getpid()))


def _has_proc() -> bool:
    return Path("/proc/self/stat").exists()


def alive(pid: int | None, start: str | None = None) -> bool:
    """Whether the process that recorded (pid, start) is still running (any process with that
    pid, when `start` is None)."""
    if pid is None:
        return False
    if _has_proc():
        now = start_time(pid)
        return now is not None and (start is None or now == start)
    try:  # no /proc: all we can ask is whether some process has the pid
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int | None, start: str | None) -> bool:
    """Whether any process of the group led by (pgid, start) still runs.

    The leader may be gone while others of its group live on (a script's children). Linux does
    not give a pid to a new process while any process still belongs to a group of that number,
    so a leader's pid held by a process with another start time means the old group is gone.
    """
    if pgid is None:
        return False
    if not _has_proc():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    leader = _stat(pgid)
    if leader is not None and leader[0] not in ("Z", "X"):
        return start is None or leader[19] == start
    if leader is not None and start is not None and leader[19] != start:
        return False  # a zombie of another process that reused the pid
    return bool(_members(pgid, first_only=True))


def _members(pgid: int, first_only: bool = False) -> list[int]:
    """The live (not zombie) processes of group `pgid`, from /proc."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
                found.append(int(entry.name))
                if first_only:
                    break
    return found


# How many pids `joined_since` asks about one by one before it reads the whole of /proc instead.
_PIDS_ASKED = 2048


def _last_pid() -> int | None:
    """The pid given out last in this pid namespace, or None where the kernel does not say."""
    try:
        fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY)
        try:
            return int(os.read(fd, 32))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None


def joined_since(pgid: int, since: int) -> bool | None:
    """Whether a live process other than its leader belongs to group `pgid` among those made
    after pid `since` was given out; None when that cannot be told (no pid counter to read, or
    pids wrapped around). For a group that held only its leader when `since` was made, that is
    whether anything but the leader is in it now, asked cheaply: pids are given out in rising
    order, so only the few made since are looked at. The newest pid is read again after each
    pass, until none was given out during one, so that a process made meanwhile by one the
    pass had already looked at is not missed."""
    low, high = since, _last_pid()
    if high == since:  # no process made since: none but those there before, which it is not asked about
        return False
    while high is not None and high >= low:
        if high - low > _PIDS_ASKED:
            return any(pid != pgid for pid in _members(pgid))
        for pid in range(low + 1, high + 1):
            fields = _stat(pid)
            if fields is not None and fields[0] not in ("Z", "X") and fields[2] == str(pgid) and pid != pgid:
                return True
        low, high = high, _last_pid()
        if high == low:
            return False
    return None


def wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """After SIGKILL to group `pgid`: wait until each of its processes has ended, on a pidfd
    each (the wait ends the moment the last one does), at most `timeout_s`. Whether it is gone.
    A killed process takes a moment to end; until then the group still runs."""
    import select
    import time

    deadline = time.monotonic() + timeout_s
    while (members := _members(pgid) if _has_proc() else []):
        for pid in members:
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # ended and reaped since the scan (or no pidfd here: scan again)
                continue
            try:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                    return False
            finally:
                os.close(fd)
        if time.monotonic() >= deadline:
            return False
    return not group_alive(pgid, None)
