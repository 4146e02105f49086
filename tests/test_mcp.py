"""The MCP server, as a client meets it: a real `swarmctl mcp` process over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

import swarmctl

from core_helpers import AGENT, ALICE, UNDO_REFERENCE_TEXT, as_, build_golden_store, child_commands, open_files
from golden import Normalizer
from mcp_client import INITIALIZE, INITIALIZED, McpClient, RawServer
from swarm import StoreNormalizer
from swarmctl import registry, schemas
from swarmctl.jsontext import arguments_named_twice
from swarmctl.mcp import read_frame

# The MCP example of reference/swarmops-undo.md: the request, and the response after
# normalisation (a name in square brackets stands for what differs from run to run): the
# envelope as structuredContent and again as the text of its one content block.
REFERENCE_REQUEST = {"id": 20, "jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {"op": 6}, "name": "undo"}}
REFERENCE_RESPONSE = {
    "id": 20,
    "jsonrpc": "2.0",
    "result": {
        "content": [{"text": UNDO_REFERENCE_TEXT, "type": "text"}],
        "isError": False,
        "structuredContent": json.loads(UNDO_REFERENCE_TEXT),
    },
}


def normalized_response(response: dict, normalize: Normalizer) -> dict:
    """A tools/call response with what differs between runs replaced, in its text and its
    structuredContent alike (one numbering of ids for both)."""
    result = dict(response["result"])
    result["content"] = [{**block, "text": normalize(block["text"])} for block in result["content"]]
    result["structuredContent"] = json.loads(normalize(json.dumps(result["structuredContent"], separators=(",", ":"))))
    return {**response, "result": result}


@pytest.mark.backends("sqlite", "postgres")
def test_undo_over_mcp_matches_the_reference_page(sw, golden):
    ids = build_golden_store(sw)
    with McpClient(sw.store, AGENT) as client:
        assert client.initialized.server_info.name == "swarmctl"
        assert client.initialized.server_info.version == swarmctl.version()  # pyproject's
        response = client.request("tools/call", REFERENCE_REQUEST["params"], request_id=20)
    assert response["result"]["structuredContent"]["result"]["ref_moves"][0]["new"] == ids["base"]
    normalized = normalized_response(response, StoreNormalizer(sw.tmp, sw.url))  # a URL read as the path
    assert normalized == REFERENCE_RESPONSE
    # The text is the CLI's compact envelope, byte for byte.
    assert normalized["result"]["content"][0]["text"] == REFERENCE_RESPONSE["result"]["content"][0]["text"]
    request = json.dumps(REFERENCE_REQUEST, indent=2, sort_keys=True)
    assert request + "\n\n" + json.dumps(normalized, indent=2, sort_keys=True) + "\n" == golden


def test_tools_list_describes_every_mcp_tool(sw):
    build_golden_store(sw)
    with McpClient(sw.store, AGENT) as client:
        listed = client.list_tools().tools
    expected = registry.mcp_tools()
    assert [t.name for t in listed] == [t.name for t in expected]
    for entry, tool in zip(listed, expected):
        wire = entry.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert set(wire) == {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}
        assert wire["title"] == tool.title and wire["description"] == tool.description
        assert wire["inputSchema"] == schemas.json_schema(tool.request)
        assert "$ref" not in json.dumps(wire["inputSchema"]), f"{tool.name}: inputSchema must stand alone"
        assert wire["outputSchema"] == schemas.envelope_schema(tool)
        jsonschema.Draft202012Validator.check_schema(wire["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(wire["outputSchema"])
        assert wire["annotations"] == tool.annotations.to_mcp()
    assert "init" not in [t.name for t in listed] and "demo" not in [t.name for t in listed]


@pytest.mark.backends("sqlite", "postgres")
def test_a_field_named_twice_is_invalid_and_writes_nothing(sw):
    build_golden_store(sw)
    with RawServer(sw.store, AGENT) as server:
        server.initialize()
        # Written by hand: a JSON library would keep only one of the two "op"s.
        server.send('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"undo","arguments":{"op":6,"op":5}}}')
        response = server.receive()
        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "op_log", "arguments": {"limit": 1}}})
        after = server.receive()
        status, rest, _ = server.close()
    assert response["id"] == 7 and response["result"]["isError"] is True
    envelope = response["result"]["structuredContent"]
    assert envelope["op"] == "undo"
    assert envelope["error"]["code"] == "E_INVALID_ARG"
    assert envelope["error"]["details"] == {"fields": ["op"]}
    assert json.loads(response["result"]["content"][0]["text"]) == envelope
    # Nothing was written, and the server served the next call.
    assert after["id"] == 8 and after["result"]["structuredContent"]["result"]["ops"][0]["op"] == 6
    assert status == 0 and rest == ""


@pytest.mark.backends("sqlite", "postgres")
def test_the_server_serves_on_without_its_store_and_after_errors(sw):
    with McpClient(sw.store, AGENT) as client:
        missing = client.envelope("op_log", {})
        assert missing["error"]["code"] == "E_NOT_A_REPO"
        build_golden_store(sw)  # the store appears while the server runs
        assert client.envelope("op_log", {"limit": 1})["result"]["ops"][0]["op"] == 6
        assert client.envelope("undo", {"op": 99})["error"]["code"] == "E_NOT_FOUND"
        assert client.envelope("undo", {"op": "6"})["error"]["code"] == "E_INVALID_ARG"  # strict: not a number
        unknown = client.envelope("udno", {"op": 6})
        assert unknown["op"] is None and unknown["error"]["code"] == "E_NOT_FOUND"
        assert unknown["error"]["details"]["tools"] == sorted(t.name for t in registry.mcp_tools())
        # A near miss is named, as a misspelt field is (it said only "no tool 'udno'").
        assert (unknown["error"]["message"], unknown["error"]["details"]["did_you_mean"]) == (
            "no tool 'udno': did you mean 'undo'?", "undo")
        assert client.envelope("undo", {"op": 4})["error"]["code"] == "E_CAS_MISMATCH"  # op 6 moved it since
        done = client.envelope("undo", {"op": 6, "a_field_from_a_newer_client": True})  # unknown: ignored
        assert done["ok"] and done["result"]["op"] == 7
        assert client.envelope("op_log", {"limit": 1})["result"]["ops"][0]["kind"] == "undo"
        assert client.server_stderr() == ""


@pytest.mark.backends("sqlite", "postgres")
def test_each_call_reads_the_store_afresh_and_needs_an_identity_to_write(sw):
    build_golden_store(sw)
    with McpClient(sw.store, actor=None) as client:
        assert client.envelope("op_log", {"limit": 1})["meta"]["auth"] == "none"
        refused = client.envelope("undo", {"op": 6})
        assert refused["error"]["code"] == "E_IDENTITY_REQUIRED"
        sw.ok("--repo", str(sw.store), "--as", ALICE, "op", "undo", "6")  # another process writes
        assert client.envelope("op_show", {"op": 7})["result"]["actor"] == ALICE


@pytest.mark.backends("sqlite", "postgres")
def test_requests_read_before_end_of_input_are_all_answered(sw):
    """`printf ... | swarmctl mcp`: closing stdin right after the last request still answers it."""
    build_golden_store(sw)
    with RawServer(sw.store, AGENT) as server:
        server.send(INITIALIZE)
        server.send(INITIALIZED)
        for request_id in (2, 3, 4):
            server.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "undo", "arguments": {"op": 6}}})
        status, out, err = server.close()
    responses = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in responses] == [1, 2, 3, 4]
    undos = [r["result"]["structuredContent"]["result"] for r in responses[1:]]
    assert [u["already_applied"] for u in undos] == [False, True, True]  # one undo, then replays
    assert status == 0, err


def test_an_invalid_actor_stops_the_server_before_it_serves(sw):
    build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "--as", "worker 17", "mcp", input="")
    assert ran.exit == 2
    assert ran.error["code"] == "E_INVALID_ARG"


# --- the transport's duplicate check, line by line -------------------------------------------


@pytest.mark.parametrize(
    "line, named_twice",
    [
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"undo","arguments":{"op":6,"op":6}}}', ["op"]),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"m":{"k":"a","k":"b"}}}}', ["k"]),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"l":[{"k":1,"k":2}]}}}', ["k"]),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"undo","arguments":{"op":6,"dry_run":true}}}', None),
        # Only a tools/call's arguments are ours to check; the rest is the SDK's.
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b","arguments":{}}}', None),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"arguments":{"a":1,"a":2}}}', None),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"undo"}}', None),
        ("not json", None),
        ("[1, 2]", None),
    ],
)
def test_arguments_named_twice(line, named_twice):
    error = arguments_named_twice(line)
    if named_twice is None:
        assert error is None
    else:
        assert error is not None and error.code == "E_INVALID_ARG" and error.details == {"fields": named_twice}


def test_read_frame_marks_only_the_rejected_request():
    marked = read_frame('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"undo","arguments":{"op":1,"op":2}}}')
    assert marked.message.id == 3 and marked.metadata.request_context.code == "E_INVALID_ARG"
    plain = read_frame('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"undo","arguments":{"op":1}}}')
    assert plain.message.id == 4 and plain.metadata is None
    assert isinstance(read_frame("not json"), Exception)


def test_the_output_schema_validates_success_and_failure_envelopes(sw):
    """Clients may validate structuredContent: both kinds of envelope must pass, a wrong one fail."""
    build_golden_store(sw)
    undo = registry.get("undo")
    validator = jsonschema.Draft202012Validator(schemas.envelope_schema(undo))
    ok = sw("--repo", str(sw.store), "--as", AGENT, "op", "undo", "6").envelope
    failed = sw("--repo", str(sw.store), "--as", AGENT, "op", "undo", "99").envelope
    validator.validate(ok)
    validator.validate(failed)
    assert not validator.is_valid({**ok, "result": {**ok["result"], "undone": "six"}})
    assert not validator.is_valid({**failed, "error": {**failed["error"], "code": "E_MADE_UP"}})
    assert not validator.is_valid({k: v for k, v in ok.items() if k != "result"})


@pytest.mark.backends("sqlite", "postgres")
def test_the_server_takes_its_store_and_identity_from_the_environment(sw):
    """The README's client configuration: `swarmctl mcp` with SWARMCTL_REPO / SWARMCTL_AS in `env`
    (a store's URL there on PostgreSQL)."""
    build_golden_store(sw)
    env = {**sw.env, "SWARMCTL_REPO": str(sw.store), "SWARMCTL_AS": AGENT}
    with RawServer(None, env=env) as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "undo", "arguments": {"op": "@"}}})
        envelope = server.receive()["result"]["structuredContent"]
        server.close()
    assert envelope["ok"] and envelope["result"]["undone"] == 6
    repo = sw.store if sw.backend == "postgres" else str(sw.store.resolve())
    assert envelope["meta"] == {**envelope["meta"], "repo": repo, "resolved": {"@": 6}, "auth": "trust"}


