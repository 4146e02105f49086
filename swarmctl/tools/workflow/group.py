"""Where a run's commands start, one after another: a process group that exists before the
command does, and the two files its output goes to. (Running a command: process.py.)

The group is led by a holder, a shell that only waits for end-of-file on a pipe whose other end
only swarmctl holds, so that it ends when swarmctl does, however swarmctl ends. The group can
then be saved with a step before the command starts, and the command starts straight into it:
one program start a step, not two. It is a group of swarmctl's session (a process cannot join
a group of another session), in the background of swarmctl's terminal, if it has one.

Each command leaves the group and the files as it found them, or they are not used again: a
command that left processes behind in the group (pids.joined_since) leaves it to them, and the
next command gets a new group, so that a later step is never held, nor killed, with what an
earlier one left running; a file that another process still holds open (a lease is granted
only to a file's sole opener) is left to it, and the next command gets a new file, so that
nothing of one step's output is ever read as another's. A group killed whole (a timeout,
Ctrl-C) takes its holder with it; the next command gets a new one.
"""

from __future__ import annotations

import os
from typing import Any

from swarmctl import pids

# The holder waits for a line (none comes) or end-of-file: `read` ends at either.
_HOLDER = ["/bin/sh", "-c", "read -r line", "swarmctl-holder"]


class CommandGroup:
    """See the module docstring. `close` ends the holder and the files; a command that is
    still running keeps the group."""

    def __init__(self) -> None:
        self._holder: Any = None
        self.leader: pids.ProcessId | None = None
        self.stdout = OutputFile()
        self.stderr = OutputFile()

    def __enter__(self) -> "CommandGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ready(self) -> pids.ProcessId:
        """The group, led by a live holder: a new one when the last is gone or was left behind."""
        if self._holder is None or self._holder.poll() is not None:
            self._open()
        assert self.leader is not None
        return self.leader

    def _open(self) -> None:
        import subprocess

        self._end_holder()
        holder = subprocess.Popen(
            _HOLDER, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
            env={},  # it needs nothing, and holds none of swarmctl's secrets for as long as it lives
            process_group=0,
        )
        self._holder = holder
        self.leader = pids.ProcessId(holder.pid, pids.start_time(holder.pid))

    def ended(self, command_pid: int) -> None:
        """A command of the group ended by itself: if it left processes in the group (or that
        cannot be told), the group is theirs, and the next command gets a new one."""
        if self.leader is not None and pids.joined_since(self.leader.pid, command_pid) is not False:
            self._end_holder()

    def _end_holder(self) -> None:
        holder, self._holder, self.leader = self._holder, None, None
        if holder is not None:
            holder.stdin.close()
            holder.kill()  # the holder alone, not its group: what runs there runs on
            holder.wait()

    def close(self) -> None:
        self._end_holder()
        self.stdout.close()
        self.stderr.close()


# How much more than the part of an output that is kept (`OutputFile.bound`) may take up the disk
# before it is given back: bounded so, a command printing for as long as its timeout lets it
# (`yes`: a gigabyte in seconds) never fills the disk the store is on.
FREE_STEP = 16 << 20
_BLOCK = 1 << 16  # what is given back starts and ends on a multiple of this


class OutputFile:
    """A temporary file a command's stdout or stderr goes to, used again by the next command
    once nobody else holds it open (making a file costs more than a small command's run)."""

    def __init__(self) -> None:
        self.file: Any = None  # what swarmctl reads the output from
        self._shared = False  # the command had swarmctl's own description of it
        self._freed = 0  # how much of the file's start was given back to the disk (None: cannot be)

    def bound(self, keep: int) -> None:
        """While the command writes: give the disk back all but the last `keep` bytes (and at
        most FREE_STEP more) of what it wrote. The command writes at its own offset, which goes
        on; what was given back reads as zeros, and the end, which is all that is read, is kept
        whole (Linux's FALLOC_FL_PUNCH_HOLE, kept size; where the file system cannot, nothing)."""
        if self.file is None or self._freed is None:
            return
        cut = (os.fstat(self.file.fileno()).st_size - keep) // _BLOCK * _BLOCK
        if cut - self._freed >= FREE_STEP:
            self._freed = cut if _punch_hole(self.file.fileno(), cut) else None

    def for_command(self) -> int:
        """A descriptor of the file, emptied, for the command to write to (the caller closes
        it once the command has it): a description of its own, so that `reusable` can tell
        whether anything still holds it."""
        import tempfile

        if self.file is not None:
            if self.file.seek(0, os.SEEK_END):  # the last command wrote something
                self.file.seek(0)
                self.file.truncate()
        else:
            self.file = tempfile.TemporaryFile()
        if self._freed is not None:
            self._freed = 0
        try:
            return os.open(f"/proc/self/fd/{self.file.fileno()}", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:  # no /proc: the command shares swarmctl's description, and the file is not reused
            self._shared = True
            return os.dup(self.file.fileno())

    def done(self) -> None:
        """The command ended and its output was read: keep the file for the next one only if
        this process alone has it open (a write lease is granted only then)."""
        import fcntl

        if self.file is None:
            return
        if self._shared:
            self.close()
            return
        try:
            fcntl.fcntl(self.file.fileno(), fcntl.F_SETLEASE, fcntl.F_WRLCK)
            fcntl.fcntl(self.file.fileno(), fcntl.F_SETLEASE, fcntl.F_UNLCK)
        except OSError:  # held elsewhere (or no leases here): it is theirs
            self.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        self.file, self._shared = None, False


def _punch_hole(fd: int, length: int) -> bool:
    """Give back to the disk the first `length` bytes of the file `fd`, keeping its size: False
    where that cannot be done (not Linux, a file system without holes)."""
    import ctypes  # here: only an output of more than FREE_STEP gets this far

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    keep_size_punch_hole = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
    return fallocate(fd, keep_size_punch_hole, 0, length) == 0
