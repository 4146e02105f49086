"""Workflows on a store shared by many hosts: a workflow's owner is a host id, a pid and a lease
(swarmctl/hosts.py). Its own host asks the pid; another host takes it for alive until its lease
runs out. Two host ids on this one machine stand for two machines (SWARMCTL_HOST_ID)."""

import os
import signal
import subprocess
import sys
import time

import pytest
from wfkit import ALICE, WAIT_S, Kit, envelope

from swarmctl import hosts

pytestmark = pytest.mark.backends("sqlite", "postgres")

HOST_A = {"SWARMCTL_HOST_ID": "host-a"}
HOST_B = {"SWARMCTL_HOST_ID": "host-b"}

HANGING = """\
    name = "deploy-everywhere"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "deploy"
    run = ["./once.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    """

# Hangs the first time it runs (as hang.sh does), succeeds the next.
ONCE = """\
#!/bin/sh
if [ -e "$1.ran" ]; then echo "$1" >> marks.log; exit 0; fi
touch "$1.ran"
echo "$1" >> marks.log
echo $$ > "$1.pid"
exec sleep 30
"""

TICKING = """\
    name = "ticking"
    [[step]]
    name = "deploy"
    run = ["./tick.sh", "deploy"]
    """


@pytest.fixture
def kit(sw):
    kit = Kit(sw)
    (kit.dir / "once.sh").write_text(ONCE)
    (kit.dir / "once.sh").chmod(0o755)
    return kit


