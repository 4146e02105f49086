"""`workflow rollback`: the preview, the confirmed rollback, every refusal, interrupted runs and
rollbacks, a failing undo, and a real race of two rollback processes.

The command steps are real scripts (tests/wfkit.py) that append to marks.log, so each test
sees which undos ran, in which order and how many times.
"""

import json
import shlex
import signal
import time
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, BOB, tamper
from swarm import Ran
from wfkit import WAIT_S, Kit, envelope

pytestmark = pytest.mark.backends("sqlite", "postgres")

# promote and deploy/notify succeed and can be undone, migrate cannot, verify fails (it may
# have done something), cleanup never runs.
RELEASE = """\
    name = "release"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "migrate"
    run = ["./mark.sh", "migrate"]
    [[step]]
    name = "deploy"
    run = ["./mark.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    [[step]]
    name = "notify"
    run = ["./mark.sh", "notify"]
    rollback = ["./mark.sh", "unnotify"]
    [[step]]
    name = "verify"
    run = ["./fail.sh"]
    [[step]]
    name = "cleanup"
    run = ["./mark.sh", "cleanup"]
    """

# Everything succeeds; deploy's rollback hangs (so a rollback can be caught, or killed, in flight).
SLOW_UNDO = """\
    name = "slow-undo"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "deploy"
    run = ["./mark.sh", "deploy"]
    rollback = ["./hang.sh", "undeploy"]
    [[step]]
    name = "notify"
    run = ["./mark.sh", "notify"]
    rollback = ["./mark.sh", "unnotify"]
    """


@pytest.fixture
def kit(sw):
    return Kit(sw)


def failed_release(kit: Kit) -> str:
    ran, wf = kit.run(RELEASE)
    assert ran.error["code"] == "E_STEP_FAILED", ran.stdout
    assert kit.marks() == ["migrate", "deploy", "notify"]
    return wf


def snapshot_of_store(kit: Kit, wf: str) -> tuple:
    """What a refused rollback must leave exactly as it was."""
    status = kit("workflow", "status", wf, actor=None).result
    ops = kit("op", "log", "-n", "1", actor=None).result["ops"][0]["op"]
    refs = kit("ref", "list", actor=None).result["refs"]
    return (status["workflow"]["state"], [(s["name"], s["status"]) for s in status["steps"]], ops, refs, kit.marks())


def test_the_preview_shows_the_blast_radius_and_changes_nothing(sw, kit, golden):
    wf = failed_release(kit)
    before = snapshot_of_store(kit, wf)
    preview = kit("workflow", "rollback", wf)
    again = kit("workflow", "rollback", wf, actor=None)  # a preview needs no identity
    assert sw.transcript(preview) == golden
    radius = preview.result["blast_radius"]
    assert [e["step"] for e in radius["would_roll_back"]] == ["notify", "deploy", "promote"]
    assert radius["would_roll_back"][2]["predicted"]["outcome"] == "ok"
    assert [e["step"] for e in radius["left_in_place"]] == ["migrate"]
    assert [e["step"] for e in radius["not_reversed"]] == ["verify"]
    assert [e["step"] for e in radius["no_effect"]] == ["cleanup"]
    assert radius["counts"]["would_roll_back"] == 3 and radius["blockers"] == []
    assert again.result["preview_id"] == preview.result["preview_id"]  # the same radius, the same id
    assert snapshot_of_store(kit, wf) == before


def test_a_confirmed_rollback_undoes_last_first_exactly_once(sw, kit, golden):
    wf = failed_release(kit)
    preview_id = kit("workflow", "rollback", wf).result["preview_id"]
    confirmed = kit("workflow", "rollback", wf, "--confirm", "--expect-preview", preview_id, actor=BOB)
    status = kit("workflow", "status", wf, actor=None)
    again = kit("workflow", "rollback", wf, "--confirm")
    assert sw.transcript(confirmed, status, again) == golden
    assert confirmed.result["state"] == "rolled_back"
    assert [r["step"] for r in confirmed.result["results"]] == ["notify", "deploy", "promote"]
    assert kit.marks() == ["migrate", "deploy", "notify", "unnotify", "undeploy"]
    assert "release/v1" not in [r["name"] for r in kit("ref", "list", actor=None).result["refs"]]
    undo = kit("op", "show", str(confirmed.result["results"][2]["op"]), actor=None).result
    assert (undo["kind"], undo["actor"], undo["undoes"]) == ("undo", BOB, status.result["steps"][0]["op"])
    assert undo["description"] == f"workflow {wf} rollback of step promote: undo op {undo['undoes']}"
    assert again.error["code"] == "E_REFUSED"  # already rolled back: nothing runs twice
    assert kit.marks() == ["migrate", "deploy", "notify", "unnotify", "undeploy"]


