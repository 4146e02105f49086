"""For every MCP tool, the CLI and the MCP server print the same envelope on the same store,
and every example declared beside a tool ends as it says.

The cases are the tools' examples (`spec.Example`, declared in each area module's EXAMPLES and
read through `registry.examples`): for each, the command line and the MCP arguments that mean
the same call, what to set up first, and its outcome ("ok" or an error code). The test is
generated from the registry: an MCP tool without an example fails, loudly, until it gets one.

A case that names a workflow its setup created writes "{workflow}" in its command line and
arguments (ids are random): `fill` (swarmctl/gen/examples.py, shared with the reference
examples) replaces it with the newest workflow's id just before each call, setup included.
Files a case needs are written by `write_files` from the same place (a `#!` script is made
executable).

Each case runs on a fresh `swarmctl demo` store, four times: the CLI command (`swarmctl --repo
STORE --as agent/worker-17 ...`), `swarmctl call TOOL JSON`, `tools/call` on a real `swarmctl mcp`
process started once for the module, and `tools/call` over HTTP on a real `swarmctl mcp --http
127.0.0.1:0 --auth trust --allow-run` process (the SDK's Streamable HTTP client), also started
once. The four envelopes must be equal after normalisation, byte for byte in their compact form,
must fit the tool's outputSchema, and must end in the example's outcome.

All of it on both kinds of store: a local one, and one on the session's PostgreSQL server (one
schema for the module), with the two servers started once per kind. `swarmctl demo` runs once
per kind; each case starts from a copy of its store, and between the doors the store is put
back as the case's setup left it (core_helpers.Pristine).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest

from core_helpers import Pristine, op_count, refs, remove_store
from swarm import StoreNormalizer, Swarm
from mcp_client import HttpClient, HttpServer, McpClient
from swarmctl import registry, schemas
from swarmctl.envelope import exit_status
from swarmctl.gen.examples import ACTOR, fill, outcome_of, write_files
from swarmctl.spec import Example


def _params() -> list[Any]:
    found = []
    for tool in registry.mcp_tools():
        examples = registry.examples(tool)
        found += [pytest.param(tool.name, i, id=f"{tool.name}-{i}") for i in range(len(examples))]
        if not examples:
            found.append(pytest.param(tool.name, None, id=f"{tool.name}-no-example"))
    return found


def test_every_tool_has_an_example_and_every_example_names_its_tool():
    for tool in registry.tools():
        examples = registry.examples(tool)
        assert examples, f"{tool.name} has no example: add one to EXAMPLES in {tool.run.__module__}"
        assert examples[0].outcome == "ok", f"{tool.name}: the first example is the reference page's, and must succeed"
        for example in examples:
            assert tuple(example.cli[: len(tool.cli)]) == tool.cli, (tool.name, example.cli)
    for modules in registry.AREAS.values():
        for module in (modules,) if isinstance(modules, str) else modules:
            area = importlib.import_module(module)
            unknown = set(getattr(area, "EXAMPLES", {})) - {t.name for t in area.TOOLS}
            assert not unknown, f"{module}: examples of tools it does not define: {unknown}"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request) -> str:
    """The kind of store, for the whole module at once: the servers below are started per kind."""
    return request.param


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, backend: str) -> Path:
    return tmp_path_factory.mktemp(f"parity-{backend}")


@pytest.fixture(scope="module")
def store_url(backend: str, request) -> str | None:
    """On PostgreSQL, the URL of the module's store (one schema, put back as it was for each case)."""
    return request.getfixturevalue("pg_cluster").new_store_url() if backend == "postgres" else None


@pytest.fixture(scope="module")
def demo(workdir: Path, store_url: str | None) -> Pristine:
    """`swarmctl demo`, run once for the module: each case starts from a copy of it."""
    with pytest.MonkeyPatch.context() as mp:
        sw = Swarm(workdir, mp, store_url)
        remove_store(sw.store)
        sw.ok("demo", str(sw.store))
    return Pristine(sw.store, "demo").take()


@pytest.fixture(scope="module")
def server(workdir: Path, store_url: str | None):
    with McpClient(store_url or workdir / "store", ACTOR, cwd=workdir) as client:
        yield client


@pytest.fixture(scope="module")
def http_server(workdir: Path, store_url: str | None):
    store = store_url or str(workdir / "store")
    args = ("--repo", store, "--as", ACTOR, "mcp", "--http", "127.0.0.1:0", "--auth", "trust", "--allow-run")
    with HttpServer(*args, cwd=workdir) as process:
        assert process.url is not None, process.log()
        with HttpClient(process.url) as client:
            yield client


