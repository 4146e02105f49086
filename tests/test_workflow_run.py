"""`workflow run`, `status`, `list`, `approve`, `resume`, `cancel`: real scripts as command
steps, real processes where the test is about processes (kills, terminals)."""

import json
import os
import pty
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from core_helpers import ALICE, BOB, CI, connect, tamper
from swarm import swarmctl_argv
from wfkit import SECRET, WAIT_S, Kit

# The tests of what a workflow does to the store run on both kinds of store; those that look
# into SQLite's files, or only at processes, on SQLite.
BOTH = pytest.mark.backends("sqlite", "postgres")

RELEASE = """\
    name = "release-v1"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "sign-off"
    approval = "release manager approves"
    [[step]]
    name = "deploy"
    run = ["./mark.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    timeout_s = 10
    """


@BOTH
def test_run_stops_at_the_gate_until_approved_then_resume_completes(sw, golden):
    kit = Kit(sw)
    ran, wf = kit.run(RELEASE)
    assert ran.result["workflow"]["state"] == "awaiting_approval"
    assert kit.marks() == []  # the deploy waits behind the gate
    too_early = kit("workflow", "resume", wf, actor=CI)
    approve = kit("workflow", "approve", wf, actor=BOB)
    again = kit("workflow", "approve", wf, "--step", "sign-off", actor="human/carol")
    resume = kit("workflow", "resume", wf, actor=CI)
    status = kit("workflow", "status", wf, actor=None)
    assert sw.transcript(ran, too_early, approve, again, resume, status) == golden
    assert too_early.error["code"] == "E_STATE"
    assert approve.result["approved_by"] == BOB
    assert again.result["already_approved"] and again.result["approved_by"] == BOB
    assert status.result["workflow"]["state"] == "completed"
    assert kit.marks() == ["deploy"]
    op = kit("op", "show", str(status.result["steps"][0]["op"]), actor=None).result
    assert op["kind"] == "workflow_step"
    # Described as `ref set` describes it (tools/ref.py set_in), led by the workflow and step.
    assert op["description"] == f"workflow {wf} step promote: create release/v1 at {kit.c2[:12]}"
    assert op["actor"] == ALICE


@BOTH
def test_a_failing_command_stops_the_run_and_resume_retries_it_only_when_named(sw, golden):
    kit = Kit(sw)
    flow = """\
        name = "flaky"
        [[step]]
        name = "first"
        run = ["./mark.sh", "first"]
        [[step]]
        name = "check"
        run = ["./fail.sh"]
        [[step]]
        name = "last"
        run = ["./mark.sh", "last"]
        """
    failed, wf = kit.run(flow)
    resume = kit("workflow", "resume", wf)
    # The definition was stored when the run began: editing the file changes nothing (see the end).
    kit.write(flow.replace("./fail.sh", "./mark.sh\", \"check"))
    retry_wrong = kit("workflow", "resume", wf, "--retry", "first")
    assert sw.transcript(failed, resume, retry_wrong) == golden
    assert failed.exit == 10 and failed.error["code"] == "E_STEP_FAILED"
    assert failed.error["details"]["result"]["stderr_tail"] == "fail.sh: the target refused\n"
    assert failed.error["details"]["result"]["exit_code"] == 3
    assert resume.error["code"] == "E_STATE" and resume.error["next"]["arguments"] == {"workflow": wf, "retry": "check"}
    assert retry_wrong.exit == 7  # `first` succeeded: the run stopped at `check`
    misspelt = kit("workflow", "resume", wf, "--retry", "chekc")  # was E_STATE: "only with --retry check"
    assert (misspelt.exit, misspelt.error["code"], misspelt.error["details"]["steps"]) == (4, "E_NOT_FOUND", ["first", "check", "last"])
    # Its hint's command names the workflow (`swarmctl workflow status` alone is a usage error),
    # and runs as written: the `next` it spells.
    assert misspelt.error["next"]["arguments"] == {"workflow": wf} and shlex.join(misspelt.error["next"]["argv"]) in misspelt.error["hint"]
    assert kit(*misspelt.error["next"]["argv"][5:]).result["workflow"]["id"] == wf
    (kit.dir / "fail.sh").write_text("#!/bin/sh\necho fixed\n")
    retried = kit("workflow", "resume", wf, "--retry", "check")
    assert retried.result["workflow"]["state"] == "completed"
    check = retried.result["steps"][1]
    assert (check["status"], check["attempts"], check["result"]["stdout_tail"]) == ("success", 2, "fixed\n")
    assert kit.marks() == ["first", "last"]


