"""Staged transactions (SPEC section 4): `tx begin`, `set`, `delete`, `status`, `undo`, `redo`,
`commit`, `rollback`, `config`.

Golden transcripts cover every command and every error; the tests after them check the
behaviour behind the envelopes (net moves, baselines, the redo branch, op undo of a commit),
two actors at once, and real processes racing and being killed during `tx commit`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, build_golden_store, connect, paused_at_commit, problems, refs
from swarm import Ran, Swarm, swarmctl_argv

pytestmark = pytest.mark.backends("sqlite", "postgres")

# Seeds the random tests (read here: the `sw` fixture clears SWARMCTL_* variables).
SEED = int(os.environ.get("SWARMCTL_TEST_SEED", "20261130"))


class Staging(Swarm):
    """A user at the reference store (ops 1-6; main and release/v1 name `fix`), who stages as ALICE."""

    def __init__(self, sw: Swarm) -> None:
        super().__init__(sw.tmp, sw.monkeypatch, sw.url)
        self.ids = build_golden_store(self)

    def tx(self, *args: str, actor: str | None = ALICE, **kw) -> Ran:
        who = ("--as", actor) if actor else ()
        return self("--repo", str(self.store), *who, "tx", *args, **kw)

    def run(self, *args: str, actor: str = ALICE) -> Ran:
        return self("--repo", str(self.store), "--as", actor, *args)


@pytest.fixture
def store(sw) -> Staging:
    return Staging(sw)


def newest_op(sw) -> int:
    return sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"]


# --- golden transcripts: every command ---------------------------------------------------------


def test_a_transaction_from_begin_to_commit(store, golden):
    """Stage three revisions, undo one, redo it, commit: one op of kind tx_commit."""
    notes = store.run("changeset", "create", "-m", "Hotfix").result["changeset"]["id"]  # op 7
    runs = [
        store.tx("status"),
        store.tx("begin"),
        store.tx("set", "release/v1", notes[:12]),
        store.tx("set", "hotfix", "main"),
        store.tx("delete", "main"),
        store.tx("undo"),
        store.tx("redo"),
        store.tx("status"),
        store.tx("commit"),
        store.tx("status"),
        store.run("op", "show", "8"),
    ]
    assert all(r.exit == 0 for r in runs), store.transcript(*runs)
    assert store.transcript(*runs) == golden


def test_rollback_of_an_active_transaction_is_ready_and_changes_no_ref(store, golden):
    before, op_before = refs(store.store), newest_op(store)
    runs = [
        store.tx("begin"),
        store.tx("set", "release/v1", store.ids["base"][:12]),
        store.tx("delete", "main"),
        store.tx("undo"),
        store.tx("rollback"),
        store.tx("status"),
    ]
    assert all(r.exit == 0 for r in runs)
    assert refs(store.store) == before and newest_op(store) == op_before
    assert store.transcript(*runs) == golden


def test_commit_with_a_message_and_its_op_undo(store, golden):
    """The commit's op is undone with `op undo` like any other: every ref it moved goes back."""
    before = refs(store.store)
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    store.tx("set", "release/v2", "main")
    store.tx("delete", "main")
    commit = store.tx("commit", "-m", "cut v2, retire main")
    after = refs(store.store)
    undo = store.run("op", "undo", str(commit.result["op"]))
    replay = store.run("op", "undo", str(commit.result["op"]))
    assert after == {"release/v1": store.ids["base"], "release/v2": store.ids["fix"]}
    assert refs(store.store) == before
    assert replay.result["already_applied"] is True
    assert store.transcript(commit, undo, replay) == golden


def test_config_shows_and_sets_the_bound(store, golden):
    runs = [
        store.tx("config", actor=None),  # showing needs no identity
        store.tx("config", "--max-revisions", "3"),
        store.tx("config", "--max-revisions", "3"),
        store.tx("begin"),
        store.tx("status"),
    ]
    assert all(r.exit == 0 for r in runs)
    assert store.transcript(*runs) == golden


# --- golden transcripts: every error ----------------------------------------------------------


