"""Reads never write: the database and its WAL are byte-identical after every read command,
and reads need no write lock (they run while a writer holds it)."""

import subprocess

import pytest

from core_helpers import AGENT, ALICE, as_, build_log_store, file_digests, op_count, paused_at_commit
from swarm import swarmctl_argv


def read_commands(sw, ids) -> list[tuple[tuple[str, ...], int]]:
    """Every read command, with the exit it must end with (7: a refusal, also read-only)."""
    repo = ("--repo", str(sw.store))
    return [
        ((*repo, "op", "log"), 0),
        ((*repo, "op", "log", "-n", "2", "--before", "5", "--reverse"), 0),
        ((*repo, "op", "log", "--after", "3", "--ref", "feature/x", "--actor", AGENT, "--kind", "ref_set"), 0),
        ((*repo, "op", "log", "--since", "2000-01-01", "--until", "2999-01-01"), 0),
        ((*repo, "op", "show", "6"), 0),
        ((*as_(sw, ALICE), "op", "show", "@"), 0),
        ((*as_(sw, AGENT), "op", "undo", "6", "--dry-run"), 0),
        ((*as_(sw, AGENT), "op", "undo", "1", "--dry-run"), 7),  # E_NOTHING_TO_UNDO
        ((*repo, "ref", "list"), 0),
        ((*repo, "ref", "list", "--prefix", "release/"), 0),
        ((*repo, "ref", "show", "main"), 0),
        ((*repo, "changeset", "show", ids["base"][:6]), 0),
        ((*repo, "changeset", "show", "main"), 0),
        ((*repo, "schema", "UndoReq"), 0),
        ((*repo, "-o", "table", "op", "log"), 0),
    ]


def test_reads_leave_the_store_byte_identical(sw):
    ids = build_log_store(sw)
    for command, exit in read_commands(sw, ids):
        before = (op_count(sw.store), file_digests(sw.store))
        ran = sw(*command)
        assert ran.exit == exit, ran.transcript()
        assert (op_count(sw.store), file_digests(sw.store)) == before, command


def test_reads_as_processes_leave_the_store_byte_identical(sw):
    ids = build_log_store(sw)
    before = file_digests(sw.store)
    for command, exit in read_commands(sw, ids)[:6]:
        assert sw.process(*command).exit == exit
    assert file_digests(sw.store) == before


def test_reads_need_no_write_lock(sw):
    """With a writer paused inside its transaction, every read still answers at once, from the
    last commit (SWARMCTL_LOCK_TIMEOUT=0: a read that wanted the lock would fail E_BUSY)."""
    ids = build_log_store(sw)
    with paused_at_commit(sw, *as_(sw, ALICE), "ref", "set", "main", ids["base"]):
        for command, exit in read_commands(sw, ids):
            ran = sw(*command, env={"SWARMCTL_LOCK_TIMEOUT": "0"})
            assert ran.exit == exit, ran.transcript()
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
