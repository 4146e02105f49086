"""How long the blast-radius preview and the confirmed rollback of a 1,000-step workflow take.

    python bench/workflow_rollback.py [--steps 1000] [--repeat 5] [--kinds store,command]

Everything goes through the library (the same functions the CLI and MCP call), in this process,
on a fresh store in a temporary directory: no process per swarmctl command. Two workflows:
`store`, whose steps each move a ref (`ref_set`, one op each), and `command`, whose steps each
run `true` with `true` as rollback (a process per step, as a real workflow would). Each is run,
previewed `--repeat` times (median reported) and rolled back once. Every step is its own
SQLite transaction, synced to the disk at its commit, so the disk's sync time dominates the run
and the rollback; the preview only reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from swarmctl.context import Context  # noqa: E402
from swarmctl.store import Store  # noqa: E402
from swarmctl.tools.changeset import ChangesetCreateReq, changeset_create  # noqa: E402
from swarmctl.tools.workflow import (  # noqa: E402
    WorkflowRollbackReq,
    WorkflowRunReq,
    workflow_rollback,
    workflow_run,
)

ACTOR = "ci/bench"


def definition(kind: str, steps: int, target: str) -> str:
    lines = [f'name = "bench-{kind}"']
    for i in range(steps):
        lines.append(f'[[step]]\nname = "s{i:05d}"')
        if kind == "store":
            lines.append(f'ref_set = {{ name = "bench/{i:05d}", to = "{target}" }}')
        else:
            lines.append('run = ["true"]\nrollback = ["true"]\ntimeout_s = 30')
    return "\n".join(lines) + "\n"


def cpu_s() -> float:
    """CPU time of this process and of its children that have ended (the steps' commands)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


CPU: dict[str, float] = {}  # the CPU time of the last `timed` call of each name


def timed(fn, name: str = ""):
    started, cpu = time.perf_counter(), cpu_s()
    value = fn()
    CPU[name] = cpu_s() - cpu
    return time.perf_counter() - started, value


def bench(kind: str, steps: int, repeat: int, work: Path) -> dict[str, float]:
    store_dir = work / f"store-{kind}"
    store = Store.create(store_dir, ACTOR)
    ctx = Context(repo=str(store_dir), actor=ACTOR, cwd=work, readonly=False, _store=store)
    target = changeset_create(ctx, ChangesetCreateReq(message="bench target")).changeset.id
    flow = work / f"{kind}.toml"
    flow.write_text(definition(kind, steps, target))

    run_s, status = timed(lambda: workflow_run(ctx, WorkflowRunReq(file=str(flow))), "run")
    wf = status["workflow"]["id"]
    assert status["workflow"]["state"] == "completed", status["workflow"]
    preview_req = WorkflowRollbackReq(workflow=wf, include_completed=True)
    previews = []
    for _ in range(repeat):
        seconds, preview = timed(lambda: workflow_rollback(ctx, preview_req))
        previews.append(seconds)
    assert preview["blast_radius"]["counts"]["would_roll_back"] == steps, preview["blast_radius"]["counts"]
    confirm = WorkflowRollbackReq(
        workflow=wf, include_completed=True, confirm=True, expect_preview=preview["preview_id"]
    )
    rollback_s, done = timed(lambda: workflow_rollback(ctx, confirm), "rollback")
    assert done["state"] == "rolled_back" and len(done["results"]) == steps
    store.close()
    return {
        "run": run_s, "preview": statistics.median(previews), "rollback": rollback_s,
        "run_cpu": CPU["run"], "rollback_cpu": CPU["rollback"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kinds", default="store,command")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            rows.append((kind, bench(kind, args.steps, args.repeat, Path(tmp))))
    print(f"{'workflow':<10} {'steps':>6} {'run':>10} {'preview':>10} {'rollback':>10} {'rollback/step':>14}")
    for kind, t in rows:
        print(
            f"{kind:<10} {args.steps:>6} {t['run']:>9.2f}s {t['preview'] * 1000:>8.0f}ms "
            f"{t['rollback']:>9.2f}s {t['rollback'] / args.steps * 1000:>12.2f}ms"
        )
    print(f"(preview: median of {args.repeat}; run and rollback: once; each step one transaction, synced at its commit)")


if __name__ == "__main__":
    main()
