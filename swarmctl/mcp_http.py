"""`swarmctl mcp --http HOST:PORT`: the MCP server of swarmctl.mcp over Streamable HTTP at /mcp.

The official SDK's `streamable_http_app` served by uvicorn; `swarmctl.mcp.build_server` makes
the server, so tools, schemas, annotations and envelopes are the stdio server's, and each call
ends in `calls.call_tool` as there. What HTTP adds, from the outside in:

- `Guard` (around everything): the `Host` header must name one of the allowed hosts (else 421)
  and an `Origin` header, when sent, one of the allowed origins (else 403), on every bind
  address; nothing sends CORS headers. `Authorization` given twice is 400.
- The SDK's bearer authentication (`--auth token`, the default): `StoreTokens` looks each
  request's token up in the store (by its SHA-256), so a missing, unknown, expired or revoked
  token is HTTP 401 and nothing runs, on every request of a session too. `AuthSettings` has
  no resource server URL, so no OAuth metadata is published for an issuer that does not exist.
- `Bounds` (inside the authentication): reads a POST's body once, to at most
  SWARMCTL_MAX_INPUT_BYTES (more: HTTP 413 with a JSON-RPC error), and checks it as the stdio
  transport checks a line (`mcp.read_frame`: nesting, keys named twice); a tool's arguments
  that name a field twice are handed to the call on the request's state, to fail as E_INVALID_ARG.
- `HttpDoor.dispatch`: the caller's actor (the token's, meta.auth "token"; or with
  `--auth trust` the server's --as), a read-only token refused a tool that writes, a call that
  would run a workflow's commands (run, resume, a confirmed rollback) refused unless --allow-run
  (E_FORBIDDEN), then the call in a
  worker thread behind a limiter, shielded: a call whose client went away runs to completion.

Sessions (`Sessions`, on the SDK session manager's own tables): a token holds at most
SESSIONS_PER_TOKEN open at once (one more `initialize` is HTTP 429), so that one token cannot
take the server's every session from the others; and a revoked or expired token's sessions are
ended within SWEEP_S, its open streams with them (its requests were refused at once, but a
session kept open by a GET stream never idled out).

Stopping (SIGINT or SIGTERM) drains: a tool call that comes after it is answered E_UNAVAILABLE
and not run, and the calls under way (every POST still being answered) get up to DRAIN_S to end
and be answered before the server closes its streams. sse-starlette would end every SSE stream
at once, a call's answer included, while the call went on to commit: the client was told
nothing of a write that landed. A second SIGINT stops the wait.

Imported only by `swarmctl mcp --http`: uvicorn is imported nowhere else.

Why this module is long: the four layers above are one request's path from the socket to the
tool, each a few dozen lines that read the same options; kept together they read in the
order a request meets them.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Iterator

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage

from swarmctl import limits, names, registry
from swarmctl.calls import call_tool
from swarmctl.context import Context, OpenStores
from swarmctl.envelope import Meta, SwarmError, failure
from swarmctl.http_address import Options, authority, default_hosts
from swarmctl.mcp import Unanswerable, build_server, read_frame
from swarmctl.spec import Tool
from swarmctl.store import tokens

PATH = "/mcp"
DRAIN_S = 30.0  # how long a stopping server waits for the calls under way to be answered
SESSIONS_PER_TOKEN = 64  # open sessions one token may hold (the SDK bounds the server's at 10,000)
SWEEP_S = 5.0  # how often the sessions of revoked or expired tokens are looked for and ended
WORKERS = 16  # calls running at once, of reads and of writes each; the rest wait their turn
REJECTED = "swarmctl_rejected"  # the request-state key of a tools/call's E_INVALID_ARG


def _json_rpc_error(status: int, code: int, message: str, data: Any = None, request_id: Any = None) -> tuple[int, bytes]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return status, json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


async def _respond(send: Any, answer: tuple[int, bytes]) -> None:
    status, body = answer
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Any, name: bytes) -> str | None:
    found = [v for k, v in scope.get("headers", []) if k.lower() == name]
    return found[0].decode("latin-1") if len(found) == 1 else (None if not found else "")


class Guard:
    """Host and Origin validation around the whole app (the MCP specification's rule against
    DNS rebinding), on every bind address; the SDK's own checks cover only loopback hosts."""

    def __init__(self, app: Any, hosts: list[str], origins: list[str]) -> None:
        self.app, self.hosts, self.origins = app, {h.lower() for h in hosts}, {o.lower().rstrip("/") for o in origins}

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        host = host.lower()
        return host in self.hosts or any(":" not in a.rsplit("]", 1)[-1] and host.rsplit(":", 1)[0] == a for a in self.hosts)

    def origin_ok(self, origin: str) -> bool:
        """One of the allowed origins, or `http://` and an allowed host (one allowed without a
        port: on any port, as for Host)."""
        origin = origin.lower().rstrip("/")
        return origin in self.origins or (origin.startswith("http://") and self.host_ok(origin.removeprefix("http://")))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host, origin = _header(scope, b"host"), _header(scope, b"origin")
        if not self.host_ok(host):
            answer = _json_rpc_error(421, types.INVALID_REQUEST, f"Host {host!r} is not this server's (--allowed-host)")
            return await _respond(send, answer)
        if origin is not None and not self.origin_ok(origin):
            answer = _json_rpc_error(403, types.INVALID_REQUEST, f"Origin {origin!r} is not allowed (--allowed-origin)")
            return await _respond(send, answer)
        if sum(1 for k, _ in scope.get("headers", []) if k.lower() == b"authorization") > 1:
            # The SDK would take the first: which one names the caller is never guessed (a proxy
            # that adds its own, a client that sends two). Refused as a key named twice is.
            answer = _json_rpc_error(400, types.INVALID_REQUEST, "Invalid request: Authorization is given twice; nothing was run")
            return await _respond(send, answer)
        if scope["method"] == "GET" and _header(scope, b"last-event-id") is not None:
            # The server keeps no events to replay (no event store): a stream asked to resume
            # opens afresh. The SDK, asked to resume without one, answered nothing (HTTP 500).
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"last-event-id"]}
        await self.app(scope, receive, send)


