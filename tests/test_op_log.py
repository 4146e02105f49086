"""`op log` and `op show`: newest first, filters, cursors, --reverse."""

import re
import pytest
import time

from core_helpers import AGENT, ALICE, as_, build_golden_store, build_log_store
from swarmctl.envelope import line_safe

pytestmark = pytest.mark.backends("sqlite", "postgres")


def ops_of(ran) -> list[int]:
    return [o["op"] for o in ran.result["ops"]]


def test_op_log_pages_with_cursors(sw, golden):
    build_log_store(sw)
    log = ("--repo", str(sw.store), "op", "log")
    first = sw(*log, "-n", "3")
    older = sw(*log, "-n", "3", "--before", "7")
    oldest = sw(*log, "-n", "3", "--before", "4")
    newer = sw(*log, "-n", "2", "--after", "3")
    newest = sw(*log, "-n", "5", "--after", "7")
    between = sw(*log, "--after", "2", "--before", "6")
    reversed_ = sw(*log, "-n", "3", "--reverse")

    assert (ops_of(first), first.result["has_more"], first.result["next_before"]) == ([9, 8, 7], True, 7)
    assert (ops_of(older), older.result["next_before"]) == ([6, 5, 4], 4)
    assert (ops_of(oldest), oldest.result["has_more"], oldest.result["next_before"]) == ([3, 2, 1], False, None)
    # --after alone pages forward: the ops right after the cursor, still newest first.
    assert (ops_of(newer), newer.result["has_more"], newer.result["next_after"]) == ([5, 4], True, 5)
    assert (ops_of(newest), newest.result["has_more"], newest.result["next_after"]) == ([9, 8], False, None)
    assert ops_of(between) == [5, 4, 3]
    # --reverse is applied after the limit: the newest three, oldest first.
    assert ops_of(reversed_) == [7, 8, 9]
    assert sw.transcript(first, older, oldest, newer, newest, between, reversed_) == golden


def test_following_the_cursors_visits_every_op_once(sw):
    build_log_store(sw)
    seen, cursor = [], None
    while True:
        ran = sw("--repo", str(sw.store), "op", "log", "-n", "2", *(["--before", str(cursor)] if cursor else []))
        seen += ops_of(ran)
        cursor = ran.result["next_before"]
        if cursor is None:
            assert not ran.result["has_more"]
            break
    assert seen == list(range(9, 0, -1))
    seen, cursor = [], 0
    while cursor is not None:
        ran = sw("--repo", str(sw.store), "op", "log", "-n", "4", "--after", str(cursor), "--reverse")
        seen += ops_of(ran)
        cursor = ran.result["next_after"]
    assert seen == list(range(1, 10))


def test_op_log_filters(sw, golden):
    build_log_store(sw)
    log = ("--repo", str(sw.store), "op", "log")
    deleted_ref = sw(*log, "--ref", "feature/x")
    main = sw(*log, "--ref", "main", "-n", "2")
    release = sw(*log, "--ref", "release/v1")
    no_such_ref = sw(*log, "--ref", "no/such")
    agent = sw(*log, "--actor", AGENT)
    ref_sets = sw(*log, "--kind", "ref_set")
    alice_deletes = sw(*log, "--actor", ALICE, "--kind", "ref_delete")
    agent_on_main = sw(*log, "--ref", "main", "--actor", AGENT, "-n", "1")

    # A ref deleted since is still found: op 8 deleted feature/x, op 7 created it.
    assert ops_of(deleted_ref) == [8, 7]
    assert (ops_of(main), main.result["next_before"]) == ([5, 3], 3)
    assert ops_of(release) == [6, 4]
    assert ops_of(no_such_ref) == []
    assert ops_of(agent) == [7, 6, 5, 3]
    assert ops_of(ref_sets) == [7, 6, 4]
    assert ops_of(alice_deletes) == [8]
    assert (ops_of(agent_on_main), agent_on_main.result["has_more"]) == ([5], True)
    assert sw.transcript(
        deleted_ref, main, release, no_such_ref, agent, ref_sets, alice_deletes, agent_on_main
    ) == golden