def test_a_ref_moved_since_is_predicted_and_the_other_undos_still_run(sw, kit, golden):
    wf = failed_release(kit)
    kit("ref", "set", "release/v1", kit.c1, actor=AGENT)  # op 5 moves it on
    preview = kit("workflow", "rollback", wf)
    confirmed = kit("workflow", "rollback", wf, "--confirm")
    assert sw.transcript(preview, confirmed) == golden
    predicted = preview.result["blast_radius"]["would_roll_back"][2]["predicted"]
    assert (predicted["outcome"], predicted["code"]) == ("fails", "E_CAS_MISMATCH")
    assert predicted["details"]["conflicts"][0]["moved_by"] == [5]
    assert preview.result["blast_radius"]["state_after"] == "rollback_failed"
    assert confirmed.exit == 10 and confirmed.error["code"] == "E_STEP_FAILED"
    assert confirmed.error["details"]["state"] == "rollback_failed"
    assert [r["status"] for r in confirmed.error["details"]["results"]] == ["rolled_back", "rolled_back", "rollback_failed"]
    assert kit.marks()[-2:] == ["unnotify", "undeploy"]
    # Its `next` is the undo of the later move (as `op undo` of the step's op says): it was the
    # preview, whose `next` confirmed, which failed the same way, round and round.
    assert confirmed.error["next"]["arguments"] == {"op": 5}
    assert shlex.join(confirmed.error["next"]["argv"]) in confirmed.error["hint"]
    # resume, cancel and approve of a workflow whose rollback failed said E_STATE with no hint
    # and no next: the way on is the preview of the rollback's retry.
    for command in ("resume", "cancel", "approve"):
        stuck = kit("workflow", command, wf)
        assert (stuck.exit, stuck.error["code"]) == (7, "E_STATE"), stuck.stdout
        assert stuck.error["next"]["tool"] == "workflow_rollback" and stuck.error["next"]["arguments"] == {"workflow": wf}
        assert shlex.join(stuck.error["next"]["argv"]) in stuck.error["hint"]
    # Take back the later move, and the retry undoes promote; the command undos are not re-run.
    kit("op", "undo", "5", actor=AGENT)
    retry = kit("workflow", "rollback", wf, "--confirm")
    assert [(e["step"], e["retry"]) for e in retry.result["blast_radius"]["would_roll_back"]] == [("promote", True)]
    assert retry.result["state"] == "rolled_back"
    assert kit.marks() == ["migrate", "deploy", "notify", "unnotify", "undeploy"]


def test_a_failing_undo_command_does_not_stop_the_rest(sw, kit, golden):
    ran, wf = kit.run(RELEASE.replace('rollback = ["./mark.sh", "undeploy"]', 'rollback = ["./fail.sh"]'))
    confirmed = kit("workflow", "rollback", wf, "--confirm")
    status = kit("workflow", "status", wf, actor=None)
    assert sw.transcript(confirmed, status) == golden
    # A rollback that failed fails a script: E_STEP_FAILED, exit 10, the per-step results in details.
    assert confirmed.exit == 10 and confirmed.error["code"] == "E_STEP_FAILED"
    details = confirmed.error["details"]
    results = {r["step"]: r for r in details["results"]}
    assert results["deploy"]["status"] == "rollback_failed" and results["deploy"]["exit_code"] == 3
    assert results["notify"]["status"] == results["promote"]["status"] == "rolled_back"
    assert (details["workflow"], details["state"], details["failed"]) == (wf, "rollback_failed", ["deploy"])
    assert kit.marks() == ["migrate", "deploy", "notify", "unnotify"]
    # `next` is the preview that retries what failed, and runs as written.
    assert confirmed.error["next"]["arguments"] == {"workflow": wf}
    retry = sw(*confirmed.error["next"]["argv"][1:])
    assert [(e["step"], e["retry"]) for e in retry.result["blast_radius"]["would_roll_back"]] == [("deploy", True)]


