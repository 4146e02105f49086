"""Opening a store, and the one transaction helper every change goes through."""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

from swarmctl import names
from swarmctl.envelope import SwarmError
from swarmctl.store.schema import DB_FILE, FORMAT_VERSION, SCHEMA

DEFAULT_LOCK_TIMEOUT_S = 10.0


def lock_timeout() -> float:
    raw = os.environ.get("SWARMCTL_LOCK_TIMEOUT")
    if raw is None:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise SwarmError(
            "E_INVALID_ARG",
            f"SWARMCTL_LOCK_TIMEOUT={raw!r} is not a number of seconds",
            details={"variable": "SWARMCTL_LOCK_TIMEOUT", "value": raw},
        ) from None
    if not 0 <= value <= 3600:
        raise SwarmError(
            "E_INVALID_ARG",
            "SWARMCTL_LOCK_TIMEOUT must be between 0 and 3600 seconds",
            details={"variable": "SWARMCTL_LOCK_TIMEOUT", "value": raw},
        )
    return value


def translate(exc: sqlite3.Error, path: Path | None = None) -> SwarmError:
    """What an SQLite failure means to the caller, as a typed error.

    Decided by SQLite's primary result code (sqlite3 exposes it as `sqlite_errorcode`), not by
    the wording of its message, which SQLite does not promise to keep.
    """
    text = str(exc)
    where = {"repo": str(path)} if path else {}
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return SwarmError(
            "E_BUSY",
            f"the store stayed locked past the timeout ({lock_timeout():g}s): {text}",
            details=where,
            hint="Another process is writing; nothing was written. Retry, or raise SWARMCTL_LOCK_TIMEOUT.",
        )
    if code in (_SQLITE_READONLY, _SQLITE_PERM):
        return forbidden(path, f"the store is read-only here: {text}")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return corrupt(f"the store's database fails its checks: {text}", path)
    if code == _SQLITE_ERROR and ("no such table" in text or "no such column" in text):
        return corrupt(f"the store's database lacks part of its schema: {text}", path)
    if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
        return corrupt(f"the store's database cannot be read: {text}", path)
    return SwarmError(
        "E_INTERNAL",
        f"unexpected SQLite error (a bug in swarmctl): {type(exc).__name__}: {text}",
        details={**where, "exception": type(exc).__name__, "sqlite_error": getattr(exc, "sqlite_errorname", None)},
        hint="Please report this with the command you ran.",
    )


# SQLite's primary result codes (https://sqlite.org/rescode.html) that mean something to a caller.
_SQLITE_ERROR, _SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 1, 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 10, 11, 14, 26


def forbidden(path: Path | None, message: str, hint: str | None = None) -> SwarmError:
    return SwarmError(
        "E_FORBIDDEN",
        message,
        details={**({"repo": str(path)} if path else {}), "reason": "read_only"},
        hint=hint
        or "Nothing was written. Reads work; writing needs write access to the store's directory "
        "and its database file.",
    )


def corrupt(message: str, path: Path | None) -> SwarmError:
    return SwarmError(
        "E_STORE_CORRUPT",
        message,
        details={"repo": str(path)} if path else {},
        hint="Nothing was written. Restore the store from a backup, or inspect it with `sqlite3`.",
    )


def not_a_repo(path: Path, *, discovered: bool = False) -> SwarmError:
    if discovered:
        message = f"no swarmops store in {path} or any parent directory"
    else:
        message = f"no swarmops store at {path}"
    return SwarmError(
        "E_NOT_A_REPO",
        message,
        details={"path": str(path)},
        hint="Create one with `swarmctl init PATH`, or point at one with --repo or SWARMCTL_REPO.",
    )


def is_store(path: Path) -> bool:
    return (path / DB_FILE).is_file()


def discover(start: Path) -> Path | None:
    """The nearest enclosing directory of `start` that is a store, as git finds `.git`."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if is_store(candidate):
            return candidate
    return None


def _connect(db: Path, *, readonly: bool, immutable: bool = False) -> sqlite3.Connection:
    mode = "ro" if readonly else "rw"
    # immutable=1: SQLite reads the file without locks or its -shm file. Only for a store on a
    # read-only filesystem, where no one can be writing it (see Store.open).
    conn = sqlite3.connect(
        f"{db.as_uri()}?mode={mode}" + ("&immutable=1" if immutable else ""),
        uri=True,
        timeout=lock_timeout(),
        isolation_level=None,  # we issue BEGIN/COMMIT ourselves
        check_same_thread=False,
    )
    conn.execute("PRAGMA foreign_keys = ON")
    if not readonly:
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _open_failure(exc: sqlite3.Error, path: Path, writable: bool) -> SwarmError:
    """Why a store could not be opened: the first reads of a database tell a corrupt file, a
    file that is not a store, and one this user may not read apart."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_SQLITE_CANTOPEN, _SQLITE_READONLY) and not writable and _on_readonly_filesystem(path):
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
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return translate(exc, path)
    return corrupt(f"{path / DB_FILE} is not a readable swarmops database: {exc}", path)


