"""`op revert`: take back every op a filter selects, in one op, with the safety of `op undo`."""

import json
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, CI, as_, build_golden_store, connect, file_digests, op_count, paused_at_commit, problems, refs
from swarm import Swarm, swarmctl_argv

from swarmctl.tools.revert import MAX_SELECTION

pytestmark = pytest.mark.backends("sqlite", "postgres")


def build_interleaved(sw: Swarm) -> dict[str, str]:
    """An agent's five ops (3, 5, 7, 9, 10) on its own refs, interleaved with a person's ops
    (2, 4, 6, 8) on main and docs. Returns the changeset ids by name."""
    ids = {}
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    ids["base"] = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Initial import", "--ref", "main")["changeset"]["id"]  # 2
    sw.ok(*as_(sw, AGENT), "ref", "set", "agent/a", "main", "--create")  # 3
    sw.ok(*as_(sw, ALICE), "ref", "set", "docs", "main", "--create")  # 4
    ids["a1"] = sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Agent change 1", "--ref", "agent/a")["changeset"]["id"]  # 5
    ids["docs1"] = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Docs 1", "--ref", "docs")["changeset"]["id"]  # 6
    sw.ok(*as_(sw, AGENT), "ref", "set", "agent/b", "main", "--create")  # 7
    ids["main1"] = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Main work", "--ref", "main")["changeset"]["id"]  # 8
    ids["b1"] = sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Agent change 2", "--ref", "agent/b")["changeset"]["id"]  # 9
    sw.ok(*as_(sw, AGENT), "ref", "set", "agent/a", "agent/b")  # 10
    return ids


def undone_by(sw: Swarm, *ops: int) -> list[int | None]:
    return [sw.ok("--repo", str(sw.store), "op", "show", str(op))["undone_by"] for op in ops]


def test_revert_by_actor_takes_back_exactly_the_agents_refs(sw, golden):
    ids = build_interleaved(sw)
    people = {n: t for n, t in refs(sw.store).items() if not n.startswith("agent/")}
    dry = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT, "--dry-run")
    assert op_count(sw.store) == 10
    ran = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert ran.result["reverted"] == [3, 5, 7, 9, 10] and ran.result["op"] == 11
    assert dry.result["ref_moves"] == [{**m, "at": dry.result["ref_moves"][0]["at"]} for m in ran.result["ref_moves"]]
    # The agent's refs are gone (it created them); the person's refs are as the person left them.
    assert refs(sw.store) == people == {"main": ids["main1"], "docs": ids["docs1"]}
    assert undone_by(sw, 3, 5, 7, 9, 10) == [11] * 5
    assert undone_by(sw, 2, 4, 6, 8) == [None] * 4
    log = sw("--repo", str(sw.store), "op", "log", "--kind", "revert")
    assert [o["op"] for o in log.result["ops"]] == [11]
    assert problems(sw.store) == []
    assert sw.transcript(dry, ran, log) == golden


def test_a_person_in_between_on_the_same_ref_stops_it(sw, golden):
    build_golden_store(sw)  # the agent moved main at 3 and 5; alice created release/v1 at 4
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Alice on main", "--ref", "main")  # 7
    sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Agent again", "--ref", "main")  # 8
    before = (op_count(sw.store), file_digests(sw.store))
    refused = sw(*as_(sw, AGENT), "op", "revert", "--actor", AGENT)
    dry = sw(*as_(sw, AGENT), "op", "revert", "--actor", AGENT, "--dry-run")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert refused.exit == 3 and refused.error["code"] == "E_CAS_MISMATCH"
    assert dry.envelope["error"] == refused.error  # the dry run predicts it
    [conflict] = refused.error["details"]["conflicts"]
    assert (conflict["name"], conflict["moved_by"]) == ("main", [7])  # alice's op only, not the agent's own
    # `next` runs as written: it names the store and the actor (issue 8).
    assert refused.error["next"]["argv"] == ["swarmctl", *as_(sw, AGENT), "op", "undo", "7"]
    assert sw.transcript(refused) == golden


