"""The local store: a directory holding one SQLite database (WAL mode; each commit synced to the
disk before it is read or reported, see wal.WalFile). Every change is one BEGIN IMMEDIATE
transaction; ops are numbered by SQLite's rowid.

Why this module is long: it is the whole of one backend's side of Store (opening and making a
store, the steps of a write, the group commit of `call --lines`, the sync after each commit);
what does not need the Store's state is in files.py and errors.py already."""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from swarmctl import names
from swarmctl.envelope import SwarmError
from swarmctl.store import faults
from swarmctl.store.db import Head, Store, Writer, op_time
from swarmctl.store.errors import (
    blame_files,
    busy,
    corrupt,
    gate_busy,
    not_stored,
    forbidden,
    not_a_repo,
    open_failure,
    os_failure,
    translate,
)
from swarmctl.store.files import (
    resolve,
    can_write,
    can_write_store,
    connect,
    exists,
    is_dir,
    is_file,
    is_store,
    make_dirs,
    keep_wal_on_close,
    lock_timeout,
    on_readonly_filesystem,
    remove_abandoned_inits,
    remove_database,
    remove_if_empty,
    unwritable_why,
    wal_is_empty,
)
from swarmctl.store.schema import DB_FILE, FORMAT_VERSION, POLICY_FORMAT, SCHEMA, readable_format
from swarmctl.store.wal import WAL_LIMIT, GateBusy, WalFile, fold_wal, sync_directory

if TYPE_CHECKING:
    from pathlib import Path

_CREATE_HINT = "Nothing was written. Choose a directory this user may write."

# A writer waits for the store's write lock in slices this long (seconds): a signal is handled
# between two (see SqliteStore._lock).
LOCK_SLICE_S = 0.1


def _already_a_store(path: str, why: str = "") -> SwarmError:
    return SwarmError(
        "E_STATE",
        f"there is already a store at {path}{why}",
        details={"path": str(path)},
        hint="Use it with --repo, or choose another directory.",
    )