def test_every_tx_command_needs_an_identity(store, golden):
    runs = [
        store.tx(*args, actor=None)
        for args in (
            ["begin"],
            ["set", "main", "main"],
            ["delete", "main"],
            ["status"],
            ["undo"],
            ["redo"],
            ["commit"],
            ["rollback"],
            ["config", "--max-revisions", "5"],
        )
    ]
    assert {r.error["code"] for r in runs} == {"E_IDENTITY_REQUIRED"}
    assert {r.exit for r in runs} == {6}
    assert store.transcript(*runs) == golden


def test_commands_that_need_an_open_transaction(store, golden):
    runs = [
        store.tx("set", "main", "main"),
        store.tx("delete", "main"),
        store.tx("undo"),
        store.tx("redo"),
        store.tx("commit"),
        store.tx("rollback"),
    ]
    assert {r.error["code"] for r in runs} == {"E_STATE"}
    assert store.transcript(*runs) == golden


def test_a_second_begin_is_refused(store, golden):
    first = store.tx("begin")
    second = store.tx("begin")
    other_actor = store.tx("begin", actor=AGENT)
    assert second.error["code"] == "E_STATE" and second.exit == 7
    assert other_actor.exit == 0
    assert store.transcript(first, second, other_actor) == golden


def test_staging_errors(store, golden):
    store.tx("begin")
    runs = [
        store.tx("set", "bad..name", "main"),
        store.tx("set", "main", "nope/none"),
        store.tx("set", "main", "abc"),
        store.tx("set", "main", "ffffffff"),
        store.tx("delete", "no-such-ref"),
        store.tx("set", "main"),
        store.tx("delete", "release/v1"),
        store.tx("delete", "release/v1"),
        store.tx("status"),
    ]
    assert [r.exit for r in runs] == [2, 4, 2, 4, 4, 2, 0, 4, 0]
    assert store.transcript(*runs) == golden


def test_undo_and_redo_at_the_ends(store, golden):
    store.tx("begin")
    runs = [store.tx("undo"), store.tx("set", "main", "release/v1"), store.tx("redo"), store.tx("undo"), store.tx("undo")]
    assert [r.exit for r in runs] == [7, 0, 7, 0, 7]
    assert store.transcript(*runs) == golden


def test_the_revision_bound_refuses_and_drops_nothing(store, golden):
    store.tx("config", "--max-revisions", "2")
    store.tx("begin")
    runs = [
        store.tx("set", "a", "main"),
        store.tx("set", "b", "main"),
        store.tx("set", "c", "main"),
        store.tx("undo"),
        store.tx("set", "c", "main"),
        store.tx("status"),
    ]
    assert [r.exit for r in runs] == [7 if i == 2 else 0 for i in range(6)]
    status = runs[-1].result
    assert [h["name"] for h in status["history"]] == ["a", "c"] and status["revisions"] == 2
    assert store.transcript(*runs) == golden


def test_commit_with_nothing_staged(store, golden):
    store.tx("begin")
    runs = [
        store.tx("commit"),
        store.tx("set", "main", "main"),  # what it names already: no move
        store.tx("commit"),
        store.tx("set", "main", store.ids["base"][:12]),
        store.tx("undo"),
        store.tx("commit"),
    ]
    assert [r.exit for r in runs] == [7, 0, 7, 0, 0, 7]
    assert store.transcript(*runs) == golden


def test_config_errors(store, golden):
    runs = [
        store.tx("config", "--max-revisions", "0"),
        store.tx("config", "--max-revisions", "1001"),
        store.tx("config", "--max-revisions", "many"),
    ]
    assert [r.exit for r in runs] == [2, 2, 2]
    assert store.transcript(*runs) == golden


def test_no_store(sw, golden):
    ran = sw("--repo", str(sw.tmp / "nowhere"), "--as", ALICE, "tx", "begin")
    assert ran.error["code"] == "E_NOT_A_REPO"
    assert sw.transcript(ran) == golden


def test_rollback_and_undo_after_a_commit_name_op_undo(store, golden):
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    commit = store.tx("commit")
    runs = [
        store.tx("rollback"),
        store.tx("undo"),
        store.tx("redo"),
        store.run("op", "undo", str(commit.result["op"])),
        store.tx("rollback"),
    ]
    assert runs[0].error["next"]["argv"][-3:] == ["op", "undo", str(commit.result["op"])]
    assert runs[-1].error["next"] is None  # the undo is done: nothing concrete left to call
    assert store.transcript(*runs) == golden


