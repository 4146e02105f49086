"""What a failure of SQLite or of the filesystem means to the caller, as a typed error; and the
typed errors of a lookup (NotFound, Ambiguous), of a store that is missing (NoStore) or
fails its own checks (StoreDamaged), and of a write whose outcome is unknown (CommitUnknown).

store/ knows nothing of the CLI: no hint here names a command. tools/ word the lookups for
people (tools/common.py), which also holds the hints of NoStore, NoDatabase, NoSchema,
StoreDamaged and CommitUnknown (they name commands), added to the error where the runner makes the envelope.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from typing import TYPE_CHECKING, Any, NamedTuple

from swarmctl.envelope import SwarmError, bug
from swarmctl.store.files import is_dir, is_file, lock_timeout, on_readonly_filesystem
from swarmctl.store.schema import DB_FILE

if TYPE_CHECKING:
    from pathlib import Path


def translate(exc: sqlite3.Error, path: str | Path | None = None) -> SwarmError:
    """What an SQLite failure means to the caller, as a typed error.

    Decided by SQLite's primary result code (sqlite3 exposes it as `sqlite_errorcode`), not by
    the wording of its message, which SQLite does not promise to keep.
    """
    text = str(exc)
    where = {"repo": str(path)} if path else {}
    code = _primary_code(exc)
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_PROTOCOL):  # PROTOCOL: WAL locks never free to take
        return SwarmError(
            "E_BUSY",
            f"the store stayed locked past the timeout ({lock_timeout():g}s): {text}",
            details=where,
            hint="Another process is writing; nothing was written. Retry, or raise SWARMCTL_LOCK_TIMEOUT.",
        )
    # A full disk first: SQLite then says only "unable to open" or "disk I/O error", and a file
    # it could not make would be blamed as unreadable.
    if code == _SQLITE_FULL or (code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and path is not None and no_room(path)):
        return disk_full(path, text)
    if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and no_descriptor_free():
        return too_many_open_files(path, text)
    if code in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN, _SQLITE_IOERR) and path is not None:
        if (blamed := blame_files(path)) is not None:
            return blamed
    if code in (_SQLITE_READONLY, _SQLITE_PERM):
        return forbidden(path, f"the store is read-only here: {text}")
    if code == _SQLITE_CONSTRAINT and exc.sqlite_errorcode == _SQLITE_CONSTRAINT_FOREIGNKEY:  # type: ignore[attr-defined]
        return corrupt(
            f"the store refers to a row that is not there (a ref or op names a missing changeset): {text}", path
        )
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return corrupt(f"the store's database fails its checks: {text}", path)
    if text.startswith("Could not decode to UTF-8"):  # sqlite3's own, with no SQLite code
        return corrupt(f"the store holds text that is not valid UTF-8: {text}", path)
    if code == _SQLITE_ERROR and "JSON cannot hold BLOB values" in text:  # a record's text read as JSON (op log)
        return corrupt(f"the store holds bytes (a BLOB) where text belongs: {text}", path)
    if code == _SQLITE_ERROR and ("no such table" in text or "no such column" in text):
        return corrupt(f"the store's database lacks part of its schema: {text}", path)
    if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
        return corrupt(f"the store's database cannot be read: {text}", path)
    return bug(
        f"unexpected SQLite error (a bug in swarmctl): {type(exc).__name__}: {text}",
        {**where, "exception": type(exc).__name__, "sqlite_error": getattr(exc, "sqlite_errorname", None)},
    )


def busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite stopped waiting for a lock that another connection holds."""
    return _primary_code(exc) == _SQLITE_BUSY


def _primary_code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


# SQLite's primary result codes (https://sqlite.org/rescode.html) that mean something to a caller.
_SQLITE_ERROR, _SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 1, 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 10, 11, 13, 14, 26
_SQLITE_CONSTRAINT, _SQLITE_CONSTRAINT_FOREIGNKEY, _SQLITE_PROTOCOL = 19, 787, 15


