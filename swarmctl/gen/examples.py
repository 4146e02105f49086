"""The reference pages' examples: each tool really run on a demo store, its output normalised.

Every tool needs an entry in EXAMPLES (the generator stops and says so otherwise). A call runs
through `swarmctl.calls` (the path of MCP and `swarmctl call`) on a fresh `swarmctl demo`
store in a temporary directory, as agent/worker-17, and its result is built by
`swarmctl.mcp.call_result`, as the server builds it. What differs from run to run is replaced
by the normaliser the golden tests use too (swarmctl/gen/normalize.py), so the pages change
only when the output does.

Three things here are shared with the parity cases (tests/test_parity.py), which set up a store
the same way: the workflow RELEASE (release.toml and its scripts), `write_files` (a file whose
text starts with `#!` is a script, written executable) and `fill`, which replaces the
placeholder "{workflow}" in command-line words and arguments by the id of the store's newest
workflow. Workflow ids are random, so a call that
names the workflow its setup created says "{workflow}"; the placeholder is filled just before
each call (a setup call too), from the store as it is then.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Mapping, NamedTuple, TypeVar

from swarmctl.gen.normalize import Normalizer
from swarmctl.spec import Tool

ACTOR = "agent/worker-17"
REQUEST_ID = 1
WORKFLOW = "{workflow}"  # in CLI words and arguments: the id of the store's newest workflow (see `fill`)


class Example(NamedTuple):
    arguments: dict[str, Any]  # the MCP tool's arguments
    cli: tuple[str, ...]  # the same call on the command line, after `swarmctl --repo STORE --as ACTOR`
    store: bool = True  # run on a demo store at [tmp]/store (False: in an empty directory)
    setup: tuple[tuple[str, dict[str, Any]], ...] = ()  # calls (tool, arguments) made first, as ACTOR
    files: dict[str, str] = {}  # files written to the working directory first (see `write_files`)


# The policy of the policy examples: people may change it and move release/*; agents may not
# undo other actors' ops.
POLICY = """\
admins = ["human/*"]

[[protect]]
refs = ["release/*"]
actors = ["human/*", "ci/release"]

[undo]
others = ["human/*"]
"""
_SET_POLICY = ("policy_set", {"policy": POLICY})

# The setup calls of the transaction examples.
_BEGIN = ("tx_begin", {})
_STAGE_V2 = ("tx_set", {"name": "release/v2", "target": "main"})
_DELETE_V1 = ("tx_delete", {"name": "release/v1"})

# The workflow of the workflow examples, with its two scripts, in the working directory.
RELEASE = {
    "release.toml": """\
name = "release-v2"
description = "Cut release/v2 from main, get a sign-off, deploy it"

[[step]]
name = "promote"
ref_set = { name = "release/v2", to = "main" }

[[step]]
name = "sign-off"
approval = "the release manager approves"

[[step]]
name = "deploy"
run = ["./deploy.sh", "--env", "prod"]
rollback = ["./undeploy.sh", "--env", "prod"]
timeout_s = 120
""",
    "deploy.sh": """\
#!/bin/sh
# Stands in for a real deployment: says what it deploys where.
echo "deployed release/v2 to $2"
""",
    "undeploy.sh": """\
