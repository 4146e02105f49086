"""The reference pages' examples: each tool really run on a demo store, its output normalised.

Every tool needs an entry in EXAMPLES (the generator stops and says so otherwise). A call runs
through `swarmctl.calls` (the path of MCP and `swarmctl call`) on a fresh `swarmctl demo`
store in a temporary directory, as agent/worker-17, and its result is built by
`swarmctl.mcp.call_result`, as the server builds it. What differs from run to run is replaced
by the normaliser of the golden tests (tests/golden.py), so the pages change only when the
output does.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from swarmctl.spec import Tool

ACTOR = "agent/worker-17"
REQUEST_ID = 1


class Example(NamedTuple):
    arguments: dict[str, Any]  # the MCP tool's arguments
    cli: tuple[str, ...]  # the same call on the command line, after `swarmctl --repo STORE --as ACTOR`
    store: bool = True  # run on a demo store at [tmp]/store (False: in an empty directory)
    setup: tuple[tuple[str, dict[str, Any]], ...] = ()  # calls (tool, arguments) made first, as ACTOR
    files: dict[str, str] = {}  # files written to the working directory first (--file, workflow files)


# On the demo store: ops 1-6, op 6 is agent/worker-17 moving release/v1 to main's changeset.
EXAMPLES: dict[str, Example] = {
    "init": Example({"path": "store"}, ("init", "store"), store=False),
    "demo": Example({"path": "demo-store"}, ("demo", "demo-store"), store=False),
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
    "schema": Example({"type": "RefShowReq"}, ("schema", "RefShowReq")),
}


class Recorded(NamedTuple):
    command: str  # the shell command, normalised
    request: dict[str, Any]  # the tools/call request
    response: dict[str, Any]  # its response, normalised
    text: str  # the envelope as the CLI prints it, normalised
    setup: tuple[tuple[str, dict[str, Any]], ...]  # the calls made first


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
        if example.store:
            DEMO.run(Context(cwd=where), DemoReq(path="store"))
        for path, text in example.files.items():
            (where / path).write_text(text)

        def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            ctx = Context(repo=str(where / "store") if example.store else None, actor=ACTOR, cwd=where)
            envelope = call_tool(name, arguments, ctx, registry.by_name())
            if not envelope["ok"]:
                raise SystemExit(f"the example of {tool.name} failed at {name}: {json.dumps(envelope['error'])}")
            return envelope

        for name, arguments in example.setup:
            call(name, arguments)
        envelope = call(tool.name, example.arguments)
        request = {
            "id": REQUEST_ID,
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"arguments": example.arguments, "name": tool.name},
        }
        normalize = _normalizer()(where)
        result = call_result(envelope)
        text = normalize(result["content"][0]["text"])
        structured = json.loads(normalize(json.dumps(result["structuredContent"], separators=(",", ":"), ensure_ascii=False)))
        response = {
            "id": REQUEST_ID,
            "jsonrpc": "2.0",
            "result": {**result, "content": [{**result["content"][0], "text": text}], "structuredContent": structured},
        }
        globals_ = ["--repo", "[tmp]/store"] if example.store else []
        command = " ".join(["swarmctl", *globals_, "--as", ACTOR, *(_shell_word(w) for w in example.cli)])
    return Recorded(command=command, request=request, response=response, text=text, setup=example.setup)


def _shell_word(word: str) -> str:
    import shlex

    return shlex.quote(word)


@lru_cache(maxsize=None)
def _normalizer() -> type:
    """The golden tests' Normalizer (tests/golden.py): the one place that knows what differs."""
    golden = Path(__file__).resolve().parents[2] / "tests" / "golden.py"
    if not golden.is_file():
        raise SystemExit(f"{golden} is missing: run `python -m swarmctl.gen` from a checkout of swarmctl")
    spec = importlib.util.spec_from_file_location("_swarmctl_golden", golden)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Normalizer
