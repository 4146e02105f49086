"""Real processes racing on one store, and processes killed in the middle of a change.

Every check ends with the store's own consistency check (swarmctl.store.check): replaying the
op log's ref moves must give the refs table, and op numbers must run 1..N without a gap."""

import json
import multiprocessing
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, as_, build_golden_store, connect, file_digests, op_count, paused_at_commit, problems, refs
from swarm import swarmctl_argv

from swarmctl.store import Move, Store
from swarmctl.store.rows import ChangesetRow

WORKERS = 8


def three_ref_op(store: Path, ids: dict) -> int:
    """An op that moves three refs at once, as `tx commit` will: through Store.write."""
    s = Store.open(store)
    try:
        with s.write(ALICE) as w:
            moves = [
                Move("main", w.ref_target("main"), ids["base"]),
                Move("release/v1", w.ref_target("release/v1"), ids["base"]),
                Move("staging", None, ids["fix"]),
            ]
            return w.append_op("tx_commit", "commit 3 staged moves", moves)
    finally:
        s.close()


@pytest.mark.backends("sqlite", "postgres")
def test_undo_of_three_refs_is_all_or_nothing(sw):
    ids = build_golden_store(sw)
    op = three_ref_op(sw.store, ids)  # 7
    after_op = refs(sw.store)
    sw.ok(*as_(sw, AGENT), "ref", "set", "staging", ids["base"])  # 8: one of the three moves on
    before = (op_count(sw.store), file_digests(sw.store), refs(sw.store))
    refused = sw.process(*as_(sw, ALICE), "op", "undo", str(op))
    assert (refused.exit, refused.error["code"]) == (3, "E_CAS_MISMATCH")
    # Only the ref that moved is a conflict; the other two were not touched either.
    assert [c["name"] for c in refused.error["details"]["conflicts"]] == ["staging"]
    assert (op_count(sw.store), file_digests(sw.store), refs(sw.store)) == before
    assert refs(sw.store)["main"] == after_op["main"] == ids["base"]
    # Take back the later move, and the undo moves all three, in one op.
    sw.ok(*as_(sw, AGENT), "op", "undo", "8")  # 9
    done = sw.process(*as_(sw, ALICE), "op", "undo", str(op))
    assert done.result["op"] == 10 and len(done.result["ref_moves"]) == 3
    assert refs(sw.store) == {"main": ids["fix"], "release/v1": ids["fix"]}
    assert problems(sw.store) == []


@pytest.mark.backends("sqlite", "postgres")
def test_undo_killed_before_commit_writes_none_of_its_moves(sw):
    ids = build_golden_store(sw)
    op = three_ref_op(sw.store, ids)
    before = (op_count(sw.store), refs(sw.store))
    killed = kill_at_commit(sw, *as_(sw, ALICE), "op", "undo", str(op))
    assert killed == -signal.SIGKILL
    assert (op_count(sw.store), refs(sw.store)) == before
    assert problems(sw.store) == []
    assert sw.ok(*as_(sw, ALICE), "op", "undo", str(op))["op"] == op + 1  # gapless after the kill


# --- processes killed at the commit, and at random ----------------------------------------------


def kill_at_commit(sw, *args: str) -> int:
    """Run swarmctl with the fault hook, SIGKILL it while it waits before COMMIT; its status."""
    with paused_at_commit(sw, *args) as proc:
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
    assert out == b""  # it printed nothing: no envelope claims a change that is not there
    return proc.returncode


@pytest.mark.backends("sqlite", "postgres")
def test_killed_before_commit_leaves_no_trace(sw):
    ids = build_golden_store(sw)
    (sw.tmp / "big.txt").write_text("x" * 200_000)  # a blob, so the change spans several pages
    before = (op_count(sw.store), refs(sw.store))
    assert kill_at_commit(sw, *as_(sw, AGENT), "changeset", "create", "-m", "m", "--file", "big.txt", "--ref", "main") == -9
    assert kill_at_commit(sw, *as_(sw, AGENT), "ref", "set", "release/v1", ids["base"]) == -9
    assert kill_at_commit(sw, *as_(sw, AGENT), "ref", "delete", "main") == -9
    assert (op_count(sw.store), refs(sw.store)) == before
    conn = connect(sw.store)
    assert conn.execute("SELECT COUNT(*) FROM changesets").fetchone()[0] == 3
    assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 0
    conn.close()
    assert problems(sw.store) == []
    assert sw.ok(*as_(sw, AGENT), "ref", "set", "release/v1", ids["base"])["op"] == 7


