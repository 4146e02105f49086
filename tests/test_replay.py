"""A replay never reports a ref as restored when it is not (issue 8, item 1).

Run again, an undo finds the refs as it left them (`already_applied`, exit 0) or not
(`E_CAS_MISMATCH`, exit 3, nothing written), for `op undo`, for a transaction's commit undone
twice, and for a workflow's store step rolled back after its op was undone and moved again.
"""

from core_helpers import AGENT, ALICE, as_, build_golden_store, op_count, problems, refs
from wfkit import Kit


def test_undo_replayed_after_the_ref_moved_again_is_a_cas_mismatch(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, AGENT), "op", "undo", "6")  # op 7: release/v1 back to base
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", "main")  # op 8: release/v1 names main's head
    before = refs(sw.store)
    again = sw(*as_(sw, AGENT), "op", "undo", "6")
    assert again.exit == 3, again.stdout
    error = again.error
    assert error["code"] == "E_CAS_MISMATCH"
    assert error["details"]["op"] == 6 and error["details"]["undone_by"] == 7
    assert error["details"]["conflicts"] == [
        {"name": "release/v1", "expected": ids["base"], "actual": before["release/v1"], "moved_by": [8]}
    ]
    assert error["next"]["tool"] == "undo" and error["next"]["arguments"] == {"op": 8}
    # nothing written, and the dry run says the same
    assert op_count(sw.store) == 8 and refs(sw.store) == before
    dry = sw(*as_(sw, AGENT), "op", "undo", "6", "--dry-run")
    assert dry.exit == 3 and dry.error["details"]["conflicts"] == error["details"]["conflicts"]
    # Undo what moved it, and the replay finds the refs as the undo left them.
    sw.ok(*as_(sw, ALICE), "op", "undo", "8")  # op 9
    replay = sw.ok(*as_(sw, AGENT), "op", "undo", "6")
    assert (replay["op"], replay["already_applied"]) == (7, True)
    assert problems(sw.store) == []


def test_a_replay_whose_refs_are_as_the_undo_left_them_is_already_applied(sw):
    build_golden_store(sw)
    sw.ok(*as_(sw, AGENT), "op", "undo", "6")
    # a ref moved away and back (two ops) is as the undo left it: a replay
    target = refs(sw.store)["release/v1"]
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", "main")
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", target)
    replay = sw(*as_(sw, AGENT), "op", "undo", "6")
    assert replay.exit == 0 and replay.result["already_applied"] is True and replay.result["op"] == 7


def test_a_tx_commit_undone_twice_after_a_move_is_a_cas_mismatch(sw):
    ids = build_golden_store(sw)
    me = as_(sw, ALICE)
    sw.ok(*me, "tx", "begin")
    sw.ok(*me, "tx", "set", "release/v1", ids["base"])
    sw.ok(*me, "tx", "set", "hotfix", ids["fix"])
    commit = sw.ok(*me, "tx", "commit")["op"]
    undo = sw.ok(*me, "op", "undo", str(commit))["op"]
    sw.ok(*me, "ref", "set", "hotfix", ids["base"], "--create")  # op undo + 1
    before = refs(sw.store)
    again = sw(*me, "op", "undo", str(commit))
    assert again.exit == 3, again.stdout
    details = again.error["details"]
    assert (details["op"], details["undone_by"]) == (commit, undo)
    assert details["conflicts"] == [{"name": "hotfix", "expected": None, "actual": ids["base"], "moved_by": [undo + 1]}]
    assert again.error["next"]["arguments"] == {"op": undo + 1}
    assert refs(sw.store) == before and op_count(sw.store) == undo + 1
    assert problems(sw.store) == []


def test_a_workflow_store_step_undone_and_moved_since_fails_its_rollback(sw):
    kit = Kit(sw)
    ran, wf = kit.run('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "release/v1", to = "main" }\n')
    step_op = ran.result["steps"][0]["op"]
    undo = kit("op", "undo", str(step_op)).result["op"]  # someone undoes the step's op by hand
    kit("ref", "set", "release/v1", kit.c1, "--create")  # then release/v1 is made again
    preview = kit("workflow", "rollback", wf, "--include-completed").result
    [entry] = preview["blast_radius"]["would_roll_back"]
    assert entry["predicted"]["outcome"] == "fails", entry
    assert entry["predicted"]["code"] == "E_CAS_MISMATCH"
    assert entry["predicted"]["details"]["undone_by"] == undo
    assert preview["blast_radius"]["state_after"] == "rollback_failed"
    confirmed = sw(*preview["next"]["argv"][1:], cwd=kit.dir)
    assert confirmed.exit == 10 and confirmed.error["code"] == "E_STEP_FAILED"
    [result] = confirmed.error["details"]["results"]
    assert result["status"] == "rollback_failed" and result["error"]["code"] == "E_CAS_MISMATCH"
    assert refs(sw.store)["release/v1"] == kit.c1  # never reported restored, never moved
    assert problems(sw.store) == []
