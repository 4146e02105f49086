"""Issue 10, item 5: one skewed clock must not pin time for everyone.

A write under a clock far ahead stores that time; later writes under a right clock take their
own time (the op is listed as a time break) instead of pinning every later op to the outlier.
`--since`/`--until` select by each op's own time, and stay flat on a big log. The clock is set
in this process (names.now), so these tests need the in-process `sw`."""

import math
import random
import sqlite3
import time
from datetime import datetime, timedelta, timezone

import pytest

from core_helpers import ALICE
from swarm import SUBPROCESS
from swarmctl import names
from swarmctl.store import queries
from swarmctl.store.schema import DB_FILE

pytestmark = pytest.mark.skipif(SUBPROCESS, reason="the clock is set in this process")


class Clock:
    def __init__(self, monkeypatch, start: datetime) -> None:
        self.now = start
        monkeypatch.setattr(names, "now", lambda: names.format_time(self.now))

    def tick(self, seconds: float = 1.0) -> None:
        self.now += timedelta(seconds=seconds)


def at(moment: datetime) -> str:
    return names.format_time(moment)


START = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def write(sw, clock: Clock, name: str, far: datetime | None = None) -> int:
    """`changeset create --ref NAME` at the clock's time (or at `far`, a clock that ran ahead)."""
    saved = clock.now
    if far is not None:
        clock.now = far
    op = sw.ok("--repo", str(sw.store), "--as", ALICE, "changeset", "create", "-m", name, "--ref", name)["op"]
    clock.now = saved
    clock.tick()
    return op


def times(sw, *args: str) -> list[int]:
    limit = () if "-n" in args else ("-n", "200")
    return [o["op"] for o in sw.ok("--repo", str(sw.store), "op", "log", *limit, *args)["ops"]]


def test_one_clock_far_ahead_does_not_pin_the_ops_after_it(sw, monkeypatch):
    clock = Clock(monkeypatch, START)
    sw.ok("--as", ALICE, "init", str(sw.store))  # op 1
    clock.tick()
    write(sw, clock, "a")  # op 2
    outlier = write(sw, clock, "b", far=datetime(9999, 12, 31, tzinfo=timezone.utc))  # op 3
    later = [write(sw, clock, f"c{i}") for i in range(3)]  # ops 4-6, each at its own time
    ops = {o["op"]: o["at"] for o in sw.ok("--repo", str(sw.store), "op", "log")["ops"]}
    assert ops[outlier].startswith("9999-12-31")
    assert all(ops[op] < "2027" for op in later), ops
    assert [ops[op] for op in later] == sorted(ops[op] for op in later)
    # --since / --until by each op's own time
    assert times(sw, "--since", at(START + timedelta(seconds=2.5))) == [6, 5, 4, 3]
    assert times(sw, "--until", at(START + timedelta(days=1))) == [6, 5, 4, 2, 1]
    assert times(sw, "--since", "9000-01-01") == [3]
    assert times(sw, "--since", at(START + timedelta(seconds=3.5)), "--until", "2027-01-01") == [6, 5]
    assert times(sw, "--since", "2026-01-01", "--until", "2026-12-01", "-n", "2") == [6, 5]
    page = sw.ok("--repo", str(sw.store), "op", "log", "--until", "2027-01-01", "-n", "2")
    assert page["has_more"] and page["next_before"] == 5
    assert times(sw, "--until", "2027-01-01", "--before", "5") == [4, 2, 1]
    assert times(sw, "--until", "2027-01-01", "--after", "2", "-n", "2") == [5, 4]
    # store check: sound, and it lists the op whose time went back
    checked = sw.ok("--repo", str(sw.store), "store", "check")
    assert checked["problems"] == []
    assert [(t["op"], t["recorded"]) for t in checked["times_out_of_order"]] == [(4, True)]


def test_a_clock_a_little_behind_still_keeps_op_times_in_order(sw, monkeypatch):
    clock = Clock(monkeypatch, START)
    sw.ok("--as", ALICE, "init", str(sw.store))
    clock.tick()
    write(sw, clock, "a", far=START + timedelta(seconds=200))  # ahead, but within 300 s
    second = write(sw, clock, "b")
    ops = {o["op"]: o["at"] for o in sw.ok("--repo", str(sw.store), "op", "log")["ops"]}
    assert ops[second] == ops[second - 1]  # pinned to the op before: times never go back
    monkeypatch.setenv("SWARMCTL_CLOCK_SKEW_S", "10")  # the allowed skew is a setting
    third = write(sw, clock, "c")
    ops = {o["op"]: o["at"] for o in sw.ok("--repo", str(sw.store), "op", "log")["ops"]}
    assert ops[third] < ops[second]
    monkeypatch.setenv("SWARMCTL_CLOCK_SKEW_S", "soon")
    bad = sw("--repo", str(sw.store), "--as", ALICE, "ref", "delete", "a")
    assert (bad.exit, bad.error["code"]) == (2, "E_INVALID_ARG")


