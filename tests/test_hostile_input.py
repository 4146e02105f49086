"""Hostile JSON and oversized input get an envelope, never a crash (issue 8, item 4).

Nesting deeper than SWARMCTL_MAX_JSON_DEPTH (64) and any one input larger than
SWARMCTL_MAX_INPUT_BYTES (16 MiB) are E_INVALID_ARG, read to at most the bound plus one byte.
The MCP server answers every line (-32700 unparseable, -32600 invalid, a key named twice
outside a tool's arguments included) and serves on; it never runs a call whose `name` is twice.
"""

import json
import subprocess

import pytest

from core_helpers import AGENT, ALICE, as_, build_golden_store, op_count, problems, refs
from mcp_client import RawServer
from swarm import swarmctl_argv

from swarmctl import limits

DEEP = "[" * 100_000 + "]" * 100_000
# More digits than Python converts (sys.get_int_max_str_digits, 4300): int() raises ValueError.
LONG = "9" * 5000


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


def test_a_depth_bound_is_one_swarmctl_can_honour(sw):
    """SWARMCTL_MAX_JSON_DEPTH=5000 was taken, and a 990-deep input then refused as "deeper
    than 5000 levels" (Python's parsers give out first): a bound past MOST_JSON_DEPTH (256) is
    E_INVALID_ARG naming the variable; at 256, what nests 250 deep is read, JSON and TOML."""
    from swarmctl.limits import MOST_JSON_DEPTH

    build_golden_store(sw)
    arguments = '{"limit": 1, "x": ' + "[" * 250 + "]" * 250 + "}"
    for bound in ("5000", str(MOST_JSON_DEPTH + 1), "99999999999999999999"):
        ran = sw("--repo", str(sw.store), "call", "op_log", arguments, env={"SWARMCTL_MAX_JSON_DEPTH": bound})
        assert ran.exit == 2 and ran.error["details"]["variable"] == "SWARMCTL_MAX_JSON_DEPTH", ran.stdout[:300]
        assert f"from 1 to {MOST_JSON_DEPTH}" in ran.error["message"]
    deepest = {"SWARMCTL_MAX_JSON_DEPTH": str(MOST_JSON_DEPTH)}
    assert sw("--repo", str(sw.store), "call", "op_log", arguments, env=deepest).exit == 0
    (sw.tmp / "deep.toml").write_text('name = "w"\nx = ' + "[" * 250 + "]" * 250 + "\n")
    ran = sw(*as_(sw, ALICE), "workflow", "run", str(sw.tmp / "deep.toml"), env=deepest)
    assert ran.error["message"] == "unknown key 'x' at the top of the workflow", ran.stdout[:300]  # read, then refused


def test_a_number_longer_than_python_converts_is_an_envelope_at_every_door(sw):
    """A whole number of more digits than Python converts (4300) was a traceback at the CLI
    (`op show`, `-n`) and at `call`, and E_INTERNAL in a workflow or policy file: now each is
    E_INVALID_ARG that says so, and nothing is written. (MCP and `call --lines`: above.)"""
    build_golden_store(sw)
    before = op_count(sw.store)
    repo = ("--repo", str(sw.store), "--as", ALICE)
    for args in (["op", "show", LONG], ["op", "log", "-n", LONG], ["op", "log", "--before", LONG],
                 ["tx", "config", "--max-revisions", LONG]):
        ran = sw.process(*repo, *args)
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", (args[:2], ran.stdout[:300], ran.stderr[-300:])
        assert "'99999999999999999999'… has 5000 digits: a number may have at most 4300" in ran.error["message"]
    ran = sw.process(*repo, "call", "op_show", '{"op": %s}' % LONG)
    assert ran.exit == 2 and ran.error["message"] == "arguments are unreadable: a number in them has more than 4300 digits"
    ran = sw(*repo, "call", "op_show", "[" * 70 + "]" * 70)  # it read "the arguments nests deeper"
    assert ran.exit == 2 and ran.error["message"] == "the arguments' JSON nests deeper than 64 levels (SWARMCTL_MAX_JSON_DEPTH)"
    (sw.tmp / "flow.toml").write_text(f'name = "w"\n[[step]]\nname = "a"\nrun = ["true"]\ntimeout_s = {LONG}\n')
    (sw.tmp / "policy.toml").write_text(f"admins = [{LONG}]\n")
    (sw.tmp / "deep.toml").write_text("admins = " + DEEP + "\n")
    for args, message in (
        (["workflow", "run", str(sw.tmp / "flow.toml")], f"{sw.tmp / 'flow.toml'} holds a number of more than 4300 digits"),
        (["policy", "set", str(sw.tmp / "policy.toml")], "the policy holds a number of more than 4300 digits"),
        (["policy", "set", str(sw.tmp / "deep.toml")], "the policy nests deeper than 64 levels (SWARMCTL_MAX_JSON_DEPTH)"),
    ):
        ran = sw(*repo, *args)
        assert (ran.exit, ran.error["code"], ran.error["message"]) == (2, "E_INVALID_ARG", message), ran.stdout[:500]
    assert op_count(sw.store) == before