def test_a_person_in_between_stops_it_even_when_moved_back(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["base"])  # 7: alice moves main...
    sw.ok(*as_(sw, ALICE), "op", "undo", "7")  # 8: ...and takes it back
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["base"])  # 9: and again...
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["fix"])  # 10: ...and back by hand
    error = sw(*as_(sw, AGENT), "op", "revert", "--actor", AGENT).error
    assert error["code"] == "E_CAS_MISMATCH"
    [conflict] = error["details"]["conflicts"]
    # 7 and its undo 8 cancel out; 9 and 10 are alice's work, moved back by hand: still hers.
    assert conflict["name"] == "main" and conflict["moved_by"] == [9, 10]
    assert conflict["expected"] == conflict["actual"] == ids["fix"]  # back where the agent left it, still refused
    # Widening the selection to include alice's ops makes it the whole range: then it goes.
    widened = sw.ok(*as_(sw, AGENT), "op", "revert", "--after", "2")
    assert refs(sw.store) == {"main": ids["base"]}  # release/v1 (created at 4) is gone, main as op 2 left it
    assert widened["reverted"] == [3, 4, 5, 6, 9, 10]  # 7 and its undo 8 cancel
    assert problems(sw.store) == []


def test_an_op_and_its_undo_in_one_selection_cancel(sw, golden):
    ids = build_interleaved(sw)
    sw.ok(*as_(sw, AGENT), "op", "undo", "10")  # 11: agent/a back to a1
    ran = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT, "--after", "8")  # 9, 10 and 11
    assert ran.result["reverted"] == [9]  # 10 and its undo 11 cancel; 9 is taken back
    assert refs(sw.store)["agent/b"] == ids["base"] and refs(sw.store)["agent/a"] == ids["a1"]
    assert undone_by(sw, 9, 10, 11) == [12, 11, None]
    # Only the pair selected: nothing to take back.
    nothing = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT, "--after", "9", "--before", "12")
    assert nothing.exit == 7 and nothing.error["code"] == "E_NOTHING_TO_UNDO"
    assert problems(sw.store) == []
    assert sw.transcript(ran, nothing) == golden


def test_an_op_someone_else_undid_cancels_and_does_not_conflict(sw):
    ids = build_interleaved(sw)
    sw.ok(*as_(sw, ALICE), "op", "undo", "10")  # 11: alice takes back the agent's op 10
    ran = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert ran["reverted"] == [3, 5, 7, 9]
    assert "agent/a" not in refs(sw.store) and "agent/b" not in refs(sw.store)
    assert undone_by(sw, 10) == [11]
    assert ids["a1"]  # a1 stays in the store: changesets are never removed
    assert problems(sw.store) == []


def revert_of_two(sw: Swarm) -> dict[str, str]:
    """main: A (alice, 2), B (agent, 3), C (agent, 4); then alice reverts the agent's two (5):
    main is A again."""
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    ids = {}
    for name, actor in (("A", ALICE), ("B", AGENT), ("C", AGENT)):  # 2, 3, 4
        ids[name] = sw.ok(*as_(sw, actor), "changeset", "create", "-m", name, "--ref", "main")["changeset"]["id"]
    assert sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)["reverted"] == [3, 4]  # 5
    return ids


def test_an_op_a_revert_took_back_with_an_op_not_selected_is_a_replay_not_a_redo_of_that_op(sw):
    """Op 4 alone is selected, and revert 5 took it back with op 3: main is as the selection
    wants it already. The revert moved main to B, what it named before op 4, which redid op 3
    (still marked undone by 5), beside a description of `revert 0 op(s)`."""
    ids = revert_of_two(sw)
    before = (op_count(sw.store), refs(sw.store))
    for selection in (("--after", "3", "--before", "5"), ("--before", "4", "--after", "2")):  # op 4; op 3
        ran = sw(*as_(sw, ALICE), "op", "revert", *selection)
        assert (ran.exit, ran.result["op"], ran.result["already_applied"]) == (0, 5, True), ran.stdout
        assert (op_count(sw.store), refs(sw.store)) == before == (5, {"main": ids["A"]})
    assert undone_by(sw, 3, 4) == [5, 5]
    assert problems(sw.store) == []


