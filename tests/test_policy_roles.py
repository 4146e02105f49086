"""Verified identities on PostgreSQL (README: Policy): a policy's `[roles]` maps database roles
to the actors they may act as, so `--as` cannot be spoofed, and the database itself holds a
client with an agent role's credentials to the policy, swarmctl or not.

These run on a cluster of their own with password (scram-sha-256) authentication, not the
trust cluster of tests/pgcluster.py: two roles log in with their passwords, swarm_agent mapped
to agent/*, swarm_human to human/*. The store belongs to the cluster's superuser, who is not in
the map (the store's administrator).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, BOB, CI
from pgcluster import DATABASE, Cluster, server_bin

PASSWORD = {"super": "super-secret-1", "swarm_agent": "agent-pass-2", "swarm_human": "human-pass-3"}
SCHEMA = "roles_store"
POLICY = """\
admins = ["human/*"]

[[protect]]
refs = ["release/*"]
actors = ["human/*"]

[roles]
swarm_agent = ["agent/*"]
swarm_human = ["human/*"]
"""


class ScramCluster(Cluster):
    def libpq(self, database: str = DATABASE, role: str | None = None) -> str:
        role = role or self.role
        password = PASSWORD["super"] if role == self.role else PASSWORD[role]
        return f"postgresql://{role}:{password}@/{database}?host={self.socket}"

    def url(self, role: str | None = None) -> str:
        return f"{self.libpq(role=role)}&schema={SCHEMA}"

    def psql_as(self, role: str, sql: str) -> subprocess.CompletedProcess:
        """The psql client, as `role` with its password, on the store's schema."""
        return subprocess.run(
            [str(self.bindir / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket), "-U", role,
             "-d", DATABASE, "-c", f"SET search_path TO {SCHEMA}", "-c", sql],
            env={**os.environ, "PGPASSWORD": PASSWORD[role]}, capture_output=True, text=True, timeout=60,
        )


@pytest.fixture(scope="module")
def cluster():
    bindir = server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL's server binaries are not installed")
    root = Path(tempfile.mkdtemp(prefix="swarmctl-scram-"))
    user = "postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(root, user)
    made = ScramCluster(bindir, root, user)
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD["super"] + "\n")
    if user:
        shutil.chown(pwfile, user)
    ran = made._run(str(bindir / "initdb"), "-D", str(made.data), "-A", "scram-sha-256", "--pwfile", str(pwfile),
                    "-U", made.role, "-E", "UTF8", "--locale=C", "--no-sync")
    assert ran.returncode == 0, ran.stderr
    made.start()
    try:
        made.psql(f"CREATE DATABASE {DATABASE}")
        for role in ("swarm_agent", "swarm_human"):
            made.psql(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD[role]}'")
        yield made
    finally:
        made.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def store(cluster):
    """The store: release/v1 and work by human/alice, then the policy, then the two roles' grants."""
    from swarm import Swarm

    mp = pytest.MonkeyPatch()
    sw = Swarm(Path(tempfile.mkdtemp(prefix="swarmctl-roles-")), mp)
    admin = ("--repo", cluster.url(), "--as", ALICE)
    sw.ok("--as", ALICE, "init", cluster.url())
    sw.ok(*admin, "changeset", "create", "-m", "v1", "--ref", "release/v1")  # op 2
    sw.ok(*admin, "changeset", "create", "-m", "w", "--ref", "work")  # op 3
    (sw.tmp / "policy.toml").write_text(POLICY)
    sw.ok(*admin, "policy", "set", "policy.toml", cwd=sw.tmp)  # op 4
    for role in ("swarm_agent", "swarm_human"):
        cluster.psql(
            f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}; "
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}; "
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {role}",
            database=DATABASE,
        )
    yield sw
    mp.undo()


def run(store, cluster, role: str, actor: str, *args: str):
    return store("--repo", cluster.url(role), "--as", actor, *args)


