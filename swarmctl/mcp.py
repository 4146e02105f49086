"""The MCP server: every tool of the registry over stdio, on the official `mcp` SDK.

`swarmctl mcp --repo PATH --as ACTOR` serves `registry.mcp_tools()`. `tools/list` gives each
tool its name, title, description, `inputSchema` (the request type, each `$ref` inlined),
`outputSchema` (the envelope: `structuredContent` is the whole envelope, so that is what a
client validates) and annotations. `tools/call` runs the tool through `swarmctl.calls` (the
path `swarmctl call` takes too) with a fresh Context per call, on the store the server keeps
open for its life (one connection per store: `OpenStores`), and returns the envelope as
`structuredContent` and, compact, as the text of its one content block; `isError` is true
exactly when `ok` is false. A tool error, a missing store (E_NOT_A_REPO) or a bad argument is
one failed call: the server serves on.

Every line is answered: JSON-RPC -32700 for one that is not JSON, -32600 for an invalid request
(no JSON-RPC message, an `id` that is no string or number, a key named twice anywhere outside a
tool's `arguments`, a line past SWARMCTL_MAX_INPUT_BYTES, read and dropped without being held,
or nested far past SWARMCTL_MAX_JSON_DEPTH), and the server serves on. A field named twice in
`arguments` is E_INVALID_ARG. The SDK parses JSON-RPC itself and a
parsed object has lost its duplicates, so our stdio transport reads each line first, checks
`params.arguments` of a `tools/call` with `jsontext.arguments_named_twice`, and hands the SDK the
verdict on the message's metadata (which the SDK puts on the handler's context as `request`).

Only this module and mcp_http.py (the same server over Streamable HTTP, which passes its own
`dispatch`) import the SDK (about 1.5 s): the CLI imports them when `swarmctl mcp` runs.
"""

from __future__ import annotations

import io
import os
import sys
import time
from contextlib import asynccontextmanager, nullcontext
from typing import Any, AsyncIterator, Awaitable, Callable, ContextManager

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from swarmctl import jsontext, limits, registry, runner, schemas, version
from swarmctl.calls import call_tool
from swarmctl.context import Context, OpenStores
from swarmctl.envelope import SwarmError, dumps
from swarmctl.spec import Tool
from swarmctl.stopping import Stop

INSTRUCTIONS = """\
swarmctl: a swarmops store, where named refs point at immutable changesets and every change \
is a numbered operation that can be undone. Every tool returns one envelope: `ok`, `op`, \
`api`, then `result` or `error` (`code`, `message`, `details`, `hint`, `next`: the call that \
resolves it), and `meta`. Read with op_log, op_show, ref_list, ref_show, changeset_show; \
undo an operation with undo (by compare-and-swap: a conflict names the later op to undo first).\
"""


# --- what the server says: its tools and their results ---------------------------------------