# --- conflicts: a second actor moves a staged ref -------------------------------------------


def test_a_conflict_made_by_a_second_actor_between_stage_and_commit(store, golden):
    base, fix = store.ids["base"], store.ids["fix"]
    runs = [
        store.tx("begin"),
        store.tx("set", "release/v1", base[:12]),
        store.tx("set", "release/v2", fix[:12]),
        store.run("ref", "set", "release/v1", store.ids["base"][:12], actor=AGENT),  # op 7
        store.tx("status"),
        store.tx("commit"),
        store.tx("status"),
        store.tx("set", "main", base[:12]),
        store.tx("undo"),
        store.tx("redo"),
        store.tx("commit"),
        store.tx("rollback"),
        store.tx("redo"),
        store.tx("status"),
    ]
    conflict = runs[5]
    assert conflict.exit == 3
    assert conflict.error["details"]["conflicts"] == [
        {"name": "release/v1", "expected": fix, "actual": base, "moved_by": [7]}
    ]
    assert newest_op(store) == 7  # nothing written by the commit
    assert "release/v2" not in refs(store.store)
    assert runs[6].result["state"] == "Conflicted" and runs[6].result["can_commit"] is False
    assert runs[11].result["state"] == "OutOfDate"
    assert runs[12].error["code"] == "E_STATE"
    assert store.transcript(*runs) == golden


def test_a_ref_moved_before_it_was_first_staged_is_no_conflict(store):
    """The baseline is what the ref names when first staged, not at `tx begin`."""
    store.tx("begin")
    store.run("ref", "set", "release/v1", store.ids["base"][:12], actor=AGENT)
    staged = store.tx("set", "release/v1", "main").result
    assert staged["old"] == store.ids["base"]
    status = store.tx("status").result
    assert status["moved"] == []
    assert store.tx("commit").exit == 0
    assert refs(store.store)["release/v1"] == store.ids["fix"]


def test_the_baseline_is_recorded_once_per_ref(store):
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    store.run("ref", "set", "release/v1", store.ids["base"][:12], actor=AGENT)
    again = store.tx("set", "release/v1", store.ids["base"][:12]).result
    assert again["old"] == store.ids["fix"]  # the first baseline stays: the commit will conflict
    assert store.tx("commit").error["code"] == "E_CAS_MISMATCH"


def test_two_actors_with_open_transactions_on_overlapping_refs(store, golden):
    base, fix = store.ids["base"], store.ids["fix"]
    runs = [
        store.tx("begin"),
        store.tx("begin", actor=AGENT),
        store.tx("set", "release/v1", base[:12]),
        store.tx("set", "release/v1", "main", actor=AGENT),  # names fix already: no move for the agent
        store.tx("set", "main", base[:12], actor=AGENT),
        store.tx("set", "main", base[:12]),  # the same target as the agent's: still a conflict
        store.tx("status"),
        store.tx("status", actor=AGENT),
        store.tx("commit", actor=AGENT),
        store.tx("status"),
        store.tx("commit"),
        store.tx("rollback"),
        store.tx("status", actor=AGENT),
    ]
    assert [r.exit for r in runs] == [0] * 10 + [3, 0, 0]
    assert runs[10].error["details"]["conflicts"] == [
        {"name": "main", "expected": fix, "actual": base, "moved_by": [7]}
    ]
    assert runs[9].result["moved"][0]["moved_by"] == [7]
    assert refs(store.store) == {"main": base, "release/v1": fix}
    assert store.transcript(*runs) == golden


# --- behaviour behind the envelopes -----------------------------------------------------------