def test_since_and_until_agree_with_each_op_s_own_time_under_random_skews(sw, monkeypatch):
    """Seeded: a log written under clocks that jump ahead and back; every --since/--until
    window gives exactly the ops whose own time is inside it, newest first."""
    rng = random.Random(10)
    clock = Clock(monkeypatch, START)
    sw.ok("--as", ALICE, "init", str(sw.store))
    for i in range(40):
        clock.tick(rng.choice([0.001, 1, 5, 60]))
        far = START + timedelta(days=rng.randint(1, 400)) if rng.random() < 0.15 else None
        write(sw, clock, f"r{i % 5}", far=far)
    log = sw.ok("--repo", str(sw.store), "op", "log", "-n", "100")["ops"]
    stamps = sorted({o["at"] for o in log})
    for _ in range(40):
        low, high = sorted(rng.sample(stamps, 2))
        for args, keep in (
            (("--since", low), lambda a: a >= low),
            (("--until", high), lambda a: a <= high),
            (("--since", low, "--until", high), lambda a: low <= a <= high),
        ):
            assert times(sw, *args) == [o["op"] for o in log if keep(o["at"])], args
    assert sw.ok("--repo", str(sw.store), "store", "check")["problems"] == []


def test_since_and_until_stay_flat_on_a_big_log(sw):
    """On logs of 200 and 20,000 ops (with time breaks), a --since/--until page costs a few
    lookups by op number per run of ordered times: the number of statements grows with the
    logarithm of the log, and none of them scans the op log."""
    counts = {}
    for size in (200, 20_000):
        store = sw.tmp / f"big{size}"
        sw.ok("--as", ALICE, "init", str(store))
        conn = sqlite3.connect(store / DB_FILE)
        base = START
        rows = []
        for op in range(2, size + 1):
            moment = base + timedelta(seconds=op)
            if op in (size // 3, 2 * size // 3):  # two clocks far ahead
                moment += timedelta(days=3000)
            rows.append((op, "ref_set", ALICE, at(moment), f"op {op}"))
        conn.executemany("INSERT INTO ops(op, kind, actor, at, description) VALUES (?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO time_breaks(op) VALUES (?)", [(size // 3 + 1,), (2 * size // 3 + 1,)])
        conn.commit()
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        q = queries.LogQuery(limit=20, since=at(base + timedelta(seconds=size // 2)), until=at(base + timedelta(seconds=size)))
        found, more = queries.op_log(conn, q)
        conn.set_trace_callback(None)
        assert len(found) == 20 and more
        assert found == list(range(size, size - 20, -1))
        counts[size] = len(statements)
        for sql in {s for s in statements if s.startswith("SELECT")}:
            plan = " | ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql.replace("?", "0")))
            assert "SCAN ops" not in plan and "SCAN o" not in plan.replace("SCAN o USING", ""), (sql, plan)
        conn.close()
    print("statements per page", counts)
    # 3 runs, 2 bisections each: about 6 log2(n) lookups, plus a few fixed queries.
    assert counts[20_000] <= counts[200] + 6 * math.ceil(math.log2(20_000 / 200)) + 2, counts


def test_a_faked_monotonic_clock_still_gives_envelopes(sw, monkeypatch):
    """time.monotonic and time.perf_counter going backwards: every command still prints an
    envelope, with no negative durations."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    (sw.tmp / "hi.sh").write_text("#!/bin/sh\necho hi\n")
    (sw.tmp / "hi.sh").chmod(0o755)
    (sw.tmp / "flow.toml").write_text('name = "w"\n[[step]]\nname = "hi"\nrun = ["./hi.sh"]\n')
    ticks = iter(range(10**9, 0, -7919))
    backwards = lambda: float(next(ticks))  # noqa: E731
    monkeypatch.setattr(time, "monotonic", backwards)
    monkeypatch.setattr(time, "perf_counter", backwards)
    runs = [
        sw("--repo", str(sw.store), "op", "log"),
        sw("--repo", str(sw.store), "--as", ALICE, "changeset", "create", "-m", "m", "--ref", "main"),
        sw("--repo", str(sw.store), "--as", ALICE, "workflow", "run", "flow.toml", cwd=sw.tmp),
    ]
    monkeypatch.undo()
    for ran in runs:
        envelope = ran.envelope
        assert envelope["ok"], envelope
        assert envelope["meta"]["elapsed_ms"] >= 0
    step = runs[2].result["steps"][0]["result"]
    assert step["duration_ms"] >= 0 and step["stdout_tail"] == "hi\n"
