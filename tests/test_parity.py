"""For every MCP tool, the CLI and the MCP server print the same envelope on the same store.

One table, CASES, holds for each tool the command line and the MCP arguments that mean the
same call (and what to set up first). The test is generated from the registry: an MCP tool
without a case fails, loudly, until it gets one; a case naming no tool fails too. A new tool
is one entry here.

A case that names a workflow its setup created writes "{workflow}" in its command line and
arguments (ids are random): `fill` (swarmctl/gen/examples.py, shared with the reference
examples) replaces it with the newest workflow's id just before each command, setup included.
Files a case needs are written by `write_files` from the same place (a `#!` script is made
executable).

Each case runs on a fresh copy of the golden store (tests/conftest.py), three times: the CLI
command (`swarmctl --repo STORE --as agent/worker-17 ...`), `swarmctl call TOOL JSON`, and
`tools/call` on a real `swarmctl mcp` process started once for the module. The three
envelopes must be equal after normalisation, byte for byte in their compact form, and each
must fit the tool's outputSchema.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest

from core_helpers import AGENT, build_golden_store, op_count, refs
from golden import Normalizer
from mcp_client import McpClient
from swarm import Swarm
from swarmctl import registry, schemas
from swarmctl.envelope import exit_status
from swarmctl.gen.examples import RELEASE, WORKFLOW, fill, write_files


class Case(NamedTuple):
    cli: tuple[str, ...]  # the command after `swarmctl --repo STORE --as AGENT`
    arguments: dict[str, Any]  # the same call's MCP arguments
    setup: tuple[tuple[str, ...], ...] = ()  # commands run on the golden store first, as above; each must succeed, or be a Fails
    files: dict[str, str] = {}  # files written to the working directory first (--file, workflows, their scripts)


class Fails(tuple):
    """A setup command that must fail with `code`: how a case reaches a failed workflow or a
    Conflicted transaction. `Fails("E_STEP_FAILED", "workflow", "run", "broken.toml")`."""

    code: str

    def __new__(cls, code: str, *words: str) -> "Fails":
        command = super().__new__(cls, words)
        command.code = code
        return command


# Transactions: the setup commands, run as AGENT (the transaction is theirs).
BEGIN = ("tx", "begin")
STAGE_V2 = ("tx", "set", "release/v2", "main")
DELETE_V1 = ("tx", "delete", "release/v1")
MOVE_V1 = ("changeset", "create", "-m", "Hotfix on v1", "--ref", "release/v1")  # op 7: the store moves under a tx

# Workflows: release.toml (a store step, a gate, a command with a rollback) and its scripts, as
# the reference pages' examples use them, and broken.toml (a command that fails) with its
# script, in the working directory.
FLOWS = {
    **RELEASE,
    "broken.toml": """\
name = "broken"
[[step]]
name = "promote"
ref_set = { name = "release/v2", to = "main" }
[[step]]
name = "check"
run = ["./check.sh"]
timeout_s = 60
""",
    "check.sh": '#!/bin/sh\necho "check.sh: the target refused" >&2\nexit 3\n',
}
RUN = ("workflow", "run", "release.toml")
APPROVE = ("workflow", "approve", WORKFLOW)
COMPLETED = (RUN, APPROVE, ("workflow", "resume", WORKFLOW))
BROKEN = Fails("E_STEP_FAILED", "workflow", "run", "broken.toml")  # promote ran; check failed
CONFLICTED = Fails("E_CAS_MISMATCH", "tx", "commit")  # after MOVE_V1: the transaction is Conflicted

# Policies (README: Policy), set by AGENT, who may while no policy is set. POLICY protects main
# and release/* for people and keeps agents from undoing others' ops; ADMINS lets only people
# change the policy; SELF_APPROVAL keeps a workflow's creator from approving its own gate; RUNS
# lets no one run a workflow from this directory.
POLICY = """\
[[protect]]
refs = ["main", "release/*"]
actors = ["human/*"]