NOISY_SERVER = """
import os, sys
from swarmctl.tools import schema as area

real = area.SCHEMA.run

def noisy(ctx, req):
    print("stray print from a tool")
    sys.stdout.flush()
    os.system("echo stray output from a child process")
    return real(ctx, req)

area.TOOLS[0] = area.SCHEMA._replace(run=noisy)
from swarmctl.mcp import serve
sys.exit(serve(None, None))
"""


def test_what_a_tool_or_its_child_prints_never_reaches_the_wire(sw):
    """While serving, fd 1 is stderr: a workflow step's output cannot break the protocol."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", NOISY_SERVER],
        input="\n".join(json.dumps(m) for m in [
            INITIALIZE,
            INITIALIZED,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "schema", "arguments": {}}},
        ]) + "\n",
        capture_output=True, text=True, timeout=60, cwd=sw.tmp,
    )
    messages = [json.loads(line) for line in proc.stdout.splitlines()]  # every line is JSON-RPC
    assert [m["id"] for m in messages] == [1, 2]
    assert messages[1]["result"]["structuredContent"]["ok"] is True
    assert "stray print from a tool" in proc.stderr and "stray output from a child process" in proc.stderr
    assert proc.returncode == 0


def test_a_line_that_is_no_message_gets_a_json_rpc_error_and_the_server_serves_on(sw):
    build_golden_store(sw)
    with RawServer(sw.store, AGENT) as server:
        server.initialize()
        not_json, not_a_message, bad_params, old_version, after = server.exchange(
            "this is not json",
            '{"hello": "world"}',
            {"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": []},
            {"jsonrpc": "1.0", "id": 27, "method": "ping"},
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "op_show", "arguments": {"op": 6}}},
        )
        server.close()
    assert not_json == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: the line is not JSON"}}
    assert not_a_message["id"] is None and not_a_message["error"]["code"] == -32600
    # Not messages, but their ids can be read: answered under them (null was for no id at all).
    assert (bad_params["id"], bad_params["error"]["code"]) == (17, -32600)
    assert (old_version["id"], old_version["error"]["code"]) == (27, -32600)
    assert after["id"] == 9 and after["result"]["structuredContent"]["result"]["op"] == 6


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_a_2026_client_without_initialize_gets_the_same_envelope(sw):
    """Protocol 2026-07-28 has no handshake: each request carries its version in `_meta`, and a
    result must carry `resultType`. The SDK shapes our results for either era."""
    build_golden_store(sw)
    with RawServer(sw.store, AGENT) as server:
        server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "op_show", "arguments": {"op": 6}, "_meta": MODERN_META}})
        shown = server.receive()
        server.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"undo","arguments":{"op":6,"op":6},'
                    f'"_meta":{json.dumps(MODERN_META)}}}}}')
        twice = server.receive()
        server.close()
    assert shown["result"]["resultType"] == "complete"
    assert shown["result"]["structuredContent"]["result"]["op"] == 6
    assert json.loads(shown["result"]["content"][0]["text"]) == shown["result"]["structuredContent"]
    assert twice["result"]["isError"] is True
    assert twice["result"]["structuredContent"]["error"]["code"] == "E_INVALID_ARG"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the server's open files")
def test_the_server_keeps_one_connection_to_its_store_between_calls(sw):
    """One connection per store for the server's life: between calls the server process holds
    the store's database open, once, on the same descriptor (a server opening the store per
    call would hold it only during a call)."""
    ids = build_golden_store(sw)
    database = os.path.realpath(sw.store / "swarmops.db")

    def held(pid: int) -> list[str]:
        return sorted(fd for fd, name in open_files(pid).items() if name == database)

    with RawServer(sw.store, "agent/worker-17") as server:
        server.initialize()
        seen = []
        for request_id, (name, arguments) in enumerate(
            [("ref_list", {}), ("ref_set", {"name": "x", "target": ids["base"]}), ("op_log", {"limit": 1})], start=2
        ):
            server.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            response = server.receive()
            assert response["result"]["structuredContent"]["ok"], response
            seen.append(held(server.proc.pid))
        status, _, err = server.close()
    assert status == 0, err
    assert len(seen[0]) == 1 and seen == [seen[0]] * 3, seen


@pytest.mark.parametrize(
    "during, signum", [("idle", "SIGINT"), ("idle", "SIGTERM"), ("a write", "SIGINT"), ("a write", "SIGHUP"),
                       ("a written write", "SIGTERM"), ("a workflow's command", "SIGTERM")]
)
def test_ctrl_c_or_sigterm_stops_the_server_at_once(sw, during, signum):
    """Ctrl-C (SIGINT) or SIGTERM stops `swarmctl mcp` at once, exit 130, with the client's end
    of stdin still open. A call it stopped is answered E_INTERRUPTED first: a write rolled back;
    a workflow's command killed, its step saved interrupted. Nothing on stderr. (Left to
    asyncio's runner, the first Ctrl-C only cancelled the serving task, which waited for the
    next line, and a call under way went on; SIGTERM, raised wherever the event loop was, could
    leave anyio's state broken and the server waiting for the thread that reads stdin.)"""
    import signal
    import time

    from core_helpers import op_count

    ids = build_golden_store(sw)
    before = op_count(sw.store)
    flag = sw.tmp / "paused"
    flow = sw.tmp / "slow.toml"
    flow.write_text('name = "slow"\n[[step]]\nname = "wait"\nrun = ["sleep", "300"]\nrollback = ["true"]\n')
    call = {
        "a write": ("ref_set", {"name": "main", "target": ids["base"]}),
        "a written write": ("ref_set", {"name": "main", "target": ids["base"]}),
        "a workflow's command": ("workflow_run", {"file": str(flow)}),
    }.get(during)
    # A write stops just before its commit (or just after it); a workflow's writes must commit,
    # and its command runs.
    paused = {"SWARMCTL_FAULT": f"pause-{'after' if during == 'a written write' else 'before'}-commit:{flag}"} \
        if during in ("a write", "a written write") else {}
    with RawServer(sw.store, AGENT, env={**sw.env, **paused}) as server:
        server.initialize()
        if call is None:
            server.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert server.receive()["id"] == 2  # serving, waiting for the next line
        else:
            server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": call[0], "arguments": call[1]}})
            deadline = time.monotonic() + 60
            while not (flag.exists() and flag.read_text() if paused else _runs_sleep(server.proc.pid)):
                assert server.proc.poll() is None and time.monotonic() < deadline, server.proc.stderr.read()
                time.sleep(0.005)
        server.proc.send_signal(getattr(signal, signum))
        status = server.proc.wait(timeout=60)  # stdin stays open: the end of input does not stop it
        took_ms = (time.monotonic() - deadline + 60) * 1000 if call is not None else 0  # from the send to the end
        answers = [json.loads(line) for line in server.proc.stdout.read().splitlines()]
        assert (status, server.proc.stderr.read()) == (130, "")
    if call is None:
        assert answers == []
        return
    assert len(answers) == 1, answers  # the stopped call's answer
    answer = answers[0]
    error = answer["result"]["structuredContent"]["error"]
    assert (answer["id"], error["code"], error["details"]["signal"]) == (2, "E_INTERRUPTED", signum), answer
    # How long the call ran, as the CLI and `call` say it (it said 0): from when the server read it
    # to its answer, so within the time from sending it to the server's end, however busy the machine.
    assert 0 < answer["result"]["structuredContent"]["meta"]["elapsed_ms"] <= took_ms, (answer, took_ms)
    if during == "a write":
        assert op_count(sw.store) == before
    elif during == "a written write":
        # Committed before the signal came: said so, naming its op (it said "rolled back, not
        # written ... run the command again", and a client doing so made the change twice).
        assert op_count(sw.store) == before + 1 and error["details"]["committed"] == [before + 1], error
        assert "after its change was written" in error["message"], error
    else:
        assert not _runs_sleep(server.proc.pid)
        status = sw.ok("--repo", str(sw.store), "workflow", "status", error["details"]["workflow"])
        assert [s["status"] for s in status["steps"]] == ["interrupted"], status