# A child that changes the store as fast as it can, through the library, until it is killed.
_CHURN = r"""
import sys
from swarmctl import runner
from swarmctl.context import Context
from swarmctl.tools import changeset, op, ref

repo, actor = sys.argv[1], sys.argv[2]
i = 0
while True:
    i += 1
    name = "churn/%d" % (i % 3)
    ctx = lambda: Context(repo=repo, actor=actor, readonly=False)
    made = runner.run(changeset.CHANGESET_CREATE, changeset.ChangesetCreateReq(
        message="churn %d" % i, files={"f.txt": "x" * (i % 7) * 5000}, ref=name), ctx())
    if i % 2:
        runner.run(ref.REF_DELETE, ref.RefDeleteReq(name=name), ctx())
    if i % 3 == 0:
        runner.run(op.UNDO, op.UndoReq(op="@"), ctx())
    print(i, flush=True)
"""


@pytest.mark.backends("sqlite", "postgres")
def test_killed_at_random_times_the_store_stays_consistent(sw):
    build_golden_store(sw)
    rng = random.Random(2026)
    kills, progressed = 12, 0
    for round_ in range(kills):
        start = op_count(sw.store)
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHURN, str(sw.store), AGENT],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=sw.env,
        )
        # Wait until it is changing the store, then kill it at a random moment.
        assert proc.stdout.readline(), proc.stderr.read()
        time.sleep(rng.uniform(0, 0.15))
        proc.kill()
        proc.communicate()
        after = op_count(sw.store)
        assert after > start
        progressed += after - start
        assert problems(sw.store) == [], f"round {round_}"
    # The CLI too: processes killed at random points of their lives, writes included.
    for round_ in range(8):
        proc = subprocess.Popen(
            [*swarmctl_argv(), *as_(sw, ALICE), "changeset", "create", "-m", f"cli {round_}", "--ref", "cli"],
            cwd=sw.tmp, env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.05, 0.4))
        proc.kill()
        proc.communicate()
        assert problems(sw.store) == []
    assert progressed > kills


# --- 8 processes moving one ref by compare-and-swap ----------------------------------------------


def _cas_worker(repo: str, actor: str, targets: list, results, go) -> None:
    """Advance the ref `counter` to each of `targets` in turn: read, then set with --expect.
    The first read of every worker happens before any of them writes (the barrier `go`)."""
    from swarmctl import runner
    from swarmctl.context import Context
    from swarmctl.tools import ref

    done, conflicts = [], 0
    for target in targets:
        while True:
            shown = runner.run(ref.REF_SHOW, ref.RefShowReq(name="counter"), Context(repo=repo))
            current = shown["result"]["target"]
            if go is not None:
                go.wait()
                go = None
            env = runner.run(
                ref.REF_SET,
                ref.RefSetReq(name="counter", target=target, expect=current),
                Context(repo=repo, actor=actor, readonly=False),
            )
            if env["ok"]:
                done.append((env["result"]["op"], current, target))
                break
            assert env["error"]["code"] == "E_CAS_MISMATCH", env
            assert env["error"]["details"]["conflicts"][0]["expected"] == current
            conflicts += 1
    results.put((actor, done, conflicts))