def test_an_op_already_undone_by_hand_is_not_undone_twice(sw, kit):
    _, wf = kit.run('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "release/v1", to = "main" }\n')
    kit("op", "undo", "4")  # op 5
    preview = kit("workflow", "rollback", wf, "--include-completed").result
    assert preview["blast_radius"]["would_roll_back"][0]["predicted"] == {"outcome": "already_undone", "by": 5}
    confirmed = kit("workflow", "rollback", wf, "--confirm", "--include-completed").result
    assert confirmed["results"][0]["op"] == 5 and confirmed["results"][0]["already_undone"]
    assert kit("op", "log", "-n", "1", actor=None).result["ops"][0]["op"] == 5  # no new op


def test_steps_that_moved_one_ref_are_predicted_as_undone_in_turn(sw, kit):
    """The rollback undoes last first, so each undo finds the ref as the undo before it left it.
    Each was predicted against the ref as it is now: with two steps on one ref, the first was
    predicted to fail (E_CAS_MISMATCH, blaming the workflow's own later step) and the preview's
    state_after was rollback_failed, while the confirmed rollback undid both."""
    _, wf = kit.run(
        'name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "rel", to = "main" }\n'
        '[[step]]\nname = "again"\nref_set = { name = "rel", to = "%s" }\n'
        '[[step]]\nname = "drop"\nref_delete = { name = "rel" }\n' % kit.c1
    )
    preview = kit("workflow", "rollback", wf, "--include-completed").result["blast_radius"]
    main = kit("ref", "show", "main", actor=None).result["target"]
    assert [(e["step"], e["predicted"]) for e in preview["would_roll_back"]] == [
        ("drop", {"outcome": "ok", "ref_moves": [{"name": "rel", "new": kit.c1}]}),
        ("again", {"outcome": "ok", "ref_moves": [{"name": "rel", "new": main}]}),
        ("promote", {"outcome": "ok", "ref_moves": [{"name": "rel", "new": None}]}),
    ]
    assert preview["state_after"] == "rolled_back"
    confirmed = kit("workflow", "rollback", wf, "--include-completed", "--confirm").result
    assert confirmed["state"] == "rolled_back"
    assert [r["status"] for r in confirmed["results"]] == ["rolled_back"] * 3
    assert "rel" not in {r["name"] for r in kit("ref", "list", actor=None).result["refs"]}
    # A move in between is still predicted: the last step's undo fails, and so does the first's.
    _, wf = kit.run('name = "w2"\n[[step]]\nname = "a"\nref_set = { name = "rel2", to = "main" }\n'
                    '[[step]]\nname = "b"\nref_set = { name = "rel2", to = "%s" }\n' % kit.c1, name="w2.toml")
    kit("ref", "delete", "rel2", actor=AGENT)  # b's undo fails, so a's finds rel2 gone too
    preview = kit("workflow", "rollback", wf, "--include-completed").result["blast_radius"]
    assert [(e["step"], e["predicted"]["outcome"]) for e in preview["would_roll_back"]] == [("b", "fails"), ("a", "fails")]


def _hint_command(hint: str) -> list[str]:
    """The command a preview's hint tells the user to run (between backticks)."""
    return shlex.split(hint.split("`")[1])


