"""Hostile JSON and oversized input get an envelope, never a crash (issue 8, item 4).

Nesting deeper than SWARMCTL_MAX_JSON_DEPTH (64) and any one input larger than
SWARMCTL_MAX_INPUT_BYTES (16 MiB) are E_INVALID_ARG, read to at most the bound plus one byte.
The MCP server answers every line (-32700 unparseable, -32600 invalid, a key named twice
outside a tool's arguments included) and serves on; it never runs a call whose `name` is twice.
"""

import json
import subprocess

from core_helpers import AGENT, ALICE, as_, build_golden_store, op_count, problems, refs
from mcp_client import RawServer
from swarm import swarmctl_argv

from swarmctl import limits

DEEP = "[" * 100_000 + "]" * 100_000


def nested(depth: int) -> str:
    """A JSON object whose value nests arrays so that the whole is `depth` levels deep."""
    return '{"deep":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_deep_json_at_call_is_one_envelope(sw):
    build_golden_store(sw)
    for text in ("[" * 100_000, '{"a":' * 20_000, nested(65)):  # (an argv word is at most 128 KiB)
        ran = sw.process("--repo", str(sw.store), "call", "ref_list", text)
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", (ran.stdout[:300], ran.stderr[-500:])
        assert "Traceback" not in ran.stderr and ran.error["details"]["max_depth"] == 64
    at_bound = sw("--repo", str(sw.store), "call", "ref_list", nested(64))
    assert at_bound.exit == 0 and at_bound.envelope["meta"]["ignored"] == ["deep"]
    shallow = sw("--repo", str(sw.store), "call", "ref_list", nested(4), env={"SWARMCTL_MAX_JSON_DEPTH": "3"})
    assert shallow.exit == 2 and shallow.error["details"]["max_depth"] == 3


def test_oversized_input_is_refused_without_reading_it_all(sw):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store))
    small = {"SWARMCTL_MAX_INPUT_BYTES": "1000"}
    big = json.dumps({"prefix": "x" * 2000})
    assert sw(*repo, "call", "ref_list", big, env=small).error["details"]["max_bytes"] == 1000
    ran = sw.process(*repo, "call", "ref_list", "-", env=small, input=big)
    assert ran.exit == 2 and ran.error["details"] == {"input": "stdin", "max_bytes": 1000}
    # Endless streams: each stops one byte past the default bound of 16 MiB.
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([*swarmctl_argv(), *repo, "call", "ref_list", "-"], stdin=zero, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["details"]["max_bytes"] == limits.DEFAULT_MAX_INPUT_BYTES
    workflow = sw.process(*as_(sw, ALICE), "workflow", "run", "/dev/zero")
    assert workflow.exit == 2 and workflow.error["code"] == "E_INVALID_ARG", workflow.stdout
    attached = sw.process(*as_(sw, ALICE), "changeset", "create", "-m", "zero", "--file", "/dev/zero")
    assert attached.exit == 2 and attached.error["code"] == "E_INVALID_ARG", attached.stdout
    assert op_count(sw.store) == 6


def test_a_deeply_nested_workflow_file_is_invalid_not_internal(sw):
    build_golden_store(sw)
    for name, body in (("endless.toml", "a = " + DEEP + "\n"), ("deep.toml", "a = " + "[" * 70 + "]" * 70 + "\n")):
        (sw.tmp / name).write_text('name = "w"\n' + body)
        ran = sw(*as_(sw, ALICE), "workflow", "run", str(sw.tmp / name))
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout[:500]
        assert "deeper than 64" in ran.error["message"]


def test_an_invalid_bound_is_a_clear_error(sw):
    build_golden_store(sw)
    ran = sw("--repo", str(sw.store), "call", "ref_list", "{}", env={"SWARMCTL_MAX_JSON_DEPTH": "deep"})
    assert ran.exit == 2 and ran.error["details"]["variable"] == "SWARMCTL_MAX_JSON_DEPTH"


def _call(request_id, name, arguments, **params):
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments, **params}}


def test_the_mcp_server_answers_every_hostile_line_and_serves_on(sw):
    ids = build_golden_store(sw)
    before = (op_count(sw.store), refs(sw.store))
    env = {**sw.env, "SWARMCTL_MAX_INPUT_BYTES": "100000"}
    with RawServer(sw.store, AGENT, env=env) as server:
        server.initialize()
        server.send(DEEP[:50_000] + DEEP[-50_000:])  # deeper than the bound: refused unread
        deep = server.receive()
        server.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ref_list","arguments":' + nested(65) + "}}")
        deep_arguments = server.receive()
        # `name` twice, outside the arguments: never run, whichever name would win
        server.send(
            '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"op_log","name":"ref_set",'
            '"arguments":{"name":"release/v1","target":"%s"}}}' % ids["base"]
        )
        named_twice = server.receive()
        server.send('{"jsonrpc":"2.0","id":4,"id":5,"method":"tools/list"}')
        id_twice = server.receive()
        server.send({"jsonrpc": "2.0", "id": None, "method": "tools/list"})
        null_id = server.receive()
        server.send({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"})
        object_id = server.receive()
        server.send(json.dumps(_call(6, "ref_list", {"prefix": "x" * 200_000})))  # a line past the bound
        too_big = server.receive()
        server.send("{not json")
        not_json = server.receive()
        server.send(_call(7, "op_show", {"op": 6}))
        after = server.receive()
        code, _, err = server.close()
    assert deep["id"] is None and deep["error"]["code"] == -32600 and deep["error"]["data"]["code"] == "E_INVALID_ARG"
    envelope = deep_arguments["result"]["structuredContent"]
    assert deep_arguments["id"] == 2 and envelope["error"]["code"] == "E_INVALID_ARG" and deep_arguments["result"]["isError"]
    assert named_twice == {**named_twice, "id": 3} and named_twice["error"]["code"] == -32600
    assert named_twice["error"]["data"]["fields"] == ["name"]
    assert id_twice["id"] is None and id_twice["error"]["code"] == -32600
    assert null_id["id"] is None and null_id["error"]["code"] == -32600
    assert object_id["id"] is None and object_id["error"]["code"] == -32600
    assert too_big["id"] is None and too_big["error"]["code"] == -32600 and too_big["error"]["data"]["max_bytes"] == 100000
    assert not_json["error"]["code"] == -32700
    assert after["id"] == 7 and after["result"]["structuredContent"]["result"]["op"] == 6
    assert code == 0 and "Traceback" not in err
    assert (op_count(sw.store), refs(sw.store)) == before
    assert problems(sw.store) == []


def test_call_lines_holds_each_line_to_the_bound_and_goes_on(sw):
    build_golden_store(sw)
    text = json.dumps({"tool": "ref_list", "arguments": {"prefix": "x" * 2000}}) + "\n"
    text += "[" * 100 + "\n" + json.dumps({"tool": "op_show", "arguments": {"op": 6}, "id": 1}) + "\n"
    ran = sw.process("--repo", str(sw.store), "call", "--lines", input=text, env={"SWARMCTL_MAX_INPUT_BYTES": "1000"})
    too_big, too_deep, shown = [json.loads(line) for line in ran.stdout.splitlines()]
    assert too_big["error"]["details"] == {"input": "a line of stdin", "max_bytes": 1000}
    assert too_deep["error"]["code"] == "E_INVALID_ARG" and too_deep["error"]["details"]["max_depth"] == 64
    assert shown["ok"] and shown["result"]["op"] == 6
    assert ran.exit == 2 and "Traceback" not in ran.stderr
