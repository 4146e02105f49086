"""Where a store is on disk, what this process may do there, and connecting to its database.

Paths here are strings (os.path), not pathlib's Paths, and a function given a Path takes it as
well: a read such as `op log -n 20` never imports pathlib, whose import (with the urllib.parse
and ipaddress it brings) cost a tenth of such a command's start (bench/core.py, start-up)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from pathlib import Path

from swarmctl.envelope import SwarmError
from swarmctl.store.schema import DB_FILE

DEFAULT_LOCK_TIMEOUT_S = 10.0


def lock_timeout() -> float:
    from swarmctl import limits

    return limits.seconds("SWARMCTL_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT_S, 0, 3600)


def resolve(path: str | Path) -> str:
    """`path` made absolute with its symbolic links followed; a loop is an OSError (ELOOP), as
    the system would say (realpath returns the path where the loop began, so the system is
    asked)."""
    import errno

    resolved = os.path.realpath(path)
    try:
        os.stat(resolved)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "Too many levels of symbolic links", os.fspath(path)) from exc
    return resolved


def is_store(path: str | Path) -> bool:
    return os.path.isfile(os.path.join(path, DB_FILE))


def discover(start: str | Path) -> str | None:
    """The nearest enclosing directory of `start` that is a store, as git finds `.git`."""
    candidate = resolve(start)
    while True:
        if is_store(candidate):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return None
        candidate = parent


def sqlite_uri(db: str | Path) -> str:
    """`db` (absolute) as an SQLite `file:` URI: its bytes as the system names them, with `%`,
    `?`, `#`, spaces, control characters and every byte past ASCII written as %HH, which SQLite
    decodes (what pathlib's as_uri did, without importing urllib.parse for it)."""
    return "file://" + "".join(
        chr(b) if 0x20 < b < 0x7F and b not in b"%?#" else f"%{b:02X}" for b in os.fsencode(db)
    )


def connect(db: str | Path, *, readonly: bool, immutable: bool = False) -> sqlite3.Connection:
    mode = "ro" if readonly else "rw"
    # immutable=1: SQLite reads the file without locks or its -shm file. Only for a store on a
    # read-only filesystem, where no one can be writing it (see Store.open).
    conn = sqlite3.connect(
        f"{sqlite_uri(db)}?mode={mode}" + ("&immutable=1" if immutable else ""),
        uri=True,
        timeout=lock_timeout(),
        isolation_level=None,  # we issue BEGIN/COMMIT ourselves
        check_same_thread=False,
    )
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        # Check each b-tree page's cells as SQLite first reads it: a damaged page the command
        # touches is then SQLITE_CORRUPT (E_STORE_CORRUPT), not data. Costs little; catches more.
        conn.execute("PRAGMA cell_size_check = ON")
        if not readonly:
            # A commit writes the WAL without syncing it: SqliteStore syncs it itself right after,
            # before anyone reads it (WalFile below): as durable as FULL, with one sync.
            conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        # The first statement already reads the file (and makes its -shm): a damaged file, or a
        # full disk, fails here. Closed now, not when the traceback that holds it is collected:
        # a server that lives on would otherwise keep its descriptors until then.
        conn.close()
        raise
    return conn


def keep_wal_on_close(conn: sqlite3.Connection, db: str | Path) -> bool:
    """Let `conn` close without folding the WAL into the database (SQLite's
    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE). Whether that was done.

    The last connection to close a WAL database otherwise checkpoints it and deletes the -wal
    and -shm files, which the next process recreates: a command that commits one change would
    sync the disk five times instead of once. Left alone, the WAL is checkpointed by SQLite's
    automatic checkpoint (every 1,000 pages) and the -wal file stays beside the database, which
    is why a backup copies the store's directory, never the database file alone.

    Python 3.12 has `Connection.setconfig`; 3.11 does not, so there the option is set through
    ctypes on the connection's `sqlite3 *` handle, checked first to be the handle of `db`.
    """
    option = getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", 1006)
    if hasattr(conn, "setconfig"):  # it returns None; getconfig says whether it took
        conn.setconfig(option, True)
        return bool(conn.getconfig(option))
    try:
        import ctypes

        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)  # its symbols, and the libsqlite3 it uses
        # The handle is the first field after the object header (CPython's pysqlite_Connection).
        handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
        lib.sqlite3_db_filename.restype = ctypes.c_char_p
        lib.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        if not handle or lib.sqlite3_db_filename(handle, b"main") != os.fsencode(db):
            return False
        lib.sqlite3_db_config.restype = ctypes.c_int
        done = ctypes.c_int(0)
        status = lib.sqlite3_db_config(
            ctypes.c_void_p(handle), ctypes.c_int(option), ctypes.c_int(1), ctypes.byref(done)
        )
        return status == 0 and done.value == 1
    except (OSError, AttributeError, ValueError):
        return False  # checkpoint on close, as SQLite does by default: slower, never wrong


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
        fd = self._descriptor()
        if fd is not None:
            _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout_s)
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


def can_write_store(path: str | Path, db: str | Path) -> bool:
    """Can this process write the store? SQLite needs the directory too, for its -wal and -shm
    files."""
    return can_write(db) and can_write(path)


def can_write(path: str | Path) -> bool:
    # access(2) answers for this user, and says no on a read-only filesystem: what stops root,
    # whom file modes do not.
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def unwritable_why(path: str | Path) -> str:
    """Why this process cannot write under `path`, for a message: "the store {it}"."""
    return "is on a read-only filesystem" if on_readonly_filesystem(path) else "is not writable by this user"


def on_readonly_filesystem(path: str | Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def wal_is_empty(db: str | Path) -> bool:
    try:
        return os.stat(f"{db}-wal").st_size == 0
    except FileNotFoundError:
        return True


def remove_database(db: str | Path) -> None:
    """Remove an SQLite database file and its -wal and -shm, where they are."""
    for name in (f"{db}", f"{db}-wal", f"{db}-shm"):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def remove_if_empty(path: str | Path, tmp: str | Path) -> None:
    """Remove the directory `path`, made by a failed init, if nothing but its own files is in it."""
    remove_database(tmp)
    try:
        os.rmdir(path)
    except OSError:
        pass


def remove_abandoned_inits(path: str | Path) -> None:
    """Remove what an `init` killed half-way left behind (its process is gone)."""
    from swarmctl import names, pids

    prefix = f"{DB_FILE}.init-"
    for name in os.listdir(path):
        pid = name.removeprefix(prefix).split("-")[0] if name.startswith(prefix) else ""
        if names.digits(pid) and not pids.alive(int(pid)):
            try:
                os.unlink(os.path.join(path, name))
            except FileNotFoundError:
                pass