def _runs_sleep(pid: int) -> bool:
    """Whether a child of `pid` runs `sleep` (the workflow's command)."""
    return any(argv and argv[0].endswith("sleep") for argv in child_commands(pid))


def test_a_client_that_closes_its_end_of_stdout_ends_the_server_quietly(sw):
    """The client stops reading (closes the server's stdout) but keeps stdin open: the server's
    next answer meets a closed pipe, and it ends, exit 0, as at the end of input. It printed
    a BrokenPipeError traceback and served on, waiting for the client's next line."""
    build_golden_store(sw)
    with RawServer(sw.store, AGENT) as server:
        server.proc.stdout.close()
        server.send(INITIALIZE)
        status = server.proc.wait(timeout=60)
        assert (status, server.proc.stderr.read()) == (0, "")


def test_undo_is_not_announced_idempotent_for_at_takes_back_its_own_undo(sw):
    """`undo {"op": "@"}` twice: the second takes back the first (`@` is the caller's newest op,
    then the undo), so a client retrying a call announced idempotent redid the change."""
    build_golden_store(sw)
    first = sw.ok(*as_(sw, AGENT), "call", "undo", '{"op": "@"}')
    second = sw.ok(*as_(sw, AGENT), "call", "undo", '{"op": "@"}')
    assert second["undone"] == first["op"] and second["op"] is not None
    from swarmctl import registry
    from swarmctl.mcp import tool_listing

    assert tool_listing(registry.get("undo"))["annotations"]["idempotentHint"] is False  # as tools/list gives it


def test_a_stdout_that_cannot_be_written_ends_the_server_with_one_line_not_a_traceback(sw):
    """Found by a probe: `swarmctl mcp > /dev/full` printed anyio's 60-line exception-group
    traceback and exited 1. It ends as any command whose stdout fails does: one line, exit 1."""
    import subprocess

    from swarm import swarmctl_argv

    build_golden_store(sw)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), "mcp"], input=json.dumps(INITIALIZE) + "\n",
                              stdout=full, stderr=subprocess.PIPE, text=True, env=sw.env, timeout=60)
    assert (proc.returncode, proc.stderr) == (1, "swarmctl: cannot write to stdout: No space left on device\n"), proc.stderr