class Bounds:
    """A POST's body read once, held to SWARMCTL_MAX_INPUT_BYTES, checked as stdio checks a line;
    counted on `door` until it is answered (what a stopping server waits for)."""

    def __init__(self, app: Any, door: "HttpDoor") -> None:
        self.app, self.door = app, door

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        if self.door.options.auth == "token" and not isinstance(scope.get("user"), AuthenticatedUser):
            # No token the store knows: the SDK answers 401 before any of the body is read (it
            # was read, up to 16 MiB, and parsed, and a caller with no token stalled the server).
            return await self.app(scope, receive, send)
        self.door.posts += 1
        try:
            await self._post(scope, receive, send)
        finally:
            self.door.posts -= 1

    async def _post(self, scope: Any, receive: Any, send: Any) -> None:
        limit = limits.max_input_bytes()
        body, trailing = await _read_body(receive, limit, _header(scope, b"content-length"))
        if body is None:
            message = f"Invalid request: the body is larger than {limit} bytes (SWARMCTL_MAX_INPUT_BYTES)"
            answer = _json_rpc_error(413, types.INVALID_REQUEST, message, {"code": "E_INVALID_ARG", "max_bytes": limit})
            return await _respond(send, answer)
        # In a worker thread: a big body takes seconds to check, and the loop serves the others meanwhile.
        frame = await anyio.to_thread.run_sync(read_frame, body.decode("utf-8", errors="replace"))
        if isinstance(frame, Unanswerable):
            answer = _json_rpc_error(400, frame.code, frame.message, frame.data, frame.request_id)
            return await _respond(send, answer)
        method = getattr(frame.message, "method", None) if isinstance(frame, SessionMessage) else None
        if method == "notifications/cancelled":
            # Ignored, as MCP lets a receiver do: a call runs to its end, its op (if any)
            # committed, as when its client goes away, and is answered with its envelope. Passed
            # on, the SDK answered "Request cancelled" for a call that had written its op.
            return await _respond(send, (202, b""))
        opening = method == "initialize"
        if opening and self.door.sessions is not None and self.door.sessions.full(scope.get("user")):
            message = f"Too many open sessions for this token (at most {SESSIONS_PER_TOKEN}): end one (HTTP DELETE) first"
            return await _respond(send, _json_rpc_error(429, types.INVALID_REQUEST, message, {"max_sessions": SESSIONS_PER_TOKEN}))
        if isinstance(frame, SessionMessage) and frame.metadata is not None:
            scope.setdefault("state", {})[REJECTED] = frame.metadata.request_context
            if (line := getattr(frame.metadata.request_context, "line", None)) is not None:
                body = line.encode("utf-8")  # the call without its unreadable arguments (mcp._arguments_not_json)
        queued: deque[Any] = deque([{"type": "http.request", "body": body, "more_body": False}, *trailing])

        async def replay() -> Any:
            return queued.popleft() if queued else await receive()

        # An `initialize` under way holds its place until the SDK has registered its session:
        # counted only once registered, 200 sent at once each passed the cap (no await between
        # the check above and this).
        with self.door.sessions.opening(scope.get("user")) if opening and self.door.sessions is not None else nullcontext():
            await self.app(scope, replay, send)


