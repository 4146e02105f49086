"""A store on a PostgreSQL server: one schema of a database, shared by many machines.

Imported only for a `postgresql://` or `postgres://` URL, so psycopg costs a local store
nothing. The queries are store/'s own (written once for both dialects, see store/sql.py); what
is PostgreSQL's is here: connecting, the schema, and how a write transaction runs:

- every write takes the row lock on `head` first (READ COMMITTED), so writers run one at a
  time, and numbers its op from it: gapless, in commit order, across all machines;
- `SET LOCAL lock_timeout` bounds the wait (SWARMCTL_LOCK_TIMEOUT): past it, E_BUSY;
- op times come from the server's clock (`clock_timestamp()`), never earlier than the newest
  op's, as the same millisecond text as on SQLite;
- each op records the request that appended it, so that after a connection lost during COMMIT
  the outcome can be looked up instead of guessed (E_UNAVAILABLE, `commit_unknown`, only if
  it cannot be).
"""

from __future__ import annotations

import os
import uuid
from typing import Callable

import psycopg

from swarmctl.envelope import SwarmError
from swarmctl.names import digits
from swarmctl.store.db import Head, Store, Writer, op_time
from swarmctl.store import policies
from swarmctl.store.errors import NoSchema
from swarmctl.store.files import lock_timeout
from swarmctl.store.postgres import errors, guard
from swarmctl.store.postgres.schema import SCHEMA
from swarmctl.store.postgres.url import StoreUrl, parse
from swarmctl.store.schema import FORMAT_VERSION, POLICY_FORMAT, readable_format
from swarmctl.store.sql import PgConn

DEFAULT_CONNECT_TIMEOUT_S = 10
# A client stopped inside a transaction (SIGSTOP, a hung machine) must not hold the head row,
# and with it every writer of the store, for longer than this: the server ends its session.
# A timeout set already (postgresql.conf, ALTER ROLE/DATABASE ... SET, PGOPTIONS) is kept.
IDLE_IN_TRANSACTION_TIMEOUT = "60s"
_NOW = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""