def test_an_op_selected_after_such_a_revert_goes_back_to_what_the_revert_left(sw):
    ids = revert_of_two(sw)
    ids["D"] = sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "D", "--ref", "main")["changeset"]["id"]  # 6
    ran = sw(*as_(sw, ALICE), "op", "revert", "--after", "3", "--actor", AGENT)  # ops 4 (undone by 5) and 6
    assert (ran.exit, ran.result["reverted"], ran.result["op"]) == (0, [6], 7), ran.stdout
    assert refs(sw.store) == {"main": ids["A"]}  # not B, what main named before op 4
    assert problems(sw.store) == []


def test_ops_taken_back_already_do_not_bring_back_what_such_a_revert_took_back(sw):
    """Revert 8 took back ops 4 (made main) and 7, so main is gone. Selected: ops 4, 5 and 6
    (the undo of 5), or ops 4 and 5 (its undo, 6, not selected). Op 4 was taken back already,
    with op 7; op 5 nets out with its undo, or was taken back already by it: nothing to move, a
    replay of revert 8. The revert moved main back to A, what main named before op 5, which
    redid op 4 (`reverted: []` beside a ref move; found by test_revert_model.py's property test)."""
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    a = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "A")["changeset"]["id"]  # 2
    b = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "B")["changeset"]["id"]  # 3
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", a, "--create")  # 4
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", b)  # 5
    sw.ok(*as_(sw, AGENT), "op", "undo", "5")  # 6: main back to A
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", b)  # 7
    assert sw.ok(*as_(sw, AGENT), "op", "revert", "--after", "3")["reverted"] == [4, 7]  # 8: main gone
    for before in ("7", "6"):
        ran = sw(*as_(sw, ALICE), "op", "revert", "--after", "3", "--before", before)
        assert ran.exit == 0 and ran.result["already_applied"] and ran.result["op"] == 8, ran.stdout
        assert (op_count(sw.store), refs(sw.store)) == (8, {})
    assert problems(sw.store) == []


def _four_changesets(sw: Swarm) -> tuple[str, str]:
    """Ops 1-5: init and four changesets (no ref moves). Returns the first two ids."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    ids = [sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", f"c{i}")["changeset"]["id"] for i in range(4)]
    return ids[0], ids[1]


def test_a_selected_revert_taken_back_brings_back_its_selected_ops_which_are_taken_back_too(sw):
    """Revert 9 took back ops 6 and 8 (the agent's); ops 7-9 selected. Taking back 9 redoes 6 and
    8, and 8 is selected: it is taken back again, and gets `undone_by` = the new revert. It was
    left out of `reverted`, shown in effect (`undone_by` null) though main no longer named what it
    set, and the same selection again moved main once more, redoing op 7 (found by a probe)."""
    c0, c1 = _four_changesets(sw)
    sw.ok(*as_(sw, AGENT), "ref", "set", "y", c0, "--create")  # 6
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", c0, "--create")  # 7
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", c1)  # 8
    assert sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)["reverted"] == [6, 8]  # 9
    ran = sw.ok(*as_(sw, "human/carol"), "op", "revert", "--after", "6", "--before", "10")  # 10
    assert (ran["reverted"], ran["op"], refs(sw.store)) == ([7, 8, 9], 10, {"y": c0})
    assert undone_by(sw, 6, 7, 8, 9) == [None, 10, 10, 10]
    again = sw.ok(*as_(sw, "human/carol"), "op", "revert", "--after", "6", "--before", "10")
    assert (again["already_applied"], again["op"], op_count(sw.store), refs(sw.store)) == (True, 10, 10, {"y": c0})
    assert problems(sw.store) == []


def test_taking_back_a_selected_revert_of_an_undo_leaves_the_undone_op_taken_back_by_that_undo(sw):
    """The agent's ops 4, 5 (the undo of 4) and 7 selected; revert 7 took back 5 and alice's 6.
    Taking back 7 brings 5 back, and 5 takes 4 back again: the revert takes back 7 alone. It
    said `reverted: [4, 7]`, so op 4 had two undos in effect, and the same selection again moved
    main back (found by the property test's replay check)."""
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    a = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "A")["changeset"]["id"]  # 2
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "B")  # 3
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", a, "--create")  # 4
    sw.ok(*as_(sw, AGENT), "op", "undo", "4")  # 5: main gone
    sw.ok(*as_(sw, ALICE), "ref", "set", "x", a, "--create")  # 6
    assert sw.ok(*as_(sw, AGENT), "op", "revert", "--after", "4")["reverted"] == [5, 6]  # 7: main back, x gone
    ran = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)  # 8
    assert (ran["reverted"], ran["op"], refs(sw.store)) == ([7], 8, {"x": a})
    assert undone_by(sw, 4, 5, 7) == [5, None, 8]
    again = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert (again["already_applied"], again["op"], op_count(sw.store), refs(sw.store)) == (True, 8, 8, {"x": a})
    assert problems(sw.store) == []


