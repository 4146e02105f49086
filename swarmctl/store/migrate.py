"""The one path by which a store moves to a newer format.

A store records its format (`meta.format`). This swarmctl reads every older format as it is,
and never writes while it reads. The first write to an older store, or `swarmctl store
upgrade`, runs each step from the store's format to FORMAT_VERSION, in the write's own
transaction: a store is upgraded whole or not at all, and the op that write appends already
follows the new format. A later format change adds one step to STEPS (and bumps FORMAT_VERSION
in schema.py, whose SCHEMA is what a new store is made with): nothing else needs to know.

Steps are written in the SQL both backends accept (swarmctl/store/sql.py).
"""

from __future__ import annotations

from typing import Callable

from swarmctl.envelope import SwarmError
from swarmctl.store import chain
from swarmctl.store.schema import (
    FORMAT_VERSION,
    OP_REVERTS,
    POLICIES,
    POLICY_FORMAT,
    REF_MOVES_INDEXES,
    SCHEMA,
    TIME_BREAKS,
    tokens_table,
)
from swarmctl.store.sql import SQLITE, Conn, dialect, record_format, stored_format


def _to_2(conn: Conn) -> None:
    """Format 2: op times may go back after a clock that ran ahead (the ops where they do are
    listed in time_breaks), every op records its hash in the op log's chain, and the table of
    reverts (op_reverts) is always there."""
    conn.execute(TIME_BREAKS)
    for statement in OP_REVERTS.split(";"):  # made by a store's first revert before format 2
        if statement.strip():
            conn.execute(statement)
    conn.execute("ALTER TABLE ops ADD COLUMN hash TEXT")
    hash_every_op(conn)


def hash_every_op(conn: Conn) -> None:
    """Record each op's hash in the chain (ops of format 1 have none): the upgrade to format 2,
    and `store copy` of a format-1 store read as it is (its copy is made in this format)."""
    hashes = [(link.computed, link.op) for link in chain.walk(conn)]
    conn.executemany("UPDATE ops SET hash = ? WHERE op = ?", hashes)


def _to_3(conn: Conn) -> None:
    """Format 3: each ref move carries its op's actor and kind, indexed by ref, so `--ref` with
    `--actor`/`--kind` reads a page at the cost of the page; and the tokens table is always
    there (before, a store's first `token create` made it)."""
    sqlite = dialect(conn) == SQLITE
    text = "TEXT" if sqlite else 'TEXT COLLATE "C"'
    for column in ("actor", "kind"):
        conn.execute(f"ALTER TABLE ref_moves ADD COLUMN {column} {text}")
    conn.execute(
        "UPDATE ref_moves SET actor = (SELECT o.actor FROM ops o WHERE o.op = ref_moves.op), "
        "kind = (SELECT o.kind FROM ops o WHERE o.op = ref_moves.op)"
    )
    for statement in REF_MOVES_INDEXES.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(tokens_table("TEXT", "INTEGER", "INTEGER") if sqlite else tokens_table(text, "BIGINT", "BOOLEAN"))


def _to_4(conn: Conn) -> None:
    """Format 4: a workflow's owner names its host and holds a lease (swarmctl/hosts.py), so
    that a store shared by many machines tells a live owner elsewhere from a dead one."""
    text = "TEXT" if dialect(conn) == SQLITE else 'TEXT COLLATE "C"'
    conn.execute(f"ALTER TABLE workflows ADD COLUMN owner_host {text}")
    conn.execute(f"ALTER TABLE workflows ADD COLUMN owner_lease {text}")


# STEPS[n] moves a store from format n to n + 1.
STEPS: dict[int, Callable[[Conn], None]] = {
    1: _to_2,
    2: _to_3,
    3: _to_4,
}