#!/bin/sh
echo "removed release/v2 from $2"
""",
}
_RUN = ("workflow_run", {"file": "release.toml"})
_APPROVE = ("workflow_approve", {"workflow": WORKFLOW})
_COMPLETED = (_RUN, _APPROVE, ("workflow_resume", {"workflow": WORKFLOW}))

# On the demo store: ops 1-6, op 6 is agent/worker-17 moving release/v1 to main's changeset.
EXAMPLES: dict[str, Example] = {
    "init": Example({"path": "store"}, ("init", "store"), store=False),
    "demo": Example({"path": "demo-store"}, ("demo", "demo-store"), store=False),
    "store_copy": Example({"source": "store", "destination": "store-copy"}, ("store", "copy", "store", "store-copy")),
    "changeset_create": Example(
        {"message": "Hotfix the deploy check", "ref": "main", "metadata": {"ticket": "OPS-9"}, "files": {"NOTES.md": "v1.0.1\n"}},
        ("changeset", "create", "-m", "Hotfix the deploy check", "--ref", "main", "--meta", "ticket=OPS-9", "--file", "NOTES.md"),
        files={"NOTES.md": "v1.0.1\n"},
    ),
    "changeset_show": Example({"id": "release/v1"}, ("changeset", "show", "release/v1")),
    "ref_set": Example({"name": "release/v2", "target": "main", "create": True}, ("ref", "set", "release/v2", "main", "--create")),
    "ref_delete": Example({"name": "release/v1", "expect": "main"}, ("ref", "delete", "release/v1", "--expect", "main")),
    "ref_list": Example({"prefix": "release/"}, ("ref", "list", "--prefix", "release/")),
    "ref_show": Example({"name": "release/v1"}, ("ref", "show", "release/v1")),
    "op_log": Example({"limit": 2}, ("op", "log", "-n", "2")),
    "op_show": Example({"op": 6}, ("op", "show", "6")),
    "undo": Example({"op": 6}, ("op", "undo", "6")),
    # Everything agent/worker-17 did (ops 3, 5 and 6), taken back in one op.
    "op_revert": Example({"actor": ACTOR}, ("op", "revert", "--actor", ACTOR)),
    # The preview: what putting the refs back as they were after op 4 would move, and the confirm call.
    "op_restore": Example({"op": 4}, ("op", "restore", "4")),
    "store_check": Example({}, ("store", "check")),
    "store_upgrade": Example({}, ("store", "upgrade")),  # a demo store is of this format already
    "schema": Example({"type": "RefShowReq"}, ("schema", "RefShowReq")),
    # Transactions: agent/worker-17 cuts release/v2 from main and retires release/v1, as one op.
    "tx_begin": Example({}, ("tx", "begin")),
    "tx_set": Example({"name": "release/v2", "target": "main"}, ("tx", "set", "release/v2", "main"), setup=(_BEGIN,)),
    "tx_delete": Example({"name": "release/v1"}, ("tx", "delete", "release/v1"), setup=(_BEGIN, _STAGE_V2)),
    "tx_status": Example(
        {},
        ("tx", "status"),
        # Staged: release/v2 created, release/v1 deleted; then release/v1 moves in the store (op 7),
        # which `moved` shows before a commit would fail on it.
        setup=(_BEGIN, _STAGE_V2, _DELETE_V1, ("changeset_create", {"message": "Hotfix on v1", "ref": "release/v1"})),
    ),
    "tx_undo": Example({}, ("tx", "undo"), setup=(_BEGIN, _STAGE_V2, _DELETE_V1)),
    "tx_redo": Example({}, ("tx", "redo"), setup=(_BEGIN, _STAGE_V2, _DELETE_V1, ("tx_undo", {}))),
    "tx_commit": Example(
        {"message": "Cut release/v2; retire release/v1"},
        ("tx", "commit", "-m", "Cut release/v2; retire release/v1"),
        setup=(_BEGIN, _STAGE_V2, _DELETE_V1),
    ),
    "tx_rollback": Example({}, ("tx", "rollback"), setup=(_BEGIN, _STAGE_V2, _DELETE_V1)),
    "tx_config": Example({"max_revisions": 50}, ("tx", "config", "--max-revisions", "50")),
    # Workflows: release.toml promotes main to release/v2, waits for a sign-off, then deploys.
    "workflow_run": Example({"file": "release.toml"}, ("workflow", "run", "release.toml"), files=RELEASE),
    # Status after a confirmed rollback: each step's outcome and how it was undone.
    "workflow_status": Example(
        {"workflow": WORKFLOW},
        ("workflow", "status", WORKFLOW),
        setup=(*_COMPLETED, ("workflow_rollback", {"workflow": WORKFLOW, "include_completed": True, "confirm": True})),
        files=RELEASE,
    ),
    "workflow_list": Example({"limit": 10}, ("workflow", "list", "-n", "10"), setup=(_RUN,), files=RELEASE),
    "workflow_approve": Example(
        {"workflow": WORKFLOW, "step": "sign-off"},
        ("workflow", "approve", WORKFLOW, "--step", "sign-off"),
        setup=(_RUN,),
        files=RELEASE,
    ),
    "workflow_resume": Example(
        {"workflow": WORKFLOW}, ("workflow", "resume", WORKFLOW), setup=(_RUN, _APPROVE), files=RELEASE
    ),
    "workflow_cancel": Example({"workflow": WORKFLOW}, ("workflow", "cancel", WORKFLOW), setup=(_RUN,), files=RELEASE),
    # The preview, with its blast radius: what --confirm would undo, in which order.
    "workflow_rollback": Example(
        {"workflow": WORKFLOW, "include_completed": True},
        ("workflow", "rollback", WORKFLOW, "--include-completed"),
        setup=_COMPLETED,
        files=RELEASE,
    ),
    # Tokens for `mcp --http` (CLI-only): one for agent/worker-42, made as op 7 of the demo store.
    "token_create": Example({"actor": "agent/worker-42", "expires": "30d"}, ("token", "create", "agent/worker-42", "--expires", "30d")),
    "token_list": Example({}, ("token", "list"), setup=(("token_create", {"actor": "agent/worker-42", "read_only": True}),)),
    "token_revoke": Example({"id": 7}, ("token", "revoke", "7"), setup=(("token_create", {"actor": "agent/worker-42"}),)),
    "workflow_show_definition": Example(
        {"workflow": WORKFLOW}, ("workflow", "show-definition", WORKFLOW), setup=(_RUN,), files=RELEASE
    ),
    # The store's policy: POLICY protects release/* for people (made op 7 of the demo store).
    "policy_set": Example({"policy": POLICY}, ("policy", "set", "policy.toml"), files={"policy.toml": POLICY}),
    "policy_show": Example({}, ("policy", "show"), setup=(_SET_POLICY,)),
    "policy_check": Example(
        {"actor": ACTOR, "tool": "ref_set", "arguments": {"name": "release/v1", "target": "main"}},
        ("policy", "check", "--actor", ACTOR, "ref_set", '{"name": "release/v1", "target": "main"}'),
        setup=(_SET_POLICY,),
    ),
}


class Recorded(NamedTuple):
    command: str  # the shell command, normalised
    request: dict[str, Any]  # the tools/call request, normalised
    response: dict[str, Any]  # its response, normalised
    text: str  # the envelope as the CLI prints it, normalised
    setup: tuple[tuple[str, dict[str, Any]], ...]  # the calls made first, placeholders filled, normalised
    files: dict[str, str]  # the files written first


def record(tool: Tool) -> Recorded:
    """Run the tool's example and return what a client sent and got, normalised."""
    from swarmctl import registry
    from swarmctl.calls import call_tool
    from swarmctl.context import Context
    from swarmctl.mcp import call_result
    from swarmctl.tools.store import DEMO, DemoReq

    example = EXAMPLES.get(tool.name)
    if example is None:
        raise SystemExit(
            f"no example for the tool {tool.name!r}: add one to EXAMPLES in swarmctl/gen/examples.py"
        )
    with tempfile.TemporaryDirectory(prefix="swarmctl-gen-") as tmp:
        where = Path(tmp)
        store = where / "store"
        if example.store:
            DEMO.run(Context(cwd=where), DemoReq(path="store"))
        write_files(where, example.files)
        # One normaliser for the page, in the order a reader meets things: setup, request, response.
        normalize = Normalizer(where)

        def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            ctx = Context(repo=str(store) if example.store else None, actor=ACTOR, cwd=where)
            envelope = call_tool(name, arguments, ctx, registry.by_name())
            if not envelope["ok"]:
                raise SystemExit(f"the example of {tool.name} failed at {name}: {json.dumps(envelope['error'])}")
            return envelope

        setup = []
        for name, arguments in example.setup:
            arguments = fill(arguments, store)
            call(name, arguments)
            setup.append((name, _normalized(normalize, arguments)))
        arguments, cli = fill(example.arguments, store), fill(example.cli, store)
        envelope = call(tool.name, arguments)
        request = {
            "id": REQUEST_ID,
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"arguments": _normalized(normalize, arguments), "name": tool.name},
        }
        result = call_result(envelope)
        text = normalize(result["content"][0]["text"])
        structured = _normalized(normalize, result["structuredContent"])
        response = {
            "id": REQUEST_ID,
            "jsonrpc": "2.0",
            "result": {**result, "content": [{**result["content"][0], "text": text}], "structuredContent": structured},
        }
        globals_ = ["--repo", "[tmp]/store"] if example.store else []
        command = normalize(" ".join(["swarmctl", *globals_, "--as", ACTOR, *(_shell_word(w) for w in cli)]))
    return Recorded(command=command, request=request, response=response, text=text, setup=tuple(setup), files=dict(example.files))


