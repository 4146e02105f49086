"""The MCP SDK's internals that swarmctl/mcp.py builds on: if a release moves them, this fails
first, and says which (pyproject.toml pins `mcp` below the next minor release for this reason).

mcp.py's stdio transport hands the SDK `SessionMessage`s it read itself and relies on two
things that are not the SDK's documented API:

- `ServerMessageMetadata(request_context=X)` on an incoming request comes back to the tool
  handler as `ctx.request` (how a `tools/call` whose arguments name a field twice is failed
  with an envelope rather than run);
- `ServerMessageMetadata.on_request_unanswered` is awaited when a request settles without an
  answer (a client cancelled it), so the transport stops waiting for that answer at the end
  of input.

Each is checked by running the SDK's lowlevel `Server` in this process over memory streams,
exactly as `stdio_transport` feeds it.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from mcp_client import INITIALIZE, INITIALIZED
from swarmctl import mcp as swarm_mcp

MOVED = "the MCP SDK moved an internal swarmctl/mcp.py relies on"


def _message(raw: dict[str, Any], metadata: Any = None) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(raw, by_name=False), metadata=metadata)


def _call(request_id: int, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": {}}}


async def _serving(server: Server, body: Any) -> Any:
    """Run `server` on memory streams; `body(send, receive)` talks to it after `initialize`."""
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](8)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, from_client, to_client, server.create_initialization_options())
        await to_server.send(_message(INITIALIZE))
        initialized = (await from_server.receive()).message
        assert getattr(initialized, "id", None) == 1, f"{MOVED}: no answer to initialize: {initialized!r}"
        await to_server.send(_message(INITIALIZED))
        outcome = await body(to_server, from_server)
        await to_server.aclose()
        tg.cancel_scope.cancel()
    return outcome


def test_the_metadata_fields_mcp_py_sets_exist():
    fields = {f.name for f in dataclasses.fields(ServerMessageMetadata)}
    assert {"request_context", "on_request_unanswered"} <= fields, f"{MOVED}: ServerMessageMetadata has {sorted(fields)}"
    wanted = {"version", "title", "instructions", "on_list_tools", "on_call_tool"}
    assert wanted <= set(inspect.signature(Server).parameters), f"{MOVED}: Server() takes no {sorted(wanted)}"


def test_request_context_reaches_the_handler_as_ctx_request():
    seen: list[Any] = []
    marker = object()

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append(ctx.request)
        return types.CallToolResult(content=[])

    async def body(send: Any, receive: Any) -> None:
        await send.send(_message(_call(2, "marked"), ServerMessageMetadata(request_context=marker)))
        assert (await receive.receive()).message.id == 2
        await send.send(_message(_call(3, "plain")))
        assert (await receive.receive()).message.id == 3

    anyio.run(_serving, Server("contract", on_call_tool=call), body)
    assert seen == [marker, None], f"{MOVED}: request_context did not come back as ctx.request: {seen!r}"


def test_a_cancelled_request_runs_on_request_unanswered():
    started, unanswered = anyio.Event(), anyio.Event()

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()  # until the client cancels it
        raise AssertionError("not reached")

    async def given_up() -> None:
        unanswered.set()

    async def body(send: Any, receive: Any) -> None:
        await send.send(_message(_call(2, "slow"), ServerMessageMetadata(on_request_unanswered=given_up)))
        await started.wait()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        await send.send(_message(cancel))
        with anyio.fail_after(60):  # only a hang reaches this: the hook is the event awaited
            await unanswered.wait()

    anyio.run(_serving, Server("contract", on_call_tool=call), body)
    assert unanswered.is_set(), f"{MOVED}: on_request_unanswered was not awaited for a cancelled request"


def test_swarmctls_transport_marks_a_field_named_twice_for_its_handler(tmp_path, monkeypatch):
    """End to end in this process: `read_frame` marks the request, swarmctl's own handler
    (build_server) answers it with the E_INVALID_ARG envelope under the request's id."""
    monkeypatch.chdir(tmp_path)
    line = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"schema","arguments":{"type":"A","type":"B"}}}'
    frame = swarm_mcp.read_frame(line)
    assert isinstance(frame, SessionMessage)

    async def body(send: Any, receive: Any) -> Any:
        await send.send(frame)
        return (await receive.receive()).message

    answer = anyio.run(_serving, swarm_mcp.build_server(None, None), body)
    assert answer.id == 2, answer
    envelope = answer.result["structuredContent"]
    assert envelope["ok"] is False and envelope["error"]["code"] == "E_INVALID_ARG", f"{MOVED}: {envelope!r}"
    assert envelope["error"]["details"] == {"fields": ["type"]}


@pytest.mark.parametrize("name", ["INVALID_REQUEST", "PARSE_ERROR", "ErrorData", "JSONRPCError", "JSONRPCRequest", "JSONRPCResponse"])
def test_the_protocol_names_mcp_py_uses_exist(name):
    assert hasattr(types, name), f"{MOVED}: mcp_types has no {name}"