def test_what_python_reads_as_json_and_rfc_8259_does_not_is_refused(sw):
    """json.loads takes NaN, Infinity and 1e400 (read as infinity); `call --lines` echoed such
    an `id` into `meta.id`, and the envelope was no longer JSON (`json.loads(..., parse_constant=
    ...)`, JavaScript's JSON.parse and Go refuse it). Each door now refuses the line."""
    build_golden_store(sw)
    lines = "".join('{"tool": "op_show", "arguments": {"op": 1}, "id": %s}\n' % v for v in ("NaN", "-Infinity", "1e400", "1.5"))
    ran = sw.process("--repo", str(sw.store), "call", "--lines", input=lines)
    envelopes = [json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}")) for line in ran.stdout.splitlines()]
    assert [e["error"]["message"] for e in envelopes[:3]] == [
        "the line is not valid JSON: NaN is not a JSON value",
        "the line is not valid JSON: -Infinity is not a JSON value",
        "the line is not valid JSON: 1e400 is beyond what a JSON number may be here (a float's range)",
    ]
    assert envelopes[3]["ok"] and envelopes[3]["meta"]["id"] == 1.5 and ran.exit == 2
    ran = sw("--repo", str(sw.store), "call", "op_log", '{"limit": NaN}')
    assert (ran.exit, ran.error["message"]) == (2, "arguments are not valid JSON: NaN is not a JSON value")


def test_a_lone_surrogate_escape_is_refused_at_every_json_door(sw):
    """json.loads takes `"\\ud800"`, half of a UTF-16 surrogate pair alone: no Unicode text, so
    nothing can write it as UTF-8. It reached pydantic, whose message ("Invalid JSON: unexpected
    end of hex escape") named neither the value nor the cause, and the MCP server answered a
    request holding one as no JSON-RPC message (-32600). A pair (`"\\ud83d\\ude00"`) is a character."""
    build_golden_store(sw)
    half = "a string holds \\ud800 alone, half of a UTF-16 surrogate pair, which is no Unicode character"
    ran = sw("--repo", str(sw.store), "call", "ref_show", '{"name": "main\\ud800"}')
    assert (ran.exit, ran.error["code"], ran.error["message"]) == (2, "E_INVALID_ARG", f"arguments are not valid JSON: {half}")
    ran = sw("--repo", str(sw.store), "call", "ref_show", '{"name": "main", "\\uDFFF": 1}')
    assert ran.error["message"] == "arguments are not valid JSON: " + half.replace("d800", "dfff")
    ran = sw("--repo", str(sw.store), "call", "ref_show", '{"name": "x\\ud83d\\ude00"}')
    assert ran.error["code"] == "E_NOT_FOUND"  # a whole pair: read, and no such ref
    lines = '{"tool": "ref_show", "arguments": {"name": "main"}, "id": "\\ud800"}\n{"tool": "ref_show", "arguments": {"name": "main"}}\n'
    ran = sw.process("--repo", str(sw.store), "call", "--lines", input=lines)
    first, second = (json.loads(line) for line in ran.stdout.splitlines())
    assert (first["error"]["message"], first["meta"].get("id"), second["ok"], ran.exit) == (
        f"the line is not valid JSON: {half}", None, True, 2)
    with RawServer(sw.store, AGENT) as server:
        server.initialize()
        answer, after = server.exchange(
            '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ref_show","arguments":{"name":"\\ud800"}}}',
            '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ref_show","arguments":{"name":"main"}}}',
        )
        code, _, err = server.close()
    # In the arguments alone, over MCP: the tool's E_INVALID_ARG under the request's id, as `call`
    # says it (it was a parse error with id null, and the client never heard of request 4).
    envelope = answer["result"]["structuredContent"]
    assert (answer["id"], envelope["error"]["message"]) == (4, f"arguments are not valid JSON: {half}"), answer
    assert after["id"] == 5 and after["result"]["structuredContent"]["ok"]
    assert code == 0 and "Traceback" not in err


