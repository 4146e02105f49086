"""`op undo`: compare-and-swap, all or nothing, replays, redo, --dry-run and `@`."""

import pytest
from core_helpers import AGENT, ALICE, CI, as_, build_golden_store, build_log_store, file_digests, op_count, problems, refs

pytestmark = pytest.mark.backends("sqlite", "postgres")


def test_undo_restores_deleted_and_deletes_created_refs(sw, golden):
    ids = build_log_store(sw)
    # op 8 deleted feature/x: undoing it recreates it; op 7 created it: undoing that deletes it.
    recreate = sw(*as_(sw, ALICE), "op", "undo", "8")
    assert refs(sw.store)["feature/x"] == ids["fix"]
    delete = sw(*as_(sw, ALICE), "op", "undo", "7")
    assert "feature/x" not in refs(sw.store)
    log = sw("--repo", str(sw.store), "op", "log", "-n", "2")
    assert [o["undoes"] for o in log.result["ops"]] == [7, 8]
    assert problems(sw.store) == []
    assert sw.transcript(recreate, delete, log) == golden


def test_undo_run_again_is_a_replay_that_writes_nothing(sw, golden):
    build_golden_store(sw)
    first = sw(*as_(sw, AGENT), "op", "undo", "6")
    before = (op_count(sw.store), file_digests(sw.store))
    again = sw(*as_(sw, AGENT), "op", "undo", "6")
    # Anyone replaying it gets the same answer: the undo that did it, with its actor and time.
    by_alice = sw(*as_(sw, ALICE), "op", "undo", "6")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert first.result["already_applied"] is False and first.result["op"] == 7
    assert again.result == {**first.result, "already_applied": True}
    assert by_alice.result == again.result
    assert sw.transcript(first, again, by_alice) == golden


def test_undo_refused_when_a_ref_moved_since(sw, golden):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"][:8])  # op 7 moves release/v1 again
    before = (op_count(sw.store), file_digests(sw.store))
    refused = sw(*as_(sw, AGENT), "op", "undo", "6")
    assert refused.exit == 3
    error = refused.error
    assert error["code"] == "E_CAS_MISMATCH"
    assert error["details"]["conflicts"] == [
        {"name": "release/v1", "expected": ids["fix"], "actual": ids["base"], "moved_by": [7]}
    ]
    assert error["next"] == {
        "tool": "undo", "arguments": {"op": 7}, "argv": ["swarmctl", "--repo", str(sw.store), "--as", AGENT, "op", "undo", "7"]
    }
    assert "op 7" in error["hint"]
    assert (op_count(sw.store), file_digests(sw.store)) == before
    # Doing what error.next says, then the undo again, works.
    first = sw(*error["next"]["argv"][1:])  # it names the store and the actor
    then = sw(*as_(sw, AGENT), "op", "undo", "6")
    assert then.result["op"] == 9 and refs(sw.store)["release/v1"] == ids["base"]
    assert sw.transcript(refused, first, then) == golden


def test_conflicts_name_every_later_op_and_the_latest_first_to_undo(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 7
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["fix"])  # 8: back where op 6 left it...
    sw.ok(*as_(sw, ALICE), "ref", "delete", "release/v1")  # 9: ...then gone
    error = sw(*as_(sw, AGENT), "op", "undo", "6").error
    assert error["details"]["conflicts"] == [
        {"name": "release/v1", "expected": ids["fix"], "actual": None, "moved_by": [7, 8, 9]}
    ]
    assert error["next"]["arguments"] == {"op": 9}


