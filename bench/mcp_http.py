"""Calls per second over MCP's Streamable HTTP (`swarmctl mcp --http`), beside the stdio server
and the CLI: a read (`op_log`, a page of 20) and a write (`ref_set`, each client moving its
own ref between two changesets), with 1, 8 and 32 concurrent clients.

    python bench/mcp_http.py                              # 1, 8, 32 clients; 5 s a cell
    python bench/mcp_http.py --clients 1,8 --seconds 3

Not a test: pytest does not run it. Each client is what an agent would be:
- HTTP: its own token (`--auth token`) and MCP session with one server (the SDK's Streamable
  HTTP client; all clients in this process's event loop);
- stdio: its own `swarmctl mcp` process, as each MCP client starts its own (the SDK's stdio client);
- CLI: a loop starting one `swarmctl` process per call.
Every cell runs for a fixed time on a fresh local store, from when every client is connected
and has made one (untimed) call; a call counts when its envelope says ok (any failure stops
the run). Printed: a Markdown table, and bench/results/mcp_http.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from mcp_client import HttpClient, HttpServer  # noqa: E402  (tests/mcp_client.py)

RESULTS = ROOT / "bench" / "results"
ADMIN = "human/bench"
SWARMCTL = [sys.executable, "-m", "swarmctl"]


def sh(*args: str) -> dict[str, Any]:
    ran = subprocess.run([*SWARMCTL, *args], capture_output=True, text=True, check=False)
    envelope = json.loads(ran.stdout)
    if not envelope["ok"]:
        sys.exit(f"bench: {' '.join(args)}: {ran.stdout}")
    return envelope["result"]


def make_store(tmp: Path, clients: int) -> tuple[Path, list[str], list[str]]:
    """A store with two changesets and a ref per client; a token per client; the targets.
    (One `call --lines` process makes the refs and tokens.)"""
    store = tmp / "store"
    sh("--as", ADMIN, "init", str(store))
    targets = [sh("--repo", str(store), "--as", ADMIN, "changeset", "create", "-m", m)["changeset"]["id"] for m in "ab"]
    lines = [{"tool": "ref_set", "arguments": {"name": f"bench/c{i}", "target": targets[0], "create": True}} for i in range(clients)]
    lines += [{"tool": "token_create", "arguments": {"actor": f"agent/bench-{i}"}} for i in range(clients)]
    ran = subprocess.run(
        [*SWARMCTL, "--repo", str(store), "--as", ADMIN, "call", "--lines", "--stop-on-error"],
        input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True, text=True, check=False,
    )
    envelopes = [json.loads(line) for line in ran.stdout.splitlines()]
    if ran.returncode != 0 or len(envelopes) != len(lines):
        sys.exit(f"bench: setting up the store failed: {ran.stdout[-2000:]}")
    tokens = [e["result"]["token"] for e in envelopes[clients:]]
    return store, tokens, targets


def arguments(tool: str, client: int, n: int, targets: list[str]) -> dict[str, Any]:
    if tool == "op_log":
        return {"limit": 20}
    return {"name": f"bench/c{client}", "target": targets[n % 2]}


class Window:
    """The timed window: it opens when every client is connected, and closes `seconds` later;
    a call started in it counts, and the rate is over the time to the last such call's end."""

    def __init__(self, clients: int, seconds: float) -> None:
        self.clients, self.seconds, self.connected = clients, seconds, 0
        self.go = anyio.Event()
        self.start = self.end = self.last = 0.0

    async def ready(self) -> None:
        self.connected += 1
        if self.connected == self.clients:
            self.start = time.monotonic()
            self.end = self.start + self.seconds
            self.go.set()
        await self.go.wait()

    def more(self) -> bool:
        now = time.monotonic()
        self.last = max(self.last, now)
        return now < self.end


async def timed(clients: int, seconds: float, one_client: Callable[[int, Window], Awaitable[int]]) -> float:
    """Calls per second of `clients` clients, each calling until the window closes."""
    counts = [0] * clients
    window = Window(clients, seconds)

    async def run(i: int) -> None:
        counts[i] = await one_client(i, window)

    async with anyio.create_task_group() as tg:
        for i in range(clients):
            tg.start_soon(run, i)
    return sum(counts) / (window.last - window.start)


def check(envelope: dict[str, Any] | None) -> None:
    if not envelope or not envelope.get("ok"):
        raise SystemExit(f"bench: a call failed: {envelope}")


async def over_session(connect: Callable[[], Any], tool: str, i: int, window: Window, targets: list[str]) -> int:
    n = 0
    async with connect() as session:
        check((await session.call_tool(tool, arguments(tool, i, 1, targets))).structured_content)  # warm: not timed
        await window.ready()
        while window.more():
            result = await session.call_tool(tool, arguments(tool, i, n, targets))
            check(result.structured_content)
            n += 1
        window.more()  # the end of the last call
    return n


def stdio_session(store: Path, actor: str) -> Any:
    from contextlib import asynccontextmanager

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    @asynccontextmanager
    async def connect():
        params = StdioServerParameters(command=SWARMCTL[0], args=[*SWARMCTL[1:], "mcp", "--repo", str(store), "--as", actor])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session

    return connect


async def over_cli(store: Path, tool: str, i: int, window: Window, targets: list[str]) -> int:
    n = 0
    await window.ready()
    while window.more():
        words = ["op", "log", "-n", "20"] if tool == "op_log" else ["ref", "set", f"bench/c{i}", targets[n % 2]]
        ran = await anyio.run_process([*SWARMCTL, "--repo", str(store), "--as", f"agent/bench-{i}", *words], check=False)
        check(json.loads(ran.stdout))
        n += 1
    window.more()
    return n


def cell(door: str, tool: str, clients: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory(prefix="swarmctl-bench-http-") as tmp:
        store, tokens, targets = make_store(Path(tmp), clients)
        if door == "http":
            with HttpServer("--repo", str(store), "mcp", "--http", "127.0.0.1:0") as server:
                url = server.url

                async def one(i: int, window: Window) -> int:
                    return await over_session(lambda: HttpClient(url, tokens[i])._connect(), tool, i, window, targets)

                return anyio.run(timed, clients, seconds, one)
        if door == "stdio":

            async def one(i: int, window: Window) -> int:
                return await over_session(stdio_session(store, f"agent/bench-{i}"), tool, i, window, targets)

            return anyio.run(timed, clients, seconds, one)

        async def one(i: int, window: Window) -> int:
            return await over_cli(store, tool, i, window, targets)

        return anyio.run(timed, clients, seconds, one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--doors", default="http,stdio,cli")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    doors = args.doors.split(",")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for tool in ("op_log", "ref_set"):
        for door in doors:
            for clients in levels:
                rate = cell(door, tool, clients, args.seconds)
                results.setdefault(tool, {}).setdefault(door, {})[str(clients)] = round(rate, 1)
                print(f"{tool:8} {door:6} {clients:3} clients: {rate:8.1f} calls/s", file=sys.stderr, flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mcp_http.json").write_text(json.dumps(results, indent=2) + "\n")
    names = {"http": "HTTP (`mcp --http`)", "stdio": "stdio (`mcp`, a server per client)", "cli": "CLI (a process per call)"}
    print("| calls/s | " + " | ".join(f"{tool} ×{c}" for tool in results for c in levels) + " |")
    print("| --- |" + " ---: |" * (len(results) * len(levels)))
    for door in doors:
        print(f"| {names[door]} | " + " | ".join(f"{results[tool][door][str(c)]:.0f}" for tool in results for c in levels) + " |")


if __name__ == "__main__":
    main()
