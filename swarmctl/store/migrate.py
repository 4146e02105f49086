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

from swarmctl.store import chain
from swarmctl.store.schema import FORMAT_VERSION, OP_REVERTS, TIME_BREAKS
from swarmctl.store.sql import POSTGRES, Conn, dialect


def _to_2(conn: Conn) -> None:
    """Format 2: op times may go back after a clock that ran ahead (the ops where they do are
    listed in time_breaks), every op records its hash in the op log's chain, and the table of
    reverts (op_reverts) is always there."""
    conn.execute(TIME_BREAKS)
    for statement in OP_REVERTS.split(";"):  # made by a store's first revert before format 2
        if statement.strip():
            conn.execute(statement)
    conn.execute("ALTER TABLE ops ADD COLUMN hash TEXT")
    hashes = [(digest, op) for op, _, digest in chain.walk(conn)]
    conn.executemany("UPDATE ops SET hash = ? WHERE op = ?", hashes)


def _to_3(conn: Conn) -> None:
    """Format 3: a workflow's owner names its host and holds a lease (swarmctl/hosts.py), so
    that a store shared by many machines tells a live owner elsewhere from a dead one."""
    text = 'TEXT COLLATE "C"' if dialect(conn) == POSTGRES else "TEXT"
    conn.execute(f"ALTER TABLE workflows ADD COLUMN owner_host {text}")
    conn.execute(f"ALTER TABLE workflows ADD COLUMN owner_lease {text}")


# STEPS[n] moves a store from format n to n + 1.
STEPS: dict[int, Callable[[Conn], None]] = {
    1: _to_2,
    2: _to_3,
}


def stored_format(conn: Conn) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 0


def upgrade(conn: Conn) -> int | None:
    """Within the caller's write transaction: bring the store to FORMAT_VERSION. Returns the
    format it had (None: it was current already)."""
    found = stored_format(conn)
    if found >= FORMAT_VERSION:
        return None
    for version in range(found, FORMAT_VERSION):
        if version not in STEPS:
            raise RuntimeError(f"no upgrade step from store format {version}")
        STEPS[version](conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT_VERSION),))
    return found
