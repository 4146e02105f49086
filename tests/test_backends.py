"""What PostgreSQL does differently from SQLite, pinned so that every command prints the same
bytes on both kinds of store; and what only a store on a server can meet: a server that is
down or refuses us, a password that must never be shown, a COMMIT whose outcome was lost."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from core_helpers import ALICE, as_, connect, op_count, problems
from pgcluster import remove_cluster, start_cluster
from swarm import Swarm

BOTH = pytest.mark.backends("sqlite", "postgres")
POSTGRES = pytest.mark.backends("postgres")


@BOTH
def test_ref_list_orders_by_code_point_and_a_prefix_is_literal(sw):
    """`COLLATE "C"`: upper case before lower, `-` before `_`, é after z; a prefix with `_` or
    `%` matches those characters only, never as LIKE wildcards."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    cid = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "one")["changeset"]["id"]
    names = ["beta_1", "betaX1", "beta%2", "beta-x", "Zeta", "alpha", "zé", "zz", "beta%%", "b"]
    for name in names:
        sw.ok(*as_(sw, ALICE), "ref", "set", name, cid, "--create")
    listed = [r["name"] for r in sw.ok("--repo", str(sw.store), "ref", "list")["refs"]]
    assert listed == sorted(names)  # Python compares code points, as SQLite's BINARY does
    by_prefix = lambda p: [r["name"] for r in sw.ok("--repo", str(sw.store), "ref", "list", "--prefix", p)["refs"]]
    assert by_prefix("beta_") == ["beta_1"]
    assert by_prefix("beta%") == ["beta%%", "beta%2"]
    assert by_prefix("z") == ["zz", "zé"]
    assert by_prefix("Z") == ["Zeta"] and by_prefix("B") == []  # case counts, on SQLite too
    assert by_prefix("beta\\") == [] and by_prefix("beta*") == [] and by_prefix("beta[") == []


@BOTH
def test_actor_and_workflow_prefixes_are_literal_too(sw):
    """Completion's prefixes (actors, workflow ids) match as `ref list --prefix` does."""
    from swarmctl.store import Store, queries
    from swarmctl.store import workflows as rows

    sw.ok("--as", ALICE, "init", str(sw.store))
    for actor in ("agent/a.1", "agent/aX1", "agent/A1"):
        sw.ok(*as_(sw, actor), "changeset", "create", "-m", actor)
    store = Store.open(sw.store, readonly=True)
    try:
        with store.read() as conn:
            assert queries.actors_with_prefix(conn, "agent/a_", 10) == []
            assert queries.actors_with_prefix(conn, "agent/a%", 10) == []
            assert [a for a, _ in queries.actors_with_prefix(conn, "agent/a", 10)] == ["agent/a.1", "agent/aX1"]
            assert [a for a, _ in queries.actors_with_prefix(conn, "agent/", 10)] == ["agent/A1", "agent/a.1", "agent/aX1"]
            assert rows.ids_with_prefix(conn, "wf-", 5) == [] and rows.list_ids(conn, "wf_", 5) == []
    finally:
        store.close()


