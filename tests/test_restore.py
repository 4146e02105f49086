"""`op restore OP`: every ref back to what it named right after an op, previewed, then confirmed
against the head the preview saw."""

import pytest

from core_helpers import AGENT, ALICE, as_, build_golden_store, file_digests, op_count, problems, refs

pytestmark = pytest.mark.backends("sqlite", "postgres")


def test_preview_then_confirm_with_the_call_the_preview_gives(sw, golden):
    ids = build_golden_store(sw)
    before = (op_count(sw.store), file_digests(sw.store))
    preview = sw(*as_(sw, ALICE), "op", "restore", "4")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert preview.result["action"] == "preview" and preview.result["head"] == 6 and preview.result["op"] is None
    assert preview.result["next"]["argv"] == ["swarmctl", *as_(sw, ALICE), "op", "restore", "4", "--confirm", "--expect-head", "6"]
    confirmed = sw(*preview.result["next"]["argv"][1:])
    assert confirmed.result["action"] == "restored" and confirmed.result["op"] == 7
    assert confirmed.result["ref_moves"] == [{**m, "at": confirmed.result["ref_moves"][0]["at"]} for m in preview.result["ref_moves"]]
    # As right after op 4: main as op 3 left it, release/v1 as op 4 created it.
    third = sw.ok("--repo", str(sw.store), "op", "show", "3")["ref_moves"][0]["new"]
    assert refs(sw.store) == {"main": third, "release/v1": ids["base"]}
    log = sw("--repo", str(sw.store), "op", "log", "--kind", "restore")
    assert [o["op"] for o in log.result["ops"]] == [7]
    assert problems(sw.store) == []
    assert sw.transcript(preview, confirmed, log) == golden


def test_restore_to_before_a_ref_existed_and_after_it_was_deleted(sw, golden):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "feature/x", "main", "--create")  # 7
    # Right after op 3 neither release/v1 (op 4) nor feature/x (op 7) existed: both are deleted.
    early = sw(*as_(sw, ALICE), "op", "restore", "3", "--confirm", "--expect-head", "7")  # 8
    third = sw.ok("--repo", str(sw.store), "op", "show", "3")["ref_moves"][0]["new"]
    assert refs(sw.store) == {"main": third}
    undo = sw(*as_(sw, ALICE), "op", "undo", "8")  # 9: takes the restore back
    assert set(refs(sw.store)) == {"main", "release/v1", "feature/x"}
    sw.ok(*as_(sw, ALICE), "ref", "delete", "release/v1")  # 10
    sw.ok(*as_(sw, ALICE), "ref", "delete", "feature/x")  # 11
    # Right after op 7 both existed: they are recreated.
    late = sw(*as_(sw, ALICE), "op", "restore", "7", "--confirm", "--expect-head", "11")  # 12
    assert refs(sw.store) == {"main": ids["fix"], "release/v1": ids["fix"], "feature/x": ids["fix"]}
    undo_late = sw(*as_(sw, ALICE), "op", "undo", "12")
    assert refs(sw.store) == {"main": ids["fix"]}
    assert problems(sw.store) == []
    assert sw.transcript(early, undo, late, undo_late) == golden


def test_refused_when_the_store_moved_after_the_preview(sw, golden):
    build_golden_store(sw)
    preview = sw.ok(*as_(sw, ALICE), "op", "restore", "4")
    sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Hotfix", "--ref", "main")  # 7, after the preview
    sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Notes")  # 8 moves no ref: still a move of the head
    before = (op_count(sw.store), file_digests(sw.store))
    refused = sw(*preview["next"]["argv"][1:])
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert refused.exit == 3 and refused.error["code"] == "E_CAS_MISMATCH"
    details = refused.error["details"]
    assert (details["expect_head"], details["head"], details["ops_since"]) == (6, 8, [7, 8])
    assert [(c["name"], c["moved_by"]) for c in details["conflicts"]] == [("main", [7])]
    assert refused.error["next"]["argv"] == ["swarmctl", *as_(sw, ALICE), "op", "restore", "4"]  # preview again
    assert sw.transcript(refused) == golden


