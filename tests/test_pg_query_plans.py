"""On PostgreSQL too, `op log` reads a page at the cost of the page: every query it runs is
answered through an index, never by reading (or sorting) a whole table. As
tests/test_query_plans.py does for SQLite, but through the server's planner, on a store of
60,000 ops whose statistics the server knows (ANALYZE): on a small table a sequential scan is
cheapest, so a plan on a few rows says nothing."""

import json

import pytest
from core_helpers import ALICE
from swarm import Swarm

from swarmctl.store.postgres.url import parse
from swarmctl.store.sql import PgConn

pytestmark = pytest.mark.backends("postgres")

OPS = 60_000
BIG = {"ops", "ref_moves", "changesets"}

FILL = f"""
INSERT INTO ops(op, kind, actor, at, description)
SELECT i, CASE WHEN i % 2000 = 0 THEN 'undo' ELSE (ARRAY['ref_set', 'changeset_create', 'ref_delete'])[1 + i % 3] END,
       CASE WHEN i % 2000 = 0 THEN 'agent/rare' ELSE 'agent/w' || (i % 50) END,
       to_char(timestamp '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'op ' || i
FROM generate_series(2, {OPS}) AS i;
INSERT INTO changesets(id, op, message, actor, at, parents, metadata, files)
SELECT md5(i::text) || md5((i + 1)::text), i, 'c', 'agent/w1', '2026-01-01T00:00:00.000Z', '[]', '{{}}', '{{}}'
FROM generate_series(2, {OPS}, 2) AS i;
INSERT INTO ref_moves(op, seq, name, old, new)
SELECT i, 0, 'r' || (i % 100), NULL, NULL FROM generate_series(3, {OPS}, 3) AS i;
UPDATE head SET last_op = {OPS};
ANALYZE;
"""

# A filter that matches few ops must be read through its index: walking the op log backwards
# and filtering would read all of it to fill a page. (For a common value either way is flat.)
COMMANDS = [
    [],
    ["--actor", "agent/rare"],
    ["--kind", "undo"],
    ["--actor", "agent/rare", "--kind", "undo"],
    ["--actor", "agent/w7", "--kind", "ref_set"],
    ["--ref", "r42"],
    ["--before", "30000"],
    ["--after", "100"],
    ["--since", "2026-01-01T10:00:00Z", "--until", "2026-01-01T11:00:00Z"],
]


@pytest.fixture(scope="module")
def big_store(pg_cluster, tmp_path_factory):
    """Made once for the module (filling and analysing 60,000 ops is most of its time): each
    test only reads it, with `op log`."""
    store = pg_cluster.new_store_url()
    with pytest.MonkeyPatch.context() as mp:
        Swarm(tmp_path_factory.mktemp("big"), mp, store).ok("--as", ALICE, "init", store)
    url = parse(store)
    import psycopg

    with psycopg.connect(url.libpq, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{url.schema}"')
        raw.execute(FILL)
    return store, url


def _recorded(sw, monkeypatch, store: str, args: list[str]) -> list[tuple[str, object]]:
    """Every query `op log ARGS` sends (in this process), with its parameters."""
    seen: list[tuple[str, object]] = []
    real = PgConn.execute

    def recording(self, sql, params=()):
        seen.append((sql, params))
        return real(self, sql, params)

    monkeypatch.setattr(PgConn, "execute", recording)
    ran = sw("--repo", store, "op", "log", "-n", "20", *args)
    monkeypatch.undo()
    assert ran.exit == 0, ran.stdout
    return seen


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "plain")
def test_every_query_of_a_log_page_stays_on_an_index(sw, big_store, monkeypatch, args):
    store, url = big_store
    queries = _recorded(sw, monkeypatch, store, args)
    assert queries, "op log ran no query"
    import psycopg

    with psycopg.connect(url.libpq, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{url.schema}"')
        look = PgConn(raw)
        for sql, params in queries:
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            plan = look.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()[0]
            plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
            where = f"{sql} {params}: {json.dumps(plan)[:2000]}"
            for node in _nodes(plan):
                assert not (node["Node Type"] == "Seq Scan" and node.get("Relation Name") in BIG), where
                assert node["Node Type"] != "Sort" or node["Plan Rows"] <= 1000, where
            if " LIMIT " in sql and "ORDER BY" in sql:  # the page itself: through its filter's index
                used = {node.get("Index Name") for node in _nodes(plan)}
                assert used & _expected_indexes(args), where


def _expected_indexes(args: list[str]) -> set[str]:
    """The indexes that yield a filter's ops in op order (as on SQLite, test_query_plans.py)."""
    if "--ref" in args:
        return {"ref_moves_name_op_key"}
    if "agent/w7" in args:
        return {"ops_actor_kind", "ops_actor", "ops_pkey"}  # a common actor and kind
    if "--actor" in args and "--kind" in args:
        return {"ops_actor_kind"}
    if "--actor" in args:
        return {"ops_actor", "ops_actor_kind"}
    if "--kind" in args:
        return {"ops_kind"}
    return {"ops_pkey"}
