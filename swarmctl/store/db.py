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
from swarmctl.store import conflicts, queries
from swarmctl.store.errors import corrupt, forbidden, not_a_repo, open_failure
from swarmctl.store.files import (
    can_write,
    can_write_store,
    connect,
    is_store,
    keep_wal_on_close,
    on_readonly_filesystem,
    unwritable_why,
    wal_is_empty,
)
from swarmctl.store.schema import DB_FILE, FORMAT_VERSION, OP_KINDS, SCHEMA

_CREATE_HINT = "Nothing was written. Choose a directory this user may write."


def _already_a_store(path: Path, why: str = "") -> SwarmError:
    return SwarmError(
        "E_STATE",
        f"there is already a store at {path}{why}",
        details={"path": str(path)},
        hint="Use it with --repo, or choose another directory.",
    )


def _remove_abandoned_inits(path: Path) -> None:
    """Remove what an `init` killed half-way left behind (its process is gone)."""
    from swarmctl import pids

    for leftover in path.glob(f"{DB_FILE}.init-*"):
        pid = leftover.name.removeprefix(f"{DB_FILE}.init-").split("-")[0]
        if pid.isdigit() and not pids.alive(int(pid)):
            leftover.unlink(missing_ok=True)


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
    def open(cls, path: Path, *, readonly: bool = False, keep_wal: bool = True) -> "Store":
        """The store at `path`. A connection that may write closes without folding the WAL into
        the database (`keep_wal`, see files.keep_wal_on_close): a committed change costs one disk
        sync, and a command that fails or only reads leaves the files as it found them."""
        path = path.resolve()
        db = path / DB_FILE
        if not db.is_file():
            raise not_a_repo(path)
        writable = can_write_store(path, db)
        # A WAL database is read through its -shm file, which SQLite must be able to create.
        # On a read-only filesystem no one can write the store, so it may be read as an
        # immutable file instead, unless a WAL with commits in it was left there.
        immutable = not writable and on_readonly_filesystem(path) and wal_is_empty(db)
        conn = None
        try:
            conn = connect(db, readonly=readonly or not writable, immutable=immutable)
            if keep_wal and writable and not readonly:
                keep_wal_on_close(conn, db)
            store = cls(path, conn, readonly, writable)
            store._check_format()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise open_failure(exc, path, writable) from exc
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
            raise _already_a_store(path)
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
        if not can_write(path):
            raise forbidden(path, f"cannot make a store in {path}: it {unwritable_why(path)}", hint=_CREATE_HINT)
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
                raise _already_a_store(path, " (made by another process just now)") from None
        finally:
            for made in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                made.unlink(missing_ok=True)
        # Its first users (init, demo) fold their WAL in on close: a new store is one file.
        return cls.open(path, keep_wal=False)

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
            raise forbidden(self.path, f"the store at {self.path} {unwritable_why(self.path)}")
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
        return queries.ref_target(self.conn, name)

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
        if kind not in OP_KINDS:
            raise RuntimeError(f"unknown op kind {kind!r}: add it to OP_KINDS in swarmctl/store/schema.py")
        # A guard: every caller reads the refs inside this transaction, so a conflict here is a
        # bug in the caller (the tools check first, to say more in their own error).
        found = conflicts.find(self.conn, moves, since=None)
        if found:
            raise conflicts.cas_mismatch(found)
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