def test_numbers_are_ascii_digits_as_git_reads_them(sw):
    """Python's int() also reads other scripts' digits (`５`, `٣`) and `1_000`: `tx config
    --max-revisions ５` set 5. A number on the command line or in a SWARMCTL_* setting is ASCII
    digits, as git and kubectl read one; a duration too (`--since ٣d` read three days)."""
    build_golden_store(sw)
    before = op_count(sw.store)
    repo = ("--repo", str(sw.store), "--as", ALICE)
    for args in (["tx", "config", "--max-revisions", "\uff15"], ["op", "show", "\u0663"], ["op", "log", "-n", "\u0662"],
                 ["op", "log", "--before", "1_000"], ["op", "log", "--since", "\u0663d"], ["op", "undo", "\u00b3"]):
        ran = sw(*repo, *args)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), (args, ran.stdout[:300])
    for name, value in (("SWARMCTL_LOCK_TIMEOUT", "\uff15"), ("SWARMCTL_LOCK_TIMEOUT", "1_0"), ("SWARMCTL_LOCK_TIMEOUT", "nan"),
                        ("SWARMCTL_MAX_JSON_DEPTH", "\uff16\uff14")):
        ran = sw(*repo, "call", "ref_set", '{"name": "x", "target": "main"}', env={name: value})
        assert (ran.exit, ran.error["details"]) == (2, {"variable": name, "value": value})
    assert op_count(sw.store) == before
    assert sw.ok(*repo, "op", "log", "--before", " 3 ", "-n", "+1")["ops"][0]["op"] == 2  # space around, a sign: as before
    # A duration longer than any calendar is before every op (it was "not a duration" past 9 digits).
    assert len(sw.ok(*repo, "op", "log", "--since", "99999999999d")["ops"]) == before
    ran = sw(*repo, "token", "create", "agent/x", "--expires", "99999999999d")
    assert (ran.exit, ran.error["message"]) == (2, "--expires 99999999999d: too far ahead")