def test_op_log_since_and_until(sw, golden):
    """Times are inclusive bounds; ops are spaced a few milliseconds apart so each has its own."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    for name in ("a", "b", "c", "d"):
        time.sleep(0.005)
        sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", name, "--ref", name)
    at = {op["op"]: op["at"] for op in sw.ok("--repo", str(sw.store), "op", "log")["ops"]}
    assert len(set(at.values())) == 5
    log = ("--repo", str(sw.store), "op", "log")
    since = sw(*log, "--since", at[3])
    until = sw(*log, "--until", at[3])
    both = sw(*log, "--since", at[2], "--until", at[4], "-n", "2")
    future = sw(*log, "--since", "2999-01-01")
    past = sw(*log, "--until", "2000-01-01T00:00:00+01:00")
    assert ops_of(since) == [5, 4, 3]
    assert ops_of(until) == [3, 2, 1]
    assert (ops_of(both), both.result["has_more"], both.result["next_before"]) == ([4, 3], True, 3)
    assert ops_of(future) == ops_of(past) == []
    assert sw.transcript(since, until, both, future, past) == golden


def test_since_is_inclusive_to_the_millisecond_and_rounds_up_below_it(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    time.sleep(0.005)
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "x", "--ref", "x")
    at = sw.ok("--repo", str(sw.store), "op", "show", "2")["at"]
    log = ("--repo", str(sw.store), "op", "log")
    assert ops_of(sw(*log, "--since", at)) == [2]
    # 0.3 ms after op 2's millisecond: op 2 is before it; --until cuts to the millisecond.
    later = at[:-1] + "3Z"
    assert ops_of(sw(*log, "--since", later)) == []
    assert ops_of(sw(*log, "--until", later)) == [2, 1]
    # The same moment in another offset, and dates, are read as RFC 3339.
    assert ops_of(sw(*log, "--since", "0001-01-01T00:00:00+01:00")) == [2, 1]
    assert ops_of(sw(*log, "--until", "9999-12-31T23:59:59-01:00")) == [2, 1]
    assert ops_of(sw(*log, "--since", "0999-01-01")) == [2, 1]


@pytest.mark.parametrize("given", ["2026-W49", "20261203", "2026-12-03T06:09:02.905+02", "2026-12-03T06:09:02+0200",
                                   "2026-12-03T06:09:02,905Z", "٢٠٢٦-١٢-٠٣"])
def test_a_time_that_is_not_rfc_3339_is_refused_not_read_as_python_reads_it(sw, given):
    """Python's fromisoformat reads week dates, digits with no dashes, an hour-only offset and a
    decimal comma: each was taken as a time, so a typo became a filter (or a revert's
    selection) without a word. Only RFC 3339 (and a plain date) is a time here."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    for flag in ("--since", "--until"):
        ran = sw("--repo", str(sw.store), "op", "log", flag, given)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
        assert "neither an RFC 3339 time nor a duration" in ran.error["message"]
    assert sw("--repo", str(sw.store), "--as", ALICE, "op", "revert", "--since", given).error["code"] == "E_INVALID_ARG"


def test_op_show(sw, golden):
    build_log_store(sw)
    repo = ("--repo", str(sw.store))
    sw.ok(*as_(sw, AGENT), "op", "undo", "6")  # op 10 undoes op 6
    show_moved = sw(*repo, "op", "show", "6")
    show_undo = sw(*repo, "op", "show", "10")
    show_created = sw(*repo, "op", "show", "2")
    show_init = sw(*repo, "op", "show", "1")
    mine = sw(*as_(sw, ALICE), "op", "show", "@")
    assert show_moved.result["undone_by"] == 10 and show_undo.result["undoes"] == 6
    assert mine.envelope["meta"]["resolved"] == {"@": 9}
    assert sw.transcript(show_moved, show_undo, show_created, show_init, mine) == golden


def test_op_kinds_live_in_one_place_and_append_op_refuses_others(sw):
    import typing

    import pytest

    from swarmctl.schemas import json_schema
    from swarmctl.store import Store
    from swarmctl.store.schema import OP_KINDS
    from swarmctl.tools.op import OpKind, OpLogReq

    assert typing.get_args(OpKind) == OP_KINDS
    kind = json_schema(OpLogReq)["properties"]["kind"]
    assert [s for s in kind["anyOf"] if "enum" in s][0]["enum"] == list(OP_KINDS)
    build_log_store(sw)
    store = Store.open(sw.store)
    try:
        with pytest.raises(RuntimeError, match="unknown op kind 'ref_move'"):
            with store.write(ALICE) as w:
                w.append_op("ref_move", "a kind no one declared")
        assert store.conn.execute("SELECT MAX(op) FROM ops").fetchone() == (9,)
    finally:
        store.close()


# --- big pages: the fast paths give what the typed paths give ---------------------------------