async def _read_body(receive: Any, limit: int, declared: str | None) -> tuple[bytes | None, list[Any]]:
    """The whole body (None: past `limit`, of which no more than the limit was held) and any
    message that came instead of more of it (a disconnect)."""
    if declared and names.digits(declared) and int(declared) > limit:
        return None, []
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), [message]
        if len(body) + len(message.get("body", b"")) > limit:
            return None, []
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), []


# --- who calls, and running the call ---------------------------------------------------------


class ThreadStores:
    """Each worker thread's own open stores (a SQLite connection is used by one thread at a
    time), all closed when the server stops."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[OpenStores] = []
        self._lock = threading.Lock()

    def get(self) -> OpenStores:
        stores = getattr(self._local, "stores", None)
        if stores is None:
            stores = self._local.stores = OpenStores()
            with self._lock:
                self._all.append(stores)
        return stores

    def close(self) -> None:
        with self._lock:
            for stores in self._all:
                stores.close()
            self._all.clear()


@dataclass
class Caller:
    actor: str | None
    auth: str
    read_only: bool = False


class StoreTokens:
    """The SDK's token verifier: a token is good while the store has it (by its SHA-256),
    unrevoked and unexpired. Asked on every request."""

    def __init__(self, door: "HttpDoor") -> None:
        self.door = door

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await self.door.in_thread(self.door.token_record, token, limiter=self.door.lookups)
        if found is None or not found.good(names.now()):
            return None
        scopes = ["read"] if found.read_only else ["read", "write"]
        return AccessToken(token=token, client_id=found.actor, scopes=scopes, subject=str(found.id))


class HttpDoor:
    """How the HTTP server runs a call: whose it is, whether it may run, in a worker thread."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.tools = {t.name: t for t in registry.mcp_tools()}
        self.stores = ThreadStores()
        self.limiter = anyio.CapacityLimiter(WORKERS)
        # Reads never wait behind writes, which may each wait up to the lock timeout for the
        # store's lock: one agent's burst of writes never holds up another's reads.
        self.reads = anyio.CapacityLimiter(WORKERS)
        self.lookups = anyio.CapacityLimiter(4)  # token look-ups: never queued behind long calls
        self.posts = 0  # POSTs under way (Bounds), all on the event loop's thread
        self.sessions: Sessions | None = None  # with --auth token: what each token holds
        self.stopping = False  # SIGINT or SIGTERM came: calls are answered, not run

    async def in_thread(self, fn: Any, *args: Any, limiter: Any = None) -> Any:
        """`fn(*args)` in a worker thread; run to its end even if the caller is cancelled."""
        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(fn, *args, limiter=limiter or self.limiter)

    def token_record(self, token: str) -> tokens.Token | None:
        ctx = Context(repo=self.options.repo, stores=self.stores.get())
        try:
            with ctx.store().read() as conn:
                return tokens.by_value(conn, token)
        except SwarmError:
            return None  # no store: no token is good
        finally:
            ctx.close()

    def good_tokens(self, subjects: set[str]) -> set[str] | None:
        """Of the token ids `subjects`, those still unrevoked and unexpired (None: the store did
        not answer; meanwhile every request is refused anyway, `token_record`)."""
        ctx = Context(repo=self.options.repo, stores=self.stores.get())
        try:
            with ctx.store().read() as conn:
                found = [tokens.get(conn, int(s)) for s in subjects if names.digits(s)]
        except SwarmError:
            return None
        finally:
            ctx.close()
        now = names.now()
        return {str(t.id) for t in found if t is not None and t.good(now)}

    def caller(self, request: Any) -> Caller:
        if self.options.auth == "trust":
            return Caller(self.options.actor, Context(actor=self.options.actor).auth)
        user = request.scope.get("user") if request is not None else None
        access = getattr(user, "access_token", None)
        if access is None:  # the SDK let no request through without a token: never reached
            raise SwarmError("E_FORBIDDEN", "no bearer token came with the call")
        return Caller(access.client_id, "token", read_only="write" not in access.scopes)

    async def dispatch(self, request: Any, name: str, arguments: Any) -> dict[str, Any]:
        try:
            caller = self.caller(request)
        except SwarmError as exc:
            return failure(name if name in self.tools else None, exc, Meta(auth="token"))
        tool = self.tools.get(name)
        if self.stopping:
            return failure(name if tool is not None else None, _stopping(), Meta(auth=caller.auth))
        refused = self.refusal(tool, caller) if tool is not None else None
        if refused is not None:
            return failure(name, refused, Meta(auth=caller.auth))
        state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
        limiter = self.reads if tool is not None and not tool.mutates else self.limiter
        return await self.in_thread(self.run, caller, name, arguments, state.get(REJECTED), limiter=limiter)

    def run(self, caller: Caller, name: str, arguments: Any, rejected: SwarmError | None) -> dict[str, Any]:
        auth = "token" if caller.auth == "token" else None
        ctx = Context(repo=self.options.repo, actor=caller.actor, stores=self.stores.get(), auth=auth)
        if not self.options.allow_run:
            ctx.refuse_commands = _commands_refused
        return call_tool(name, arguments, ctx, self.tools, rejected=rejected)

    def refusal(self, tool: Tool, caller: Caller) -> SwarmError | None:
        if caller.read_only and tool.mutates:
            return SwarmError(
                "E_FORBIDDEN",
                f"{tool.name} can write to the store, and the token of {caller.actor} is read-only",
                details={"tool": tool.name, "actor": caller.actor, "read_only": True},
                hint="Use a token made without --read-only (`swarmctl token create ACTOR`).",
            )
        return None


