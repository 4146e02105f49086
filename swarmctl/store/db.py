"""An open store of either kind, and the one transaction helper every change goes through.

`Store` is what tools/ hold: `read()` for a consistent snapshot, `write(actor)` for a change.
How a transaction begins, which op number and time it gets, and what a driver's failure means
are the backend's: swarmctl/store/sqlite.py and swarmctl/store/postgres/.

Why this module is long: `Store.write` and the `Writer` it hands out are the one transaction
helper and everything a write may do inside it, each with the checks that keep it whole; split,
a write's checks would be read in two places.
"""

from __future__ import annotations

import json
from collections import deque
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from swarmctl import limits
from swarmctl.envelope import SwarmError
from swarmctl.names import digits
from swarmctl.store import faults  # policies and conflicts: imported by a write, a read needs neither
from swarmctl.store.rows import ChangesetRow, MoveRow, OpHead
from swarmctl.store.schema import FORMAT_VERSION, OP_KINDS
from swarmctl.store.sql import Conn

if TYPE_CHECKING:
    from pathlib import Path

    from swarmctl import policy as rules


class Store:
    """An open store: `repo` is what meta.repo shows (a local store's absolute path, or a
    server's URL without its password); `path` is the local store's directory (None on a
    server).

    `writable` is False where this process cannot write the store: reads work, `write()`
    refuses with E_FORBIDDEN before touching anything.
    """

    kind = ""
    # The driver's exception classes, translated into typed errors by `translate`.
    driver_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, repo: str, conn: Conn, readonly: bool, writable: bool = True, path: str | None = None) -> None:
        self.repo = repo
        self.conn = conn
        self.readonly = readonly
        self.writable = writable
        self.path = path
        # The store's format as opened (a backend sets what it found): reads take an older
        # format as it is; the first write upgrades it (swarmctl/store/migrate.py).
        self.format = FORMAT_VERSION
        # `policy check` rehearses a call: its transactions roll back where they would commit.
        self.rehearsing = False
        # The newest op as this write transaction found it, where the backend read it (None:
        # not known; the writer asks the database). Spares a write re-reading its predecessor.
        self._head: Head | None = None
        # The ops this store object committed, in order: a door that a signal stops after a
        # commit says the change is written (cli/invoke.py), never that it was rolled back.
        # (The newest 100: a server's store object lives for many calls.)
        self.committed: deque[int] = deque(maxlen=100)

    # --- opening: a path is a local store, a postgresql:// URL a store on a server -----------

    # The backend of a path or URL, one of this class's subclasses: `swarmctl.store.backend_for`,
    # set by the package (swarmctl/store/__init__.py), which knows the backends. Importing it
    # from here would make a cycle: the backends import this module.
    backend_for: Callable[[str | Path], type[Store]]

    @classmethod
    def open(cls, where: str | Path, *, readonly: bool = False) -> "Store":
        return cls.backend_for(where).open(where, readonly=readonly)

    @classmethod
    def create(cls, where: str | Path, actor: str) -> "Store":
        """A new store whose op 1 is its `init`, by `actor`."""
        return cls.backend_for(where).make(where, actor, lambda w: w.append_op("init", "initialize store"))

    @classmethod
    def make(cls, where: str | Path, actor: str, fill: "Callable[[Writer], None]") -> "Store":
        """A new store (refused where one is), filled by `fill` in its first write transaction:
        all of it or nothing. `create` fills it with op 1; `store copy` with another's rows."""
        return cls.backend_for(where).make(where, actor, fill)

    def policy_changed(self, conn: Conn, policy: "rules.Policy | None") -> None:
        """Inside the write that changed the policy: hold the database to `policy` too, where
        the backend can (PostgreSQL's triggers); a local store has nothing to do."""

    def verify_actor(self, writer: "Writer") -> None:
        """Inside each write: E_FORBIDDEN if the backend knows who connected and the policy
        does not let them act as `writer.actor` (PostgreSQL's `[roles]`)."""

    def auth_of(self, actor: str | None) -> str | None:
        """What meta.auth says of a call by `actor` where the backend knows who connected
        (PostgreSQL's `[roles]`: "database" or "none"); None: as the door and the actor say."""
        return None

    def before_load(self, conn: Conn) -> None:
        """Inside a new store's first write, before `load_rows`: make loading cheap where the
        backend can (PostgreSQL's foreign keys go, and `after_load` puts them back)."""

    def load_rows(self, conn: Conn, table: str, columns: list[str], rows: list[tuple]) -> None:
        """Rows copied in as they are (`store copy`): our own table and column names."""
        marks = ", ".join("?" * len(columns))
        conn.executemany(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({marks})", rows)

    def after_load(self, conn: Conn) -> None:
        """After rows were copied in with their own numbers: what numbers next (PostgreSQL's
        head), and what `before_load` set aside, checked against every row."""

    def close(self) -> None:
        self.conn.close()

    # --- reading and writing --------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Conn]:
        """A consistent snapshot for a read made of several queries."""
        try:
            self._begin_read()
            try:
                yield self.conn
            finally:
                self._end_read()
        except self.driver_errors as exc:
            raise self.translate(exc) from exc

    @contextmanager
    def write(self, actor: str) -> Iterator["Writer"]:
        """The one way to change a store: begin (taking the store's write lock), check, write,
        append the op, commit.

        Anything raised inside rolls the whole transaction back: nothing is half-written.
        """
        if self.readonly:
            raise RuntimeError("write on a store opened read-only")
        self._check_writable()
        upgraded_from: int | None = None  # the format this write upgraded the store from
        committing = False
        try:
            try:
                at = self._begin_write()
                stored_format = _refuse_if_moved(self)
                if self.format < FORMAT_VERSION:
                    from swarmctl.store import migrate

                    # In this transaction: all of it, or none. None: another process did it first.
                    upgraded_from, self.format = migrate.upgrade(self.conn), FORMAT_VERSION
                    self._forget_head()  # the upgrade may have rewritten its hash
                    stored_format = None
                writer = Writer(self, actor, at, stored_format, upgraded_from)
                self.verify_actor(writer)
                yield writer
                writer.seal()
                if self.rehearsing:
                    self._roll_back_write(upgraded_from)
                    return
                faults.pause_before_commit()
                committing = True
                self._commit(writer)
                self._committed(writer)
                faults.pause_after_commit()
            except BaseException as exc:
                # A signal (KeyboardInterrupt) handled right after COMMIT returned, before its
                # record was made, comes here too: the write is done, and nothing is rolled back.
                if committing and isinstance(exc, KeyboardInterrupt) and self._commit_done():
                    self._committed(writer)
                else:
                    self._roll_back_write(upgraded_from, exc)
                raise
        except self.driver_errors as exc:
            raise self.translate(exc) from exc

    def _committed(self, writer: Writer) -> None:
        if writer.op is not None and writer.op not in self.committed:
            self.committed.append(writer.op)

    def _commit_done(self) -> bool:
        """After an exception raised during or just after `_commit`: whether the COMMIT took
        effect (False where the backend cannot tell: the door then says what it says of any write)."""
        return False

    def _roll_back_write(self, upgraded_from: int | None, cause: BaseException | None = None) -> None:
        """Roll the write back; an upgrade it made goes with it, and later writes make it again.
        `cause`: what stopped the write (a backend may name it for what its rollback took along)."""
        self._rollback()
        if upgraded_from is not None:
            self.format = upgraded_from
            self._forget_head()

    def translated(self, exc: BaseException) -> SwarmError | None:
        """`exc` as a typed error if it is a failure of this store's driver."""
        return self.translate(exc) if isinstance(exc, self.driver_errors) else None

    # --- what each backend decides ----------------------------------------------------------

    def translate(self, exc: BaseException) -> SwarmError:
        raise NotImplementedError

    def _check_writable(self) -> None:
        pass

    def _begin_read(self) -> None:
        raise NotImplementedError

    def _end_read(self) -> None:
        raise NotImplementedError

    def _begin_write(self) -> str:
        """Begin a write transaction holding the store's write lock; return the op time."""
        raise NotImplementedError

    def _next_op(self) -> int | None:
        """The number of the op this transaction appends (None: the database numbers it)."""
        raise NotImplementedError

    def _commit(self, writer: "Writer") -> None:
        raise NotImplementedError

    def _head_is_own(self) -> bool:
        """Whether the newest op is one this connection sealed and committed, and no one has
        written the store since (then the write need not check it again)."""
        return False

    def _forget_head(self) -> None:
        """The newest op may have changed in ways this transaction's `_head` does not show."""
        self._head = None

    def _rollback(self) -> None:
        raise NotImplementedError


# The meta row `store copy --fence` leaves in the store it copied: where the store went.
MOVED_TO = "moved_to"


def _refuse_if_moved(store: Store) -> int:
    """A fenced store (`store copy --fence`) reads, but writes go to its copy. Returns the
    store's format as recorded (read in the same query: every write wants both)."""
    meta = dict(store.conn.execute("SELECT key, value FROM meta WHERE key IN ('format', ?)", (MOVED_TO,)).fetchall())
    moved_to = meta.get(MOVED_TO)
    if moved_to is not None:
        raise SwarmError(
            "E_STATE",
            f"the store at {store.repo} was moved to {moved_to}; it no longer takes writes",
            details={"repo": store.repo, "moved_to": moved_to},
            hint=f"Nothing was written. Use the store at {moved_to} (--repo or SWARMCTL_REPO); this one still reads.",
        )
    found = meta.get("format")
    return int(found) if found is not None and digits(str(found)) else 0


def op_time(now: str, newest: str | None) -> str:
    """The time of a new op: this writer's clock, but never earlier than the newest op, so op
    times read in op order; unless the newest op is more than SWARMCTL_CLOCK_SKEW_S ahead of
    this clock. Then a clock ran ahead when it was written, and pinning every later op to it
    would let one bad clock capture the future (and --since/--until with it): the new op takes
    this writer's own time, earlier than the op before it (Writer.append_op lists it in
    time_breaks)."""
    skew = limits.clock_skew_s()  # checked on every write, so a bad setting never goes unnoticed
    if newest is None or newest <= now:
        return now
    from swarmctl import names

    return now if names.seconds_between(now, newest) > skew else newest


class Head(NamedTuple):
    """The newest op of a store: its number, time and hash (None: a store of format 1)."""

    op: int
    at: str
    hash: str | None


class Move(NamedTuple):
    """One ref move an op makes: `old` is what the ref must name now (None: must not exist)."""

    name: str
    old: str | None
    new: str | None


def _refuse_if_damaged(
    conn: Conn, moves: Sequence[Move], head_known: bool = False, chained: bool | None = None,
) -> dict[str, Any]:
    """The cheap checks every op makes of what it depends on, before writing anything: each ref
    it moves agrees with that ref's last move in the op log, and the newest op is well-formed
    (a known kind, a time, its link in the hash chain). A store that fails them is damaged:
    E_STORE_CORRUPT, nothing written. (`store check` makes the full check.) Returns what each
    ref names now, as read for the check (None: absent). `chained`: whether the store's format
    has the hash chain, as the write read it (None: ask)."""
    from swarmctl.store import check

    head = [] if head_known else check.head_problems(conn, chained)
    targets: dict[str, Any] = {}
    problems = head + check.ref_problems(conn, [m.name for m in moves], targets)
    if problems:
        from swarmctl.store.errors import damaged

        raise damaged(problems)
    return targets


class Writer:
    """What may be done inside `Store.write`: every op is appended through `append_op`."""

    def __init__(self, store: Store, actor: str, at: str, stored_format: int | None = None, upgraded_from: int | None = None) -> None:
        self.store = store
        self.conn = store.conn
        self.actor = actor
        self.at = at
        self.op: int | None = None
        self.hash: str | None = None  # the op's link in the hash chain, once sealed
        # The format the store recorded as this transaction began (None: ask), for the policy.
        self.stored_format = stored_format
        self.upgraded_from = upgraded_from  # the format this transaction upgraded the store from
        self._policy: rules.Policy | None | bool = False  # False: not read yet
        # What the op is made of, for its hash: its row and ref moves (append_op), changesets
        # (insert_changeset), the ops it reverted (reverts.record); nothing else writes them.
        self._appended: tuple[OpHead, list[MoveRow]] | None = None
        self.made: list[str] = []
        self.reverted: list[int] = []

    @property
    def policy(self) -> rules.Policy | None:
        """The store's policy in force, read once per transaction (None: it has none)."""
        if self._policy is False:
            from swarmctl.store import policies
            self._policy = policies.current(self.conn, self.stored_format)
        return self._policy  # type: ignore[return-value]

    def refuse_forbidden_moves(self, refs: Iterable[str]) -> None:
        """E_FORBIDDEN if the policy forbids this writer's actor to move any of `refs`. Every op
        is held to it in `append_op`; a tool asks first where it would otherwise say something
        else first (a compare-and-swap conflict: forbidden wins)."""
        policy = self.policy
        if policy is not None:
            from swarmctl import policy as rules  # here: a store without a policy never needs its rules

            for ref in refs:
                rules.refuse(rules.may_move(policy, self.actor, ref))

    def ref_target(self, name: str) -> str | None:
        from swarmctl.store import queries

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
        self.refuse_forbidden_moves(m.name for m in moves)
        chained = self.stored_format >= 2 if self.stored_format is not None else None
        targets = _refuse_if_damaged(self.conn, moves, self.store._head_is_own(), chained)
        # A guard: callers read the refs in this transaction and check first; a conflict is their bug.
        if any(targets[m.name] != m.old for m in moves):
            from swarmctl.store import conflicts
            raise conflicts.cas_mismatch(conflicts.find(self.conn, moves, since=None))
        op = self.conn.execute(
            "INSERT INTO ops(op, kind, actor, at, description, undoes) VALUES (?, ?, ?, ?, ?, ?) RETURNING op",
            (self.store._next_op(), kind, self.actor, self.at, description, undoes),
        ).fetchone()[0]
        for seq, m in enumerate(moves):
            self.conn.execute(
                "INSERT INTO ref_moves(op, seq, name, old, new, actor, kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (op, seq, m.name, m.old, m.new, self.actor, kind),
            )
            if m.new is None:
                self.conn.execute("DELETE FROM refs WHERE name = ?", (m.name,))
            else:
                self.conn.execute(
                    "INSERT INTO refs(name, target, op) VALUES (?, ?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET target = excluded.target, op = excluded.op",
                    (m.name, m.new, op),
                )
        previous = self._previous_at(op)
        if previous is not None and self.at < previous:
            self.conn.execute("INSERT INTO time_breaks(op) VALUES (?)", (op,))  # see op_time
        self.op = op
        appended = OpHead(op, kind, self.actor, self.at, description, undoes)
        self._appended = (appended, [MoveRow(m.name, m.old, m.new) for m in moves])
        return op

    def _head_before(self, op: int) -> Head | None:
        """The op before `op` as this transaction began, where the backend read it."""
        head = self.store._head
        return head if head is not None and head.op == op - 1 else None

    def _previous_at(self, op: int) -> str | None:
        head = self._head_before(op)
        if head is not None:
            return head.at
        row = self.conn.execute("SELECT at FROM ops WHERE op = ?", (op - 1,)).fetchone()
        return row[0] if row is not None else None

    def seal(self) -> None:
        """Record this transaction's op in the op log's hash chain, with all its content."""
        if self.op is not None:
            from swarmctl.store import chain

            head = self._head_before(self.op)
            previous = head.hash if head is not None and head.hash is not None else None
            row, moves = self._appended if self._appended is not None else (None, [])
            appended = chain.content(row, moves, self.made, self.reverted) if row is not None else None
            self.hash = chain.seal(self.conn, self.op, previous=previous, appended=appended)

    def insert_changeset(self, row: ChangesetRow) -> None:
        """Store a changeset made by this transaction's op (`row.op`; call after append_op)."""
        if self.op is None or row.op != self.op:
            raise RuntimeError("store a changeset as made by this transaction's op, after appending it")
        self.conn.execute(
            "INSERT INTO changesets(id, op, message, actor, at, parents, metadata, files) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, row.op, row.message, row.actor, row.at, json.dumps(row.parents),
             json.dumps(row.metadata, ensure_ascii=False), json.dumps(row.files, ensure_ascii=False)),
        )
        self.made.append(row.id)

    def insert_blob(self, blob_id: str, content: bytes) -> None:
        """A file's content under its id. Content already stored under the id must be this: a
        role with psql could have put other bytes there first, for an honest write to name (on
        a shared store, E_STORE_CORRUPT, and nothing is written)."""
        inserted = self.conn.execute(
            "INSERT INTO blobs(id, size, content) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (blob_id, len(content), content),
        ).rowcount
        if inserted == 1:
            return  # new: nothing to compare, and no need to read back what was just written
        stored = self.conn.execute("SELECT content FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        if stored is None or bytes(stored[0]) != content:
            from swarmctl.store.errors import Problem, damaged

            raise damaged([Problem("blob_id", f"file content {blob_id} does not hash to its id: it changed")])
