"""The connection the store's queries run on, for either kind of store.

Every query in store/ is written once, in the SQL both SQLite and PostgreSQL accept, with `?`
placeholders (or `:name` with a dict): `conn.execute(sql, params)`, then `fetchone()`,
`fetchall()`, iteration or `rowcount` on what it returns. On SQLite `conn` is the driver's own
connection, untouched (nothing stands between a local read and SQLite); on PostgreSQL it is a
`PgConn`, which rewrites the placeholders into psycopg's. Where the dialects truly differ, a
query asks `dialect(conn)` and the difference sits beside it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Protocol, Sequence

from swarmctl.names import digits


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """What store/ queries need of a connection: the DB-API subset both drivers share."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ...) -> Cursor: ...

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Any: ...


SQLITE = "sqlite"
POSTGRES = "postgres"


def dialect(conn: Conn) -> str:
    """Which SQL the connection speaks: SQLITE or POSTGRES."""
    return getattr(conn, "dialect", SQLITE)


def starts_with(conn: Conn, column: str, prefix: str) -> tuple[str, str]:
    """A condition that `column` starts with `prefix`, and its one parameter: PostgreSQL's
    `LIKE` with `%`, `_` and the escape character escaped; on SQLite `GLOB` (SQLite's `LIKE`
    ignores the case of ASCII letters; `GLOB` does not) with `*`, `?` and `[` escaped. Both
    compare the column's code points (`COLLATE "C"`, SQLite's BINARY), so both find the same
    rows, through the column's index.

    `column` is our own SQL, never a caller's text."""
    if dialect(conn) == POSTGRES:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"{column} LIKE ? ESCAPE '\\'", escaped + "%"
    escaped = re.sub(r"([*?\[])", r"[\1]", prefix)
    return f"{column} GLOB ?", escaped + "*"


_NAMED = r"(?<![:\w]):([A-Za-z_]\w*)"  # compiled by `re` when first used: PostgreSQL only
_cache: dict[tuple[str, bool], str] = {}


def to_pyformat(sql: str, named: bool) -> str:
    """`?` and `:name` placeholders as psycopg's `%s` and `%(name)s` (a literal `%` doubled).

    Our SQL never has a `?` or a `:word` inside a string literal: placeholders are the only ones.
    """
    key = (sql, named)
    found = _cache.get(key)
    if found is None:
        text = sql.replace("%", "%%")
        text = re.sub(_NAMED, r"%(\1)s", text) if named else text.replace("?", "%s")
        found = _cache[key] = text
    return found


def stored_format(conn: Conn) -> int:
    """The store's format as recorded (store/migrate.py moves it forward). On PostgreSQL it is
    read once a transaction (a write asks several times, and each asking is a round trip to the
    server); the transaction helper forgets it at each BEGIN."""
    known = getattr(conn, "format", None)
    if known is not None:
        return known
    row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if row is None or not digits(str(row[0])):
        return 0  # not kept: a new store records its format within its first write
    found = int(row[0])
    if isinstance(conn, PgConn) and conn.in_transaction():
        conn.format = found
    return found


def record_format(conn: Conn, value: int) -> None:
    """Within a write: the store's format is now `value`."""
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(value),))
    if isinstance(conn, PgConn):
        conn.format = value


class PgConn:
    """A psycopg connection that takes the store's portable SQL (see the module's docstring)."""

    dialect = POSTGRES

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.format: int | None = None  # the store's format, as read in this transaction

    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != 0  # psycopg.pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        if not params:  # no placeholders: psycopg takes the text as it is
            return self.raw.execute(sql)
        named = isinstance(params, dict)
        return self.raw.execute(to_pyformat(sql, named), params)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(to_pyformat(sql, False), list(seq))
        return cur

    def native(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """PostgreSQL's own SQL, as written (psycopg placeholders). Of several statements, the
        cursor holds the last one's rows."""
        cur = self.raw.execute(sql, params)
        while cur.nextset():
            pass
        return cur

    def close(self) -> None:
        self.raw.close()