def test_a_role_acts_only_as_the_actors_it_is_mapped_to(store, cluster):
    made = run(store, cluster, "swarm_agent", AGENT, "ref", "set", "feature/x", "release/v1")
    assert made.exit == 0 and made.envelope["meta"]["auth"] == "database", made.stdout
    spoofed = run(store, cluster, "swarm_agent", ALICE, "ref", "set", "feature/y", "release/v1")
    assert spoofed.exit == 6, spoofed.stdout
    error = spoofed.error
    assert error["code"] == "E_FORBIDDEN" and error["details"]["rule"] == "roles", error
    assert error["details"]["role"] == "swarm_agent" and error["details"]["allowed"] == ["agent/*"]
    human = run(store, cluster, "swarm_human", BOB, "ref", "set", "release/v1", "feature/x")
    assert human.exit == 0 and human.envelope["meta"]["auth"] == "database", human.stdout
    protected = run(store, cluster, "swarm_agent", AGENT, "ref", "delete", "release/v1")
    assert protected.error["code"] == "E_FORBIDDEN" and protected.error["details"]["rule"] == "protect[0]"
    # A role outside the map (the store's owner) acts as declared.
    owner = store("--repo", cluster.url(), "--as", CI, "ref", "set", "feature/z", "release/v1")
    assert owner.exit == 0 and owner.envelope["meta"]["auth"] == "trust", owner.stdout


def test_the_database_refuses_an_agent_role_that_goes_around_swarmctl(store, cluster):
    before = cluster.psql(f"SELECT name, target, op FROM {SCHEMA}.refs ORDER BY name", database=DATABASE)
    attempts = [
        "UPDATE refs SET target = (SELECT target FROM refs WHERE name = 'work') WHERE name = 'release/v1'",
        "DELETE FROM refs WHERE name = 'release/v1'",
        "UPDATE refs SET op = op WHERE name = 'work'",  # not protected, but no op moves it
        "UPDATE ops SET actor = 'agent/worker-17' WHERE op = 2",
        "DELETE FROM policies",
        "UPDATE meta SET value = '{}' WHERE key = 'policy_rules'",
        # An op of its own, claiming a person: refused at the op.
        "BEGIN; UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
        "SELECT last_op, 'ref_set', 'human/alice', '2026-12-01T00:00:00.000Z', 'spoof' FROM head; COMMIT",
        # An op as itself, then the protected ref: refused at the ref.
        "BEGIN; UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
        "SELECT last_op, 'ref_set', 'agent/worker-17', '2026-12-01T00:00:00.000Z', 'x' FROM head; "
        "UPDATE refs SET op = (SELECT last_op FROM head) WHERE name = 'release/v1'; COMMIT",
    ]
    for sql in attempts:
        ran = cluster.psql_as("swarm_agent", sql)
        assert ran.returncode != 0, sql
        assert "forbidden by the store's policy" in ran.stderr, (sql, ran.stderr)
    assert cluster.psql(f"SELECT name, target, op FROM {SCHEMA}.refs ORDER BY name", database=DATABASE) == before
    # The same role reads freely.
    assert cluster.psql_as("swarm_agent", "SELECT count(*) FROM refs").returncode == 0


def test_an_admin_role_changes_the_policy_and_an_agent_role_cannot(store, cluster):
    (store.tmp / "second.toml").write_text(POLICY + '\n[undo]\nothers = ["human/*"]\n')
    denied = store("--repo", cluster.url("swarm_agent"), "--as", AGENT, "policy", "set", "second.toml", cwd=store.tmp)
    assert denied.error["code"] == "E_FORBIDDEN" and denied.error["details"]["rule"] == "admins", denied.stdout
    human = ("--repo", cluster.url("swarm_human"), "--as", BOB)
    made = store.ok(*human, "policy", "set", "second.toml", cwd=store.tmp)
    assert store.ok(*human, "op", "undo", str(made["op"]))["undone"] == made["op"]
    assert store.ok(*human, "policy", "show")["policy"] == POLICY
