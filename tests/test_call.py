"""`swarmctl call TOOL [JSON | -]`: any tool with JSON arguments, through the path MCP takes."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import build_golden_store
from swarmctl import registry


def test_call_runs_a_tool_with_json_arguments(sw):
    build_golden_store(sw)
    ran = sw("--repo", str(sw.store), "call", "op_log", '{"limit": 2, "actor": "agent/worker-17"}')
    assert ran.exit == 0
    assert ran.envelope["op"] == "op_log"
    assert [op["op"] for op in ran.result["ops"]] == [6, 5]


def test_call_reads_the_arguments_from_stdin_with_a_dash(sw):
    build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "--as", "agent/worker-17", "call", "undo", "-", input='{"op": 6}\n')
    assert ran.exit == 0, ran.stderr
    assert ran.result == {**ran.result, "undone": 6, "op": 7, "already_applied": False}


def test_call_without_arguments_passes_an_empty_object(sw):
    build_golden_store(sw)
    assert sw.ok("--repo", str(sw.store), "call", "ref_list")["refs"][0]["name"] == "main"
    missing = sw("--repo", str(sw.store), "call", "ref_show")
    assert missing.exit == 2 and missing.error["details"]["errors"][0]["field"] == "name"


def test_an_unknown_tool_is_not_found_and_lists_the_tools(sw):
    ran = sw("call", "undoo", '{"op": 6}')
    assert ran.exit == 4
    assert ran.envelope["op"] is None
    assert ran.error["code"] == "E_NOT_FOUND"
    assert ran.error["details"] == {"tool": "undoo", "tools": sorted(t.name for t in registry.tools())}


def test_bad_json_and_a_field_named_twice_are_invalid_and_write_nothing(sw):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store), "--as", "agent/worker-17")
    bad = sw(*repo, "call", "undo", '{"op": 6')
    assert bad.exit == 2 and bad.error["code"] == "E_INVALID_ARG" and "not valid JSON" in bad.error["message"]
    twice = sw(*repo, "call", "undo", '{"op": 6, "op": 4}')
    assert twice.exit == 2 and twice.error["details"] == {"fields": ["op"]}
    nested = sw(*repo, "call", "changeset_create", '{"message": "m", "metadata": {"k": "a", "k": "b"}}')
    assert nested.exit == 2 and nested.error["details"] == {"fields": ["k"]}
    not_an_object = sw(*repo, "call", "undo", "[6]")
    assert not_an_object.exit == 2 and not_an_object.error["code"] == "E_INVALID_ARG"
    assert sw.ok(*repo, "op", "log", "-n", "1")["ops"][0]["op"] == 6  # nothing was written


def test_call_also_runs_the_tools_mcp_does_not_serve(sw):
    made = sw.ok("--as", "human/alice", "call", "init", json.dumps({"path": "made"}))
    assert made["op"] == 1 and made["repo"] == str((sw.tmp / "made").resolve())


def test_op_log_imports_neither_the_doors_nor_other_areas(sw):
    """The doors cost `swarmctl op log` nothing: no SDK, no pydantic, no other tool area."""
    build_golden_store(sw)
    probe = (
        "import sys, io, contextlib\n"
        "from swarmctl.cli import run\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert run(['--repo', {str(sw.store)!r}, 'op', 'log']) == 0\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    for module in ("mcp", "mcp_types", "anyio", "pydantic", "rich", "swarmctl.mcp", "swarmctl.calls", "swarmctl.schemas",
                   "swarmctl.tools.ref", "swarmctl.tools.changeset", "swarmctl.gen"):
        assert module not in loaded, f"`swarmctl op log` imported {module}"
    assert "swarmctl.tools.op" in loaded  # the probe did run op log
