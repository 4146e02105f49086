"""`op log` reads a page at the cost of the page: every filter is answered by an index that
yields ops in op order, so SQLite never sorts (or reads) every match to find the newest 20."""

import itertools
import sqlite3

import pytest

from conftest import build_golden_store
from swarmctl.store import queries
from swarmctl.store.schema import DB_FILE

FILTERS = {"ref": "main", "actor": "agent/worker-17", "kind": "ref_set"}


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
    elif "actor" in filters and "kind" in filters:
        assert "ops_actor_kind" in text, text
    elif "actor" in filters:
        assert "ops_actor" in text, text
    elif "kind" in filters:
        assert "ops_kind" in text, text


def test_the_store_runs_in_wal_mode_and_syncs_every_commit(sw):
    build_golden_store(sw)
    conn = sqlite3.connect(sw.store / DB_FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    from swarmctl.store import Store

    store = Store.open(sw.store)
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()
