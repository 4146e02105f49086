"""Properties over generated input: ref names against git itself, and random command sequences
against the store's invariants (one well-formed envelope each, the exit code of its error,
nothing written by a failure, a store that always passes its own consistency check)."""

import json
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from core_helpers import AGENT, ALICE, CI, connect, file_digests, op_count, problems, refs

from swarmctl import names
from swarmctl.envelope import ERROR_CODES

GIT = shutil.which("git")

# Characters around which git's rules turn: separators, dots, the lock suffix, @{, the forbidden
# punctuation and control characters, and some ordinary and non-ASCII letters.
_TRICKY = list("ab0-_./@{}lock ~^:?*[]\\\t\x7f\x01") + ["é", "ø", "\u2028"]
_COMPONENT = st.text(alphabet=_TRICKY, min_size=0, max_size=8) | st.sampled_from(
    ["", ".", "..", ".lock", "a.lock", "@", "@{", "v1", "main", ".hidden"]
)
_REF_NAMES = st.one_of(
    st.text(alphabet=_TRICKY, min_size=0, max_size=16),
    st.lists(_COMPONENT, min_size=1, max_size=4).map("/".join),
)


def git_accepts(name: str) -> bool:
    proc = subprocess.run(["git", "check-ref-format", "--allow-onelevel", name], capture_output=True)
    return proc.returncode == 0


@pytest.mark.skipif(GIT is None, reason="git is the oracle here")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REF_NAMES)
@example("main")
@example("release/v1")
@example("@")
@example("a@{b")
@example("a/.b")
@example("a.lock/b")
@example("a/b.lock")
@example("a..b")
@example("a/")
@example("/a")
@example("a//b")
@example("a.")
@example("a b")
@example("é/ø")
@example("a@b")
@example("{}")
def test_ref_names_are_what_git_accepts(name):
    # What git cannot be asked: NUL cannot be passed in an argument, and check-ref-format takes
    # a leading '-' for an option. Both are rejected here (the test below).
    assume("\x00" not in name and not name.startswith("-"))
    assert (names.ref_name_problem(name) is None) == git_accepts(name), name


def test_ref_names_git_cannot_be_asked_about():
    assert names.ref_name_problem("a\x00b") is not None
    # As git's branch names (`git check-ref-format --branch -a` fails): it would read as an option.
    assert names.ref_name_problem("-a") == "it begins with '-'"
    assert names.ref_name_problem("a/-b") is None and git_accepts("a/-b")
    assert names.ref_name_problem("a" * 255) is None and names.ref_name_problem("a" * 256) is not None



def test_a_forbidden_character_is_named_as_git_forbids_it():
    """names.py checks a ref name's characters with a set, not a pattern: the same characters
    as git's rule (controls, space, DEL, ~ ^ : ? * [ \\), and the first one is named."""
    git_forbids = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
    for code in range(0x300):
        c = chr(code)
        expected = f"it contains the character {c!r}" if git_forbids.match(c) else None
        assert names.ref_name_problem(f"a{c}b") == expected, repr(c)
    assert names.ref_name_problem("a:b c") == "it contains the character ':'"

# --- random command sequences --------------------------------------------------------------------

ACTORS = [ALICE, AGENT, CI]
REF_NAMES = ["main", "release/v1", "feature/x"]