def forbidden(path: str | Path | None, message: str, hint: str | None = None, *, reason: str = "read_only",
              file: str | Path | None = None) -> SwarmError:
    return SwarmError(
        "E_FORBIDDEN",
        message,
        details={**({"repo": str(path)} if path else {}), "reason": reason, **({"file": str(file)} if file else {})},
        hint=hint
        or "Nothing was written. Reads work; writing needs write access to the store's directory "
        "and its database file.",
    )


# Below this much room, an I/O error is taken for the full disk it almost surely is. SQLite says
# only "disk I/O error" when it cannot grow the -shm file it must map even to read (its extended
# code, not the errno), and a write that failed for want of room may have left some behind.
NO_ROOM_BYTES = 8 << 20


def no_room(path: str | Path) -> bool:
    """Whether the filesystem that holds `path` is full, or as good as full, for this user
    (root may use the blocks a filesystem reserves): its space, or its inodes, which the -wal
    and -shm files SQLite makes beside the database need (where the filesystem counts them)."""
    try:
        fs = os.statvfs(path)
    except OSError:
        return False
    root = os.geteuid() == 0
    free = fs.f_bfree if root else fs.f_bavail
    no_inode = fs.f_files > 0 and (fs.f_ffree if root else fs.f_favail) == 0
    return free * fs.f_frsize < NO_ROOM_BYTES or no_inode


# What SQLite may need to open at once for a store: the database, its -wal and -shm files, and
# the directory it syncs.
STORE_DESCRIPTORS = 4


def no_descriptor_free() -> bool:
    """Whether this process (or the system) is out of file descriptors, or as good as out for
    SQLite, which then says only "unable to open database file" (RLIMIT_NOFILE, `ulimit -n`)."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
        import resource  # its module is a file to open: after the first open said there is room

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        in_use = len(os.listdir("/proc/self/fd")) - 1  # less the one that lists them
    except OSError as exc:
        return exc.errno in (errno.EMFILE, errno.ENFILE)  # no /proc: only what the first open said
    except ImportError:  # the last descriptor went to the probe's import after all
        return True
    return soft != resource.RLIM_INFINITY and soft - in_use < STORE_DESCRIPTORS


def too_many_open_files(path: str | Path | None, text: str) -> SwarmError:
    """This process may open no more files (nothing was written)."""
    return _no_room(path, "too_many_open_files", f"this process has too many files open: {text}",
                    "Raise the limit on open files (`ulimit -n`), or close files, then retry.")


def disk_full(path: str | Path | None, text: str) -> SwarmError:
    """The disk (or the user's quota) has no room for the write: SQLite rolled it back whole."""
    return _no_room(path, "disk_full", f"the disk that holds the store is full: {text}",
                    "Free space (and inodes) on the disk that holds the store, or raise the quota, then retry.")


def _no_room(path: str | Path | None, reason: str, message: str, remedy: str) -> SwarmError:
    return SwarmError(
        "E_UNAVAILABLE",
        message,
        details={**({"repo": str(path)} if path else {}), "reason": reason},
        hint=f"Nothing was written. {remedy}",
    )


def gate_busy(path: str | Path | None) -> SwarmError:
    """The -wal file's gate stayed held past the lock timeout: by a writer between its commit and
    its sync, or by a process beginning a read (either stopped there: a hung disk, Ctrl-Z)."""
    return SwarmError(
        "E_BUSY",
        f"the store stayed locked past the timeout ({lock_timeout():g}s): another process held it "
        "between a commit and its sync to the disk, or while it began a read",
        details={"repo": str(path)} if path else {},
        hint="Another process is using the store; nothing was written. Retry, or raise SWARMCTL_LOCK_TIMEOUT.",
    )


def not_stored(exc: OSError, path: str | Path, committed: list[int]) -> SwarmError:
    """The disk failed to store a change SQLite had committed (the sync after the commit
    failed): others may see it already, and it may not outlive the machine stopping."""
    return SwarmError(
        "E_UNAVAILABLE",
        f"the change was committed, but the disk that holds the store failed to store it: {exc.strerror or exc}",
        details={"repo": str(path), "reason": "sync_failed", "committed": list(committed)},
        hint="The change is in the store (the op log shows it), and may be lost if the machine "
        "stops before the disk stores it. Check the disk that holds the store; do not retry the change.",
    )


def corrupt(message: str, path: str | Path | None) -> SwarmError:
    return SwarmError(
        "E_STORE_CORRUPT",
        message,
        details={"repo": str(path)} if path else {},
        hint="Nothing was written. Restore the store from a backup, or inspect it with `sqlite3`.",
    )


class NotFound(SwarmError):
    """Nothing in the store is `what` (a changeset, ...) named `given`."""

    def __init__(self, what: str, given: str) -> None:
        super().__init__("E_NOT_FOUND", f"no {what} {given}", details={what: given})
        self.what, self.given = what, given


class Ambiguous(SwarmError):
    """More than one `what` in the store has an id starting with `given`: `candidates` (a few)."""

    def __init__(self, what: str, given: str, candidates: list[str]) -> None:
        super().__init__(
            "E_INVALID_ARG", f"{what} prefix {given!r} is ambiguous", details={"value": given, "candidates": candidates}
        )
        self.what, self.given, self.candidates = what, given, candidates


class Problem(NamedTuple):
    code: str  # which rule: "ops_gapless", "move_chain", "refs_match_log", "hash_chain", ...
    message: str
    op: int | None = None
    ref: str | None = None

    @property
    def check(self) -> str:  # the name this field had before `store check` printed it
        return self.code

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self._asdict().items() if v is not None}