def racers():
    """Where the racing processes start: multiprocessing's fork server, which imports the
    racers' modules (and with them swarmctl, its store backends and psycopg) once in each xdist
    worker. Each racer is a fork of it, a process of its own that opens its own store. With
    "spawn" every racer imported all of them again: 32 racers a run, about a second of CPU each.
    The fork server keeps the environment of the test that started it (`sw`'s: no SWARMCTL_*
    variable), not the current one: a racer sets what it needs itself (test_pg_races' host id)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["test_concurrency", "test_pg_races"])
    return context


def _seed_targets(sw, count: int) -> list[str]:
    """`count` changesets (one op), and `counter` created at the first: the ref the workers move."""
    s = Store.open(sw.store)
    try:
        from swarmctl.store import changesets as ids

        made = []
        with s.write(ALICE) as w:
            op = w.append_op("changeset_create", f"create {count} changesets for the race")
            for i in range(count):
                cid = ids.changeset_id(message=f"step {i}", parents=[], actor=ALICE, at=w.at, metadata={}, files={})
                w.insert_changeset(ChangesetRow(cid, op, f"step {i}", ALICE, w.at, [], {}, {}))
                made.append(cid)
        with s.write(ALICE) as w:
            w.append_op("ref_set", "create counter", [Move("counter", None, made[0])])
        return made
    finally:
        s.close()


def _check_race(sw, successes: list[tuple[int, str, str]], first: str) -> None:
    conn = connect(sw.store)
    try:
        history = conn.execute("SELECT op, old, new FROM ref_moves WHERE name = 'counter' ORDER BY op").fetchall()
    finally:
        conn.close()
    # Every success is in the history, exactly as the worker expected it, and nothing else is.
    assert history[0][1:] == (None, first)
    assert sorted(successes) == history[1:]
    # The history is one unbroken chain: each move starts where the one before ended.
    assert all(history[i][1] == history[i - 1][2] for i in range(1, len(history)))
    assert refs(sw.store)["counter"] == history[-1][2]
    assert len({op for op, _, _ in successes}) == len(successes)
    assert problems(sw.store) == []


@pytest.mark.backends("sqlite", "postgres")
def test_eight_library_processes_race_with_compare_and_swap(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    per_worker = 12
    targets = _seed_targets(sw, 1 + WORKERS * per_worker)
    mp = racers()
    results, go = mp.Queue(), mp.Barrier(WORKERS)
    procs = [
        mp.Process(
            target=_cas_worker,
            args=(str(sw.store), f"agent/w{i}", targets[1 + i * per_worker : 1 + (i + 1) * per_worker], results, go),
        )
        for i in range(WORKERS)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    successes = [s for _, done, _ in outcomes for s in done]
    assert len(successes) == WORKERS * per_worker
    _check_race(sw, successes, targets[0])
    # They really raced: all eight read the same value before any wrote, so the first write of
    # each but one lost its compare-and-swap and was retried.
    assert sum(conflicts for _, _, conflicts in outcomes) >= WORKERS - 1


@pytest.mark.backends("sqlite", "postgres")
def test_eight_cli_processes_race_with_expect(sw):
    """As a script would: `ref set --expect`, and on E_CAS_MISMATCH retry from what the error
    says the ref names now (details.conflicts[0].actual)."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    targets = _seed_targets(sw, 1 + WORKERS)
    successes, conflicts, lock = [], [], threading.Lock()
    go = threading.Barrier(WORKERS)

    def worker(i: int) -> None:
        actor, target = f"agent/cli{i}", targets[1 + i]
        current = sw.process("--repo", str(sw.store), "ref", "show", "counter").result["target"]
        go.wait()
        while True:
            ran = sw.process(*as_(sw, actor), "ref", "set", "counter", target, "--expect", current)
            with lock:
                if ran.exit == 0:
                    successes.append((ran.result["op"], current, target))
                    return
                assert ran.error["code"] == "E_CAS_MISMATCH", ran.stdout
                conflict = ran.error["details"]["conflicts"][0]
                assert conflict["expected"] == current != conflict["actual"]
                conflicts.append(actor)
                current = conflict["actual"]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(successes) == WORKERS
    _check_race(sw, successes, targets[0])
    # All eight started from the same value: each but the first to write lost at least once.
    assert len(set(conflicts)) == WORKERS - 1


