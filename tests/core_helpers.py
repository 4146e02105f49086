"""Helpers of the core's tests: the actors, stores with a known history, and looking at a store's
files and tables directly (with sqlite3, not through swarmctl) to check what a command did to them.

A pytest plugin (conftest.py loads it through `pytest_plugins`): its fixture `frozen_clock`
reaches every test without an import; the rest is imported by name."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from swarm import SUBPROCESS, Swarm, swarmctl_argv
from swarmctl import names
from swarmctl.store.check import check_store

# The tests' actors, one set: people (human/*) and agents; a policy's examples give people more.
ALICE = "human/alice"
BOB = "human/bob"
AGENT = "agent/worker-17"
CI = "ci/release"
FROZEN = "2026-11-30T03:20:56.123Z"


@pytest.fixture
def frozen_clock(monkeypatch):
    """Every op at one instant, so that changeset ids (which hash the time) are the same on
    every run. It stops the clock of this process, so it needs the in-process `sw`."""
    if SUBPROCESS:
        pytest.skip("a frozen clock needs commands run in this process")
    monkeypatch.setattr(names, "now", lambda: FROZEN)
    # A store on PostgreSQL takes op times from the server's clock: stop that one too.
    from swarmctl.store.postgres import PostgresStore

    monkeypatch.setattr(PostgresStore, "_now", lambda self: FROZEN)
    return FROZEN


# The golden example of reference/swarmops-undo.md: `op undo 6` on the store of
# build_golden_store, as the agent. Its envelope, normalised, byte for byte as the page shows it
# (the CLI's line, and the text of the MCP result's content block).
UNDO_REFERENCE_TEXT = (
    '{"ok":true,"op":"undo","api":1,"result":{"undone":6,"op":7,"ref_moves":[{"name":"release/v1",'
    '"new":"[c1]","actor":"agent/worker-17","at":"[at]"}],"already_applied":false},'
    '"meta":{"repo":"[tmp]/store","elapsed_ms":"[elapsed_ms]","resolved":{},"auth":"trust"}}'
)


def build_golden_store(sw: Swarm) -> dict[str, str]:
    """The store of reference/swarmops-undo.md, made with swarmctl commands: op 6 is
    agent/worker-17 moving release/v1. Returns the changeset ids by name."""
    repo = str(sw.store)
    alice = ("--repo", repo, "--as", ALICE)
    agent = ("--repo", repo, "--as", AGENT)
    sw.ok("--as", ALICE, "init", repo)  # op 1
    base = sw.ok(*alice, "changeset", "create", "-m", "Initial import", "--ref", "main")["changeset"]["id"]  # 2
    sw.ok(*agent, "changeset", "create", "-m", "Add release notes", "--ref", "main")  # 3
    sw.ok(*alice, "ref", "set", "release/v1", base, "--create")  # 4
    fix = sw.ok(*agent, "changeset", "create", "-m", "Fix flaky deploy check", "--ref", "main")["changeset"]["id"]  # 5
    sw.ok(*agent, "ref", "set", "release/v1", fix[:12], "--expect", base[:12])  # 6
    return {"base": base, "fix": fix}


def as_(sw: Swarm, actor: str) -> tuple[str, ...]:
    return ("--repo", str(sw.store), "--as", actor)


def build_log_store(sw: Swarm) -> dict[str, str]:
    """The golden store (ops 1-6), then: 7 the agent creates feature/x, 8 alice deletes it,
    9 alice creates a changeset that moves no ref."""
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, AGENT), "ref", "set", "feature/x", ids["fix"], "--create")  # 7
    sw.ok(*as_(sw, ALICE), "ref", "delete", "feature/x")  # 8
    ids["docs"] = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "Docs")["changeset"]["id"]  # 9
    return ids


def connect(store: Path | str):
    """A read-only look at the store's tables, bypassing swarmctl (on PostgreSQL, a connection
    that takes the store's SQL, in the store's schema)."""
    if isinstance(store, str):
        import psycopg

        from swarmctl.store.postgres.url import parse
        from swarmctl.store.sql import PgConn

        class Look(PgConn):  # `with connect(store) as conn:` as with sqlite3
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return None

        url = parse(store)
        raw = psycopg.connect(url.libpq, autocommit=True)
        raw.execute(f'SET search_path TO "{url.schema}"')
        return Look(raw)
    return sqlite3.connect(f"{(store / 'swarmops.db').as_uri()}?mode=ro", uri=True)


@contextmanager
def tamper(store: Path | str):
    """A writable connection to the store's tables, bypassing swarmctl: to leave a record as a
    crash or a newer swarmctl might have. Commits on leaving the block."""
    if isinstance(store, str) and not store.startswith("/"):
        conn = connect(store)  # autocommit
        try:
            yield conn
        finally:
            conn.close()
        return
    conn = sqlite3.connect(Path(store) / "swarmops.db")
    try:
        with conn:
            yield conn
    finally:
        conn.close()


# On PostgreSQL, what a read must leave unchanged is every row of every table.
_TABLES = ("meta", "head", "ops", "ref_moves", "changesets", "blobs", "refs", "txs", "tx_revisions",
           "tx_baselines", "workflows", "workflow_steps", "op_reverts", "tokens")


def fold_wal(store: Path) -> None:
    """Checkpoint the store's WAL into its database file and remove the -wal and -shm files, as
    the last connection to close it leaves a store whose last connection did not write."""
    conn = sqlite3.connect(store / "swarmops.db", isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    assert sorted(p.name for p in store.iterdir()) == ["swarmops.db"]


def open_files(pid: int | str = "self") -> dict[str, str]:
    """What each open descriptor of process `pid` names (its number: the resolved path), read
    from /proc."""
    import os

    fds = Path(f"/proc/{pid}/fd")
    return {fd.name: os.path.realpath(fd) for fd in fds.iterdir()}


def child_commands(pid: int | str = "self") -> list[list[str]]:
    """The argv of each living child of process `pid` (of any of its threads), from /proc."""
    task = Path(f"/proc/{pid}/task")
    found = []
    try:
        children = " ".join(p.read_text() for p in task.glob("*/children")).split()
    except OSError:  # the process is gone
        return []
    for child in children:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone since
            continue
        found.append([a.decode(errors="replace") for a in argv if a])
    return found


def op_count(store: Path) -> int:
    conn = connect(store)
    try:
        return conn.execute("SELECT COUNT(*) FROM ops").fetchone()[0]
    finally:
        conn.close()


def refs(store: Path) -> dict[str, str]:
    conn = connect(store)
    try:
        return dict(conn.execute("SELECT name, target FROM refs"))
    finally:
        conn.close()


def problems(store: Path) -> list:
    """What the store's own consistency check finds (nothing, for a sound store)."""
    conn = connect(store)
    try:
        return check_store(conn, integrity=True)
    finally:
        conn.close()