def test_commit_makes_the_net_effect_one_move_per_ref(store):
    base, fix = store.ids["base"], store.ids["fix"]
    store.tx("begin")
    store.tx("set", "tmp", base[:12])
    store.tx("set", "tmp", fix[:12])
    store.tx("delete", "tmp")  # created and deleted: no move
    store.tx("set", "release/v1", base[:12])
    store.tx("set", "release/v1", fix[:12])  # back to its baseline: no move
    store.tx("delete", "main")
    store.tx("set", "main", base[:12])  # recreated: one move fix -> base
    store.tx("set", "release/v9", "main")
    commit = store.tx("commit").result
    assert commit["ref_moves"] == [
        {"name": "main", "old": fix, "new": base},
        {"name": "release/v9", "old": None, "new": fix},
    ]
    log = store.ok("--repo", str(store.store), "op", "log", "--kind", "tx_commit")["ops"]
    assert [(o["op"], o["actor"], o["ref_moves"]) for o in log] == [(7, ALICE, commit["ref_moves"])]
    assert refs(store.store) == {"main": base, "release/v1": fix, "release/v9": fix}


def test_a_commit_message_of_many_lines_is_the_ops_one_line_description(store):
    """The op kept the message as given, newlines and all: `op log -o table` split the op
    over two rows (an op's description is one line, SPEC §3)."""
    store.tx("begin")
    store.tx("set", "tmp", store.ids["base"][:12])
    commit = store.tx("commit", "-m", "cut v2\n\n  retire main\n").result
    assert commit["description"] == "tx 1: cut v2 retire main"
    (op,) = store.ok("--repo", str(store.store), "op", "log", "--kind", "tx_commit")["ops"]
    assert op["description"] == "tx 1: cut v2 retire main"


def test_a_stage_after_undo_drops_the_redo_branch(store):
    store.tx("begin")
    for name in ("a", "b", "c"):
        store.tx("set", name, "main")
    store.tx("undo")
    store.tx("undo")
    staged = store.tx("set", "d", "main").result
    assert (staged["revision"], staged["revisions"], staged["dropped"]) == (2, 2, 2)
    assert store.tx("redo").error["code"] == "E_STATE"
    status = store.tx("status").result
    assert [(h["revision"], h["name"], h["applied"]) for h in status["history"]] == [(1, "a", True), (2, "d", True)]
    assert [m["name"] for m in status["moves"]] == ["a", "d"]


def test_a_ref_only_a_dropped_revision_staged_takes_its_baseline_anew(store):
    """Found by a probe: after `tx undo` and a stage that dropped the undone revision, the ref
    it staged kept that revision's baseline; staged again after someone had moved it, `tx set`
    said `old` was what it named before (null: no ref), and the commit conflicted on a
    transaction just staged. The ref is the transaction's again from its new first stage."""
    store.tx("begin")
    store.tx("set", "x", "main")  # 1: x's baseline null (no ref x)
    store.tx("undo")
    store.run("ref", "set", "x", store.ids["base"][:12], "--create", actor=AGENT)  # someone makes x
    assert store.tx("set", "y", "main").result["dropped"] == 1  # revision 1 dropped: x is staged by none
    again = store.tx("set", "x", "main").result
    assert again["old"] == store.ids["base"], again
    assert store.tx("status").result["moved"] == []
    done = store.tx("commit")
    assert done.exit == 0 and refs(store.store)["x"] == refs(store.store)["main"], done.stdout


def test_staging_never_touches_the_refs_or_the_op_log(store):
    before, op = refs(store.store), newest_op(store)
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    store.tx("delete", "main")
    store.tx("undo")
    store.tx("redo")
    store.tx("config", "--max-revisions", "5")
    assert refs(store.store) == before and newest_op(store) == op


def test_an_open_transaction_keeps_the_bound_it_began_with(store):
    store.tx("begin")
    store.tx("config", "--max-revisions", "1")
    store.tx("set", "a", "main")
    assert store.tx("set", "b", "main").exit == 0
    assert store.tx("status").result["max"] == 20
    store.tx("rollback")
    assert store.tx("begin").result["max"] == 1


def test_the_op_undo_of_a_commit_is_refused_when_a_ref_moved_since(store):
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    op = store.tx("commit").result["op"]
    store.run("ref", "set", "release/v1", "main", actor=AGENT)
    undo = store.run("op", "undo", str(op))
    assert undo.error["code"] == "E_CAS_MISMATCH"
    assert undo.error["details"]["conflicts"][0]["moved_by"] == [op + 1]


