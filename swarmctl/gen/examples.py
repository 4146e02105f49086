"""The reference pages' examples: each tool's first example really run on a demo store, its
output normalised.

Every tool declares its examples beside it, in its area module (`spec.Example`,
`registry.examples`); the generator stops at a tool that has none. The first is run here through
`swarmctl.calls` (the path of MCP and `swarmctl call`) on a fresh `swarmctl demo` store in a
temporary directory, as agent/worker-17, after its setup calls, each of which must end as it
declares; its result is built by `swarmctl.mcp.call_result`, as the server builds it. What
differs from run to run is replaced by the normaliser the golden tests use too
(swarmctl/gen/normalize.py), so the pages change only when the output does.

Shared with the parity test (tests/test_parity.py), which runs every example: `write_files` (a
file whose text starts with `#!` is a script, written executable) and `fill`, which replaces
the placeholder "{workflow}" in command-line words and arguments by the id of the store's newest
workflow, just before each call (a setup call too), from the store as it is then.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Mapping, NamedTuple, TypeVar

from swarmctl.gen.normalize import Normalizer
from swarmctl.spec import EXAMPLE_ACTOR, WORKFLOW, Example, Tool

ACTOR = EXAMPLE_ACTOR
REQUEST_ID = 1


class Recorded(NamedTuple):
    command: str  # the shell command, normalised
    request: dict[str, Any]  # the tools/call request, normalised
    response: dict[str, Any]  # its response, normalised
    text: str  # the envelope as the CLI prints it, normalised
    setup: tuple[tuple[str, dict[str, Any]], ...]  # the calls made first, placeholders filled, normalised
    files: dict[str, str]  # the files written first


def record(tool: Tool) -> Recorded:
    """Run the tool's first example and return what a client sent and got, normalised."""
    from swarmctl import registry
    from swarmctl.context import Context
    from swarmctl.mcp import call_result
    from swarmctl.tools.store import DEMO, DemoReq

    examples = registry.examples(tool)
    if not examples:
        raise SystemExit(f"no example for the tool {tool.name!r}: add one to EXAMPLES beside it, in {tool.run.__module__}")
    example = examples[0]
    with tempfile.TemporaryDirectory(prefix="swarmctl-gen-") as tmp:
        where = Path(tmp)
        store = where / "store"
        if example.store:
            DEMO.run(Context(cwd=where), DemoReq(path="store"))
        write_files(where, example.files)
        # One normaliser for the page, in the order a reader meets things: setup, request, response.
        normalize = Normalizer(where)
        setup = []
        for call in example.setup:
            arguments = fill(call.arguments, store)
            _called(tool, example, call.tool, arguments, call.outcome, where, call.actor)
            setup.append((call.tool, _normalized(normalize, arguments)))
        arguments, cli = fill(example.arguments, store), fill(example.cli, store)
        envelope = _called(tool, example, tool.name, arguments, example.outcome, where)
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


def _called(
    tool: Tool, example: Example, name: str, arguments: dict[str, Any], outcome: str, where: Path, actor: str | None = None
) -> dict[str, Any]:
    """The envelope of `name` called on the example's store (as `actor`, or the examples' own),
    which must end in `outcome`."""
    from swarmctl import registry
    from swarmctl.calls import call_tool
    from swarmctl.context import Context

    ctx = Context(repo=str(where / "store") if example.store else None, actor=actor or ACTOR, cwd=where)
    envelope = call_tool(name, arguments, ctx, registry.by_name())
    if outcome_of(envelope) != outcome:
        raise SystemExit(f"the example of {tool.name} ended otherwise than declared ({outcome}) at {name}: {json.dumps(envelope)}")
    return envelope


def outcome_of(envelope: dict[str, Any]) -> str:
    """How an envelope ended, as an example declares it: "ok", or its error's code."""
    return "ok" if envelope["ok"] else envelope["error"]["code"]


# --- shared with the parity test (tests/test_parity.py) -------------------------------------

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
