"""PostgreSQL: a connection lost DURING a COMMIT, and a client stopped inside its transaction.

A COMMIT whose answer never comes is made real with synchronous replication to a standby that
does not exist: the server commits locally, then waits in COMMIT for the standby, holding the
transaction's locks. Terminating that backend (pg_terminate_backend, from another session) ends
the wait with the transaction committed and the client's connection gone mid-COMMIT: exactly
the case where only the request id can tell what happened. These tests get a cluster of their
own (the others must not wait for a standby)."""

import os
import signal
import subprocess
import threading
import time

import psycopg
import pytest
from core_helpers import AGENT, ALICE, as_, paused_at_commit, problems, refs
from pgcluster import remove_cluster, start_cluster

from swarm import swarmctl_argv

pytestmark = pytest.mark.backends("postgres")

WAIT_S = 120.0


def _wait_for(what: str, found) -> object:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = found()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


@pytest.fixture
def syncrep(sw):
    """A cluster of this test's own, a store on it (main at c1, c2 made), and a switch that makes
    every later COMMIT of a change wait for a standby that never comes."""
    cluster = start_cluster()
    try:
        url = cluster.new_store_url()
        sw.ok("--as", ALICE, "init", url)
        c1 = sw.ok("--repo", url, "--as", ALICE, "changeset", "create", "-m", "one", "--ref", "main")["changeset"]["id"]
        c2 = sw.ok("--repo", url, "--as", ALICE, "changeset", "create", "-m", "two")["changeset"]["id"]
        cluster.psql("ALTER DATABASE swarm SET synchronous_commit = on")  # the tests' servers run with it off
        cluster.psql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        cluster.psql("SELECT pg_reload_conf()")
        _wait_for("the standby setting", lambda: "nobody" in cluster.psql("SHOW synchronous_standby_names", "swarm"))
        yield cluster, url, c1, c2
    finally:
        remove_cluster(cluster)