def test_the_preview_hint_and_next_confirm_with_the_flags_given(sw, kit):
    """Following the preview's hint, or calling its `next`, confirms exactly that preview, with
    --include-completed and --acknowledge-unknown-effects as they were given."""
    _, wf = kit.run(SLOW_UNDO.replace('["./hang.sh", "undeploy"]', '["./mark.sh", "undeploy"]'))
    preview = kit("workflow", "rollback", wf, "--include-completed").result
    command = _hint_command(preview["hint"])
    assert command == preview["next"]["argv"] == [
        "swarmctl", "--repo", kit.repo, "--as", ALICE, "workflow", "rollback", wf, "--confirm", "--expect-preview", preview["preview_id"], "--include-completed",
    ]
    done = kit.sw(*command[1:], cwd=kit.dir)  # it names the store and the actor
    assert done.result["state"] == "rolled_back" and done.result["next"] is None
    assert kit.marks() == ["deploy", "notify", "unnotify", "undeploy"]

    # A step a killed run left in flight: its pid is gone, so its effect is unknown.
    (kit.dir / "marks.log").unlink()
    wf = failed_release(kit)
    with tamper(kit.repo) as db:
        db.execute("UPDATE workflow_steps SET status = 'running', pid = ? WHERE workflow = ? AND name = 'notify'", (2**22 + 7, wf))
    preview = kit("workflow", "rollback", wf, "--acknowledge-unknown-effects", "notify").result
    call = preview["next"]
    assert call["arguments"] == {
        "workflow": wf, "confirm": True, "expect_preview": preview["preview_id"], "acknowledge_unknown_effects": ["notify"],
    }
    assert _hint_command(preview["hint"]) == call["argv"]
    done = kit("call", call["tool"], json.dumps(call["arguments"]))  # as an agent over MCP would
    assert done.result["state"] == "rolled_back" and done.result["acknowledged"] == ["notify"]
    assert [r["step"] for r in done.result["results"]] == ["deploy", "promote"]


def test_a_refusal_and_a_blocked_preview_point_back_to_the_preview_with_the_flags_given(kit):
    _, wf = kit.run('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\nrollback = ["./mark.sh", "undeploy"]\n')
    stale = refused(kit, wf, "--include-completed", "--expect-preview", "pv-0000000000000000")
    assert stale.error["next"]["argv"] == ["swarmctl", "--repo", kit.repo, "--as", ALICE, "workflow", "rollback", wf, "--include-completed"]
    blocked = kit("workflow", "rollback", wf).result  # completed, not included: the preview that includes it
    assert blocked["next"]["argv"] == stale.error["next"]["argv"] and blocked["hint"].startswith("Confirming would be refused")


# --- refusals: E_REFUSED, nothing changed -----------------------------------------------------


def refused(kit: Kit, wf: str, *args: str, env: dict | None = None) -> Ran:
    before = snapshot_of_store(kit, wf)
    ran = kit("workflow", "rollback", wf, "--confirm", *args, env=env)
    assert ran.exit == 7 and ran.error["code"] == "E_REFUSED", ran.stdout
    assert snapshot_of_store(kit, wf) == before
    return ran


def test_refused_when_completed_unless_included(sw, kit, golden):
    _, wf = kit.run('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\nrollback = ["./mark.sh", "undeploy"]\n')
    ran = refused(kit, wf)
    assert sw.transcript(ran) == golden
    assert [r["code"] for r in ran.error["details"]["refusals"]] == ["completed_not_included"]
    # Its `next` is the way on, the preview that includes the completed steps (it was the same
    # preview without, which showed the same refusal and no `next`); that preview's `next`
    # confirms it, and the preview without says so too.
    preview = sw.ok(*ran.error["next"]["argv"][1:], cwd=kit.dir)
    assert preview["next"]["arguments"]["confirm"] is True and preview["next"]["arguments"]["include_completed"] is True
    plain = kit("workflow", "rollback", wf).result
    assert plain["next"] == ran.error["next"] and shlex.join(plain["next"]["argv"]) in plain["hint"]
    assert sw.ok(*preview["next"]["argv"][1:], cwd=kit.dir)["state"] == "rolled_back"


def test_a_completed_workflow_refused_for_more_than_that_still_points_at_the_preview_that_includes_it(kit):
    """With another refusal beside `completed_not_included` (a rollback command's variable
    unset), the refusal's `next` was the preview without --include-completed, whose `next` was
    null: a dead end. The way on includes it, and its preview names what else to resolve."""
    flow = 'name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\nrollback = ["./mark.sh", "undeploy", "${env:UNDO_KEY}"]\n'
    ran, wf = kit.run(flow, env={"UNDO_KEY": "k-1"})
    assert ran.exit == 0, ran.stdout
    error = refused(kit, wf).error
    assert {r["code"] for r in error["details"]["refusals"]} == {"completed_not_included", "missing_env"}
    assert error["next"]["arguments"]["include_completed"] is True and "--include-completed" in error["hint"]
    preview = kit(*error["next"]["argv"][5:]).result  # after swarmctl --repo R --as A
    assert [b["code"] for b in preview["blast_radius"]["blockers"]] == ["missing_env"] and preview["next"] is None
    assert kit("workflow", "rollback", wf).result["next"] == error["next"]
    done = kit("workflow", "rollback", wf, "--include-completed", "--confirm", env={"UNDO_KEY": "k-1"})
    assert done.result["state"] == "rolled_back", done.stdout


