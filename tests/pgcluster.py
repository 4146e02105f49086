"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl, a unix socket in a directory of
its own, no TCP port, started once per test session and removed after.

PostgreSQL refuses to run as root, and pytest's temporary directories are private to the user
running the tests, so when the tests run as root the cluster lives in its own directory under
the system's temporary directory, owned by the `postgres` OS user, and runs as that user.

Off CI, without the server installed, the PostgreSQL tests skip with one reason; with CI=true
set they must run, and a server that cannot start fails them.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

DATABASE = "swarm"
IN_CI = os.environ.get("CI") == "true"
MISSING = (
    "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: "
    "`apt-get install postgresql` to run the PostgreSQL tests"
)


def server_bin() -> Path | None:
    """Debian keeps them in /usr/lib/postgresql/<version>/bin, off PATH; the newest wins."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


class Cluster:
    def __init__(self, bindir: Path, root: Path, user: str | None, durable: bool = False) -> None:
        self.durable = durable  # the server's own defaults (a benchmark), not the tests' fast ones
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.socket = root  # the socket directory
        self.user = user  # the OS user the server runs as (None: this one)
        self.role = user or pwd.getpwuid(os.getuid()).pw_name
        self._schemas = itertools.count(1)

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, user=self.user, capture_output=True, text=True, timeout=120, cwd=self.root, check=False
        )

    def start(self) -> None:
        if not self.data.exists():
            made = self._run(
                str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", self.role,
                "-E", "UTF8", "--locale=C", "--no-sync",
            )
            if made.returncode != 0:
                raise RuntimeError(f"initdb failed: {made.stdout}{made.stderr}")
        options = f"-k {self.socket} -c listen_addresses='' -c max_connections=300"
        if not self.durable:  # a throwaway cluster for tests: no need to survive a power cut
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        started = self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"
        )
        if started.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {started.stdout}{started.stderr}{log}")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def psql(self, sql: str, database: str = "postgres") -> str:
        import psycopg

        with psycopg.connect(self.libpq(database), autocommit=True) as conn:
            cur = conn.execute(sql)
            return repr(cur.fetchall()) if cur.description else ""

    def libpq(self, database: str = DATABASE) -> str:
        return f"postgresql://{self.role}@/{database}?host={self.socket}"

    def new_store_url(self) -> str:
        """The URL of a store no one has made yet: a fresh schema name in the test database."""
        return f"{self.libpq()}&schema=t{os.getpid()}_{next(self._schemas)}"


def start_cluster() -> Cluster:
    bindir = server_bin()
    if bindir is None:
        if IN_CI:
            pytest.fail(MISSING + " (CI=true: the PostgreSQL tests must run)")
        pytest.skip(MISSING)
    root = Path(tempfile.mkdtemp(prefix="swarmctl-pg-"))
    user = None
    if os.geteuid() == 0:
        user = "postgres"
        shutil.chown(root, user)
    cluster = Cluster(bindir, root, user)
    try:
        cluster.start()
        cluster.psql(f"CREATE DATABASE {DATABASE}")
    except Exception:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


def remove_cluster(cluster: Cluster) -> None:
    cluster.stop("immediate")
    shutil.rmtree(cluster.root, ignore_errors=True)