class PostgresStore(Store):
    kind = "postgres"
    driver_errors = (psycopg.Error,)

    def __init__(self, url: StoreUrl, conn: PgConn, readonly: bool) -> None:
        super().__init__(url.shown, conn, readonly)
        self.url = url
        self.request: str | None = None
        self._clock = ""  # the server's time, as the write's first query read it

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, where, *, readonly: bool = False) -> "PostgresStore":
        url = parse(str(where))
        conn = _connect(url)
        try:
            # The session's setting, the schema and the format check: one round trip, every command.
            row = conn.native(
                f"{_SESSION}; SET search_path TO {_ident(url.schema)}; SELECT value FROM meta WHERE key = 'format'"
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            refused = _schema_refused(conn, url)  # a schema the role may not use reads as none
            conn.close()
            raise (refused or _not_a_store(url)) from None
        except psycopg.Error as exc:
            conn.close()
            raise errors.translate(exc, url) from exc
        store = cls(url, conn, readonly)
        try:
            if row is None and conn.native("SELECT NOT EXISTS (SELECT 1 FROM ops)").fetchone()[0]:
                raise _not_a_store(url, unfinished=True)  # see `make`: no format, nothing in it
            store._check_format(row)
        except BaseException:
            conn.close()
            raise
        return store

    def _check_format(self, row) -> None:
        if row is None or not digits(str(row[0])) or int(row[0]) < 1:  # formats start at 1
            raise SwarmError(
                "E_STORE_CORRUPT",
                f"the store at {self.repo} records no store format",
                details={"repo": self.repo},
                hint="Nothing was written. Restore the store from a backup, or inspect it with `psql`.",
            )
        found = int(row[0])
        self.format = found
        if not readable_format(found):
            raise SwarmError(
                "E_STORE_VERSION",
                f"the store at {self.repo} has format {found}; this swarmctl reads format {POLICY_FORMAT} and older",
                details={"repo": self.repo, "format": found, "supported": POLICY_FORMAT},
                hint="Upgrade swarmctl to use this store. Nothing was written.",
            )

    @classmethod
    def make(cls, where, actor: str, fill: Callable[[Writer], None]) -> "PostgresStore":
        """The schema and its tables (one transaction), then the format and `fill` (a second,
        the store's first write): a store is there only once both committed. An init stopped
        between the two left empty tables and no format, which the next init fills."""
        url = parse(str(where))
        conn = _connect(url)
        store = cls(url, conn, readonly=False)
        schema = _ident(url.schema)
        try:
            try:
                conn.native(_SESSION)
                conn.native(f"BEGIN; CREATE SCHEMA IF NOT EXISTS {schema}; SET LOCAL search_path TO {schema}")
                if conn.native("SELECT to_regclass('meta')").fetchone()[0] is None:
                    conn.native(SCHEMA)
                    conn.execute("INSERT INTO head(id, last_op) VALUES (1, 0)")
                elif conn.execute("SELECT 1 FROM meta WHERE key = 'format'").fetchone():
                    raise _already_a_store(url)
                conn.native("COMMIT")
            except BaseException:
                store._rollback()
                raise
            conn.native(f"SET search_path TO {schema}")
            with store.write(actor) as w:
                conn.execute("INSERT INTO meta(key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
                fill(w)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.errors.UniqueViolation) or (
                isinstance(exc, SwarmError) and isinstance(exc.__cause__, psycopg.errors.UniqueViolation)
            ):
                raise _already_a_store(url, " (made by another process just now)") from None
            if isinstance(exc, (psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject)):
                raise SwarmError(  # a table of a store's name, but no store's meta: not ours
                    "E_STATE",
                    f"the schema {url.schema} already holds something of the name of a store's table, but no "
                    f"store: {errors.scrub_text(exc, url)}",
                    details={"path": url.shown, "schema": url.schema},
                    hint="Nothing was made. Name another schema with ?schema=NAME in the URL, or drop what is "
                    "there if it is yours.",
                ) from None
            if isinstance(exc, psycopg.Error):
                raise errors.translate(exc, url) from exc
            raise
        return store

    def policy_changed(self, conn, policy) -> None:
        guard.install(conn, policy)

    def verify_actor(self, writer: Writer) -> None:
        guard.verify(writer.conn, writer.policy, writer.actor)

    def auth_of(self, actor: str | None) -> str | None:
        if self.format < POLICY_FORMAT:  # a store that never had a policy: nothing to ask
            return None
        try:
            return guard.auth(self.conn, policies.current(self.conn), actor)
        except psycopg.Error as exc:
            raise errors.translate(exc, self.url) from exc

    def before_load(self, conn) -> None:
        # A foreign key checks each row as it comes (a trigger a row, and the deferred ones
        # queued to COMMIT), and each index takes each row; added back after the load, a key
        # checks all rows in one join and an index is built in one sort, which makes `store
        # copy` of a big store several times faster. The schema is this transaction's own
        # until it commits: no one else sees it without them. Primary keys and UNIQUE stay.
        self._keys = conn.native(_FOREIGN_KEYS).fetchall()
        self._indexes = conn.native(_PLAIN_INDEXES).fetchall()
        for table, name, _ in self._keys:
            conn.native(f"ALTER TABLE {table} DROP CONSTRAINT {_ident(name)}")
        for name, _ in self._indexes:
            conn.native(f"DROP INDEX {name}")

    def load_rows(self, conn, table: str, columns: list[str], rows: list[tuple]) -> None:
        # COPY, not INSERTs: one statement a batch, parsed once, so a store of a million ops
        # crosses in minutes rather than in the better part of an hour.
        with conn.raw.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def after_load(self, conn) -> None:
        for _, definition in getattr(self, "_indexes", ()):
            conn.native(definition)
        for table, name, definition in getattr(self, "_keys", ()):
            conn.native(f"ALTER TABLE {table} ADD CONSTRAINT {_ident(name)} {definition}")
        self._keys, self._indexes = [], []
        conn.native("UPDATE head SET last_op = (SELECT COALESCE(MAX(op), 0) FROM ops) WHERE id = 1")
        conn.native("SELECT setval(pg_get_serial_sequence('txs', 'tx'), (SELECT COALESCE(MAX(tx), 0) + 1 FROM txs), false)")

    # --- the transaction helper's steps (see Store.write) ---------------------------------

    def translate(self, exc: BaseException) -> SwarmError:
        return errors.translate(exc, self.url)

    def _begin_read(self) -> None:
        self.conn.format = None
        self.conn.native("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _end_read(self) -> None:
        self.conn.native("COMMIT")

    def _begin_write(self) -> str:
        # SQLite's timeout 0 is "fail at once"; PostgreSQL's lock_timeout 0 is "wait for ever".
        ms = max(1, int(lock_timeout() * 1000))
        self.request = uuid.uuid4().hex
        self.conn.format = None
        found = self.conn.native(
            f"BEGIN; SET LOCAL lock_timeout = '{ms}ms'; SELECT last_op FROM head WHERE id = 1 FOR UPDATE"
        ).fetchone()
        if found is None:
            raise SwarmError(
                "E_STORE_CORRUPT",
                f"the store at {self.repo} has no head row",
                details={"repo": self.repo},
                hint="Nothing was written. Restore the store from a backup, or inspect it with `psql`.",
            )
        self._read_newest()
        newest = self._head.op if self._head is not None else 0
        if found[0] != newest:  # the next op's number would be taken, or skip some (`store check`: head_row)
            from swarmctl.store.errors import Problem, damaged

            raise damaged([Problem("head_row", f"the head row names op {found[0]}, but the newest op is {newest}")])
        return self._now()

    def _read_newest(self) -> None:
        """The newest op and the server's clock, in one round trip. The newest op is the write's
        `_head` (its time and hash, which the op appended next follows): the head row is
        locked, so no other writer appends meanwhile."""
        hashed = "hash" if self.format >= 2 else "NULL"  # a format-1 store has no hashes
        self._clock, op, at, hashed_as = self.conn.native(
            f"SELECT {_NOW}, newest.* FROM (SELECT 1) AS one "
            f"LEFT JOIN (SELECT op, at, {hashed} FROM ops ORDER BY op DESC LIMIT 1) AS newest ON true"
        ).fetchone()
        self._head = Head(op, at, hashed_as) if op is not None else None

    def _now(self) -> str:
        """The server's now (read with the newest op), but never earlier than the newest op,
        within the clock skew allowed (store.db.op_time)."""
        return op_time(self._clock, self._head.at if self._head is not None else None)

    def _next_op(self) -> int:
        return self.conn.native("UPDATE head SET last_op = last_op + 1 WHERE id = 1 RETURNING last_op").fetchone()[0]

    def _commit(self, writer: Writer) -> None:
        if writer.op is not None:
            self.conn.native("UPDATE ops SET request = %s WHERE op = %s", (self.request, writer.op))
        try:
            self.conn.native("COMMIT")
        except psycopg.OperationalError as exc:
            self._commit_outcome(writer, exc)

    def _commit_outcome(self, writer: Writer, exc: psycopg.OperationalError) -> None:
        """The connection failed during COMMIT: did the write commit? Ask the server once more,
        on a new connection, once the head row is free (so the old transaction has ended)."""
        unknown = errors.unavailable(
            self.url,
            f"lost the connection to the store's database server during COMMIT, and could not learn "
            f"whether the write committed: {errors.scrub_text(exc, self.url)}",
            commit_unknown=True,
            request=self.request,
        )
        if writer.op is None:
            raise unknown from exc
        try:
            conn = _connect(self.url)
            # The session's settings first, on their own: in one batch with BEGIN they would
            # belong to the transaction, and its ROLLBACK would take the search path back.
            conn.native(f"{_SESSION}; SET search_path TO {_ident(self.url.schema)}")
            ms = max(1, int(lock_timeout() * 1000))
            conn.native(f"BEGIN; SET LOCAL lock_timeout = '{ms}ms'; SELECT last_op FROM head WHERE id = 1 FOR UPDATE")
            found = conn.native("SELECT op FROM ops WHERE request = %s", (self.request,)).fetchone()
            conn.native("ROLLBACK")
        except (psycopg.Error, SwarmError):
            raise unknown from exc
        self.conn = conn
        if found is None:  # it did not commit: nothing was written
            raise errors.unavailable(
                self.url, f"lost the connection to the store's database server during COMMIT; the write did "
                f"not commit: {errors.scrub_text(exc, self.url)}", commit_unknown=False,
            ) from exc
        # It committed, as op writer.op: the result the tool computed stands.

    def _rollback(self) -> None:
        try:
            if not self.conn.raw.closed:
                self.conn.native("ROLLBACK")
        except psycopg.Error:
            pass  # a lost connection: the server rolls the transaction back itself


def _connect(url: StoreUrl) -> PgConn:
    options = {}
    if "connect_timeout" not in url.libpq and "PGCONNECT_TIMEOUT" not in os.environ:
        options["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT_S
    try:
        # A port that is not a number: libpq says so only after looking the host up in DNS
        # (`localhost:notaport` was E_UNAVAILABLE, "failed to resolve host"), and only for a
        # host name; asked here, it is the URL's fault whatever the host, and nothing is tried.
        for port in str(psycopg.conninfo.conninfo_to_dict(url.libpq).get("port") or "").split(","):
            if port and not digits(port.strip()):
                raise psycopg.ProgrammingError(f'invalid integer value "{port}" for connection option "port"')
            if port and not 0 < int(port) < 65536:
                raise psycopg.ProgrammingError(f'invalid port number: "{port}"')
        raw = psycopg.connect(url.libpq, autocommit=True, application_name="swarmctl", **options)
    except psycopg.Error as exc:
        raise errors.connect_failure(exc, url) from None
    return PgConn(raw)


# A connection's first statement (in the batch of its first round trip): a stopped client must
# not hold the head row, unless the server, the database, the role or PGOPTIONS set a timeout.
_SESSION = (
    f"SELECT set_config('idle_in_transaction_session_timeout', '{IDLE_IN_TRANSACTION_TIMEOUT}', false) "
    "WHERE current_setting('idle_in_transaction_session_timeout') = '0'"
)


# What before_load sets aside: the store's foreign keys, and its indexes that back no constraint.
_FOREIGN_KEYS = (
    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE contype = 'f' AND connamespace = current_schema()::regnamespace ORDER BY oid"
)
_PLAIN_INDEXES = (
    "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = current_schema()::regnamespace "
    "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) ORDER BY 1"
)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _already_a_store(url: StoreUrl, why: str = "") -> SwarmError:
    return SwarmError(
        "E_STATE",
        f"there is already a store at {url.shown}{why}",
        details={"path": url.shown},
        hint="Use it with --repo, or name another schema with ?schema=NAME in the URL.",
    )


def _schema_refused(conn: PgConn, url: StoreUrl) -> SwarmError | None:
    """E_FORBIDDEN if the store's schema exists but this role has no USAGE on it: PostgreSQL's
    search_path passes such a schema by, so its tables read as missing, which said "no store
    here; create one with init" of a store that is there. None if the schema is not there."""
    try:
        row = conn.native(
            "SELECT has_schema_privilege(oid, 'USAGE'), current_user FROM pg_namespace WHERE nspname = %s", (url.schema,)
        ).fetchone()
    except psycopg.Error:
        return None
    if row is None or row[0]:
        return None
    return errors.forbidden(url, f"the role {row[1]} may not use the schema {url.schema} (no USAGE on it), where the store is")


def _not_a_store(url: StoreUrl, unfinished: bool = False) -> NoSchema:
    return NoSchema(url.shown, url.schema, unfinished)