def test_a_timeout_kills_the_whole_process_group(sw):
    """Whenever the timeout strikes (before or after hang.sh has started, however loaded the
    machine), the step's whole process group is gone when the run returns."""
    kit = Kit(sw)
    ran, wf = kit.run(
        """\
        name = "slow"
        [[step]]
        name = "wait"
        run = ["./hang.sh", "wait"]
        timeout_s = 0.3
        """
    )
    result = ran.error["details"]["result"]
    assert ran.error["code"] == "E_STEP_FAILED"
    assert result["timed_out"] and result["exit_code"] is None and result["signal"] == "SIGTERM"
    # Commands run in the workflow file's folder: nothing may still run there, whether the
    # timeout struck while the step's gate was starting, in hang.sh, or in the sleep it execs.
    assert kit.processes_in_folder() == [], "the script (exec'd into sleep) outlived its timeout"


@BOTH
def test_a_program_named_like_a_secret_is_named_in_full_and_its_output_still_masked(sw):
    """`cannot start ./rotate-token: no such program` read `./rotate-token: *** such program`:
    the masking of `KEY: value` in a command's output was applied to swarmctl's own words."""
    kit = Kit(sw)
    (kit.dir / "print-token.sh").write_text("#!/bin/sh\necho 'token: s3cr3t-value-42'\nexit 3\n")
    (kit.dir / "print-token.sh").chmod(0o755)
    ran, wf = kit.run('name = "rotate"\n[[step]]\nname = "a"\nrun = ["./rotate-token"]\n')
    missing = f"cannot start ./rotate-token: no such program: {kit.dir / 'rotate-token'}"
    assert ran.error["message"] == f"workflow {wf} failed at step a: {missing}"
    step = kit("workflow", "status", wf, actor=None).result["steps"][0]
    assert step["result"]["error"] == step["result"]["summary"] == missing
    ran, wf = kit.run('name = "print"\n[[step]]\nname = "a"\nrun = ["./print-token.sh"]\n', name="print.toml")
    result = kit("workflow", "status", wf, actor=None).result["steps"][0]["result"]
    assert result["summary"] == "exited with status 3" and result["stdout_tail"] == "token: ***\n"
    assert "s3cr3t" not in ran.stdout


def test_workflow_run_dash_says_it_reads_a_file_not_stdin(sw):
    """`-` is stdin for `policy set` and `call`; `workflow run -` said only "no workflow file ./-"."""
    kit = Kit(sw)
    ran = kit.process("workflow", "run", "-")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    assert ran.error["message"].startswith("workflow run reads a file, not stdin (`-`)")
    assert "workflow run flow.toml" in ran.error["hint"]
    assert kit("workflow", "list", actor=None).result["workflows"] == []
    # Under `[run] definitions` too: the policy is asked of the file, and `-` is none (it was
    # E_FORBIDDEN, "./- is not a workflow definition this store runs").
    (kit.dir / "policy.toml").write_text(f'[run]\ndefinitions = ["{kit.dir.resolve()}/*.toml"]\n')
    assert kit("policy", "set", "policy.toml").exit == 0
    ran = kit.process("workflow", "run", "-")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG") and "not stdin" in ran.error["message"], ran.stdout


def test_a_store_steps_target_is_checked_before_anything_is_created(sw):
    """`to = "${env:TARGET}"` passed the up-front check but is never expanded (only `run`,
    `rollback` and `env` are), so the workflow was made and failed at that step; a `to` that can
    name neither a ref nor a changeset (`bad..name`) likewise. Both are E_INVALID_ARG now, with
    nothing created, as the README says of an invalid ref name or `${...}` reference."""
    kit = Kit(sw)
    for to, said in (("${env:TARGET}", "`ref_set.to` has a `${`"), ("bad..name", "is neither a ref name nor a changeset id prefix")):
        kit.write(f'name = "w"\n[[step]]\nname = "s"\nref_set = {{ name = "x", to = "{to}" }}\n')
        ran = kit("workflow", "run", "flow.toml", env={"TARGET": "main"})
        assert (ran.exit, ran.error["code"], ran.error["details"]["key"]) == (2, "E_INVALID_ARG", "ref_set.to"), ran.stdout
        assert said in ran.error["message"]
    assert kit("workflow", "list", actor=None).result["workflows"] == []
    assert kit.run(f'name = "w"\n[[step]]\nname = "s"\nref_set = {{ name = "x", to = "{kit.c1[:8]}" }}\n')[0].exit == 0