def file_digests(store: Path) -> dict[str, str]:
    """The SHA-256 of the database and of its WAL (what a read must leave byte-identical).

    The -shm file is left out: it is SQLite's shared-memory index and lock table, which every
    reader of a WAL database writes its read marks into. A WAL that is absent and one that is
    empty hold the same (nothing): a reader may create the empty file, as SQLite does.
    """
    if isinstance(store, str):
        conn = connect(store)
        try:
            return {
                table: hashlib.sha256(repr(conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()).encode()).hexdigest()
                for table in _TABLES
            }
        finally:
            conn.close()
    digests = {}
    for name in ("swarmops.db", "swarmops.db-wal"):
        path = store / name
        data = path.read_bytes() if path.exists() else b""
        digests[name] = hashlib.sha256(data).hexdigest() if data else "empty"
    return digests


@contextmanager
def paused_at_commit(sw: Swarm, *args: str, env: dict[str, str] | None = None, when: str = "before") -> Iterator[subprocess.Popen]:
    """`swarmctl ARGS` as a real process, once it has stopped just before its COMMIT
    (SWARMCTL_FAULT=pause-before-commit, see CONTRIBUTING.md): everything of its change written,
    nothing committed, the write lock held. The block kills it, or runs others against the lock;
    leaving the block kills it if it still runs, and reaps it. `when="after"`: stopped just
    after the COMMIT instead (pause-after-commit), its change written, its envelope not."""
    flag = sw.tmp / f"paused-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [*swarmctl_argv(), *args],
        cwd=sw.tmp,
        env={**sw.env, **(env or {}), "SWARMCTL_FAULT": f"pause-{when}-commit:{flag}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not (flag.exists() and flag.read_text()):  # created, then its pid written
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the process never reached its commit"
            time.sleep(0.005)
        assert int(flag.read_text()) == proc.pid
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()


def remove_store(store: Path | str) -> None:
    """No store at `store` any more: its directory removed, or on PostgreSQL its schema dropped."""
    if isinstance(store, Path):
        shutil.rmtree(store, ignore_errors=True)
        return
    import psycopg

    from swarmctl.store.postgres.url import parse

    url = parse(store)
    with psycopg.connect(url.libpq, autocommit=True) as raw:
        raw.execute(f'DROP SCHEMA IF EXISTS "{url.schema}" CASCADE')


class Pristine:
    """A store as it was when `take()` was called, to put back after a test changed it (several
    doors taking the same call on the same store). A local store: a copy of its directory beside
    it. On PostgreSQL `store copy` would not do (it leaves tokens behind, as it should): every
    table of the store's schema is copied as it is into a schema beside it (`name` tells two
    copies apart), and put back in one transaction with the foreign keys' triggers off (the rows
    were consistent when taken), with its sequences; a table made since is dropped. Rows are
    deleted and inserted, not truncated: on a small store that is the faster way by far."""

    def __init__(self, store: Path | str, name: str = "pristine") -> None:
        self.store = store
        if isinstance(store, Path):
            self.copy: Path | str = store.with_name(f"{store.name}-{name}")
            return
        from swarmctl.store.postgres.url import parse

        url = parse(store)
        self.libpq, self.schema, self.copy = url.libpq, url.schema, f"{url.schema}_{name}"
        self.tables: list[str] = []
        self.sequences: list[tuple[str, int | None]] = []

    def _connect(self):
        import psycopg

        return psycopg.connect(self.libpq, autocommit=True)

    def _tables(self, raw, schema: str) -> list[str]:
        return [r[0] for r in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]

    def take(self) -> "Pristine":
        if isinstance(self.store, Path):
            shutil.rmtree(self.copy, ignore_errors=True)
            shutil.copytree(self.store, self.copy)
            return self
        s, p = self.schema, self.copy
        with self._connect() as raw:
            raw.execute(f'CREATE SCHEMA IF NOT EXISTS "{p}"')
            self.tables, had = self._tables(raw, s), set(self._tables(raw, p))
            raw.execute("; ".join(
                f'DELETE FROM "{p}"."{t}"; INSERT INTO "{p}"."{t}" SELECT * FROM "{s}"."{t}"' if t in had
                else f'CREATE TABLE "{p}"."{t}" AS TABLE "{s}"."{t}"'
                for t in self.tables
            ))
            self.sequences = raw.execute(
                "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = %s", (s,)
            ).fetchall()
        return self

    def restore(self) -> None:
        if isinstance(self.store, Path):
            shutil.rmtree(self.store, ignore_errors=True)
            shutil.copytree(self.copy, self.store)
            return
        s, p = self.schema, self.copy
        with self._connect() as raw:
            made = set(self._tables(raw, s)) - set(self.tables)  # since (the policies table, by `policy set`)
            script = ["BEGIN", "SET LOCAL session_replication_role = replica"]  # no foreign-key triggers
            script += [f'DROP TABLE "{s}"."{t}" CASCADE' for t in made]
            script += [f'DELETE FROM "{s}"."{t}"' for t in self.tables]
            script += [f'INSERT INTO "{s}"."{t}" OVERRIDING SYSTEM VALUE SELECT * FROM "{p}"."{t}"' for t in self.tables]
            script += [f"SELECT setval('\"{s}\".\"{n}\"', {last or 1}, {last is not None})" for n, last in self.sequences]
            raw.execute("; ".join([*script, "COMMIT"]))