class StoreMachine(RuleBasedStateMachine):
    """Random mutations and reads by several actors, each checked against the store's invariants."""

    def __init__(self):
        super().__init__()
        self.sw = None

    @initialize()
    def make_store(self):
        sw = self.sw = _CURRENT["sw"]
        _remove_store(sw)
        self.run("--as", ACTORS[0], "init", str(sw.store))
        self.changesets = []

    def run(self, *args, expect_write=None):
        """Run one command; check the envelope and what it did to the store."""
        store = self.sw.store
        before = (op_count(store), file_digests(store)) if _has_store(self.sw) else None
        ran = self.sw(*args)
        lines = ran.stdout.splitlines()
        assert len(lines) == 1, ran.stdout
        env = json.loads(lines[0])
        assert list(env) == (["ok", "op", "api", "result", "meta"] if env["ok"] else ["ok", "op", "api", "error", "meta"])
        assert list(env["meta"]) == ["repo", "elapsed_ms", "resolved", "auth"]
        if env["ok"]:
            assert ran.exit == 0
        else:
            assert list(env["error"]) == ["code", "message", "details", "hint", "next"]
            assert ran.exit == ERROR_CODES[env["error"]["code"]].exit != 70, env
            assert before is None or (op_count(store), file_digests(store)) == before, "a failure wrote"
        return env

    def mine(self, actor):
        return ("--repo", str(self.sw.store), "--as", actor)

    @rule(actor=st.sampled_from(ACTORS), ref=st.sampled_from([None, *REF_NAMES]), message=st.text(min_size=1, max_size=5))
    def create_changeset(self, actor, ref, message):
        args = [*self.mine(actor), "changeset", "create", "-m", message]
        env = self.run(*args, *(["--ref", ref] if ref else []))
        if env["ok"]:
            self.changesets.append(env["result"]["changeset"]["id"])

    @precondition(lambda self: self.changesets)
    @rule(
        actor=st.sampled_from(ACTORS),
        ref=st.sampled_from(REF_NAMES),
        pick=st.integers(0, 100),
        cas=st.sampled_from(["none", "create", "expect-right", "expect-other"]),
    )
    def set_ref(self, actor, ref, pick, cas):
        target = self.changesets[pick % len(self.changesets)]
        now = refs(self.sw.store).get(ref)
        extra = {
            "none": [],
            "create": ["--create"],
            "expect-right": ["--expect", now] if now else ["--create"],
            "expect-other": ["--expect", self.changesets[(pick + 1) % len(self.changesets)]],
        }[cas]
        env = self.run(*self.mine(actor), "ref", "set", ref, target, *extra)
        should_fail = (cas == "create" and now is not None) or (
            cas == "expect-other" and self.changesets[(pick + 1) % len(self.changesets)] != now
        )
        assert env["ok"] != should_fail, env
        if env["ok"]:
            assert refs(self.sw.store)[ref] == target

    @rule(actor=st.sampled_from(ACTORS), ref=st.sampled_from(REF_NAMES))
    def delete_ref(self, actor, ref):
        self.run(*self.mine(actor), "ref", "delete", ref)

    @rule(actor=st.sampled_from(ACTORS), back=st.integers(0, 12), dry=st.booleans(), at=st.booleans())
    def undo(self, actor, back, dry, at):
        newest = op_count(self.sw.store)
        which = "@" if at else str(max(1, newest - back))
        before = (op_count(self.sw.store), file_digests(self.sw.store))
        env = self.run(*self.mine(actor), "op", "undo", which, *(["--dry-run"] if dry else []))
        if dry or (env["ok"] and env["result"]["already_applied"]):
            assert (op_count(self.sw.store), file_digests(self.sw.store)) == before
        if env["ok"] and not dry and not env["result"]["already_applied"]:
            assert env["result"]["op"] == newest + 1
            now = refs(self.sw.store)
            for move in env["result"]["ref_moves"]:
                assert now.get(move["name"]) == move["new"]
        if not env["ok"]:
            assert env["error"]["code"] in {"E_CAS_MISMATCH", "E_NOTHING_TO_UNDO", "E_NOT_FOUND"}, env
        if at and env["ok"]:
            assert self.sw.ok("--repo", str(self.sw.store), "op", "show", str(env["meta"]["resolved"]["@"]))["actor"] == actor

    @rule(n=st.integers(1, 5), actor=st.sampled_from([None, *ACTORS]), ref=st.sampled_from([None, *REF_NAMES]))
    def read_log(self, n, actor, ref):
        args = ["--repo", str(self.sw.store), "op", "log", "-n", str(n)]
        args += ["--actor", actor] if actor else []
        args += ["--ref", ref] if ref else []
        before = file_digests(self.sw.store)
        env = self.run(*args)
        assert file_digests(self.sw.store) == before
        ops = env["result"]["ops"]
        assert len(ops) <= n and [o["op"] for o in ops] == sorted((o["op"] for o in ops), reverse=True)
        assert all(o["actor"] == actor for o in ops) if actor else True
        assert all(any(m["name"] == ref for m in o["ref_moves"]) for o in ops) if ref else True

    @invariant()
    def store_is_consistent(self):
        if self.sw is not None and _has_store(self.sw):
            assert problems(self.sw.store) == []


def _has_store(sw) -> bool:
    if sw.url is None:
        return (sw.store / "swarmops.db").exists()
    conn = connect(sw.store)  # in the store's schema, which may not be there yet
    try:
        return conn.execute("SELECT to_regclass('meta')").fetchone()[0] is not None
    finally:
        conn.close()


def _remove_store(sw) -> None:
    """Each example starts without a store: a local one's directory, or a server's schema, gone."""
    if sw.url is None:
        if sw.store.exists():
            shutil.rmtree(sw.store)
        return
    from swarmctl.store.postgres.url import parse

    conn = connect(sw.store)
    try:
        conn.execute(f'DROP SCHEMA IF EXISTS "{parse(sw.store).schema}" CASCADE')
    finally:
        conn.close()


_CURRENT: dict = {}


@pytest.mark.backends("sqlite", "postgres")
def test_random_command_sequences_keep_the_store_consistent(sw):
    _CURRENT["sw"] = sw
    StoreMachine.TestCase.settings = settings(
        # On PostgreSQL fewer: the same rules, checked against the server's SQL (the suite's time).
        max_examples=12 if sw.url is None else 4, stateful_step_count=25, deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    StoreMachine.TestCase().runTest()