# What each format's step adds that no earlier format has (a column, or a table no older
# store makes on its own): by these, a store's tables tell which format they are.
MARKS: dict[int, tuple[str, str | None]] = {
    2: ("ops", "hash"),
    3: ("ref_moves", "actor"),
    4: ("workflows", "owner_host"),
    5: ("policies", None),  # POLICY_FORMAT
}


def _has(conn: Conn, table: str, column: str | None) -> bool:
    if dialect(conn) == SQLITE:
        if column is None:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None
        return conn.execute("SELECT 1 FROM pragma_table_info(?) WHERE name = ?", (table, column)).fetchone() is not None
    # pg_catalog, which every role reads (information_schema shows only what the role may use)
    where = "c.relnamespace = current_schema()::regnamespace AND c.relname = ? AND c.relkind IN ('r', 'p')"
    if column is None:
        return conn.execute(f"SELECT 1 FROM pg_class c WHERE {where}", (table,)).fetchone() is not None
    return conn.execute(
        f"SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE {where} "
        "AND a.attname = ? AND NOT a.attisdropped", (table, column),
    ).fetchone() is not None


def format_mismatch(conn: Conn) -> str | None:
    """Why the store's tables are not those of the format it records (None: they are). A store
    of this swarmctl's format (or the policy format after it) has every table a new store is
    made with; older formats made some tables only when first needed, so they are not asked."""
    recorded = stored_format(conn)
    for version, (table, column) in MARKS.items():
        if _has(conn, table, column) != (version <= recorded):
            what = f"table {table}" if column is None else f"column {table}.{column}"
            has = "has" if version > recorded else "lacks"
            return f"the store records format {recorded} but {has} the {what} of format {version}"
    if recorded >= FORMAT_VERSION:
        for table in _made_tables(dialect(conn) == SQLITE):
            if not _has(conn, table, None):
                return f"the store records format {recorded} but lacks its table {table}"
    return None


def _made_tables(sqlite: bool) -> list[str]:
    """The tables a new store is made with, in the order it makes them."""
    import re

    if sqlite:
        text = SCHEMA
    else:
        from swarmctl.store.postgres.schema import SCHEMA as text
    return list(dict.fromkeys(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", text)))


def upgrade(conn: Conn) -> int | None:
    """Within the caller's write transaction: bring the store to FORMAT_VERSION. Returns the
    format it had (None: it was current already). A store whose tables are not those of the
    format it records is E_STORE_CORRUPT, and not touched."""
    found = stored_format(conn)
    if found >= FORMAT_VERSION:
        return None
    require_tables(conn)
    for version in range(found, FORMAT_VERSION):
        STEPS[version](conn)
    record_format(conn, FORMAT_VERSION)
    return found


def require_tables(conn: Conn) -> None:
    """E_STORE_CORRUPT, naming what is wrong, where the store's tables are not those of the
    format it records: such a store is not upgraded, nor called upgraded."""
    mismatch = format_mismatch(conn)
    if mismatch is not None:
        raise SwarmError(
            "E_STORE_CORRUPT",
            f"{mismatch}: it cannot be upgraded",
            hint="Nothing was written. Restore the store from a backup, or inspect it with `sqlite3` (or `psql`).",
        )


def _to_policy_format(conn: Conn) -> None:
    """POLICY_FORMAT: the store has a policy (table `policies`, swarmctl/store/policies.py)."""
    conn.execute(POLICIES)


def raise_for_policy(conn: Conn) -> bool:
    """Within the caller's write transaction (which `Store.write` began by bringing the store to
    FORMAT_VERSION): raise the store to POLICY_FORMAT, for its first policy. A store gets that
    format only then, so every store without a policy keeps the format an older swarmctl reads.
    Returns whether it was raised.

    POLICY_FORMAT is FORMAT_VERSION + 1: a later format change must move it up and make its
    step hold for a store that has a policy too."""
    if stored_format(conn) >= POLICY_FORMAT:
        return False
    _to_policy_format(conn)
    record_format(conn, POLICY_FORMAT)
    return True
