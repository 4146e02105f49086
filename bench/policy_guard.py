"""Benchmark of the policy's guard in the database (swarmctl/store/postgres/triggers.py): what
its triggers cost a write on a store on PostgreSQL.

    python bench/policy_guard.py                 # 300 writes per case
    python bench/policy_guard.py --writes 1000

Not a test: pytest does not run it. It starts a throwaway PostgreSQL server of its own
(tests/pgcluster.py), makes a store, and times one writer (one connection, kept open) moving a
ref back and forth through `Store.write`, the way every command writes, in four cases: no
policy (no guard); a policy without `[roles]` (the guard is there, and holds no one); a policy
with `[roles]`, written by the store's owner (outside the map: the guard lets it through) and
by a mapped agent role (the guard checks each row). Reported per write: CPU time of this
process and of its server backend (user+sys, from getrusage and /proc), which other load on
the machine does not inflate as it does wall time (also shown), beside the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

import pgcluster  # noqa: E402  (tests/pgcluster.py: the throwaway server)
from postgres import start_server  # noqa: E402  (bench/postgres.py)

from swarmctl.context import Context  # noqa: E402
from swarmctl.store import changesets as ids  # noqa: E402
from swarmctl.store.db import Move, Store  # noqa: E402
from swarmctl.tools.policy import POLICY_SET, PolicySetReq  # noqa: E402

AGENT = "agent/bench"
OWNER = "human/owner"
ROLE = "swarm_bench_agent"
POLICY = '[[protect]]\nrefs = ["release/*"]\nactors = ["human/*"]\n'
ROLES = POLICY + f'\n[roles]\n{ROLE} = ["agent/*"]\n'


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_writes(url: str, actor: str, ref: str, writes: int) -> dict[str, float]:
    """Per write, in milliseconds: this process's CPU, its backend's CPU, and wall time."""
    store = Store.open(url)
    try:
        pid = store.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with store.read() as conn:
            targets = [r[0] for r in conn.execute("SELECT id FROM changesets ORDER BY id LIMIT 2")]
        own, backend, wall = _own_cpu(), _backend_cpu(pid), time.perf_counter()
        for _ in range(writes):
            with store.write(actor) as w:
                current = w.ref_target(ref)
                w.append_op("ref_set", "bench", [Move(ref, current, targets[0] if current != targets[0] else targets[1])])
        return {
            "client_cpu_ms": (_own_cpu() - own) * 1000 / writes,
            "backend_cpu_ms": (_backend_cpu(pid) - backend) * 1000 / writes,
            "wall_ms": (time.perf_counter() - wall) * 1000 / writes,
        }
    finally:
        store.close()


def _store(cluster: pgcluster.Cluster, policy: str | None, name: str) -> str:
    url = f"{cluster.libpq()}&schema={name}"
    store = Store.create(url, OWNER)
    store.close()
    store = Store.open(url)
    for message in ("one", "two"):
        with store.write(OWNER) as w:
            cid = ids.changeset_id(message=message, parents=[], actor=OWNER, at=w.at, metadata={}, files={})
            w.append_op("changeset_create", message, [Move(f"work/{message}", None, cid)])
            w.insert_changeset({"id": cid, "message": message, "actor": OWNER, "at": w.at, "parents": "[]", "metadata": "{}", "files": "{}"})
    store.close()
    if policy is not None:
        ctx = Context(repo=url, actor=OWNER, readonly=False)
        try:
            POLICY_SET.run(ctx, PolicySetReq(policy=policy))
        finally:
            ctx.close()
        cluster.psql(
            f"GRANT USAGE ON SCHEMA {name} TO {ROLE}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {name} TO {ROLE}",
            database=pgcluster.DATABASE,
        )
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    cluster = start_server()
    try:
        cluster.psql(f"CREATE ROLE {ROLE} LOGIN", database=pgcluster.DATABASE)
        cases = {
            "no policy": (_store(cluster, None, "b_none"), OWNER, None),
            "policy, no [roles]": (_store(cluster, POLICY, "b_plain"), OWNER, None),
            "[roles], the owner": (_store(cluster, ROLES, "b_roles"), OWNER, None),
        }
        cases["[roles], a mapped agent"] = (cases["[roles], the owner"][0], AGENT, ROLE)
        print(f"{args.writes} writes per case (one ref_set op each); load average {os.getloadavg()}")
        print(f"{'case':26} {'client CPU ms':>14} {'backend CPU ms':>15} {'wall ms':>8}")
        for case, (url, actor, role) in cases.items():
            if role is not None:
                url = url.replace(f"postgresql://{cluster.role}@", f"postgresql://{role}@")
            found = time_writes(url, actor, "work/one", args.writes)
            print(f"{case:26} {found['client_cpu_ms']:14.2f} {found['backend_cpu_ms']:15.2f} {found['wall_ms']:8.2f}")
        print(f"load average {os.getloadavg()}")
    finally:
        cluster.stop("immediate")


if __name__ == "__main__":
    main()