class Sessions:
    """The sessions each token holds, read from the SDK's session manager (its `_session_owners`
    and `_server_instances`: tests/test_http.py fails if they move): a cap per token, and an
    end to those of a token no longer good."""

    def __init__(self, manager: Any, door: HttpDoor) -> None:
        self.manager, self.door = manager, door
        self._opening: dict[str, int] = {}  # a token's `initialize` requests under way

    def _owned(self) -> dict[str, str]:
        owners = list(self.manager._session_owners.items())  # a TypedDict each: client_id, issuer, subject
        return {sid: owner["subject"] for sid, owner in owners if owner.get("subject")}

    @staticmethod
    def _subject(user: Any) -> str | None:
        return getattr(getattr(user, "access_token", None), "subject", None)

    def full(self, user: Any) -> bool:
        subject = self._subject(user)
        held = sum(1 for s in self._owned().values() if s == subject) + self._opening.get(subject or "", 0)
        return subject is not None and held >= SESSIONS_PER_TOKEN

    @contextmanager
    def opening(self, user: Any) -> Iterator[None]:
        """While an `initialize` is under way: it counts toward its token's cap (a session the
        SDK registers at its end is then counted there instead)."""
        subject = self._subject(user) or ""
        self._opening[subject] = self._opening.get(subject, 0) + 1
        try:
            yield
        finally:
            self._opening[subject] -= 1
            if not self._opening[subject]:
                del self._opening[subject]

    async def sweep(self) -> None:
        """Every SWEEP_S: end the sessions whose token is revoked, expired or gone."""
        while True:
            await anyio.sleep(SWEEP_S)
            owned = self._owned()
            if not owned:
                continue
            good = await self.door.in_thread(self.door.good_tokens, set(owned.values()), limiter=self.door.lookups)
            if good is None:
                continue  # the store did not answer: no session is ended for a blip
            for sid, subject in owned.items():
                transport = self.manager._server_instances.get(sid)
                if subject not in good and transport is not None:
                    await self.manager._discard_session(sid, transport)


