"""`swarmctl mcp --http`: a real server process, real clients (the SDK's Streamable HTTP client,
and raw HTTP for what that client never sends), tokens that name actors.

Every wait here is on an event: the server's `listening on` line, a response, a file a step
writes, the clock passing a token's expiry."""

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from swarm import Swarm, swarmctl_argv
from core_helpers import ALICE, as_
from mcp_client import HttpClient, HttpServer
from swarmctl import names, registry

LISTENING = re.compile(r"^listening on http://127\.0\.0\.1:(\d+)/mcp$", re.M)
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _init(sw: Swarm) -> str:
    """A store with one changeset; its id."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    return sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "m")["changeset"]["id"]


def _token(sw: Swarm, actor: str, *args: str) -> dict:
    return sw.ok(*as_(sw, ALICE), "token", "create", actor, *args)


def _serve(sw: Swarm, *args: str) -> HttpServer:
    server = HttpServer("--repo", str(sw.store), "mcp", "--http", "127.0.0.1:0", *args, cwd=sw.tmp, env=sw.env)
    assert server.url is not None, server.stop()
    return server


# The servers here speak plain HTTP on loopback, so no request needs a CA bundle; but httpx
# loads one into every client it makes (each module-level call makes one) unless `verify` is
# off: about 50 ms of CPU a request (51 ms measured here, SSL_CERT_FILE naming Debian's bundle).
PLAIN = {"verify": False}


def _post(url: str, body: dict | str | bytes, token: str | None = None, **headers: str) -> httpx2.Response:
    sent = {**HEADERS, **({"authorization": f"Bearer {token}"} if token else {}), **headers}
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx2.post(url, content=content, headers=sent, timeout=60, **PLAIN)


def _ops(sw: Swarm) -> list[dict]:
    return sw.ok("--repo", str(sw.store), "op", "log", "-n", "1000")["ops"]


@pytest.mark.backends("sqlite", "postgres")
def test_a_token_names_the_actor_and_a_read_only_token_only_reads(sw):
    cs = _init(sw)
    writer, reader = _token(sw, "agent/w1"), _token(sw, "agent/r1", "--read-only")
    with _serve(sw) as server:
        port = int(LISTENING.search(server.log()).group(1))
        assert port > 0 and server.url == f"http://127.0.0.1:{port}/mcp"
        with HttpClient(server.url, writer["token"]) as client:
            assert {t.name for t in client.list_tools().tools} == {t.name for t in registry.mcp_tools()}
            made = client.envelope("ref_set", {"name": "main", "target": cs})
        with HttpClient(server.url, reader["token"]) as client:
            refused = client.envelope("ref_set", {"name": "other", "target": cs})
            read = client.envelope("op_log", {"limit": 1})
    assert made["ok"] and made["meta"]["auth"] == "token", made
    assert refused["error"]["code"] == "E_FORBIDDEN" and refused["meta"]["auth"] == "token", refused
    assert read["ok"] and read["result"]["ops"][0]["actor"] == "agent/w1" and read["result"]["ops"][0]["kind"] == "ref_set"


def _session(url: str, token: str) -> dict[str, str]:
    """A session opened over raw HTTP: the headers its later requests carry."""
    opened = _post(url, INIT, token)
    assert opened.status_code == 200, opened.text
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, **session)
    return session


def _call(name: str, arguments: dict, request_id: int = 7) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def test_missing_unknown_expired_and_revoked_tokens_get_401_and_run_nothing(sw):
    cs = _init(sw)
    good, revoked, expiring = _token(sw, "agent/w1"), _token(sw, "agent/w2"), _token(sw, "agent/w3", "--expires", "1s")
    with _serve(sw) as server:
        session = _session(server.url, revoked["token"])  # opened before the revocation
        with HttpClient(server.url, revoked["token"]) as client:
            assert client.envelope("op_log", {"limit": 1})["ok"]
            sw.ok(*as_(sw, ALICE), "token", "revoke", str(revoked["id"]))
            before = len(_ops(sw))
            with pytest.raises(Exception):
                client.call_tool("ref_set", {"name": "late", "target": cs})
        late = _post(server.url, _call("ref_set", {"name": "late", "target": cs}), revoked["token"], **session)
        assert late.status_code == 401, late.text
        assert len(_ops(sw)) == before, "a call on a revoked token ran"
        while names.now() < sw.ok("--repo", str(sw.store), "token", "list")["tokens"][2]["expires_at"]:
            time.sleep(0.05)  # waits on the clock passing the token's expiry, not on a guess
        for token in (None, "swt_never-issued", revoked["token"], expiring["token"], good["token"] + "x"):
            answer = _post(server.url, INIT, token)
            assert answer.status_code == 401, (token, answer.status_code, answer.text)
            assert "swt_" not in answer.text
        assert _post(server.url, INIT, good["token"]).status_code == 200
        basic = _post(server.url, INIT, **{"authorization": f"Basic {good['token']}"})
        assert basic.status_code == 401, basic.text
        # Two Authorization headers: the SDK took the first; which names the caller is not guessed
        for tokens in ((good["token"], "swt_never-issued"), ("swt_never-issued", good["token"])):
            headers = [*HEADERS.items(), *(("authorization", f"Bearer {t}") for t in tokens)]
            twice = httpx2.post(server.url, content=json.dumps(INIT), headers=headers, timeout=60, **PLAIN)
            assert (twice.status_code, twice.json()["error"]["message"]) == (
                400, "Invalid request: Authorization is given twice; nothing was run"), twice.text
    assert len(_ops(sw)) == before


def test_a_request_without_a_token_is_401_before_its_body_is_read(sw):
    """A POST with no token the store knows was read (up to 16 MiB) and parsed on the event
    loop before the 401: deep JSON got 400, a big body 413, and one big body from anyone
    stalled every caller's calls for seconds. The 401 comes first now, whatever the body."""
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        for body in ("[" * 100_000, "not json", '{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"a": [' + "{}," * 4_000_000 + "{}]}}"):
            for sent in (None, "swt_never-issued"):
                answer = _post(server.url, body, sent)
                assert answer.status_code == 401, (sent, body[:20], answer.status_code, answer.text[:200])
        assert _post(server.url, "[" * 100_000, token).status_code == 400  # with a token, the body is checked


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sighup_stops_the_server_as_sigterm_does(sw, sig):
    """SIGHUP (a closed terminal) reached the server as swarmctl's own handler, raised in the
    event loop: 34 lines of traceback and no drain. It stops it as SIGTERM does: exit 130, quietly."""
    import signal

    _init(sw)
    server = _serve(sw, "--auth", "trust", "--as", ALICE)
    server.proc.send_signal(getattr(signal, sig))
    status, _, log = server.stop()
    assert status == 130 and "Traceback" not in log and log.strip().splitlines() == [f"listening on {server.url}"], log