def test_random_staging_sequences_match_a_model(store):
    """Random set/delete/undo/redo sequences against a plain model of revisions: the status,
    every refusal, and finally the refs after the commit agree with it."""
    rng = random.Random(SEED)
    targets = [store.ids["base"], store.ids["fix"]]
    store.tx("config", "--max-revisions", "6")
    for _round in range(6):
        store_refs = refs(store.store)
        revs: list[tuple[str, str | None]] = []
        current, first_staged = 0, []
        assert store.tx("begin").exit == 0
        for _step in range(18):
            staged = dict(revs[:current])
            action = rng.choice(["set", "set", "delete", "undo", "redo"])
            name = rng.choice(["main", "release/v1", "a", "b"])
            if action in ("set", "delete"):
                new = rng.choice(targets) if action == "set" else None
                ran = store.tx("set", name, new[:12]) if new else store.tx("delete", name)
                exists = staged[name] if name in staged else store_refs.get(name)
                if action == "delete" and exists is None:
                    assert ran.error["code"] == "E_NOT_FOUND"
                elif current >= 6:
                    assert ran.error["code"] == "E_STATE"
                else:
                    assert ran.exit == 0, ran.stdout
                    kept = revs[:current]  # the undone revisions are dropped, and the baselines of refs only they staged
                    first_staged = [n for n in first_staged if any(n == staged_name for staged_name, _ in kept)]
                    revs, current = kept + [(name, new)], current + 1
                    first_staged += [name] if name not in first_staged else []
            elif action == "undo":
                ran = store.tx("undo")
                assert (ran.exit == 0) == (current > 0)
                current -= ran.exit == 0
            else:
                ran = store.tx("redo")
                assert (ran.exit == 0) == (current < len(revs))
                current += ran.exit == 0
            staged = dict(revs[:current])
            expected = [
                {"name": n, "old": store_refs.get(n), "new": staged[n]}
                for n in first_staged
                if n in staged and staged[n] != store_refs.get(n)
            ]
            status = store.tx("status").result
            assert (status["revision"], status["revisions"], status["moves"]) == (current, len(revs), expected)
        if expected:
            assert store.tx("commit").exit == 0
            moved = {m["name"]: m["new"] for m in expected}
            assert refs(store.store) == {k: v for k, v in {**store_refs, **moved}.items() if v is not None}
        else:
            assert store.tx("commit").error["code"] == "E_STATE"
            assert store.tx("rollback").exit == 0


