"""`store copy SRC DST`: a whole store from a local directory to PostgreSQL and back; the op log,
refs, changesets and their files, transactions and workflows come across unchanged."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time

import pytest

from core_helpers import AGENT, ALICE, connect, problems
from swarm import swarmctl_argv
from test_workflow_rollback import failed_release
from wfkit import Kit

pytestmark = pytest.mark.backends("postgres")  # every copy below crosses to the other kind


def _everything(sw, repo: str) -> dict:
    """What a user can read of a store, through swarmctl."""
    read = lambda *a: sw.ok("--repo", repo, *a)
    log = read("op", "log", "-n", "1000")["ops"]
    workflows = read("workflow", "list")["workflows"]
    found = {
        "statuses": [read("workflow", "status", w["id"]) for w in workflows],
        "log": log,
        "refs": read("ref", "list")["refs"],
        "changesets": [read("changeset", "show", c) for op in log for c in op["changesets"]],
        "workflows": read("workflow", "list")["workflows"],
        "tx": sw.ok("--repo", repo, "--as", AGENT, "tx", "status"),
    }
    # A `next` names the store it was read from (shlex-quoted or not): that is all that may differ.
    text = json.dumps(found).replace(shlex.quote(repo), "[repo]").replace(repo, "[repo]")
    return json.loads(text)


def test_a_store_with_files_transactions_and_workflows_goes_to_postgres_and_back(sw):
    local, server = str(sw.tmp / "local"), sw.url
    sw.url = None  # the kit makes its store where sw.store says: a local directory first
    kit = Kit(sw)
    sw.url = server
    wf = failed_release(kit)
    sw.ok("--repo", kit.repo, "--as", ALICE, "changeset", "create", "-m", "files",
          "--file", "flows/mark.sh", "--ref", "main", cwd=sw.tmp)
    sw.ok("--repo", kit.repo, "--as", AGENT, "tx", "begin")
    sw.ok("--repo", kit.repo, "--as", AGENT, "tx", "set", "staged/x", "main")
    source = _everything(sw, kit.repo)

    there = sw.ok("store", "copy", kit.repo, server)
    assert there["destination"] == server and there["ops"] == len(source["log"]) and there["workflows"] == 1
    assert wf in json.dumps(source["statuses"])
    assert _everything(sw, server) == source
    assert problems(server) == []
    back = sw.ok("store", "copy", server, local)
    assert back["destination"] == local
    assert _everything(sw, local) == source
    assert problems(sw.tmp / "local") == []
    # Each copy goes on as its own store: op numbers continue from the source's.
    newest = source["log"][0]["op"]
    for copy in (server, local):
        assert sw.ok("--repo", copy, "--as", ALICE, "changeset", "create", "-m", "after")["op"] == newest + 1
        assert sw.ok("--repo", copy, "--as", ALICE, "tx", "begin")["tx"] > 1  # numbered after the copied one


def test_tokens_and_recorded_clock_breaks_go_with_the_store(sw, monkeypatch):
    """`store copy` left out the tokens table (every token holder of `mcp --http` lost access
    once the store moved; `token revoke` of one was E_NOT_FOUND) and the time_breaks table (a
    store whose clock once ran ahead copied into one that failed `store check`)."""
    from datetime import datetime, timezone

    from test_clock_skew import START, Clock, write

    local, server, back = sw.tmp / "local", sw.url, str(sw.tmp / "back")
    sw.url = None  # sw.store: the local directory
    clock = Clock(monkeypatch, START)
    sw.ok("--as", ALICE, "init", str(sw.store))
    write(sw, clock, "ahead", far=datetime(2030, 1, 1, tzinfo=timezone.utc))  # op 2, a clock far ahead
    write(sw, clock, "after")  # op 3: earlier than op 2, recorded as a break
    made = [sw.ok("--repo", str(sw.store), "--as", ALICE, "token", "create", actor, *flags)
            for actor, flags in (("agent/w1", ()), ("agent/r1", ("--read-only",)))]
    sw.ok("--repo", str(sw.store), "--as", ALICE, "token", "revoke", str(made[0]["id"]))
    tokens = sw.ok("--repo", str(sw.store), "token", "list")["tokens"]
    breaks = sw.ok("--repo", str(sw.store), "store", "check")["times_out_of_order"]
    assert [(b["op"], b["recorded"]) for b in breaks] == [(3, True)] and len(tokens) == 2
    sw.ok("store", "copy", str(sw.store), server)
    sw.ok("store", "copy", server, back)
    for copy in (server, back):
        assert sw.ok("--repo", copy, "token", "list")["tokens"] == tokens
        checked = sw.ok("--repo", copy, "store", "check")
        assert checked["problems"] == [] and checked["times_out_of_order"] == breaks
    revoked = sw.ok("--repo", back, "--as", ALICE, "token", "revoke", str(made[1]["id"]))
    assert revoked["id"] == made[1]["id"]


def test_a_destination_with_a_store_is_refused_and_left_alone(sw):
    sw.ok("--as", ALICE, "init", sw.url)
    local = str(sw.tmp / "local")
    sw.ok("--as", ALICE, "init", local)
    for src, dst in [(local, sw.url), (sw.url, local)]:
        ran = sw("store", "copy", src, dst)
        assert (ran.exit, ran.error["code"]) == (7, "E_STATE"), ran.stdout
    assert len(sw.ok("--repo", sw.url, "op", "log")["ops"]) == 1


def test_fence_marks_the_source_moved_reads_go_on(sw):
    local = str(sw.tmp / "local")
    sw.ok("--as", ALICE, "init", local)
    sw.ok("--repo", local, "--as", ALICE, "changeset", "create", "-m", "one", "--ref", "main")
    done = sw.ok("--as", ALICE, "store", "copy", "--fence", local, sw.url)
    assert done["fenced"] is True
    refused = sw("--repo", local, "--as", ALICE, "changeset", "create", "-m", "two", "--ref", "main")
    assert (refused.exit, refused.error["code"]) == (7, "E_STATE")
    assert refused.error["details"]["moved_to"] == sw.url and sw.url in refused.error["hint"]
    assert len(sw.ok("--repo", local, "op", "log")["ops"]) == 2  # reads work
    assert sw.ok("--repo", sw.url, "--as", ALICE, "changeset", "create", "-m", "two", "--ref", "main")["op"] == 3


def _keys_and_indexes(url: str) -> list[tuple]:
    """The foreign keys and indexes of a store's schema, named without the schema."""
    from swarmctl.store.postgres.url import parse

    conn = connect(url)
    try:
        keys = conn.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), convalidated FROM pg_constraint "
            "WHERE contype = 'f' AND connamespace = current_schema()::regnamespace ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1"
        ).fetchall()
    finally:
        conn.close()
    schema = parse(url).schema
    return [tuple(k) for k in keys] + [(n, d.replace(f" {schema}.", " ")) for n, d in indexes]


