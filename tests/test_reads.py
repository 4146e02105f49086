"""Reads never write: the database and its WAL are byte-identical after every read command,
and reads need no write lock (they run while a writer holds it)."""

import subprocess

import pytest

from core_helpers import AGENT, ALICE, as_, build_log_store, file_digests, op_count, paused_at_commit
from conftest import swarmctl_argv


def read_commands(sw, ids) -> list[tuple[str, ...]]:
    repo = ("--repo", str(sw.store))
    return [
        (*repo, "op", "log"),
        (*repo, "op", "log", "-n", "2", "--before", "5", "--reverse"),
        (*repo, "op", "log", "--after", "3", "--ref", "feature/x", "--actor", AGENT, "--kind", "ref_set"),
        (*repo, "op", "log", "--since", "2000-01-01", "--until", "2999-01-01"),
        (*repo, "op", "show", "6"),
        (*as_(sw, ALICE), "op", "show", "@"),
        (*as_(sw, AGENT), "op", "undo", "6", "--dry-run"),
        (*as_(sw, AGENT), "op", "undo", "1", "--dry-run"),  # an error, also read-only
        (*repo, "ref", "list"),
        (*repo, "ref", "list", "--prefix", "release/"),
        (*repo, "ref", "show", "main"),
        (*repo, "changeset", "show", ids["base"][:6]),
        (*repo, "changeset", "show", "main"),
        (*repo, "schema", "UndoReq"),
        (*repo, "-o", "table", "op", "log"),
    ]


def test_reads_leave_the_store_byte_identical(sw):
    ids = build_log_store(sw)
    for command in read_commands(sw, ids):
        before = (op_count(sw.store), file_digests(sw.store))
        ran = sw(*command)
        assert ran.exit in (0, 7), ran.transcript()
        assert (op_count(sw.store), file_digests(sw.store)) == before, command


def test_reads_as_processes_leave_the_store_byte_identical(sw):
    ids = build_log_store(sw)
    before = file_digests(sw.store)
    for command in read_commands(sw, ids)[:6]:
        assert sw.process(*command).exit == 0
    assert file_digests(sw.store) == before


def test_reads_need_no_write_lock(sw):
    """With a writer paused inside its transaction, every read still answers at once, from the
    last commit (SWARMCTL_LOCK_TIMEOUT=0: a read that wanted the lock would fail E_BUSY)."""
    ids = build_log_store(sw)
    with paused_at_commit(sw, *as_(sw, ALICE), "ref", "set", "main", ids["base"]):
        for command in read_commands(sw, ids):
            ran = sw(*command, env={"SWARMCTL_LOCK_TIMEOUT": "0"})
            assert ran.exit in (0, 7), ran.transcript()
        assert sw.ok("--repo", str(sw.store), "ref", "show", "main")["target"] == ids["fix"]


@pytest.mark.parametrize("command", [("op", "log"), ("ref", "list"), ("op", "show", "1")])
def test_a_closed_pipe_ends_quietly(sw, command):
    """`swarmctl op log | true`: the reader is gone before the envelope is written."""
    build_log_store(sw)
    proc = subprocess.run(
        f"{' '.join(swarmctl_argv())} --repo {sw.store} {' '.join(command)} | (exec 0<&-; sleep 0.5)",
        shell=True, capture_output=True, text=True, env=sw.env, cwd=sw.tmp, executable="/bin/bash",
    )
    assert proc.stderr == "" and proc.stdout == ""
