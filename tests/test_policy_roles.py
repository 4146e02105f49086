"""Verified identities on PostgreSQL (README: Policy): a policy's `[roles]` maps database roles
to the actors they may act as, so `--as` cannot be spoofed, and the database itself holds a
client with an agent role's credentials to the policy, swarmctl or not.

These run on a cluster of their own with password (scram-sha-256) authentication, not the
trust cluster of tests/pgcluster.py: two roles log in with their passwords, swarm_agent mapped
to agent/*, swarm_human to human/*. The store belongs to the cluster's superuser, who is not in
the map (the store's administrator).
"""

from __future__ import annotations

import ast
import json
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
# Every rule kind, so the database is seen to hold a role to each; `{flows}` is the folder the
# store runs workflow definitions from.
POLICY = """\
admins = ["human/*"]

[[protect]]
refs = ["release/*"]
actors = ["human/*"]

[undo]
others = ["human/*"]

[approve]
self = false
actors = ["human/*"]

[workflow]
others = ["human/*"]

[run]
actors = ["human/*", "agent/worker-17"]
definitions = ["{flows}/**"]

[roles]
swarm_agent = ["agent/*"]
swarm_human = ["human/*"]
"""
FLOW = """\
name = "promote"
[[step]]
name = "stage"
ref_set = {{ name = "{ref}", to = "work" }}
[[step]]
name = "sign-off"
approval = "a person signs off"
[[step]]
name = "ship"
ref_set = {{ name = "{ref}-shipped", to = "work" }}
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
    """The store: release/v1 and work (with a file) by human/alice, then the policy, then the
    two roles' grants: every privilege on the tables but the owner's (TRUNCATE too, to see the
    guard refuse it), as a careless DBA might grant them."""
    from swarm import Swarm

    mp = pytest.MonkeyPatch()
    sw = Swarm(Path(tempfile.mkdtemp(prefix="swarmctl-roles-")), mp)
    (sw.tmp / "flows").mkdir()
    sw.policy = POLICY.format(flows=(sw.tmp / "flows").resolve())
    admin = ("--repo", cluster.url(), "--as", "human/alice")
    (sw.tmp / "NOTES.md").write_text("notes\n")
    sw.ok("--as", "human/alice", "init", cluster.url())
    sw.ok(*admin, "changeset", "create", "-m", "v1", "--ref", "release/v1")  # op 2
    sw.ok(*admin, "changeset", "create", "-m", "w", "--ref", "work", "--file", "NOTES.md", cwd=sw.tmp)  # op 3
    (sw.tmp / "policy.toml").write_text(sw.policy)
    sw.ok(*admin, "policy", "set", "policy.toml", cwd=sw.tmp)  # op 4
    for role in ("swarm_agent", "swarm_human"):
        cluster.psql(
            f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}; "
            f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}; "
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
    (store.tmp / "second.toml").write_text(store.policy.replace('self = false', 'self = true'))
    denied = store("--repo", cluster.url("swarm_agent"), "--as", "agent/worker-17", "policy", "set", "second.toml", cwd=store.tmp)
    assert denied.error["code"] == "E_FORBIDDEN" and denied.error["details"]["rule"] == "admins", denied.stdout
    human = ("--repo", cluster.url("swarm_human"), "--as", BOB)
    made = store.ok(*human, "policy", "set", "second.toml", cwd=store.tmp)
    assert store.ok(*human, "op", "undo", str(made["op"]))["undone"] == made["op"]
    assert store.ok(*human, "policy", "show")["policy"] == store.policy


# --- the database's guard, table by table ---------------------------------------------------------

AS_AGENT = f"SET swarm.actor = '{AGENT}'; "
# An op of the agent's own, numbered as swarmctl numbers one: what a client must do before it
# may add anything an op adds.
OWN_OP = (
    "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
    f"SELECT last_op, 'ref_set', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x' FROM head; "
)


def in_own_op(sql: str) -> str:
    return f"BEGIN; {AS_AGENT}{OWN_OP}{sql}; COMMIT"


# For each table of the store's schema, writes by the agent's role (declaring its own actor,
# unless said) that would break a rule, and what the refusal says.
ATTACKS: dict[str, list[tuple[str, str]]] = {
    "meta": [
        ("UPDATE meta SET value = '{}' WHERE key = 'policy_rules'", "writes only as the actor it declares"),
        (AS_AGENT + "UPDATE meta SET value = '{}' WHERE key = 'policy_rules'", "only an admin changes the policy"),
        (in_own_op("UPDATE meta SET value = '{\"roles\": {}}' WHERE key = 'policy_rules'"), "only an admin changes the policy"),
        (AS_AGENT + "UPDATE meta SET value = '99' WHERE key = 'format'", "store's format"),
        (AS_AGENT + "DELETE FROM meta WHERE key = 'format'", "store's format"),
        # The store's settings, which only admins' commands set: a fence would stop every writer
        # and send them to a store of the role's choosing; a bound would change everyone's tx.
        (AS_AGENT + "INSERT INTO meta(key, value) VALUES ('moved_to', '/elsewhere')", "only an admin changes the store's settings"),
        (AS_AGENT + "INSERT INTO meta(key, value) VALUES ('tx.max_revisions', '1')", "only an admin changes the store's settings"),
    ],
    "head": [
        (AS_AGENT + "UPDATE head SET last_op = last_op + 5", "head row"),
        (AS_AGENT + "UPDATE head SET last_op = last_op - 1", "head row"),
        (AS_AGENT + "DELETE FROM head", "head row"),
        (in_own_op("UPDATE head SET last_op = last_op + 1"), "head row"),
        # Moved by one with no op after it: every later write would find a gap and refuse.
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; COMMIT", "but no op"),
    ],
    "ops": [
        (AS_AGENT + f"UPDATE ops SET actor = '{AGENT}' WHERE op = 2", "may not be rewritten"),
        (AS_AGENT + "DELETE FROM ops WHERE op = 2", "may not be rewritten"),
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
         "SELECT last_op, 'ref_set', 'human/alice', '2026-12-01T00:00:00.000Z', 'spoof' FROM head; COMMIT", "names actor human/alice"),
        (AS_AGENT + "INSERT INTO ops(op, kind, actor, at, description) "
         f"SELECT last_op + 1, 'ref_set', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x' FROM head", "not the op this transaction"),
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description, undoes) "
         f"SELECT last_op, 'undo', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x', 2 FROM head; COMMIT", "may not undo op 2"),
        (in_own_op("UPDATE ops SET description = 'y' WHERE op = (SELECT last_op FROM head)"), "may not be rewritten"),
        # Forged ops: a kind only an admin's command makes, and a time ahead of the server's
        # (which would drag every later op's time forward).
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
         f"SELECT last_op, 'policy_set', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x' FROM head; COMMIT", "kind policy_set"),
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
         f"SELECT last_op, 'ref_set', '{AGENT}', '2999-01-01T00:00:00.000Z', 'x' FROM head; COMMIT", "ahead of the server's clock"),
    ],
    "changesets": [
        (AS_AGENT + "INSERT INTO changesets SELECT 'ff' || id, op, message, actor, at, parents, metadata, files FROM changesets LIMIT 1",
         "added only with the op"),
        (in_own_op("INSERT INTO changesets(id, op, message, actor, at, parents, metadata, files) "
                   "SELECT 'cafe01', last_op, 'm', 'human/alice', 'at', '[]', '{}', '{}' FROM head"), "names actor human/alice"),
        (AS_AGENT + "UPDATE changesets SET message = 'evil'", "never changed or removed"),
        (AS_AGENT + "DELETE FROM changesets", "never changed or removed"),
    ],
    "ref_moves": [
        (in_own_op(f"INSERT INTO ref_moves(op, seq, name, old, new, actor, kind) SELECT last_op, 0, 'release/v1', NULL, NULL, '{AGENT}', 'ref_set' FROM head"),
         "may not move ref release/v1"),
        (in_own_op("INSERT INTO ref_moves(op, seq, name, old, new, actor, kind) SELECT last_op, 0, 'feature/q', NULL, NULL, 'human/alice', 'ref_set' FROM head"),
         "names actor human/alice"),
        (AS_AGENT + f"UPDATE ref_moves SET actor = '{AGENT}'", "never changed or removed"),
        (AS_AGENT + "DELETE FROM ref_moves", "never changed or removed"),
    ],
    "blobs": [
        (AS_AGENT + "INSERT INTO blobs VALUES ('b0', 1, 'x')", "added only with the op"),
        (AS_AGENT + "UPDATE blobs SET content = 'evil'", "never changed or removed"),
        (AS_AGENT + "DELETE FROM blobs", "never changed or removed"),
    ],
    "refs": [
        (AS_AGENT + "UPDATE refs SET target = (SELECT target FROM refs WHERE name = 'work') WHERE name = 'release/v1'",
         "changes only with the op"),
        (AS_AGENT + "DELETE FROM refs WHERE name = 'release/v1'", "changes only with the op"),
        (AS_AGENT + "UPDATE refs SET op = op WHERE name = 'work'", "changes only with the op"),  # not protected, but no op
        (in_own_op("UPDATE refs SET op = (SELECT last_op FROM head) WHERE name = 'release/v1'"), "may not move ref release/v1"),
        (in_own_op("INSERT INTO refs(name, target, op) SELECT 'release/v9', target, (SELECT last_op FROM head) FROM refs WHERE name = 'work'"),
         "may not move ref release/v9"),
        (in_own_op("DELETE FROM refs WHERE name = 'release/v1'"), "may not move ref release/v1"),
    ],
    "time_breaks": [
        (AS_AGENT + "INSERT INTO time_breaks VALUES (2)", "added only with the op"),
        (in_own_op("INSERT INTO time_breaks VALUES (2)"), "added only with the op"),
    ],
    "op_reverts": [
        (in_own_op("INSERT INTO op_reverts SELECT last_op, 2 FROM head"), "may not undo op 2"),
        (AS_AGENT + "INSERT INTO op_reverts VALUES (3, 2)", "added only with the op"),
    ],
    "tokens": [
        # A token for a person, made by an op of the agent's own: it would let the agent act as
        # human/x over `swarmctl mcp --http`. (An op of kind token_create is refused at `ops`;
        # here the op is of a kind the agent may add, and the token row is what is refused.)
        ("BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; INSERT INTO ops(op, kind, actor, at, description) "
         f"SELECT last_op, 'ref_set', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x' FROM head; "
         "INSERT INTO tokens(id, digest, actor, created_by, created_at, expires_at, read_only) "
         f"SELECT last_op, 'deadbeef', 'human/x', '{AGENT}', 'at', '2099-01-01T00:00:00.000Z', false FROM head; COMMIT",
         "only an admin makes or revokes tokens"),
        (AS_AGENT + "INSERT INTO tokens(id, digest, actor, created_by, created_at, expires_at, read_only) "
         f"VALUES (2, 'beef', 'human/x', '{AGENT}', 'at', '2099-01-01T00:00:00.000Z', false)", "only an admin"),
        (AS_AGENT + "UPDATE tokens SET actor = 'human/alice'", "only an admin"),
        (AS_AGENT + "UPDATE tokens SET expires_at = '2999-01-01T00:00:00.000Z'", "only an admin"),
        (in_own_op("UPDATE tokens SET revoked_at = 'now', revoked_op = (SELECT last_op FROM head)"), "only an admin"),
        (AS_AGENT + "DELETE FROM tokens", "only an admin"),
    ],
    "policies": [
        (AS_AGENT + "DELETE FROM policies", "only an admin changes the policy"),
        (AS_AGENT + "UPDATE policies SET text = NULL", "only an admin changes the policy"),
        (in_own_op("INSERT INTO policies SELECT last_op, NULL FROM head"), "only an admin changes the policy"),
    ],
    "txs": [
        (AS_AGENT + "UPDATE txs SET state = 'RolledBack' WHERE actor = 'human/alice'", "human/alice's"),
        (AS_AGENT + f"UPDATE txs SET actor = '{AGENT}' WHERE actor = 'human/alice'", "human/alice's"),
        (AS_AGENT + "INSERT INTO txs(actor, state, base_op, revision, max_revisions, begun_at) "
         "VALUES ('human/bob', 'Active', 1, 0, 10, 'at')", "human/bob's"),
        (AS_AGENT + "DELETE FROM txs", "never removed"),
        ("SET swarm.actor = 'human/alice'; UPDATE txs SET state = 'RolledBack' WHERE actor = 'human/alice'",
         "may not act as human/alice"),
    ],
    "tx_revisions": [
        (AS_AGENT + "DELETE FROM tx_revisions", "a transaction of human/alice"),
        (AS_AGENT + "UPDATE tx_revisions SET new = NULL", "a transaction of human/alice"),
        (AS_AGENT + "INSERT INTO tx_revisions SELECT tx, revision + 1, name, new, at FROM tx_revisions", "a transaction of human/alice"),
    ],
    "tx_baselines": [
        (AS_AGENT + "DELETE FROM tx_baselines", "a transaction of human/alice"),
        (AS_AGENT + "UPDATE tx_baselines SET old = NULL", "a transaction of human/alice"),
    ],
    "workflows": [
        (AS_AGENT + "UPDATE workflows SET state = 'cancelled'", "may not change workflow"),
        (AS_AGENT + "UPDATE workflows SET source = '/tmp/evil.toml'", "source of workflow"),
        (AS_AGENT + "DELETE FROM workflows", "never removed"),
        (AS_AGENT + "INSERT INTO workflows(id, name, state, source, base_dir, created_by, created_at, updated_at, owner_actor, rev) "
         "VALUES ('wf-spoof', 'x', 'pending', '/tmp/x.toml', '/tmp', 'human/alice', 'at', 'at', 'human/alice', 0)",
         "a workflow started by human/alice"),
        ("SET swarm.actor = 'agent/worker-42'; INSERT INTO workflows(id, name, state, source, base_dir, created_by, created_at, "
         "updated_at, owner_actor, rev) VALUES ('wf-evil', 'x', 'pending', '/tmp/evil.toml', '/tmp', 'agent/worker-42', 'at', 'at', "
         "'agent/worker-42', 0)", "agent/worker-42 may not run workflows"),
    ],
    "workflow_steps": [
        (AS_AGENT + f"UPDATE workflow_steps SET approved_by = '{AGENT}', status = 'success' WHERE kind = 'approval'",
         f"{AGENT} may not approve"),
        (AS_AGENT + "UPDATE workflow_steps SET spec = '{}'", "spec of workflow"),
        (AS_AGENT + "INSERT INTO workflow_steps(workflow, idx, name, kind, spec, status) "
         "SELECT workflow, 99, 'evil', 'run', '{}', 'pending' FROM workflow_steps LIMIT 1", "steps are added only"),
        (AS_AGENT + "DELETE FROM workflow_steps", "never removed"),
    ],
}


def tables(cluster) -> list[str]:
    found = cluster.psql(
        f"SELECT tablename FROM pg_tables WHERE schemaname = '{SCHEMA}' ORDER BY tablename", database=DATABASE
    )
    return sorted(name for (name,) in ast.literal_eval(found))


def contents(cluster) -> dict[str, str]:
    """Every row of every table of the store, and its triggers (as the cluster's superuser)."""
    found = {
        t: cluster.psql(f"SELECT md5(COALESCE(string_agg(r::text, '|' ORDER BY r::text), '')) FROM {SCHEMA}.{t} r", database=DATABASE)
        for t in tables(cluster)
    }
    found["triggers"] = cluster.psql(
        f"SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE tgname LIKE 'swarm%' ORDER BY 1, 2", database=DATABASE
    )
    return found


@pytest.fixture(scope="module")
def prepared(store, cluster):
    """Rows of every kind to attack: a token, an open transaction with a staged revision and a
    workflow waiting at its gate, each of human/alice (made through the store's owner)."""
    owner = ("--repo", cluster.url(), "--as", "human/alice")
    store.ok(*owner, "token", "create", AGENT)
    store.ok(*owner, "tx", "begin")
    store.ok(*owner, "tx", "set", "feature/staged", "work")
    (store.tmp / "flows" / "alice.toml").write_text(FLOW.format(ref="feature/alice"))
    made = store(*owner, "workflow", "run", "alice.toml", cwd=store.tmp / "flows")
    assert made.result["workflow"]["state"] == "awaiting_approval", made.stdout
    return store


def test_every_table_refuses_what_an_agent_role_may_not_write_through_psql(prepared, cluster):
    assert sorted(ATTACKS) == tables(cluster), "a table of the store's schema has no case here"
    for table in tables(cluster):
        found = cluster.psql(f"SELECT count(*) FROM {SCHEMA}.{table}", database=DATABASE)
        assert found != "[(0,)]" or table in ("time_breaks", "op_reverts"), f"{table} is empty: its attacks change nothing"
    before = contents(cluster)
    attempts = [case for cases in ATTACKS.values() for case in cases]
    attempts += [(AS_AGENT + f"TRUNCATE {t} CASCADE", f"may not truncate {t}") for t in tables(cluster)]
    wrong = []
    for sql, says in attempts:
        ran = cluster.psql_as("swarm_agent", sql)
        if ran.returncode == 0 or "forbidden by the store's policy" not in ran.stderr or says not in ran.stderr:
            wrong.append((sql, says, ran.returncode, ran.stderr.splitlines()[:1]))
    assert wrong == [], "\n".join(map(repr, wrong))
    assert contents(cluster) == before


def test_an_agent_role_can_neither_change_the_schema_nor_switch_the_guard_off(prepared, cluster):
    before = contents(cluster)
    attempts = [
        "CREATE TABLE evil(x int)",
        "CREATE FUNCTION evil() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "DROP TRIGGER swarm_guard ON refs",
        "ALTER TABLE refs DISABLE TRIGGER swarm_guard",
        "ALTER TABLE refs DISABLE TRIGGER ALL",
        "CREATE OR REPLACE FUNCTION swarm_mapped() RETURNS text[] LANGUAGE sql AS 'SELECT NULL::text[]'",
        "SET session_replication_role = replica",
        "DROP TABLE tokens CASCADE",
        "ALTER TABLE tokens OWNER TO swarm_agent",
    ]
    for sql in attempts:
        ran = cluster.psql_as("swarm_agent", sql)
        assert ran.returncode != 0, sql
        assert "must be owner" in ran.stderr or "permission denied" in ran.stderr, (sql, ran.stderr)
    # A temporary table named as a catalog the guard reads does not fool it.
    shadow = (
        "CREATE TEMP TABLE pg_roles AS SELECT rolname, oid, true AS rolsuper FROM pg_catalog.pg_roles; "
        f"{AS_AGENT}UPDATE refs SET op = op WHERE name = 'release/v1'"
    )
    ran = cluster.psql_as("swarm_agent", shadow)
    assert ran.returncode != 0 and "forbidden by the store's policy" in ran.stderr, ran.stderr
    assert contents(cluster) == before


def test_a_role_outside_the_map_reads_but_may_not_write(prepared, cluster):
    cluster.psql("CREATE ROLE swarm_stray LOGIN PASSWORD 'stray-pass-4'", database=DATABASE)
    PASSWORD["swarm_stray"] = "stray-pass-4"
    cluster.psql(
        f"GRANT USAGE ON SCHEMA {SCHEMA} TO swarm_stray; "
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {SCHEMA} TO swarm_stray",
        database=DATABASE,
    )
    read = run(prepared, cluster, "swarm_stray", AGENT, "ref", "list")
    assert read.exit == 0 and read.envelope["meta"]["auth"] == "none", read.stdout
    wrote = run(prepared, cluster, "swarm_stray", AGENT, "ref", "set", "feature/stray", "work")
    assert wrote.exit == 6 and wrote.error["details"]["rule"] == "roles", wrote.stdout
    assert wrote.error["details"]["role"] == "swarm_stray", wrote.error
    before = contents(cluster)
    ran = cluster.psql_as("swarm_stray", AS_AGENT + "UPDATE refs SET op = op WHERE name = 'work'")
    assert ran.returncode != 0 and f"role swarm_stray may not act as {AGENT}" in ran.stderr, ran.stderr
    assert contents(cluster) == before


def test_meta_auth_says_database_on_reads_too(prepared, cluster):
    read = run(prepared, cluster, "swarm_agent", AGENT, "ref", "list")
    assert read.exit == 0 and read.envelope["meta"]["auth"] == "database", read.stdout
    spoofed = run(prepared, cluster, "swarm_agent", "human/alice", "ref", "list")
    assert spoofed.exit == 0 and spoofed.envelope["meta"]["auth"] == "none", spoofed.stdout
    human = run(prepared, cluster, "swarm_human", "human/bob", "op", "log", "--limit", "1")
    assert human.exit == 0 and human.envelope["meta"]["auth"] == "database", human.stdout
    owner = prepared("--repo", cluster.url(), "--as", "human/alice", "ref", "list")
    assert owner.exit == 0 and owner.envelope["meta"]["auth"] == "trust", owner.stdout


def test_everything_an_agent_may_do_through_swarmctl_passes_the_guard(prepared, cluster):
    """The guard refuses nothing swarmctl does for an actor the policy lets do it."""
    sw, url = prepared, cluster.url("swarm_agent")
    agent = ("--repo", url, "--as", AGENT)
    human = ("--repo", cluster.url("swarm_human"), "--as", "human/bob")
    made = sw.ok(*agent, "changeset", "create", "-m", "a", "--ref", "feature/a", "--file", "NOTES.md", cwd=sw.tmp)
    moved = sw.ok(*agent, "ref", "set", "feature/b", "feature/a")
    assert sw.ok(*agent, "op", "undo", str(moved["op"]))["undone"] == moved["op"]
    sw.ok(*agent, "tx", "begin")
    sw.ok(*agent, "tx", "set", "feature/c", made["changeset"]["id"])
    assert sw.ok(*agent, "tx", "commit")["op"] > 0
    reverted = sw.ok(*agent, "op", "revert", "--ref", "feature/c")  # op_reverts, by its own op
    assert sw.ok(*agent, "op", "undo", str(reverted["op"]))["undone"] == reverted["op"]
    (sw.tmp / "flows" / "agent.toml").write_text(FLOW.format(ref="feature/flow"))
    ran = sw(*agent, "workflow", "run", "agent.toml", cwd=sw.tmp / "flows")
    assert ran.result["workflow"]["state"] == "awaiting_approval", ran.stdout
    wf = ran.result["workflow"]["id"]
    refused = sw(*agent, "workflow", "approve", wf)
    assert refused.error["details"]["rule"] == "approve.actors", refused.stdout
    assert sw.ok(*human, "workflow", "approve", wf)["approved_by"] == "human/bob"
    assert sw.ok(*agent, "workflow", "resume", wf)["workflow"]["state"] == "completed"
    rolled = sw(*agent, "workflow", "rollback", wf, "--include-completed", "--confirm")
    assert rolled.exit == 0, rolled.stdout
    token = sw.ok(*human, "token", "create", AGENT)
    assert sw.ok(*human, "op", "undo", str(token["id"]))["undone"] == token["id"]
    assert sw.ok("--repo", cluster.url(), "store", "check")["problems"] == []


def test_the_roles_rule_refuses_and_allows_alike_at_every_door(prepared, cluster):
    """CLI, `swarmctl call` and MCP (stdio) on the agent role: the same refusal of a spoofed
    actor, and each door's own write as the agent verified by the database."""
    from mcp_client import McpClient

    url = cluster.url("swarm_agent")

    def doors(actor: str, name: str) -> list[dict]:
        arguments = {"name": name, "target": "work"}
        cli = prepared("--repo", url, "--as", actor, "ref", "set", f"{name}-cli", "work").envelope
        call = prepared("--repo", url, "--as", actor, "call", "ref_set", json.dumps({**arguments, "name": f"{name}-call"})).envelope
        with McpClient(url, actor, cwd=prepared.tmp) as client:
            mcp = client.envelope("ref_set", {**arguments, "name": f"{name}-mcp"})
        return [cli, call, mcp]

    refused = doors("human/alice", "feature/spoof")
    for envelope in refused:
        envelope["meta"].pop("elapsed_ms")
        assert envelope["error"]["code"] == "E_FORBIDDEN" and envelope["error"]["details"]["rule"] == "roles", envelope
        assert envelope["meta"]["auth"] == "none"
    assert refused[0] == refused[1] == refused[2]
    for envelope in doors(AGENT, "feature/door"):
        assert envelope["ok"] and envelope["meta"]["auth"] == "database", envelope


def test_a_role_that_could_switch_the_guard_off_is_refused_in_the_map(prepared, cluster):
    cluster.psql("CREATE ROLE swarm_builder NOLOGIN", database=DATABASE)
    cluster.psql(f"GRANT CREATE ON SCHEMA {SCHEMA} TO swarm_builder", database=DATABASE)
    (prepared.tmp / "builder.toml").write_text(prepared.policy + 'swarm_builder = ["agent/*"]\n')
    owner = ("--repo", cluster.url(), "--as", "human/alice")
    before = prepared.ok(*owner, "policy", "show")
    ran = prepared(*owner, "policy", "set", "builder.toml", cwd=prepared.tmp)
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout
    assert ran.error["details"] == {"key": "roles.swarm_builder", "role": "swarm_builder"}
    assert prepared.ok(*owner, "policy", "show") == before


def test_without_an_undo_rule_an_agent_role_still_cannot_revoke_an_admins_token_by_undoing_it(prepared, cluster):
    """Without `[undo] others` (as the README's [roles] example has it) any actor may undo
    another's op, but swarmctl lets only an admin revoke a token, an undo of its create too. The
    guard let a mapped agent role revoke an admin's token so, through psql, and `store check`
    found nothing: it now holds the revocation to an admin's op, as swarmctl does."""
    admin = ("--repo", cluster.url(), "--as", ALICE)
    (prepared.tmp / "open.toml").write_text(prepared.policy.replace('[undo]\nothers = ["human/*"]\n', ""))
    prepared.ok(*admin, "policy", "set", "open.toml", cwd=prepared.tmp)
    try:
        token = f"(SELECT min(id) FROM tokens WHERE revoked_at IS NULL AND created_by = '{ALICE}')"
        ran = cluster.psql_as("swarm_agent", "BEGIN; " + AS_AGENT + "UPDATE head SET last_op = last_op + 1; "
                              "INSERT INTO ops(op, kind, actor, at, description, undoes) "
                              f"SELECT last_op, 'undo', '{AGENT}', '2026-12-01T00:00:00.000Z', 'x', {token} FROM head; "
                              f"UPDATE tokens SET revoked_at = 'now', revoked_op = (SELECT last_op FROM head) WHERE id = {token}; COMMIT")
        assert ran.returncode != 0 and "only an admin makes or revokes tokens" in ran.stderr, ran.stdout + ran.stderr
    finally:
        (prepared.tmp / "back.toml").write_text(prepared.policy)
        prepared.ok(*admin, "policy", "set", "back.toml", cwd=prepared.tmp)