def test_host_and_origin_are_checked_and_no_cors_headers_are_sent(sw):
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw, "--allowed-origin", "https://app.example") as server:
        port = server.url.split(":")[2].split("/")[0]
        evil = _post(server.url, INIT, token, origin="http://evil.example")
        assert evil.status_code == 403 and evil.json()["error"]["code"] == -32600, evil.text
        rebound = _post(server.url, INIT, token, host=f"evil.example:{port}")
        assert rebound.status_code == 421 and rebound.json()["jsonrpc"] == "2.0", rebound.text
        fine = [_post(server.url, INIT, token, origin=o) for o in ("https://app.example", f"http://localhost:{port}")]
        assert [r.status_code for r in fine] == [200, 200], [r.text for r in fine]
        assert _post(server.url, INIT, token, host=f"localhost:{port}").status_code == 200
        preflight = httpx2.options(
            server.url, headers={"origin": "https://app.example", "access-control-request-method": "POST"}, **PLAIN
        )
        for answer in [evil, rebound, *fine, preflight]:
            assert not [h for h in answer.headers if h.lower().startswith("access-control-")], dict(answer.headers)


def test_an_allowed_host_adds_to_the_servers_own_names_and_a_portless_one_allows_its_origin_on_any_port(sw):
    """`--allowed-host myhost` replaced the default names (a local client's `Host: 127.0.0.1:PORT`
    was refused, 421), where the README says it adds; and allowed without a port, `Host:
    myhost:PORT` passed while `Origin: http://myhost:PORT` was refused (403)."""
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw, "--allowed-host", "myhost") as server:
        port = server.url.split(":")[2].split("/")[0]
        for headers in ({}, {"host": f"localhost:{port}"}, {"host": f"myhost:{port}"},
                        {"host": f"myhost:{port}", "origin": f"http://myhost:{port}"}, {"origin": "http://myhost"}):
            answer = _post(server.url, INIT, token, **headers)
            assert answer.status_code == 200, (headers, answer.text)
        assert _post(server.url, INIT, token, origin=f"http://evil.example:{port}").status_code == 403
        assert _post(server.url, INIT, token, origin=f"https://myhost:{port}").status_code == 403  # https: --allowed-origin


