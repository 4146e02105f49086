"""Unit tests for the tricky parts of workflows: telling a live process from a dead one (or a
reused pid), `${env:...}` references, the blast radius's fingerprint, command tails."""

import os
import subprocess
import sys

import pytest
from core_helpers import ALICE

from swarmctl import pids
from swarmctl.tools.workflow import blast_radius, definition, process


def test_a_live_process_is_alive_only_with_its_own_start_time():
    me = pids.me()
    assert me.start is not None
    assert pids.alive(me.pid, me.start)
    # The same pid with another start time is a different process that reused the pid.
    assert not pids.alive(me.pid, str(int(me.start) + 1))
    assert not pids.alive(None, None)


def test_a_finished_process_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = pids.start_time(child.pid)
    child.wait()
    assert not pids.alive(child.pid, start)


def test_references_expand_and_escape():
    env = {"TOKEN": "t0k", "REGION": "eu"}
    assert definition.references("a ${env:TOKEN} b ${env:REGION}") == ["TOKEN", "REGION"]
    assert definition.expand("x-${env:REGION}-$${literal}", env) == "x-eu-${literal}"
    assert definition.only_references("${env:TOKEN}") and definition.only_references(" ${env:A}${env:B} ")
    assert not definition.only_references("Bearer ${env:TOKEN}") and not definition.only_references("abc")
    step = {"run": ["p", "${env:A}"], "rollback": ["q", "${env:B}"], "env": {"X": "${env:A}", "Y": "${env:C}"}}
    assert definition.step_references(step) == ["A", "B", "C"]
    assert definition.missing_references(step, {"A": "1"}) == ["B", "C"]


def _radius(**changes):
    radius = {
        "workflow": {"id": "wf-aaaaaaaa", "name": "w", "state": "failed"},
        "state_after": "rolled_back",
        "counts": {"would_roll_back": 1},
        "would_roll_back": [{"step": "a", "predicted": {"outcome": "ok"}}],
        "left_in_place": [], "unknown_effects": [{"step": "b", "acknowledged": False}], "not_reversed": [],
        "already_rolled_back": [], "no_effect": [], "blockers": [], "unmeasured": [],
    }
    radius.update(changes)
    return radius


def test_the_fingerprint_ignores_the_callers_decisions_and_sees_the_radius():
    base = blast_radius.fingerprint(_radius())
    assert base.startswith("pv-") and len(base) == 19
    assert blast_radius.fingerprint(_radius(unknown_effects=[{"step": "b", "acknowledged": True}])) == base
    assert blast_radius.fingerprint(_radius(blockers=[{"code": "x", "message": "y"}])) == base
    moved = _radius(would_roll_back=[{"step": "a", "predicted": {"outcome": "fails", "code": "E_CAS_MISMATCH"}}])
    assert blast_radius.fingerprint(moved) != base
    assert blast_radius.fingerprint(_radius(workflow={"id": "wf-aaaaaaaa", "name": "w", "state": "rollback_failed"})) != base


def test_command_output_keeps_only_a_tail(tmp_path):
    outcome = process.run_command(
        [sys.executable, "-c", "import sys; sys.stdout.write('x' * 10000 + 'END'); sys.exit(4)"],
        cwd=tmp_path, env=os.environ, timeout_s=30,
    )
    assert outcome.exit_code == 4 and not outcome.ok
    assert outcome.stdout_tail.endswith("END") and len(outcome.stdout_tail) == process.TAIL_BYTES + 1  # "…" + tail


def test_a_program_that_cannot_start_is_a_failed_outcome_not_a_crash(tmp_path):
    outcome = process.run_command(["./missing.sh"], cwd=tmp_path, env=os.environ, timeout_s=5)
    assert outcome.exit_code is None and outcome.error.startswith("cannot start")
    assert process.program_problem("./missing.sh", tmp_path, os.environ) == f"no such program: {tmp_path}/missing.sh"
    (tmp_path / "plain.txt").write_text("")
    assert process.program_problem("./plain.txt", tmp_path, os.environ).startswith("not executable")
    assert process.program_problem("no-such-program-anywhere", tmp_path, os.environ).endswith("is not on PATH")
    assert process.program_problem("sh", tmp_path, os.environ) is None


