"""The README, followed word for word in one shell, shows what it says it shows.

Its shell blocks are taken in order and run in ONE bash session (cd and export carry over from
block to block, as they do for a reader), from a fresh temporary directory standing for the
checkout, with this environment's `swarmctl` on PATH:

- a ```sh block is typed as it is; what it prints is not shown in the README, but anything on
  stderr (a failing `cd`, a jq error, usage) fails the test;
- a ```console block is a transcript: each `$ command` runs, and what it printed (stdout and
  stderr, as a terminal shows them) must be the lines under it, normalised as the golden tests
  are (swarmctl/gen/normalize.py), trailing spaces ignored; `…` matches anything (on a line of
  its own, any number of lines);
- a block with a line `# not run by the README test: REASON` is skipped (installing, the test
  command itself, the benchmark). The set-up block is one of those: what it leaves behind is
  this environment's `swarmctl` and the demo store, which the test makes with the block's own
  last command.

The session runs with TZ=UTC and COLUMNS=160, so tables are as wide and their times as the
README shows them. Then the README cannot drift from the program again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from golden import ROOT, Normalizer
from swarm import swarmctl_argv

README = ROOT / "README.md"
SKIP = "# not run by the README test:"
SETUP_DEMO = "swarmctl demo ./demo-store"
ENVIRONMENT = {"TZ": "UTC", "COLUMNS": "160", "LC_ALL": "C.UTF-8"}


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    language: str
    text: str
    line: int  # where it starts in the README, for messages

    @property
    def skipped(self) -> bool:
        return any(line.strip().startswith(SKIP) for line in self.text.splitlines())

    def commands(self) -> list[Command]:
        """A console block's `$ command` lines (with `> ` continuations) and the output under each."""
        found: list[Command] = []
        for line in self.text.splitlines():
            if line.startswith("$ "):
                found.append(Command(line[2:]))
            elif line.startswith("> ") and found and not found[-1].expected:
                found[-1].text += "\n" + line[2:]
            else:
                assert found, f"README line {self.line}: a console block starts with `$ command`"
                found[-1].expected.append(line)
        return found


def readme_blocks(text: str) -> list[Block]:
    blocks = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S):
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(match.group(1), match.group(2), line))
    return blocks


def shell_blocks() -> list[Block]:
    return [b for b in readme_blocks(README.read_text()) if b.language in ("sh", "console")]


def matches(expected: list[str], actual: str, tmp: Path) -> bool:
    """The README's lines against what ran, as they are or both normalised; `…` matches anything."""
    raw = _clean("\n".join(expected)), _clean(actual)
    normalised = _clean(Normalizer(tmp)("\n".join(expected))), _clean(Normalizer(tmp)(actual))
    return any(_match(want, got) for want, got in (raw, normalised))


def _match(want: str, got: str) -> bool:
    pattern = "".join(
        r"(?:.*\n)*?" if line == "…" else ".*?".join(re.escape(part) for part in line.split("…")) + r"\n"
        for line in want.split("\n")
    )
    return re.fullmatch(pattern, got + "\n") is not None


def _clean(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


def session_script(blocks: list[Block], out: Path) -> str:
    """One bash script: each block's commands grouped (not in a subshell), their output to files."""
    lines = []
    for i, block in enumerate(blocks):
        if block.skipped:
            if SETUP_DEMO in block.text:
                lines.append(f"{SETUP_DEMO} > /dev/null")
            continue
        if block.language == "sh":
            lines += ["{", block.text.rstrip("\n"), f"}} > {out}/{i}.out 2> {out}/{i}.err"]
        else:
            for j, command in enumerate(block.commands()):
                lines += ["{", command.text, f"}} > {out}/{i}.{j}.out 2>&1"]
    return "\n".join(lines) + "\n"


def test_the_readme_runs_as_one_session(tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("the README's walkthroughs use jq (apt-get install jq)")
    blocks = shell_blocks()
    out, home = tmp_path / ".out", tmp_path / "checkout"
    out.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMCTL_", "_SWARMCTL")) and k != "NO_COLOR"}
    env.update(ENVIRONMENT, PATH=str(Path(swarmctl_argv()[0]).parent) + os.pathsep + env["PATH"])
    ran = subprocess.run(
        ["bash", "--norc", "--noprofile", "-s"], input=session_script(blocks, out), cwd=home, env=env,
        capture_output=True, text=True, timeout=600,
    )
    assert ran.returncode == 0 and not ran.stderr, ran.stderr[-3000:]
    problems = []
    for i, block in enumerate(blocks):
        if block.skipped:
            continue
        if block.language == "sh":
            err = (out / f"{i}.err").read_text()
            if err:
                problems.append(f"README line {block.line}: the block wrote to stderr:\n{err}")
            continue
        for j, command in enumerate(block.commands()):
            actual = (out / f"{i}.{j}.out").read_text()
            if not matches(command.expected, actual, home):
                problems.append(
                    f"README line {block.line}: `$ {command.text}` printed\n{actual}\nbut the README shows\n"
                    + "\n".join(command.expected)
                )
    assert not problems, "\n\n".join(problems)


# --- the rules of the game -------------------------------------------------------------------


def test_few_blocks_are_skipped_and_each_says_why():
    skipped = [b for b in shell_blocks() if b.skipped]
    # Few: installing, the benchmarks, a PostgreSQL server; everything else runs.
    assert 1 <= len(skipped) <= 6, [b.line for b in skipped]
    for block in skipped:
        reason = next(line for line in block.text.splitlines() if line.strip().startswith(SKIP))
        assert reason.strip()[len(SKIP):].strip(), f"README line {block.line}: say why it is not run"
    assert sum(SETUP_DEMO in b.text for b in skipped) == 1


def test_outputs_are_shown_only_as_console_transcripts():
    """An output block after a shell block would not be compared: outputs go in ```console blocks."""
    blocks = readme_blocks(README.read_text())
    for before, after in zip(blocks, blocks[1:]):
        assert not (before.language == "sh" and after.language in ("json", "text", "")), (
            f"README line {after.line}: show output as a ```console transcript (`$ command`, then its output)"
        )


@pytest.mark.parametrize(
    "expected, actual, ok",
    [
        (["a…c"], "abc\n", True),
        (["a…c"], "abd\n", False),
        (["one", "…", "four"], "one\ntwo\nthree\nfour\n", True),
        (["one", "…", "two"], "one\ntwo\n", True),
        (["x"], "x   \n", True),
        (["x"], "x\ny\n", False),
        (['{"at":"2026-11-30T03:20:56.123Z"}'], '{"at":"2027-01-01T00:00:00.000Z"}\n', True),
    ],
)
def test_how_outputs_are_compared(expected, actual, ok, tmp_path):
    assert matches(expected, actual, tmp_path) is ok