@BOTH
def test_a_nul_character_in_a_workflow_file_is_invalid_on_every_store(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    flow = sw.tmp / "flow.toml"
    for text in (
        'name = "a\\u0000b"\n[[step]]\nname = "s"\nrun = ["true"]\n',
        'name = "n"\ndescription = "d\\u0000"\n[[step]]\nname = "s"\nrun = ["true"]\n',
        'name = "n"\n[[step]]\nname = "gate"\napproval = "ok\\u0000"\n',
        'name = "n"\n[[step]]\nname = "s"\nrun = ["true", "\\u0000"]\n',
        'name = "n"\n[[step]]\nname = "s"\nrun = ["true"]\nenv = { K = "v\\u0000" }\n',
    ):
        flow.write_text(text)
        ran = sw(*as_(sw, ALICE), "workflow", "run", str(flow))
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
        assert "NUL" in ran.error["message"], ran.error["message"]
    assert sw.ok("--repo", str(sw.store), "workflow", "list")["workflows"] == []


@BOTH
def test_a_nul_character_in_text_is_invalid_on_every_store(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    before = op_count(sw.store)
    for tool, arguments in [
        ("changeset_create", {"message": "a\u0000b"}),
        ("changeset_create", {"message": "m", "metadata": {"k": "v\u0000"}}),
        ("ref_list", {"prefix": "main\u0000"}),
    ]:
        ran = sw(*as_(sw, ALICE), "call", tool, json.dumps(arguments))
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
        assert "NUL" in ran.error["message"]
    # A file's content is bytes: a NUL there is kept.
    made = sw(*as_(sw, ALICE), "call", "changeset_create", json.dumps({"message": "m", "files": {"f.bin": "a\u0000b"}}))
    assert made.exit == 0, made.stdout
    assert op_count(sw.store) == before + 1
    assert problems(sw.store) == []


@POSTGRES
def test_meta_repo_is_the_url_without_its_password_and_no_output_shows_it(sw, pg_cluster):
    secret = "pw-Never-Shown-7f3a"
    with_password = sw.url.replace(f"{pg_cluster.role}@", f"{pg_cluster.role}:{secret}@")
    env = {"PGPASSWORD": secret}
    runs = [
        sw.process("--as", ALICE, "init", with_password, env=env),
        sw.process("--repo", with_password, "--as", ALICE, "changeset", "create", "-m", "x", "--ref", "main", env=env),
        sw.process("--repo", with_password, "op", "log", env=env),
        sw.process("--repo", with_password, "-o", "table", "op", "log", env=env),
        sw.process("--repo", with_password, "--as", ALICE, "op", "undo", "99", env=env),  # E_NOT_FOUND
        sw.process("--repo", with_password.replace("/swarm?", "/no_such_db?"), "op", "log", env=env),  # E_NOT_A_REPO
        sw.process("--repo", with_password.replace(f"host={pg_cluster.socket}", "host=/nonexistent"), "op", "log", env=env),
        sw.process("--repo", with_password.replace(f"{pg_cluster.role}:", "nobody:"), "op", "log", env=env),  # E_FORBIDDEN
        # A scheme in capitals is a URL too (it was taken for a path, and the message showed the
        # password); a password parameter named in capitals is hidden as one in lower case.
        sw.process("--repo", with_password.replace("postgresql://", "POSTGRESQL://"), "op", "log", env=env),
        sw.process("--repo", sw.url + f"&PASSWORD={secret}", "op", "log", env=env),  # libpq knows no PASSWORD
    ]
    assert [r.exit for r in runs] == [0, 0, 0, 0, 4, 5, 11, 6, 0, 2], [r.stdout for r in runs]
    for ran in runs:
        assert secret not in ran.stdout + ran.stderr, ran.transcript()
    assert runs[2].envelope["meta"]["repo"] == sw.url  # the URL as given, less the password


@POSTGRES
def test_a_role_without_usage_on_the_schema_is_forbidden_not_told_to_init(sw, pg_cluster):
    """PostgreSQL's search_path passes by a schema the role may not use, so the store's tables
    read as missing: E_NOT_A_REPO, with a hint to `swarmctl init` a store that is there (which
    then failed as E_FORBIDDEN). It is E_FORBIDDEN, naming the schema."""
    sw.ok("--as", ALICE, "init", sw.url)
    role = f"no_usage_{os.getpid()}"
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN")
    schema = sw.url.rsplit("schema=", 1)[1]
    ran = sw("--repo", sw.url.replace(f"{pg_cluster.role}@", f"{role}@"), "op", "log")
    assert (ran.exit, ran.error["code"]) == (6, "E_FORBIDDEN"), ran.stdout
    assert ran.error["message"] == f"the role {role} may not use the schema {schema} (no USAGE on it), where the store is"
    missing = sw("--repo", sw.url.replace(f"{pg_cluster.role}@", f"{role}@") + "x", "op", "log")
    assert missing.error["code"] == "E_NOT_A_REPO"  # no such schema: no store, as before


@POSTGRES
def test_store_check_without_a_grant_is_forbidden_not_corrupt(sw, pg_cluster):
    """A role that may not read one table: `store check` listed the refusal (and the aborted
    transaction after it) as three problems of the store, E_STORE_CORRUPT (exit 9), a false
    alarm of damage in CI, naming a check `<lambda>`. A server's refusal is E_FORBIDDEN."""
    sw.ok("--as", ALICE, "init", sw.url)
    role, schema = f"no_steps_{os.getpid()}", sw.url.rsplit("schema=", 1)[1]
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {schema} TO {role}; "
                    f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}; REVOKE SELECT ON {schema}.workflow_steps FROM {role}",
                    database="swarm")
    ran = sw("--repo", sw.url.replace(f"{pg_cluster.role}@", f"{role}@"), "store", "check")
    assert (ran.exit, ran.error["code"]) == (6, "E_FORBIDDEN"), ran.stdout
    assert "workflow_steps" in ran.error["message"]