[undo]
others = ["human/*"]
"""
POLICIES = {
    "policy.toml": POLICY,
    "admins.toml": 'admins = ["human/*"]\n',
    "self-approval.toml": "[approve]\nself = false\n",
    "runs.toml": '[run]\ndefinitions = ["/srv/workflows/**"]\n',
}
SET_POLICY = ("policy", "set", "policy.toml")


# On the golden store: ops 1-6; main names "Fix flaky deploy check" (op 5), release/v1 too (op 6).
CASES: dict[str, list[Case]] = {
    "changeset_create": [
        Case(
            ("changeset", "create", "-m", "Hotfix", "--ref", "main", "--meta", "ticket=OPS-9", "--file", "NOTES.md"),
            {"message": "Hotfix", "ref": "main", "metadata": {"ticket": "OPS-9"}, "files": {"NOTES.md": "v1.0.1\n"}},
            files={"NOTES.md": "v1.0.1\n"},
        ),
    ],
    "changeset_show": [Case(("changeset", "show", "release/v1"), {"id": "release/v1"})],
    "ref_set": [
        Case(("ref", "set", "hotfix", "main", "--create"), {"name": "hotfix", "target": "main", "create": True}),
        Case(("ref", "set", "main", "release/v1", "--create"), {"name": "main", "target": "release/v1", "create": True}),
        Case(("ref", "set", "hotfix", "main"), {"name": "hotfix", "target": "main"}, setup=(SET_POLICY,), files=POLICIES),  # not protected
        Case(("ref", "set", "release/v2", "main"), {"name": "release/v2", "target": "main"}, setup=(SET_POLICY,), files=POLICIES),  # protect: E_FORBIDDEN
        Case(
            ("ref", "set", "release/v1", "main", "--create"),
            {"name": "release/v1", "target": "main", "create": True},
            setup=(SET_POLICY,),
            files=POLICIES,
        ),  # forbidden and a compare-and-swap conflict (it exists): forbidden wins
    ],
    "ref_delete": [
        Case(("ref", "delete", "release/v1", "--expect", "main"), {"name": "release/v1", "expect": "main"}),
        Case(("ref", "delete", "release/v1"), {"name": "release/v1"}, setup=(SET_POLICY,), files=POLICIES),  # protect: E_FORBIDDEN
    ],
    "policy_set": [
        Case(("policy", "set", "policy.toml"), {"policy": POLICY}, files=POLICIES),
        Case(("policy", "set", "policy.toml"), {"policy": POLICY}, setup=(("policy", "set", "admins.toml"),), files=POLICIES),  # admins: E_FORBIDDEN
    ],
    "policy_show": [Case(("policy", "show"), {}, setup=(SET_POLICY,), files=POLICIES)],
    "policy_check": [
        Case(
            ("policy", "check", "--actor", AGENT, "ref_set", '{"name": "main", "target": "release/v1"}'),
            {"actor": AGENT, "tool": "ref_set", "arguments": {"name": "main", "target": "release/v1"}},
            setup=(SET_POLICY,),
            files=POLICIES,
        ),  # refused by protect[0]
        Case(
            ("policy", "check", "--actor", "human/alice", "undo", '{"op": 6}'),
            {"actor": "human/alice", "tool": "undo", "arguments": {"op": 6}},
            setup=(SET_POLICY,),
            files=POLICIES,
        ),  # allowed
    ],
    "ref_list": [Case(("ref", "list", "--prefix", "release/"), {"prefix": "release/"})],
    "ref_show": [Case(("ref", "show", "main"), {"name": "main"}), Case(("ref", "show", "nope"), {"name": "nope"})],
    "op_log": [
        Case(("op", "log", "-n", "2", "--actor", AGENT, "--reverse"), {"limit": 2, "actor": AGENT, "reverse": True}),
    ],
    "op_show": [Case(("op", "show", "@"), {"op": "@"})],
    "store_check": [Case(("store", "check"), {})],
    "store_upgrade": [Case(("store", "upgrade"), {})],
    "undo": [
        Case(("op", "undo", "6"), {"op": 6}),
        Case(("op", "undo", "6", "--dry-run"), {"op": 6, "dry_run": True}),
        Case(("op", "undo", "4"), {"op": 4}),  # release/v1 moved since (op 6): E_CAS_MISMATCH
        Case(("op", "undo", "6"), {"op": 6}, setup=(("op", "undo", "6"),)),  # a replay
        Case(("op", "undo", "4"), {"op": 4}, setup=(("policy", "set", "admins.toml"),), files=POLICIES),  # undo.others unset: E_CAS_MISMATCH as without a policy
        Case(("op", "undo", "4"), {"op": 4}, setup=(SET_POLICY,), files=POLICIES),  # op 4 is human/alice's: undo.others, E_FORBIDDEN (over the conflict)
        Case(("op", "undo", "@"), {"op": "@"}, setup=(SET_POLICY,), files=POLICIES),  # @ is the policy_set: it is taken back
    ],
    "op_revert": [
        Case(("op", "revert", "--actor", AGENT), {"actor": AGENT}),  # ops 3, 5, 6: main and release/v1 back
        Case(("op", "revert", "--after", "4", "--dry-run"), {"after": 4, "dry_run": True}),
        Case(("op", "revert", "--before", "5"), {"before": 5}),  # ops 5 and 6 moved main and release/v1 since: E_CAS_MISMATCH
        Case(("op", "revert", "--actor", AGENT), {"actor": AGENT}, setup=(("op", "revert", "--actor", AGENT),)),  # a replay
        Case(("op", "revert"), {}),  # no filter: E_INVALID_ARG
    ],
    "op_restore": [
        Case(("op", "restore", "4"), {"op": 4}),  # the preview
        Case(("op", "restore", "4", "--confirm", "--expect-head", "6"), {"op": 4, "confirm": True, "expect_head": 6}),
        Case(
            ("op", "restore", "4", "--confirm", "--expect-head", "6"),
            {"op": 4, "confirm": True, "expect_head": 6},
            setup=(MOVE_V1,),
        ),  # op 7 since the preview: E_CAS_MISMATCH
        Case(("op", "restore", "2", "--ref", "release/v1"), {"op": 2, "ref": ["release/v1"]}),  # before it existed: deleted
    ],
    "schema": [Case(("schema", "UndoReq"), {"type": "UndoReq"})],
    "tx_begin": [
        Case(BEGIN, {}),
        Case(BEGIN, {}, setup=(BEGIN,)),  # one open transaction per actor: E_STATE
    ],
    "tx_set": [
        Case(STAGE_V2, {"name": "release/v2", "target": "main"}, setup=(BEGIN,)),
        Case(STAGE_V2, {"name": "release/v2", "target": "main"}),  # no open transaction: E_STATE, next tx_begin
        Case(("tx", "set", "release/v2", "nope"), {"name": "release/v2", "target": "nope"}, setup=(BEGIN,)),  # E_NOT_FOUND
    ],
    "tx_delete": [
        Case(DELETE_V1, {"name": "release/v1"}, setup=(BEGIN, STAGE_V2)),
        Case(("tx", "delete", "nope"), {"name": "nope"}, setup=(BEGIN,)),  # E_NOT_FOUND
    ],
    "tx_status": [
        Case(("tx", "status"), {}),  # Ready: no open transaction
        # An undone revision can be redone; release/v1 moving does not count while its delete is undone.
        Case(("tx", "status"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1, ("tx", "undo"), MOVE_V1)),
        Case(("tx", "status"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1, MOVE_V1)),  # moved: release/v1 by op 7
        Case(("tx", "status"), {}, setup=(BEGIN, DELETE_V1, MOVE_V1, CONFLICTED)),  # Conflicted
    ],
    "tx_undo": [
        Case(("tx", "undo"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1)),
        Case(("tx", "undo"), {}, setup=(BEGIN,)),  # nothing to undo: E_STATE
    ],
    "tx_redo": [
        Case(("tx", "redo"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1, ("tx", "undo"))),
        Case(("tx", "redo"), {}, setup=(BEGIN, STAGE_V2)),  # nothing undone: E_STATE
    ],
    "tx_commit": [
        Case(("tx", "commit", "-m", "Cut release/v2"), {"message": "Cut release/v2"}, setup=(BEGIN, STAGE_V2, DELETE_V1)),
        Case(("tx", "commit"), {}, setup=(BEGIN,)),  # nothing staged: E_STATE
        Case(("tx", "commit"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1, MOVE_V1)),  # E_CAS_MISMATCH, now Conflicted
    ],
    "tx_rollback": [
        Case(("tx", "rollback"), {}, setup=(BEGIN, STAGE_V2, DELETE_V1)),  # Ready
        Case(("tx", "rollback"), {}, setup=(BEGIN, DELETE_V1, MOVE_V1, CONFLICTED)),  # OutOfDate, with its hint
        Case(("tx", "rollback"), {}, setup=(BEGIN, STAGE_V2, ("tx", "commit"))),  # committed: E_STATE, next op undo 7
    ],
    "tx_config": [
        Case(("tx", "config"), {}),
        Case(("tx", "config", "--max-revisions", "5"), {"max_revisions": 5}),
    ],
    "workflow_run": [
        Case(RUN, {"file": "release.toml"}, files=FLOWS),  # stops at the gate
        Case(("workflow", "run", "broken.toml"), {"file": "broken.toml"}, files=FLOWS),  # E_STEP_FAILED
        Case(("workflow", "run", "missing.toml"), {"file": "missing.toml"}),  # E_INVALID_ARG, nothing created
        Case(RUN, {"file": "release.toml"}, setup=(("policy", "set", "runs.toml"),), files={**FLOWS, **POLICIES}),  # run.definitions: E_FORBIDDEN
    ],
    "workflow_status": [
        Case(("workflow", "status", WORKFLOW), {"workflow": WORKFLOW}, setup=COMPLETED, files=FLOWS),
        Case(("workflow", "status", "wf-zzzzzzzz"), {"workflow": "wf-zzzzzzzz"}),  # E_NOT_FOUND
    ],
    "workflow_list": [
        Case(
            ("workflow", "list", "--state", "failed", "-n", "1"),
            {"state": "failed", "limit": 1},
            setup=(RUN, BROKEN),
            files=FLOWS,
        ),
    ],
    "workflow_approve": [
        Case(APPROVE, {"workflow": WORKFLOW}, setup=(RUN,), files=FLOWS),
        Case(APPROVE, {"workflow": WORKFLOW}, setup=(RUN, APPROVE), files=FLOWS),  # a replay: already_approved
        Case(
            (*APPROVE, "--step", "deploy"), {"workflow": WORKFLOW, "step": "deploy"}, setup=(RUN,), files=FLOWS
        ),  # not a gate: E_INVALID_ARG
        Case(
            APPROVE, {"workflow": WORKFLOW}, setup=(("policy", "set", "self-approval.toml"), RUN), files={**FLOWS, **POLICIES}
        ),  # approve.self: its creator may not approve its gate, E_FORBIDDEN
    ],
    "workflow_resume": [
        Case(("workflow", "resume", WORKFLOW), {"workflow": WORKFLOW}, setup=(RUN, APPROVE), files=FLOWS),
        Case(("workflow", "resume", WORKFLOW), {"workflow": WORKFLOW}, setup=(RUN,), files=FLOWS),  # not approved: E_STATE
        Case(
            ("workflow", "resume", WORKFLOW, "--retry", "check"),
            {"workflow": WORKFLOW, "retry": "check"},
            setup=(BROKEN,),
            files=FLOWS,
        ),  # fails again: E_STEP_FAILED, attempts 2
    ],
    "workflow_cancel": [
        Case(("workflow", "cancel", WORKFLOW), {"workflow": WORKFLOW}, setup=(RUN,), files=FLOWS),
        Case(("workflow", "cancel", WORKFLOW), {"workflow": WORKFLOW}, setup=COMPLETED, files=FLOWS),  # E_STATE
    ],
    "workflow_rollback": [
        Case(
            ("workflow", "rollback", WORKFLOW, "--include-completed"),
            {"workflow": WORKFLOW, "include_completed": True},
            setup=COMPLETED,
            files=FLOWS,
        ),  # the preview
        Case(
            ("workflow", "rollback", WORKFLOW, "--include-completed", "--confirm"),
            {"workflow": WORKFLOW, "include_completed": True, "confirm": True},
            setup=COMPLETED,
            files=FLOWS,
        ),  # undeploy.sh runs, op 7 is undone
        Case(
            ("workflow", "rollback", WORKFLOW, "--confirm"),
            {"workflow": WORKFLOW, "confirm": True},
            setup=COMPLETED,
            files=FLOWS,
        ),  # completed, without --include-completed: E_REFUSED
        Case(
            ("workflow", "rollback", WORKFLOW),
            {"workflow": WORKFLOW},
            setup=(RUN, ("changeset", "create", "-m", "Hotfix on v2", "--ref", "release/v2")),
            files=FLOWS,
        ),  # release/v2 moved since (op 8): the undo of promote is predicted to fail with E_CAS_MISMATCH
        Case(
            ("workflow", "rollback", WORKFLOW, "--confirm"), {"workflow": WORKFLOW, "confirm": True}, setup=(BROKEN,), files=FLOWS
        ),  # a failed workflow: promote is undone, check is listed as not_reversed
    ],
    "workflow_show_definition": [
        Case(("workflow", "show-definition", WORKFLOW), {"workflow": WORKFLOW}, setup=(RUN,), files=FLOWS),
    ],
}


# Arguments that do not fit the request type: each door says so in its own words (Typer's
# usage text, the request type's validation), with the same code and exit status.
ARGUMENT_ERRORS: list[tuple[str, Case]] = [
    ("changeset_create", Case(("changeset", "create", "-m", ""), {"message": ""})),
    ("op_log", Case(("op", "log", "--kind", "nonsense"), {"kind": "nonsense"})),
    ("undo", Case(("op", "undo", "six"), {"op": "six"})),
    ("op_revert", Case(("op", "revert", "--after", "four"), {"after": "four"})),
    ("op_restore", Case(("op", "restore", "4", "--expect-head", "0", "--confirm"), {"op": 4, "expect_head": 0, "confirm": True})),
    ("ref_set", Case(("ref", "set", "main"), {"name": "main"})),
    ("tx_config", Case(("tx", "config", "--max-revisions", "0"), {"max_revisions": 0})),
    ("workflow_list", Case(("workflow", "list", "--state", "nonsense"), {"state": "nonsense"})),
]


def _params() -> list[Any]:
    found = []
    for tool in registry.mcp_tools():
        cases = CASES.get(tool.name, [])
        found += [pytest.param(tool.name, i, id=f"{tool.name}-{i}") for i in range(len(cases))]
        if not cases:
            found.append(pytest.param(tool.name, None, id=f"{tool.name}-no-case"))
    return found


def test_every_case_names_an_mcp_tool():
    served = {t.name for t in registry.mcp_tools()}
    assert set(CASES) <= served, f"cases for tools that are not served over MCP: {sorted(set(CASES) - served)}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


@pytest.fixture(scope="module")
def server(workdir: Path):
    with McpClient(workdir / "store", AGENT, cwd=workdir) as client:
        yield client


@pytest.mark.parametrize("name, index", _params())
def test_cli_call_and_mcp_give_the_same_envelope(name, index, workdir, server, monkeypatch):
    if index is None:
        pytest.fail(
            f"MCP tool {name!r} has no parity case: add its command line and MCP arguments to CASES "
            "in tests/test_parity.py"
        )
    case = CASES[name][index]
    sw = Swarm(workdir, monkeypatch)
    pristine = _golden_store(sw, case)
    globals_ = ("--repo", str(sw.store), "--as", AGENT)
    words, arguments = fill(case.cli, sw.store), fill(case.arguments, sw.store)

    cli = sw(*globals_, *words)
    _restore(sw.store, pristine)
    call = sw(*globals_, "call", name, json.dumps(arguments))
    _restore(sw.store, pristine)
    mcp = server.envelope(name, arguments)

    texts = [_normalized(json.dumps(e, separators=(",", ":"), ensure_ascii=False), workdir) for e in (cli.envelope, call.envelope, mcp)]
    assert texts[0] == texts[1], f"`swarmctl call` differs from the CLI:\n{texts[0]}\n{texts[1]}"
    assert texts[0] == texts[2], f"MCP differs from the CLI:\n{texts[0]}\n{texts[2]}"
    assert cli.exit == call.exit == exit_status(mcp)
    validator = jsonschema.Draft202012Validator(schemas.envelope_schema(registry.get(name)))
    for envelope in (cli.envelope, call.envelope, mcp):
        validator.validate(envelope)


def _golden_store(sw: Swarm, case: Case) -> Path:
    """A fresh golden store with the case's setup, and a copy of it to restore from."""
    pristine = sw.tmp / "pristine"
    for path in (sw.store, pristine):
        shutil.rmtree(path, ignore_errors=True)
    build_golden_store(sw)
    write_files(sw.tmp, case.files)
    for command in case.setup:
        ran = sw("--repo", str(sw.store), "--as", AGENT, *fill(tuple(command), sw.store))
        if isinstance(command, Fails):
            assert ran.error["code"] == command.code, ran.transcript()
        else:
            assert ran.exit == 0, ran.transcript() + ran.stderr
    shutil.copytree(sw.store, pristine)
    return pristine


def _restore(store: Path, pristine: Path) -> None:
    shutil.rmtree(store)
    shutil.copytree(pristine, store)


def _normalized(text: str, workdir: Path) -> str:
    return Normalizer(workdir)(text)


@pytest.mark.parametrize("name, case", ARGUMENT_ERRORS, ids=[" ".join(c.cli) for _, c in ARGUMENT_ERRORS])
def test_arguments_that_do_not_fit_are_invalid_at_every_door(name, case, workdir, server, monkeypatch):
    sw = Swarm(workdir, monkeypatch)
    pristine = _golden_store(sw, case)
    cli = sw("--repo", str(sw.store), "--as", AGENT, *case.cli)
    call = sw("--repo", str(sw.store), "--as", AGENT, "call", name, json.dumps(case.arguments))
    mcp = server.envelope(name, case.arguments)
    for envelope in (cli.envelope, call.envelope, mcp):
        assert envelope["op"] == name and envelope["error"]["code"] == "E_INVALID_ARG", envelope
    assert cli.exit == call.exit == 2
    assert _store_state(sw.store) == _store_state(pristine), "an invalid call wrote to the store"


def _store_state(store: Path) -> tuple[Any, ...]:
    return op_count(store), refs(store)
