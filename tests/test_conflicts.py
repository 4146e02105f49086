"""E_CAS_MISMATCH has one shape wherever it comes from (swarmctl/store/conflicts.py); the
tools' own conflicts are checked in their tests and golden outputs. Here: the guard in
Writer.append_op, which no tool reaches (each checks first), and `moved_by` with and without
a baseline."""

import pytest
from core_helpers import ALICE, build_golden_store, op_count, problems, refs

from swarmctl.envelope import SwarmError
from swarmctl.store import Move, Store, conflicts


def test_append_op_refuses_a_move_whose_ref_moved_and_writes_nothing(sw):
    ids = build_golden_store(sw)  # op 6 moved release/v1 from base to fix
    before = (op_count(sw.store), refs(sw.store))
    store = Store.open(sw.store)
    try:
        with pytest.raises(SwarmError) as raised:
            with store.write(ALICE) as w:
                w.append_op(
                    "tx_commit",
                    "two moves, one stale",
                    [Move("main", w.ref_target("main"), ids["base"]), Move("release/v1", ids["base"], ids["fix"])],
                )
    finally:
        store.close()
    error = raised.value
    assert error.code == "E_CAS_MISMATCH"
    assert error.message == "refs moved under the operation: release/v1"
    assert error.details == {
        "conflicts": [{"name": "release/v1", "expected": ids["base"], "actual": ids["fix"], "moved_by": [6]}]
    }
    assert (op_count(sw.store), refs(sw.store)) == before
    assert problems(sw.store) == []


def test_moved_by_lists_the_ops_after_the_baseline_or_else_the_last_one(sw):
    ids = build_golden_store(sw)
    sw.ok("--repo", str(sw.store), "--as", ALICE, "ref", "delete", "main")  # 7
    store = Store.open(sw.store, readonly=True)
    try:
        with store.read() as conn:
            stale = [Move("release/v1", ids["base"], None), Move("main", ids["fix"], None), Move("new", None, None)]
            assert conflicts.find(conn, stale, since=3) == [
                conflicts.Conflict("release/v1", ids["base"], ids["fix"], [4, 6]),
                conflicts.Conflict("main", ids["fix"], None, [5, 7]),
            ]
            assert conflicts.find(conn, stale, since={"release/v1": 4, "main": 6}) == [
                conflicts.Conflict("release/v1", ids["base"], ids["fix"], [6]),
                conflicts.Conflict("main", ids["fix"], None, [7]),
            ]
            # No baseline: the op that last moved the ref (its row's), none once it is deleted.
            assert conflicts.find(conn, stale, since=None) == [
                conflicts.Conflict("release/v1", ids["base"], ids["fix"], [6]),
                conflicts.Conflict("main", ids["fix"], None, []),
            ]
    finally:
        store.close()
