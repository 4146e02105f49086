"""How long `op revert` of a 1,000-op selection and `op restore` take, as whole `swarmctl`
processes, beside the floors of the same interpreter and `op log -n 20` on the same store.

    python bench/revert.py [--agent-ops 1000] [--rounds 11]

The store is built through the library (the functions the CLI and MCP call), each op its own
transaction: `agent/bench` makes --agent-ops ref moves over 100 refs of its own (`agent/r*`),
interleaved one for one with `human/alice`'s moves of 100 other refs (`human/h*`). Then, each
round, in a new random order:

- `op revert --actor agent/bench --dry-run`: selects the agent's ops and works out the net moves
  and conflicts (reads only);
- `op revert --actor agent/bench`: the same, then one op (kind `revert`) in one transaction, on a
  fresh copy of the store (copied outside the timing);
- the same two reverts in this process, through the path MCP and `swarmctl call` use: the
  tool's own work, without starting Python;
- `op restore HALF` (the preview) and `op restore HALF --confirm --expect-head HEAD` (on a fresh
  copy), where HALF is the op half-way through the history (with 1,000 agent ops, all 200
  refs move back).

Every revert must take back exactly the agent's ops and leave alice's refs as they are; the
benchmark stops otherwise. Not a test: pytest does not run it. The median of the rounds is
reported (one warm-up round not counted), with its ratio to `op log -n 20`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SWARMCTL = str(Path(sys.executable).parent / "swarmctl")
sys.path.insert(0, str(ROOT))

from swarmctl import registry  # noqa: E402
from swarmctl.calls import call_tool  # noqa: E402
from swarmctl.context import Context  # noqa: E402
from swarmctl.store import Store  # noqa: E402
from swarmctl.tools.changeset import ChangesetCreateReq, changeset_create  # noqa: E402
from swarmctl.tools.ref import RefSetReq, ref_set  # noqa: E402

AGENT, PERSON = "agent/bench", "human/alice"
REFS = 100
TARGETS = 10


def build(path: Path, agent_ops: int) -> dict[str, int]:
    """The interleaved history; returns the store's head and the op half-way through it."""
    store = Store.create(path, PERSON)
    ctx = {a: Context(repo=str(path), actor=a, readonly=False, _store=store) for a in (AGENT, PERSON)}
    targets = [changeset_create(ctx[PERSON], ChangesetCreateReq(message=f"target {i}")).changeset.id for i in range(TARGETS)]
    for i in range(agent_ops):
        for actor, prefix in ((AGENT, "agent/r"), (PERSON, "human/h")):
            ref_set(ctx[actor], RefSetReq(name=f"{prefix}{i % REFS}", target=targets[(i // REFS) % TARGETS], create=i < REFS))
    head = store.conn.execute("SELECT MAX(op) FROM ops").fetchone()[0]
    store.close()
    return {"head": head, "half": head // 2}


def run(argv: list[str], cwd: Path) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")}
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    envelope = json.loads(proc.stdout) if argv[0] == SWARMCTL else {}
    if proc.returncode != 0 or (envelope and not envelope["ok"]):
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stdout[:500]!r} {proc.stderr[-500:]!r}")
    return elapsed, envelope


def person_refs(store: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"{(store / 'swarmops.db').as_uri()}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT name, target FROM refs WHERE name LIKE 'human/%'"))
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent-ops", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    if not Path(SWARMCTL).exists():
        sys.exit(f"no swarmctl beside {PYTHON}: install it in this environment (pip install -e .)")
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "swarmctl")], check=True)

    with tempfile.TemporaryDirectory(prefix="swarmctl-bench-") as tmp:
        work = Path(tmp)
        pristine = work / "pristine"
        started = time.perf_counter()
        ops = build(pristine, args.agent_ops)
        print(f"built {ops['head']} ops ({args.agent_ops} by {AGENT}) in {time.perf_counter() - started:.1f}s")
        alice = person_refs(pristine)

        def fresh() -> Path:
            copy = work / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(pristine, copy)
            return copy

        def revert(dry: bool) -> tuple[float, dict]:
            store = pristine if dry else fresh()
            elapsed, envelope = run(
                [SWARMCTL, "--repo", str(store), "--as", PERSON, "op", "revert", "--actor", AGENT, *(["--dry-run"] if dry else [])], work
            )
            result = envelope["result"]
            if len(result["reverted"]) != args.agent_ops or len(result["ref_moves"]) != min(REFS, args.agent_ops) or person_refs(store) != alice:
                sys.exit(f"the revert did not take back exactly the agent's ops: {json.dumps(result)[:500]}")
            return elapsed, envelope

        def restore(confirm: bool) -> tuple[float, dict]:
            store = fresh() if confirm else pristine
            flags = ["--confirm", "--expect-head", str(ops["head"])] if confirm else []
            elapsed, envelope = run([SWARMCTL, "--repo", str(store), "--as", PERSON, "op", "restore", str(ops["half"]), *flags], work)
            if not 0 < len(envelope["result"]["ref_moves"]) <= 2 * REFS:
                sys.exit(f"the restore should move refs: {json.dumps(envelope['result'])[:500]}")
            return elapsed, envelope

        def in_process(dry: bool) -> tuple[float, dict]:
            """The tool's own work, through the path MCP and `swarmctl call` use, without a process."""
            store = pristine if dry else fresh()
            ctx = Context(repo=str(store), actor=PERSON, cwd=work, readonly=dry)
            started = time.perf_counter()
            envelope = call_tool("op_revert", {"actor": AGENT, "dry_run": dry}, ctx, registry.by_name())
            elapsed = time.perf_counter() - started
            ctx.close()
            if not envelope["ok"] or len(envelope["result"]["reverted"]) != args.agent_ops:
                sys.exit(f"in-process revert failed: {json.dumps(envelope)[:500]}")
            return elapsed, envelope

        commands = {
            f"in process: op_revert (selects {args.agent_ops}), dry run": lambda: in_process(True),
            f"in process: op_revert (selects {args.agent_ops})": lambda: in_process(False),
            "python -c pass": lambda: run([PYTHON, "-c", "pass"], work),
            'python -c "import typer"': lambda: run([PYTHON, "-c", "import typer"], work),
            "op log -n 20": lambda: run([SWARMCTL, "--repo", str(pristine), "op", "log", "-n", "20"], work),
            f"op revert --actor (selects {args.agent_ops}) --dry-run": lambda: revert(True),
            f"op revert --actor (selects {args.agent_ops})": lambda: revert(False),
            "op restore HALF (preview)": lambda: restore(False),
            "op restore HALF --confirm": lambda: restore(True),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        order = list(commands)
        rng = random.Random(0)
        for i in range(args.rounds + 1):
            rng.shuffle(order)
            for name in order:
                elapsed, _ = commands[name]()
                if i > 0:
                    times[name].append(elapsed)

    versions = subprocess.run([SWARMCTL, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{versions}; Python {sys.version.split()[0]}; SQLite {sqlite3.sqlite_version}; {os.cpu_count()} CPUs; "
          f"{args.rounds} rounds, median")
    med = {name: statistics.median(values) * 1000 for name, values in times.items()}
    log = med["op log -n 20"]
    width = max(len(n) for n in med) + 2
    print(f"\n{'command':<{width}}{'median ms':>10}{'min ms':>9}{'max ms':>9}{'/ op log':>10}")
    for name, values in times.items():
        print(f"{name:<{width}}{med[name]:>10.1f}{min(values) * 1000:>9.1f}{max(values) * 1000:>9.1f}{med[name] / log:>10.2f}")


if __name__ == "__main__":
    main()