def test_a_fence_needs_an_identity_and_without_one_nothing_is_copied_or_fenced(sw):
    """A fence stops every writer of the source: without --as it was made as "system/store-copy",
    a name no one gave, which a policy's admin glob (`system/*`) let through."""
    local = str(sw.tmp / "local")
    sw.ok("--as", ALICE, "init", local)
    refused = sw("store", "copy", "--fence", local, sw.url)
    assert (refused.exit, refused.error["code"]) == (6, "E_IDENTITY_REQUIRED"), refused.stdout
    assert "--fence" in refused.error["message"]
    missing = sw("--repo", sw.url, "op", "log")
    assert missing.error["code"] == "E_NOT_A_REPO"  # no copy made
    assert sw.ok("--repo", local, "--as", ALICE, "changeset", "create", "-m", "x", "--ref", "main")["op"] == 2
    assert sw.ok("store", "copy", local, sw.url)["fenced"] is False  # a plain copy changes only the new store


def test_the_copy_has_every_key_and_index_a_new_store_has(sw, pg_cluster):
    """`store copy` loads without the foreign keys and plain indexes, then puts them back:
    the copy's schema is a new store's, every key checked."""
    fresh = pg_cluster.new_store_url()
    sw.ok("--as", ALICE, "init", fresh)
    sw.ok("demo", str(sw.tmp / "local"))
    sw.ok("store", "copy", str(sw.tmp / "local"), sw.url)
    shape = _keys_and_indexes(sw.url)
    assert len([k for k in shape if len(k) == 4]) >= 10 and len(shape) > 30, shape
    assert shape == _keys_and_indexes(fresh)
    assert problems(sw.url) == []


