"""Startup: a read such as `swarmctl op log` imports only what it needs.

pydantic, Rich, the MCP SDK, TOML, BLAKE3 and the other tool areas are imported where they are
needed, so that the commonest commands start fast (bench/core.py measures how fast). Typer too:
the hot commands are parsed without it (swarmctl/cli/fast.py), and so is hashlib (OpenSSL)."""

import json
import subprocess
import sys

import pytest

from core_helpers import AGENT, ALICE, build_golden_store
from swarm import swarmctl_argv

# Modules (and packages, with everything under them) a read of the op log must not import.
SLOW_OR_ELSEWHERE = [
    "typer", "click", "hashlib", "_hashlib", "traceback", "pydantic", "pydantic_core", "annotated_types", "rich", "mcp", "tomllib", "tomli", "tomli_w",
    "blake3", "uvicorn", "starlette", "swarmctl.schemas", "swarmctl.mcp", "swarmctl.mcp_http", "swarmctl.gen", "swarmctl.cli.tables",
    "swarmctl.cli.complete", "swarmctl.store.changesets", "swarmctl.store.check",
    # pathlib, and the urllib.parse and ipaddress it imports: a tenth of a read's start (the
    # store's paths are strings, store/files.py)
    "pathlib", "urllib", "ipaddress",
]

# sys.modules after the command ran, in a fresh interpreter. (-X importtime alone would miss
# what is imported through importlib, as registry.area imports a tool area.)
_PROBE = """
import contextlib, io, json, sys
from swarmctl.cli import run
with contextlib.redirect_stdout(io.StringIO()) as out:
    status = run(sys.argv[1:])
print(json.dumps({"status": status, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def imported_by(*args: str, cwd, status: int = 0) -> tuple[set[str], dict]:
    probe = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout)["status"] == status, probe.stdout
    found = json.loads(probe.stdout)
    # And the real command, as installed: everything its imports statement by statement pulled in.
    real = subprocess.run(
        [sys.executable, "-X", "importtime", swarmctl_argv()[0], *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )
    assert real.returncode == found["status"], real.stdout
    timed = {line.split("|")[-1].strip() for line in real.stderr.splitlines() if line.startswith("import time:")}
    return set(found["modules"]) | timed, json.loads(found["stdout"])


def slow(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == s or m.startswith(s + ".") for s in SLOW_OR_ELSEWHERE))


def areas(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("swarmctl.tools.")}


@pytest.fixture
def store(sw):
    build_golden_store(sw)
    return sw.store


@pytest.mark.parametrize(
    "args, area",
    [
        (("op", "log", "-n", "20"), "swarmctl.tools.op"),
        (("op", "log", "--ref", "main", "-n", "20"), "swarmctl.tools.op"),
        (("op", "show", "6"), "swarmctl.tools.op"),
        # registry.by_command imports the area's modules in order until one defines the command
        (("--as", AGENT, "op", "undo", "6", "--dry-run"), "swarmctl.tools.op swarmctl.tools.undo"),
    ],
)
def test_op_commands_import_only_their_area(store, args, area):
    modules, envelope = imported_by("--repo", str(store), *args, cwd=store.parent)
    assert envelope["ok"], envelope
    assert slow(modules) == []
    assert areas(modules) == {*area.split(), "swarmctl.tools.common"}
    if area == "swarmctl.tools.op":  # a read of the op log: nothing of a write's store modules
        assert modules.isdisjoint({"swarmctl.store.conflicts", "swarmctl.store.policies", "swarmctl.store.tokens"})


@pytest.mark.parametrize(
    "args",
    [
        ("ref", "list"),
        ("ref", "show", "main"),
    ],
)
def test_ref_commands_import_only_their_area(store, args):
    modules, envelope = imported_by("--repo", str(store), *args, cwd=store.parent)
    assert envelope["ok"] and slow(modules) == []
    assert areas(modules) == {"swarmctl.tools.ref", "swarmctl.tools.common"}


def test_a_write_imports_no_typer(store):
    """`ref set` writes an op, whose link in the hash chain is BLAKE3 (so blake3 is imported)."""
    args = ("--as", "agent/worker-17", "ref", "set", "scratch", "main")  # run twice: the second sets it again
    modules, envelope = imported_by("--repo", str(store), *args, cwd=store.parent)
    assert envelope["ok"] and "blake3" in slow(modules)
    assert [m for m in slow(modules) if m.startswith(("typer", "pydantic", "rich"))] == []
    assert areas(modules) == {"swarmctl.tools.ref", "swarmctl.tools.common"}


@pytest.mark.parametrize(
    "args",
    [
        ("call", "op_log", '{"limit": 2}'),
        ("--as", "agent/worker-17", "call", "ref_set", '{"name": "scratch", "target": "main"}'),
    ],
)
def test_a_call_of_plain_arguments_imports_neither_typer_nor_pydantic(store, args):
    """`call TOOL JSON` is parsed without Typer (cli/fast.py), and arguments plainly of their
    fields' types are read without pydantic (swarmctl/arguments.py)."""
    modules, envelope = imported_by("--repo", str(store), *args, cwd=store.parent)
    assert envelope["ok"], envelope
    assert [m for m in slow(modules) if m.startswith(("typer", "click", "pydantic", "annotated_types", "swarmctl.schemas"))] == []


def test_the_probe_sees_what_a_command_imports(store):
    """The check above can fail: `schema` does import pydantic, and `changeset create` BLAKE3."""
    modules, _ = imported_by("schema", "UndoReq", cwd=store.parent)
    assert "pydantic" in slow(modules) and "swarmctl.schemas" in slow(modules)
    modules, _ = imported_by("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "m", cwd=store.parent)
    assert "blake3" in slow(modules)
    # A line the fast parse leaves to Typer (an option given twice: Typer's usage error) imports it.
    modules, envelope = imported_by("--repo", str(store), "op", "log", "-n", "2", "-n", "3", cwd=store.parent, status=2)
    assert envelope["error"]["code"] == "E_INVALID_ARG" and "typer" in slow(modules)
    # A call with a list among its arguments is pydantic's to read.
    args = ("--as", ALICE, "call", "changeset_create", '{"message": "m", "parents": []}')
    modules, envelope = imported_by("--repo", str(store), *args, cwd=store.parent)
    assert envelope["ok"] and "pydantic" in slow(modules), envelope


def test_the_stdio_server_imports_no_http_door(store):
    """The HTTP door (swarmctl.mcp_http) is imported only by `swarmctl mcp --http`. (uvicorn and
    starlette are the SDK's own imports: `import mcp` pulls both in, through sse_starlette, for
    every transport; the commands other than `mcp` import neither, see SLOW_OR_ELSEWHERE.)"""
    real = subprocess.run(
        [sys.executable, "-X", "importtime", swarmctl_argv()[0], "--repo", str(store), "mcp"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=store.parent, timeout=120,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    timed = {line.split("|")[-1].strip() for line in real.stderr.splitlines() if line.startswith("import time:")}
    assert "swarmctl.mcp" in timed and "mcp.server.lowlevel" in timed, "the probe saw no MCP server start"
    assert "swarmctl.mcp_http" not in timed