class StoreDamaged(SwarmError):
    """A write refused because what it depends on fails the store's checks (store/check.py)."""

    def __init__(self, problems: list) -> None:
        self.problems = problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(
            "E_STORE_CORRUPT",
            f"the store fails its own checks, so nothing was written: {first.message}{more}",
            details={"problems": [p.to_dict() for p in problems]},
        )


class NoStore(SwarmError):
    """No store at `path` (or, `discovered`, in it or any parent directory)."""

    def __init__(self, path: str | Path, *, discovered: bool = False) -> None:
        where = f"in {path} or any parent directory" if discovered else f"at {path}"
        super().__init__("E_NOT_A_REPO", f"no swarmops store {where}", details={"path": str(path)})
        self.path = path


class NoDatabase(SwarmError):
    """The server has no database of the store's URL (`shown`, password hidden): `reason` says so."""

    def __init__(self, shown: str, database: str | None, reason: str) -> None:
        super().__init__(
            "E_NOT_A_REPO", f"no swarmops store at {shown}: {reason}", details={"repo": shown, "database": database}
        )
        self.shown, self.database = shown, database


class NoSchema(SwarmError):
    """The database at `shown` has no schema `schema` with a store in it. `unfinished`: it has
    the store's tables, empty and with no format: an `init` or a `store copy` into it stopped
    before its data committed (the next one fills them)."""

    def __init__(self, shown: str, schema: str, unfinished: bool = False) -> None:
        why = (
            f"an init or store copy into schema {schema} stopped before it finished: its tables are there, empty"
            if unfinished else f"no schema {schema} with a store in it"
        )
        super().__init__(
            "E_NOT_A_REPO",
            f"no swarmops store at {shown} ({why})",
            details={"path": shown, "schema": schema, **({"unfinished": True} if unfinished else {})},
        )
        self.shown, self.schema, self.unfinished = shown, schema, unfinished


class CommitUnknown(SwarmError):
    """The connection to the store's server failed during COMMIT, and whether the write
    committed could not be learned (`details`: the store's, with `commit_unknown` and the
    write's `request` id, by which a later look finds its op)."""

    def __init__(self, message: str, details: dict) -> None:
        super().__init__("E_UNAVAILABLE", message, details=details)


def damaged(problems: list) -> StoreDamaged:
    return StoreDamaged(problems)


def not_a_repo(path: str | Path, *, discovered: bool = False) -> NoStore:
    return NoStore(path, discovered=discovered)


