"""The store's policy (README: Policy): setting and showing it, taking it back with `op undo`,
and its rules enforced on every path that moves a ref, predicted where a call is previewed.

A policy is set with `policy set FILE` and read with `policy show`; the rules are tested here
through the CLI as a user would meet them; tests/test_parity.py holds a case of each rule kind
at all three doors (CLI, `call`, MCP).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from core_helpers import AGENT, ALICE, BOB, CI, build_golden_store, op_count
from wfkit import Kit

from swarmctl import policy as rules
from swarmctl.store.schema import FORMAT_VERSION, POLICY_FORMAT

pytestmark = pytest.mark.backends("sqlite", "postgres")

OTHER_AGENT = "agent/worker-42"

# main and release/* are for people and ci/release; only people change the policy and undo
# the ops of others.
POLICY = """\
admins = ["human/*"]

[[protect]]
refs = ["release/*", "main"]
actors = ["human/*", "ci/release"]

[undo]
others = ["human/*"]
"""


class Store:
    """The golden store (ops 1-6: main and release/v1 name the fix; op 6 is AGENT's) with POLICY
    set by ALICE as op 7, and swarmctl run on it as one actor or another."""

    def __init__(self, sw, policy: str | None = POLICY) -> None:
        self.sw = sw
        self.ids = build_golden_store(sw)
        self.repo = str(sw.store)
        if policy is not None:
            (sw.tmp / "policy.toml").write_text(policy)
            assert self.ok(ALICE, "policy", "set", "policy.toml")["op"] == 7

    def __call__(self, actor: str | None, *args: str, **kw):
        who = ("--as", actor) if actor else ()
        return self.sw("--repo", self.repo, *who, *args, **kw)

    def ok(self, actor: str | None, *args: str, **kw) -> dict:
        ran = self(actor, *args, **kw)
        assert ran.exit == 0, ran.transcript() + ran.stderr
        return ran.result

    def forbidden(self, actor: str | None, *args: str, rule: str, **kw) -> dict:
        """The call is E_FORBIDDEN by `rule`, exit 6, and nothing was written."""
        before = self.head()
        ran = self(actor, *args, **kw)
        assert ran.exit == 6, ran.transcript()
        error = ran.error
        assert error["code"] == "E_FORBIDDEN" and error["details"]["rule"] == rule, error
        assert error["details"]["actor"] == actor and "policy" in error["hint"], error
        assert self.head() == before, "a refused call wrote an op"
        return error

    def head(self) -> int:
        return self.ok(None, "op", "log", "-n", "1")["ops"][0]["op"]

    def check(self, actor: str, tool: str, arguments: str) -> dict:
        return self.ok(None, "policy", "check", "--actor", actor, tool, arguments)


# --- the policy itself --------------------------------------------------------------------------


def test_a_store_without_a_policy_shows_none_and_keeps_its_format(sw, backend):
    store = Store(sw, policy=None)
    assert store.ok(None, "policy", "show") == {"policy": None, "version": None, "actor": None, "at": None}
    assert store.ok(AGENT, "ref", "set", "release/v1", store.ids["base"])["op"] == 7
    if backend == "sqlite":
        assert _format(sw) == FORMAT_VERSION


def test_setting_a_policy_is_an_op_that_raises_the_format_and_op_undo_takes_it_back(sw, backend):
    store = Store(sw)
    shown = store.ok(AGENT, "policy", "show")
    assert shown["policy"] == POLICY and shown["version"] == 7 and shown["actor"] == ALICE
    assert store.ok(None, "op", "show", "7")["kind"] == "policy_set"
    if backend == "sqlite":
        assert _format(sw) == POLICY_FORMAT
    from swarmctl import registry  # its help says so, with the format it is (it said 4, a store's own format)

    assert f"raises its format to {POLICY_FORMAT}," in " ".join(registry.get("policy_set").description.split())
    # Setting the same text again writes nothing.
    assert store.ok(BOB, "policy", "set", "policy.toml") == {"version": 7, "previous": 7, "op": None}
    # Only admins change it, or undo a change of it.
    store.forbidden(AGENT, "policy", "set", "policy.toml", rule="admins")
    store.forbidden(AGENT, "op", "undo", "7", rule="admins")
    undone = store.ok(BOB, "op", "undo", "7")
    assert undone == {"undone": 7, "op": 8, "ref_moves": [], "already_applied": False}
    assert store.ok(None, "policy", "show")["policy"] is None
    assert store.ok(AGENT, "ref", "set", "release/v1", store.ids["base"])["op"] == 9  # open again
    # The undo of the undo puts the policy back (anyone may now: there is no policy).
    assert store.ok(AGENT, "op", "undo", "8")["op"] == 10
    assert store.ok(None, "policy", "show")["policy"] == POLICY
    store.forbidden(AGENT, "ref", "set", "release/v1", "main", rule="protect[0]")


def test_the_undo_of_a_policy_change_is_a_compare_and_swap_on_its_version(sw):
    store = Store(sw)
    (sw.tmp / "second.toml").write_text(POLICY + '\n[approve]\nself = false\n')
    assert store.ok(ALICE, "policy", "set", "second.toml") == {"version": 8, "previous": 7, "op": 8}
    ran = store(ALICE, "op", "undo", "7")
    assert ran.exit == 3 and ran.error["code"] == "E_CAS_MISMATCH", ran.stdout
    assert ran.error["details"]["policy"] == {"expected": 7, "actual": 8}
    assert ran.error["next"]["arguments"] == {"op": 8}
    assert store.ok(ALICE, "op", "undo", "8")["op"] == 9
    assert store.ok(None, "policy", "show")["policy"] == POLICY
    assert store.ok(ALICE, "op", "undo", "7")["op"] == 10
    assert store.ok(None, "policy", "show")["policy"] is None


def test_a_replay_of_a_policy_undo_sees_the_policy_changed_since(sw):
    """Found by a probe: `op undo 7` again, once op 9 had taken op 7 back and op 10 had set
    another policy, said `already_applied` (exit 0), the new policy in force: a replay had no
    ref to compare. It is E_CAS_MISMATCH naming the later change, as for a ref moved since."""
    store = Store(sw)  # op 7 set POLICY
    assert store.ok(ALICE, "op", "undo", "7")["op"] == 8
    assert store.ok(ALICE, "op", "undo", "7")["already_applied"] is True  # no policy, as op 8 left it
    (sw.tmp / "other.toml").write_text(POLICY + '\n[approve]\nself = false\n')
    assert store.ok(ALICE, "policy", "set", "other.toml")["op"] == 9
    ran = store(ALICE, "op", "undo", "7")
    assert (ran.exit, ran.error["code"], ran.error["details"]["policy"]) == (3, "E_CAS_MISMATCH", {"expected": 8, "actual": 9}), ran.stdout
    assert ran.error["next"]["arguments"] == {"op": 9}
    assert store.ok(ALICE, "op", "undo", "9")["op"] == 10  # as next says: the policy is as op 8 left it again
    assert store.ok(ALICE, "op", "undo", "7")["already_applied"] is True


def test_following_next_after_a_policy_conflict_ends(sw):
    """`next` names the change of the policy in force to undo first. Once that was undone, the
    policy in force is the one the change before it made: naming the undo (the newest change of
    the policy by op number) would redo what was just taken back, and a caller that followed
    `next` went round and round, one op a turn."""
    store = Store(sw)  # op 7 set POLICY
    for i in (2, 3):
        (sw.tmp / f"p{i}.toml").write_text(POLICY + f'\n[[protect]]\nrefs = ["release/v{i}"]\nactors = ["human/*"]\n')
        assert store.ok(ALICE, "policy", "set", f"p{i}.toml")["op"] == 6 + i  # 8, 9
    followed = []
    for _ in range(4):
        ran = store(ALICE, "op", "undo", "7")
        if ran.exit == 0:
            break
        assert ran.error["code"] == "E_CAS_MISMATCH"
        later = ran.error["next"]["arguments"]["op"]
        assert ran.error["details"]["policy"]["actual"] == later
        followed.append(later)
        assert store.ok(ALICE, "op", "undo", str(later))["undone"] == later
    assert followed == [9, 8]  # then op 7 itself: the store has no policy again
    assert (ran.exit, ran.result["undone"]) == (0, 7)
    assert store.ok(None, "policy", "show")["policy"] is None


def test_only_an_admin_changes_a_store_setting(sw):
    """`tx config --max-revisions` binds every actor's transactions and records no op: under a
    policy, any agent could set everyone's bound to 1."""
    store = Store(sw)
    before = op_count(sw.store)
    ran = store("agent/x", "tx", "config", "--max-revisions", "1")
    assert (ran.exit, ran.error["code"], ran.error["details"]["rule"]) == (6, "E_FORBIDDEN", "admins"), ran.stdout
    assert store.ok(None, "tx", "config")["max_revisions"] == 20
    assert store.ok(ALICE, "tx", "config", "--max-revisions", "5") == {"max_revisions": 5, "changed": True}
    assert op_count(sw.store) == before


def test_only_an_admin_fences_the_store(sw):
    """`store copy --fence` stops every writer of the store, and no command lifts a fence:
    under a policy, any agent could fence a shared store (and send its writers elsewhere)."""
    store = Store(sw)
    before = op_count(sw.store)
    ran = sw("--as", "agent/x", "store", "copy", str(sw.store), str(sw.tmp / "agent-copy"), "--fence")
    assert (ran.exit, ran.error["code"], ran.error["details"]["rule"]) == (6, "E_FORBIDDEN", "admins"), ran.stdout
    assert not (sw.tmp / "agent-copy").exists()
    assert store.ok(ALICE, "ref", "set", "still/writes", "main", "--create")["op"] == before + 1
    assert sw.ok("--as", "agent/x", "store", "copy", str(sw.store), str(sw.tmp / "plain-copy"))["fenced"] is False
    assert sw.ok("--as", ALICE, "store", "copy", str(sw.store), str(sw.tmp / "moved"), "--fence")["fenced"] is True


def test_a_policy_set_from_stdin(sw):
    store = Store(sw, policy=None)
    ran = sw.process("--repo", store.repo, "--as", ALICE, "policy", "set", "-", input=POLICY)
    assert ran.exit == 0 and ran.result["op"] == 7, ran.stdout + ran.stderr
    assert store.ok(None, "policy", "show")["policy"] == POLICY


def test_the_bound_on_input_depth_is_not_held_to_the_stores_own_policy(sw):
    """Found by a probe: with SWARMCTL_MAX_JSON_DEPTH=3 every write to a store with a
    `[[protect]]` policy failed, "the policy nests deeper than 3 levels": the bound on what a
    caller sends was held to the policy the store holds. A policy given to `policy set` is input."""
    store = Store(sw)
    shallow = {"SWARMCTL_MAX_JSON_DEPTH": "2"}
    moved = sw.process("--repo", store.repo, "--as", ALICE, "ref", "set", "side", "main", "--create", env=shallow)
    assert moved.exit == 0, moved.stdout
    shown = sw.process("--repo", store.repo, "policy", "show", env=shallow)
    assert shown.exit == 0 and "[[protect]]" in shown.result["policy"], shown.stdout
    given = sw.process("--repo", store.repo, "--as", ALICE, "policy", "set", "-", input=POLICY, env=shallow)
    assert (given.exit, given.error["code"]) == (2, "E_INVALID_ARG") and "SWARMCTL_MAX_JSON_DEPTH" in given.error["message"]


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n"])
def test_an_empty_policy_is_refused_so_a_closed_stdin_opens_no_door(sw, text):
    """Found by a probe: `policy set -` with stdin closed or /dev/null wrote a policy_set op of
    "0 lines", exit 0: every rule of the policy in force gone at once, and to anyone, from a
    script whose input went missing. A policy that is empty on purpose says so in a comment."""
    store = Store(sw)
    before = store.ok(None, "policy", "show")
    ran = sw.process("--repo", store.repo, "--as", ALICE, "policy", "set", "-", input=text)
    assert (ran.exit, ran.error["code"], ran.error["details"]["key"]) == (2, "E_INVALID_ARG", "policy"), ran.stdout
    assert store.ok(None, "policy", "show") == before
    deliberate = sw.process("--repo", store.repo, "--as", ALICE, "policy", "set", "-", input="# no rules: open to all\n")
    assert deliberate.exit == 0 and deliberate.result["op"] is not None, deliberate.stdout


@pytest.mark.parametrize(
    "text, key",
    [
        ('admin = ["human/*"]\n', "admin"),  # a typo: refused, never ignored
        ('[[protect]]\nrefs = ["main"]\nactor = ["human/*"]\n', "protect[0].actor"),
        ('[undo]\nother = ["human/*"]\n', "undo.other"),
        ('[approve]\nself = "no"\n', "approve.self"),
        ('[[protect]]\nrefs = ["main"]\n', "protect[0]"),
        ('admins = "human/*"\n', "admins"),
        ("admins = [\n", None),  # not TOML
        ("admins = []\n", "admins"),  # no one could ever change it again, nor undo it
        ('admins = ["nobody"]\n', "admins"),  # nor when no actor (kind/name) matches: was accepted
        ('admins = ["*", "["]\n', "admins"),  # `*` stops at `/`: it matches no actor either
        ('admins = ["human/*"]\n' + "# every write reads it\n" * 3000, "policy"),  # over 64 KiB
    ],
)
def test_a_policy_that_is_not_understood_is_refused_and_nothing_is_written(sw, text, key):
    store = Store(sw, policy=None)
    (sw.tmp / "bad.toml").write_text(text)
    ran = store(ALICE, "policy", "set", "bad.toml")
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout
    assert ran.error["details"].get("key") == key
    assert store.head() == 6


def test_an_admins_glob_matches_an_actor_or_is_known_to_match_none():
    for glob in ("human/*", "**", "*/alice", "human/alice", "*/*", "ci/*-bot", "agent/**"):
        assert rules.may_match_an_actor(glob), glob
    for glob in ("nobody", "*", "[", "human/", "/alice", "Human/alice", "*/", "human/ alice"):
        assert not rules.may_match_an_actor(glob), glob


def test_globs_star_stays_within_a_part_and_double_star_crosses_parts():
    assert rules.matches(("release/*",), "release/v1")
    assert not rules.matches(("release/*",), "release/v1/hotfix")
    assert rules.matches(("release/**",), "release/v1/hotfix")
    assert not rules.matches(("release/*",), "release")
    assert rules.matches(("human/*",), ALICE) and not rules.matches(("human/*",), "agent/alice")
    assert rules.matches(("*/*",), CI) and rules.matches(None, "anyone/at-all")
    assert not rules.matches(("main",), "mainline") and not rules.matches(("a.b",), "axb")
    assert rules.matches(("/srv/**",), "/srv/workflows/x.toml") and not rules.matches(("/srv/*",), "/srv/a/x.toml")


# --- [[protect]]: every path that moves a ref -------------------------------------------------


def test_every_path_that_moves_a_ref_is_refused_for_a_protected_ref(sw):
    store = Store(sw)
    base = store.ids["base"]
    store.forbidden(AGENT, "ref", "set", "release/v1", base, rule="protect[0]")
    store.forbidden(AGENT, "ref", "set", "release/v2", "main", "--create", rule="protect[0]")
    store.forbidden(AGENT, "ref", "delete", "release/v1", rule="protect[0]")
    store.forbidden(AGENT, "changeset", "create", "-m", "x", "--ref", "main", rule="protect[0]")
    store.forbidden(AGENT, "op", "undo", "6", rule="protect[0]")  # its own op, but the ref is protected
    store.forbidden(AGENT, "op", "undo", "@", rule="protect[0]")  # @ is op 6, the agent's newest
    store.forbidden(AGENT, "op", "revert", "--actor", AGENT, rule="protect[0]")
    store.forbidden(AGENT, "op", "restore", "4", rule="protect[0]")  # the preview predicts it
    store.forbidden(AGENT, "op", "restore", "4", "--confirm", "--expect-head", "7", rule="protect[0]")
    store.ok(AGENT, "tx", "begin")
    store.forbidden(AGENT, "tx", "set", "main", base, rule="protect[0]")  # early, not at the commit
    store.forbidden(AGENT, "tx", "delete", "release/v1", rule="protect[0]")
    # Unprotected refs move as before, and a person or ci/release moves protected ones.
    assert store.head() == 7
    assert store.ok(AGENT, "ref", "set", "feature/x", "main")["op"] == 8
    assert store.ok(CI, "ref", "set", "release/v1", base)["op"] == 9
    assert store.ok(ALICE, "ref", "delete", "release/v1")["op"] == 10


def test_the_undo_of_an_undo_is_held_to_the_policy(sw):
    store = Store(sw, policy=None)
    assert store.ok(AGENT, "op", "undo", "6")["op"] == 7  # release/v1 back to base, before any policy
    (sw.tmp / "policy.toml").write_text(POLICY)
    store.ok(ALICE, "policy", "set", "policy.toml")  # op 8
    store.forbidden(AGENT, "op", "undo", "7", rule="protect[0]")
    store.forbidden(AGENT, "op", "undo", "7", "--dry-run", rule="protect[0]")
    assert store.ok(ALICE, "op", "undo", "7")["op"] == 9  # undo.others: people may


def test_a_transaction_staged_before_the_policy_cannot_commit_and_says_so_first(sw):
    store = Store(sw, policy=None)
    store.ok(AGENT, "tx", "begin")
    store.ok(AGENT, "tx", "set", "release/v1", store.ids["base"])
    assert store.ok(AGENT, "tx", "status")["can_commit"] is True
    (sw.tmp / "policy.toml").write_text(POLICY)
    store.ok(ALICE, "policy", "set", "policy.toml")  # op 7
    assert store.ok(AGENT, "tx", "status")["can_commit"] is False
    # The ref moves too (a conflict): forbidden wins.
    store.ok(ALICE, "ref", "set", "release/v1", store.ids["base"])  # op 8
    store.forbidden(AGENT, "tx", "commit", rule="protect[0]")
    assert store.ok(AGENT, "tx", "status")["state"] == "Active"  # not Conflicted: nothing was done


def test_forbidden_wins_over_a_compare_and_swap_conflict(sw):
    store = Store(sw)
    # release/v1 names the fix, not base: a conflict too.
    store.forbidden(AGENT, "ref", "set", "release/v1", "main", "--expect", store.ids["base"], rule="protect[0]")
    store.forbidden(AGENT, "ref", "delete", "release/v1", "--expect", store.ids["base"], rule="protect[0]")
    store.forbidden(AGENT, "op", "undo", "4", rule="undo.others")  # op 4 is ALICE's, and release/v1 moved since
    store.forbidden(AGENT, "op", "restore", "4", "--confirm", "--expect-head", "1", rule="protect[0]")


def test_a_store_copy_takes_the_policy_with_it(sw, backend):
    store = Store(sw)
    copy = str(sw.tmp / "copy")
    sw.ok("store", "copy", store.repo, copy)
    assert sw.ok("--repo", copy, "policy", "show")["policy"] == POLICY
    ran = sw("--repo", copy, "--as", AGENT, "ref", "set", "release/v1", store.ids["base"])
    assert ran.error["code"] == "E_FORBIDDEN", ran.stdout
    assert sw.ok("--repo", copy, "--as", ALICE, "op", "undo", "7")["op"] == 8  # its history came too
    assert _format(sw, sw.tmp / "copy") == POLICY_FORMAT


# --- [undo] others --------------------------------------------------------------------------------


def test_undo_others_keeps_an_agent_from_undoing_another_actors_op(sw):
    store = Store(sw, policy="[undo]\nothers = [\"human/*\"]\n")
    error = store.forbidden(OTHER_AGENT, "op", "undo", "6", rule="undo.others")
    assert error["details"]["op"] == 6 and error["details"]["op_actor"] == AGENT
    assert error["details"]["allowed"] == ["human/*"]
    store.forbidden(OTHER_AGENT, "op", "undo", "6", "--dry-run", rule="undo.others")
    store.forbidden(OTHER_AGENT, "op", "revert", "--after", "4", rule="undo.others")
    assert store.ok(AGENT, "op", "undo", "6")["op"] == 8  # its own op
    assert store.ok(BOB, "op", "undo", "8")["op"] == 9  # a person may undo anyone's


def test_a_conflicts_next_is_an_undo_the_policy_lets_the_caller_make(sw):
    """E_CAS_MISMATCH's `next` is the undo of the op that moved the ref since: under `[undo]
    others` that op may be another's, whose undo the caller may not make. The `next` ran
    straight into E_FORBIDDEN; now there is none, and the hint says why and who may."""
    store = Store(sw, policy="[undo]\nothers = [\"human/*\"]\n")
    assert store.ok(BOB, "changeset", "create", "-m", "later", "--ref", "main")["op"] == 8
    ran = store(AGENT, "op", "undo", "5")
    assert (ran.exit, ran.error["code"]) == (3, "E_CAS_MISMATCH"), ran.stdout
    assert ran.error["next"] is None and f"does not let {AGENT} undo op 8" in ran.error["hint"]
    allowed = store(ALICE, "op", "undo", "5").error  # a person may: the undo of op 8, which then runs
    assert allowed["next"]["arguments"] == {"op": 8} and store.ok(ALICE, *allowed["next"]["argv"][5:])["op"] == 9


def test_a_reverts_conflict_next_is_an_undo_the_policy_lets_the_caller_make_too(sw):
    """As for `op undo`: E_CAS_MISMATCH's `next` of `op revert` is the undo of the newest op
    outside the selection that moved a ref since, which under `[undo] others` may be another's."""
    store = Store(sw, policy="[undo]\nothers = [\"human/*\"]\n")
    assert store.ok(BOB, "changeset", "create", "-m", "later", "--ref", "main")["op"] == 8
    ran = store(AGENT, "op", "revert", "--actor", AGENT)
    assert (ran.exit, ran.error["code"]) == (3, "E_CAS_MISMATCH"), ran.stdout
    assert ran.error["next"] is None and f"does not let {AGENT} undo op 8" in ran.error["hint"]
    allowed = store(ALICE, "op", "revert", "--actor", AGENT).error  # a person may: the undo of op 8
    assert allowed["next"]["arguments"] == {"op": 8} and store.ok(ALICE, *allowed["next"]["argv"][5:])["op"] == 9
    assert store.ok(AGENT, "op", "revert", "--actor", AGENT)["op"] == 10  # and then the revert goes


# --- predictions match the call -------------------------------------------------------------------


def test_policy_check_and_dry_runs_predict_what_the_call_then_does(sw):
    store = Store(sw)
    calls = [
        (AGENT, "ref_set", '{"name": "release/v1", "target": "main"}', ("ref", "set", "release/v1", "main")),
        (AGENT, "ref_set", '{"name": "feature/y", "target": "main"}', ("ref", "set", "feature/y", "main")),
        (OTHER_AGENT, "undo", '{"op": 4}', ("op", "undo", "4")),
        (AGENT, "policy_set", '{"policy": "admins = [\\"agent/*\\"]\\n"}', ("policy", "set", "policy.toml")),
        (ALICE, "ref_delete", '{"name": "release/v1"}', ("ref", "delete", "release/v1")),
    ]
    for actor, tool, arguments, argv in calls:
        predicted = store.check(actor, tool, arguments)
        assert predicted["tool"] == tool and predicted["actor"] == actor
        before = store.head()
        real = store(actor, *argv)
        if predicted["allowed"]:
            assert real.exit == 0 or real.error["code"] != "E_FORBIDDEN", real.stdout
        else:
            assert real.error["code"] == "E_FORBIDDEN" and real.error["details"]["rule"] == predicted["rule"]
            assert real.error["message"] == predicted["message"] and real.error["hint"] == predicted["hint"]
            assert store.head() == before
    dry = store(OTHER_AGENT, "op", "undo", "6", "--dry-run")
    assert dry.error["details"]["rule"] == store.check(OTHER_AGENT, "undo", '{"op": 6}')["rule"] == "undo.others"


def test_policy_check_refuses_what_it_cannot_predict_and_writes_nothing(sw):
    store = Store(sw)
    # demo and store_copy with arguments they take were `allowed`, as reads (they write no store the policy holds)
    calls = [("nonsense", "{}"), ("init", "{}"), ("demo", json.dumps({"path": str(sw.tmp / "d")})),
             ("store_copy", json.dumps({"source": str(sw.store), "destination": str(sw.tmp / "c")}))]
    for tool, arguments in calls:
        ran = store(None, "policy", "check", "--actor", AGENT, tool, arguments)
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG" and "cannot predict" in ran.error["message"], ran.stdout
    assert not (sw.tmp / "d").exists() and not (sw.tmp / "c").exists()
    assert store.check(AGENT, "op_log", "{}")["allowed"] is True  # reads are open
    ran = store(None, "policy", "check", "--actor", AGENT, "ref_set", "[1]")
    assert ran.error["code"] == "E_INVALID_ARG"
    assert store.check(ALICE, "ref_set", '{"name": "release/v1", "target": "main~"}')["allowed"] is True  # fails otherwise
    assert store.head() == 7


# --- tokens ---------------------------------------------------------------------------------------


def test_once_a_policy_is_set_only_admins_manage_tokens(sw):
    store = Store(sw)
    store.forbidden(AGENT, "token", "create", AGENT, rule="admins")
    made = store.ok(ALICE, "token", "create", AGENT)
    store.forbidden(AGENT, "token", "revoke", str(made["id"]), rule="admins")
    assert store.ok(BOB, "token", "revoke", str(made["id"]))["id"] == made["id"]


# --- workflows: [run], [approve], [workflow], and store steps -------------------------------------

FLOW = """\
    name = "release"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "sign-off"
    approval = "a person signs off"
    [[step]]
    name = "deploy"
    run = ["./mark.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    """


def _kit_with_policy(sw, policy: str) -> Kit:
    kit = Kit(sw)
    (kit.dir / "policy.toml").write_text(policy)
    assert kit("policy", "set", "policy.toml").exit == 0
    return kit


def test_run_rules_say_who_may_run_workflows_and_which_files(sw):
    kit = _kit_with_policy(sw, f'[run]\nactors = ["human/*"]\ndefinitions = ["{(sw.tmp / "flows").resolve()}/*.toml"]\n')
    kit.write(FLOW.replace("release/v1", "staging"))
    ran = kit("workflow", "run", "flow.toml", actor=AGENT)
    assert ran.error["code"] == "E_FORBIDDEN" and ran.error["details"]["rule"] == "run.actors", ran.stdout
    assert kit("workflow", "list", actor=None).result["workflows"] == []
    # A file outside the allowed folder, also through a symlink inside it.
    outside = sw.tmp / "elsewhere"
    outside.mkdir()
    (outside / "flow.toml").write_text((kit.dir / "flow.toml").read_text())
    (kit.dir / "link.toml").symlink_to(outside / "flow.toml")
    for name in ("link.toml", str(outside / "flow.toml")):
        ran = kit("workflow", "run", name)
        assert ran.error["code"] == "E_FORBIDDEN" and ran.error["details"]["rule"] == "run.definitions", ran.stdout
    assert kit("workflow", "run", "flow.toml").result["workflow"]["state"] == "awaiting_approval"


def test_a_symlink_to_an_allowed_definition_runs_its_commands_where_the_definition_is(sw):
    """A symlink elsewhere to an allowed definition passed the check (symlinks resolved) and ran
    its `./mark.sh` from the symlink's own directory: whoever could make a symlink ran a program
    of their own. The file a symlink names is what is checked, read and run from."""
    allowed = (sw.tmp / "flows").resolve()
    kit = _kit_with_policy(sw, f'[run]\ndefinitions = ["{allowed}/*.toml"]\n')
    kit.write('name = "w"\n[[step]]\nname = "deploy"\nrun = ["./mark.sh", "deploy"]\n')
    theirs = sw.tmp / "theirs"
    theirs.mkdir()
    (theirs / "mark.sh").write_text(f"#!/bin/sh\ntouch {theirs}/ran\n")
    (theirs / "mark.sh").chmod(0o755)
    (theirs / "link.toml").symlink_to(kit.dir / "flow.toml")
    ran = kit("workflow", "run", str(theirs / "link.toml"))
    assert ran.exit == 0, ran.stdout
    assert not (theirs / "ran").exists() and kit.marks() == ["deploy"]
    workflow = ran.result["workflow"]
    assert (workflow["base_dir"], workflow["source"]) == (str(allowed), str(allowed / "flow.toml"))


def test_a_file_the_policy_does_not_allow_is_not_read(sw):
    """`workflow run` read the file before it asked the policy: its refusal of a file outside
    `[run] definitions` (a secret's file, /etc/shadow) said what the TOML parser found in it."""
    kit = _kit_with_policy(sw, f'[run]\ndefinitions = ["{(sw.tmp / "flows").resolve()}/*.toml"]\n')
    secret = sw.tmp / "secret.env"
    secret.write_text("DB_PASSWORD = 'hunter2-hunter2'\n")
    ran = kit("workflow", "run", str(secret))
    assert (ran.exit, ran.error["code"], ran.error["details"]["rule"]) == (6, "E_FORBIDDEN", "run.definitions"), ran.stdout
    assert "DB_PASSWORD" not in ran.stdout + ran.stderr and "hunter2" not in ran.stdout + ran.stderr


def test_approve_rules_keep_a_creator_from_approving_its_own_gate(sw):
    kit = _kit_with_policy(sw, '[approve]\nself = false\nactors = ["human/*", "agent/*"]\n')
    kit.write(FLOW.replace("release/v1", "staging"))
    kit("workflow", "run", "flow.toml", actor=AGENT)
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    ran = kit("workflow", "approve", wf, actor=AGENT)
    assert ran.error["code"] == "E_FORBIDDEN" and ran.error["details"]["rule"] == "approve.self", ran.stdout
    ran = kit("workflow", "approve", wf, actor="ci/bot")
    assert ran.error["details"]["rule"] == "approve.actors", ran.stdout
    assert kit("workflow", "approve", wf, actor=OTHER_AGENT).result["approved_by"] == OTHER_AGENT


def test_workflow_others_keeps_an_agent_off_another_actors_workflow(sw):
    kit = _kit_with_policy(sw, '[workflow]\nothers = ["human/*"]\n')
    kit.write(FLOW.replace("release/v1", "staging"))
    kit("workflow", "run", "flow.toml", actor=AGENT)
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    for args in (("workflow", "cancel", wf), ("workflow", "rollback", wf, "--confirm")):
        ran = kit(*args, actor=OTHER_AGENT)
        assert ran.error["code"] == "E_FORBIDDEN" and ran.error["details"]["rule"] == "workflow.others", ran.stdout
    preview = kit("workflow", "rollback", wf, actor=OTHER_AGENT).result
    assert [b["code"] for b in preview["blast_radius"]["blockers"]] == ["forbidden"] and preview["next"] is None
    kit("workflow", "approve", wf, actor=OTHER_AGENT)
    ran = kit("workflow", "resume", wf, actor=OTHER_AGENT)
    assert ran.error["details"]["rule"] == "workflow.others", ran.stdout
    assert kit("workflow", "resume", wf, actor=ALICE).result["workflow"]["state"] == "completed"


def test_a_store_step_on_a_protected_ref_fails_and_its_rollback_is_predicted_forbidden(sw):
    kit = Kit(sw)
    kit.write(FLOW)
    kit("workflow", "run", "flow.toml", actor=AGENT)  # promote moved release/v1, before any policy
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    (kit.dir / "policy.toml").write_text(POLICY)
    kit("policy", "set", "policy.toml")
    preview = kit("workflow", "rollback", wf, actor=AGENT).result
    blockers = preview["blast_radius"]["blockers"]
    assert [(b["code"], b["rule"], b["step"]) for b in blockers] == [("forbidden", "protect[0]", "promote")]
    predicted = preview["blast_radius"]["would_roll_back"][0]["predicted"]
    assert predicted["code"] == "E_FORBIDDEN"
    ran = kit("workflow", "rollback", wf, "--confirm", actor=AGENT)
    assert ran.error["code"] == "E_FORBIDDEN" and ran.error["details"]["rule"] == "protect[0]", ran.stdout
    assert kit.marks() == []
    # A new run's store step on the protected ref fails with the refusal.
    ran = kit("workflow", "run", "flow.toml", actor=AGENT)
    assert ran.error["code"] == "E_STEP_FAILED", ran.stdout
    assert "E_FORBIDDEN" in ran.stdout


# --- a refusal, byte for byte ---------------------------------------------------------------------


def test_a_refusal_as_the_user_sees_it(sw, golden, backend):
    store = Store(sw)
    runs = [
        store(AGENT, "ref", "set", "release/v1", "main"),
        store(OTHER_AGENT, "op", "undo", "6", "--dry-run"),
        store(None, "policy", "check", "--actor", AGENT, "ref_delete", '{"name": "main"}'),
    ]
    assert sw.transcript(*runs) == golden


def _format(sw, path=None) -> int:
    conn = sqlite3.connect((path or sw.store) / "swarmops.db")
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0])
    finally:
        conn.close()