def test_store_steps_are_one_op_each_and_fail_without_writing(sw):
    kit = Kit(sw)
    kit("ref", "set", "release/v1", kit.c2, "--create")  # op 4
    ran, wf = kit.run(
        """\
        name = "refs"
        [[step]]
        name = "same"
        ref_set = { name = "release/v1", to = "main" }
        [[step]]
        name = "back"
        ref_set = { name = "release/v1", to = "first-is-not-a-ref" }
        """
    )
    assert ran.error["code"] == "E_STEP_FAILED"
    assert ran.error["details"]["result"]["error"]["code"] == "E_NOT_FOUND"
    steps = kit("workflow", "status", wf, actor=None).result["steps"]
    assert steps[0]["status"] == "success" and steps[0]["op"] is None  # it already named main's changeset
    assert kit("op", "log", "-n", "1", actor=None).result["ops"][0]["op"] == 4  # no op was appended
    ran, wf = kit.run('name = "del"\n[[step]]\nname = "gone"\nref_delete = { name = "release/v1" }\n', name="del.toml")
    op = ran.result["steps"][0]["op"]
    assert kit("op", "show", str(op), actor=None).result["ref_moves"] == [{"name": "release/v1", "old": kit.c2, "new": None}]
    ran, _ = kit.run('name = "del"\n[[step]]\nname = "again"\nref_delete = { name = "release/v1" }\n', name="del.toml")
    error = ran.error["details"]["result"]["error"]
    assert (error["code"], error["hint"]) == ("E_NOT_FOUND", "`swarmctl ref list` lists the refs.")  # as `ref delete` says it


def test_a_command_whose_folder_is_gone_says_so_not_that_its_program_is_missing(sw):
    """`cannot start /bin/pwd: No such file or directory`, when /bin/pwd was there and the
    workflow file's folder, where its commands run, was not."""
    kit = Kit(sw)
    folder = kit.dir / "gone"
    folder.mkdir()
    kit.write('name = "w"\n[[step]]\nname = "g"\napproval = "go?"\n[[step]]\nname = "a"\nrun = ["/bin/pwd"]\n', "gone/flow.toml")
    _, wf = kit.run((folder / "flow.toml").read_text(), name="gone/flow.toml")
    folder.joinpath("flow.toml").unlink()
    folder.rmdir()
    kit("workflow", "approve", wf)
    resumed = kit("workflow", "resume", wf)
    assert resumed.error["code"] == "E_STEP_FAILED", resumed.stdout
    assert resumed.error["message"].endswith(f"cannot start /bin/pwd: its working directory {folder} does not exist")


def test_relative_command_paths_resolve_against_the_workflow_file(sw):
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]]\nname = "a"\nrun = ["./mark.sh", "from-elsewhere"]\n')
    ran = sw("--repo", kit.repo, "--as", ALICE, "workflow", "run", "flows/flow.toml", cwd=sw.tmp)
    assert ran.result["workflow"]["base_dir"] == str(kit.dir)
    assert kit.marks() == ["from-elsewhere"]  # ran in the file's folder, not the caller's