def open_failure(exc: sqlite3.Error | UnicodeDecodeError, path: str | Path, writable: bool) -> SwarmError:
    """Why a store could not be opened: the first reads of a database tell a corrupt file, a
    file that is not a store, and one this user may not read apart."""
    code = _primary_code(exc)
    if code in (_SQLITE_CANTOPEN, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_PERM):
        if (blamed := blame_files(path)) is not None:
            return blamed
    if code in (_SQLITE_CANTOPEN, _SQLITE_READONLY) and not writable and on_readonly_filesystem(path):
        return forbidden(
            path,
            f"cannot read the store at {path}: it is on a read-only filesystem with changes still in "
            f"its write-ahead log ({DB_FILE}-wal), which SQLite cannot read without writing beside it",
            hint="Nothing was written. Copy the store's directory somewhere writable and read the copy.",
        )
    if code in (_SQLITE_CANTOPEN, _SQLITE_READONLY) and not writable:
        return forbidden(
            path,
            f"cannot read the store at {path}: SQLite must create {DB_FILE}-shm beside the "
            "database to read it, and this user cannot write the store's directory",
            hint="Nothing was written. Run as a user who may write the store's directory, or read a "
            "copy of the store. (A store on a read-only filesystem is read without it.)",
        )
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_FULL) or (
        code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and (no_room(path) or no_descriptor_free())
    ):
        return translate(exc, path)
    return corrupt(f"{os.path.join(path, DB_FILE)} is not a readable swarmops database: {exc}", path)


def blame_files(path: str | Path, *, side_files: bool = True) -> SwarmError | None:
    """The real cause when SQLite cannot open or write a store's files, if it is one of these:
    a file this user may not read or write, or a -wal or -shm that is not a file. (SQLite says
    only "unable to open" or "read-only", which would blame the wrong file.)"""
    db = os.path.join(path, DB_FILE)
    if not _allowed(path, os.X_OK):
        return permission_denied(path, path, "enter")
    if not _allowed(db, os.R_OK):
        return permission_denied(path, db, "read")
    for suffix in ("-wal", "-shm") if side_files else ():
        side = f"{db}{suffix}"
        if os.path.lexists(side) and not is_file(side):
            kind = "a directory" if is_dir(side) else "not a regular file"
            return SwarmError(
                "E_STORE_CORRUPT",
                f"{side} is {kind}: SQLite keeps the store's {'write-ahead log' if suffix == '-wal' else 'shared-memory index'} "
                "there and cannot use it",
                details={"repo": str(path), "file": str(side)},
                hint=f"Nothing was written. Move {side} out of the way (SQLite makes it again), then retry.",
            )
        if os.path.lexists(side) and not _allowed(side, os.R_OK | os.W_OK) and not on_readonly_filesystem(path):
            return permission_denied(path, side, "read and write")
    return None


def permission_denied(path: str | Path, file: str | Path, verb: str) -> SwarmError:
    return forbidden(
        path,
        f"permission denied: this user may not {verb} {file}",
        hint=f"Nothing was written. Run as a user who may {verb} {file}, or change its permissions.",
        reason="permission_denied",
        file=file,
    )


def _allowed(path: str | Path, mode: int) -> bool:
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def os_failure(exc: OSError, path: str | Path | None = None) -> SwarmError | None:
    """What a filesystem failure while finding or opening a store means to the caller, as a
    typed error; None when it is none of these (a bug, then)."""
    name = exc.filename if exc.filename is not None else path
    if exc.errno in (errno.EACCES, errno.EPERM):
        file = os.fsdecode(name) if name is not None else None
        return forbidden(
            path,
            f"permission denied: {name}",
            hint="Nothing was written. Run as a user who may use this path, or change its permissions.",
            reason="permission_denied",
            file=file,
        )
    if exc.errno == errno.ENAMETOOLONG:
        return SwarmError(
            "E_INVALID_ARG",
            f"a file name is too long (a name may have at most 255 bytes): {name}",
            details={"path": str(name)},
            hint="Choose a shorter name.",
        )
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        why = "a loop of symbolic links" if exc.errno == errno.ELOOP else "a part of it is not a directory"
        return SwarmError(
            "E_NOT_A_REPO",
            f"no swarmops store at {name}: {why}",
            details={"path": str(name)},
            hint="Point --repo or SWARMCTL_REPO at a store's directory.",
        )
    if exc.errno == errno.EROFS:
        return forbidden(path, f"the store is on a read-only filesystem: {name}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return disk_full(path, f"{exc.strerror}: {name}")
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return too_many_open_files(path, f"{exc.strerror}: {name}")
    return None
