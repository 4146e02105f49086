"""Conventions people expect from gh and kubectl, the exceptions to "one envelope" (SPEC §1):

- bare `swarmctl` prints the help on stdout and exits 0, as `--help` does;
- `-q/--quiet`: nothing on stdout; a failure's code and message on one stderr line; the exit
  code unchanged;
- `-o jsonl`: a list result one record a line (paging keys dropped), any other result as its one
  result object on a line, a failure as its envelope's one line with its exit code.
"""

from __future__ import annotations

import json

import pytest

from core_helpers import AGENT, ALICE, build_golden_store


@pytest.fixture
def store(sw):
    build_golden_store(sw)
    return str(sw.store)


# --- bare swarmctl ---------------------------------------------------------------------------


def test_bare_swarmctl_prints_the_help_and_exits_0(sw):
    bare, helped = sw(), sw("--help")
    assert (bare.exit, bare.stderr) == (0, "")
    assert bare.stdout == helped.stdout and bare.stdout.startswith("Usage: swarmctl")
    process = sw.process()
    assert (process.exit, process.stdout) == (0, helped.stdout)


def test_a_group_without_its_command_is_still_bad_usage(sw):
    ran = sw("op")
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG"


# --- -q/--quiet ------------------------------------------------------------------------------


def test_quiet_success_prints_nothing(sw, store):
    for args in (("-q", "--repo", store, "op", "log"), ("--repo", store, "op", "log", "--quiet")):
        ran = sw(*args)
        assert (ran.exit, ran.stdout, ran.stderr) == (0, "", "")
    moved = sw("-q", "--repo", store, "--as", AGENT, "op", "undo", "6")
    assert (moved.exit, moved.stdout, moved.stderr) == (0, "", "")
    assert sw.ok("--repo", store, "op", "show", "6")["undone_by"] == 7  # it did act


def test_quiet_failure_is_one_stderr_line_and_keeps_its_exit_code(sw, store):
    sw.ok("--repo", store, "--as", AGENT, "op", "undo", "6")  # op 7: release/v1 back on the initial import
    sw.ok("--repo", store, "--as", ALICE, "ref", "set", "main", "release/v1")  # op 8 moves main
    ran = sw("-q", "--repo", store, "--as", AGENT, "op", "undo", "5")
    assert (ran.exit, ran.stdout) == (3, "")
    assert ran.stderr == "E_CAS_MISMATCH: cannot undo op 5: main moved since; nothing was written\n"
    missing = sw("-q", "--repo", store, "op", "show", "99")
    assert missing.exit == 4 and missing.stdout == "" and missing.stderr.startswith("E_NOT_FOUND: ")
    assert missing.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        ("op", "undo", "banana"),  # refused by the parser
        ("op", "log", "--frobnicate"),
        ("frobnicate",),
        ("changeset", "create", "-m", "x", "--meta", "novalue"),  # refused by the CLI before the tool
    ],
)
def test_quiet_bad_usage_is_one_stderr_line_and_exit_2(sw, store, args):
    ran = sw("-q", "--repo", store, "--as", AGENT, *args)
    assert (ran.exit, ran.stdout) == (2, "")
    assert ran.stderr.startswith("E_INVALID_ARG: ") and ran.stderr.count("\n") == 1, ran.stderr


# --- -o jsonl --------------------------------------------------------------------------------


def lines(ran) -> list:
    assert ran.stdout == "" or ran.stdout.endswith("\n")  # no records: nothing at all
    return [json.loads(line) for line in ran.stdout.splitlines()]


def test_jsonl_prints_a_list_one_record_a_line(sw, store):
    ops = sw.ok("--repo", store, "op", "log")["ops"]
    ran = sw("--repo", store, "-o", "jsonl", "op", "log")
    assert ran.exit == 0 and lines(ran) == ops
    assert ran.stdout.splitlines()[0] == json.dumps(ops[0], separators=(",", ":"), ensure_ascii=False)
    # Paging keys are dropped: -n pages.
    assert [op["op"] for op in lines(sw("--repo", store, "-o", "jsonl", "op", "log", "-n", "2"))] == [6, 5]
    refs = lines(sw("--repo", store, "ref", "list", "-o", "jsonl"))
    assert [r["name"] for r in refs] == ["main", "release/v1"]
    assert lines(sw("--repo", store, "-o", "jsonl", "workflow", "list")) == []
    env = sw("--repo", store, "op", "log", env={"SWARMCTL_OUTPUT": "jsonl"})
    assert lines(env) == ops


def test_jsonl_prints_any_other_result_as_its_one_line(sw, store):
    shown = sw("--repo", store, "-o", "jsonl", "op", "show", "6")
    assert shown.exit == 0 and lines(shown) == [sw.ok("--repo", store, "op", "show", "6")]
    via_call = sw("--repo", store, "-o", "jsonl", "call", "op_log", '{"limit": 3}')
    assert [op["op"] for op in lines(via_call)] == [6, 5, 4]


def test_jsonl_prints_a_failure_as_its_envelope_and_keeps_its_exit_code(sw, store):
    ran = sw("--repo", store, "-o", "jsonl", "op", "show", "99")
    assert ran.exit == 4
    (envelope,) = lines(ran)
    assert envelope["ok"] is False and envelope["error"]["code"] == "E_NOT_FOUND"


def test_jsonl_of_a_revert_dry_run_lists_the_ops_it_would_take_back(sw, store):
    ran = sw("--repo", store, "--as", ALICE, "-o", "jsonl", "op", "revert", "--actor", AGENT, "--dry-run")
    assert ran.exit == 0 and lines(ran) == [3, 5, 6]


def test_jsonl_of_a_revert_done_is_its_result_in_one_line(sw, store):
    """Done (or replayed), a revert's result names its op: split into the reverted op numbers,
    a script never learned which op to undo, nor that a replay wrote nothing."""
    done = sw("--repo", store, "--as", ALICE, "-o", "jsonl", "op", "revert", "--actor", AGENT)
    again = sw("--repo", store, "--as", ALICE, "-o", "jsonl", "op", "revert", "--actor", AGENT)
    assert [(r["reverted"], r["op"], r["already_applied"]) for r in (*lines(done), *lines(again))] == [
        ([3, 5, 6], 7, False), ([3, 5, 6], 7, True)]