def test_a_refusal_in_a_table_says_each_refusal_and_what_to_do(kit):
    """With -o table, E_REFUSED said "resolve each refusal" and showed none of them: each one's
    code and message (which says what to pass) are lines of the error, as store check's problems."""
    _, wf = kit.run('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\nrollback = ["./mark.sh", "undeploy"]\n')
    ran = kit("-o", "table", "workflow", "rollback", wf, "--confirm", env={"COLUMNS": "200"})
    message = refused(kit, wf).error["details"]["refusals"][0]["message"]
    assert (ran.exit, ran.stdout) == (7, ""), ran.stdout
    assert f"  completed_not_included: {message}" in ran.stderr, ran.stderr


def test_refused_when_cancelled(sw, kit, golden):
    wf = failed_release(kit)
    kit("workflow", "cancel", wf)
    ran = refused(kit, wf)
    assert sw.transcript(ran) == golden
    assert [r["code"] for r in ran.error["details"]["refusals"]] == ["workflow_state"]


def test_the_preview_of_a_cancelled_workflow_says_it_stays_cancelled(kit):
    """Its preview said `state_after: "rolled_back"` beside the blocker that refuses any rollback
    of it: the state after `--confirm` is the one it is in."""
    wf = failed_release(kit)
    before = kit("workflow", "rollback", wf).result["blast_radius"]
    assert (before["state_after"], before["blockers"]) == ("rolled_back", [])  # failed: a rollback may run
    kit("workflow", "cancel", wf)
    radius = kit("workflow", "rollback", wf).result["blast_radius"]
    assert [b["code"] for b in radius["blockers"]] == ["workflow_state"]
    assert radius["state_after"] == "cancelled"


def test_refused_when_pending(sw, kit, golden):
    """A workflow whose run died between creating it and starting its first step."""
    from swarmctl import hosts
    from swarmctl.store import Store
    from swarmctl.tools.workflow import definition, records

    flow = kit.write(RELEASE)
    store = Store.open(kit.repo)
    with store.write(ALICE) as w:
        dead = hosts.Owner(hosts.host_id(), 2**22 + 7, "1")
        records.insert(w, "wf-pending1", definition.load(flow), str(flow), str(kit.dir), dead)
    store.close()
    ran = refused(kit, "wf-pending1")
    assert sw.transcript(ran) == golden
    assert "has not started" in ran.error["details"]["refusals"][0]["message"]
    assert kit("workflow", "rollback", "wf-pending1").result["blast_radius"]["state_after"] == "pending"


def test_refused_on_a_step_status_it_does_not_recognise(sw, kit, golden):
    wf = failed_release(kit)
    with tamper(kit.repo) as db:  # as a newer swarmctl might have left it
        db.execute("UPDATE workflow_steps SET status = 'paused' WHERE workflow = ? AND name = 'deploy'", (wf,))
    ran = refused(kit, wf)
    assert sw.transcript(ran) == golden
    assert [r["code"] for r in ran.error["details"]["refusals"]] == ["unknown_step_status", "unknown_effects_unacknowledged"]
    # Acknowledging does not lift the unknown status: every other refusal still applies.
    assert [r["code"] for r in refused(kit, wf, "--acknowledge-unknown-effects", "all").error["details"]["refusals"]] == [
        "unknown_step_status"
    ]


def test_refused_on_a_record_it_cannot_read(sw, kit, golden):
    wf = failed_release(kit)
    with tamper(kit.repo) as db:
        db.execute("UPDATE workflow_steps SET result = '{not json' WHERE workflow = ? AND name = 'notify'", (wf,))
    ran = refused(kit, wf, "--acknowledge-unknown-effects", "notify")
    assert sw.transcript(ran) == golden
    assert [r["code"] for r in ran.error["details"]["refusals"]] == ["unreadable_record"]