def test_a_selected_op_an_undo_outside_took_back_that_the_revert_brings_back_decides(sw):
    """Alice's revert 5 took back the agent's op 4 (main gone); her undo 7 took 5 back (main back
    to A); the agent's revert 8 took back 7 (main gone). The agent's ops 4, 6 and 8 selected:
    taking back 8 brings 7 back, which takes 5 back, so op 4 is in effect again and is taken
    back too, as undoing 8, 6 and 4 one at a time would: main stays gone, x goes. Op 4 was read
    as taken back for good by 5, and main was moved back to A, what main named before op 8,
    beside `reverted: [4, 6, 8]` (the open case of stop 38)."""
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    a = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "A")["changeset"]["id"]  # 2
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "B")  # 3
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", a, "--create")  # 4
    assert sw.ok(*as_(sw, ALICE), "op", "revert", "--after", "3")["reverted"] == [4]  # 5: main gone
    sw.ok(*as_(sw, AGENT), "ref", "set", "x", a, "--create")  # 6
    sw.ok(*as_(sw, ALICE), "op", "undo", "5")  # 7: main back to A
    assert sw.ok(*as_(sw, AGENT), "op", "revert", "--after", "6", "--before", "8")["reverted"] == [7]  # 8: main gone
    assert refs(sw.store) == {"x": a}
    ran = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)  # 9
    assert (ran["reverted"], ran["op"], refs(sw.store)) == ([4, 6, 8], 9, {}), ran
    assert undone_by(sw, 4, 5, 6, 7, 8) == [9, 7, 9, None, 9]
    again = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert (again["already_applied"], again["op"], op_count(sw.store), refs(sw.store)) == (True, 9, 9, {})
    assert problems(sw.store) == []


def test_an_undo_selected_without_its_op_brings_that_op_back_in_between_and_stops_it(sw):
    """The agent's ops 6 and 8 selected; 8 undid alice's 7. Taking back 8 redoes 7, someone
    else's move of y after op 6: E_CAS_MISMATCH, nothing written. Op 7 and its undo were taken
    to cancel out, and y was deleted with op 7 shown in effect. No `next`: undoing 7 changes
    nothing (8 undid it already); the hint says what does."""
    c0, c1 = _four_changesets(sw)
    sw.ok(*as_(sw, AGENT), "ref", "set", "y", c0, "--create")  # 6
    sw.ok(*as_(sw, ALICE), "ref", "set", "y", c1)  # 7
    sw.ok(*as_(sw, AGENT), "op", "undo", "7")  # 8
    for dry in ((), ("--dry-run",)):
        ran = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT, *dry)
        assert (ran.exit, ran.error["code"], ran.error["next"]) == (3, "E_CAS_MISMATCH", None), ran.stdout
        assert ran.error["details"]["conflicts"][0]["moved_by"] == [7] and "leave that op out" in ran.error["hint"]
    assert (op_count(sw.store), refs(sw.store)) == (8, {"y": c0})