def killed_on_host_a(kit: Kit, lease_s: str) -> str:
    """`workflow run` on host-a, killed with SIGKILL while its command runs, and the command
    killed too (so that only the lease speaks for it): the workflow's id."""
    kit.write(HANGING)
    proc = kit.popen("workflow", "run", "flow.toml", env={**HOST_A, "SWARMCTL_LEASE_S": lease_s})
    try:
        kit.wait_for_mark("deploy", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
    finally:
        kit.kill_hung("deploy")
    return kit("workflow", "list", "-n", "1", actor=None).result["workflows"][0]["id"]


def test_another_host_takes_a_dead_owner_for_alive_until_its_lease_ends_its_own_host_asks_the_pid(kit):
    wf = killed_on_host_a(kit, "3600")
    on_b = kit("workflow", "status", wf, actor=None, env=HOST_B).result
    retry_b = kit("workflow", "resume", wf, "--retry", "deploy", env=HOST_B)
    rollback_b = kit("workflow", "rollback", wf, "--confirm", "--acknowledge-unknown-effects", "all", env=HOST_B)
    on_a = kit("workflow", "status", wf, actor=None, env=HOST_A).result

    owner = on_b["workflow"]["owner"]
    assert (owner["host"], owner["actor"], owner["alive"]) == ("host-a", ALICE, True)
    assert owner["lease_until"] > on_b["workflow"]["updated_at"]
    assert (on_b["workflow"]["state"], on_b["steps"][1]["status"]) == ("running", "running")
    assert retry_b.error["code"] == "E_STATE" and "on host host-a" in retry_b.error["message"], retry_b.stdout
    assert retry_b.error["details"]["owner"]["host"] == "host-a"
    assert rollback_b.error["code"] == "E_REFUSED", rollback_b.stdout
    assert "workflow_state" in [r["code"] for r in rollback_b.error["details"]["refusals"]]
    # Host a asks the pid: gone, whatever the lease says.
    assert on_a["workflow"]["owner"]["alive"] is False and on_a["workflow"]["state"] == "failed"
    assert on_a["steps"][1]["status"] == "interrupted"
    assert kit.marks() == ["deploy"]  # nothing ran it again


def test_once_the_lease_runs_out_another_host_retries_and_then_holds_it(kit):
    wf = killed_on_host_a(kit, "0.5")
    deadline = time.monotonic() + WAIT_S
    while kit("workflow", "status", wf, actor=None, env=HOST_B).result["workflow"]["owner"]["alive"]:
        assert time.monotonic() < deadline, "the lease never ran out"
        time.sleep(0.1)
    status = kit("workflow", "status", wf, actor=None, env=HOST_B).result
    retry = kit("workflow", "resume", wf, "--retry", "deploy", env=HOST_B)
    assert (status["workflow"]["state"], status["steps"][1]["status"]) == ("failed", "interrupted")
    assert retry.exit == 0, retry.stdout
    assert (retry.result["workflow"]["state"], retry.result["workflow"]["owner"]) == ("completed", None)
    assert kit.marks() == ["deploy", "deploy"]  # once killed, once retried by its host's decision


def test_a_running_owner_renews_its_lease_while_its_command_runs(kit):
    kit.write(TICKING)
    proc = kit.popen("workflow", "run", "flow.toml", env={**HOST_A, "SWARMCTL_LEASE_S": "0.3"})
    pgid = kit.wait_for_ticks("deploy", proc)
    try:
        wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
        seen: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(set(seen)) < 3:  # the first lease and two renewals
            assert time.monotonic() < deadline and proc.poll() is None, "the lease was not renewed"
            seen.append(_lease(kit, wf))
            time.sleep(0.05)
    finally:
        kit.kill_group(pgid)
    code, ran = envelope(proc)
    assert seen == sorted(seen), seen  # it only moves forward
    assert code == 10 and ran["error"]["code"] == "E_STEP_FAILED"  # the killed command failed the step


def _lease(kit: Kit, wf: str) -> str:
    return kit("workflow", "status", wf, actor=None, env=HOST_B).result["workflow"]["owner"]["lease_until"]


@pytest.mark.backends("sqlite")
def test_the_host_id_is_the_variable_else_derived_per_pid_namespace(sw):
    code = "from swarmctl import hosts; print(hosts.host_id())"
    env = {k: v for k, v in os.environ.items() if k != "SWARMCTL_HOST_ID"}
    here = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    named = subprocess.run([sys.executable, "-c", code], env={**env, "SWARMCTL_HOST_ID": "rack-7/box-2"},
                           capture_output=True, text=True, check=True).stdout
    assert here == again == hosts.host_id() + "\n" and named == "rack-7/box-2\n"
    # Another pid namespace on the same machine (as a container has): another host id.
    other = subprocess.run(["unshare", "--pid", "--fork", "--mount", "--mount-proc", sys.executable, "-c", code],
                           env=env, capture_output=True, text=True)
    if other.returncode != 0:
        pytest.skip(f"cannot make a pid namespace here: {other.stderr.strip()}")
    assert other.stdout.strip() and other.stdout != here


def test_a_bad_host_id_or_lease_is_refused_and_nothing_is_created(kit):
    kit.write(HANGING)
    bad_host = kit("workflow", "run", "flow.toml", env={"SWARMCTL_HOST_ID": " spaced "})
    bad_lease = kit("workflow", "run", "flow.toml", env={"SWARMCTL_LEASE_S": "soon"})
    assert kit("workflow", "list", actor=None).result["workflows"] == []
    assert bad_host.error["code"] == "E_INVALID_ARG" and "SWARMCTL_HOST_ID" in bad_host.error["message"]
    assert bad_lease.error["code"] == "E_INVALID_ARG" and bad_lease.error["details"]["variable"] == "SWARMCTL_LEASE_S"


@pytest.mark.backends("postgres")
def test_a_run_that_cannot_renew_its_lease_stops_its_command_before_the_lease_runs_out(sw, pg_cluster):
    """The running swarmctl's connection dropped: it never renewed its lease again, but kept
    its command running, and once the lease ran out another host resumed the step with --retry
    and ran it a second time, beside the first. Now a lease not renewed for two thirds of
    SWARMCTL_LEASE_S stops the command (its whole group), and the run ends E_UNAVAILABLE."""
    kit = Kit(sw)
    (kit.dir / "gate.sh").write_text('#!/bin/sh\necho $$ > gate.pid\necho start >> marks.log\n'
                                     'while [ ! -e go ]; do sleep 0.05; done\necho end >> marks.log\n')
    (kit.dir / "gate.sh").chmod(0o755)
    kit.write('name = "w"\n[[step]]\nname = "s"\nrun = ["./gate.sh"]\n')
    proc = kit.popen("workflow", "run", "flow.toml", env={"SWARMCTL_HOST_ID": "host-a", "SWARMCTL_LEASE_S": "1"})
    deadline = time.monotonic() + WAIT_S
    while not ("start" in kit.marks() and (kit.dir / "gate.pid").read_text().endswith("\n")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    pg_cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'swarmctl' AND pid <> pg_backend_pid()", database="swarm")
    code, ended = envelope(proc)
    assert (code, ended["error"]["code"]) == (11, "E_UNAVAILABLE"), ended
    assert "command was stopped" in ended["error"]["message"]
    with pytest.raises(ProcessLookupError):  # the command's group is gone before swarmctl ends
        os.kill(int((kit.dir / "gate.pid").read_text()), 0)
    (kit.dir / "go").touch()
    assert kit.marks() == ["start"]
    # Its own host asks the pid: the run is gone, the step interrupted (another host waits out the lease).
    status = kit("workflow", "status", kit("workflow", "list", actor=None).result["workflows"][0]["id"], actor=None,
                 env={"SWARMCTL_HOST_ID": "host-a"})
    assert status.result["workflow"]["state"] == "failed" and status.result["steps"][0]["status"] == "interrupted"