@BOTH
def test_a_run_killed_mid_step_leaves_it_interrupted_and_never_reruns_it(sw, golden):
    kit = Kit(sw)
    kit.write(
        """\
        name = "killed"
        [[step]]
        name = "promote"
        ref_set = { name = "release/v1", to = "main" }
        [[step]]
        name = "deploy"
        run = ["./hang.sh", "deploy"]
        rollback = ["./mark.sh", "undeploy"]
        [[step]]
        name = "after"
        run = ["./mark.sh", "after"]
        """
    )
    proc = kit.popen("workflow", "run", "flow.toml")
    try:
        kit.wait_for_mark("deploy", proc)
        wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
        live = kit("workflow", "status", wf, actor=None).result
        # The store is not locked while the command runs: others write without waiting.
        other = kit("ref", "set", "elsewhere", kit.c1, "--create", env={"SWARMCTL_LOCK_TIMEOUT": "0.5"})
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)  # only a hang reaches it: the wait ends when the process does
    finally:
        kit.kill_hung("deploy")
    assert (live["workflow"]["state"], live["steps"][1]["status"], live["workflow"]["owner"]["alive"]) == ("running", "running", True)
    assert other.exit == 0 and other.result["op"] == 5
    status = kit("workflow", "status", wf, actor=None)
    listed = kit("workflow", "list", actor=None)
    resume = kit("workflow", "resume", wf)
    assert sw.transcript(status, listed, resume) == golden
    deploy = status.result["steps"][1]
    assert (deploy["status"], deploy["interrupted_during"]) == ("interrupted", "run")
    assert status.result["workflow"]["state"] == "failed"
    assert resume.error["code"] == "E_STATE" and "--retry deploy" in resume.error["message"]
    assert kit.marks() == ["deploy"]  # started once, never again; `after` never ran
    # `--state` filters on the state shown: the run saved `running` whose swarmctl is gone is
    # found as `failed` (a script's `workflow list --state failed` missed it), not as `running`.
    found = {s: [w["id"] for w in kit("workflow", "list", "--state", s, actor=None).result["workflows"]]
             for s in ("failed", "running")}
    assert found == {"failed": [wf], "running": []}


@BOTH
def test_cancel_skips_what_has_not_run_and_leaves_the_rest(sw, golden):
    kit = Kit(sw)
    _, wf = kit.run(RELEASE)
    cancel = kit("workflow", "cancel", wf)
    again = kit("workflow", "cancel", wf)
    resume = kit("workflow", "resume", wf)
    assert sw.transcript(cancel, again, resume) == golden
    assert cancel.result["skipped"] == ["sign-off", "deploy"] and cancel.result["left_applied"] == ["promote"]
    assert again.error["code"] == resume.error["code"] == "E_STATE"


@BOTH
def test_list_and_state_filter(sw):
    kit = Kit(sw)
    _, waiting = kit.run(RELEASE)
    _, done = kit.run('name = "quick"\n[[step]]\nname = "a"\nrun = ["./mark.sh", "a"]\n', name="quick.toml")
    listed = kit("workflow", "list", actor=None).result
    assert [w["id"] for w in listed["workflows"]] == [done, waiting] and not listed["has_more"]
    assert listed["workflows"][0] | {"created_at": None, "updated_at": None} == {
        "id": done, "name": "quick", "state": "completed", "steps": 1, "done": 1, "created_by": ALICE,
        "created_at": None, "updated_at": None,
    }
    only = kit("workflow", "list", "--state", "awaiting_approval", actor=None).result["workflows"]
    assert [w["id"] for w in only] == [waiting]
    page = kit("workflow", "list", "-n", "1", actor=None).result
    assert len(page["workflows"]) == 1 and page["has_more"]
    assert kit("workflow", "status", "wf-zzzzzzzz", actor=None).error["code"] == "E_NOT_FOUND"
    assert kit("workflow", "status", done[:7], actor=None).result["workflow"]["id"] == done  # a unique prefix
    # A prefix too short to resolve says so, as a changeset's does (it said "no workflow wf-e").
    short = kit("workflow", "status", done[:5], actor=None)
    assert (short.exit, short.error["code"]) == (2, "E_INVALID_ARG") and "too short" in short.error["message"]


