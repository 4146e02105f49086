"""Talking to a real `swarmctl mcp` process, as an MCP client does.

`McpClient` starts the server with the official SDK's stdio client, runs `initialize`, and
offers blocking calls (the SDK is async; a portal runs its event loop in a thread). It records
every message the server sends, so a test can read a response exactly as it came over the
wire. `RawServer` is the server process with plain pipes, for what the SDK client cannot send
(a field named twice).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal

from swarm import swarmctl_argv

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class _Recorded:
    """The client's read stream, keeping each message the server sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.messages: list[dict[str, Any]] = []

    async def receive(self) -> Any:
        item = await self.inner.receive()
        if hasattr(item, "message"):
            self.messages.append(item.message.model_dump(by_alias=True, mode="json", exclude_unset=True))
        return item

    def __aiter__(self) -> "_Recorded":
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    def close(self) -> None:
        self.inner.close()

    async def __aenter__(self) -> "_Recorded":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class McpClient:
    """`swarmctl mcp [--repo REPO] [--as ACTOR]`, with the SDK's client session after `initialize`."""

    def __init__(self, repo: Path | str | None, actor: str | None = None, cwd: Path | None = None) -> None:
        argv = swarmctl_argv()
        args = [*argv[1:], "mcp"]
        if repo is not None:
            args += ["--repo", str(repo)]
        if actor is not None:
            args += ["--as", actor]
        self.command, self.args = argv[0], args
        self.cwd = cwd
        self.stderr = tempfile.TemporaryFile(mode="w+")

    def __enter__(self) -> "McpClient":
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self.portal.wrap_async_context_manager(self._connect())
            self.session = self._session_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._session_cm.__exit__(*exc)
        finally:
            self._portal_cm.__exit__(*exc)
            self.stderr.close()

    @asynccontextmanager
    async def _connect(self):
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

        # The SDK gives the server only a few safe variables: PYTHONPATH too, so that the server
        # runs the package the test runs (a copy's, in tests/test_adding_a_tool.py).
        path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None
        params = StdioServerParameters(command=self.command, args=self.args, cwd=self.cwd, env=path)
        async with stdio_client(params, errlog=self.stderr) as (read_stream, write_stream):
            self.received = _Recorded(read_stream)
            self.dispatcher = JSONRPCDispatcher(self.received, write_stream)
            async with ClientSession(dispatcher=self.dispatcher) as session:
                self.initialized = await session.initialize()
                yield session

    # --- calls ---------------------------------------------------------------------------

    def list_tools(self) -> Any:
        return self.portal.call(self.session.list_tools)

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """The SDK's `call_tool`: it also validates a successful result against the outputSchema."""
        return self.portal.call(self.session.call_tool, name, arguments)

    def envelope(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The envelope of a call, after checking that its text and structuredContent agree."""
        result = self.call_tool(name, arguments)
        assert len(result.content) == 1 and result.content[0].type == "text", result
        envelope = json.loads(result.content[0].text)
        assert envelope == result.structured_content
        assert result.is_error is (not envelope["ok"])
        return envelope

    def request(self, method: str, params: dict[str, Any], request_id: int) -> dict[str, Any]:
        """Send a request under a chosen id; return the response as it came over the wire."""
        self.portal.call(self.dispatcher.send_raw_request, method, params, {"request_id": request_id})
        return next(m for m in self.received.messages if m.get("id") == request_id)

    def server_stderr(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()


class RawServer:
    """The server process on plain pipes: JSON-RPC lines in, lines out. (It is started as
    `swarmctl --repo REPO --as ACTOR mcp`, the global options' form; McpClient uses the other.)"""

    def __init__(self, repo: Path | str | None, actor: str | None = None, env: dict[str, str] | None = None) -> None:
        args = (["--repo", str(repo)] if repo else []) + (["--as", actor] if actor else []) + ["mcp"]
        self.proc = subprocess.Popen(
            [*swarmctl_argv(), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the server closed stdout; stderr: {self.proc.stderr.read() if self.proc.stderr else ''}"
        return json.loads(line)

    def exchange(self, *messages: dict[str, Any] | str) -> list[dict[str, Any]]:
        """Each message sent and its answer read, in turn: the answers."""
        answers = []
        for message in messages:
            self.send(message)
            answers.append(self.receive())
        return answers

    def initialize(self) -> dict[str, Any]:
        self.send(INITIALIZE)
        response = self.receive()
        self.send(INITIALIZED)
        return response

    def close(self) -> tuple[int, str, str]:
        """Close stdin (the MCP way to end a stdio server); its exit status and what remained."""
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err

    def __enter__(self) -> "RawServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class HttpServer:
    """`swarmctl mcp --http 127.0.0.1:0 ...` as a real process; `url` once it says where it listens.
    Its stderr goes to a file (`log()`), read after the line that names the port."""

    def __init__(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.errfile = tempfile.NamedTemporaryFile(mode="w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [*swarmctl_argv(), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=cwd, env=env,
        )
        self.url = self._await_listening()

    def _await_listening(self) -> str | None:
        """Read stderr up to the `listening on` line (or the end: the server refused to start)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errfile.write(line)
            if line.startswith("listening on "):
                self._drain = __import__("threading").Thread(target=self._copy_rest, daemon=True)
                self._drain.start()
                return line.split()[-1]
        return None

    def _copy_rest(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errfile.write(line)
            self.errfile.flush()

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM; its exit status, stdout and all of stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        out = self.proc.stdout.read() if self.proc.stdout else ""
        self.proc.wait(timeout=30)
        if getattr(self, "_drain", None) is not None:
            self._drain.join(timeout=30)
        self.errfile.flush()
        return self.proc.returncode, out, self.log()

    def log(self) -> str:
        self.errfile.flush()
        return Path(self.errfile.name).read_text()

    def __enter__(self) -> "HttpServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        Path(self.errfile.name).unlink(missing_ok=True)


class HttpClient(McpClient):
    """The SDK's Streamable HTTP client on a server's URL, with `Authorization: Bearer TOKEN`
    when a token is given; the same calls as McpClient."""

    def __init__(self, url: str, token: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        self.stderr = tempfile.TemporaryFile(mode="w+")

    @asynccontextmanager
    async def _connect(self):
        import httpx2
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
        from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

        # The SDK's create_mcp_http_client, but with `verify` off: the servers here speak plain
        # HTTP on loopback, and a verifying client loads a CA bundle as it is made (~50 ms of CPU).
        timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
        async with httpx2.AsyncClient(headers=self.headers, timeout=timeout, verify=False) as http:
            async with streamable_http_client(self.url, http_client=http) as (read_stream, write_stream):
                self.received = _Recorded(read_stream)
                self.dispatcher = JSONRPCDispatcher(self.received, write_stream)
                async with ClientSession(dispatcher=self.dispatcher) as session:
                    self.initialized = await session.initialize()
                    yield session