@POSTGRES
def test_errors_of_a_server_store(sw, pg_cluster):
    missing_db = sw("--repo", sw.url.replace("/swarm?", "/no_such_db?"), "op", "log")
    assert (missing_db.exit, missing_db.error["code"]) == (5, "E_NOT_A_REPO")
    assert "createdb no_such_db" in missing_db.error["hint"] and "`swarmctl --as ACTOR init " in missing_db.error["hint"]
    no_schema = sw("--repo", sw.url, "op", "log")
    assert (no_schema.exit, no_schema.error["code"]) == (5, "E_NOT_A_REPO")
    # The hint's command runs as written: the URL quoted, or a shell would take its `&` as the
    # end of a command run in the background (`swarmctl init URL` of the default schema).
    assert f"`swarmctl --as ACTOR init {shlex.quote(sw.url)}`" in no_schema.error["hint"] and "&" in sw.url, no_schema.error["hint"]
    unreachable = sw("--repo", sw.url.replace(f"host={pg_cluster.socket}", "host=/nonexistent"), "op", "log")
    assert (unreachable.exit, unreachable.error["code"]) == (11, "E_UNAVAILABLE")
    refused = sw("--repo", sw.url.replace(f"{pg_cluster.role}@", "nobody@"), "op", "log")
    assert (refused.exit, refused.error["code"]) == (6, "E_FORBIDDEN")
    sw.ok("--as", ALICE, "init", sw.url)
    again = sw("--as", ALICE, "init", sw.url)
    assert (again.exit, again.error["code"]) == (7, "E_STATE")
    bad_schema = sw("--repo", sw.url + "X;drop", "op", "log")
    assert (bad_schema.exit, bad_schema.error["code"]) == (2, "E_INVALID_ARG")


@POSTGRES
@pytest.mark.parametrize("option", [
    "sslmode=bogus", "port=abc", "connect_timeout=abc", "target_session_attrs=x", "no_such_option=1", "%zz=1",
])
def test_a_url_libpq_cannot_use_is_invalid_not_unreachable(sw, pg_cluster, option):
    """A URL whose options libpq refuses before it tries any server is the caller's mistake,
    E_INVALID_ARG (exit 2): it was E_UNAVAILABLE (exit 11), which tells a script to retry."""
    url = f"{sw.url}&{option}"
    for ran in (sw("--repo", url, "op", "log"), sw("--as", ALICE, "init", url)):
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.envelope
        assert ran.error["message"].startswith("the store's URL cannot be used: "), ran.error
    assert pg_cluster.psql(f"SELECT count(*) FROM pg_namespace WHERE nspname = '{sw.url.rpartition('schema=')[2]}'") == "[(0,)]"


@pytest.mark.parametrize("where", ["localhost:notaport", "db.invalid:99999999", "127.0.0.1:abc", "h1:5432,h2:x"])
def test_a_port_that_is_not_a_port_is_invalid_before_any_host_is_looked_up(sw, where):
    """With a host name, libpq looked the host up first: E_UNAVAILABLE, "failed to resolve host"."""
    ran = sw("--repo", f"postgresql://u:pw@{where}/swarm?schema=x", "op", "log")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.envelope
    assert ran.error["message"].startswith("the store's URL cannot be used: ") and "pw" not in ran.stdout


@POSTGRES
def test_a_store_url_is_read_as_libpq_reads_it_and_nothing_in_it_is_guessed(sw, pg_cluster):
    """A schema PostgreSQL keeps for itself (`pg_catalog` was E_INTERNAL, "a bug"; a superuser's
    `information_schema` took a store's tables), a schema named twice (the last one won, silently),
    and a URL that cannot be read (E_INTERNAL) are E_INVALID_ARG. A space in a parameter reaches
    libpq as %20, which it decodes, not as `+`, which it does not (`options=-c%20...` failed)."""
    base = pg_cluster.libpq()
    for url, word in ((f"{base}&schema=pg_catalog", "keeps for its own"), (f"{base}&schema=information_schema", "keeps for its own"),
                      (f"{base}&schema=a1&schema=b1", "2 times"), ("postgresql://[::1/swarm", "cannot be read")):
        ran = sw("--as", ALICE, "init", url)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG") and word in ran.error["message"], ran.stdout
    url = f"{sw.url}&options=-c%20statement_timeout%3D4321&application_name=a%2Bb%20c+d"
    sw.ok("--as", ALICE, "init", url)
    import psycopg

    from swarmctl.store.postgres.url import parse

    with psycopg.connect(parse(url).libpq) as conn:
        settings = conn.execute("SELECT current_setting('statement_timeout'), current_setting('application_name')").fetchone()
    assert settings == ("4321ms", "a+b c+d")