def test_refused_when_the_radius_changed_since_the_preview(sw, kit, golden):
    wf = failed_release(kit)
    seen = kit("workflow", "rollback", wf).result["preview_id"]
    kit("ref", "set", "release/v1", kit.c1)  # the radius changes: promote's undo would now conflict
    ran = refused(kit, wf, "--expect-preview", seen)
    assert sw.transcript(ran) == golden
    (refusal,) = ran.error["details"]["refusals"]
    assert (refusal["code"], refusal["expected"]) == ("preview_mismatch", seen)
    assert refusal["actual"] == ran.error["details"]["preview_id"] != seen


def test_refused_when_a_rollback_needs_an_unset_variable(sw, kit, golden):
    env = {"DEPLOY_TOKEN": "t0ken-value"}
    _, wf = kit.run(
        'name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\n'
        'rollback = ["./mark.sh", "undeploy"]\nenv = { DEPLOY_TOKEN = "${env:DEPLOY_TOKEN}" }\n',
        env=env,
    )
    ran = refused(kit, wf, "--include-completed")
    assert sw.transcript(ran) == golden
    assert ran.error["details"]["refusals"][0]["variables"] == ["DEPLOY_TOKEN"]
    assert kit("workflow", "rollback", wf, "--confirm", "--include-completed", env=env).result["state"] == "rolled_back"


def test_acknowledging_a_step_that_does_not_exist_is_invalid(kit):
    wf = failed_release(kit)
    ran = kit("workflow", "rollback", wf, "--acknowledge-unknown-effects", "no-such-step")
    assert ran.exit == 2 and ran.error["details"]["steps"] == ["no-such-step"]


# --- interrupted runs and rollbacks (real processes, killed) ---------------------------------


def test_an_interrupted_step_must_be_acknowledged_and_is_then_left_alone(sw, kit, golden):
    kit.write(SLOW_UNDO.replace('run = ["./mark.sh", "deploy"]', 'run = ["./hang.sh", "deploy"]'))
    proc = kit.popen("workflow", "run", "flow.toml")
    try:
        kit.wait_for_mark("deploy", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
    finally:
        kit.kill_hung("deploy")
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    preview = kit("workflow", "rollback", wf)
    not_acknowledged = refused(kit, wf)
    confirmed = kit("workflow", "rollback", wf, "--confirm", "--acknowledge-unknown-effects", "deploy")
    assert sw.transcript(preview, not_acknowledged, confirmed) == golden
    (unknown,) = preview.result["blast_radius"]["unknown_effects"]
    assert (unknown["step"], unknown["status"], unknown["during"], unknown["acknowledged"]) == ("deploy", "interrupted", "run", False)
    assert [r["step"] for r in confirmed.result["results"]] == ["promote"]
    assert confirmed.result["acknowledged"] == ["deploy"] and confirmed.result["state"] == "rolled_back"
    assert kit.marks() == ["deploy"]  # its rollback was not run: its effect was never known


def test_a_rollback_killed_half_way_continues_after_acknowledgement(sw, kit, golden):
    _, wf = kit.run(SLOW_UNDO)
    first = kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed")
    try:
        kit.wait_for_mark("undeploy", first)  # notify is undone; deploy's undo is in flight
        held = kit("workflow", "rollback", wf, "--confirm", "--include-completed")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=WAIT_S)
    finally:
        kit.kill_hung("undeploy")
    preview = kit("workflow", "rollback", wf, "--include-completed")
    refusal = refused(kit, wf, "--include-completed")
    resumed = kit("workflow", "rollback", wf, "--confirm", "--include-completed", "--acknowledge-unknown-effects", "deploy")
    status = kit("workflow", "status", wf, actor=None)
    assert sw.transcript(held, preview, refusal, resumed, status) == golden
    assert held.error["code"] == "E_REFUSED" and held.error["details"]["refusals"][0]["code"] == "workflow_state"
    radius = preview.result["blast_radius"]
    assert radius["workflow"]["state"] == "rollback_failed"
    assert [(e["step"], e["during"]) for e in radius["unknown_effects"]] == [("deploy", "rollback")]
    assert [e["step"] for e in radius["already_rolled_back"]] == ["notify"]
    assert [e["step"] for e in radius["would_roll_back"]] == ["promote"]
    assert resumed.result["state"] == "rolled_back"
    assert kit.marks() == ["deploy", "notify", "unnotify", "undeploy"]  # each undo ran once