_CREATE_HINT = "Nothing was written. Choose a directory this user may write."


def _remove_abandoned_inits(path: Path) -> None:
    """Remove what an `init` killed half-way left behind (its process is gone)."""
    from swarmctl import pids

    for leftover in path.glob(f"{DB_FILE}.init-*"):
        pid = leftover.name.removeprefix(f"{DB_FILE}.init-").split("-")[0]
        if pid.isdigit() and not pids.alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _writable(path: Path, db: Path) -> bool:
    """Can this process write the store? SQLite needs the directory too, for its -wal and -shm
    files."""
    return _can_write(db) and _can_write(path)


def _can_write(path: Path) -> bool:
    # access(2) answers for this user, and says no on a read-only filesystem: what stops root,
    # whom file modes do not.
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def _on_readonly_filesystem(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _wal_is_empty(db: Path) -> bool:
    try:
        return Path(f"{db}-wal").stat().st_size == 0
    except FileNotFoundError:
        return True


class Store:
    """An open store: its directory (absolute) and one SQLite connection.

    `writable` is False where this process cannot write the store (a read-only filesystem, or
    a directory or database it has no write permission for): reads work, `write()` refuses
    with E_FORBIDDEN before touching anything.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, writable: bool = True) -> None:
        self.path = path
        self.conn = conn
        self.readonly = readonly
        self.writable = writable

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False) -> "Store":
        path = path.resolve()
        db = path / DB_FILE
        if not db.is_file():
            raise not_a_repo(path)
        writable = _writable(path, db)
        # A WAL database is read through its -shm file, which SQLite must be able to create.
        # On a read-only filesystem no one can write the store, so it may be read as an
        # immutable file instead, unless a WAL with commits in it was left there.
        immutable = not writable and _on_readonly_filesystem(path) and _wal_is_empty(db)
        conn = None
        try:
            conn = _connect(db, readonly=readonly or not writable, immutable=immutable)
            store = cls(path, conn, readonly, writable)
            store._check_format()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise _open_failure(exc, path, writable) from exc
            raise
        return store

    def _check_format(self) -> None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or not str(row[0]).isdigit():
            raise corrupt(f"{self.path / DB_FILE} records no store format", self.path)
        found = int(row[0])
        if found > FORMAT_VERSION:
            raise SwarmError(
                "E_STORE_VERSION",
                f"the store at {self.path} has format {found}; this swarmctl reads format {FORMAT_VERSION} and older",
                details={"repo": str(self.path), "format": found, "supported": FORMAT_VERSION},
                hint="Upgrade swarmctl to use this store. Nothing was written.",
            )

    @classmethod
    def create(cls, path: Path, actor: str) -> "Store":
        """A new store whose op 1 is its `init`, by `actor`."""
        path = path.resolve()
        if is_store(path):
            raise SwarmError(
                "E_STATE",
                f"there is already a store at {path}",
                details={"path": str(path)},
                hint="Use it with --repo, or choose another directory.",
            )
        if path.exists() and not path.is_dir():
            raise SwarmError("E_INVALID_ARG", f"{path} exists and is not a directory", details={"path": str(path)})
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise forbidden(path, f"cannot create {path}: {exc.strerror}", hint=_CREATE_HINT) from exc
            raise SwarmError(
                "E_INVALID_ARG", f"cannot create {path}: {exc.strerror}", details={"path": str(path)}
            ) from exc
        if not _can_write(path):
            why = "is on a read-only filesystem" if _on_readonly_filesystem(path) else "is not writable by this user"
            raise forbidden(path, f"cannot make a store in {path}: it {why}", hint=_CREATE_HINT)
        # Build the database under a name of this process's own, then link it into place: a
        # process killed during init leaves no half-made store, and of two processes making a
        # store in one directory at once exactly one succeeds (link fails if the name exists).
        _remove_abandoned_inits(path)
        tmp = path / f"{DB_FILE}.init-{os.getpid()}"
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(f"BEGIN;\n{SCHEMA}\nCOMMIT;")
                conn.execute("INSERT INTO meta(key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
                store = cls(path, conn, readonly=False)
                with store.write(actor) as w:
                    w.append_op("init", "initialize store")
            finally:
                conn.close()
            try:
                os.link(tmp, path / DB_FILE)
            except FileExistsError:
                raise SwarmError(
                    "E_STATE",
                    f"there is already a store at {path} (made by another process just now)",
                    details={"path": str(path)},
                    hint="Use it with --repo, or choose another directory.",
                ) from None
        finally:
            for made in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                made.unlink(missing_ok=True)
        return cls.open(path)

    def close(self) -> None:
        self.conn.close()

    # --- reading and writing --------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for a read made of several queries."""
        self.conn.execute("BEGIN")
        try:
            yield self.conn
        finally:
            self.conn.execute("COMMIT")

    @contextmanager
    def write(self, actor: str) -> Iterator["Writer"]:
        """The one way to change a store: BEGIN IMMEDIATE, check, write, append the op, COMMIT.

        Anything raised inside rolls the whole transaction back: nothing is half-written.
        """
        if self.readonly:
            raise RuntimeError("write on a store opened read-only")
        if not self.writable:
            why = "is on a read-only filesystem" if _on_readonly_filesystem(self.path) else "is not writable by this user"
            raise forbidden(self.path, f"the store at {self.path} {why}")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            writer = Writer(self.conn, actor, _next_time(self.conn))
            yield writer
            _fault_pause_before_commit()
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise


def _fault_pause_before_commit() -> None:
    """Fault injection for tests, off unless SWARMCTL_FAULT=pause-before-commit:PATH is set:
    with everything of the transaction written but not committed, write PATH (this process's
    pid) and sleep, so that a test can kill the process at exactly this point."""
    spec = os.environ.get("SWARMCTL_FAULT")
    if not spec:
        return
    action, _, path = spec.partition(":")
    if action != "pause-before-commit" or not path:
        raise RuntimeError(f"SWARMCTL_FAULT must be pause-before-commit:PATH, not {spec!r}")
    import time

    Path(path).write_text(str(os.getpid()))
    time.sleep(3600)


def _next_time(conn: sqlite3.Connection) -> str:
    """Now, but never earlier than the newest op: op times are non-decreasing."""
    current = names.now()
    row = conn.execute("SELECT at FROM ops ORDER BY op DESC LIMIT 1").fetchone()
    return max(current, row[0]) if row else current


class Move(NamedTuple):
    """One ref move an op makes: `old` is what the ref must name now (None: must not exist)."""

    name: str
    old: str | None
    new: str | None


class Writer:
    """What may be done inside `Store.write`: every op is appended through `append_op`."""

    def __init__(self, conn: sqlite3.Connection, actor: str, at: str) -> None:
        self.conn = conn
        self.actor = actor
        self.at = at
        self.op: int | None = None

    def ref_target(self, name: str) -> str | None:
        row = self.conn.execute("SELECT target FROM refs WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def append_op(
        self,
        kind: str,
        description: str,
        moves: Sequence[Move] = (),
        *,
        undoes: int | None = None,
    ) -> int:
        """Append the op and apply its moves, each by compare-and-swap: all of them or none."""
        if self.op is not None:
            raise RuntimeError("one op per transaction")
        conflicts = [
            {"name": m.name, "expected": m.old, "actual": actual}
            for m in moves
            if (actual := self.ref_target(m.name)) != m.old
        ]
        if conflicts:
            raise SwarmError(
                "E_CAS_MISMATCH",
                "refs moved under the operation: " + ", ".join(c["name"] for c in conflicts),
                details={"conflicts": conflicts},
                hint="Nothing was written. Re-read the refs and try again.",
            )
        cur = self.conn.execute(
            "INSERT INTO ops(kind, actor, at, description, undoes) VALUES (?, ?, ?, ?, ?)",
            (kind, self.actor, self.at, description, undoes),
        )
        op = cur.lastrowid
        for seq, m in enumerate(moves):
            self.conn.execute(
                "INSERT INTO ref_moves(op, seq, name, old, new) VALUES (?, ?, ?, ?, ?)",
                (op, seq, m.name, m.old, m.new),
            )
            if m.new is None:
                self.conn.execute("DELETE FROM refs WHERE name = ?", (m.name,))
            else:
                self.conn.execute(
                    "INSERT INTO refs(name, target, op) VALUES (?, ?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET target = excluded.target, op = excluded.op",
                    (m.name, m.new, op),
                )
        self.op = op
        return op

    def insert_changeset(self, row: dict) -> None:
        """Store a changeset made by this transaction's op (call after append_op)."""
        self.conn.execute(
            "INSERT INTO changesets(id, op, message, actor, at, parents, metadata, files) "
            "VALUES (:id, :op, :message, :actor, :at, :parents, :metadata, :files)",
            {**row, "op": self.op},
        )

    def insert_blob(self, blob_id: str, content: bytes) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO blobs(id, size, content) VALUES (?, ?, ?)", (blob_id, len(content), content)
        )