@pytest.mark.parametrize("fixture", ["format1-store", "format2-store"])
def test_a_store_of_an_older_format_copied_as_it_is_is_a_whole_store_of_this_format(sw, fixture):
    """Without --fence the source is read as it is, never upgraded. A format-1 source has no op
    hashes, and its copy, made in this format, had none either: `store check` failed on every
    op and every write to the copy was E_STORE_CORRUPT ("does not match its hash"), with no way
    to repair it (`store upgrade` found nothing to do). The copy records the hashes the upgrade
    would have, to either kind of store."""
    import shutil
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures"
    source, upgraded = sw.tmp / "source", sw.tmp / "upgraded"
    shutil.copytree(fixtures / fixture, source)
    shutil.copytree(fixtures / fixture, upgraded)
    sw.ok("--repo", str(upgraded), "--as", ALICE, "store", "upgrade")  # the chain an upgrade in place records
    chained = {o["op"]: o["hash"] for o in sw.ok("--repo", str(upgraded), "op", "log", "-n", "100")["ops"]}
    log = sw.ok("--repo", str(source), "op", "log", "-n", "100")["ops"]
    for copy in (str(sw.tmp / "copy"), sw.url):
        sw.ok("store", "copy", str(source), copy)
        assert problems(copy if copy == sw.url else sw.tmp / "copy") == []
        copied = sw.ok("--repo", copy, "op", "log", "-n", "100")["ops"]
        assert [{**o, "hash": None} for o in copied] == [{**o, "hash": None} for o in log]
        assert all(o["hash"] == chained[o["op"]] for o in copied), copied
        assert sw.ok("--repo", copy, "--as", ALICE, "ref", "set", "after-copy", "main", "--create")["op"] == log[0]["op"] + 1
    assert sw.ok("--repo", str(source), "store", "check")["format"] == int(fixture[6])  # read, never written


@pytest.mark.parametrize("way", ["to postgres", "to local"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_fenced_copy_stopped_before_the_fence_commits_leaves_no_copy_that_takes_writes(sw, way, sig):
    """Found by a probe: stopped after the copy was made and before the source's fence committed,
    `store copy --fence` said E_INTERRUPTED ("rolled back") and left a whole copy beside an
    unfenced source, both taking writes, drifting apart; its retry was "already a store". Now the
    source stays the store: a local copy is removed, one on a server is fenced to the source.
    The process pauses at each COMMIT (SWARMCTL_FAULT): the copy's, then the fence's."""
    local = str(sw.tmp / "local")
    source, destination = (local, sw.url) if way == "to postgres" else (sw.url, local)
    sw.ok("--as", ALICE, "init", source)
    sw.ok("--repo", source, "--as", ALICE, "changeset", "create", "-m", "one", "--ref", "main")
    flag = sw.tmp / "paused"
    proc = subprocess.Popen([*swarmctl_argv(), "--as", ALICE, "store", "copy", "--fence", source, destination],
                            env={**sw.env, "SWARMCTL_FAULT": f"pause-before-commit:{flag}"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for commit in ("the copy's", "the fence's"):
            deadline = time.monotonic() + 60
            while not (flag.exists() and flag.read_text()):
                assert proc.poll() is None and time.monotonic() < deadline, (commit, proc.communicate())
                time.sleep(0.005)
            if commit == "the copy's":
                flag.unlink()  # let it commit, and go on to the fence
        paused_at = flag.stat().st_mtime_ns
        proc.send_signal(sig)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:  # a commit after the signal (fencing
            if flag.exists() and flag.stat().st_mtime_ns != paused_at:  # a server's copy) pauses too: let it go
                flag.unlink()
            time.sleep(0.005)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, json.loads(out)["error"]["code"]) == (130, "E_INTERRUPTED"), out + err
    assert sw.ok("--repo", source, "--as", ALICE, "changeset", "create", "-m", "two", "--ref", "main")["op"] == 3
    if way == "to local":
        assert not (sw.tmp / "local" / "swarmops.db").exists()
        assert sw.ok("--as", ALICE, "store", "copy", "--fence", source, destination)["fenced"] is True  # the retry
    else:
        refused = sw("--repo", destination, "--as", ALICE, "changeset", "create", "-m", "three", "--ref", "main")
        assert (refused.exit, refused.error["details"]["moved_to"]) == (7, source), refused.stdout
