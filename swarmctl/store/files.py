"""Where a store is on disk, what this process may do there, and connecting to its database.

Paths here are strings (os.path), not pathlib's Paths, and a function given a Path takes it as
well: a read such as `op log -n 20` never imports pathlib, whose import (with the urllib.parse
and ipaddress it brings) cost a tenth of such a command's start (bench/core.py, start-up)."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from typing import TYPE_CHECKING

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
    return is_file(os.path.join(path, DB_FILE))


# What pathlib's is_file, is_dir and exists take for "not there" (Python 3.11's _IGNORED_ERRNOS):
# any other failure (EACCES, ENAMETOOLONG) is raised, as it was, and said for what it is, where
# os.path's take every failure for "not there" (discovery then went past a store it could not
# look into, to one further up).
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def _mode(path: str | Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            return None
        raise
    except ValueError:  # a NUL in the name
        return None


def is_file(path: str | Path) -> bool:
    mode = _mode(path)
    return mode is not None and stat.S_ISREG(mode)


def is_dir(path: str | Path) -> bool:
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def exists(path: str | Path) -> bool:
    return _mode(path) is not None


def make_dirs(path: str) -> None:
    """mkdir -p, as pathlib's mkdir(parents=True, exist_ok=True): the directory is tried first,
    its parents only where it says they are missing (a name too long is said at once, where
    os.makedirs went up a path longer than PATH_MAX until Python's recursion limit)."""
    try:
        os.mkdir(path)
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent == path:
            raise
        make_dirs(parent)
        make_dirs(path)
    except OSError:
        if not is_dir(path):
            raise


def shown(path: str) -> str:
    """`path` as pathlib shows it (empty and `.` parts and a trailing slash dropped, `..` kept):
    how a path that could not be resolved is named in a message, as it was."""
    lead = "//" if path.startswith("//") and not path.startswith("///") else "/" if path.startswith("/") else ""
    return lead + "/".join(part for part in path.split("/") if part not in ("", ".")) or "."


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
            # before anyone reads it (store/wal.py): as durable as FULL, with one sync.
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