def test_bodies_are_bounded_and_checked_before_the_sdk_reads_them(sw):
    cs = _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        sw.env["SWARMCTL_MAX_INPUT_BYTES"] = "1"  # for nothing: the server read its bound at start
        big = _post(server.url, '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + "x" * (17 << 20) + '"}}', token)
        assert big.status_code == 413 and big.json()["error"]["data"] == {"code": "E_INVALID_ARG", "max_bytes": 16 << 20}, big.text[:300]
        twice = _post(server.url, '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', token)
        assert twice.status_code == 400 and twice.json()["error"]["data"]["fields"] == ["id"], twice.text
        deep = _post(server.url, '{"jsonrpc":"2.0","id":1,"method":"ping","params":' + "[" * 500 + "]" * 500 + "}", token)
        assert deep.status_code == 400 and deep.json()["error"]["code"] == -32600, deep.text
        # JSON that is no message (a batch, which MCP does not take): stdio's answer, not the SDK's
        # -32602 with pydantic's errors in it
        batch = _post(server.url, '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', token)
        assert (batch.status_code, batch.json()) == (400, {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Invalid request: not a JSON-RPC 2.0 message"}}), batch.text[:300]
        nan = _post(server.url, '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', token)
        assert (nan.status_code, nan.json()["error"]) == (400, {
            "code": -32700, "message": "Parse error: the line is not JSON: NaN is not a JSON value"}), nan.text
        session = _session(server.url, token)
        call = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ref_set","arguments":{"name":"a","name":"b","target":"' + cs + '"}}}'
        answer = _post(server.url, call, token, **session)
    event = json.loads(next(line[5:] for line in answer.text.splitlines() if line.startswith("data:")))
    envelope = event["result"]["structuredContent"]
    assert event["id"] == 7 and event["result"]["isError"] is True
    assert envelope["op"] == "ref_set" and envelope["error"]["code"] == "E_INVALID_ARG", envelope
    assert [op["kind"] for op in _ops(sw)] == ["token_create", "changeset_create", "init"], "a refused call wrote"


@pytest.mark.parametrize(
    "args, word",
    [
        (("--http", "0.0.0.0:0", "--auth", "trust", "--as", ALICE), "loopback"),
        (("--http", "[::]:0", "--auth", "trust"), "loopback"),
        (("--http", "127.0.0.1:0", "--as", ALICE), "--as"),
        (("--http", "127.0.0.1:0", "--auth", "maybe"), "--auth"),
        (("--http", "localhost", "--auth", "trust"), "HOST:PORT"),
        (("--http", "::1:80"), "HOST:PORT"),
        (("--http", "localhost:²"), "HOST:PORT"),  # str.isdigit() took it, int() did not: a traceback
        (("--http", "localhost:٤٤"), "HOST:PORT"),  # int() read it as 44, and the server served there
    ],
)
def test_what_cannot_be_served_is_refused_at_start_up(sw, args, word):
    _init(sw)
    ran = sw.process("--repo", str(sw.store), "mcp", *args)
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG" and word in ran.error["message"], ran.transcript()
    assert "listening" not in ran.stderr


def test_a_refusal_at_start_up_comes_before_the_server_stack_is_imported(sw):
    """What cannot be served, a port in use among them, is refused without importing the MCP
    SDK or uvicorn (a second's work): the error comes back at once."""
    _init(sw)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        for args, word in (
            (("--http", "0.0.0.0:0", "--auth", "trust"), "loopback"),
            (("--http", f"127.0.0.1:{port}", "--auth", "trust"), "cannot listen"),
        ):
            ran = subprocess.run(
                [sys.executable, "-X", "importtime", swarmctl_argv()[0], "--repo", str(sw.store), "--as", ALICE, "mcp", *args],
                capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
            )
            envelope = json.loads(ran.stdout)
            assert ran.returncode == 2 and envelope["error"]["code"] == "E_INVALID_ARG", ran.stdout + ran.stderr
            assert word in envelope["error"]["message"], envelope
            imported = {line.split("|")[-1].strip() for line in ran.stderr.splitlines() if line.startswith("import time:")}
            assert "swarmctl.cli" in imported, "the probe saw no imports"
            assert not imported & {"mcp", "uvicorn", "swarmctl.mcp", "swarmctl.mcp_http"}, sorted(imported)
    finally:
        taken.close()


def test_a_request_that_does_not_arrive_whole_in_time_is_dropped_and_others_are_served(sw):
    """A client that opened connections and sent nothing, or a request's head or body a piece
    at a time (slowloris), held each connection for ever: enough of them and the server had no
    descriptor left. Each request must now arrive whole within SWARMCTL_HTTP_READ_TIMEOUT of the
    connection (or the response before it); answering may take longer. (Each socket waits for
    the server to close it, up to 60 s: a wait on the event, with a bound, not a timing.)"""
    _init(sw)
    (sw.tmp / "slow.toml").write_text('name = "slow"\n[[step]]\nname = "s"\nrun = ["sleep", "2"]\n')
    sw.env["SWARMCTL_HTTP_READ_TIMEOUT"] = "1"
    with _serve(sw, "--auth", "trust", "--as", ALICE, "--allow-run") as server:
        authority = server.url.split("/")[2]
        host, port = authority.rsplit(":", 1)
        head = f"POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n"
        late = {
            "nothing": b"",
            "half a head": head.encode(),
            "half a body": (head + "Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{").encode(),
        }
        sockets = {}
        for what, sent in late.items():
            sockets[what] = socket.create_connection((host, int(port)), timeout=60)
            sockets[what].sendall(sent)
        session = _session(server.url, "")
        slow = _post(server.url, _call("workflow_run", {"file": str(sw.tmp / "slow.toml")}), **session)  # 2 s to answer
        for what, sock in sockets.items():
            with sock:
                assert sock.recv(1000) == b"", what  # closed by the server, having answered nothing
    event = json.loads(next(line[5:] for line in slow.text.splitlines() if line.startswith("data:")))
    assert event["result"]["structuredContent"]["result"]["workflow"]["state"] == "completed", event
    bad = sw.process("--repo", str(sw.store), "mcp", "--http", "127.0.0.1:0", env={"SWARMCTL_HTTP_READ_TIMEOUT": "0"})
    assert (bad.exit, bad.error["code"]) == (2, "E_INVALID_ARG") and "SWARMCTL_HTTP_READ_TIMEOUT" in bad.error["message"]


def test_http_options_go_with_http_only(sw):
    _init(sw)
    ran = sw.process("--repo", str(sw.store), "mcp", "--allow-run")
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG" and "--http" in ran.error["message"], ran.transcript()


def test_trust_on_loopback_acts_as_the_servers_actor(sw):
    cs = _init(sw)
    server = HttpServer("--repo", str(sw.store), "mcp", "--http", "[::1]:0", "--auth", "trust", "--as", ALICE, cwd=sw.tmp, env=sw.env)
    with server:
        assert re.fullmatch(r"http://\[::1\]:\d+/mcp", server.url or ""), server.log()
        with HttpClient(server.url) as client:
            made = client.envelope("ref_set", {"name": "main", "target": cs})
    assert made["ok"] and made["meta"]["auth"] == "trust" and _ops(sw)[0]["actor"] == ALICE


WAITING_STEP = """#!/bin/sh
touch "$1/started"
while [ ! -e "$1/release" ]; do sleep 0.05; done
"""


def test_workflow_run_with_commands_needs_allow_run(sw):
    cs = _init(sw)
    token = _token(sw, "agent/w1")["token"]
    (sw.tmp / "wf.toml").write_text('name = "w"\n[[step]]\nname = "s"\nrun = ["true"]\n')
    (sw.tmp / "refs.toml").write_text('name = "r"\n[[step]]\nname = "s"\nref_set = { name = "main", to = "%s" }\n' % cs)
    with _serve(sw) as server, HttpClient(server.url, token) as client:
        refused = client.envelope("workflow_run", {"file": str(sw.tmp / "wf.toml")})
        store_only = client.envelope("workflow_run", {"file": str(sw.tmp / "refs.toml")})
    assert refused["error"]["code"] == "E_FORBIDDEN" and "--allow-run" in refused["error"]["message"], refused
    assert store_only["ok"], store_only
    with _serve(sw, "--allow-run") as server, HttpClient(server.url, token) as client:
        ran = client.envelope("workflow_run", {"file": str(sw.tmp / "wf.toml")})
    assert ran["ok"] and ran["result"]["workflow"]["state"] == "completed", ran


_READS = """
import sys, anyio
from swarmctl.http_address import Options
from swarmctl.mcp_http import HttpDoor
repo, path = sys.argv[1], sys.argv[2]
opened = []
sys.addaudithook(lambda event, args: opened.append(event) if event == "open" and args and str(args[0]) == path else None)
door = HttpDoor(Options("127.0.0.1", 0, repo=repo, actor="agent/w1", auth="trust"))
envelope = anyio.run(door.dispatch, None, "workflow_run", {"file": path})
print(len(opened), envelope["ok"] or envelope["error"]["code"])
"""


def test_the_allow_run_check_is_made_on_the_one_read_of_the_file_that_runs(sw):
    """The HTTP door read the workflow file to look for `run` steps, then the tool read it again
    to run it: a file changed between the two reads (a FIFO made it certain) passed the check
    with one definition and ran the commands of another. Now the tool asks the door's rule of
    the one definition it read. A FIFO, or anything but a regular file, is refused unread (the
    door's own read of one held the server's event loop until a writer came)."""
    _init(sw)
    (sw.tmp / "wf.toml").write_text('name = "w"\n[[step]]\nname = "s"\nrun = ["true"]\n')
    ran = subprocess.run([sys.executable, "-c", _READS, str(sw.store), str(sw.tmp / "wf.toml")],
                         capture_output=True, text=True, env=sw.env, timeout=120)
    assert ran.stdout.split() == ["1", "E_FORBIDDEN"], ran.stdout + ran.stderr
    fifo = sw.tmp / "wf.fifo"
    os.mkfifo(fifo)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        try:
            session = _session(server.url, token)
            answer = _post(server.url, _call("workflow_run", {"file": str(fifo)}), token, **session)  # 60 s at most
        finally:
            try:  # a read still waiting for a writer (the defect) gets one, and the server can stop
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        with HttpClient(server.url, token) as client:
            assert client.envelope("ref_list", {})["ok"]  # served on
    refused = json.loads(next(line[5:] for line in answer.text.splitlines() if line.startswith("data:")))["result"]["structuredContent"]
    assert refused["error"]["code"] == "E_INVALID_ARG"
    assert refused["error"]["message"] == f"workflow file {fifo} is a FIFO (named pipe), not a regular file"


def test_resume_and_rollback_that_would_run_commands_need_allow_run_too(sw):
    """A workflow started with the CLI, resumed or rolled back over HTTP, runs its commands on
    the store's host for whoever holds a token, as workflow_run would: without --allow-run a
    resume that would run a `run` step, and a confirmed rollback that would run a `rollback`
    command, are E_FORBIDDEN (a preview is answered, and runs nothing)."""
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    cli = ("--repo", str(sw.store), "--as", ALICE)
    (sw.tmp / "gate.toml").write_text('name = "g"\n[[step]]\nname = "ok"\napproval = "go?"\n[[step]]\nname = "s"\nrun = ["touch", "resumed"]\n')
    gated = sw.ok(*cli, "workflow", "run", str(sw.tmp / "gate.toml"))["workflow"]["id"]
    sw.ok(*cli, "workflow", "approve", gated)
    (sw.tmp / "undo.toml").write_text('name = "u"\n[[step]]\nname = "s"\nrun = ["true"]\nrollback = ["touch", "undone"]\n')
    done = sw.ok(*cli, "workflow", "run", str(sw.tmp / "undo.toml"))["workflow"]["id"]
    with _serve(sw) as server, HttpClient(server.url, token) as client:
        resumed = client.envelope("workflow_resume", {"workflow": gated})
        preview = client.envelope("workflow_rollback", {"workflow": done, "include_completed": True})
        confirmed = client.envelope("workflow_rollback", {"workflow": done, "include_completed": True, "confirm": True})
    for refused in (resumed, confirmed):
        assert refused["error"]["code"] == "E_FORBIDDEN" and "--allow-run" in refused["error"]["message"], refused
    assert preview["ok"] and preview["result"]["action"] == "preview", preview
    assert not (sw.tmp / "resumed").exists() and not (sw.tmp / "undone").exists()
    states = {w["id"]: w["state"] for w in sw.ok("--repo", str(sw.store), "workflow", "list")["workflows"]}
    assert states == {gated: "awaiting_approval", done: "completed"}
    with _serve(sw, "--allow-run") as server, HttpClient(server.url, token) as client:
        assert client.envelope("workflow_resume", {"workflow": gated})["ok"]
        assert client.envelope("workflow_rollback", {"workflow": done, "include_completed": True, "confirm": True})["ok"]
    assert (sw.tmp / "resumed").exists() and (sw.tmp / "undone").exists()


def test_a_call_whose_client_went_away_runs_to_completion(sw):
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    step = sw.tmp / "wait.sh"
    step.write_text(WAITING_STEP)
    step.chmod(0o755)
    (sw.tmp / "wf.toml").write_text(f'name = "w"\n[[step]]\nname = "s"\nrun = ["{step}", "{sw.tmp}"]\n')
    with _serve(sw, "--allow-run") as server:

        async def call_and_leave() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_call_in_session, server.url, token, str(sw.tmp / "wf.toml"))
                with anyio.fail_after(120):
                    while not (sw.tmp / "started").exists():
                        await anyio.sleep(0.05)  # waits on the step's file
                tg.cancel_scope.cancel()  # the client goes away mid-call

        anyio.run(call_and_leave)
        (sw.tmp / "release").touch()
        deadline = time.monotonic() + 120
        while _workflow_states(sw) != ["completed"] and time.monotonic() < deadline:
            time.sleep(0.05)  # waits on the abandoned call's workflow to end
    assert _workflow_states(sw) == ["completed"]


def _workflow_states(sw: Swarm) -> list[str]:
    return [w["state"] for w in sw.ok("--repo", str(sw.store), "workflow", "list")["workflows"]]


async def _call_in_session(url: str, token: str, file: str) -> None:
    client = HttpClient(url, token)
    async with client._connect() as session:
        await session.call_tool("workflow_run", {"file": file})


AGENTS = 16
WRITES = 4


@pytest.mark.backends("sqlite", "postgres")
def test_sixteen_agents_with_sixteen_tokens_racing_writes_get_gapless_ops_under_their_names(sw):
    cs = _init(sw)
    made = [_token(sw, f"agent/racer-{i:02d}") for i in range(AGENTS)]
    first = len(_ops(sw)) + 1
    with _serve(sw) as server:
        envelopes = _race(server.url, [t["token"] for t in made], cs)
        log = server.log()
    assert all(e["ok"] and e["meta"]["auth"] == "token" for e in envelopes), [e for e in envelopes if not e["ok"]][:2]
    ops = sorted(_ops(sw), key=lambda op: op["op"])[first - 1 :]
    assert [op["op"] for op in ops] == list(range(first, first + AGENTS * WRITES)), "the ops have a gap"
    by_ref = {op["ref_moves"][0]["name"]: op["actor"] for op in ops}
    assert by_ref == {f"race/{i:02d}-{n}": f"agent/racer-{i:02d}" for i in range(AGENTS) for n in range(WRITES)}
    assert sorted(e["result"]["op"] for e in envelopes) == [op["op"] for op in ops]
    assert not [t for t in made if t["token"] in log or t["token"][4:] in log], "a token's value is in the server's log"


def _race(url: str, tokens: list[str], target: str) -> list[dict]:
    """Each token an agent with its own session, all writing at once."""
    envelopes: list[dict] = []

    async def agent(i: int, token: str) -> None:
        async with HttpClient(url, token)._connect() as session:
            for n in range(WRITES):
                result = await session.call_tool("ref_set", {"name": f"race/{i:02d}-{n}", "target": target})
                envelopes.append(result.structured_content)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i, token in enumerate(tokens):
                tg.start_soon(agent, i, token)

    anyio.run(main)
    return envelopes


def test_a_tokens_value_is_never_in_the_store_the_log_or_any_output(sw):
    cs = _init(sw)
    made = _token(sw, "agent/w1")
    value, secret = made["token"], made["token"][4:]
    outputs = []
    with _serve(sw) as server:
        with HttpClient(server.url, value) as client:
            outputs += [json.dumps(client.envelope(name, args)) for name, args in [
                ("ref_set", {"name": "main", "target": cs}), ("op_log", {}), ("op_show", {"op": 1}),
                ("ref_list", {}), ("ref_set", {"name": "main", "target": "nope"}),
            ]]
            outputs += [json.dumps(m) for m in client.received.messages]
        outputs += [_post(server.url, INIT, value, origin="http://evil.example").text, _post(server.url, INIT, value + "x").text]
        sw.ok(*as_(sw, ALICE), "token", "revoke", str(made["id"]))
        outputs.append(_post(server.url, INIT, value).text)
        _, out, log = server.stop()
    outputs += [out, log]
    for args in (("token", "list"), ("token", "list", "-o", "table"), ("op", "log"), ("op", "log", "-o", "table"), ("op", "show", "2")):
        ran = sw("--repo", str(sw.store), *args)
        outputs += [ran.stdout, ran.stderr]
    assert [o for o in outputs if value in o or secret in o] == []
    stored = [p for p in Path(sw.store).rglob("*") if p.is_file()]
    assert stored and [p for p in stored if secret.encode() in p.read_bytes()] == []


def test_a_stopping_server_answers_the_calls_under_way_and_runs_no_new_one(sw):
    """SIGTERM while a write is under way (held just before its COMMIT by the fault hook): a
    call that comes after the signal is answered E_UNAVAILABLE and runs nothing; the write
    under way commits once and its client gets its envelope; then the server exits. (Before,
    every SSE stream ended at the signal: the write's client got no answer while its write
    landed, and a retry would have written twice.)"""
    import signal
    import threading

    target = _init(sw)
    flag = sw.tmp / "paused"
    env = {**sw.env, "SWARMCTL_FAULT": f"pause-before-commit:{flag}"}
    args = ("--repo", str(sw.store), "--as", ALICE, "mcp", "--http", "127.0.0.1:0", "--auth", "trust")
    answers: dict[str, dict] = {}
    with HttpServer(*args, cwd=sw.tmp, env=env) as server:
        assert server.url is not None, server.log()

        def write() -> None:
            with HttpClient(server.url) as client:
                # A read first: the SDK client asks for tools/list after its first call's answer
                # (to check it against the output schema), which, after the drain, finds the
                # server gone; asked now, the write's answer is the last thing it waits for.
                assert client.envelope("ref_list", {})["ok"]
                answers["write"] = client.envelope("ref_set", {"name": "drained", "target": target})

        writer = threading.Thread(target=write)
        writer.start()
        try:
            deadline = time.monotonic() + 120
            while not (flag.exists() and flag.read_text()):  # the write waits before its COMMIT
                assert server.proc.poll() is None and time.monotonic() < deadline, server.log()
                time.sleep(0.01)
            with HttpClient(server.url) as other:
                server.proc.send_signal(signal.SIGTERM)
                while (read := other.envelope("ref_list", {}))["ok"]:  # answered until the signal is seen
                    assert time.monotonic() < deadline, server.log()
                late = other.envelope("ref_set", {"name": "late", "target": target})
        finally:
            flag.unlink(missing_ok=True)  # the write goes on to commit
            writer.join(timeout=120)
        assert server.proc.wait(timeout=60) is not None
        log = server.log()
    assert "write" in answers, log  # the writer's thread raised (on stderr), or never got its answer
    for refused in (read, late):
        error = refused["error"]
        assert (error["code"], error["details"]) == ("E_UNAVAILABLE", {"stopping": True}), refused
    assert answers["write"]["ok"], answers
    written = [o for o in _ops(sw) if o["kind"] == "ref_set"]
    assert [o["op"] for o in written] == [answers["write"]["result"]["op"]]
    assert [r["name"] for r in sw.ok("--repo", str(sw.store), "ref", "list")["refs"]] == ["drained"]


def test_a_stream_asked_to_resume_opens_afresh(sw):
    """The server keeps no events to replay: a GET with Last-Event-ID opens the session's stream
    as a GET without it does (the SDK, asked to resume with nothing to resume from, answered no
    response at all: HTTP 500)."""
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        session = _session(server.url, token)
        headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream", "last-event-id": "abc", **session}
        with httpx2.stream("GET", server.url, headers=headers, timeout=60, **PLAIN) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")


def test_reads_are_answered_while_writes_fill_every_slot_waiting_on_the_lock(sw):
    """One agent's burst of writes, each waiting on the store's lock (held here), fills every
    worker slot the server has for calls; another agent's read is answered all the same, while
    those writes still wait. (Reads and writes shared the slots: the read waited until the
    writes gave up on the lock, E_BUSY after the lock timeout.)"""
    import threading

    from swarmctl.mcp_http import WORKERS
    target = _init(sw)
    writer_token, reader_token = _token(sw, "agent/w1")["token"], _token(sw, "agent/r1")["token"]
    env = {**sw.env, "SWARMCTL_LOCK_TIMEOUT": "30"}
    server = HttpServer("--repo", str(sw.store), "mcp", "--http", "127.0.0.1:0", cwd=sw.tmp, env=env)
    with server:
        assert server.url is not None, server.log()
        writes, reads = _session(server.url, writer_token), _session(server.url, reader_token)
        lock = sqlite3.connect(sw.store / "swarmops.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the store's write lock, held
        answered: list[httpx2.Response] = []
        try:
            burst = [
                threading.Thread(target=lambda i=i: answered.append(
                    _post(server.url, _call("ref_set", {"name": f"w/{i}", "target": target, "create": True}, i), writer_token, **writes)
                ))
                for i in range(WORKERS)
            ]
            for t in burst:
                t.start()
            deadline = time.monotonic() + 120
            while _sleeping_threads(server.proc.pid) < WORKERS:  # every slot's write waits on the lock
                assert time.monotonic() < deadline and not answered, (answered, server.log())
                time.sleep(0.01)
            read = _post(server.url, _call("ref_list", {}), reader_token, **reads)
            assert not answered, [a.text for a in answered]  # the writes still wait on the lock
        finally:
            lock.execute("ROLLBACK")
            lock.close()
            for t in burst:
                t.join(timeout=120)
    assert "ref_list" in read.text and '\\"ok\\":true' in read.text.replace(" ", ""), read.text
    assert len(answered) == WORKERS and all(a.status_code == 200 for a in answered)


def _sleeping_threads(pid: int) -> int:
    """How many of the process's threads sleep in the kernel's timed sleep: where SQLite's busy
    handler waits for a lock (an idle worker thread waits on a futex, the event loop in epoll)."""
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            count += Path(f"/proc/{pid}/task/{task}/wchan").read_text() == "hrtimer_nanosleep"
        except OSError:
            pass  # the thread ended
    return count


def test_a_token_holds_a_bounded_number_of_sessions(sw):
    """One token opens SESSIONS_PER_TOKEN sessions and is refused one more (HTTP 429), while
    another token still opens its own; once the first ends one (DELETE), it may open one again.
    (The SDK's only bound is the server's 10,000 sessions, for every token together: one token,
    a read-only one too, could take them all and lock every other agent out.)"""
    from swarmctl.mcp_http import SESSIONS_PER_TOKEN

    _init(sw)
    hog, other = _token(sw, "agent/hog", "--read-only")["token"], _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        opened = [_post(server.url, INIT, hog) for _ in range(SESSIONS_PER_TOKEN)]
        assert [r.status_code for r in opened] == [200] * SESSIONS_PER_TOKEN
        refused = _post(server.url, INIT, hog)
        assert refused.status_code == 429 and refused.json()["error"]["data"] == {"max_sessions": SESSIONS_PER_TOKEN}, refused.text
        assert _post(server.url, INIT, other).status_code == 200
        ended = httpx2.delete(
            server.url, headers={"authorization": f"Bearer {hog}", "mcp-session-id": opened[0].headers["mcp-session-id"]}, **PLAIN
        )
        assert ended.status_code == 200, ended.text
        assert _post(server.url, INIT, hog).status_code == 200


def test_initialize_requests_sent_at_once_do_not_pass_the_cap_together(sw):
    """The cap counted only sessions the SDK had registered: 200 `initialize` requests sent at
    the same moment (each held back by its last byte, then all let go) each passed it, and one
    token held 200 sessions. Those under way count too: never more than SESSIONS_PER_TOKEN."""
    import socket

    from swarmctl.mcp_http import SESSIONS_PER_TOKEN

    _init(sw)
    hog = _token(sw, "agent/hog")["token"]
    with _serve(sw) as server:
        host, rest = server.url.removeprefix("http://").split(":", 1)
        port = int(rest.split("/")[0])
        body = json.dumps(INIT).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {hog}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items()) + f"Content-Length: {len(body)}\r\n\r\n").encode()
        sockets = []
        for _ in range(SESSIONS_PER_TOKEN + 40):
            conn = socket.create_connection((host, port), timeout=60)
            conn.sendall(head + body[:-1])
            sockets.append(conn)
        for conn in sockets:
            conn.sendall(body[-1:])
        statuses = []
        for conn in sockets:
            statuses.append(conn.recv(64).split(b" ")[1])
            conn.close()
        assert statuses.count(b"429") >= 40 and statuses.count(b"200") <= SESSIONS_PER_TOKEN, statuses


def test_a_revoked_tokens_open_stream_is_ended(sw):
    """A session kept open by a GET stream never idled out: revoking its token refused the
    token's requests, but the stream (and the session) lived on for good. The server now ends
    the sessions of a revoked token; the test waits on the stream's end."""
    _init(sw)
    made = _token(sw, "agent/w1")
    with _serve(sw) as server:
        session = _session(server.url, made["token"])
        headers = {"authorization": f"Bearer {made['token']}", "accept": "text/event-stream", **session}
        with httpx2.stream("GET", server.url, headers=headers, timeout=httpx2.Timeout(60, read=None), **PLAIN) as stream:
            assert stream.status_code == 200
            sw.ok(*as_(sw, ALICE), "token", "revoke", str(made["id"]))
            deadline = time.monotonic() + 60
            for _ in stream.iter_bytes():  # pings (every 15 s), until the server ends the stream
                assert time.monotonic() < deadline, "the revoked token's stream is still open"
        assert _post(server.url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, made["token"], **session).status_code == 401


def test_a_cancelled_call_runs_to_its_end_and_is_answered_with_its_envelope(sw):
    """`notifications/cancelled` for a call under way: the call ran and committed, and the
    client was told "Request cancelled" (-32800); retried, it would do its work again."""
    cs = _init(sw)
    token = _token(sw, "agent/w1")["token"]
    (sw.tmp / "wf.toml").write_text(
        'name = "w"\n[[step]]\nname = "wait"\n'
        'run = ["/bin/sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.01; done"]\n'
        '[[step]]\nname = "move"\nref_set = { name = "after-cancel", to = "%s" }\n' % cs
    )
    with _serve(sw, "--allow-run") as server:
        session = _session(server.url, token)
        answers: list[httpx2.Response] = []
        call = threading.Thread(target=lambda: answers.append(
            _post(server.url, _call("workflow_run", {"file": str(sw.tmp / "wf.toml")}, 77), token, **session)))
        call.start()
        try:
            deadline = time.monotonic() + 60
            while not (sw.tmp / "started").exists():
                assert time.monotonic() < deadline and call.is_alive(), "the step never started"
                time.sleep(0.01)
            cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}}
            assert _post(server.url, cancelled, token, **session).status_code == 202
        finally:
            (sw.tmp / "go").touch()
            call.join(timeout=60)
    (answer,) = answers
    data = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    (reply,) = [d for d in data if d.get("id") == 77]
    assert "error" not in reply, reply
    envelope = reply["result"]["structuredContent"]
    assert envelope["ok"] and envelope["result"]["workflow"]["state"] == "completed", envelope
    assert any(r["name"] == "after-cancel" for r in sw.ok("--repo", str(sw.store), "ref", "list")["refs"])


def test_a_lone_surrogate_in_the_arguments_is_the_tool_s_error_under_the_request_s_id(sw):
    """As over stdio: a tools/call whose arguments hold `"\\ud83d"` alone was HTTP 400 with a
    parse error and id null, where `swarmctl call` gives the tool's E_INVALID_ARG."""
    _init(sw)
    token = _token(sw, "agent/w1")["token"]
    with _serve(sw) as server:
        session = _session(server.url, token)
        body = ('{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"changeset_create",'
                '"arguments":{"message":"cut \\ud83d"}}}')
        answer = _post(server.url, body, token, **session)
        assert answer.status_code == 200, answer.text
        message = next(json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")) \
            if answer.headers["content-type"].startswith("text/event-stream") else answer.json()
        error = message["result"]["structuredContent"]["error"]
        assert message["id"] == 42 and error["code"] == "E_INVALID_ARG" and "\\ud83d alone" in error["message"], message