@BOTH
def test_env_values_never_reach_the_store_nor_any_output(sw):
    """${env:DEPLOY_TOKEN} is resolved for the command, which prints it: the database file and
    its -wal file never hold it (on PostgreSQL: no row of the store's tables), and no output
    shows it."""
    kit = Kit(sw)
    # Hold a connection open so the -wal file stays on disk (SQLite folds it into the main file
    # and deletes it when the last connection closes): the grep then sees both.
    keeper = connect(sw.store)
    keeper.execute("SELECT COUNT(*) FROM ops").fetchone()
    env = {"DEPLOY_TOKEN": SECRET}
    ran, wf = kit.run(
        """\
        name = "secret"
        [[step]]
        name = "leak"
        run = ["./leak.sh", "--token", "${env:DEPLOY_TOKEN}"]
        rollback = ["./leak.sh"]
        env = { DEPLOY_TOKEN = "${env:DEPLOY_TOKEN}", PASSWORD = "${env:DEPLOY_TOKEN}" }
        [[step]]
        name = "fail"
        run = ["./fail.sh"]
        env = { API_TOKEN = "${env:DEPLOY_TOKEN}" }
        """,
        env=env,
    )
    outputs = [
        ran,
        kit("workflow", "status", wf, actor=None),
        kit("workflow", "show-definition", wf, actor=None),
        kit("workflow", "rollback", wf, env=env),
        kit("workflow", "rollback", wf, "--confirm", env=env),
        kit("workflow", "status", wf, actor=None),
    ]
    assert kit.marks() == [SECRET, SECRET]  # the scripts did get the value, run and rollback
    assert sw.backend == "postgres" or (Path(kit.repo) / "swarmops.db-wal").stat().st_size > 0
    assert SECRET.encode() not in kit.db_bytes()
    for out in outputs:
        assert SECRET not in out.stdout + out.stderr
    leak = outputs[-1].result["steps"][0]
    assert leak["result"]["stdout_tail"] == "token is ***\n"
    assert leak["result"]["stderr_tail"] == "DEPLOY_TOKEN=***\n"
    assert leak["definition"]["env"] == {"DEPLOY_TOKEN": "***", "PASSWORD": "***"}
    undo = outputs[4].result["results"][0]
    assert undo["stdout_tail"] == "token is ***\n" and undo["stderr_tail"] == "DEPLOY_TOKEN=***\n"
    assert leak["status"] == "rolled_back"
    keeper.close()


def _read_terminal(main: int) -> bytes:
    """All a terminal showed, once the process that had it ended (`main`: its pty's side, closed)."""
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return seen


