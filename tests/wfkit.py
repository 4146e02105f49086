"""What the workflow tests share: a store with two changesets, a folder of real shell scripts
to use as command steps, and a few ways to run swarmctl on them.

The scripts run in the workflow file's folder and leave evidence there: `mark.sh WORD`
appends WORD to marks.log (so a test sees what ran, in which order, how many times),
`fail.sh` says something on stderr and exits 3, `hang.sh WORD` marks, writes its pid to
WORD.pid and sleeps (for timeouts and kills), `tick.sh WORD` writes its pid to WORD.pid and
then a line to WORD.ticks every 50 ms for 30 s, through child processes of its group (to see
whether a command still runs), `leak.sh` prints the secret it was given.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from core_helpers import ALICE
from swarm import Ran, Swarm, swarmctl_argv

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
    "tick.sh": """\
        #!/bin/sh
        echo $$ > "$1.pid"
        i=0
        while [ $i -lt 600 ]; do echo tick >> "$1.ticks"; i=$((i+1)); sleep 0.05; done
        """,
    "leak.sh": """\
        #!/bin/sh
        echo "token is $DEPLOY_TOKEN"
        echo "DEPLOY_TOKEN=$DEPLOY_TOKEN" >&2
        echo "$DEPLOY_TOKEN" >> marks.log
        """,
}

SECRET = "s3cr3t-Deploy-Token-9c1f"
# How long a wait for an event (a mark, a tick, a process gone) may take before the test fails.
# Only a hang reaches it: waits end on the event, however loaded the machine is.
WAIT_S = 120.0


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
            stdin=subprocess.DEVNULL,
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

    def wait_for_mark(self, word: str, proc: subprocess.Popen, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while word not in self.marks() or not self._pid_written(word):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{word} never started"
            time.sleep(0.02)

    def _pid_written(self, word: str) -> bool:
        """WORD.pid holds a whole line (the shell creates the file before it writes the pid)."""
        path = self.dir / f"{word}.pid"
        return path.exists() and path.read_text().endswith("\n")

    def kill_hung(self, word: str) -> None:
        """Kill a hang.sh left running when the swarmctl that started it was killed, and wait
        until it is gone: until then swarmctl rightly sees its command still running."""
        try:
            pgid = os.getpgid(int((self.dir / f"{word}.pid").read_text()))
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return
        self.kill_group(pgid)  # hang.sh's step's process group (led by swarmctl's holder, or no one now)

    def ticks(self, word: str) -> int:
        path = self.dir / f"{word}.ticks"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def wait_for_ticks(self, word: str, proc: subprocess.Popen | None = None, timeout_s: float = WAIT_S) -> int:
        """Wait until tick.sh WORD ticks; its process group (the pid of the holder that leads it)."""
        deadline = time.monotonic() + timeout_s
        while self.ticks(word) < 2 or not self._pid_written(word):
            assert proc is None or proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{word} never ticked"
            time.sleep(0.02)
        return os.getpgid(int((self.dir / f"{word}.pid").read_text()))

    def still_ticking(self, word: str) -> bool:
        """Whether tick.sh WORD ticks again: waits for the next tick (a live one ticks every
        50 ms; only a dead one makes this wait out WAIT_S)."""
        before = self.ticks(word)
        deadline = time.monotonic() + WAIT_S
        while self.ticks(word) == before:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill_group(self, pgid: int) -> None:
        """Kill what is left of a command's process group and wait until it is gone."""
        from swarmctl import pids

        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + WAIT_S
        while pids.group_alive(pgid, None):
            assert time.monotonic() < deadline, f"process group {pgid} outlived SIGKILL"
            time.sleep(0.02)

    def processes_in_folder(self) -> list[int]:
        """The live processes whose working directory is the flows folder (where commands run)."""
        from swarmctl import pids

        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    cwd = os.readlink(f"/proc/{entry.name}/cwd")
                except OSError:
                    continue
                if cwd == os.path.realpath(self.dir) and pids.alive(int(entry.name)):
                    found.append(int(entry.name))
        return found

    def db_bytes(self) -> bytes:
        """The store's database files as they are on disk (main file, -wal, -shm); on
        PostgreSQL, every row of every table of the store's schema, as text."""
        if not Path(self.repo).is_absolute():
            return _schema_text(self.repo)
        found = b""
        for path in sorted(Path(self.repo).iterdir()):
            if path.name.startswith("swarmops.db"):
                found += path.read_bytes()
        return found


def _schema_text(url: str) -> bytes:
    import psycopg

    from swarmctl.store.postgres.url import parse

    where = parse(url)
    with psycopg.connect(where.libpq, autocommit=True) as raw:
        tables = [r[0] for r in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (where.schema,))]
        assert "workflow_steps" in tables, tables
        rows = [r[0] for t in tables for r in raw.execute(f'SELECT t::text FROM "{where.schema}"."{t}" t')]
    return "\n".join(rows).encode()


def envelope(proc: subprocess.Popen) -> tuple[int, dict]:
    out, err = proc.communicate(timeout=WAIT_S)
    lines = out.splitlines()
    assert len(lines) == 1, (out, err)
    return proc.returncode, json.loads(lines[0])