def test_following_next_after_a_conflict_ends(sw):
    """`next` names the latest later move still in effect. Once it was undone, the newest op
    that moved the ref is that undo: naming it would redo the move just taken back, and a
    caller that followed `next` went round and round (undo 8, undo 9, undo 10, ...), one op a
    turn, and op 6 was never undone. Now the two cancel out, and `next` names the move before."""
    ids = build_golden_store(sw)
    other = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Other")["changeset"]["id"]  # 7
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", other)  # 8
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 9
    followed, hints = [], []
    for _ in range(5):
        ran = sw(*as_(sw, AGENT), "op", "undo", "6")
        if ran.exit == 0:
            break
        followed.append(ran.error["next"]["arguments"]["op"])
        hints.append(ran.error["hint"])
        sw.ok(*as_(sw, AGENT), "op", "undo", str(followed[-1]))
    # Undoing 9 (as op 10) leaves release/v1 at `other`: then 8, and op 6 is undone as op 12.
    assert followed == [9, 8] and (ran.exit, ran.result["undone"], ran.result["op"]) == (0, 6, 12)
    assert hints == ["Undo op 9 first (the latest op that moved release/v1), then undo op 6.",
                     "Undo op 8 first (the latest op still in effect that moved release/v1), then undo op 6."]
    assert refs(sw.store)["release/v1"] == ids["base"]
    assert problems(sw.store) == []


def test_next_skips_a_later_move_and_its_undo_and_says_so(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 7
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["base"])  # 8
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["fix"])  # 9: release/v1 back by hand...
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 10: ...and away again
    sw.ok(*as_(sw, ALICE), "op", "undo", "10")  # 11: release/v1 names fix, but 7 and 9 stand
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 12
    sw.ok(*as_(sw, ALICE), "op", "undo", "12")  # 13
    sw.ok(*as_(sw, ALICE), "op", "undo", "13")  # 14: 12 is in effect again
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["fix"])  # 15
    sw.ok(*as_(sw, ALICE), "op", "undo", "15")  # 16
    error = sw(*as_(sw, AGENT), "op", "undo", "6").error  # release/v1 names base
    assert error["details"]["conflicts"][0]["moved_by"] == [7, 9, 10, 11, 12, 13, 14, 15, 16]
    # 15 and 16 cancel, and so do 13 and 14; 12 is in effect (its undo 13 was undone).
    assert error["next"]["arguments"] == {"op": 12}
    assert error["hint"] == "Undo op 12 first (the latest op still in effect that moved release/v1), then undo op 6."


def test_undo_of_an_undo_redoes(sw, golden):
    ids = build_golden_store(sw)
    undo = sw(*as_(sw, AGENT), "op", "undo", "6")  # 7: release/v1 back to base
    redo = sw(*as_(sw, AGENT), "op", "undo", "7")  # 8: release/v1 to fix again
    assert refs(sw.store)["release/v1"] == ids["fix"]
    show6 = sw("--repo", str(sw.store), "op", "show", "6")
    show7 = sw("--repo", str(sw.store), "op", "show", "7")
    assert (show6.result["undone_by"], show7.result["undone_by"]) == (None, 8)  # 6 is back in effect: undo 7 was itself undone
    # Op 6's undo was itself undone, so op 6 is in effect again: undoing it is a new undo.
    again = sw(*as_(sw, AGENT), "op", "undo", "6")
    assert (again.result["op"], again.result["already_applied"]) == (9, False)
    assert refs(sw.store)["release/v1"] == ids["base"]
    # ...while undoing op 7 again finds op 8 (its undo) in effect but release/v1 moved since
    # (op 9): not a replay that would report release/v1 restored, but the conflict.
    replay = sw(*as_(sw, AGENT), "op", "undo", "7")
    assert replay.exit == 3 and replay.error["details"]["undone_by"] == 8
    assert replay.error["details"]["conflicts"][0]["moved_by"] == [9]
    assert problems(sw.store) == []
    assert sw.transcript(undo, redo, show6, show7, again, replay) == golden


