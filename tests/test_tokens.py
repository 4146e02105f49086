"""`token create/list/revoke`: bearer tokens that name actors, for `swarmctl mcp --http`.

Each create and revoke is an op; `op undo` of a create revokes the token; a revocation is
final. The store keeps a token's SHA-256, never its value. Token tools are CLI-only."""

import hashlib
import re

import pytest

from core_helpers import ALICE, as_, connect, op_count, problems, tamper
from swarm import Swarm
from swarmctl import registry
from swarmctl.store import tokens

pytestmark = pytest.mark.backends("sqlite", "postgres")

TOKEN = re.compile(r"^swt_[A-Za-z0-9_-]{43}$")


def _init(sw: Swarm) -> None:
    sw.ok("--as", ALICE, "init", str(sw.store))


def _create(sw: Swarm, *args: str) -> dict:
    return sw.ok(*as_(sw, ALICE), "token", "create", *args)


def _stored(sw: Swarm) -> list[tuple]:
    with connect(sw.store) as conn:
        return [tuple(r) for r in conn.execute("SELECT id, digest, actor, created_by, read_only, revoked_at FROM tokens ORDER BY id")]


def test_create_prints_the_token_once_and_keeps_only_its_digest(sw):
    _init(sw)
    made = _create(sw, "agent/w1", "--expires", "30d")
    assert TOKEN.match(made["token"])
    assert made["id"] == made["op"] == 2 and made["actor"] == "agent/w1" and made["read_only"] is False
    digest = hashlib.sha256(made["token"].encode()).hexdigest()
    rows = _stored(sw)
    assert [(r[0], r[1], r[2], r[3], bool(r[4]), r[5]) for r in rows] == [(2, digest, "agent/w1", ALICE, False, None)]
    listed = sw.ok("--repo", str(sw.store), "token", "list")["tokens"]
    assert [set(t) for t in listed] == [{"id", "actor", "created_by", "created_at", "expires_at", "revoked_at", "read_only"}]
    assert listed[0]["created_by"] == ALICE and listed[0]["revoked_at"] is None
    # 30 days after the op that made it, to the millisecond
    op = sw.ok("--repo", str(sw.store), "op", "show", "2")
    assert op["kind"] == "token_create" and op["actor"] == ALICE and listed[0]["created_at"] == op["at"]
    from datetime import datetime, timedelta

    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))
    assert parse(listed[0]["expires_at"]) - parse(op["at"]) == timedelta(days=30)
    # the value appears nowhere but in the create's own output
    outputs = [
        sw("--repo", str(sw.store), "token", "list").stdout,
        sw("--repo", str(sw.store), "op", "log").stdout,
        sw("--repo", str(sw.store), "op", "show", "2").stdout,
        sw("--repo", str(sw.store), "token", "list", "-o", "table").stdout,
    ]
    assert all(made["token"] not in out for out in outputs)
    if sw.backend == "sqlite":
        for path in sw.store.iterdir():
            data = path.read_bytes()
            assert made["token"].encode() not in data, path
            assert made["token"][4:].encode() not in data, path
    assert problems(sw.store) == []


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_is_refused_before_a_token_is_made_whose_value_it_would_lose(sw, where):
    """`token create -q` made a token and printed nothing: its value, shown once, was lost,
    and a token nobody holds stayed valid for 90 days. Both parsers (the fast one, Typer's)
    refuse -q, before or after the command, and nothing is written."""
    _init(sw)
    args = ["-q", "token", "create", "agent/w1"] if where == "before" else ["token", "create", "agent/w1", "-q"]
    ran = sw.process(*as_(sw, ALICE), *args)
    assert (ran.exit, ran.stdout) == (2, ""), ran.stdout
    assert ran.stderr.startswith("E_INVALID_ARG: -q/--quiet does not go with `swarmctl token create`"), ran.stderr
    assert op_count(sw.store) == 1 and _stored(sw) == []