def _on_a_terminal(kit: Kit, *args: str) -> tuple[subprocess.Popen, int]:
    """swarmctl started with stderr on a pseudo-terminal (progress is shown there); stdout a pipe."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*swarmctl_argv(), *kit.as_(ALICE), *args],
        cwd=kit.dir, env={**kit.sw.env, "TERM": "xterm", "COLUMNS": "100"},
        stdout=subprocess.PIPE, stderr=secondary, text=True,
    )
    os.close(secondary)
    return proc, main


def test_progress_shows_the_step_in_flight_on_a_terminal_and_stdout_holds_only_the_envelope(sw):
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]]\nname = "deploy-eu"\nrun = ["./mark.sh", "deploy-eu"]\n')
    proc, main = _on_a_terminal(kit, "workflow", "run", "flow.toml")
    out, _ = proc.communicate(timeout=WAIT_S)
    seen = _read_terminal(main)
    assert proc.returncode == 0
    assert len(out.splitlines()) == 1 and out.startswith('{"ok":true,"op":"workflow_run"')
    assert b"running step 1 deploy-eu" in seen
    # Not on a terminal: nothing at all on stderr.
    plain = kit.process("workflow", "run", "flow.toml")
    assert plain.exit == 0 and plain.stderr == ""


@BOTH
def test_ctrl_c_kills_the_command_and_leaves_the_step_interrupted(sw):
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./hang.sh", "deploy"]\n')
    proc = kit.popen("workflow", "run", "flow.toml")
    try:
        kit.wait_for_mark("deploy", proc)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT_S)
    finally:
        kit.kill_hung("deploy")
    assert proc.returncode == 130
    pid = int((kit.dir / "deploy.pid").read_text())
    assert not Path(f"/proc/{pid}").exists(), "the command outlived Ctrl-C"
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    status = kit("workflow", "status", wf, actor=None).result
    assert status["workflow"]["state"] == "failed" and status["workflow"]["owner"] is None  # saved, not just observed
    assert (status["steps"][0]["status"], status["steps"][0]["interrupted_during"]) == ("interrupted", "run")


@BOTH
def test_a_secret_a_command_prints_as_key_value_is_masked_before_it_is_stored(sw):
    kit = Kit(sw)
    (kit.dir / "chatty.sh").write_text("#!/bin/sh\necho 'connecting with API_KEY=kv-literal-0042 to eu'\n")
    (kit.dir / "chatty.sh").chmod(0o755)
    ran, wf = kit.run('name = "w"\n[[step]]\nname = "chatty"\nrun = ["./chatty.sh"]\n')
    assert ran.result["steps"][0]["result"]["stdout_tail"] == "connecting with API_KEY=*** to eu\n"
    kit("workflow", "status", wf, actor=None)  # a read, to be sure the store is closed and flushed
    assert b"kv-literal-0042" not in kit.db_bytes()


# --- a command that outlives swarmctl, and swarmctl told to stop (real processes) --------------

TICKING = """\
    name = "ticking"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "deploy"
    run = ["./tick.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    """


@BOTH
def test_a_command_that_outlives_a_killed_run_is_still_running_and_nothing_runs_it_again(sw):
    """kill -9 of swarmctl leaves its command running: the step is `running` (not interrupted),
    and resume --retry, rollback --confirm and cancel refuse (E_STATE) until the command ends."""
    from swarmctl import pids

    kit = Kit(sw)
    kit.write(TICKING)
    proc = kit.popen("workflow", "run", "flow.toml")
    pgid = kit.wait_for_ticks("deploy", proc)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        wf = kit("workflow", "list", actor=None).result["workflows"][0]
        status = kit("workflow", "status", wf["id"], actor=None).result
        retry = kit("workflow", "resume", wf["id"], "--retry", "deploy")
        rollback = kit("workflow", "rollback", wf["id"], "--confirm", "--acknowledge-unknown-effects", "all")
        cancel = kit("workflow", "cancel", wf["id"])
        preview = kit("workflow", "rollback", wf["id"], actor=None).result
        assert kit.still_ticking("deploy")  # the one copy runs on, alone
    finally:
        kit.kill_group(pgid)
    assert wf["state"] == "running"
    deploy = status["steps"][1]
    assert (deploy["status"], deploy["command_pid"], deploy["interrupted_during"]) == ("running", pgid, None)
    assert status["workflow"]["state"] == "running" and status["workflow"]["owner"]["alive"] is False
    assert status["next"] == []  # no retry and no rollback offered while it runs
    for refused in (retry, cancel):
        assert refused.exit == 7 and refused.error["code"] == "E_STATE", refused.stdout
        assert "still running" in refused.error["message"] and f"pid {pgid}" in refused.error["message"]
        assert refused.error["details"]["pid"] == pgid and f"kill -TERM -{pgid}" in refused.error["hint"]
    # A rollback refuses it as its preview's blocker (SPEC 5: E_REFUSED, the refusals; it was E_STATE).
    assert (rollback.exit, rollback.error["code"]) == (7, "E_REFUSED"), rollback.stdout
    assert [(r["code"], r["pid"]) for r in rollback.error["details"]["refusals"]] == [("command_running", pgid)]
    assert f"kill -TERM -{pgid}" in rollback.error["details"]["refusals"][0]["message"]
    assert [(b["code"], b["pid"]) for b in preview["blast_radius"]["blockers"] if b["code"] == "command_running"] == [
        ("command_running", pgid)
    ]
    assert preview["next"] is None
    # Once the command is gone, its effect is unknown: the step is interrupted, and a retry or a
    # rollback is offered.
    after = kit("workflow", "status", wf["id"], actor=None).result
    assert after["workflow"]["state"] == "failed"
    assert (after["steps"][1]["status"], after["steps"][1]["command_pid"]) == ("interrupted", None)
    assert [c["argv"][4:] for c in after["next"]] == [["rollback", wf["id"]], ["resume", wf["id"], "--retry", "deploy"]]
    assert not pids.group_alive(pgid, None)


@BOTH
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_to_a_run_kills_the_command_and_saves_the_step_interrupted(sw, sig):
    """SIGTERM, and SIGHUP (a closed terminal, a dropped ssh session), which ended swarmctl at
    once with no envelope and left its command running with nobody to enforce its timeout."""
    kit = Kit(sw)
    kit.write(TICKING)
    proc = kit.popen("workflow", "run", "flow.toml")
    pgid = kit.wait_for_ticks("deploy", proc)
    proc.send_signal(getattr(signal, sig))
    out, _ = proc.communicate(timeout=WAIT_S)
    from swarmctl import pids

    alive = pids.group_alive(pgid, None)
    kit.kill_group(pgid)
    assert not alive, f"the command outlived {sig} to swarmctl"
    assert proc.returncode == 130, out
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    # The envelope names the signal that came, the workflow and the step it stopped, and how long it ran.
    envelope = json.loads(out)
    error = envelope["error"]
    assert error["code"] == "E_INTERRUPTED" and f"interrupted by {sig}" in error["message"], error
    assert error["details"] == {"signal": sig, "workflow": wf, "step": "deploy", "during": "run"}
    assert envelope["meta"]["elapsed_ms"] > 0 and envelope["meta"]["repo"] == kit.repo
    # What to do: never "run the command again" (a new workflow, its steps run again), but look,
    # then resume or roll back; `next` is the status, runnable as written (the hint's commands too).
    assert "do not run its file again" in error["hint"] and "run the command again" not in error["hint"], error["hint"]
    me = ["swarmctl", "--repo", kit.repo, "--as", ALICE]
    assert error["next"]["argv"] == [*me, "workflow", "status", wf]
    assert f"`{shlex.join([*me, 'workflow', 'resume', wf])}`" in error["hint"], error["hint"]
    status = kit("workflow", "status", wf, actor=None).result
    assert status["workflow"]["state"] == "failed" and status["workflow"]["owner"] is None  # saved, not just observed
    deploy = status["steps"][1]
    assert (deploy["status"], deploy["interrupted_during"], deploy["command_pid"]) == ("interrupted", "run", None)


def test_a_sighup_nohup_ignores_stays_ignored(sw):
    """Under `nohup` (SIGHUP ignored) the run goes on: the SIGTERM sent after it is what stops it
    (a pending SIGHUP, were it not ignored, would be delivered first)."""
    kit = Kit(sw)
    kit.write(TICKING)
    ignored = subprocess.Popen(["sh", "-c", "trap '' HUP; exec \"$@\"", "nohup", *swarmctl_argv(), *kit.as_(ALICE),
                                "workflow", "run", "flow.toml"], cwd=kit.dir, env=sw.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pgid = kit.wait_for_ticks("deploy", ignored)
    ignored.send_signal(signal.SIGHUP)
    ignored.send_signal(signal.SIGTERM)
    out, _ = ignored.communicate(timeout=WAIT_S)
    kit.kill_group(pgid)
    assert ignored.returncode == 130 and json.loads(out)["error"]["details"]["signal"] == "SIGTERM", out


def test_a_signal_while_a_finished_rollback_is_saved_comes_once_it_is_saved(sw):
    """Ctrl-C while the rollback saved its end (every undo done): the save was rolled back, the
    workflow read `rollback_failed` with its steps `rolled_back`, and the envelope named the
    undo's op with "`swarmctl op undo N` takes it back", no workflow. The end is saved first now,
    and the envelope names the workflow."""
    import time

    kit = Kit(sw)
    _, wf = kit.run('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "release/v9", to = "main" }\n')
    flag = sw.tmp / "paused"
    proc = kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed",
                     env={"SWARMCTL_FAULT": f"pause-before-commit:{flag}"})
    deadline = time.monotonic() + WAIT_S
    for commit in ("claim", "undo", "release"):  # each waits at its commit until the flag goes
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        if commit == "release":
            proc.send_signal(signal.SIGINT)
        flag.unlink()
    out, err = proc.communicate(timeout=WAIT_S)
    error = json.loads(out)["error"]
    assert (proc.returncode, error["code"], error["details"]["workflow"]) == (130, "E_INTERRUPTED", wf), out + err
    assert "op undo" not in error["hint"], error["hint"]
    status = kit("workflow", "status", wf, actor=None).result
    assert (status["workflow"]["state"], status["steps"][0]["status"]) == ("rolled_back", "rolled_back"), status


def test_a_workflow_run_as_a_step_of_another_has_killed_its_command_when_the_other_kills_it(sw):
    """SIGTERM to a workflow whose step runs another workflow: both swarmctls took a second's
    grace, so the outer one killed the inner one just before it killed its own command (another
    group, out of the outer kill's reach), which ran on with nobody to stop it. The inner one
    now takes half its parent's grace (SWARMCTL_KILL_GRACE_S, in its environment)."""
    from swarmctl import pids

    kit = Kit(sw)
    (kit.dir / "stubborn.sh").write_text('#!/bin/sh\ntrap "" TERM\necho $$ > stubborn.pid\nwhile :; do sleep 0.05; done\n')
    (kit.dir / "stubborn.sh").chmod(0o755)
    kit.write('name = "inner"\n[[step]]\nname = "stub"\nrun = ["./stubborn.sh"]\ntimeout_s = 120\n', name="inner.toml")
    inner = [*swarmctl_argv(), "--repo", kit.repo, "--as", ALICE, "workflow", "run", "inner.toml"]
    kit.write(f'name = "outer"\n[[step]]\nname = "nested"\nrun = {json.dumps(inner)}\ntimeout_s = 120\n')
    proc = kit.popen("workflow", "run", "flow.toml")
    pid_file = kit.dir / "stubborn.pid"
    deadline = time.monotonic() + WAIT_S
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    stub_group = os.getpgid(int(pid_file.read_text()))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=WAIT_S)
    alive = pids.group_alive(stub_group, None)
    kit.kill_group(stub_group)
    assert proc.returncode == 130, out
    assert not alive, "the inner workflow's command outlived SIGTERM to the outer one"