def test_a_page_of_records_is_what_op_record_would_give(sw):
    """`op log` returns the store's rows as they are (spec.JsonRows) rather than through
    OpRecord: they must be exactly what OpRecord would make of them, key order included."""
    from swarmctl.spec import JsonRows, plain
    import gc

    from swarmctl.store import Store, records
    from swarmctl.tools.op import OpRecord

    build_golden_store(sw)
    sw.ok(*as_(sw, AGENT), "op", "undo", "6")  # an undone op, so undone_by is set somewhere
    ops = sw.ok("--repo", str(sw.store), "op", "log", "-n", "100")["ops"]
    store = Store.open(sw.store)
    try:
        with store.read() as conn:
            rows = records.op_records(conn, [op["op"] for op in ops])
            dicts = records.op_record_dicts(conn, [op["op"] for op in ops])
            some = records.op_record_dicts(conn, [7, 2, 999_999, 5])  # not a run, one missing
            # Runs read as a range, in their own order: newest first, oldest first, and the
            # numbers of a run out of order, each record where it was asked for.
            orders = [[5, 4, 3], [3, 4, 5], [4, 3, 5], [5, 5], [6]]
            in_order = [records.op_record_dicts(conn, order) for order in orders]
            # The collector is off only while a page is built, and left off if it was off.
            assert gc.isenabled()
            gc.disable()
            try:
                records.op_records(conn, [1])
                assert not gc.isenabled()
            finally:
                gc.enable()
    finally:
        store.close()
    typed = [plain(OpRecord.from_row(row)) for row in rows]
    assert [list(op.items()) for op in ops] == [list(row.json().items()) for row in rows]
    assert [list(op.items()) for op in ops] == [list(op.items()) for op in typed]
    assert [list(d.items()) for d in dicts] == [list(row.json().items()) for row in rows]
    by_op = {op["op"]: op for op in ops}
    assert some == [by_op[7], by_op[2], by_op[5]]
    assert in_order == [[by_op[op] for op in order] for order in orders]
    assert any(op["undone_by"] for op in ops) and any(op["ref_moves"] for op in ops)
    assert plain(JsonRows(ops)) is not None and type(plain(JsonRows(ops))) is JsonRows  # as they are


def test_a_big_table_is_printed_plain_one_line_an_op(sw, monkeypatch):
    """Above PLAIN_ROWS ops, `-o table` prints fixed-width columns without Rich (which takes
    seconds for 10,000 rows); control characters in a cell are shown escaped."""
    from swarmctl.cli import tables

    build_log_store(sw)
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "in \x1b[31mred", "--ref", "main")
    ops = sw.ok("--repo", str(sw.store), "op", "log")["ops"]
    monkeypatch.setattr(tables, "PLAIN_ROWS", 3)
    # Wide enough for every column whole (the plain table fits COLUMNS, as the Rich one does).
    plain_ = sw("--repo", str(sw.store), "-o", "table", "op", "log", "-n", "4", env={"COLUMNS": "250"}).stdout.splitlines()
    assert plain_[0].split() == ["op", "when", "actor", "kind", "description", "ref", "moves"]
    assert set(plain_[1].replace(" ", "")) == {"-"}
    assert [line.split()[0] for line in plain_[2:6]] == [str(op["op"]) for op in ops[:4]]
    assert all(
        tables.when(op["at"]) in line and op["actor"] in line and op["kind"] in line for op, line in zip(ops, plain_[2:6])
    )
    assert "in \\x1b[31mred" in plain_[2] and "\x1b" not in "".join(plain_)
    moves = ops[0]["ref_moves"][0]
    assert f"main: {moves['old'][:12]} → {moves['new'][:12]}" in plain_[2]
    assert plain_[6] == f"more: --before {ops[3]['op']}"
    rich = sw("--repo", str(sw.store), "-o", "table", "op", "log", "-n", "3").stdout
    assert "┃" in rich  # at or below PLAIN_ROWS, Rich's table as before


# Text a record may hold that JSON writes escaped, or that a reader may take for a line break.
HOSTILE = 'a "quoted" ,"undone_by":null, \\ back\tslash\n\x01\x1f\x7f \x85 \u2028\u2029 é 😀'