@POSTGRES
def test_a_write_waits_for_the_head_row_then_gives_e_busy(sw):
    """Another client holding the head row (a writer stopped mid-transaction): past
    SWARMCTL_LOCK_TIMEOUT the write is E_BUSY, nothing written; reads go on."""
    sw.ok("--as", ALICE, "init", sw.url)
    holder = connect(sw.url)
    try:
        holder.native("BEGIN; SELECT last_op FROM head FOR UPDATE")
        ran = sw(*as_(sw, ALICE), "changeset", "create", "-m", "x", env={"SWARMCTL_LOCK_TIMEOUT": "0.2"})
        assert (ran.exit, ran.error["code"]) == (8, "E_BUSY"), ran.stdout
        assert sw.ok("--repo", sw.url, "op", "log")["ops"][0]["op"] == 1
    finally:
        holder.close()
    assert sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "x")["op"] == 2


@POSTGRES
def test_a_statement_the_servers_statement_timeout_cancels_is_e_busy_saying_so(sw):
    """A statement_timeout set for the role (here in the URL's options) that cuts off a write
    waiting for the head row: E_BUSY, nothing written, and the error names the server's cancel,
    not SWARMCTL_LOCK_TIMEOUT (which it said: "the store stayed locked past the timeout (60s)")."""
    sw.ok("--as", ALICE, "init", sw.url)
    holder = connect(sw.url)
    try:
        holder.native("BEGIN; SELECT last_op FROM head FOR UPDATE")
        url = f"{sw.url}&options=-c%20statement_timeout%3D200"
        ran = sw("--repo", url, "--as", ALICE, "changeset", "create", "-m", "x", env={"SWARMCTL_LOCK_TIMEOUT": "60"})
        assert (ran.exit, ran.error["code"]) == (8, "E_BUSY"), ran.stdout
        assert ran.error["details"]["sqlstate"] == "57014" and ran.error["details"]["reason"] == "canceled"
        assert ran.error["message"].startswith("the server canceled the statement: ")
        assert "statement_timeout" in ran.error["hint"] and "SWARMCTL_LOCK_TIMEOUT" not in ran.error["hint"]
    finally:
        holder.close()
    assert sw.ok("--repo", sw.url, "op", "log")["ops"][0]["op"] == 1


@POSTGRES
def test_a_lost_commit_is_looked_up_by_its_request_id(sw):
    """After a connection lost during COMMIT the write is looked up on a new connection by the
    request id stored with its op: found, the result stands; not found, it did not commit."""
    from swarmctl.envelope import SwarmError
    from swarmctl.store import Store

    sw.ok("--as", ALICE, "init", sw.url)
    store = Store.open(sw.url)
    try:
        with store.write(ALICE) as w:
            w.append_op("ref_set", "an op that committed")
        committed = store.request
        assert store._commit_outcome(w, OSError("lost")) is None  # found: no error
        store.request = "0" * 32  # a request no op carries
        with pytest.raises(SwarmError) as lost:
            store._commit_outcome(w, OSError("lost"))
        assert lost.value.code == "E_UNAVAILABLE" and lost.value.details["commit_unknown"] is False
    finally:
        store.close()
    conn = connect(sw.url)
    assert conn.execute("SELECT op FROM ops WHERE request = ?", (committed,)).fetchall() == [(2,)]
    conn.close()