def test_a_name_that_ends_in_a_newline_is_no_name(sw):
    """`$` also matches before a final newline: `--as 'agent/evil\\n'` wrote ops under that
    actor, and a workflow step could be named `a\\n`. Each pattern is now matched whole."""
    build_golden_store(sw)
    before = op_count(sw.store)
    ran = sw("--repo", str(sw.store), "--as", "agent/evil\n", "ref", "set", "evil", "main", "--create")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG") and "invalid actor" in ran.error["message"]
    ran = sw("--repo", str(sw.store), "ref", "set", "evil", "main", "--create", env={"SWARMCTL_AS": "agent/evil\n"})
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    ran = sw(*as_(sw, ALICE), "token", "create", "agent/evil\n")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    (sw.tmp / "flow.toml").write_text('name = "w"\n[[step]]\nname = "a\\n"\nrun = ["true"]\n')
    (sw.tmp / "env.toml").write_text('name = "w"\n[[step]]\nname = "a"\nrun = ["true"]\nenv = { "X\\n" = "1" }\n')
    for flow, key in (("flow.toml", "name"), ("env.toml", "env.X\n")):
        ran = sw(*as_(sw, ALICE), "workflow", "run", str(sw.tmp / flow))
        assert (ran.exit, ran.error["code"], ran.error["details"].get("key")) == (2, "E_INVALID_ARG", key), ran.stdout[:400]
    assert op_count(sw.store) == before


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
        server.send('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"op_show","arguments":{"op":%s}}}' % LONG)
        long_argument = server.receive()
        server.send('{"jsonrpc":"2.0","id":%s,"method":"ping"}' % LONG)
        long_id = server.receive()
        server.send('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"op_log","arguments":{"limit":NaN}}}')
        nan = server.receive()
        # A lone surrogate in the arguments only (JSON's grammar takes the escape): the tool's
        # E_INVALID_ARG under its id, as `swarmctl call` says it; it was a parse error with id null.
        server.send('{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"changeset_create",'
                    '"arguments":{"message":"cut \\ud83d"}}}')
        surrogate = server.receive()
        server.send('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"changeset_create\\ud83d","arguments":{}}}')
        surrogate_name = server.receive()
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
    assert not_json["error"] == {"code": -32700, "message": "Parse error: the line is not JSON"}
    for answer in (long_argument, long_id):  # as the SDK's own reader refuses it ("number out of range")
        assert answer["id"] is None
        assert answer["error"] == {"code": -32700, "message": "Parse error: a number in the line has more than 4300 digits"}
    assert nan == {"jsonrpc": "2.0", "id": None,
                   "error": {"code": -32700, "message": "Parse error: the line is not JSON: NaN is not a JSON value"}}
    error = surrogate["result"]["structuredContent"]["error"]
    assert surrogate["id"] == 10 and error["code"] == "E_INVALID_ARG" and "\\ud83d alone" in error["message"], surrogate
    called = sw("--repo", str(sw.store), "--as", AGENT, "call", "changeset_create", '{"message":"cut \\ud83d"}')
    assert called.error["message"] == error["message"]
    assert surrogate_name["id"] is None and surrogate_name["error"]["code"] == -32700  # outside the arguments: unread
    assert after["id"] == 7 and after["result"]["structuredContent"]["result"]["op"] == 6
    assert code == 0 and "Traceback" not in err
    assert (op_count(sw.store), refs(sw.store)) == before
    assert problems(sw.store) == []


def test_call_lines_holds_each_line_to_the_bound_and_goes_on(sw):
    build_golden_store(sw)
    text = json.dumps({"tool": "ref_list", "arguments": {"prefix": "x" * 2000}}) + "\n"
    text += "[" * 100 + "\n" + '{"tool": "op_show", "arguments": {"op": %s}}\n' % LONG[:900]
    text += json.dumps({"tool": "op_show", "arguments": {"op": 6}, "id": 1}) + "\n"
    env = {"SWARMCTL_MAX_INPUT_BYTES": "1000"}
    ran = sw.process("--repo", str(sw.store), "call", "--lines", input=text, env={**env, "PYTHONINTMAXSTRDIGITS": "800"})
    too_big, too_deep, too_long, shown = [json.loads(line) for line in ran.stdout.splitlines()]
    assert too_big["error"]["details"] == {"input": "a line of stdin", "max_bytes": 1000}
    assert too_deep["error"]["code"] == "E_INVALID_ARG" and too_deep["error"]["details"]["max_depth"] == 64
    assert too_long["error"]["message"] == "the line is unreadable: a number in it has more than 800 digits"
    assert shown["ok"] and shown["result"]["op"] == 6
    assert ran.exit == 2 and "Traceback" not in ran.stderr