def test_a_ref_moved_since_and_back_is_no_conflict(sw):
    """A ref made and deleted after the preview (null then, null now), or set away and back,
    names what the preview saw: `details.conflicts` listed it, expected equal to actual."""
    build_golden_store(sw)
    preview = sw.ok(*as_(sw, ALICE), "op", "restore", "4")
    main = refs(sw.store)["main"]
    sw.ok(*as_(sw, AGENT), "ref", "set", "--create", "scratch", "main")  # 7
    sw.ok(*as_(sw, AGENT), "ref", "delete", "scratch")  # 8
    sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Hotfix", "--ref", "main")  # 9
    sw.ok(*as_(sw, AGENT), "ref", "set", "main", main)  # 10: main back where it was
    sw.ok(*as_(sw, AGENT), "changeset", "create", "-m", "Docs", "--ref", "docs")  # 11: a conflict
    refused = sw(*preview["next"]["argv"][1:])
    assert (refused.exit, refused.error["code"]) == (3, "E_CAS_MISMATCH")
    conflicts = refused.error["details"]["conflicts"]
    assert [(c["name"], c["expected"], c["moved_by"]) for c in conflicts] == [("docs", None, [11])], conflicts
    assert refused.error["details"]["ops_since"] == [7, 8, 9, 10, 11]


def test_an_expected_head_past_the_newest_op_is_no_op_yet_not_a_store_that_moved(sw):
    """`--expect-head 70` on a store whose newest op is 6 said "the store moved since the
    preview: its newest op is 6, not 70 (no op since)": it did not move, and no op 70 exists."""
    build_golden_store(sw)
    before = (op_count(sw.store), file_digests(sw.store))
    refused = sw(*as_(sw, ALICE), "op", "restore", "4", "--confirm", "--expect-head", "70")
    assert (refused.exit, refused.error["code"]) == (3, "E_CAS_MISMATCH")  # a CAS failure still: preview again
    assert "moved" not in refused.error["message"] and "--expect-head 70 is no op of this store yet" in refused.error["message"]
    assert (refused.error["details"]["head"], refused.error["details"]["ops_since"]) == (6, [])
    assert (op_count(sw.store), file_digests(sw.store)) == before


def test_ref_limits_it_and_bad_calls_are_refused(sw, golden):
    ids = build_golden_store(sw)
    only = sw(*as_(sw, ALICE), "op", "restore", "2", "--ref", "release/v1")
    assert [m["name"] for m in only.result["ref_moves"]] == ["release/v1"]
    assert only.result["next"]["argv"] == ["swarmctl", *as_(sw, ALICE), "op", "restore", "2", "--ref", "release/v1", "--confirm", "--expect-head", "6"]
    done = sw.ok(*only.result["next"]["argv"][1:])
    assert done["op"] == 7 and refs(sw.store) == {"main": ids["fix"]}
    before = (op_count(sw.store), file_digests(sw.store))
    never = sw(*as_(sw, ALICE), "op", "restore", "2", "--ref", "nope")
    unconfirmed = sw(*as_(sw, ALICE), "op", "restore", "2", "--confirm")
    nothing_preview = sw(*as_(sw, ALICE), "op", "restore", "7")
    nothing = sw(*as_(sw, ALICE), "op", "restore", "7", "--confirm", "--expect-head", "7")
    no_op = sw(*as_(sw, ALICE), "op", "restore", "99")
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert [r.exit for r in (never, unconfirmed, nothing, no_op)] == [4, 2, 7, 4]
    assert nothing_preview.result["ref_moves"] == [] and nothing_preview.result["next"] is None
    assert sw.transcript(never, unconfirmed, nothing_preview, nothing) == golden


def test_a_confirmation_run_twice_is_refused_and_says_it_is_done(sw):
    build_golden_store(sw)
    confirm = sw.ok(*as_(sw, ALICE), "op", "restore", "4")["next"]["argv"][1:]
    assert sw.ok(*confirm)["op"] == 7
    before = (op_count(sw.store), file_digests(sw.store))
    again = sw(*confirm)
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert again.error["code"] == "E_CAS_MISMATCH" and again.error["details"]["ops_since"] == [7]
    assert "nothing more to do" in again.error["hint"]


def test_tables_for_people(sw, golden):
    build_golden_store(sw)
    preview = sw(*as_(sw, ALICE), "-o", "table", "op", "restore", "4")
    revert_dry = sw(*as_(sw, ALICE), "-o", "table", "op", "revert", "--actor", AGENT, "--dry-run")
    revert = sw(*as_(sw, ALICE), "-o", "table", "op", "revert", "--actor", AGENT)
    replay = sw(*as_(sw, ALICE), "-o", "table", "op", "revert", "--actor", AGENT)
    assert "restoring refs to op 4 would move" in preview.stdout and "op 7 reverted ops 3, 5, 6" in revert.stdout
    assert sw.transcript(preview, revert_dry, revert, replay) == golden