def _texts_and_dumps(store, ops: list[int]):
    from swarmctl.envelope import dumps
    from swarmctl.store import Store, records

    opened = Store.open(store)
    try:
        with opened.read() as conn:
            if opened.kind == "sqlite" and not records._sqlite_writes_json_as_python(conn):
                pytest.skip(f"SQLite {sqlite_version()} writes JSON text otherwise than Python: op log builds values")
            texts = records.op_record_texts(conn, ops)
            dicts = records.op_record_dicts(conn, ops)
    finally:
        opened.close()
    return texts, [dumps(d) for d in dicts]


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def test_a_page_as_json_text_is_what_dumps_writes_of_its_records(sw):
    """For a door that prints JSON text, `op log` takes each record's JSON text from SQLite's
    JSON functions (spec.JsonTexts): byte for byte what envelope.dumps writes of its record (as
    a line of its own, line breaks escaped), ref moves and changesets in order, undone_by set, in
    the order asked; on PostgreSQL there is no such path and the records are built as values."""
    import sqlite3

    ids = build_log_store(sw)
    sw.ok(*as_(sw, AGENT), "op", "undo", "6")  # op 10: op 6 undone
    sw.ok(*as_(sw, ALICE), "tx", "begin")
    for name in ("z/one", "a/two", "m/three"):
        sw.ok(*as_(sw, ALICE), "tx", "set", name, ids["docs"])
    sw.ok(*as_(sw, ALICE), "tx", "commit")  # op 11: three moves
    if sw.backend == "postgres":
        assert _texts_and_dumps(sw.store, [11, 10, 9])[0] is None
        return
    with sqlite3.connect(sw.store / "swarmops.db") as db:  # hostile text where the CLI would refuse it
        db.execute("UPDATE ops SET description = ?, actor = ? WHERE op = 9", (HOSTILE, HOSTILE))
        db.execute("UPDATE ref_moves SET name = ? WHERE op = 7", (HOSTILE,))
    for ops in (list(range(11, 0, -1)), list(range(1, 12)), [9, 2, 11, 999_999, 6, 6], [10], []):
        texts, dumped = _texts_and_dumps(sw.store, ops)
        assert [line_safe(t) for t in texts] == dumped, ops
    log = sw.process("--repo", str(sw.store), "op", "log").envelope["result"]["ops"]  # through the CLI: a pipe
    assert [op["ref_moves"] for op in log if op["op"] == 11] == [[
        {"name": "z/one", "old": None, "new": ids["docs"]}, {"name": "a/two", "old": None, "new": ids["docs"]},
        {"name": "m/three", "old": None, "new": ids["docs"]},
    ]]
    assert [op["undone_by"] for op in log if op["op"] == 6] == [10] and log[2]["description"] == HOSTILE


@pytest.mark.backends("sqlite")
def test_any_text_in_a_record_is_written_as_dumps_writes_it(sw):
    """Hypothesis: any text (any code point SQLite keeps) in an op's description and actor."""
    import sqlite3

    from hypothesis import HealthCheck, given, settings, strategies as st

    build_golden_store(sw)
    db = sqlite3.connect(sw.store / "swarmops.db")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), st.text(max_size=10))
    def check(description: str, actor: str) -> None:
        with db:
            db.execute("UPDATE ops SET description = ?, actor = ? WHERE op = 4", (description, actor))
        texts, dumped = _texts_and_dumps(sw.store, [6, 5, 4, 3])
        assert [line_safe(t) for t in texts] == dumped

    try:
        check()
    finally:
        db.close()


@pytest.mark.backends("sqlite")
def test_where_sqlite_writes_json_otherwise_the_records_are_built_as_values(sw, monkeypatch):
    """An SQLite whose JSON text differs from Python's for any character of the probe (or that
    lacks the JSON functions) gets no texts: `op log` builds its records as values, and prints
    the same bytes."""
    import sqlite3

    from swarmctl.store import records

    build_log_store(sw)
    fast = sw.process("--repo", str(sw.store), "op", "log").stdout
    monkeypatch.setattr(records, "_json_as_python", False)
    assert records.op_record_texts(sqlite3.connect(sw.store / "swarmops.db"), [3, 2, 1]) is None
    slow = sw("--repo", str(sw.store), "op", "log").stdout  # in this process: the probe says no
    strip = lambda text: re.sub(r'"elapsed_ms":\d+', "", text)  # noqa: E731
    assert strip(fast) == strip(slow)
    monkeypatch.setattr(records, "_json_as_python", None)
    monkeypatch.setattr(records, "_PROBE_SQL", "SELECT json_nosuchfunction(?, ?)")
    assert records.op_record_texts(sqlite3.connect(sw.store / "swarmops.db"), [3, 2, 1]) is None


def test_ops_far_apart_are_read_as_a_list_without_the_range_between_them():
    """A page of a filter that matched two ops a million apart (`op log --ref R --actor A` on a
    big store) is no run: deciding so must not build the range between them (it did, 22 ms on
    a 1,000,000-op store; a gap of 10**12 would not fit in memory at all)."""
    from swarmctl.store import records

    assert records._among([10**12, 1]) == ("IN (?,?)", [10**12, 1], False)
    assert records._among([7, 6, 5]) == ("BETWEEN ? AND ?", (5, 7), True)
    assert records._among([5, 6, 8])[2] is False and records._among([3])[2] is True
