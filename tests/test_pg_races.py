"""PostgreSQL under many writers at once: 16 real processes, half of them on host-a and half on
host-b (SWARMCTL_HOST_ID), each moving one ref by compare-and-swap and running a workflow of its
own. Ops stay gapless, no update is lost, and nothing comes back E_INTERNAL."""

from pathlib import Path

import pytest
from core_helpers import ALICE, problems
from test_concurrency import _check_race, _seed_targets, racers

pytestmark = pytest.mark.backends("postgres")

PROCESSES = 16
PER_PROCESS = 3
# What a racing writer may be told, and retry: someone else moved the ref first, or the store
# stayed locked past SWARMCTL_LOCK_TIMEOUT.
RETRIED = {"E_CAS_MISMATCH", "E_BUSY"}

FLOW = """\
name = "race-{i}"
[[step]]
name = "promote"
ref_set = {{ name = "race/{i}", to = "{target}" }}
[[step]]
name = "check"
run = ["true"]
"""


def _worker(repo: str, host: str, i: int, targets: list, flows: str, results, go) -> None:
    """On `host`: advance `counter` through `targets` (read, then set with --expect, retried on
    E_CAS_MISMATCH or E_BUSY), then run a workflow. Puts (successes, unexpected errors, workflow)."""
    import os

    os.environ["SWARMCTL_HOST_ID"] = host
    os.environ["SWARMCTL_LOCK_TIMEOUT"] = "60"
    from swarmctl import registry, runner
    from swarmctl.context import Context
    from swarmctl.tools import ref
    from swarmctl.tools import workflow as wf

    actor, done, unexpected = f"agent/{host}-{i}", [], []
    go.wait()
    for target in targets:
        while True:
            shown = runner.run(ref.REF_SHOW, ref.RefShowReq(name="counter"), Context(repo=repo))
            if not shown["ok"]:
                unexpected.append(shown["error"])
                continue
            current = shown["result"]["target"]
            env = runner.run(ref.REF_SET, ref.RefSetReq(name="counter", target=target, expect=current),
                             Context(repo=repo, actor=actor, readonly=False))
            if env["ok"]:
                done.append((env["result"]["op"], current, target))
                break
            if env["error"]["code"] not in RETRIED:
                unexpected.append(env["error"])
    ran = runner.run(registry.by_name()["workflow_run"], wf.WorkflowRunReq(file=f"flow-{i}.toml"),
                     Context(repo=repo, actor=actor, readonly=False, cwd=Path(flows)))
    if not ran["ok"]:
        unexpected.append(ran["error"])
    results.put((done, unexpected, ran.get("result")))


def test_sixteen_processes_on_two_hosts_race_without_gaps_lost_updates_or_internal_errors(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    targets = _seed_targets(sw, 1 + PROCESSES * PER_PROCESS)
    flows = sw.tmp / "flows"
    flows.mkdir()
    for i in range(PROCESSES):
        (flows / f"flow-{i}.toml").write_text(FLOW.format(i=i, target=targets[0]))
    mp = racers()
    results, go = mp.Queue(), mp.Barrier(PROCESSES)
    procs = [
        mp.Process(target=_worker, args=(
            str(sw.store), "host-a" if i % 2 else "host-b", i,
            targets[1 + i * PER_PROCESS: 1 + (i + 1) * PER_PROCESS], str(flows), results, go,
        ))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [u for _, unexpected, _ in outcomes for u in unexpected] == []
    successes = [s for done, _, _ in outcomes for s in done]
    assert len(successes) == PROCESSES * PER_PROCESS
    _check_race(sw, successes, targets[0])  # no lost update; the store's check: gapless ops
    runs = [r for _, _, r in outcomes]
    assert [(r["workflow"]["state"], r["workflow"]["owner"]) for r in runs] == [("completed", None)] * PROCESSES
    listed = sw.ok("--repo", str(sw.store), "workflow", "list", "-n", "100")["workflows"]
    assert sorted(w["name"] for w in listed) == sorted(f"race-{i}" for i in range(PROCESSES))
    ops = sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"]
    # init, the changesets, counter's creation, every move, and one op per workflow's store step
    assert ops == 3 + PROCESSES * PER_PROCESS + PROCESSES
    assert problems(sw.store) == []