def test_default_expiry_is_90_days_and_read_only_is_kept(sw):
    _init(sw)
    made = _create(sw, "agent/reader", "--read-only")
    assert made["read_only"] is True
    listed = sw.ok("--repo", str(sw.store), "token", "list")["tokens"]
    from datetime import datetime, timedelta

    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))
    assert parse(listed[0]["expires_at"]) - parse(listed[0]["created_at"]) == timedelta(days=90)
    assert listed[0]["read_only"] is True
    with connect(sw.store) as conn:
        found = tokens.by_value(conn, made["token"])
        assert found is not None and found.actor == "agent/reader" and found.read_only is True
        assert tokens.by_value(conn, made["token"] + "x") is None


def test_revoke_is_an_op_and_final(sw):
    _init(sw)
    made = _create(sw, "agent/w1")
    ran = sw(*as_(sw, ALICE), "token", "revoke", str(made["id"]))
    assert ran.exit == 0 and ran.result["op"] == 3 and ran.result["actor"] == "agent/w1"
    listed = sw.ok("--repo", str(sw.store), "token", "list")["tokens"]
    assert listed[0]["revoked_at"] == ran.result["revoked_at"]
    again = sw(*as_(sw, ALICE), "token", "revoke", str(made["id"]))
    assert again.error["code"] == "E_STATE" and again.error["details"]["op"] == 3
    assert "`swarmctl token create agent/w1`" in again.error["hint"]  # it had none: the way on
    undo = sw(*as_(sw, ALICE), "op", "undo", "3")
    assert undo.error["code"] == "E_REFUSED" and undo.exit != 0
    assert op_count(sw.store) == 3
    assert sw.ok("--repo", str(sw.store), "token", "list")["tokens"][0]["revoked_at"] is not None
    missing = sw(*as_(sw, ALICE), "token", "revoke", "99")
    assert missing.error["code"] == "E_NOT_FOUND"
    assert problems(sw.store) == []


def test_undo_of_a_create_revokes_it_and_cannot_be_taken_back(sw):
    _init(sw)
    made = _create(sw, "agent/w1")
    dry = sw(*as_(sw, ALICE), "op", "undo", "2", "--dry-run")
    assert dry.exit == 0 and dry.result["op"] is None
    assert sw.ok("--repo", str(sw.store), "token", "list")["tokens"][0]["revoked_at"] is None
    undo = sw.ok(*as_(sw, ALICE), "op", "undo", "2")
    assert undo == {"undone": 2, "op": 3, "ref_moves": [], "already_applied": False}
    listed = sw.ok("--repo", str(sw.store), "token", "list")["tokens"]
    assert listed[0]["revoked_at"] is not None
    assert sw.ok(*as_(sw, ALICE), "op", "undo", "2")["already_applied"] is True  # a replay
    assert sw.ok("--repo", str(sw.store), "op", "show", "2")["undone_by"] == 3
    redo = sw(*as_(sw, ALICE), "op", "undo", "3")  # would bring the token back
    assert redo.error["code"] == "E_REFUSED"
    # a token revoked by `token revoke`: its create's undo has nothing left to do
    other = _create(sw, "agent/w2")
    sw.ok(*as_(sw, ALICE), "token", "revoke", str(other["id"]))
    late = sw(*as_(sw, ALICE), "op", "undo", str(other["id"]))
    assert late.error["code"] == "E_NOTHING_TO_UNDO"
    assert problems(sw.store) == []
    with connect(sw.store) as conn:
        assert tokens.by_value(conn, made["token"]).revoked_at is not None


