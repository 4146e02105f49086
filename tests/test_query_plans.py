"""`op log` reads a page at the cost of the page: every filter is answered by an index that
yields ops in op order, so SQLite never sorts (or reads) every match to find the newest 20."""

import itertools
import sqlite3

import pytest

from core_helpers import AGENT, build_golden_store
from swarmctl.store import queries
from swarmctl.store.schema import DB_FILE

FILTERS = {"ref": "main", "actor": AGENT, "kind": "ref_set"}


def plan(conn: sqlite3.Connection, q: queries.LogQuery, lower, upper) -> str:
    sql, params = queries.log_sql(q, lower, upper)
    return " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


def combinations():
    for n in range(len(FILTERS) + 1):
        for names in itertools.combinations(FILTERS, n):
            for bounds in [(None, None), (2, None), (None, 5), (2, 5)]:
                yield {name: FILTERS[name] for name in names}, bounds


@pytest.mark.parametrize("filters, bounds", list(combinations()), ids=str)
def test_every_filter_reads_in_op_order_through_an_index(sw, filters, bounds):
    build_golden_store(sw)
    conn = sqlite3.connect(sw.store / DB_FILE)
    query = queries.LogQuery(limit=20, after=bounds[0], before=bounds[1], **filters)
    text = plan(conn, query, *bounds)
    assert "TEMP B-TREE" not in text, text  # a sort of every match: cost grows with the log
    if "ref" in filters:
        assert "SEARCH m USING" in text and "name=?" in text, text
        assert " o " not in f"{text} ", text  # format 3: the moves carry their op's actor and kind
        index = "_".join(["ref_moves", *(f for f in ("actor", "kind") if f in filters)])
        if index != "ref_moves":
            assert f"COVERING INDEX {index} (name=? AND" in text, text
    elif "actor" in filters and "kind" in filters:
        assert "ops_actor_kind" in text, text
    elif "actor" in filters:
        assert "ops_actor" in text, text
    elif "kind" in filters:
        assert "ops_kind" in text, text


def test_the_store_runs_in_wal_mode_and_syncs_every_commit(sw):
    """NORMAL, not FULL: the store syncs the WAL itself after each commit, and the directory
    only for a new -wal file (tests/test_durability.py watches the syncs)."""
    build_golden_store(sw)
    conn = sqlite3.connect(sw.store / DB_FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    from swarmctl.store import Store

    store = Store.open(sw.store)
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    store.close()


def test_a_committed_write_leaves_the_wal_to_the_automatic_checkpoint(sw):
    """One disk sync per committed write: a process that wrote closes without folding the WAL
    into the database file (and without deleting -wal and -shm, which the next one would make
    again); the writer that grows the WAL past 1,000 pages folds it in. The next process reads
    the change from the WAL. (bench/perf.py counts the syncs.)"""
    from core_helpers import ALICE, as_, fold_wal

    build_golden_store(sw)
    fold_wal(sw.store)
    db_before = (sw.store / DB_FILE).read_bytes()
    ran = sw.process(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # closes as the last connection
    assert ran.exit == 0, ran.stdout
    assert (sw.store / DB_FILE).read_bytes() == db_before, "the write was checkpointed into the database on close"
    assert (sw.store / f"{DB_FILE}-wal").stat().st_size > 0
    assert sw.process("--repo", str(sw.store), "op", "log", "-n", "1").result["ops"][0]["op"] == 7


def test_keeping_the_wal_on_close_works_with_this_python_and_sqlite(sw):
    """The option is set through ctypes on Python 3.11: it must take, not silently fall back."""
    from swarmctl.store import Store
    from swarmctl.store.files import keep_wal_on_close

    build_golden_store(sw)
    store = Store.open(sw.store)
    try:
        assert keep_wal_on_close(store.conn, sw.store / DB_FILE)
        if not hasattr(store.conn, "setconfig"):  # Python 3.11: through the handle, checked first
            assert not keep_wal_on_close(store.conn, sw.tmp / "another.db")
    finally:
        store.close()