def test_dry_run_writes_nothing(sw, golden):
    ids = build_golden_store(sw)
    before = (op_count(sw.store), file_digests(sw.store))
    dry = sw(*as_(sw, AGENT), "op", "undo", "6", "--dry-run")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert dry.result["op"] is None and dry.result["ref_moves"][0]["new"] == ids["base"]
    real = sw(*as_(sw, AGENT), "op", "undo", "6")
    # The same moves as the dry run said.
    assert [m["new"] for m in real.result["ref_moves"]] == [m["new"] for m in dry.result["ref_moves"]]
    before = (op_count(sw.store), file_digests(sw.store))
    dry_replay = sw(*as_(sw, AGENT), "op", "undo", "6", "--dry-run")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["base"])  # op 8 moves main, which op 5 moved
    before = (op_count(sw.store), file_digests(sw.store))
    dry_conflict = sw(*as_(sw, AGENT), "op", "undo", "5", "--dry-run")
    dry_nothing = sw(*as_(sw, AGENT), "op", "undo", "1", "--dry-run")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert dry_replay.result["already_applied"] is True
    assert dry_conflict.error["code"] == "E_CAS_MISMATCH" and dry_conflict.error["next"]["arguments"] == {"op": 8}
    assert dry_nothing.error["code"] == "E_NOTHING_TO_UNDO"
    assert sw.transcript(dry, real, dry_replay, dry_conflict, dry_nothing) == golden


def test_at_names_the_callers_newest_op_only(sw, golden):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "staging", ids["base"], "--create")  # op 7, alice's newest
    # The agent's @ is op 6 although alice's op 7 is newer.
    agent_undo = sw(*as_(sw, AGENT), "op", "undo", "@")
    assert agent_undo.envelope["meta"]["resolved"] == {"@": 6}
    assert agent_undo.result["undone"] == 6 and "staging" in refs(sw.store)
    # Alice's @ is her op 7, not the agent's newer undo (op 8).
    alice_dry = sw(*as_(sw, ALICE), "op", "undo", "@", "--dry-run")
    assert alice_dry.envelope["meta"]["resolved"] == {"@": 7}
    # Someone with no ops in the store: @ names nothing.
    stranger = sw(*as_(sw, CI), "op", "undo", "@")
    assert stranger.exit == 4 and stranger.error["code"] == "E_NOT_FOUND"
    # Without an identity, @ cannot be resolved (and an undo is a mutation anyway).
    nobody = sw("--repo", str(sw.store), "op", "undo", "@")
    assert nobody.error["code"] == "E_IDENTITY_REQUIRED"
    # The agent's @ is now its undo (op 8): undoing @ again redoes op 6.
    agent_again = sw(*as_(sw, AGENT), "op", "undo", "@")
    assert agent_again.envelope["meta"]["resolved"] == {"@": 8} and agent_again.result["undone"] == 8
    assert sw.transcript(agent_undo, alice_dry, stranger, nobody, agent_again) == golden


def test_nothing_to_undo(sw, golden):
    build_log_store(sw)
    before = (op_count(sw.store), file_digests(sw.store))
    init = sw(*as_(sw, ALICE), "op", "undo", "1")
    no_ref = sw(*as_(sw, ALICE), "op", "undo", "9")
    assert (init.exit, no_ref.exit) == (7, 7)
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert sw.transcript(init, no_ref) == golden


def test_a_page_names_the_undo_in_effect_as_each_op_alone_does(sw):
    """`op log` reads the undos in effect of a whole page at once (queries.undos_in_effect):
    the same as asking op by op, through chains of undos of undos and reverts."""
    from core_helpers import connect
    from swarmctl.store import queries, records

    build_golden_store(sw)
    for _ in range(3):  # undo the newest op, then that undo, then that one: a chain of three
        newest = sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"]
        sw.ok(*as_(sw, ALICE), "op", "undo", str(newest))
    sw.ok(*as_(sw, AGENT), "ref", "set", "agent-ref", "main")
    sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    with connect(sw.store) as conn:
        every = list(range(1, op_count(sw.store) + 1))
        one_by_one = {op: queries.undo_in_effect(conn, op) for op in every}
        assert queries.undos_in_effect(conn, every) == {op: u for op, u in one_by_one.items() if u is not None}
        assert len(set(one_by_one.values()) - {None}) >= 2  # there was something to find
        pages = [records.op_records(conn, every), records.op_records(conn, every[::2])]  # a run, and not one
        for page in pages:
            assert all(r.undone_by == one_by_one[r.op] for r in page)