def _sqlite_header(db: str) -> bool:
    """Whether `db` begins as every SQLite database does (an empty file, say, does not: `init`
    calls it a store that is there, which every other command calls unreadable)."""
    try:
        with open(db, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return True  # unreadable here: the store's own checks say why, as before


def _make_dir(path: str) -> bool:
    """Make the directory of a new store where it is not; whether this made it."""
    made = not exists(path)
    try:
        make_dirs(path)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise forbidden(path, f"cannot create {path}: {exc.strerror}", hint=_CREATE_HINT) from exc
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise os_failure(exc, path) from exc  # the disk is full
        raise SwarmError("E_INVALID_ARG", f"cannot create {path}: {exc.strerror}", details={"path": str(path)}) from exc
    return made


class SqliteStore(Store):
    """A local store: its directory (absolute) and one SQLite connection.

    `writable` is False where this process cannot write the store (a read-only filesystem, or
    a directory or database it has no write permission for): reads work, `write()` refuses
    with E_FORBIDDEN before touching anything.
    """

    kind = "sqlite"
    driver_errors = (sqlite3.Error,)

    def __init__(self, path: str, conn: sqlite3.Connection, readonly: bool, writable: bool = True) -> None:
        super().__init__(str(path), conn, readonly, writable, path=path)
        self._lock_timeout = lock_timeout()  # what `connect` gave the connection: seconds
        self._version: int | None = None  # PRAGMA data_version in this write transaction
        self._sealed_at: int | None = None  # ... in the last one that committed an op
        # The newest op as of this connection's last write, and the data_version it holds for:
        # while no other connection has committed since, a write need not read it again.
        self._known_head: tuple[int | None, Head | None] = (None, None)
        # Group commit (`call --lines`, see begin_group): whether writes are savepoints in one
        # transaction now, how many it holds, and whether it was lost (True, or what lost it).
        self._grouping = False
        self._group_open = False  # the group's write transaction has begun
        self._grouped = 0
        self._group_lost: SwarmError | bool = False
        # The -wal file (wal.WalFile) of a store opened by files.connect, whose commits this
        # syncs itself (synchronous=NORMAL) where it may write; None on the connection that
        # makes a store (_make), SQLite's own, which syncs as FULL does.
        self._wal: WalFile | None = None
        self._syncs_wal = False
        self._unsynced = False  # a COMMIT ran whose sync has not (a signal came in between)
        self._group_ops: list[int] = []  # the ops of the group's calls, committed at end_group

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False, keep_wal: bool = True) -> "SqliteStore":
        """The store at `path`. A connection that may write closes without folding the WAL into
        the database (`keep_wal`, see files.keep_wal_on_close): a committed change costs one disk
        sync, and a command that fails or only reads leaves the files as it found them."""
        try:
            return cls._open(os.fspath(path), readonly, keep_wal)
        except OSError as exc:
            raise os_failure(exc, os.fspath(path)) or exc

    @classmethod
    def _open(cls, path: str, readonly: bool, keep_wal: bool) -> "SqliteStore":
        path = resolve(path)
        db = os.path.join(path, DB_FILE)
        if is_dir(path) and not os.access(path, os.X_OK):
            raise blame_files(path) or not_a_repo(path)  # a directory this user may not enter
        if not is_file(db):
            raise not_a_repo(path)
        if (blamed := blame_files(path, side_files=False)) is not None:
            raise blamed  # a file this user may not read: say which, before SQLite blames another
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
            store._wal, store._syncs_wal = WalFile(db), writable and not readonly
            store._check_format()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            # SQLite's message about a damaged file may quote bytes of it that are not UTF-8,
            # which Python fails to decode: that is damage too.
            if isinstance(exc, (sqlite3.Error, UnicodeDecodeError)):
                raise open_failure(exc, path, writable) from exc
            raise
        return store

    def _check_format(self) -> None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or not names.digits(str(row[0])) or int(row[0]) < 1:  # formats start at 1
            raise corrupt(f"{os.path.join(self.path, DB_FILE)} records no store format", self.path)  # type: ignore[arg-type]
        found = int(row[0])
        self.format = found
        if not readable_format(found):
            raise SwarmError(
                "E_STORE_VERSION",
                f"the store at {self.path} has format {found}; this swarmctl reads format {POLICY_FORMAT} and older",
                details={"repo": str(self.path), "format": found, "supported": POLICY_FORMAT},
                hint="Upgrade swarmctl to use this store. Nothing was written.",
            )

    @classmethod
    def make(cls, path: str | Path, actor: str, fill: Callable[[Writer], None]) -> "SqliteStore":
        """A new store, filled by `fill` in its first write transaction (as `actor`)."""
        try:
            return cls._make(os.fspath(path), actor, fill)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise SwarmError(
                    "E_INVALID_ARG",
                    f"cannot make a store at {path}: {os.strerror(exc.errno)}",
                    details={"path": str(path)},
                    hint="Choose a directory that can be made.",
                ) from exc
            raise os_failure(exc, os.fspath(path)) or exc
        except sqlite3.Error as exc:  # making the database itself failed: a full disk, say
            raise translate(exc, os.fspath(path)) from exc

    @classmethod
    def _make(cls, path: str, actor: str, fill: Callable[[Writer], None]) -> "SqliteStore":
        path = resolve(path)
        db = os.path.join(path, DB_FILE)
        if is_store(path) and _sqlite_header(db):
            raise _already_a_store(path)
        if exists(path) and not is_dir(path):
            raise SwarmError("E_INVALID_ARG", f"{path} exists and is not a directory", details={"path": str(path)})
        if os.path.lexists(db):  # not a database: a directory, a dangling link, an empty file
            raise SwarmError(
                "E_STATE",
                f"cannot make a store in {path}: {db} is there and is not a store's database",
                details={"path": str(path)},
                hint=f"Move {db} away, or choose another directory. Nothing was written.",
            )
        made_dir = _make_dir(path)
        if not can_write(path):
            raise forbidden(path, f"cannot make a store in {path}: it {unwritable_why(path)}", hint=_CREATE_HINT)
        # Build the database under a name of this process's own, then link it into place: a
        # process killed during init leaves no half-made store, and of two processes making a
        # store in one directory at once exactly one succeeds (link fails if the name exists).
        remove_abandoned_inits(path)
        tmp = os.path.join(path, f"{DB_FILE}.init-{os.getpid()}")
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(f"BEGIN;\n{SCHEMA}\nCOMMIT;")
                store = cls(path, conn, readonly=False)
                with store.write(actor) as w:
                    conn.execute("INSERT INTO meta(key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
                    fill(w)
                # The WAL into the file the link names: a full disk raises here (on close, silently not).
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
            try:
                os.link(tmp, db)
            except FileExistsError:
                raise _already_a_store(path, " (made by another process just now)") from None
            # Its name on the disk before it is reported (and the directory's, if made here).
            sync_directory(path)
            if made_dir:
                sync_directory(os.path.dirname(path))
        except BaseException as exc:
            error = translate(exc, path) if isinstance(exc, sqlite3.Error) else exc  # while `path` is there
            if made_dir:  # as it was: no directory left behind by an init that made nothing
                remove_if_empty(path, tmp)
            raise error from (exc if error is not exc else None)
        finally:
            remove_database(tmp)
        # Its first users (init, demo) fold their WAL in on close: a new store is one file.
        return cls.open(path, keep_wal=False)

    # --- the transaction helper's steps (see Store.write) ---------------------------------

    def translate(self, exc: BaseException) -> SwarmError:
        error = translate(exc, self.path)  # type: ignore[arg-type]
        if self._grouped and not self.conn.in_transaction and not isinstance(self._group_lost, SwarmError):
            self._group_lost = error  # what undid the group's transaction undid its calls too
        return error

    def _check_writable(self) -> None:
        if not self.writable:
            raise forbidden(self.path, f"the store at {self.path} {unwritable_why(self.path)}")

    def close(self) -> None:
        super().close()
        if self._wal is not None:
            self._wal.close()

    def _begin_read(self) -> None:
        if not self._in_group():
            # The snapshot begins at the first read, inside the gate: never on a commit whose
            # writer has not synced it yet (wal.WalFile).
            with self._gate(exclusive=False):
                self.conn.execute("BEGIN")
                try:
                    self.conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()
                except BaseException:  # no transaction left open for the next call to trip on
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise

    @contextmanager
    def _gate(self, exclusive: bool) -> Iterator[None]:
        if self._wal is None:
            yield
            return
        try:
            with self._wal.gate(exclusive, self._lock_timeout):
                yield
        except GateBusy:
            raise gate_busy(self.path) from None  # type: ignore[arg-type]

    def _end_read(self) -> None:
        # SQLite ends a transaction itself on some errors (an I/O error, a corrupt page): a read
        # that met one and went on (`store check` reports it) has no transaction left to end.
        if not self._in_group() and self.conn.in_transaction:
            self.conn.execute("COMMIT")

    def _begin_write(self) -> str:
        if not self._in_group():
            self._lock()
            self._group_open = self._grouping
        if self._grouping:
            self.conn.execute("SAVEPOINT call")
        self._version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        version, head = self._known_head
        if version is None or version != self._version:
            # A store of format 1, read as it is until this write upgrades it, has no hashes.
            hashed = "hash" if self.format >= 2 else "NULL"
            row = self.conn.execute(f"SELECT op, at, {hashed} FROM ops ORDER BY op DESC LIMIT 1").fetchone()
            head = Head(*row) if row is not None else None
            self._known_head = (self._version, head)
        self._head = head
        return op_time(names.now(), head.at if head is not None else None)

    def _lock(self) -> None:
        """BEGIN IMMEDIATE, then read nothing before the commit this snapshot may hold is on the
        disk: the writer that made it released the store's lock at its COMMIT and holds the
        gate until its sync (wal.WalFile; waiting for the gate while holding the store's lock
        cannot deadlock: the gate's holder needs no lock to finish its sync)."""
        self._lock_store()
        try:
            with self._gate(exclusive=False):
                pass
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _lock_store(self) -> None:
        """BEGIN IMMEDIATE: take the store's write lock, waiting for it up to the lock timeout
        (SWARMCTL_LOCK_TIMEOUT; then E_BUSY). SQLite waits in C, where no signal is handled: a
        Ctrl-C or SIGTERM to a process waiting there would wait out the timeout first. So the
        wait is SQLite's in slices of LOCK_SLICE_S, and a signal is handled between two. The
        connection's own timeout, for any other wait (a reader's, during another's recovery),
        is set back after."""
        deadline = time.monotonic() + self._lock_timeout
        try:
            while True:
                left = deadline - time.monotonic()
                self.conn.execute(f"PRAGMA busy_timeout = {max(0, round(min(LOCK_SLICE_S, left) * 1000))}")
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not busy(exc) or left <= LOCK_SLICE_S:
                        raise
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {round(self._lock_timeout * 1000)}")

    def _next_op(self) -> None:
        return None  # the rowid: max + 1, inside BEGIN IMMEDIATE

    def _commit(self, writer: Writer) -> None:
        if self._grouping:
            self.conn.execute("RELEASE call")
            self._grouped += 1
        else:
            try:
                self._commit_synced([*self.committed, *([writer.op] if writer.op is not None else [])])
            except BaseException:  # committed or not, the next write reads the newest op again
                self._forget_head()
                raise
        if writer.op is not None:
            self._sealed_at = self._version
            # data_version does not change for this connection's own commits: the op it just
            # committed is the newest while the version stays as it is.
            self._known_head = (self._version, Head(writer.op, writer.at, writer.hash))

    def _committed(self, writer: Writer) -> None:
        super()._committed(writer)
        if self._grouping and writer.op is not None:
            self._group_ops.append(writer.op)
        if self._unsynced:  # a signal came between the COMMIT and its sync
            self._synced(list(self.committed))

    def _commit_synced(self, ops: list[int]) -> None:
        """COMMIT, and the commit on the disk before anyone reads it or is told of it
        (wal.WalFile); then the WAL folded into the database once it has grown past WAL_LIMIT."""
        if not self._syncs_wal:
            self.conn.execute("COMMIT")
            return
        with self._gate(exclusive=True):
            self._unsynced = True
            try:
                self.conn.execute("COMMIT")
                size = self._synced(ops)
            except BaseException as exc:
                if self._unsynced and (isinstance(exc, sqlite3.Error) or self.conn.in_transaction):
                    self._unsynced = False  # not committed
                elif self._unsynced:  # committed, and a signal came before the sync was done:
                    self._synced(ops)  # the sync first, in the gate, then the signal has its way
                raise
        if size > WAL_LIMIT:
            fold_wal(self.conn, self._lock_timeout)

    def _synced(self, ops: list[int]) -> int:
        try:
            faults.fail_sync()
            size = self._wal.synced()  # type: ignore[union-attr]
        except OSError as exc:
            self._unsynced = False  # not retried: the error says the change is not known to be on disk
            raise not_stored(exc, self.path, ops) from exc  # type: ignore[arg-type]
        self._unsynced = False
        return size

    def _commit_done(self) -> bool:
        # A KeyboardInterrupt is raised between bytecodes, never inside COMMIT: with no
        # transaction open any more, the COMMIT ran. (Inside a group, RELEASE leaves the group's open.)
        return not self._grouping and not self.conn.in_transaction

    def _forget_head(self) -> None:
        super()._forget_head()
        self._known_head = (None, None)
        self._sealed_at = None

    def _head_is_own(self) -> bool:
        # PRAGMA data_version changes when another connection commits, never for this one's own
        # commits: unchanged since this connection committed its op, the newest op is that op.
        return self._sealed_at is not None and self._sealed_at == self._version

    def _roll_back_write(self, upgraded_from: int | None, cause: BaseException | None = None) -> None:
        lost_before = self._group_lost
        super()._roll_back_write(upgraded_from, cause)
        if self._group_lost is True and lost_before is False and isinstance(cause, KeyboardInterrupt):
            # A signal that came where the call's savepoint was not (before it was made, or once
            # it was released into the group) took the whole group back: the calls before it
            # were interrupted, not lost to "a failure of no known kind" (E_INTERNAL).
            from swarmctl.envelope import interrupted

            self._group_lost = interrupted(cause)

    def _rollback(self) -> None:
        if self._grouping and self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK TO call")  # this call's writes; the group's stay
                self.conn.execute("RELEASE call")
                return
            except sqlite3.Error:
                pass
        if self._grouping and self._grouped and not self._group_lost:
            self._group_lost = True  # SQLite rolled back the whole transaction, or must now
        self._group_open = False
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    # --- group commit: the calls `call --lines` has in hand, committed together -------------

    def begin_group(self) -> None:
        """Write each call as a savepoint in one transaction, until end_group commits them all.

        Each call still writes all of itself or nothing (a failing one rolls back to its
        savepoint; the others keep theirs), takes its own op, and sees the ones before it; the
        transaction holds the store's write lock, so no one sees any of them before the commit,
        whose one sync makes all of them durable. `call --lines` groups only the calls already
        waiting on its stdin, and prints their envelopes after that commit, never before.
        """
        self._grouping = True

    def end_group(self) -> bool:
        """Commit the group's writes, and write one transaction a call again; whether the group
        held the store's write lock (it wrote). Raises the typed error that lost its writes when
        they were not committed: the COMMIT failed, or a failure SQLite answers by rolling back
        the whole transaction (a full disk, an I/O error) undid them."""
        grouping, lost, grouped, ops = self._grouping, self._group_lost, self._grouped, self._group_ops
        self._grouping, self._group_lost, self._grouped, self._group_ops = False, False, 0, []
        began, self._group_open = self._group_open, False
        if not grouping:
            return False
        if grouped and not self.conn.in_transaction:
            lost = lost or True  # SQLite rolled the transaction back, whatever failure did it
        if lost:
            self._rollback()
            self._forget_head()
            self._format_as_stored()
            if isinstance(lost, SwarmError):
                raise lost
            from swarmctl.envelope import internal_error

            raise internal_error(RuntimeError("a group of calls was rolled back by a failure of no known kind"))
        if not began or not self.conn.in_transaction:
            return False  # only reads: no lock was taken
        try:
            self._commit_synced(ops)
        except BaseException as exc:
            if isinstance(exc, sqlite3.Error) or self.conn.in_transaction:  # not committed (E_BUSY: the gate)
                self._rollback()
                self._forget_head()
                self._format_as_stored()
            if isinstance(exc, sqlite3.Error):
                raise self.translate(exc) from exc
            raise
        return True

    def _format_as_stored(self) -> None:
        """After a group was lost: an upgrade one of its calls made went with it (what the store
        records says; if it cannot be read, the next write's own failure will say why)."""
        try:
            self.format = int(self.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0])
        except (sqlite3.Error, TypeError, ValueError):
            pass

    def _in_group(self) -> bool:
        """Inside the group's write transaction (not a read's own, before the group wrote)."""
        return self._grouping and self._group_open and self.conn.in_transaction