@pytest.mark.backends("sqlite", "postgres")
def test_eight_processes_append_ops_gaplessly(sw):
    """Unconditional writes from 8 processes at once: every one lands, numbered without gaps."""
    build_golden_store(sw)
    procs = [
        subprocess.Popen(
            [*swarmctl_argv(), *as_(sw, f"agent/p{i}"), "changeset", "create", "-m", f"from {i}", "--ref", f"p/{i}"],
            cwd=sw.tmp, env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(WORKERS)
    ]
    envelopes = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err
        envelopes.append(json.loads(out))
    assert sorted(e["result"]["op"] for e in envelopes) == list(range(7, 7 + WORKERS))
    assert problems(sw.store) == []


# --- the consistency check itself finds what is wrong -------------------------------------------


@pytest.mark.parametrize(
    "damage, rule",
    [
        ("DELETE FROM ref_moves WHERE op = 6", "refs_match_log"),
        ("UPDATE refs SET op = 2 WHERE name = 'release/v1'", "refs_match_log"),
        ("UPDATE ref_moves SET old = NULL WHERE op = 6", "move_chain"),
        ("DELETE FROM ops WHERE op = 3", "ops_gapless"),
        ("UPDATE ops SET at = '2000-01-01T00:00:00.000Z' WHERE op = 4", "ops_time_order"),
        ("UPDATE ops SET undoes = 6 WHERE op = 5", "undoes_earlier_op"),
        ("INSERT INTO refs VALUES ('ghost', 'f' || substr((SELECT id FROM changesets LIMIT 1), 2), 6)", "refs_match_log"),
    ],
)
def test_consistency_check_finds_damage(sw, damage, rule):
    build_golden_store(sw)
    assert problems(sw.store) == []
    conn = sqlite3.connect(sw.store / "swarmops.db")
    conn.execute(damage)
    conn.commit()
    conn.close()
    found = {p.check for p in problems(sw.store)}
    assert rule in found, found


def test_two_inits_of_one_directory_at_once(sw):
    """Exactly one makes the store; the others are told it exists (E_STATE); no debris."""
    procs = [
        subprocess.Popen(
            [*swarmctl_argv(), "--as", f"agent/i{i}", "init", str(sw.store)],
            cwd=sw.tmp, env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(4)
    ]
    outcomes = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    winners = [f"agent/i{i}" for i, e in enumerate(outcomes) if e["ok"]]
    assert len(winners) == 1
    assert sorted(e["error"]["code"] for e in outcomes if not e["ok"]) == ["E_STATE"] * 3
    assert sorted(p.name for p in sw.store.iterdir()) == ["swarmops.db"]
    # The store is the winner's: its op 1 is the winner's init.
    assert sw.ok("--repo", str(sw.store), "op", "show", "1")["actor"] == winners[0]
    assert op_count(sw.store) == 1 and problems(sw.store) == []


@pytest.mark.backends("postgres")
def test_on_postgresql_an_init_stopped_half_way_is_no_store_yet_and_the_next_one_fills_it(sw):
    """`init` (and `store copy`) makes the schema's tables in one transaction, the store in a
    second: killed between, the tables are there, empty. Each command then says there is no
    store yet (E_NOT_A_REPO, `unfinished`, how to finish it), not that a store is damaged and
    should be restored from a backup; the next init, or a copy, fills them. A store with ops
    and no format is damaged (E_STORE_CORRUPT)."""
    assert kill_at_commit(sw, "--as", ALICE, "init", sw.url) == -signal.SIGKILL
    ran = sw("--repo", sw.url, "op", "log")
    assert (ran.exit, ran.error["code"], ran.error["details"].get("unfinished")) == (5, "E_NOT_A_REPO", True), ran.stdout
    assert "stopped before it finished" in ran.error["message"] and "store copy" in ran.error["hint"]
    source = sw.tmp / "source"
    sw.ok("--as", ALICE, "init", str(source))
    sw.ok("--repo", str(source), "--as", ALICE, "changeset", "create", "-m", "one")
    assert sw.ok("--as", ALICE, "store", "copy", str(source), sw.url)["ops"] == 2
    assert [o["op"] for o in sw.ok("--repo", sw.url, "op", "log")["ops"]] == [2, 1]
    look = connect(sw.url)
    try:
        look.native("DELETE FROM meta WHERE key = 'format'")
    finally:
        look.close()
    damaged = sw("--repo", sw.url, "op", "log")
    assert (damaged.exit, damaged.error["code"]) == (9, "E_STORE_CORRUPT"), damaged.stdout


def test_init_killed_half_way_leaves_no_store(sw):
    assert kill_at_commit(sw, "--as", ALICE, "init", str(sw.store)) == -signal.SIGKILL
    assert not (sw.store / "swarmops.db").exists()
    assert sw("--repo", str(sw.store), "op", "log").error["code"] == "E_NOT_A_REPO"
    # The next init cleans up after the killed one.
    sw.ok("--as", ALICE, "init", str(sw.store))
    assert sorted(p.name for p in sw.store.iterdir()) == ["swarmops.db"]


@pytest.mark.parametrize("damage", [
    "UPDATE ops SET undoes = 6 WHERE op = 6",  # an op that undoes itself
    "UPDATE ops SET undoes = 6 WHERE op = 5; UPDATE ops SET undoes = 5 WHERE op = 6",  # two that undo each other
])
def test_a_loop_of_undos_is_damage_that_every_command_reports(sw, damage):
    """An `undoes` that makes a loop sent every read that asks what is undone (op log, op show,
    store check, call --lines) round it forever, growing its memory (14.8 GB in minutes): each
    is E_STORE_CORRUPT (exit 9) at once, naming the op."""
    build_golden_store(sw)
    conn = sqlite3.connect(sw.store / "swarmops.db")
    conn.executescript(damage)
    conn.close()
    for args in (("store", "check"), ("op", "log"), ("op", "show", "6"), ("--as", AGENT, "op", "undo", "6")):
        ran = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), *args], cwd=sw.tmp, env=sw.env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        error = json.loads(ran.stdout)["error"]
        assert (ran.returncode, error["code"]) == (9, "E_STORE_CORRUPT"), (args, ran.stdout)
        assert "which is not earlier" in error["message"], ran.stdout
        if args == ("store", "check"):  # what its walks met is the check's own problem, said once
            codes = [p["code"] for p in error["details"]["problems"]]
            assert "unreadable" not in codes and codes.count("undoes_earlier_op") == 1, codes
    table = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), "-o", "table", "store", "check"], cwd=sw.tmp,
                           env={**sw.env, "NO_COLOR": "1"}, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    listed = [line.split(":")[0].strip() for line in table.stderr.splitlines() if line.startswith("  ")]
    assert "undoes_earlier_op" in listed and "hash_chain" in listed, table.stderr  # each problem, not "(and 2 more)"