def test_under_a_policy_only_an_admin_revokes_a_token_by_undoing_its_create(sw):
    """`op undo` of a token_create revokes the token: under a policy it is held to the rule
    `token revoke` is (admins only), and to `[undo] others`. It went round both: any agent (or
    any holder of a token over `mcp --http`) could revoke anyone's token, a person's too."""
    _init(sw)
    (sw.tmp / "policy.toml").write_text('admins = ["human/*"]\n[undo]\nothers = ["human/*"]\n')
    sw.ok(*as_(sw, ALICE), "policy", "set", str(sw.tmp / "policy.toml"))  # op 2
    made = _create(sw, "human/bob")  # op 3
    before = op_count(sw.store)
    for args in (("op", "undo", "3"), ("op", "undo", "3", "--dry-run"), ("token", "revoke", "3")):
        ran = sw(*as_(sw, "agent/x"), *args)
        assert (ran.exit, ran.error["code"], ran.error["details"]["rule"]) == (6, "E_FORBIDDEN", "admins"), ran.stdout
    checked = sw.ok(*as_(sw, ALICE), "policy", "check", "--actor", "agent/x", "undo", '{"op": 3}')
    assert checked["allowed"] is False and checked["rule"] == "admins"
    assert op_count(sw.store) == before
    assert sw.ok("--repo", str(sw.store), "token", "list")["tokens"][0]["revoked_at"] is None
    # An admin who made no token may revoke another's by the undo only if `[undo] others` names them.
    (sw.tmp / "admins.toml").write_text('admins = ["human/*", "agent/ops"]\n[undo]\nothers = ["human/*"]\n')
    sw.ok(*as_(sw, ALICE), "policy", "set", str(sw.tmp / "admins.toml"))
    ran = sw(*as_(sw, "agent/ops"), "op", "undo", "3")
    assert (ran.error["code"], ran.error["details"]["rule"]) == ("E_FORBIDDEN", "undo.others")
    assert sw.ok(*as_(sw, "human/carol"), "op", "undo", "3")["undone"] == 3
    with connect(sw.store) as conn:
        assert tokens.by_value(conn, made["token"]).revoked_at is not None
    assert problems(sw.store) == []


def test_bad_input_is_refused_before_anything_is_written(sw):
    _init(sw)
    for args, field in [(("agent/w1", "--expires", "soon"), "expires"), (("agent/w1", "--expires", "2020-01-01"), "expires"),
                        (("agent/w1", "--expires", "0s"), "expires"), (("agent/w1", "--expires", "00d"), "expires")]:
        ran = sw(*as_(sw, ALICE), "token", "create", *args)
        assert ran.error["code"] == "E_INVALID_ARG" and ran.error["details"]["field"] == field, ran.stdout
        # An expiry is ahead: not the --since hint's "a duration before now".
        assert "from now" in ran.error["hint"] and "before now" not in ran.error["hint"], ran.error
    bad_actor = sw(*as_(sw, ALICE), "token", "create", "nobody")
    assert bad_actor.error["code"] == "E_INVALID_ARG"
    anonymous = sw("--repo", str(sw.store), "token", "create", "agent/w1")
    assert anonymous.error["code"] == "E_IDENTITY_REQUIRED"
    assert op_count(sw.store) == 1


def test_token_tools_are_cli_only():
    assert {t.name for t in registry.tools()} >= {"token_create", "token_list", "token_revoke"}
    assert not {t.name for t in registry.mcp_tools()} & {"token_create", "token_list", "token_revoke"}


def test_a_store_made_before_tokens_reads_none_and_gains_the_table_on_first_create(sw):
    """A format-2 store made before tokens existed: its first write upgrades it to format 3,
    which makes the table (swarmctl/store/migrate.py)."""
    _init(sw)
    with tamper(sw.store) as conn:
        conn.execute("DROP TABLE tokens")
        for index in ("ref_moves_actor", "ref_moves_kind", "ref_moves_actor_kind"):
            conn.execute(f"DROP INDEX {index}")
        conn.execute("ALTER TABLE ref_moves DROP COLUMN actor")
        conn.execute("ALTER TABLE ref_moves DROP COLUMN kind")
        conn.execute("ALTER TABLE workflows DROP COLUMN owner_host")  # format 4's
        conn.execute("ALTER TABLE workflows DROP COLUMN owner_lease")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    assert sw.ok("--repo", str(sw.store), "token", "list") == {"tokens": []}
    assert sw(*as_(sw, ALICE), "token", "revoke", "1").error["code"] == "E_NOT_FOUND"
    made = _create(sw, "agent/w1")
    assert [t["id"] for t in sw.ok("--repo", str(sw.store), "token", "list")["tokens"]] == [made["id"]]
    assert problems(sw.store) == []