def test_a_replay_of_an_undo_by_a_revert_that_netted_the_ref_out_sees_the_ref_moved_since(sw):
    """`op undo 3` after revert 5 took back ops 3 and 4 (tmp made and deleted: no move of tmp
    by the revert), and someone made tmp again: the replay said `already_applied` with tmp there."""
    sw.ok("--as", ALICE, "init", str(sw.store))  # 1
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "A", "--ref", "main")  # 2
    sw.ok(*as_(sw, AGENT), "ref", "set", "tmp", "main", "--create")  # 3
    sw.ok(*as_(sw, AGENT), "ref", "delete", "tmp")  # 4
    sw.ok(*as_(sw, AGENT), "ref", "set", "side", "main", "--create")  # 5
    assert sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)["reverted"] == [3, 4, 5]  # 6: moves side only
    assert sw.ok(*as_(sw, AGENT), "op", "undo", "3")["already_applied"] is True  # tmp is absent, as 6 left it
    sw.ok(*as_(sw, "human/bob"), "ref", "set", "tmp", "main", "--create")  # 7
    ran = sw(*as_(sw, AGENT), "op", "undo", "3")
    assert (ran.exit, ran.error["code"]) == (3, "E_CAS_MISMATCH"), ran.stdout
    assert ran.error["details"]["conflicts"][0]["name"] == "tmp" and ran.error["details"]["conflicts"][0]["moved_by"] == [7]
    assert ran.error["next"]["arguments"] == {"op": 7}
    assert op_count(sw.store) == 7


def test_a_revert_in_parts_goes_past_moves_an_earlier_part_took_back_with_no_move_of_the_ref(sw):
    """Reverted in parts, as the bound's hint says: the later part took back ops 9 and 10, which
    moved x there and back (its own move of x: none). The earlier part was then refused with
    E_CAS_MISMATCH naming 9 and 10 (`expected` equal to `actual`), and `next` an undo that
    changed nothing: no way forward."""
    ids = build_golden_store(sw)
    a, b = ids["base"], sw.ok("--repo", str(sw.store), "ref", "show", "main")["target"]
    for target in (a, b, a, b):  # 7..10: x made, then moved there and back
        sw.ok(*as_(sw, "agent/b"), "ref", "set", "x", target)
    sw.ok(*as_(sw, "agent/b"), "ref", "set", "y", a)  # 11
    later = sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", "agent/b", "--after", "8")
    assert (later["reverted"], later["op"]) == ([9, 10, 11], 12)
    earlier = sw(*as_(sw, ALICE), "op", "revert", "--actor", "agent/b", "--before", "9")
    assert earlier.exit == 0 and earlier.result["reverted"] == [7, 8], earlier.stdout
    assert "x" not in refs(sw.store) and "y" not in refs(sw.store)  # agent/b's work, all taken back
    assert problems(sw.store) == []


def test_undoing_the_op_in_between_as_next_says_lets_the_revert_go(sw):
    """The README's way out of a conflict: undo the op in between (`error.next`), then revert
    again. The op and its undo stayed "someone else's work in between" for ever, so the revert
    was refused again, now naming the undo, whose undo would redo the work just taken back."""
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "main", ids["base"])  # 7: alice's work in between
    refused = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT, "--dry-run")
    assert refused.error["details"]["conflicts"][0]["moved_by"] == [7]
    assert refused.error["next"]["arguments"] == {"op": 7}
    assert sw.ok(*as_(sw, ALICE), "op", "undo", "7")["op"] == 8  # as next says
    ran = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert (ran.exit, ran.result["reverted"], ran.result["op"]) == (0, [3, 5, 6], 9), ran.stdout
    assert refs(sw.store) == {"main": ids["base"], "release/v1": ids["base"]}
    assert problems(sw.store) == []


def test_an_undo_selected_without_its_op_is_taken_back_which_redoes(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "op", "undo", "6")  # 7: release/v1 back to base
    ran = sw.ok(*as_(sw, AGENT), "op", "revert", "--actor", ALICE, "--after", "6")
    assert ran["reverted"] == [7] and refs(sw.store)["release/v1"] == ids["fix"]
    assert undone_by(sw, 6, 7) == [None, 8]  # op 6 is in effect again