# --- shared with the parity cases (tests/test_parity.py) -------------------------------------

T = TypeVar("T")


def write_files(where: Path, files: Mapping[str, str]) -> None:
    """Write each file under `where`. A file whose text starts with `#!` is a script (a workflow
    step runs it by its path), so it is written executable, mode 0755."""
    for path, text in files.items():
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if text.startswith("#!"):
            target.chmod(0o755)


def fill(value: T, store: Path) -> T:
    """`value` (command-line words, MCP arguments) with each "{workflow}" replaced by the id of
    the newest workflow in `store`, read now. A value without the placeholder comes back as is."""
    if WORKFLOW not in json.dumps(value):
        return value
    newest = _newest_workflow(store)
    return _replaced(value, newest)


def _replaced(value: Any, workflow: str) -> Any:
    if isinstance(value, str):
        return value.replace(WORKFLOW, workflow)
    if isinstance(value, tuple):
        return tuple(_replaced(v, workflow) for v in value)
    if isinstance(value, list):
        return [_replaced(v, workflow) for v in value]
    if isinstance(value, dict):
        return {k: _replaced(v, workflow) for k, v in value.items()}
    return value


def _newest_workflow(store: Path) -> str:
    from swarmctl import registry
    from swarmctl.calls import call_tool
    from swarmctl.context import Context

    envelope = call_tool("workflow_list", {"limit": 1}, Context(repo=str(store)), registry.by_name())
    found = envelope["result"]["workflows"] if envelope["ok"] else []
    if not found:
        raise ValueError(f"{WORKFLOW} names the newest workflow, but {store} has none: {json.dumps(envelope)}")
    return found[0]["id"]


def _normalized(normalize: Normalizer, value: Any) -> Any:
    return json.loads(normalize(json.dumps(value, separators=(",", ":"), ensure_ascii=False)))


def _shell_word(word: str) -> str:
    import shlex

    return shlex.quote(word)