def test_concurrent_begins_by_one_actor_open_one_transaction(store):
    procs = [_start(store, ALICE, "tx", "begin") for _ in range(4)]
    envelopes = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted("ok" if e["ok"] else e["error"]["code"] for e in envelopes) == ["E_STATE"] * 3 + ["ok"]
    with connect(store.store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM txs WHERE actor = ?", (ALICE,)).fetchone() == (1,)


@pytest.mark.backends("sqlite")  # SQLite's query plan
def test_the_schema_spells_the_states_of_txs_py_and_open_tx_uses_its_index(store):
    """The DDL repeats txs.STATES and txs.OPEN_STATES as literals (it is the stored format)."""
    from swarmctl.store import txs
    from swarmctl.store.schema import SCHEMA

    def sql_list(states):
        return ", ".join(f"'{s}'" for s in states)

    assert f"CHECK (state IN ({sql_list(txs.STATES)}))" in SCHEMA
    assert f"CREATE UNIQUE INDEX txs_open ON txs(actor) WHERE state IN ({sql_list(txs.OPEN_STATES)});" in SCHEMA
    with connect(store.store) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT tx FROM txs WHERE actor = ? AND {txs._OPEN}", (ALICE,))
        assert "USING INDEX txs_open" in " ".join(row[-1] for row in plan)


def test_annotations_and_descriptions(store):
    from swarmctl import registry

    hints = {t.name: t.annotations.to_mcp() for t in registry.area("tx")}

    def ann(read_only, destructive, idempotent):
        return {"destructiveHint": destructive, "idempotentHint": idempotent, "openWorldHint": False, "readOnlyHint": read_only}

    assert hints == {
        "tx_begin": ann(False, False, False),
        "tx_set": ann(False, True, False),  # a stage after an undo discards the redo branch
        "tx_delete": ann(False, True, False),
        "tx_status": ann(True, False, True),
        "tx_undo": ann(False, False, False),
        "tx_redo": ann(False, False, False),
        "tx_commit": ann(False, True, False),
        "tx_rollback": ann(False, True, False),  # as the reference's transaction-rollback
        "tx_config": ann(False, False, True),
    }
    rollback = " ".join(registry.get("tx_rollback").description.split())
    for phrase in ("without changing any ref", "cannot be restored with `tx redo`", "cannot undo an earlier commit", "OutOfDate"):
        assert phrase in rollback
    for tool in registry.area("tx"):
        assert "E_IDENTITY_REQUIRED" in tool.description, tool.name


def test_schemas_and_json_validation(store):
    from swarmctl import arguments, registry, schemas
    from swarmctl.envelope import SwarmError

    for tool in registry.area("tx"):
        assert schemas.json_schema(tool.request)["type"] == "object"
        assert schemas.json_schema(tool.result, mode="serialization")["type"] == "object"
    with pytest.raises(SwarmError) as caught:
        arguments.validate_request(registry.get("tx_config"), {"max_revisions": 0})
    assert caught.value.code == "E_INVALID_ARG"
    shown = store.ok("schema", "TxStatusResult")["schema"]
    assert list(shown["properties"])[:4] == ["state", "tx", "base_op", "begun_at"]


@pytest.mark.backends("sqlite")  # copies the store's directory
def test_the_json_door_gives_the_envelopes_the_cli_gives(store):
    """Each tx tool through runner.run_json (what MCP and `swarmctl call` use) on one store, and
    the same step through the CLI on a twin store: equal envelopes but for the store's path."""
    from swarmctl import registry, runner
    from swarmctl.context import Context

    twin = store.tmp / "twin"
    shutil.copytree(store.store, twin)
    steps = [
        ("tx_status", {}, ["status"]),
        ("tx_begin", {}, ["begin"]),
        ("tx_set", {"name": "release/v9", "target": "main"}, ["set", "release/v9", "main"]),
        ("tx_delete", {"name": "main"}, ["delete", "main"]),
        ("tx_undo", {}, ["undo"]),
        ("tx_redo", {}, ["redo"]),
        ("tx_status", {}, ["status"]),
        ("tx_commit", {"message": "via json"}, ["commit", "-m", "via json"]),
        ("tx_rollback", {}, ["rollback"]),
        ("tx_config", {"max_revisions": 7}, ["config", "--max-revisions", "7"]),
        ("tx_config", {"max_revisions": 0}, ["config", "--max-revisions", "0"]),
    ]

    def comparable(envelope: dict, repo: Path) -> str:
        envelope = {**envelope, "meta": {**envelope["meta"], "elapsed_ms": 0}}
        return store.normalize(json.dumps(envelope).replace(str(repo), "[repo]"))

    for name, arguments, argv in steps:
        via_json = runner.run_json(registry.get(name), arguments, Context(repo=str(twin), actor=ALICE))
        via_cli = store.tx(*argv).envelope
        if name == "tx_config" and arguments["max_revisions"] == 0:
            # Both refuse; the JSON door's message comes from the schema's bounds.
            assert via_json["error"]["code"] == via_cli["error"]["code"] == "E_INVALID_ARG"
            continue
        assert comparable(via_json, twin) == comparable(via_cli, store.store), name


def test_status_table(store):
    store.tx("begin")
    store.tx("set", "release/v1", store.ids["base"][:12])
    store.tx("delete", "main")
    store.tx("undo")
    store.run("ref", "set", "release/v1", store.ids["base"][:12], actor=AGENT)
    text = store("--repo", str(store.store), "--as", ALICE, "-o", "table", "tx", "status").stdout
    assert "tx 1: Active, begun at op 6, revision 1 of 2 (max 20); can undo, redo\n" in text  # not commit: a staged ref moved
    assert "op 7 (now" in text  # the moved ref, with the op that moved it
    assert "undone" in text


def test_op_log_does_not_import_the_tx_area(store):
    code = (
        "import sys; from swarmctl.cli import run; "
        f"run(['--repo', {str(store.store)!r}, 'op', 'log', '-n', '1']); "
        "print('swarmctl.tools.tx' in sys.modules, 'pydantic' in sys.modules, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=store.env)
    assert proc.stderr.strip().splitlines()[-1] == "False False", proc.stderr


# --- real processes: races and kills ---------------------------------------------------------


def _start(sw, actor: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*swarmctl_argv(), "--repo", str(sw.store), "--as", actor, *args],
        env=sw.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stage_many(sw, refs_to: dict[str, str], actor: str = ALICE) -> None:
    assert sw.tx("begin", actor=actor).exit == 0
    for name, target in refs_to.items():
        assert sw.tx("set", name, target, actor=actor).exit == 0


def test_commits_by_two_processes_on_overlapping_refs_one_wins(store):
    base = store.ids["base"][:12]
    for round_ in range(3):
        for actor in (ALICE, AGENT):
            _stage_many(store, {"main": base if round_ % 2 == 0 else store.ids["fix"][:12], f"{actor}/{round_}": base}, actor)
        procs = [_start(store, actor, "tx", "commit") for actor in (ALICE, AGENT)]
        outs = [p.communicate(timeout=60) for p in procs]
        envelopes = [json.loads(out) for out, _ in outs]
        codes = sorted("ok" if e["ok"] else e["error"]["code"] for e in envelopes)
        assert codes == ["E_CAS_MISMATCH", "ok"], envelopes
        loser = next(actor for actor, e in zip((ALICE, AGENT), envelopes) if not e["ok"])
        winner_op = next(e["result"]["op"] for e in envelopes if e["ok"])
        status = store.tx("status", actor=loser).result
        assert status["state"] == "Conflicted" and status["moved"][0]["moved_by"] == [winner_op]
        assert store.tx("rollback", actor=loser).result["state"] == "OutOfDate"


def test_a_commit_killed_before_its_commit_leaves_nothing_and_the_transaction_open(store):
    """SIGKILL at a known point: all of the commit's work done, COMMIT not yet run."""
    targets = {f"kill/{i}": store.ids["base"][:12] for i in range(5)}
    _stage_many(store, targets)
    before, op = refs(store.store), newest_op(store)
    with paused_at_commit(store, "--repo", str(store.store), "--as", ALICE, "tx", "commit") as proc:
        # Paused inside its write transaction: a reader still sees the store as it was.
        assert store.tx("status").result["state"] == "Active"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert refs(store.store) == before and newest_op(store) == op
    status = store.tx("status").result
    assert (status["state"], status["revision"], status["can_commit"]) == ("Active", 5, True)
    assert problems(store.store) == []
    commit = store.tx("commit").result
    assert commit["op"] == op + 1 and len(commit["ref_moves"]) == 5
    assert refs(store.store) == {**before, **{k: store.ids["base"] for k in targets}}


def test_commits_killed_at_random_times_are_all_or_nothing(store):
    """Real kills at random moments of `tx commit`: each leaves either the whole commit (op,
    every ref moved, transaction ended) or none of it (no op, no ref moved, transaction open)."""
    rng = random.Random(SEED)
    outcomes = {"committed": 0, "not committed": 0}
    # Kill times spread around how long a command takes here, so both outcomes occur.
    started = time.perf_counter()
    store.process("--repo", str(store.store), "--as", ALICE, "tx", "status")
    lifetime = time.perf_counter() - started
    for round_ in range(8):
        targets = {f"r{round_}/{i}": store.ids["base"][:12] for i in range(6)}
        _stage_many(store, targets)
        before, op = refs(store.store), newest_op(store)
        proc = _start(store, ALICE, "tx", "commit")
        delay = rng.uniform(0.3, 1.3) * lifetime
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        now, status = refs(store.store), store.tx("status").result
        if newest_op(store) == op + 1:
            outcomes["committed"] += 1
            assert now == {**before, **{k: store.ids["base"] for k in targets}}
            assert status["state"] == "Ready"
            shown = store.ok("--repo", str(store.store), "op", "show", str(op + 1))
            assert shown["kind"] == "tx_commit" and len(shown["ref_moves"]) == 6
        else:
            outcomes["not committed"] += 1
            assert newest_op(store) == op and now == before
            assert (status["state"], status["revision"]) == ("Active", 6)
            assert store.tx("rollback").result["state"] == "Ready"
        assert problems(store.store) == []
    print("random kills:", outcomes)
