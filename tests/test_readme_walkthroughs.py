"""The README's walkthroughs, run as a user would run them: in bash, with the installed
swarmctl, in a new directory. A walkthrough that stops working fails here, not for a reader."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import swarmctl_argv
from golden import ROOT

README = (ROOT / "README.md").read_text()
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="the walkthroughs use jq")


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def blocks(text: str, language: str = "sh") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def run_bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    bin_dir = str(Path(swarmctl_argv()[0]).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")}
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@needs_jq
def test_the_transactions_walkthrough(tmp_path):
    tx = section("Transactions")
    script = "swarmctl demo ./demo-store > /dev/null\n" + "\n".join(blocks(tx)[:2])
    ran = run_bash(script, tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    last = ran.stdout.strip().splitlines()[-1]
    assert '"op":"undo"' in last and '"undone":7' in last


@needs_jq
def test_the_workflows_walkthrough(tmp_path):
    workflows = section("Workflows")
    (tmp_path / "release.toml").write_text(blocks(workflows, "toml")[0])
    setup, run = blocks(workflows)[:2]
    # The reader copies the preview_id the preview printed; the script asks for it.
    run = run.replace(
        "--expect-preview pv-5d0c2e7a91b34f08",
        '--expect-preview "$(swarmctl workflow rollback "$wf" --include-completed | jq -r .result.preview_id)"',
    )
    ran = run_bash(setup + run, tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert (tmp_path / "deploy.log").read_text() == "deploying to prod\nundeploying from prod\n"
    assert ran.stdout.strip().splitlines()[-1] == "undeploying from prod"


@needs_jq
def test_the_revert_and_restore_walkthrough(tmp_path):
    revert = section("Taking back many ops at once: `op revert` and `op restore`")
    ran = run_bash(blocks(revert)[0], tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    lines = ran.stdout.strip().splitlines()
    assert '"reverted":[3,5,6],"op":null' in lines[1] and '"reverted":[3,5,6],"op":8' in lines[2]
    assert lines[3] == "8" and lines[4] == '{"op":8,"already_applied":true}'
    assert '"undone":8,"op":9' in lines[5]
    assert '"action":"preview","head":9' in lines[6] and '"action":"restored","head":9,"op":10' in lines[7]