def _writer(sw, url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [*swarmctl_argv(), "--repo", url, "--as", AGENT, *args],
        cwd=sw.tmp, env={**sw.env, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _waiting_in_commit(cluster) -> int:
    """The backend of the swarmctl whose COMMIT waits for the standby: its pid."""
    rows = cluster.psql(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'swarmctl' AND wait_event = 'SyncRep'", "swarm"
    )
    return int(rows.strip("[](),")) if rows != "[]" else 0


def _finish(proc: subprocess.Popen) -> tuple[int, dict]:
    import json

    out, err = proc.communicate(timeout=WAIT_S)
    assert len(out.splitlines()) == 1, (out, err)
    return proc.returncode, json.loads(out)


def test_a_connection_lost_during_commit_is_answered_from_the_request_id(sw, syncrep):
    cluster, url, c1, c2 = syncrep
    proc = _writer(sw, url, "ref", "set", "main", c2, "--expect", c1)
    try:
        backend = _wait_for("a COMMIT waiting for the standby", lambda: _waiting_in_commit(cluster))
        assert cluster.psql(f"SELECT pg_terminate_backend({backend})", "swarm") == "[(True,)]"
        code, env = _finish(proc)
    finally:
        proc.kill()
        proc.wait()
    cluster.psql("ALTER SYSTEM RESET synchronous_standby_names")
    cluster.psql("SELECT pg_reload_conf()")
    # The connection died inside COMMIT; the write had committed; swarmctl looked its request
    # up on a new connection and answered with what committed: once, and truthfully.
    assert code == 0, env
    assert (env["result"]["op"], env["result"]["new"]) == (4, c2)
    assert refs(url)["main"] == c2
    logged = sw.ok("--repo", url, "op", "log")["ops"]
    assert [o["op"] for o in logged] == [4, 3, 2, 1] and logged[0]["kind"] == "ref_set"
    assert problems(url) == []


def test_when_the_outcome_cannot_be_learned_it_says_commit_unknown_and_a_retry_cannot_write_twice(sw, syncrep):
    cluster, url, c1, c2 = syncrep
    proc = _writer(sw, url, "ref", "set", "main", c2, "--expect", c1, env={"SWARMCTL_LOCK_TIMEOUT": "0.5"})
    holder = psycopg.connect(cluster.libpq(), autocommit=True)
    try:
        backend = _wait_for("a COMMIT waiting for the standby", lambda: _waiting_in_commit(cluster))
        # Another session queues for the head row the waiting COMMIT still holds: once that
        # backend is gone it has the row, so the lookup cannot take it in time.
        schema = url.rsplit("schema=", 1)[1]
        holder.execute(f'SET search_path TO "{schema}"')
        holder.execute("BEGIN")
        locked = threading.Thread(target=lambda: holder.execute("SELECT last_op FROM head WHERE id = 1 FOR UPDATE"))
        locked.start()
        me = holder.info.backend_pid
        _wait_for("the session queued on the head row", lambda: "Lock" in cluster.psql(
            f"SELECT wait_event_type FROM pg_stat_activity WHERE pid = {me}", "swarm"))
        assert cluster.psql(f"SELECT pg_terminate_backend({backend})", "swarm") == "[(True,)]"
        code, env = _finish(proc)
        locked.join(timeout=WAIT_S)
        holder.execute("ROLLBACK")
    finally:
        proc.kill()
        proc.wait()
        holder.close()
    cluster.psql("ALTER SYSTEM RESET synchronous_standby_names")
    cluster.psql("SELECT pg_reload_conf()")
    _wait_for("the standby setting gone", lambda: "nobody" not in cluster.psql("SHOW synchronous_standby_names", "swarm"))
    assert code == 11 and env["error"]["code"] == "E_UNAVAILABLE", env
    assert env["error"]["details"]["commit_unknown"] is True and env["error"]["details"]["request"]
    assert "may have committed" in env["error"]["hint"] and "Nothing was written" not in env["error"]["hint"]
    # It had committed. A retry as a script would make it (the same --expect) cannot move the
    # ref a second time: it says where the ref is now.
    retry = sw.process("--repo", url, "--as", AGENT, "ref", "set", "main", c2, "--expect", c1)
    assert retry.error["code"] == "E_CAS_MISMATCH", retry.stdout
    assert retry.error["details"]["conflicts"][0]["actual"] == c2
    assert [o["op"] for o in sw.ok("--repo", url, "op", "log")["ops"]] == [4, 3, 2, 1]
    assert problems(url) == []


def test_a_stopped_client_does_not_hold_the_head_row_for_ever(sw):
    """A writer stopped (SIGSTOP) inside its transaction, before COMMIT: the server ends its
    session after idle_in_transaction_session_timeout (swarmctl sets 60 s unless one is set;
    here PGOPTIONS sets 0.5 s), which frees the head row for the next writer."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    stopped_env = {"PGOPTIONS": "-c idle_in_transaction_session_timeout=500"}
    with paused_at_commit(sw, *as_(sw, ALICE), "changeset", "create", "-m", "stopped", "--ref", "stuck",
                          env=stopped_env) as stopped:
        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            # Waits for the head row (up to 120 s) until the server frees it.
            other = sw.process(*as_(sw, AGENT), "changeset", "create", "-m", "next", "--ref", "free",
                               env={"SWARMCTL_LOCK_TIMEOUT": "120"})
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
    assert other.exit == 0, other.stdout
    assert other.result["op"] == 2  # the stopped writer's op never committed
    assert "stuck" not in refs(sw.store) and "free" in refs(sw.store)
    assert problems(sw.store) == []


def test_a_door_goes_on_on_the_store_after_a_commit_answered_from_the_request_id(sw, syncrep):
    """`call --lines` keeps the new connection it learned the outcome on: the next call must find
    the store there (its schema), not the database's default schema."""
    import json

    cluster, url, c1, c2 = syncrep
    lines = "".join(
        json.dumps(call) + "\n"
        for call in (
            {"tool": "ref_set", "arguments": {"name": "main", "target": c2, "expect": c1}},
            {"tool": "ref_show", "arguments": {"name": "main"}},
        )
    )
    with subprocess.Popen(
        [*swarmctl_argv(), "--repo", url, "--as", AGENT, "call", "--lines"], cwd=sw.tmp, env=sw.env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as door:
        door.stdin.write(lines)
        door.stdin.close()
        backend = _wait_for("a COMMIT waiting for the standby", lambda: _waiting_in_commit(cluster))
        assert cluster.psql(f"SELECT pg_terminate_backend({backend})", "swarm") == "[(True,)]"
        out, err = door.stdout.read(), door.stderr.read()  # to the end: the door ends at stdin's
    envelopes = [json.loads(line) for line in out.splitlines()]
    assert [e["ok"] for e in envelopes] == [True, True], (out, err)
    assert envelopes[1]["result"]["target"] == c2 and door.returncode == 0
