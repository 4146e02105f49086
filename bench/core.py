"""Benchmark of the core: how long whole `swarmctl` processes take on stores of 1,000 and
1,000,000 ops, beside the floors of the same interpreter (`python -c pass`, `import typer`).

    python bench/core.py                 # build the stores (once, cached), time, print
    python bench/core.py --rounds 41     # more rounds
    python bench/core.py --rebuild       # build the stores again
    python bench/core.py --sizes 1000,100000 --rounds 5   # a quick look

Not a test: pytest does not run it. Targets (issue 2): `op log -n 20` and `op undo` cost the
same within 20% on both stores, and `op log -n 20` takes at most 1.5 times `import typer`.
Issue 11, item 3: every combination of `op log --ref` with `--actor`/`--kind`/`--since` costs
at most 1.2 times as much on the large store as on the small one, also when few or no ops
match; as a whole process (the target), and in process (the query's own cost, also shown).
Issue 11, item 6: the hot commands (`--version`, `op log`, `op show`, `ref list`, `ref show`,
`ref set`, `op undo`) each cost at most 0.8 times `import typer` in CPU time (user + system of
the process, which load from other work distorts far less than wall time); printed with the
load average.

How the stores are built. Op 1 is a real `init` (Store.create, the store's own schema). The
rest of the history is written by a bulk loader straight into the store's tables, in batches
of one transaction each: the same rows `Store.write` would write (ops, ref_moves, changesets,
refs), with real changeset ids (BLAKE3 of the canonical encoding), times that never go
backwards, and every ref move a valid compare-and-swap on the one before it. A realistic mix:
40 actors; 25% changeset_create (a new changeset on a ref), 60% ref_set, 7% ref_delete, 8%
undo of the op just before. `main` takes about a tenth of all moves. The loaded store must then
pass the store's own consistency check (swarmctl.store.check), or the benchmark stops.
The pristine stores are cached under bench/results/stores/; each run times a fresh copy.

How the processes are timed. Each round runs every command once, in a new random order (so
that no command always runs on a warm or a cold cache), as a whole process started with the
`swarmctl` script beside this interpreter; a table gives the median over the rounds. Each
`op undo` undoes a different op (ops at the end of the history that each moved their own
`bench/K` ref), so every run does a real undo, never a replay. swarmctl's sources are compiled
first (compileall), as an installed package's are, since this environment may set
PYTHONDONTWRITEBYTECODE.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PYTHON = sys.executable
SWARMCTL = str(Path(sys.executable).parent / "swarmctl")

sys.path.insert(0, str(ROOT))
from swarmctl import names  # noqa: E402
from swarmctl.store import Store  # noqa: E402
from swarmctl.store import changesets as ids  # noqa: E402
from swarmctl.store import chain  # noqa: E402
from swarmctl.store.check import check_store  # noqa: E402
from swarmctl.store.schema import FORMAT_VERSION  # noqa: E402

ACTORS = [f"agent/worker-{i}" for i in range(30)] + [
    "human/alice", "human/bob", "human/carol", "human/dan", "human/erin",
    "ci/release", "ci/nightly", "ci/lint", "ci/deploy", "ci/docs",
]
BENCH_REFS = 200  # refs moved once each by the last ops: the targets of `op undo`
BATCH = 50_000


# --- building a store --------------------------------------------------------------------------


class Loader:
    """Generates a valid history and writes it in batches, through the store's schema."""

    def __init__(self, path: Path, total_ops: int, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.total = total_ops
        store = Store.create(path, "human/alice")  # op 1: a real init
        store.close()
        self.conn = sqlite3.connect(path / "swarmops.db", isolation_level=None)
        self.conn.execute("PRAGMA synchronous = OFF")  # a loader: durability comes at the end
        self.start = datetime.fromisoformat(
            self.conn.execute("SELECT at FROM ops WHERE op = 1").fetchone()[0].replace("Z", "+00:00")
        )
        self.op = 1
        self.refs: dict[str, str] = {}  # what each ref names now
        self.last_moved: dict[str, int] = {}
        self.pool: list[str] = []  # every changeset, to point refs at
        self.previous: tuple[int, list] | None = None  # the op before, if an undo may take it back
        self.rows = {"ops": [], "ref_moves": [], "changesets": [], "refs": None}
        names_ = ["main", *[f"release/v{i}" for i in range(1, 6)], *[f"feature/{i}" for i in range(500)]]
        self.ref_names = names_

    def at(self) -> str:
        return names.format_time(self.start + timedelta(milliseconds=self.op - 1))

    def pick_ref(self) -> str:
        r = self.rng.random()
        if r < 0.1:
            return "main"
        if r < 0.15:
            return f"release/v{self.rng.randint(1, 5)}"
        return f"feature/{self.rng.randrange(500)}"

    def append(self, kind: str, actor: str, description: str, moves: list, undoes: int | None = None) -> None:
        self.op += 1
        self.rows["ops"].append((self.op, kind, actor, self.at(), description, undoes))
        for seq, (name, old, new) in enumerate(moves):
            assert self.refs.get(name) == old
            self.rows["ref_moves"].append((self.op, seq, name, old, new, actor, kind))
            if new is None:
                del self.refs[name]
            else:
                self.refs[name] = new
            self.last_moved[name] = self.op
        if len(self.rows["ops"]) >= BATCH:
            self.flush()

    def changeset(self, actor: str, message: str, parents: list[str]) -> str:
        at = names.format_time(self.start + timedelta(milliseconds=self.op))  # the op it is made by
        cid = ids.changeset_id(message=message, parents=parents, actor=actor, at=at, metadata={}, files={})
        self.rows["changesets"].append((cid, self.op + 1, message, actor, at, json.dumps(parents), "{}", "{}"))
        self.pool.append(cid)
        return cid

    def step(self) -> None:
        actor = self.rng.choice(ACTORS)
        r = self.rng.random()
        if r < 0.08 and self.previous is not None:
            target, moves = self.previous
            back = [(name, new, old) for name, old, new in moves]
            self.append("undo", actor, f"undo op {target}", back, undoes=target)
            self.previous = None
            return
        name = self.pick_ref()
        current = self.refs.get(name)
        if r < 0.33 or not self.pool:
            cid = self.changeset(actor, f"change {self.op + 1}", [current] if current else [])
            moves = [(name, current, cid)]
            self.append("changeset_create", actor, f"create changeset {cid[:12]} on {name}", moves)
        elif r < 0.40 and current is not None:
            moves = [(name, current, None)]
            self.append("ref_delete", actor, f"delete {name} (was {current[:12]})", moves)
        else:
            new = self.rng.choice(self.pool[-5000:])
            if new == current:
                new = self.pool[-1] if self.pool[-1] != current else self.pool[0]
            moves = [(name, current, new)]
            self.append("ref_set", actor, f"set {name} to {new[:12]}", moves)
        self.previous = (self.op, moves)

    def bench_refs(self, moved: bool) -> None:
        """Create bench/K refs (mid-history), or move each once (the last ops)."""
        for k in range(BENCH_REFS):
            name = f"bench/{k}"
            old = self.refs.get(name)
            new = self.pool[(k * 7919 + (1 if moved else 0)) % len(self.pool)]
            if new == old:
                new = self.pool[(k * 7919 + 2) % len(self.pool)]
            what = f"set {name} to" if old else f"create {name} at"
            self.append("ref_set", "agent/worker-1", f"{what} {new[:12]}", [(name, old, new)])
        self.previous = None

    def flush(self) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO changesets VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self.rows["changesets"])
        self.conn.executemany(
            "INSERT INTO ops(op, kind, actor, at, description, undoes) VALUES (?, ?, ?, ?, ?, ?)", self.rows["ops"]
        )
        self.conn.executemany(
            "INSERT INTO ref_moves(op, seq, name, old, new, actor, kind) VALUES (?, ?, ?, ?, ?, ?, ?)", self.rows["ref_moves"]
        )
        self.conn.execute("COMMIT")
        for key in ("ops", "ref_moves", "changesets"):
            self.rows[key] = []

    def build(self) -> None:
        middle = self.total // 2
        while self.op < self.total - BENCH_REFS:
            if self.op == middle:
                self.bench_refs(moved=False)
            else:
                self.step()
        self.bench_refs(moved=True)
        self.flush()
        self.conn.execute("BEGIN")
        self.conn.execute("DELETE FROM refs")
        self.conn.executemany(
            "INSERT INTO refs VALUES (?, ?, ?)", [(n, t, self.last_moved[n]) for n, t in self.refs.items()]
        )
        # The op log's hash chain, as the store's format-2 upgrade computes it (store/migrate.py).
        self.conn.executemany("UPDATE ops SET hash = ? WHERE op = ?", [(d, op) for op, _, d in chain.walk(self.conn)])
        self.conn.execute("COMMIT")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