@pytest.mark.parametrize("name, index", _params())
def test_cli_call_and_mcp_give_the_same_envelope(name, index, workdir, store_url, demo, server, http_server, monkeypatch):
    if index is None:
        pytest.fail(f"MCP tool {name!r} has no example: add one to EXAMPLES beside it, in its area module")
    example = registry.examples(registry.get(name))[index]
    sw = Swarm(workdir, monkeypatch, store_url)
    _demo_store(sw, demo, example)
    pristine = Pristine(sw.store).take()
    globals_ = ("--repo", str(sw.store), "--as", ACTOR)
    words, arguments = fill(example.cli, sw.store), fill(example.arguments, sw.store)

    cli = sw(*globals_, *words)
    pristine.restore()
    call = sw(*globals_, "call", name, json.dumps(arguments))
    pristine.restore()
    mcp = server.envelope(name, arguments)
    pristine.restore()
    http = http_server.envelope(name, arguments)

    doors = (cli.envelope, call.envelope, mcp, http)
    texts = [StoreNormalizer(workdir, store_url)(json.dumps(e, separators=(",", ":"), ensure_ascii=False)) for e in doors]
    assert texts[0] == texts[1], f"`swarmctl call` differs from the CLI:\n{texts[0]}\n{texts[1]}"
    assert texts[0] == texts[2], f"MCP differs from the CLI:\n{texts[0]}\n{texts[2]}"
    assert texts[0] == texts[3], f"MCP over HTTP differs from the CLI:\n{texts[0]}\n{texts[3]}"
    assert cli.exit == call.exit == exit_status(mcp) == exit_status(http)
    assert outcome_of(cli.envelope) == example.outcome, f"declared {example.outcome}:\n{texts[0]}"
    validator = jsonschema.Draft202012Validator(schemas.envelope_schema(registry.get(name)))
    for envelope in doors:
        validator.validate(envelope)


def _demo_store(sw: Swarm, demo: Pristine, example: Example) -> None:
    """A fresh demo store, with the example's setup."""
    demo.restore()
    write_files(sw.tmp, example.files)
    for call in example.setup:
        arguments = fill(call.arguments, sw.store)
        ran = sw("--repo", str(sw.store), "--as", call.actor or ACTOR, "call", call.tool, json.dumps(arguments))
        assert outcome_of(ran.envelope) == call.outcome, ran.transcript() + ran.stderr


class Case(NamedTuple):
    cli: tuple[str, ...]  # the command after `swarmctl --repo STORE --as ACTOR`
    arguments: dict[str, Any]  # the same call's MCP arguments


# Arguments that do not fit the request type. A value of the field's type outside its
# constraints (a Range, a Literal's words, a length) gets the same message at every door
# (swarmctl/constraints.py); a value of the wrong type, each door's parser's own words. Each
# is E_INVALID_ARG with exit status 2 at every door, and writes nothing.
OUT_OF_CONSTRAINTS: list[tuple[str, Case]] = [
    ("changeset_create", Case(("changeset", "create", "-m", ""), {"message": ""})),
    ("op_log", Case(("op", "log", "--kind", "nonsense"), {"kind": "nonsense"})),
    ("op_log", Case(("op", "log", "-n", "0"), {"limit": 0})),
    ("op_log", Case(("op", "log", "--before", "99999999999999999999"), {"before": 99999999999999999999})),
    ("op_show", Case(("op", "show", "0"), {"op": 0})),
    ("op_restore", Case(("op", "restore", "4", "--expect-head", "0", "--confirm"), {"op": 4, "expect_head": 0, "confirm": True})),
    ("tx_config", Case(("tx", "config", "--max-revisions", "0"), {"max_revisions": 0})),
    ("tx_commit", Case(("tx", "commit", "-m", ""), {"message": ""})),
    ("workflow_list", Case(("workflow", "list", "--state", "nonsense"), {"state": "nonsense"})),
    ("workflow_list", Case(("workflow", "list", "-n", "1001"), {"limit": 1001})),
    ("token_revoke", Case(("token", "revoke", "0"), {"id": 0})),
]
OTHER_MISFITS: list[tuple[str, Case]] = [
    ("undo", Case(("op", "undo", "six"), {"op": "six"})),
    ("op_revert", Case(("op", "revert", "--after", "four"), {"after": "four"})),
    ("ref_set", Case(("ref", "set", "main"), {"name": "main"})),
]


def _ids(cases: list[tuple[str, Case]]) -> list[str]:
    return [" ".join(c.cli) for _, c in cases]


@pytest.mark.parametrize("name, case", OUT_OF_CONSTRAINTS + OTHER_MISFITS, ids=_ids(OUT_OF_CONSTRAINTS + OTHER_MISFITS))
def test_arguments_that_do_not_fit_are_invalid_at_every_door(name, case, workdir, store_url, demo, server, http_server, monkeypatch):
    sw = Swarm(workdir, monkeypatch, store_url)
    _demo_store(sw, demo, Example((), {}))
    before = _store_state(sw.store)
    cli = sw("--repo", str(sw.store), "--as", ACTOR, *case.cli)
    call = sw("--repo", str(sw.store), "--as", ACTOR, "call", name, json.dumps(case.arguments))
    envelopes = [cli.envelope, call.envelope]
    if registry.get(name).mcp:
        envelopes.append(server.envelope(name, case.arguments))
        envelopes.append(http_server.envelope(name, case.arguments))
    for envelope in envelopes:
        assert envelope["op"] == name and envelope["error"]["code"] == "E_INVALID_ARG", envelope
    assert cli.exit == call.exit == 2
    if (name, case) in OUT_OF_CONSTRAINTS:  # one check, one message, at every door
        messages = {envelope["error"]["message"] for envelope in envelopes}
        assert len(messages) == 1, messages
        fields = {envelope["error"]["details"]["field"] for envelope in envelopes}
        assert len(fields) == 1 and fields <= set(case.arguments), fields
    assert _store_state(sw.store) == before, "an invalid call wrote to the store"


def _store_state(store: Path | str) -> tuple[Any, ...]:
    return op_count(store), refs(store)