def test_run_again_is_a_replay_that_writes_nothing(sw, golden):
    build_interleaved(sw)
    first = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    before = (op_count(sw.store), file_digests(sw.store))
    again = sw(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    by_agent = sw(*as_(sw, AGENT), "op", "revert", "--actor", AGENT, "--dry-run")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert again.result == {**first.result, "already_applied": True}
    assert by_agent.result == again.result
    # `op undo` of one reverted op is a replay too, naming the revert and only that op's refs.
    undo = sw.ok(*as_(sw, AGENT), "op", "undo", "7")
    assert (undo["op"], undo["already_applied"], [m["name"] for m in undo["ref_moves"]]) == (11, True, ["agent/b"])
    assert sw.transcript(first, again) == golden


def test_revert_of_a_revert_and_undo_of_a_revert(sw, golden):
    ids = build_interleaved(sw)
    after_agent = refs(sw.store)
    sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)  # 11
    back = sw(*as_(sw, ALICE), "op", "revert", "--kind", "revert")  # 12: reverts 11
    assert back.result["reverted"] == [11] and refs(sw.store) == after_agent
    assert undone_by(sw, 3, 10, 11) == [None, None, 12]
    # Undo of that (13) puts the first revert back in effect; undo of 13 again takes it back.
    undo = sw(*as_(sw, ALICE), "op", "undo", "12")
    assert refs(sw.store) == {"main": ids["main1"], "docs": ids["docs1"]}
    assert undone_by(sw, 3, 11, 12) == [11, None, 13]
    redo = sw(*as_(sw, ALICE), "op", "undo", "13")
    assert refs(sw.store) == after_agent and undone_by(sw, 3, 11) == [None, 12]
    assert problems(sw.store) == []
    assert sw.transcript(back, undo, redo) == golden


def test_a_ref_selection_takes_back_every_move_of_those_ops(sw):
    ids = build_golden_store(sw)
    for command in (("tx", "begin"), ("tx", "set", "main", ids["base"]), ("tx", "set", "release/v2", "main"), ("tx", "commit")):
        sw.ok(*as_(sw, AGENT), *command)  # op 7 moves main and creates release/v2
    ran = sw.ok(*as_(sw, AGENT), "op", "revert", "--ref", "release/v2")
    assert ran["reverted"] == [7]
    assert refs(sw.store) == {"main": ids["fix"], "release/v1": ids["fix"]}


def test_filters_are_required_and_checked(sw, golden):
    build_golden_store(sw)
    before = (op_count(sw.store), file_digests(sw.store))
    none = sw(*as_(sw, AGENT), "op", "revert")
    nobody = sw("--repo", str(sw.store), "op", "revert", "--actor", AGENT)
    matches_nothing = sw(*as_(sw, AGENT), "op", "revert", "--actor", CI)
    no_moves = sw(*as_(sw, AGENT), "op", "revert", "--kind", "init")
    bad_time = sw(*as_(sw, AGENT), "op", "revert", "--since", "yesterday")
    bad_actor = sw(*as_(sw, AGENT), "op", "revert", "--actor", "nobody")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert [r.exit for r in (none, nobody, matches_nothing, no_moves, bad_time, bad_actor)] == [2, 6, 7, 7, 2, 2]
    assert sw.transcript(none, nobody, matches_nothing, no_moves) == golden