@POSTGRES
def test_a_server_with_no_connection_free_is_e_unavailable_not_a_refusal(sw, pg_cluster):
    """Every connection a role may have is in use (its CONNECTION LIMIT, here 0): the server
    answers "too many connections for role". That is no refusal of who we are (which was
    E_FORBIDDEN, exit 6, and a hint to check the password): E_UNAVAILABLE, exit 11, safe to
    retry, `details.reason: "no_connection_free"`."""
    role = f"limited_{os.getpid()}"
    pg_cluster.psql(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        url = sw.url.replace(f"{pg_cluster.role}@", f"{role}@")
        full = [sw("--repo", url, "op", "log"), sw("--repo", url, "--as", ALICE, "changeset", "create", "-m", "m")]
    finally:
        pg_cluster.psql(f'DROP ROLE "{role}"')
    for ran in full:
        error = ran.error
        assert (ran.exit, error["code"], error["details"]["reason"]) == (11, "E_UNAVAILABLE", "no_connection_free"), ran.stdout
        assert "too many connections for role" in error["message"] and "CONNECTION LIMIT" in error["hint"]


@POSTGRES
def test_a_server_that_takes_no_writes_is_read_only_not_a_bad_password(sw, pg_cluster):
    """A role (or database, or standby) whose transactions are read-only: a write is E_FORBIDDEN
    with `details.reason: "read_only"`, as a local store on a read-only filesystem, and a hint
    that says so (it was the hint to check the user and password); reads work."""
    role = f"reader_{os.getpid()}"
    pg_cluster.psql(f'CREATE ROLE "{role}" LOGIN; GRANT CREATE ON DATABASE swarm TO "{role}"')
    url = sw.url.replace(f"{pg_cluster.role}@", f"{role}@")
    try:
        sw.ok("--as", ALICE, "init", url)
        pg_cluster.psql(f'ALTER ROLE "{role}" SET default_transaction_read_only = on')
        write = sw("--repo", url, "--as", ALICE, "changeset", "create", "-m", "m")
        log = sw.ok("--repo", url, "op", "log")
    finally:
        pg_cluster.psql(f'DROP OWNED BY "{role}" CASCADE; REVOKE ALL ON DATABASE swarm FROM "{role}"; DROP ROLE "{role}"', "swarm")
    assert (write.exit, write.error["code"], write.error["details"]["reason"]) == (6, "E_FORBIDDEN", "read_only"), write.stdout
    assert "standby" in write.error["hint"] and "password" not in write.error["hint"]
    assert [op["op"] for op in log["ops"]] == [1]


def test_what_a_server_that_cannot_take_a_connection_now_says_is_e_unavailable():
    """The FATAL messages of a server that answers but cannot take a connection now (libpq
    gives them with no SQLSTATE): E_UNAVAILABLE; a login refused stays E_FORBIDDEN. And a
    statement the server has no room for (SQLSTATE class 53: a full disk, no memory) is
    E_UNAVAILABLE too, never "a bug in swarmctl"."""
    import psycopg

    from swarmctl.store.postgres import errors
    from swarmctl.store.postgres.url import parse

    url = parse("postgresql://u@/swarm?host=/run/pg&schema=s")

    def said(fatal: str):
        failed = errors.connect_failure(psycopg.OperationalError(f'connection failed: connection to server on socket "/run/pg/.s.PGSQL.5432" failed: FATAL:  {fatal}'), url)
        return failed.code, failed.details.get("reason")

    assert said("sorry, too many clients already") == ("E_UNAVAILABLE", "no_connection_free")
    assert said("remaining connection slots are reserved for roles with the SUPERUSER attribute") == ("E_UNAVAILABLE", "no_connection_free")
    assert said('too many connections for database "swarm"') == ("E_UNAVAILABLE", "no_connection_free")
    for state in ("starting up", "shutting down", "in recovery mode", "not yet accepting connections"):
        assert said(f"the database system is {state}") == ("E_UNAVAILABLE", "not_ready")
    assert said('password authentication failed for user "u"') == ("E_FORBIDDEN", "server_refused")
    for no_room in (psycopg.errors.DiskFull("could not extend file: No space left on device"), psycopg.errors.OutOfMemory("out of memory")):
        typed = errors.translate(no_room, url)
        assert (typed.code, typed.details["sqlstate"]) == ("E_UNAVAILABLE", no_room.sqlstate) and "a bug" not in typed.message


def test_a_postgresql_store_without_its_driver_installed_says_so(tmp_path):
    """swarmctl installed without its postgres extra (psycopg absent: `sys.modules` holding None
    for it is how Python reads a module that is not there): a postgresql:// store is E_UNAVAILABLE
    naming the driver and how to install it, never "a bug in swarmctl"; a local store works."""
    absent = "import sys; sys.modules['psycopg'] = None; from swarmctl.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", absent, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    url = "postgresql://u@/swarm?host=/nowhere"
    for args in (["--repo", url, "op", "log"], ["--as", ALICE, "init", url]):
        ran = run(*args)
        error = json.loads(ran.stdout)["error"]
        assert (ran.returncode, error["code"], error["details"]) == (11, "E_UNAVAILABLE", {"driver": "psycopg", "installed": False}), ran.stdout
        assert "postgres]" in error["hint"] and "bug" not in error["message"]
    local = run("--as", ALICE, "init", str(tmp_path / "store"))
    assert local.returncode == 0, local.stdout + local.stderr


@POSTGRES
def test_the_server_stopped_mid_run_is_e_unavailable(tmp_path_factory, monkeypatch):
    """A cluster of its own, stopped between two commands: E_UNAVAILABLE, exit 11."""

    cluster = start_cluster()
    try:
        sw = Swarm(tmp_path_factory.mktemp("stopped"), monkeypatch, cluster.new_store_url())
        sw.ok("--as", ALICE, "init", sw.url)
        cluster.stop("immediate")
        ran = sw.process(*as_(sw, ALICE), "changeset", "create", "-m", "x")
        assert (ran.exit, ran.envelope["error"]["code"]) == (11, "E_UNAVAILABLE")
    finally:
        remove_cluster(cluster)


@POSTGRES
def test_the_store_password_reaches_a_step_command_only_where_its_env_names_it(sw, pg_cluster):
    secret = "pw-Not-For-Steps-91c2"
    with_password = sw.url.replace(f"{pg_cluster.role}@", f"{pg_cluster.role}:{secret}@")
    env = {"SWARMCTL_REPO": with_password, "PGPASSWORD": secret, "SWARMCTL_AS": ALICE}
    sw.ok("init", with_password, env=env)
    (sw.tmp / "flow.toml").write_text(
        'name = "envs"\n'
        '[[step]]\nname = "plain"\nrun = ["sh", "-c", "env > plain.env"]\n'
        '[[step]]\nname = "asks"\nrun = ["sh", "-c", "env > asks.env"]\n'
        'env = { PGPASSWORD = "${env:PGPASSWORD}" }\n'
    )
    ran = sw("workflow", "run", "flow.toml", env=env)
    assert ran.exit == 0, ran.stdout
    plain = (sw.tmp / "plain.env").read_text()
    assert secret not in plain
    assert f"SWARMCTL_REPO={sw.url}\n" in plain  # the store, without its password
    assert f"PGPASSWORD={secret}\n" in (sw.tmp / "asks.env").read_text()
    assert secret not in ran.stdout + ran.stderr


@POSTGRES
def test_a_head_row_that_disagrees_with_the_newest_op_is_a_damaged_store_not_a_bug(sw):
    """The head row set back by psql: the next write took an op number already used, and said
    E_INTERNAL, "a bug in swarmctl" (UniqueViolation). `store check` calls it `head_row`."""
    sw.ok("--as", ALICE, "init", sw.store)
    sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "m", "--ref", "main")
    conn = connect(sw.store)
    try:
        conn.execute("UPDATE head SET last_op = last_op - 1")
    finally:
        conn.close()
    ran = sw(*as_(sw, ALICE), "ref", "set", "q", "main")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    assert "the head row names op 1, but the newest op is 2" in ran.error["message"]
    assert op_count(sw.store) == 2


@POSTGRES
def test_init_where_the_schema_holds_a_table_of_a_stores_name_is_e_state_and_makes_nothing(sw, pg_cluster):
    """A schema holding a `refs` table of its own: init was E_INTERNAL (DuplicateTable)."""
    schema = sw.url.rsplit("schema=", 1)[1]
    pg_cluster.psql(f'CREATE SCHEMA "{schema}"; CREATE TABLE "{schema}".refs(name text, foo int)', "swarm")
    ran = sw("--as", ALICE, "init", sw.store)
    assert (ran.exit, ran.error["code"]) == (7, "E_STATE"), ran.stdout
    assert "refs" in ran.error["message"] and "Nothing was made" in ran.error["hint"]
    tables = pg_cluster.psql(f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'", "swarm")
    assert tables == "[('refs',)]", tables
