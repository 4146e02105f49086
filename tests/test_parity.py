"""For every MCP tool, the CLI and the MCP server print the same envelope on the same store.

One table, CASES, holds for each tool the command line and the MCP arguments that mean the
same call (and what to set up first). The test is generated from the registry: an MCP tool
without a case fails, loudly, until it gets one; a case naming no tool fails too. A new tool
is one entry here.

Each case runs on a fresh copy of the golden store (tests/conftest.py), three times: the CLI
command (`swarmctl --repo STORE --as agent/worker-17 ...`), `swarmctl call TOOL JSON`, and
`tools/call` on a real `swarmctl mcp` process started once for the module. The three
envelopes must be equal after normalisation, byte for byte in their compact form, and each
must fit the tool's outputSchema.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest

from conftest import Swarm, build_golden_store
from golden import Normalizer
from mcp_client import McpClient
from swarmctl import registry, schemas
from swarmctl.envelope import exit_status
from swarmctl.store.schema import DB_FILE

ACTOR = "agent/worker-17"


class Case(NamedTuple):
    cli: tuple[str, ...]  # the command after `swarmctl --repo STORE --as ACTOR`
    arguments: dict[str, Any]  # the same call's MCP arguments
    setup: tuple[tuple[str, ...], ...] = ()  # commands run on the golden store first, as above
    files: dict[str, str] = {}  # files written to the working directory first (for --file, workflows)


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
    ],
    "ref_delete": [Case(("ref", "delete", "release/v1", "--expect", "main"), {"name": "release/v1", "expect": "main"})],
    "ref_list": [Case(("ref", "list", "--prefix", "release/"), {"prefix": "release/"})],
    "ref_show": [Case(("ref", "show", "main"), {"name": "main"}), Case(("ref", "show", "nope"), {"name": "nope"})],
    "op_log": [
        Case(("op", "log", "-n", "2", "--actor", ACTOR, "--reverse"), {"limit": 2, "actor": ACTOR, "reverse": True}),
    ],
    "op_show": [Case(("op", "show", "@"), {"op": "@"})],
    "undo": [
        Case(("op", "undo", "6"), {"op": 6}),
        Case(("op", "undo", "6", "--dry-run"), {"op": 6, "dry_run": True}),
        Case(("op", "undo", "4"), {"op": 4}),  # release/v1 moved since (op 6): E_CAS_MISMATCH
        Case(("op", "undo", "6"), {"op": 6}, setup=(("op", "undo", "6"),)),  # a replay
    ],
    "schema": [Case(("schema", "UndoReq"), {"type": "UndoReq"})],
}


# Arguments that do not fit the request type: each door says so in its own words (Typer's
# usage text, the request type's validation), with the same code and exit status.
ARGUMENT_ERRORS: list[tuple[str, Case]] = [
    ("changeset_create", Case(("changeset", "create", "-m", ""), {"message": ""})),
    ("op_log", Case(("op", "log", "--kind", "nonsense"), {"kind": "nonsense"})),
    ("undo", Case(("op", "undo", "six"), {"op": "six"})),
    ("ref_set", Case(("ref", "set", "main"), {"name": "main"})),
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
    with McpClient(workdir / "store", ACTOR, cwd=workdir) as client:
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
    globals_ = ("--repo", str(sw.store), "--as", ACTOR)

    cli = sw(*globals_, *case.cli)
    _restore(sw.store, pristine)
    call = sw(*globals_, "call", name, json.dumps(case.arguments))
    _restore(sw.store, pristine)
    mcp = server.envelope(name, case.arguments)

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
    for path, text in case.files.items():
        (sw.tmp / path).write_text(text)
    for command in case.setup:
        sw.ok("--repo", str(sw.store), "--as", ACTOR, *command)
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
    cli = sw("--repo", str(sw.store), "--as", ACTOR, *case.cli)
    call = sw("--repo", str(sw.store), "--as", ACTOR, "call", name, json.dumps(case.arguments))
    mcp = server.envelope(name, case.arguments)
    for envelope in (cli.envelope, call.envelope, mcp):
        assert envelope["op"] == name and envelope["error"]["code"] == "E_INVALID_ARG", envelope
    assert cli.exit == call.exit == 2
    assert _store_state(sw.store) == _store_state(pristine), "an invalid call wrote to the store"


def _store_state(store: Path) -> tuple[Any, ...]:
    conn = sqlite3.connect(f"{(store / DB_FILE).as_uri()}?mode=ro", uri=True)
    try:
        return (
            conn.execute("SELECT max(op) FROM ops").fetchone(),
            conn.execute("SELECT name, target FROM refs ORDER BY name").fetchall(),
        )
    finally:
        conn.close()