@BOTH
def test_sigterm_during_a_rollback_command_kills_it_and_saves_the_step_interrupted(sw):
    from swarmctl import pids

    kit = Kit(sw)
    _, wf = kit.run(TICKING.replace('["./tick.sh", "deploy"]', '["./mark.sh", "deploy"]').replace(
        '["./mark.sh", "undeploy"]', '["./tick.sh", "undeploy"]'))
    proc = kit.popen("workflow", "rollback", wf, "--confirm", "--include-completed")
    pgid = kit.wait_for_ticks("undeploy", proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=WAIT_S)
    alive = pids.group_alive(pgid, None)
    kit.kill_group(pgid)
    assert not alive, "the rollback command outlived SIGTERM to swarmctl"
    assert proc.returncode == 130
    status = kit("workflow", "status", wf, actor=None).result
    assert status["workflow"]["state"] == "rollback_failed" and status["workflow"]["owner"] is None
    deploy = status["steps"][1]
    assert (deploy["status"], deploy["interrupted_during"]) == ("interrupted", "rollback")
    assert status["steps"][0]["status"] == "success"  # promote's undo never began
    error = json.loads(out)["error"]
    assert error["details"] == {"signal": "SIGTERM", "workflow": wf, "step": "deploy", "during": "rollback"}
    assert "preview the rollback again" in error["hint"] and error["next"]["argv"][-3:] == ["workflow", "status", wf]