@pytest.mark.backends("sqlite")  # edits the SQLite file directly
def test_a_selection_over_the_bound_is_refused_not_cut(sw):
    build_golden_store(sw)
    # MAX_SELECTION + 1 ops by one actor, written straight into the store's tables (ops that
    # move no ref, at the newest op's time): the refusal must come before any work.
    conn = sqlite3.connect(sw.store / "swarmops.db")
    at = conn.execute("SELECT MAX(at) FROM ops").fetchone()[0]
    with conn:
        conn.executemany(
            "INSERT INTO ops(kind, actor, at, description) VALUES ('changeset_create', 'agent/bulk', ?, 'bulk')",
            [(at,)] * (MAX_SELECTION + 1),
        )
    conn.close()
    before = (op_count(sw.store), file_digests(sw.store))
    refused = sw(*as_(sw, AGENT), "op", "revert", "--actor", "agent/bulk")
    assert refused.exit == 2 and refused.error["code"] == "E_INVALID_ARG"
    assert refused.error["details"]["max"] == MAX_SELECTION == 100_000
    assert (op_count(sw.store), file_digests(sw.store)) == before
    # Exactly the bound is a selection (of ops that moved no ref).
    assert sw(*as_(sw, AGENT), "op", "revert", "--actor", "agent/bulk", "--after", "7").error["code"] == "E_NOTHING_TO_UNDO"


def test_a_revert_killed_before_commit_writes_nothing(sw):
    build_interleaved(sw)
    before = (op_count(sw.store), refs(sw.store))
    with paused_at_commit(sw, "--repo", str(sw.store), "--as", ALICE, "op", "revert", "--actor", AGENT) as proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (op_count(sw.store), refs(sw.store)) == before
    assert problems(sw.store) == []
    assert sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)["op"] == 11


@pytest.mark.backends("sqlite")  # edits the SQLite file directly
def test_a_format_1_store_is_read_as_it_is_and_its_first_revert_upgrades_it(sw):
    # A store made by the release before reverts (format 1: no op_reverts table), kept as a fixture.
    shutil.copytree(Path(__file__).parent / "fixtures" / "format1-store", sw.store)
    before = file_digests(sw.store)
    assert sw.ok("--repo", str(sw.store), "op", "show", "9")["undone_by"] is None  # read as it is, no table
    dry = sw.ok(*as_(sw, ALICE), "op", "revert", "--after", "8", "--dry-run")
    assert file_digests(sw.store) == before  # reads never upgrade
    ran = sw.ok(*as_(sw, ALICE), "op", "revert", "--after", "8")  # ops 9 and 10: delete release/v2, create release/v3
    assert ran["reverted"] == dry["reverted"] == [9, 10] and ran["op"] == 11
    assert "release/v2" in refs(sw.store) and "release/v3" not in refs(sw.store)
    assert undone_by(sw, 9, 10) == [11, 11]
    check = connect(sw.store)
    assert check.execute("SELECT target FROM op_reverts ORDER BY target").fetchall() == [(9,), (10,)]
    check.close()
    assert problems(sw.store) == []


def test_revert_runs_as_a_real_process_too(sw):
    build_interleaved(sw)
    ran = sw.process(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)
    assert ran.exit == 0, ran.stderr
    assert ran.result["reverted"] == [3, 5, 7, 9, 10] and "agent/a" not in refs(sw.store)


@pytest.mark.backends("sqlite")  # edits the SQLite file directly
def test_the_store_check_finds_a_revert_record_that_points_forward(sw):
    build_interleaved(sw)
    sw.ok(*as_(sw, ALICE), "op", "revert", "--actor", AGENT)  # 11
    assert problems(sw.store) == []
    conn = sqlite3.connect(sw.store / "swarmops.db")
    with conn:
        conn.execute("INSERT INTO op_reverts(op, target) VALUES (3, 11)")  # op 3 is no revert, 11 is later
    conn.close()
    # The record is also content of op 3 in the op log's hash chain, which now breaks there.
    assert [p.check for p in problems(sw.store)] == ["reverts_earlier_op", "hash_chain"]


def test_two_reverts_at_once_one_acts_the_other_replays(sw):
    build_interleaved(sw)
    argv = [*swarmctl_argv(), "--repo", str(sw.store), "--as", ALICE, "op", "revert", "--actor", AGENT]
    procs = [subprocess.Popen(argv, cwd=sw.tmp, env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    results = sorted((e["result"]["op"], e["result"]["already_applied"]) for e in outcomes)
    assert results == [(11, False), (11, True)], outcomes
    assert op_count(sw.store) == 11 and problems(sw.store) == []
