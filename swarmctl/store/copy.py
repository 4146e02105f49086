"""`store copy`: a whole store into a new one, of either kind, written once over the protocol.

Every table's rows go across as they are: ops keep their numbers and times, changesets their
ids, transactions and workflows their rows, so the copy's `op log` is the source's. The
destination is made by `Store.make` and filled in its first write transaction: all of it or
nothing, and never over an existing store. The source is read in one snapshot; with `fence`,
under its write lock instead, and marked as moved in the same transaction (see db.MOVED_TO).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from swarmctl.store import migrate, policies
from swarmctl.store.db import MOVED_TO, Store, Writer
from swarmctl.store.files import remove_database
from swarmctl.store.schema import DB_FILE, SCHEMA
from swarmctl.store.sql import Conn

BATCH = 2000
# In the order foreign keys allow; each with the columns both schemas share.
TABLES = (
    "ops", "changesets", "blobs", "ref_moves", "refs", "op_reverts", "time_breaks", "tokens",
    "txs", "tx_revisions", "tx_baselines", "workflows", "workflow_steps",
)
# Tables a local store of an older format may lack (read as it is): op_reverts and time_breaks
# before format 2, tokens before format 3. Its copy has them, empty.
_LATER = ("op_reverts", "time_breaks", "tokens")
# Rows of `meta` that belong to one store and are not copied.
_OWN_META = ("format", MOVED_TO)


class Copied(NamedTuple):
    rows: dict[str, int]  # per table


def _columns() -> dict[str, list[str]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        return {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in TABLES}
    finally:
        conn.close()


def copy_store(
    source: str | Path,
    destination: str | Path,
    *,
    actor: str,
    fence: bool = False,
    progress: Callable[[str, int], None] | None = None,
    may_fence: Callable[[Writer], None] | None = None,
) -> tuple[Store, Store, Copied]:
    """Copy the store at `source` into a new store at `destination`; both returned open.
    `may_fence` raises if the fence may not be set (asked in its transaction, before the copy)."""
    src = Store.open(source, readonly=not fence)
    counts: dict[str, int] = {}
    columns = _columns()

    def fill(conn: Conn) -> Callable[[Writer], None]:
        def into(w: Writer) -> None:
            for key, value in conn.execute("SELECT key, value FROM meta").fetchall():
                if key not in _OWN_META:
                    w.conn.execute(
                        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (key, value),
                    )
            w.store.before_load(w.conn)
            for table in TABLES:
                counts[table] = 0
                shared = _shared_columns(conn, table, columns[table])
                for batch in _batches(conn, table, ", ".join(shared)):
                    w.store.load_rows(w.conn, table, shared, batch)
                    counts[table] += len(batch)
                    if progress:
                        progress(table, counts[table])
            if "hash" not in _shared_columns(conn, "ops", columns["ops"]):
                # A source of format 1, read as it is (no --fence: never upgraded), has no hashes:
                # its copy, made in this format, records them as the upgrade would have. Without
                # them every write to the copy, and `store check`, found its chain broken.
                migrate.hash_every_op(w.conn)
            w.store.after_load(w.conn)  # before the policy: its guard may hold the copying role
            _copy_policy(conn, w)

        return into

    try:
        if fence:
            dst = _copy_fenced(src, destination, actor, fill, may_fence)
        else:
            with src.read() as conn:
                dst = Store.make(destination, actor, fill(conn))
    except BaseException:
        src.close()
        raise
    return src, dst, Copied(counts)


def _copy_fenced(
    src: Store, destination: str | Path, actor: str, fill: Callable[[Conn], Callable[[Writer], None]],
    may_fence: Callable[[Writer], None] | None,
) -> Store:
    """The copy made under the source's write lock, and the source fenced in that transaction;
    if that transaction does not commit, the copy is abandoned (`_abandon`)."""
    made: list[Store] = []
    try:
        with src.write(actor) as sw:
            if may_fence is not None:
                may_fence(sw)
            made.append(dst := Store.make(destination, actor, fill(sw.conn)))
            sw.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (MOVED_TO, dst.repo))
    except BaseException:
        if made and _unfenced(src):
            _abandon(made[0], src, actor)
        raise
    return dst


def _unfenced(src: Store) -> bool:
    """Whether the source is known to be unfenced (its fence's transaction did not commit)."""
    try:
        with src.read() as conn:
            return conn.execute("SELECT 1 FROM meta WHERE key = ?", (MOVED_TO,)).fetchone() is None
    except Exception:  # unknown: the copy is kept, as it would be had the fence committed
        return False


def _abandon(dst: Store, src: Store, actor: str) -> None:
    """A copy made whose source was not fenced after all (the fence's transaction failed, or a
    signal stopped it): the source stays the store, and the copy must take no write. A local
    copy is removed (this process made it a moment ago, and said nothing of it); one on a
    server, whose tables this never drops, is fenced to its source."""
    try:
        if dst.path is not None:
            dst.close()
            remove_database(os.path.join(dst.path, DB_FILE))
        else:
            with dst.write(actor) as w:
                w.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (MOVED_TO, src.repo))
            dst.close()
    except Exception:  # as much as could be done: the error that stopped the copy is the one to report
        pass


# A source of format 2 or older has no actor and kind beside its ref moves: they are its ops'.
_SOURCES = {"ref_moves": "ref_moves m JOIN ops o ON o.op = m.op"}
_FROM_SOURCE = {"ref_moves": {"actor": "o.actor", "kind": "o.kind"}}


def _copy_policy(conn: Conn, w: Writer) -> None:
    """The policy goes with the store (every version, so `op undo` of a policy change works in
    the copy too), and with it the format that makes an older swarmctl refuse the copy."""
    versions = policies.all_versions(conn)
    if versions:
        migrate.raise_for_policy(w.conn)
        w.conn.executemany("INSERT INTO policies(op, text) VALUES (?, ?)", [tuple(v) for v in versions[:-1]])
        policies.record(w, versions[-1].op, versions[-1].text)


def _shared_columns(conn: Conn, table: str, wanted: list[str]) -> list[str]:
    """The columns of `table` the source has: an older store (read as it is) lacks those of
    later formats, which the copy leaves null (ref moves take theirs from the ops: _SOURCES)."""
    if table in _SOURCES:
        return wanted
    try:
        cur = conn.execute(f"SELECT * FROM {table} LIMIT 0")
    except Exception as exc:  # a table of a later format: _batches passes it by
        if table in _LATER and "no such table" in str(exc):
            return wanted
        raise
    have = {d[0] for d in cur.description}
    return [c for c in wanted if c in have]


def _batches(conn: Conn, table: str, cols: str) -> Iterator[list[tuple]]:
    if table in _SOURCES:
        taken = _FROM_SOURCE[table]
        cols = ", ".join(taken.get(c, f"m.{c}") for c in cols.split(", "))
    try:
        rows = conn.execute(f"SELECT {cols} FROM {_SOURCES.get(table, table)} ORDER BY 1")
    except Exception as exc:  # a store made before that table's format has none (_LATER)
        if table in _LATER and "no such table" in str(exc):
            return
        raise
    while True:
        batch = [tuple(r) for r in rows.fetchmany(BATCH)]
        if not batch:
            return
        yield batch
