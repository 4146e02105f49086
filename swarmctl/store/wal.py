"""The -wal file of a store's connection: how a commit reaches the disk with one sync as a rule,
and no one reads it before (WalFile); folding the WAL into the database (fold_wal)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from pathlib import Path


# Set on a WAL file once the directory that names it was synced: the file's name is on disk.
# Its value says which file in which directory, so that a copy carrying it (cp -a) is synced again.
WAL_NAMED = "user.swarmctl.named"


class WalFile:
    """A connection's -wal file, held open for the connection's life: the descriptor its commits
    are synced through, and the gate that keeps a commit from being read before it is on disk.

    A connection that commits with synchronous=NORMAL makes a commit visible at its COMMIT, and
    syncs the WAL after. So the writer holds the gate (flock, exclusive) from before its COMMIT
    until the WAL is synced, and a reader holds it shared while it begins its snapshot: no
    swarmctl reader sees a change that a power cut could still take away, as with FULL. The
    sync goes through a descriptor opened before the writes it syncs: a write error the disk
    reports reaches it even if another process's sync saw the error first, which one opened
    afterwards would not be told. SQLite holds no lock on the -wal file (its locks are on the
    database and the -shm file), so this descriptor and its flock leave SQLite's alone.
    """

    def __init__(self, db: str) -> None:
        self.db = db
        self.fd: int | None = None
        self.named: bytes | None = None  # the mark last found or set (see synced)
        self.no_gate = False  # the filesystem takes no flock on it

    def _descriptor(self) -> int | None:
        """The -wal file's descriptor; opened again if the file was replaced (a process of an
        older swarmctl, the last to close the store, removed it and another made it anew)."""
        try:
            now = os.stat(f"{self.db}-wal")
        except OSError:
            now = None
        if self.fd is not None and (now is None or os.fstat(self.fd).st_ino != now.st_ino):
            self.close()
        if self.fd is None and now is not None:
            try:
                self.fd = os.open(f"{self.db}-wal", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None  # none may be opened: the caller syncs every filesystem instead
        return self.fd

    @contextmanager
    def gate(self, exclusive: bool, timeout_s: float) -> Iterator[None]:
        """Hold the gate (see the class). Waited for up to `timeout_s` (the store's lock
        timeout), never for good: a writer stopped in its sync (a hung disk, a Ctrl-Z, a
        debugger) makes the others GateBusy, as a writer holding the store's lock does."""
        fd = self._descriptor() if not self.no_gate else None
        if fd is not None:
            try:
                _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout_s)
            except OSError:  # no flock here (a network filesystem may refuse one): no gate, as before
                self.no_gate, fd = True, None
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def synced(self) -> int:
        """After a commit: put it on the disk, with one sync as a rule; the -wal file's size.

        SQLite with synchronous=FULL syncs the WAL at each commit, and also the store's directory
        at each connection's first commit, since it cannot know that the -wal file's name is on
        disk already: one process that commits one change syncs twice. Here the WAL is synced
        after the COMMIT (inside the gate), and the directory only the first time for that -wal
        file: a synced directory is marked on the file (WAL_NAMED, an extended attribute, which a
        file made anew never has; its value names the directory and the file, so a copy that
        carries it, cp -a, is synced again). Where the filesystem keeps no such marks, the
        directory is synced once per connection, as SQLite does.

        The -wal file cannot be opened (no descriptor left): every filesystem is synced instead.
        A failed sync raises OSError: the change is committed, and not known to be on disk.
        """
        fd = self._descriptor()
        if fd is None:
            os.sync()
            return 0
        getattr(os, "fdatasync", os.fsync)(fd)  # macOS has no fdatasync
        where = os.path.dirname(self.db)
        wal, directory = os.fstat(fd), os.stat(where)
        mark = f"{directory.st_dev}:{directory.st_ino}:{wal.st_ino}".encode()
        if mark != self.named and not _marked(fd, mark):
            sync_directory(where)
            try:
                os.setxattr(fd, WAL_NAMED, mark)
            except (OSError, AttributeError):
                pass  # no marks on this filesystem (or system): the next process syncs the directory again
        self.named = mark
        return wal.st_size

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# The -wal file's size past which the writer that grew it folds it into the database and empties
# it (fold_wal): SQLite's own checkpoint size, 1,000 pages of 4 KiB.
WAL_LIMIT = 1000 * 4096


def fold_wal(conn: sqlite3.Connection, lock_timeout_s: float) -> None:
    """Checkpoint the WAL into the database and truncate it, if no one is reading or writing.

    SQLite's own checkpoint (every 1,000 pages, at a commit) does not keep the WAL small here:
    a process that is the store's only user on opening it rebuilds the WAL's index from the
    -wal file, which forgets what was checkpointed, so the WAL restarts only while some process
    keeps the store open. Where every write is a process of its own, the WAL grew by each write
    for good, and each write past 1,000 pages checkpointed all of it again. Busy (a reader or a
    writer at work): left to the next writer, not waited for.
    """
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        pass  # the change is committed and on disk; a later writer folds the WAL
    finally:
        conn.execute(f"PRAGMA busy_timeout = {round(lock_timeout_s * 1000)}")


class GateBusy(Exception):
    """The -wal file's gate stayed held past the lock timeout (see WalFile.gate)."""


def _flock(fd: int, kind: int, timeout_s: float) -> None:
    """flock, without blocking for more than `timeout_s`: at once where it is free (as a rule),
    else tried again after pauses that grow from 1 ms to 50 ms. A signal ends the wait as the
    signal's handler says."""
    import time

    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    deadline, pause = time.monotonic() + timeout_s, 0.001
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise GateBusy()
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass


def _marked(fd: int, mark: bytes) -> bool:
    try:
        return os.getxattr(fd, WAL_NAMED) == mark
    except (OSError, AttributeError):
        return False  # not marked, or no marks on this filesystem (Linux's alone keep them)


def sync_directory(path: str | Path) -> None:
    """Sync a directory, so that the names in it are on the disk. A filesystem that cannot
    sync a directory (EINVAL) is let be, as SQLite lets it; a failed sync raises OSError."""
    import errno

    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        os.sync()
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)