def test_two_rollbacks_at_once_exactly_one_acts(kit):
    flow = 'name = "race"\n' + "".join(
        f'[[step]]\nname = "s{i}"\nrun = ["./mark.sh", "do{i}"]\nrollback = ["./mark.sh", "undo{i}"]\n' for i in range(1, 6)
    )
    for round_ in range(2):
        kit.write(flow, f"race{round_}.toml")
        kit("workflow", "run", f"race{round_}.toml")
        wf = kit("workflow", "list", "-n", "1", actor=None).result["workflows"][0]["id"]
        (kit.dir / "marks.log").unlink()
        procs = [kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed") for _ in range(2)]
        outcomes = [envelope(p) for p in procs]
        winners = [env for code, env in outcomes if code == 0]
        losers = [env for code, env in outcomes if code != 0]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert winners[0]["result"]["state"] == "rolled_back"
        assert losers[0]["error"]["code"] in ("E_STATE", "E_BUSY", "E_REFUSED"), losers[0]
        if losers[0]["error"]["code"] == "E_REFUSED":  # it looked after the winner had claimed it
            assert "workflow_state" in [r["code"] for r in losers[0]["error"]["details"]["refusals"]]
        assert kit.marks() == ["undo5", "undo4", "undo3", "undo2", "undo1"]


def test_a_rollback_that_ended_while_another_looked_is_not_taken_for_interrupted(kit):
    """A process reads a workflow's rows, then asks whether the processes they name live. A
    rollback that saved its last undo and ended in between read as gone mid-step: its step
    `interrupted`, its effect unknown, and a preview (or a second rollback, seen once in the
    two-rollbacks race on a busy machine) asked to acknowledge it. Such a read is made again
    until the workflow stays as it was: here it reads as rolled back. (The pause between the
    two is the fault point SWARMCTL_FAULT=pause-before-pids.)"""
    (kit.dir / "gate.sh").write_text('#!/bin/sh\necho "$1" >> marks.log\nwhile [ ! -e go ]; do sleep 0.02; done\n')
    (kit.dir / "gate.sh").chmod(0o755)
    _, wf = kit.run('name = "w"\n[[step]]\nname = "a"\nrun = ["./mark.sh", "a"]\nrollback = ["./gate.sh", "undo-a"]\n')
    winner = kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed")
    paused = kit.dir / "paused"
    deadline = time.monotonic() + WAIT_S
    while "undo-a" not in kit.marks():  # the winner's undo runs, its step saved `undoing`
        assert winner.poll() is None and time.monotonic() < deadline, winner.communicate()
        time.sleep(0.02)
    lookers = {
        "preview": kit.popen("workflow", "rollback", wf, "--include-completed", env={"SWARMCTL_FAULT": f"pause-before-pids:{paused}1"}),
        "status": kit.popen("workflow", "status", wf, actor=None, env={"SWARMCTL_FAULT": f"pause-before-pids:{paused}2"}),
    }
    for i, looker in enumerate(lookers.values(), 1):
        while not Path(f"{paused}{i}").exists():  # it has read the rows: step undoing, by the winner
            assert looker.poll() is None and time.monotonic() < deadline, looker.communicate()
            time.sleep(0.02)
    (kit.dir / "go").touch()
    assert envelope(winner)[0] == 0  # the rollback ends, and its process with it
    for i in (1, 2):
        Path(f"{paused}{i}").unlink()
    (code, preview), (status_code, status) = (envelope(looker) for looker in lookers.values())
    radius = preview["result"]["blast_radius"]
    assert code == 0 and radius["unknown_effects"] == [], radius
    assert [e["step"] for e in radius["already_rolled_back"]] == ["a"]
    assert radius["workflow"]["state"] == "rolled_back"
    assert status_code == 0 and status["result"]["workflow"]["state"] == "rolled_back"
    assert status["result"]["steps"][0]["status"] == "rolled_back"


# --- the rules live in the library: every door gets them -------------------------------------


def test_the_json_door_gets_the_same_refusal_as_the_cli(sw, kit):
    """`swarmctl call` and MCP run tools through runner.run_json: the same library function,
    so the same safety rules and the same envelope."""
    from swarmctl import registry, runner
    from swarmctl.context import Context

    wf = failed_release(kit)
    kit("ref", "set", "release/v1", kit.c1)
    cli = kit("workflow", "rollback", wf, "--confirm", "--expect-preview", "pv-0000000000000000")
    door = runner.run_json(
        registry.get("workflow_rollback"),
        {"workflow": wf, "confirm": True, "expect_preview": "pv-0000000000000000"},
        Context(repo=kit.repo, actor=ALICE),
    )
    door["meta"]["elapsed_ms"] = cli.envelope["meta"]["elapsed_ms"]
    assert door == cli.envelope
    assert door["error"]["code"] == "E_REFUSED"
    assert kit.marks() == ["migrate", "deploy", "notify"]


def test_the_output_schema_spells_out_the_blast_radius_and_the_results(kit):
    """The MCP outputSchema of workflow_rollback types the blast radius and each step's result:
    real outputs fit it, and one with an entry that lacks its predicted outcome does not."""
    import copy

    import jsonschema

    from swarmctl import registry, schemas

    validator = jsonschema.Draft202012Validator(schemas.envelope_schema(registry.get("workflow_rollback")))
    result = validator.schema["properties"]["result"]
    entry = result["properties"]["blast_radius"]["properties"]["would_roll_back"]["items"]
    assert {"undo", "predicted", "retry"} <= set(entry["required"])
    wf = failed_release(kit)
    moved = kit("ref", "set", "release/v1", kit.c1).result["op"]  # promote's undo is now predicted to fail
    preview = kit("workflow", "rollback", wf).envelope
    failed = kit("workflow", "rollback", wf, "--confirm").envelope  # E_STEP_FAILED, results in details
    kit("op", "undo", str(moved))
    confirmed = kit("workflow", "rollback", wf, "--confirm").envelope  # the retry: rolled back
    for output in (preview, failed, confirmed):
        validator.validate(output)
    assert {r["status"] for r in failed["error"]["details"]["results"]} == {"rolled_back", "rollback_failed"}
    assert [r["status"] for r in confirmed["result"]["results"]] == ["rolled_back"]
    broken = copy.deepcopy(preview)
    del broken["result"]["blast_radius"]["would_roll_back"][0]["predicted"]
    assert not validator.is_valid(broken)
    broken = copy.deepcopy(confirmed)
    broken["result"]["results"][0]["status"] = "maybe"
    assert not validator.is_valid(broken)


def test_a_rollback_command_that_outlives_its_killed_rollback_is_not_run_twice(sw, kit):
    """kill -9 of a rollback leaves its rollback command running: the step is still `undoing`,
    and another rollback is refused (E_REFUSED, the preview's `command_running` blocker) until
    the command ends."""
    _, wf = kit.run(SLOW_UNDO.replace('["./hang.sh", "undeploy"]', '["./tick.sh", "undeploy"]'))
    first = kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed")
    pgid = kit.wait_for_ticks("undeploy", first)
    ticker = (kit.dir / "undeploy.pid").read_text()
    try:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=WAIT_S)
        status = kit("workflow", "status", wf, actor=None).result
        again = kit("workflow", "rollback", wf, "--confirm", "--include-completed", "--acknowledge-unknown-effects", "all")
        assert kit.still_ticking("undeploy")
    finally:
        kit.kill_group(pgid)
    assert status["workflow"]["state"] == "rolling_back"
    assert (status["steps"][1]["status"], status["steps"][1]["command_pid"]) == ("undoing", pgid)
    assert again.error["code"] == "E_REFUSED", again.stdout
    assert [(r["code"], r["step"], r["pid"]) for r in again.error["details"]["refusals"]] == [("command_running", "deploy", pgid)]
    assert (kit.dir / "undeploy.pid").read_text() == ticker  # one copy, never a second
    after = kit("workflow", "rollback", wf, "--include-completed").result["blast_radius"]
    assert [(e["step"], e["status"], e["during"]) for e in after["unknown_effects"]] == [("deploy", "interrupted", "rollback")]