def tool_listing(tool: Tool) -> dict[str, Any]:
    """The tool as `tools/list` gives it."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": schemas.json_schema(tool.request),
        "outputSchema": schemas.envelope_schema(tool),
        "annotations": tool.annotations.to_mcp(),
    }


def call_result(envelope: dict[str, Any]) -> dict[str, Any]:
    """An envelope as the result of `tools/call`: structured, and as compact text."""
    return {
        "content": [{"type": "text", "text": dumps(envelope)}],
        "structuredContent": envelope,
        "isError": not envelope["ok"],
    }


# --- the server -----------------------------------------------------------------------------


# How a door other than stdio runs a call: given the request the SDK put on the handler's
# context (over HTTP, the HTTP request), the tool's name and its arguments, the envelope.
Dispatch = Callable[[Any, str, Any], Awaitable[dict[str, Any]]]


def build_server(
    repo: str | None, actor: str | None, stores: OpenStores | None = None, dispatch: Dispatch | None = None,
    calling: Callable[[Any], ContextManager[None]] = lambda request_id: nullcontext(),
) -> Server:
    """A server for the store at `repo` (None: discovered from the working directory per call),
    acting as `actor` (None: reads work, mutations get E_IDENTITY_REQUIRED), on the connections
    of `stores` (None: its own, for as long as the server lives). `dispatch` (the HTTP door's)
    runs each call instead; it ends in `calls.call_tool` too. `calling(request_id)` is entered
    while a tool runs (the stdio door's `Stop.calling`)."""
    tools = {t.name: t for t in registry.mcp_tools()}
    stores = stores if stores is not None else OpenStores()
    listing: list[dict[str, Any]] = []

    # The results are the SDK's models, which it shapes for the protocol version each client
    # speaks (a 2026-07-28 client needs `resultType`, an older one must not get it).
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if not listing:
            listing.extend(tool_listing(t) for t in tools.values())
        return types.ListToolsResult.model_validate({"tools": listing}, by_name=False)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # Tools run here, on the event loop's thread, one at a time: as the CLI runs them (a
        # tool may start processes or wait on the store's lock), and in the order they came.
        if dispatch is not None:
            envelope = await dispatch(ctx.request, params.name, params.arguments)
            return types.CallToolResult.model_validate(call_result(envelope), by_name=False)
        rejected = ctx.request if isinstance(ctx.request, SwarmError) else None
        request_id = ctx.request_id
        ctx = Context(repo=repo, actor=actor, stores=stores)
        started = time.perf_counter()
        try:
            with calling(request_id):
                envelope = call_tool(params.name, params.arguments, ctx, tools, rejected=rejected)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM in the tool (stopping.Stop): rolled back, or written
            tool = tools.get(params.name)
            took = max(0, int((time.perf_counter() - started) * 1000))  # as the CLI's and `call`'s say it
            envelope = runner.stopped(tool.name if tool else None, exc, ctx, took)
        return types.CallToolResult.model_validate(call_result(envelope), by_name=False)

    return Server(
        "swarmctl",
        version=version(),
        title="swarmctl",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


def serve(repo: str | None, actor: str | None) -> int:
    """Serve MCP over stdin/stdout until the client closes stdin, or Ctrl-C or SIGTERM stops it
    (KeyboardInterrupt, as the CLI's commands end: exit 130)."""
    stores = OpenStores()
    stop = Stop()
    server = build_server(repo, actor, stores, calling=stop.calling)

    async def main() -> None:
        with anyio.CancelScope() as serving:
            stop.arm(serving)
            async with stdio_transport(answered=stop.answered) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        with stop.on_signals():
            try:
                anyio.run(main)
            except BaseException as exc:
                if (unwritten := Stop.stdout_failed(exc)) is not None:
                    raise unwritten from None  # the CLI says it as of any command: no task group's traceback
                if stop.came is None or not stop.only_interrupts(exc):
                    raise
        stop.raise_if_stopped()  # as what stopped it, however anyio raised it on the way out
    finally:
        stores.close()
    return 0


# --- the transport: the SDK's stdio framing, with the duplicate-field check ----------------

class Unanswerable(Exception):
    """A line the server answers with a JSON-RPC error rather than passing on to the SDK."""

    def __init__(self, code: int, message: str, request_id: Any = None, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.request_id, self.data = code, message, request_id, data


def _line_depth(bound: int) -> int:
    """How deep a line may nest before it is refused whole, unread by the SDK (-32600, no id).
    Within that, a tool's arguments are held to the bound itself by `parse_arguments`, and
    their E_INVALID_ARG envelope is answered under the request's id: so the line gets room for
    its own levels (the message, `params`) and for arguments past the bound."""
    return 2 * bound + 2


def read_frame(line: str) -> SessionMessage | Unanswerable:
    """One line from the client as the SDK's message, marked when its arguments name a field
    twice; or, for a line that is no request the SDK should see, the error to answer it with."""
    depth = limits.max_json_depth()
    if limits.json_depth_exceeds(line, _line_depth(depth)):
        return Unanswerable(
            types.INVALID_REQUEST,
            f"Invalid request: the message nests far deeper than {depth} levels (SWARMCTL_MAX_JSON_DEPTH)",
            data={"code": "E_INVALID_ARG", "max_depth": depth},
        )
    try:
        pairs = jsontext.read_pairs(line)
    except RecursionError:
        return Unanswerable(types.PARSE_ERROR, "Parse error: the line is not JSON")
    except ValueError as exc:
        if (call := _arguments_not_json(line, exc)) is not None:
            return call
        return Unanswerable(types.PARSE_ERROR, f"Parse error: {jsontext.not_read(exc, 'the line')}")
    request_id = None
    if isinstance(pairs, jsontext.Pairs):
        request_id = pairs.get("id") if sum(1 for k, _ in pairs if k == "id") == 1 else None
        if not _valid_id(request_id):
            request_id = None
        if twice := jsontext.named_twice(pairs):
            return Unanswerable(
                types.INVALID_REQUEST,
                f"Invalid request: {', '.join(twice)} named twice in one object; nothing was run",
                request_id,
                data={"code": "E_INVALID_ARG", "fields": twice},
            )
        if any(k == "id" for k, _ in pairs) and not _valid_id(pairs.get("id")):
            return Unanswerable(types.INVALID_REQUEST, "Invalid request: `id` must be a string or a number")
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:  # JSON, but no message: answered here, in the same words on stdio and HTTP
        # Answered under its id where one can be read (JSON-RPC: null only when it cannot be).
        return Unanswerable(types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message", request_id)
    rejected = jsontext.arguments_named_twice(line)
    return SessionMessage(message, metadata=ServerMessageMetadata(request_context=rejected) if rejected else None)


def _arguments_not_json(line: str, exc: ValueError) -> SessionMessage | None:
    """A tools/call whose arguments alone hold what is no JSON text (a lone UTF-16 surrogate,
    `"\\ud83d"`, as a client that cuts strings by UTF-16 units sends): the tool's E_INVALID_ARG
    under its id, as `swarmctl call` answers it, not a parse error no request is told of."""
    import json

    if not isinstance(exc, jsontext.LoneSurrogate):  # NaN and the like are no JSON grammar: a parse error
        return None
    try:
        data = json.loads(line)  # Python's own reader takes a lone surrogate
        params = data["params"]
        rest = json.dumps({**data, "params": {**params, "arguments": {}}}, ensure_ascii=False)
        rest.encode("utf-8")  # the rest of the line holds none
        message = types.jsonrpc_message_adapter.validate_json(rest, by_name=False)
    except (ValueError, TypeError, KeyError, UnicodeEncodeError):
        return None
    if data.get("method") != "tools/call" or not _valid_id(data.get("id")):
        return None
    rejected = SwarmError("E_INVALID_ARG", f"arguments are not valid JSON: {exc}")
    rejected.line = rest  # type: ignore[attr-defined]  # what an HTTP door gives the SDK to read instead
    return SessionMessage(message, metadata=ServerMessageMetadata(request_context=rejected))


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def unreadable(problem: Unanswerable) -> SessionMessage:
    """JSON-RPC's answer to a line that is no message (`read_frame`): a parse error, or an
    invalid request."""
    extra = {"data": problem.data} if problem.data is not None else {}
    error = types.ErrorData(code=problem.code, message=problem.message, **extra)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=problem.request_id, error=error))


async def bounded_lines(wire: Any, limit: int) -> AsyncIterator[str | None]:
    """The lines of `wire` (an async binary file) as text, as they arrive; None for a line
    longer than `limit` bytes, of which no more than the limit is ever held."""
    lines = limits.Lines(limit)
    while chunk := await wire.read1(1 << 16):
        for line in lines.feed(chunk):
            yield None if line is None else line.decode("utf-8", errors="replace")
    for line in lines.end():
        yield None if line is None else line.decode("utf-8", errors="replace")


@asynccontextmanager
async def stdio_transport(answered: Callable[[Any], None] = lambda request_id: None) -> AsyncIterator[tuple[Any, Any]]:
    """The client's messages from stdin, ours to stdout, one JSON-RPC message a line.

    As the SDK's `stdio_server` does, the wire moves to private copies of fds 0 and 1 while
    serving: fd 0 reads /dev/null and fd 1 writes to stderr, so nothing a tool or a process it
    starts prints can break the protocol. Unlike it, at the end of input every request already
    read is answered before the server is told: `printf '...' | swarmctl mcp` gets its answers,
    and a change that was made is never left unreported. `answered(id)` follows each answer."""
    wire_in, wire_out, restore = _claim_stdio()
    lines = bounded_lines(_Stdin(wire_in), limits.max_input_bytes())
    out = anyio.wrap_file(io.TextIOWrapper(wire_out, encoding="utf-8", write_through=True))
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    unanswered = _Unanswered()
    written = anyio.Event()

    async def read() -> None:
        async with to_server:
            async for line in lines:
                if line is None:  # longer than SWARMCTL_MAX_INPUT_BYTES: read past, never held
                    await to_client.send(_too_big())
                    continue
                if not line.strip():
                    continue
                frame = read_frame(line)
                if isinstance(frame, Unanswerable):  # JSON-RPC answers it (the SDK would drop it)
                    await to_client.send(unreadable(frame))
                else:
                    await to_server.send(unanswered.track(frame))
            await unanswered.none_left()

    async def write() -> None:
        try:
            async with from_server:
                async for session_message in from_server:
                    message = session_message.message
                    try:
                        await out.write(message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                        await out.flush()
                    except BrokenPipeError:  # the client closed its end: nobody hears an answer now
                        tg.cancel_scope.cancel()
                        return
                    if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                        unanswered.settle(message.id)
                        answered(message.id)
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            yield from_client, to_client
            await written.wait()  # the server closed its side: let the last answer out, then stop
            tg.cancel_scope.cancel()
    finally:
        restore()


def _too_big() -> SessionMessage:
    """The answer to a line longer than SWARMCTL_MAX_INPUT_BYTES."""
    limit = limits.max_input_bytes()
    return unreadable(Unanswerable(
        types.INVALID_REQUEST,
        f"Invalid request: the line is larger than {limit} bytes (SWARMCTL_MAX_INPUT_BYTES)",
        data={"code": "E_INVALID_ARG", "max_bytes": limit},
    ))


class _Stdin:
    """The client's end, read in a worker thread that a cancellation leaves behind: a read
    blocked in the kernel cannot be stopped, and Ctrl-C (or SIGTERM) must not wait for the
    client's next line. (anyio's `wrap_file` waits for the read to return: the server hung
    until the client wrote or closed its end.)"""

    def __init__(self, raw: io.BufferedReader) -> None:
        self.raw = raw

    async def read1(self, size: int) -> bytes:
        return await anyio.to_thread.run_sync(self.raw.read1, size, abandon_on_cancel=True)


class _Unanswered:
    """The ids of the requests read and not yet answered (or given up: cancelled by the client)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._empty = anyio.Event()
        self._empty.set()

    def track(self, frame: SessionMessage | Exception) -> SessionMessage | Exception:
        if isinstance(frame, SessionMessage) and isinstance(frame.message, types.JSONRPCRequest):
            request_id = frame.message.id
            if not self.ids:
                self._empty = anyio.Event()
            self.ids.add(request_id)
            metadata = frame.metadata or ServerMessageMetadata()

            async def given_up() -> None:  # the SDK settled it without an answer
                self.settle(request_id)

            metadata.on_request_unanswered = given_up
            frame.metadata = metadata
        return frame

    def settle(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._empty.set()

    async def none_left(self) -> None:
        await self._empty.wait()


def _claim_stdio() -> tuple[io.BufferedReader, io.BufferedWriter, Any]:
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)

    return open(wire_in, "rb", closefd=False), open(wire_out, "wb", closefd=False), restore
