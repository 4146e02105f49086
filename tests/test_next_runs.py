"""`next` runs as written (issue 8, item 5): its argv and the command in the hint name the
store (as `meta.repo` shows it) and the actor, from flags or the environment alike, so running
`next.argv` verbatim, from another directory in a clean environment, does the next step."""

import os
import shlex
import subprocess
from pathlib import Path

from core_helpers import AGENT, ALICE, as_, build_golden_store, refs
from mcp_client import McpClient
from swarm import swarmctl_argv


def clean_run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """argv as written, found on PATH, with nothing else in the environment."""
    assert argv[0] == "swarmctl"
    bin_dir = str(Path(swarmctl_argv()[0]).parent)
    return subprocess.run(argv, cwd=cwd, env={"PATH": bin_dir + os.pathsep + os.defpath}, capture_output=True, text=True, timeout=60)


def test_next_argv_from_the_environment_runs_from_anywhere(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])  # 7 moves release/v1 after op 6
    # The store and actor come from the environment, the command runs inside the store's folder.
    failed = sw.process("op", "undo", "6", env={"SWARMCTL_REPO": "store", "SWARMCTL_AS": AGENT})
    assert failed.exit == 3, failed.stdout
    error, meta = failed.error, failed.envelope["meta"]
    assert meta["repo"] == str(sw.store.resolve())
    assert error["next"]["arguments"] == {"op": 7}  # what an MCP client calls: unchanged
    assert error["next"]["argv"] == ["swarmctl", "--repo", meta["repo"], "--as", AGENT, "op", "undo", "7"]
    elsewhere = sw.tmp / "elsewhere"
    elsewhere.mkdir()
    ran = clean_run(error["next"]["argv"], elsewhere)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert refs(sw.store)["release/v1"] == ids["fix"]  # op 7 undone: the next step was done


def test_next_argv_and_hint_carry_flags_given_relative(sw):
    kit_flow = sw.tmp / "flow.toml"
    build_golden_store(sw)
    kit_flow.write_text('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "hotfix", to = "main" }\n')
    ran = sw("-R", "store", "--as", ALICE, "workflow", "run", "flow.toml")
    wf = ran.result["workflow"]["id"]
    preview = sw("-R", "store", "--as", ALICE, "workflow", "rollback", wf, "--include-completed").result
    argv = preview["next"]["argv"]
    assert argv[:5] == ["swarmctl", "--repo", str(sw.store.resolve()), "--as", ALICE]
    assert f"`{shlex.join(argv)}`" in preview["hint"]
    confirmed = clean_run(argv, sw.tmp / "store")
    assert confirmed.returncode == 0, confirmed.stdout
    assert "hotfix" not in refs(sw.store)


def test_a_hint_that_names_next_carries_them_too(sw):
    build_golden_store(sw)
    me = as_(sw, ALICE)
    sw.ok(*me, "tx", "begin")
    sw.ok(*me, "tx", "set", "hotfix", "main")
    commit = sw.ok(*me, "tx", "commit")["op"]
    again = sw(*me, "tx", "rollback").error
    command = shlex.join(again["next"]["argv"])
    assert command == shlex.join(["swarmctl", "--repo", str(sw.store), "--as", ALICE, "op", "undo", str(commit)])
    assert f"`{command}`" in again["hint"]


def test_every_command_of_a_hint_that_names_next_runs_as_written(sw):
    """E_STEP_FAILED's hint names three commands: the rollback preview (its `next`) carried the
    store and actor, while `workflow status ID` and `workflow resume ID --retry STEP` beside it
    did not, and pasted from elsewhere they found no store."""
    import re

    build_golden_store(sw)
    (sw.tmp / "flow.toml").write_text('name = "w"\n[[step]]\nname = "check"\nrun = ["false"]\ntimeout_s = 30\n')
    failed = sw("-R", "store", "--as", ALICE, "workflow", "run", "flow.toml")
    assert failed.error["code"] == "E_STEP_FAILED", failed.stdout
    commands = [shlex.split(c) for c in re.findall(r"`(swarmctl [^`]+)`", failed.error["hint"])]
    assert [c[5:7] for c in commands] == [["workflow", "status"], ["workflow", "rollback"], ["workflow", "resume"]]
    elsewhere = sw.tmp / "elsewhere"
    elsewhere.mkdir()
    for argv in commands:
        ran = clean_run(argv, elsewhere)
        assert '"code":"E_NOT_A_REPO"' not in ran.stdout and '"E_IDENTITY_REQUIRED"' not in ran.stdout, ran.stdout
        assert ran.returncode in (0, 10), (argv, ran.stdout)  # the resume retries `false`: it fails again


def test_over_mcp_next_arguments_are_unchanged(sw):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v1", ids["base"])
    with McpClient(sw.store, AGENT) as client:
        envelope = client.envelope("undo", {"op": 6})
    assert envelope["error"]["next"]["arguments"] == {"op": 7}
    assert envelope["error"]["next"]["argv"][:5] == ["swarmctl", "--repo", str(sw.store), "--as", AGENT]