def test_no_tool_module_runs_sql():
    """Rows are read and written in swarmctl/store/ (workflows.py for workflows), never in tools/."""
    import ast
    from pathlib import Path

    import swarmctl

    tools = Path(swarmctl.__file__).parent / "tools"
    found = []
    for path in sorted(tools.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                found.append(f"{path.relative_to(tools)}:{node.lineno}")
    assert found == []


def test_an_abandoned_init_of_a_finished_process_is_cleaned_up(tmp_path):
    """`init` removes what an init killed half-way left, once its process is gone, even while
    that process is still a zombie (it writes no more)."""
    from swarmctl.store import Store

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while pids.start_time(child.pid) is not None:  # until it has exited, unreaped
        pass
    leftover = tmp_path / f"swarmops.db.init-{child.pid}"
    leftover.write_bytes(b"half a store")
    try:
        Store.create(tmp_path, ALICE).close()
        assert not leftover.exists()
    finally:
        child.wait()


def test_a_process_group_lives_while_any_member_does_even_after_its_leader_is_gone():
    import signal
    import time

    leader = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 30 & echo $!; read x"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    member = int(leader.stdout.readline())
    start = pids.start_time(leader.pid)
    leader.stdin.close()
    leader.wait()  # the leader has exited; its child runs on in the group
    try:
        assert not pids.alive(leader.pid, start)
        assert pids.group_alive(leader.pid, start)
        me = pids.me()  # a pid now held by a process with another start time: the old group is gone
        assert not pids.group_alive(me.pid, str(int(me.start) + 1))
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pids.alive(member):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not pids.group_alive(leader.pid, start)
    assert not pids.group_alive(None, None)


@pytest.mark.backends("sqlite", "postgres")
def test_a_command_step_is_one_transaction(sw, monkeypatch):
    """One commit a command step, in a run and in a rollback: a step's `running` (with the
    process group its command starts in, saved before it starts) and the outcome of the step
    before it commit together."""
    from swarmctl.store import backend_for
    from wfkit import Kit

    commits = []
    kind = backend_for(sw.store)
    real_commit = kind._commit
    monkeypatch.setattr(kind, "_commit", lambda self, w: (commits.append(1), real_commit(self, w))[1])
    kit = Kit(sw)
    per_run, per_rollback = {}, {}
    for steps in (1, 3):
        flow = f'name = "w{steps}"\n' + "".join(
            f'[[step]]\nname = "s{i}"\nrun = ["./mark.sh", "do{i}"]\nrollback = ["./mark.sh", "undo{i}"]\n' for i in range(steps)
        )
        before = len(commits)
        _, wf = kit.run(flow, name=f"w{steps}.toml")
        per_run[steps] = len(commits) - before
        before = len(commits)
        assert kit("workflow", "rollback", wf, "--confirm", "--include-completed").result["state"] == "rolled_back"
        per_rollback[steps] = len(commits) - before
    assert (per_run[3] - per_run[1]) / 2 == 1
    assert (per_rollback[3] - per_rollback[1]) / 2 == 1


def test_the_workflows_state_is_written_only_when_it_changes(sw, monkeypatch):
    """A column an UPDATE names has its index entries rewritten even where its value stays
    (SQLite), so `state` named at every step cost every step's commit a page of the state
    index: it is named once, as the run starts."""
    from swarmctl.store import workflows
    from wfkit import Kit

    changes, real = [], workflows.renew_lease

    def renew_lease(conn, workflow_id, owner, until, change=None, at=None):
        changes.append(change)
        return real(conn, workflow_id, owner, until, change, at)

    monkeypatch.setattr(workflows, "renew_lease", renew_lease)
    flow = 'name = "w"\n' + "".join(f'[[step]]\nname = "s{i}"\nrun = ["./mark.sh", "do{i}"]\n' for i in range(4))
    kit = Kit(sw)
    _, wf = kit.run(flow, name="w.toml")
    named = [c for c in changes if c and "state" in c]
    assert [c["state"] for c in named] == ["running"], changes
    assert [c["cursor"] for c in changes if c and "cursor" in c] == [1, 2, 3, 4], changes
    assert kit("workflow", "status", wf).result["workflow"]["state"] == "completed"


def test_waiting_on_a_command_ends_when_it_does_and_a_timeout_still_kills_it(tmp_path):
    """process.run_command waits on a pidfd: an exit status comes back as it is, and a command
    that outlives its timeout is killed (SIGTERM to its group)."""
    done = process.run_command(["/bin/sh", "-c", "exit 7"], cwd=tmp_path, env=os.environ, timeout_s=60)
    assert (done.exit_code, done.timed_out, done.signal) == (7, False, None)
    slow = process.run_command(["/bin/sh", "-c", "exec sleep 30"], cwd=tmp_path, env=os.environ, timeout_s=0.2)
    assert (slow.exit_code, slow.timed_out, slow.signal) == (None, True, "SIGTERM")
