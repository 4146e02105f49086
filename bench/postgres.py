"""Benchmark of a store on PostgreSQL beside the same store on SQLite: whole `swarmctl`
processes on stores of 1,000 and more ops, and the write rate of many writers on one store.

    python bench/postgres.py                          # 1k and 1M ops, 15 rounds; 1-64 writers
    python bench/postgres.py --sizes 1000,100000 --rounds 9 --writers 1,8,32,64 --seconds 5

Prints (and writes to bench/results/postgres.json) the load average beside the figures: on a
machine shared with other work they are slower than on an idle one.

Not a test: pytest does not run it. It starts a throwaway PostgreSQL server of its own
(tests/pgcluster.py: initdb + pg_ctl, a unix socket, no TCP), with the server's durable
defaults (fsync on, synchronous_commit on), and removes it after.

The stores: bench/core.py's bulk-loaded SQLite stores (built and cached there), and a
`swarmctl store copy` of each onto the server, so both hold the same history. Each round
runs every command once on each store in a new random order; tables give the median.

The writers: N processes, each with one store connection kept open (on 2 cores, 64 CLI
processes would measure Python's start-up, not the store), each moving its own ref back and
forth by compare-and-swap through `Store.write` for a fixed time. Reported: commits per second,
median and p99 latency, and the checks: ops gapless, no lost update (each writer's ref names
what its last success set), no error but E_BUSY (which is counted); the store's own check too,
for 8 writers or fewer on the smallest store (a full replay of a big store costs minutes).
Every writer count runs on the smallest store; 8 writers also on each bigger one.

`store copy` is timed as a whole process: its wall time and CPU time (user+sys).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

import core  # noqa: E402  (bench/core.py: the SQLite stores, the process timer)
import pgcluster  # noqa: E402  (tests/pgcluster.py: the throwaway server)

RESULTS = ROOT / "bench" / "results"


def start_server() -> pgcluster.Cluster:
    bindir = pgcluster.server_bin()
    if bindir is None:
        sys.exit(pgcluster.MISSING)
    root = Path(__import__("tempfile").mkdtemp(prefix="swarmctl-bench-pg-"))
    user = None
    if os.geteuid() == 0:
        user = "postgres"
        shutil.chown(root, user)
    cluster = pgcluster.Cluster(bindir, root, user, durable=True)
    cluster.start()
    cluster.psql(f"CREATE DATABASE {pgcluster.DATABASE}")
    return cluster


def commands(stores: dict[str, str], undo_targets: dict[str, list[int]]) -> dict[str, object]:
    cmds: dict[str, object] = {}
    for label, repo in stores.items():
        r = ["--repo", repo]
        cmds[f"op log -n 20 {label}"] = [core.SWARMCTL, *r, "op", "log", "-n", "20"]
        targets = undo_targets[label]
        cmds[f"op undo {label}"] = lambda r=r, targets=targets: [
            core.SWARMCTL, *r, "--as", "agent/worker-1", "op", "undo", str(targets.pop())
        ]
        cmds[f"ref set {label}"] = lambda r=r: [
            core.SWARMCTL, *r, "--as", "agent/worker-2", "ref", "set", "bench/0", "main"
        ]
    return cmds


# --- many writers on one store -------------------------------------------------------------------


def _writer(repo: str, index: int, seconds: float, targets: tuple[str, str], start, out) -> None:
    from swarmctl.envelope import SwarmError
    from swarmctl.store import Move, Store

    store = Store.open(repo)
    name, latencies, busy, last = f"writers/{index}", [], 0, None
    start.wait()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        began = time.perf_counter()
        try:
            with store.write(f"agent/writer-{index}") as w:
                old = w.ref_target(name)
                new = targets[0] if old != targets[0] else targets[1]
                w.append_op("ref_set", f"set {name}", [Move(name, old, new)])
            last = new
            latencies.append(time.perf_counter() - began)
        except SwarmError as exc:
            if exc.code != "E_BUSY":
                raise
            busy += 1
    store.close()
    out.put((index, latencies, busy, last))


def writers(repo: str, count: int, seconds: float, check: bool = True) -> dict:
    from swarmctl.store import Store, queries
    from swarmctl.store.check import check_store

    store = Store.open(repo)
    with store.read() as conn:
        targets = (queries.ref_target(conn, "main"), queries.ref_target(conn, "bench/1"))
        before = queries.newest_op(conn)
    store.close()
    mp = multiprocessing.get_context("fork")
    start, out = mp.Barrier(count + 1), mp.Queue()
    procs = [mp.Process(target=_writer, args=(repo, i, seconds, targets, start, out)) for i in range(count)]
    for p in procs:
        p.start()
    start.wait()
    began = time.perf_counter()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.perf_counter() - began
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a writer failed (exit {p.exitcode}): an error other than E_BUSY")
    latencies = sorted(x for _, lat, _, _ in results for x in lat)
    commits = len(latencies)
    store = Store.open(repo)
    with store.read() as conn:
        after = queries.newest_op(conn)
        lost = [i for i, _, _, last in results if last is not None and queries.ref_target(conn, f"writers/{i}") != last]
        problems = check_store(conn) if check else []  # the full replay is costly on a big store
    store.close()
    if after - before != commits or lost or problems:
        sys.exit(f"{count} writers: {commits} commits but ops {before}->{after}; lost {lost}; {problems[:3]}")
    return {
        "writers": count,
        "commits": commits,
        "ops_per_s": round(commits / elapsed, 1),
        "median_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(0.99 * (commits - 1))] * 1000, 2),
        "busy": sum(b for _, _, b, _ in results),
    }


def timed_copy(source: str, url: str, cwd: Path) -> dict:
    """`swarmctl store copy SOURCE URL` as a process: its wall time, and its CPU time (user+sys,
    which load from other work distorts less)."""
    wall, cpu = core.run([core.SWARMCTL, "store", "copy", source, url], cwd)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,1000000", help="store sizes in ops, comma-separated")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (median of these)")
    parser.add_argument("--writers", default="1,8,32,64", help="writer process counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each writer count runs")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.rounds + 1 > core.BENCH_REFS:
        sys.exit(f"at most {core.BENCH_REFS - 1} rounds: each undoes a different op")

    load_at_start = [round(x, 2) for x in os.getloadavg()]
    work = RESULTS / "work-pg"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cluster = start_server()
    try:
        stores, undo_targets, copy_s = {}, {}, {}
        for size in sizes:
            local = work / f"ops-{size}"
            shutil.copytree(core.pristine(size, False), local)
            url = f"{cluster.libpq()}&schema=ops_{size}"
            copy_s[size] = timed_copy(str(local), url, work)
            print(f"store copy of {size:,} ops to PostgreSQL: {copy_s[size]}")
            cluster.psql(f"ANALYZE", pgcluster.DATABASE)
            for label, repo in ((f"sqlite@{size}", str(local)), (f"postgres@{size}", url)):
                stores[label] = repo
                undo_targets[label] = list(range(size - core.BENCH_REFS + 1, size + 1))
                random.Random(size).shuffle(undo_targets[label])
        subprocess.run([core.PYTHON, "-m", "compileall", "-q", str(ROOT / "swarmctl")], check=True)
        print(f"{os.cpu_count()} CPUs; {args.rounds} rounds, median")
        times, cpu = core.measure(commands(stores, undo_targets), args.rounds, work)
        med = {name: round(statistics.median(v) * 1000, 1) for name, v in times.items()}
        med_cpu = {name: round(statistics.median(v) * 1000, 1) for name, v in cpu.items()}
        width = max(len(n) for n in med) + 2
        print(f"{'':<{width}}{'wall':>10}    {'cpu (client)':>12}")
        for name in sorted(med):
            print(f"{name:<{width}}{med[name]:>10.1f} ms {med_cpu[name]:>10.1f} ms")

        scale = {}
        for size in sizes:
            counts = [int(c) for c in args.writers.split(",")] if size == sizes[0] else [8]
            for backend in ("sqlite", "postgres"):
                label = f"{backend}@{size}"
                scale[label] = []
                for count in counts:
                    row = writers(stores[label], count, args.seconds, check=size == sizes[0] and count <= 8)
                    scale[label].append(row)
                    print(f"{label:<17} {count:>3} writers: {row['ops_per_s']:>8} ops/s, median {row['median_ms']} ms, "
                          f"p99 {row['p99_ms']} ms, E_BUSY {row['busy']}")
        summary = {"median_ms": med, "median_cpu_ms": med_cpu, "store_copy": copy_s, "writers": scale, "cpus": os.cpu_count(),
                   "rounds": args.rounds, "sizes": sizes, "seconds_per_writer_count": args.seconds,
                   "load_average": [round(x, 2) for x in os.getloadavg()], "load_average_at_start": load_at_start}
        print(f"load average: at the start {load_at_start}, at the end {summary['load_average']}")
        (RESULTS / "postgres.json").write_text(json.dumps(summary, indent=2) + "\n")
    finally:
        pgcluster.remove_cluster(cluster)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