def build_store(path: Path, total_ops: int) -> None:
    if path.exists():
        shutil.rmtree(path)
    started = time.perf_counter()
    Loader(path, total_ops).build()
    conn = sqlite3.connect(f"{(path / 'swarmops.db').as_uri()}?mode=ro", uri=True)
    problems = check_store(conn)
    count = conn.execute("SELECT COUNT(*) FROM ops").fetchone()[0]
    conn.close()
    if problems or count != total_ops:
        sys.exit(f"the bulk-loaded store at {path} is not sound: {count} ops, {problems[:5]}")
    size = (path / "swarmops.db").stat().st_size
    print(f"built {path.name}: {total_ops:,} ops, {size / 1e6:.0f} MB, {time.perf_counter() - started:.0f} s, consistent")


def stored_format(path: Path) -> int:
    conn = sqlite3.connect(f"{(path / 'swarmops.db').as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0])
    finally:
        conn.close()


def pristine(total_ops: int, rebuild: bool) -> Path:
    path = RESULTS / "stores" / f"ops-{total_ops}"
    if rebuild or not (path / "swarmops.db").exists() or stored_format(path) != FORMAT_VERSION:
        build_store(path, total_ops)
    return path


# --- timing ------------------------------------------------------------------------------------


def run(argv: list[str], cwd: Path) -> tuple[float, float]:
    """The process's wall time and its CPU time (user + system, which load from other work
    distorts far less than wall time), in seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stdout[:500]!r} {proc.stderr[-500:]!r}")
    if argv[0] == SWARMCTL and "--version" not in argv:
        envelope = json.loads(proc.stdout)
        if not envelope["ok"] or envelope["result"].get("already_applied"):
            sys.exit(f"{' '.join(argv)}: {proc.stdout[:500]!r}")
    return elapsed, cpu


# `op log --ref` with `--actor`/`--kind`/`--since` (issue 11, item 3): many, few and no matches.
# SINCE is replaced by the time of the op 90% of the way through each store's history.
FILTERS = {
    "--ref main --actor A": ["--ref", "main", "--actor", "human/alice"],
    "--ref main --kind K": ["--ref", "main", "--kind", "ref_delete"],
    "--ref main --actor A --kind K": ["--ref", "main", "--actor", "human/alice", "--kind", "ref_set"],
    "--ref main --since T": ["--ref", "main", "--since", "SINCE"],
    "--ref main --actor A --kind K --since T": ["--ref", "main", "--actor", "ci/lint", "--kind", "ref_set", "--since", "SINCE"],
    "few: --ref bench/7 --actor A": ["--ref", "bench/7", "--actor", "agent/worker-1"],
    "none: --ref main --kind tx_commit": ["--ref", "main", "--kind", "tx_commit"],
    "none: --ref main --actor nobody --since T": ["--ref", "main", "--actor", "human/nobody", "--since", "SINCE"],
}


def filter_args(path: Path, size: int) -> dict[str, list[str]]:
    conn = sqlite3.connect(f"{(path / 'swarmops.db').as_uri()}?mode=ro", uri=True)
    since = conn.execute("SELECT at FROM ops WHERE op = ?", (size * 9 // 10,)).fetchone()[0]
    conn.close()
    return {name: [since if a == "SINCE" else a for a in args] for name, args in FILTERS.items()}


def in_process(stores: dict[int, Path], rounds: int) -> dict[str, list[float]]:
    """Each filter's `op_log` through the path MCP and `swarmctl call` use, without a process:
    the query's own cost, which a process's start would hide."""
    from swarmctl import registry
    from swarmctl.calls import call_tool
    from swarmctl.context import Context

    tools, times = registry.by_name(), {}
    for size, path in stores.items():
        for name, args in filter_args(path, size).items():
            arguments = {"limit": 20, **{a[2:]: b for a, b in zip(args[::2], args[1::2])}}
            samples = []
            for i in range(rounds + 1):
                ctx = Context(repo=str(path), cwd=path, readonly=True)
                started = time.perf_counter()
                envelope = call_tool("op_log", arguments, ctx, tools)
                elapsed = time.perf_counter() - started
                ctx.close()
                if not envelope["ok"]:
                    sys.exit(f"op_log {arguments}: {json.dumps(envelope)[:500]}")
                if i > 0:
                    samples.append(elapsed)
            times[f"in process: op log {name} @{size}"] = samples
    return times


def commands(stores: dict[int, Path], undo_targets: dict[int, list[int]]) -> dict[str, object]:
    cmds: dict[str, object] = {
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import typer"': [PYTHON, "-c", "import typer"],
        "swarmctl --version": [SWARMCTL, "--version"],
    }
    for size, path in stores.items():
        repo = ["--repo", str(path)]
        middle = size // 2 + 7
        cmds[f"op log -n 20 @{size}"] = [SWARMCTL, *repo, "op", "log", "-n", "20"]
        cmds[f"op log --ref main -n 20 @{size}"] = [SWARMCTL, *repo, "op", "log", "--ref", "main", "-n", "20"]
        cmds[f"op show {middle} @{size}"] = [SWARMCTL, *repo, "op", "show", str(middle)]
        cmds[f"ref list @{size}"] = [SWARMCTL, *repo, "ref", "list", "--prefix", "bench/1"]
        cmds[f"ref show main @{size}"] = [SWARMCTL, *repo, "ref", "show", "main"]
        cmds[f"ref set @{size}"] = [SWARMCTL, *repo, "--as", "agent/worker-1", "ref", "set", "bench-set", "main"]
        for name, args in filter_args(path, size).items():
            cmds[f"op log {name} @{size}"] = [SWARMCTL, *repo, "op", "log", "-n", "20", *args]
        targets = undo_targets[size]
        # A different op each time it runs.
        cmds[f"op undo @{size}"] = lambda repo=repo, targets=targets: [
            SWARMCTL, *repo, "--as", "agent/worker-1", "op", "undo", str(targets.pop())
        ]
    return cmds


def measure(cmds: dict[str, object], rounds: int, cwd: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each command's wall times and CPU times over the rounds."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    order = list(cmds)
    rng = random.Random(0)
    for i in range(rounds + 1):
        rng.shuffle(order)
        for name in order:
            argv = cmds[name]() if callable(cmds[name]) else cmds[name]
            elapsed, used = run(argv, cwd)
            if i > 0:  # round 0 warms the page cache and the interpreter's .pyc files
                times[name].append(elapsed)
                cpu[name].append(used)
    return times, cpu


def report(times: dict[str, list[float]], sizes: list[int]) -> dict:
    med = {name: statistics.median(values) * 1000 for name, values in times.items()}
    small, large = sizes[0], sizes[-1]
    width = max(len(n) for n in med) + 2
    print(f"\n{'command':<{width}}{'median ms':>10}{'min ms':>9}{'max ms':>9}")
    for name, values in times.items():
        print(f"{name:<{width}}{med[name]:>10.1f}{min(values) * 1000:>9.1f}{max(values) * 1000:>9.1f}")
    typer_ms = med['python -c "import typer"']
    checks = {
        f"op log -n 20: @{large} / @{small} (target 0.8-1.2)": med[f"op log -n 20 @{large}"] / med[f"op log -n 20 @{small}"],
        f"op undo: @{large} / @{small} (target 0.8-1.2)": med[f"op undo @{large}"] / med[f"op undo @{small}"],
        f"op log -n 20 @{large} / import typer (target <= 1.5)": med[f"op log -n 20 @{large}"] / typer_ms,
        f"op log -n 20 @{small} / import typer (target <= 1.5)": med[f"op log -n 20 @{small}"] / typer_ms,
    }
    for name in FILTERS:
        checks[f"op log {name}: @{large} / @{small} (target <= 1.2)"] = med[f"op log {name} @{large}"] / med[f"op log {name} @{small}"]
        inside = f"in process: op log {name}"
        checks[f"{inside}: @{large} / @{small} (shown)"] = med[f"{inside} @{large}"] / med[f"{inside} @{small}"]
    print()
    verdicts = {}
    for label, ratio in checks.items():
        ok = ratio <= 1.5 if "typer" in label else ratio <= 1.2 if "<= 1.2" in label else 0.8 <= ratio <= 1.2
        if "(shown)" in label:  # no target: a page of fewer matches on the small store costs less
            verdicts[label] = {"ratio": round(ratio, 3)}
            print(f"{label:<{width + 40}}{ratio:>6.2f}")
            continue
        verdicts[label] = {"ratio": round(ratio, 3), "met": ok}
        print(f"{label:<{width + 40}}{ratio:>6.2f}  {'met' if ok else 'MISSED'}")
    return {"median_ms": {k: round(v, 1) for k, v in med.items()}, "targets": verdicts}


# Issue 11, item 6: the hot commands toward the interpreter's floor, in CPU time.
STARTUP = ["swarmctl --version", "op log -n 20", "op show", "ref list", "ref show main", "ref set", "op undo"]


def startup(cpu: dict[str, list[float]], size: int, load_before: tuple[float, ...]) -> dict:
    """The hot commands' CPU time (user + system of the process, median) beside the floors', and
    each as a ratio of `import typer`'s (target <= 0.8; `python -c pass` is the floor under it)."""
    med = {name: statistics.median(values) * 1000 for name, values in cpu.items()}
    typer_ms = med['python -c "import typer"']
    rows = {"python -c pass": med["python -c pass"], 'python -c "import typer"': typer_ms}
    for hot in STARTUP:
        name = next(n for n in med if n == hot or n.startswith(hot + " ") and n.endswith(f"@{size}"))
        rows[name] = med[name]
    load = (load_before, os.getloadavg())
    print(f"\nstart-up, CPU time (user+sys) of each process, median; load average {load[0][0]:.1f} before, {load[1][0]:.1f} after")
    verdicts = {}
    for name, ms in rows.items():
        ratio = ms / typer_ms
        target = "" if name.startswith("python") else f"  {'met' if ratio <= 0.8 else 'MISSED'} (target <= 0.8)"
        print(f"{name:<40}{ms:>8.1f} ms{ratio:>7.2f} x import typer{target}")
        verdicts[name] = {"cpu_ms": round(ms, 1), "ratio": round(ratio, 3)}
    return {"load_average": [round(load[0][0], 1), round(load[1][0], 1)], "commands": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,1000000", help="store sizes in ops, comma-separated")
    parser.add_argument("--rounds", type=int, default=31, help="timed rounds (median of these)")
    parser.add_argument("--rebuild", action="store_true", help="build the stores again")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.rounds + 1 > BENCH_REFS:
        sys.exit(f"at most {BENCH_REFS - 1} rounds: each undoes a different op")
    if not Path(SWARMCTL).exists():
        sys.exit(f"no swarmctl beside {PYTHON}: install it in this environment (pip install -e .)")

    work = RESULTS / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    stores, undo_targets = {}, {}
    for size in sizes:
        stores[size] = work / f"ops-{size}"
        shutil.copytree(pristine(size, args.rebuild), stores[size])
        # The last BENCH_REFS ops each moved their own bench/K ref: each can be undone alone.
        undo_targets[size] = list(range(size - BENCH_REFS + 1, size + 1))
        random.Random(size).shuffle(undo_targets[size])

    # As an installed package runs: from compiled .pyc files. (An environment that sets
    # PYTHONDONTWRITEBYTECODE would otherwise recompile swarmctl's sources in every process.)
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "swarmctl")], check=True)
    versions = subprocess.run([SWARMCTL, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{versions}; Python {sys.version.split()[0]}; SQLite {sqlite3.sqlite_version}; "
          f"{os.cpu_count()} CPUs; {args.rounds} rounds, median")
    load = os.getloadavg()
    times, cpu = measure(commands(stores, undo_targets), args.rounds, work)
    times.update(in_process(stores, args.rounds))
    summary = report(times, sizes)
    summary["startup"] = startup(cpu, sizes[0], load_before=load)
    summary.update(rounds=args.rounds, sizes=sizes, python=sys.version.split()[0], when=names.now())
    (RESULTS / "core.json").write_text(json.dumps(summary, indent=2) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