def _stopping() -> SwarmError:
    return SwarmError(
        "E_UNAVAILABLE",
        "the server is stopping (SIGINT or SIGTERM): the call was not run",
        details={"stopping": True},
        hint="Call again once the server is back; nothing was written.",
    )


def _commands_refused() -> SwarmError:
    """A call that would run a workflow's commands (`workflow_run`, `workflow_resume`, a
    confirmed `workflow_rollback` with rollback commands), at a server started without
    --allow-run. The tool asks it of what it read and would run (Context.refuse_commands): a
    check of the door's own read of the file would let a file changed between the two reads
    run its commands."""
    return SwarmError(
        "E_FORBIDDEN",
        "a workflow's commands run over HTTP only on a server started with --allow-run",
        details={"allow_run": False},
        hint="Start the server with `swarmctl mcp --http HOST:PORT --allow-run`, or run the workflow with the CLI on the store's host.",
    )


# --- the app, and serving it -----------------------------------------------------------------


def build_app(options: Options, door: HttpDoor) -> Any:
    """The ASGI app: Guard around the SDK's Streamable HTTP app, Bounds inside its authentication."""
    from starlette.middleware import Middleware

    server = build_server(options.repo, options.actor, dispatch=door.dispatch)
    origin = f"http://{authority(options.host, options.port)}"
    auth: dict[str, Any] = {}
    if options.auth == "token":
        # The issuer is this server (no other exists); with no resource_server_url, no OAuth
        # metadata is published, and 401s carry no resource_metadata pointing at any.
        settings = AuthSettings(issuer_url=origin, resource_server_url=None)
        auth = {"auth": settings, "token_verifier": StoreTokens(door)}
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host=options.host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),  # Guard does it
        max_request_body_size=limits.max_input_bytes(),
        **auth,
    )
    app.user_middleware.append(Middleware(Bounds, door=door))  # innermost: after authentication
    if options.auth == "token":
        door.sessions = Sessions(server._session_manager, door)
    hosts = default_hosts(options.host, options.port) + options.allowed_hosts  # --allowed-host adds to them
    origins = options.allowed_origins + [f"http://{h}" for h in hosts]
    return Guard(app, hosts, origins)


def serve(options: Options, sock: Any) -> int:
    """Serve on `sock` (http_address.listen's, for `options`, checked), say where on stderr,
    until SIGINT or SIGTERM."""
    import uvicorn
    from sse_starlette.sse import AppStatus

    options.port = sock.getsockname()[1]
    door = HttpDoor(options)
    url = f"http://{authority(options.host, options.port)}{PATH}"
    AppStatus.disable_automatic_graceful_drain()  # the streams end when `shutdown` says so

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            """uvicorn's (SIGINT, SIGTERM: stop, drain, then the signal as it would have been), and
            SIGHUP (a closed terminal) as SIGTERM, unless ignored (`nohup`): left to swarmctl's own
            handler, it was raised in the event loop, a traceback and no drain."""
            import signal

            with super().capture_signals():
                mine = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN
                previous = signal.signal(signal.SIGHUP, self.handle_exit) if mine else None
                try:
                    yield
                finally:
                    if mine:
                        signal.signal(signal.SIGHUP, previous)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if door.sessions is not None:
                import asyncio

                self.sweeper = asyncio.get_running_loop().create_task(door.sessions.sweep())
            if not self.should_exit:
                print(f"listening on {url}", file=sys.stderr, flush=True)

        async def shutdown(self, sockets: Any = None) -> None:
            if getattr(self, "sweeper", None) is not None:
                self.sweeper.cancel()
            door.stopping = True
            deadline = anyio.current_time() + DRAIN_S
            while door.posts and not self.force_exit and anyio.current_time() < deadline:
                await anyio.sleep(0.02)
            AppStatus.should_exit = True  # now every stream ends: the GETs', and any call's past DRAIN_S
            await super().shutdown(sockets)

    from swarmctl.http_timely import timely_h11

    config = uvicorn.Config(
        build_app(options, door), http=timely_h11(options.read_timeout_s), log_level="warning", access_log=False,
        timeout_graceful_shutdown=5, server_header=False,
    )
    try:
        Server(config).run(sockets=[sock])
    finally:
        sock.close()
        door.stores.close()
    return 0