@BOTH
def test_ctrl_c_leaves_a_workflow_another_process_now_holds_alone(sw):
    """The Ctrl-C path kills its command but saves nothing over a record it no longer owns."""
    from swarmctl import pids

    kit = Kit(sw)
    kit.write(TICKING)
    proc = kit.popen("workflow", "run", "flow.toml")
    pgid = kit.wait_for_ticks("deploy", proc)
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    me = pids.me()
    with tamper(sw.store) as db:  # as if another process had taken it over
        db.execute("UPDATE workflows SET owner_pid = ?, owner_start = ?, owner_actor = 'human/bob' WHERE id = ?", (me.pid, me.start, wf))
    try:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT_S)
        alive = pids.group_alive(pgid, None)  # swarmctl returns only once its command's group is gone
    finally:
        kit.kill_group(pgid)
    assert proc.returncode == 130 and not alive
    db = connect(sw.store)
    try:
        held = tuple(db.execute("SELECT state, owner_pid, owner_actor FROM workflows WHERE id = ?", (wf,)).fetchone())
        step = tuple(db.execute("SELECT status FROM workflow_steps WHERE workflow = ? AND name = 'deploy'", (wf,)).fetchone())
    finally:
        db.close()
    assert held == ("running", me.pid, BOB) and step == ("running",)


def test_progress_left_on_the_terminal_by_ctrl_c_says_the_step_was_interrupted(sw):
    """After Ctrl-C the progress line stayed as it was, "running step 1 deploy", a step that was
    no longer running: its last frame says `: interrupted`."""
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./hang.sh", "deploy"]\n')
    proc, main = _on_a_terminal(kit, "workflow", "run", "flow.toml")
    try:
        kit.wait_for_mark("deploy", proc)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        kit.kill_hung("deploy")
    seen = _read_terminal(main)
    assert proc.returncode == 130 and '"code":"E_INTERRUPTED"' in out
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))  # colours, the cursor's
    last = [line for line in text.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert "running step 1 deploy: interrupted" in last, repr(seen[-400:])
