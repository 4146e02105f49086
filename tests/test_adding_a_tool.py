"""Adding a tool touches its area module and nothing else by hand (CONTRIBUTING.md, "Adding a
tool"). In a copy of the checkout, a throwaway tool and its example are appended to
swarmctl/tools/ref.py, and nothing else is edited: it is then at once a CLI command (its
--help ending in its example), a `swarmctl call` tool, an MCP tool, a parity case, and, after
`python -m swarmctl.gen`, a man page, a reference page and a completion, the other generated
files moving with it."""

from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core_helpers import AGENT, build_golden_store
from golden import ROOT
from mcp_client import RawServer
from swarm import swarmctl_argv
from swarmctl import registry
from swarmctl.spec import READ, address
from swarmctl.tools.tx import models

# The tool as a contributor adds it: the request and result types, the function, its entry
# and its example, written where CONTRIBUTING.md says, at the end of its area's module.
THROWAWAY = '''

@request_type
class RefCountReq:
    prefix: str | None = arg(None, description="Count only the refs whose name starts with this.")


@result_type
class RefCountResult:
    count: int


def ref_count(ctx: Context, req: RefCountReq) -> RefCountResult:
    """Count the refs, or those whose name starts with --prefix (a throwaway tool)."""
    with ctx.store().read() as conn:
        return RefCountResult(count=len(queries.list_refs(conn, req.prefix)))


TOOLS.append(Tool(
    name="ref_count", cli=("ref", "count"), title="Count refs", summary="Count the refs.",
    request=RefCountReq, result=RefCountResult, run=ref_count, annotations=READ, mutates=False,
))
EXAMPLES["ref_count"] = (
    Example(("ref", "count", "--prefix", "release/"), {"prefix": "release/"}, caption="Count the release refs."),
)
'''
GENERATED = ("man", "completions", "docs/reference")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the checkout (the package, pyproject.toml and the generated files) with the
    throwaway tool added to tools/ref.py, and `python -m swarmctl.gen` run in it."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "swarmctl", root / "swarmctl", ignore=shutil.ignore_patterns("__pycache__"))
    for name in GENERATED:
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    area = root / "swarmctl" / "tools" / "ref.py"
    area.write_text(area.read_text(encoding="utf-8") + THROWAWAY, encoding="utf-8")
    # Compiled once, as the checkout's package is (conftest.compile_the_package): where
    # PYTHONDONTWRITEBYTECODE is set, each of the many processes the copy starts would compile it.
    compileall.compile_dir(root / "swarmctl", quiet=1)
    ran = subprocess.run(
        [sys.executable, "-m", "swarmctl.gen", "--root", str(root)], cwd=root, env=_env(root), capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    return root


def _env(root: Path) -> dict[str, str]:
    """This environment, with the copy's package first on the path (before the checkout's)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMCTL_", "_SWARMCTL"))}
    return {**environment, "PYTHONPATH": str(root)}


def _swarmctl(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*swarmctl_argv(), *args], env=_env(root), capture_output=True, text=True, cwd=root)


def _result(ran: subprocess.CompletedProcess) -> dict:
    envelope = json.loads(ran.stdout)
    assert ran.returncode == 0 and envelope["ok"], ran.stdout + ran.stderr
    return envelope["result"]


def test_the_cli_and_call_serve_it(sw, checkout):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store), "--as", AGENT)
    assert _result(_swarmctl(checkout, *repo, "ref", "count", "--prefix", "release/")) == {"count": 1}
    assert _result(_swarmctl(checkout, *repo, "ref", "count")) == {"count": 2}
    assert _result(_swarmctl(checkout, *repo, "call", "ref_count", '{"prefix": "release/"}')) == {"count": 1}
    helped = _swarmctl(checkout, "ref", "count", "--help")
    assert helped.returncode == 0 and "Count the release refs." in helped.stdout, helped.stdout
    assert "Count the refs." in _swarmctl(checkout, "ref", "--help").stdout
    # The checkout itself knows no such tool: the copy's one edited module made it.
    assert sw(*repo, "ref", "count").exit == 2


def test_mcp_lists_and_runs_it(sw, checkout):
    build_golden_store(sw)
    with RawServer(sw.store, AGENT, env=_env(checkout)) as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = {t["name"]: t for t in server.receive()["result"]["tools"]}
        assert tools["ref_count"]["annotations"]["readOnlyHint"] is True
        assert "prefix" in tools["ref_count"]["inputSchema"]["properties"]
        call = {"name": "ref_count", "arguments": {"prefix": "release/"}}
        server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        envelope = json.loads(server.receive()["result"]["content"][0]["text"])
        assert envelope["ok"] and envelope["result"] == {"count": 1}, envelope


def test_the_generators_pick_it_up(checkout):
    page = (checkout / "man" / "swarmctl-ref-count.1").read_text(encoding="utf-8")
    assert "Count the release refs." in page and "ref count" in page
    reference = (checkout / "docs" / "reference" / "ref_count.md").read_text(encoding="utf-8")
    assert 'cli_command: "swarmctl ref count"' in reference and '"count": 1' in reference  # its example, run
    assert "[`ref_count`](ref_count.md)" in (checkout / "docs" / "reference" / "README.md").read_text(encoding="utf-8")
    changed = [
        str(p.relative_to(checkout)) for name in GENERATED for p in sorted((checkout / name).rglob("*"))
        if p.is_file() and (not (ROOT / p.relative_to(checkout)).is_file()
                            or (ROOT / p.relative_to(checkout)).read_bytes() != p.read_bytes())
    ]
    assert {"man/swarmctl-ref-count.1", "docs/reference/ref_count.md", "docs/reference/README.md"} <= set(changed)


def test_bash_completes_it(checkout):
    script = checkout / "completions" / "bash" / "swarmctl"
    program = (
        f"source {script}\nCOMP_WORDS=(swarmctl ref '')\nCOMP_CWORD=2\n"
        '_swarmctl_completion swarmctl\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    environment = _env(checkout)
    environment["PATH"] = f"{Path(swarmctl_argv()[0]).parent}{os.pathsep}{environment.get('PATH', '')}"
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, env=environment)
    assert ran.returncode == 0 and "count" in ran.stdout.split(), ran.stdout + ran.stderr


def test_it_is_a_parity_case(checkout):
    """The copy's own tests/test_parity.py finds the new example and runs it at the CLI, through
    `swarmctl call` and over MCP (stdio and HTTP), each giving the same envelope. On a local
    store only: what a tool's parity needs of PostgreSQL is the same for every tool, and this
    checkout's parity test has it for each; the copy's own PostgreSQL server, demo store and two
    servers would double this test's time for nothing the new tool adds."""
    shutil.copytree(ROOT / "tests", checkout / "tests", ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_parity.py", "-k", "ref_count and sqlite"],
        env=_env(checkout), capture_output=True, text=True, cwd=checkout,
    )
    passed = re.search(r"(\d+) passed", ran.stdout)
    assert ran.returncode == 0 and passed and int(passed[1]) == 1, ran.stdout + ran.stderr


def test_a_package_area_declares_a_tool_in_one_line():
    """tx/ and workflow/: an address names the tool from its command, and its entry takes the
    result type from the function and `mutates` from the annotations; a function whose request
    is not the address's is refused at import, not at the first call."""
    shown = address("workflow show-definition", models.TxReq)
    assert (shown.name, shown.cli) == ("workflow_show_definition", ("workflow", "show-definition"))

    def tx_peek(ctx, req: models.TxReq) -> models.TxStatusResult:
        """Peek."""

    entry = address("tx peek", models.TxReq).tool(tx_peek, READ, "Peek", "Peek at it.")
    assert (entry.name, entry.result, entry.mutates) == ("tx_peek", models.TxStatusResult, False)
    with pytest.raises(TypeError, match="tx_peek takes"):
        address("tx peek", models.TxSetReq).tool(tx_peek, READ, "Peek", "Peek at it.")
    commit, status = registry.get("tx_commit"), registry.get("tx_status")
    assert (commit.result, commit.mutates, status.mutates) == (models.TxCommitResult, True, False)
