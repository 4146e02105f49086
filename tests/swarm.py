"""Running swarmctl as a user would, and comparing what it prints with golden outputs.

`sw(...)` runs one command line and returns what it printed and its exit status. By default
it runs in this process (the same `swarmctl.cli.run` the installed command calls), which keeps
the suite fast; SWARMCTL_TEST_SUBPROCESS=1 runs every command as a real process instead, and
tests that need real processes (races, kills, pipes) use `sw.process(...)`.

Backends: `sw.store` is a local store's path, or, for a test marked
`@pytest.mark.backends("sqlite", "postgres")` (or a module with that `pytestmark`), run once
more with `sw.store` the URL of a fresh store on the session's throwaway PostgreSQL server
(tests/pgcluster.py). Golden snapshots are shared: the URL is normalised to the path.

A pytest plugin (conftest.py loads it through `pytest_plugins`): its fixtures (`sw`, `backend`,
`pg_cluster`, `golden`) reach every test without an import; its classes and functions are
imported by name (`from swarm import Swarm, swarmctl_argv`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from golden import GoldenText, Normalizer
from pgcluster import remove_cluster, start_cluster

SUBPROCESS = os.environ.get("SWARMCTL_TEST_SUBPROCESS") == "1"


def swarmctl_argv() -> list[str]:
    """The installed command, from the same environment as the running interpreter."""
    script = Path(sys.executable).parent / "swarmctl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "swarmctl"]


@dataclass
class Ran:
    argv: list[str]
    exit: int
    stdout: str
    stderr: str

    @property
    def envelope(self) -> dict:
        lines = self.stdout.splitlines()
        assert len(lines) == 1, f"expected one envelope line on stdout, got {self.stdout!r}"
        return json.loads(lines[0])

    @property
    def result(self) -> dict:
        env = self.envelope
        assert env["ok"], env
        return env["result"]

    @property
    def error(self) -> dict:
        env = self.envelope
        assert not env["ok"], env
        return env["error"]

    def transcript(self) -> str:
        return f"$ swarmctl {shlex.join(self.argv)}\nexit {self.exit}\n{self.stdout}"


class StoreNormalizer(Normalizer):
    """The normaliser, and a store's URL read as the local store's path it stands for."""

    def __init__(self, tmp: Path, url: str | None) -> None:
        super().__init__(tmp)
        self.url = url
        self.path = str(tmp / "store")

    def __call__(self, text: str) -> str:
        if self.url:  # as a shell command line quotes it, then as it is
            text = text.replace(shlex.quote(self.url), self.path).replace(self.url, self.path)
        return super().__call__(text)


class Swarm:
    """A user at a shell in a temporary directory, with no SWARMCTL_* variables set.

    `store` is where the test's store is (or is to be made): a path, or on PostgreSQL a URL."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch, url: str | None = None) -> None:
        self.tmp = tmp
        self.monkeypatch = monkeypatch
        self.cwd = tmp
        self.url = url
        self.backend = "postgres" if url else "sqlite"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_") and k != "NO_COLOR"}
        self.normalize = StoreNormalizer(tmp, url)
        for key in [k for k in os.environ if k.startswith("SWARMCTL_")]:
            monkeypatch.delenv(key)

    @property
    def store(self):
        """The test's store: a local path (Path), or the URL (str) of one on the server."""
        return self.url if self.url else self.tmp / "store"

    def __call__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
        if SUBPROCESS:
            return self.process(*args, env=env, cwd=cwd)
        from swarmctl.cli import run

        out, err = io.StringIO(), io.StringIO()
        with self.monkeypatch.context() as mp:
            mp.chdir(cwd or self.cwd)
            for key, value in (env or {}).items():
                mp.setenv(key, value)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = run(list(args))
        return Ran(list(args), status, out.getvalue(), err.getvalue())

    def process(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, input: str | None = None
    ) -> Ran:
        proc = subprocess.run(
            [*swarmctl_argv(), *args],
            cwd=cwd or self.cwd,
            env={**self.env, **(env or {})},
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,  # never the terminal's or xdist's
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Ran(list(args), proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **kw) -> dict:
        ran = self(*args, **kw)
        assert ran.exit == 0, ran.transcript() + ran.stderr
        return ran.result

    def transcript(self, *runs: Ran) -> str:
        """Runs as one golden text, normalised with one numbering of ids."""
        normalize = StoreNormalizer(self.tmp, self.url)
        return "\n".join(normalize(r.transcript()) for r in runs)


@pytest.fixture
def backend() -> str:
    """The kind of store a test runs on: "sqlite" unless its `backends` marker says more."""
    return "sqlite"


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = start_cluster()
    yield cluster
    remove_cluster(cluster)


@pytest.fixture
def sw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, request) -> Swarm:
    url = request.getfixturevalue("pg_cluster").new_store_url() if backend == "postgres" else None
    return Swarm(tmp_path, monkeypatch, url)


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(GoldenText)
