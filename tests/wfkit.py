"""What the workflow tests share: a store with two changesets, a folder of real shell scripts
to use as command steps, and a few ways to run swarmctl on them.

The scripts run in the workflow file's folder and leave evidence there: `mark.sh WORD`
appends WORD to marks.log (so a test sees what ran, in which order, how many times),
`fail.sh` says something on stderr and exits 3, `hang.sh WORD` marks, writes its pid to
WORD.pid and sleeps (for timeouts and kills), `leak.sh` prints the secret it was given.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from conftest import Ran, Swarm, swarmctl_argv

SCRIPTS = {
    "mark.sh": """\
        #!/bin/sh
        echo "$1" >> marks.log
        echo "marked $1"
        """,
    "fail.sh": """\
        #!/bin/sh
        echo "fail.sh: the target refused" >&2
        exit 3
        """,
    "hang.sh": """\
        #!/bin/sh
        echo "$1" >> marks.log
        echo $$ > "$1.pid"
        exec sleep 30
        """,
    "leak.sh": """\
        #!/bin/sh
        echo "token is $DEPLOY_TOKEN"
        echo "DEPLOY_TOKEN=$DEPLOY_TOKEN" >&2
        echo "$DEPLOY_TOKEN" >> marks.log
        """,
}

ALICE = "human/alice"
SECRET = "s3cr3t-Deploy-Token-9c1f"


class Kit:
    def __init__(self, sw: Swarm) -> None:
        self.sw = sw
        self.dir = sw.tmp / "flows"
        self.dir.mkdir()
        for name, body in SCRIPTS.items():
            path = self.dir / name
            path.write_text(textwrap.dedent(body))
            path.chmod(0o755)
        self.repo = str(sw.store)
        sw.ok("--as", ALICE, "init", self.repo)  # op 1
        self.c1 = sw.ok(*self.as_(ALICE), "changeset", "create", "-m", "first", "--ref", "main")["changeset"]["id"]  # op 2
        self.c2 = sw.ok(*self.as_(ALICE), "changeset", "create", "-m", "second", "--ref", "main")["changeset"]["id"]  # op 3

    def as_(self, actor: str | None) -> tuple[str, ...]:
        return ("--repo", self.repo, "--as", actor) if actor else ("--repo", self.repo)

    def write(self, toml: str, name: str = "flow.toml") -> Path:
        path = self.dir / name
        path.write_text(textwrap.dedent(toml))
        return path

    def __call__(self, *args: str, actor: str | None = ALICE, env: dict[str, str] | None = None) -> Ran:
        """swarmctl in this process, on the kit's store, in the flows folder."""
        return self.sw(*self.as_(actor), *args, env=env, cwd=self.dir)

    def process(self, *args: str, actor: str | None = ALICE, env: dict[str, str] | None = None) -> Ran:
        return self.sw.process(*self.as_(actor), *args, env=env, cwd=self.dir)

    def popen(self, *args: str, actor: str | None = ALICE, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [*swarmctl_argv(), *self.as_(actor), *args],
            cwd=self.dir,
            env={**self.sw.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, toml: str, *, env: dict[str, str] | None = None, name: str = "flow.toml") -> tuple[Ran, str]:
        """Write the workflow file, `workflow run` it; the run and the new workflow's id."""
        self.write(toml, name)
        ran = self("workflow", "run", name, env=env)
        listed = self("workflow", "list", "-n", "1", actor=None).result["workflows"]
        return ran, listed[0]["id"]

    def marks(self) -> list[str]:
        path = self.dir / "marks.log"
        return path.read_text().split() if path.exists() else []

    def wait_for_mark(self, word: str, proc: subprocess.Popen, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while word not in self.marks() or not (self.dir / f"{word}.pid").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{word} never started"
            time.sleep(0.02)

    def kill_hung(self, word: str) -> None:
        """Kill a hang.sh left running when the swarmctl that started it was killed."""
        try:
            os.kill(int((self.dir / f"{word}.pid").read_text()), signal.SIGKILL)
        except (ProcessLookupError, FileNotFoundError, ValueError):
            pass

    def db_bytes(self) -> bytes:
        """The store's database files as they are on disk (main file, -wal, -shm)."""
        found = b""
        for path in sorted(Path(self.repo).iterdir()):
            if path.name.startswith("swarmops.db"):
                found += path.read_bytes()
        return found


def envelope(proc: subprocess.Popen) -> tuple[int, dict]:
    out, err = proc.communicate(timeout=60)
    lines = out.splitlines()
    assert len(lines) == 1, (out, err)
    return proc.returncode, json.loads(lines[0])
