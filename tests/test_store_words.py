"""store/ knows nothing of the CLI: no hint it writes names a swarmctl command (`swarmctl ...`). It
raises typed errors (store/errors.py: NotFound, Ambiguous, NoStore, NoDatabase, NoSchema,
StoreDamaged); tools/ word them for people (tools/common.py)."""

import ast

import pytest

from core_helpers import build_golden_store
from golden import ROOT
from swarmctl.envelope import SwarmError
from swarmctl.store import Store, queries
from swarmctl.store.errors import Ambiguous, CommitUnknown, NoStore, NotFound
from swarmctl.tools import common


def hints_in(path) -> list[str]:
    """The text of each `hint=` given in `path` (the string parts of an f-string too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "hint":
            found.append("".join(
                c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ))
    return found


def texts_in(path) -> list[str]:
    """Every string in `path`'s code but its docstrings (a hint kept in a variable too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_no_hint_in_store_names_a_command():
    paths = sorted((ROOT / "swarmctl" / "store").rglob("*.py"))
    named = [(p.relative_to(ROOT), h) for p in paths for h in hints_in(p) if "`swarmctl " in h]
    assert named == []
    assert any("`swarmctl " in h for h in hints_in(ROOT / "swarmctl" / "tools" / "common.py"))  # it sees them


def test_no_text_in_store_names_a_command():
    """Nor a message, nor a hint built apart from its `hint=` (docstrings may name commands)."""
    paths = sorted((ROOT / "swarmctl" / "store").rglob("*.py"))
    named = [(p.relative_to(ROOT), t) for p in paths for t in texts_in(p) if "`swarmctl " in t]
    assert named == []
    assert any("`swarmctl " in t for t in texts_in(ROOT / "swarmctl" / "tools" / "common.py"))  # it sees them


def test_a_write_of_unknown_outcome_is_worded_by_tools():
    """PostgreSQL's lost COMMIT (tests/test_pg_commit.py runs it) raises CommitUnknown, hintless;
    tools/ say what to do."""
    error = common.worded(CommitUnknown("lost the connection during COMMIT", {"repo": "x", "commit_unknown": True}))
    assert (error.code, error.details["commit_unknown"]) == ("E_UNAVAILABLE", True)
    assert "may have committed" in error.hint and "`swarmctl op log`" in error.hint


def test_the_store_raises_typed_lookups_and_tools_word_them(sw):
    ids = build_golden_store(sw)
    store = Store.open(sw.store)
    try:
        with store.read() as conn:
            assert queries.changeset_by_prefix(conn, ids["base"][:8]) == ids["base"]
            with pytest.raises(NotFound) as missing:
                queries.changeset_by_prefix(conn, "0000")
            assert (missing.value.what, missing.value.given, missing.value.hint) == ("changeset", "0000", None)
            with pytest.raises(Ambiguous) as ambiguous:
                queries.changeset_by_prefix(conn, "")
            assert set(ids.values()) < set(ambiguous.value.candidates) and len(ambiguous.value.candidates) == 3
            with pytest.raises(SwarmError) as worded:
                common.changeset_id(conn, "0000")
            assert worded.value.code == "E_NOT_FOUND" and "`swarmctl op log`" in worded.value.hint
    finally:
        store.close()


def test_the_runner_words_a_missing_store(sw):
    error = common.worded(NoStore(sw.tmp / "nowhere"))
    assert error.code == "E_NOT_A_REPO" and "`swarmctl --as ACTOR init PATH`" in error.hint
    ran = sw("--repo", str(sw.tmp / "nowhere"), "op", "log")
    assert (ran.exit, ran.error["code"], ran.error["hint"]) == (5, "E_NOT_A_REPO", error.hint)
    # The command it gives runs, once ACTOR and PATH are filled in (`init` needs --as: without
    # it, the hint's command was E_IDENTITY_REQUIRED).
    assert sw.ok("--as", "human/alice", "init", str(sw.tmp / "nowhere"))["op"] == 1
