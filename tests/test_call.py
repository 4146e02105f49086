"""`swarmctl call TOOL [JSON | -]`: any tool with JSON arguments, through the path MCP takes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core_helpers import AGENT, ALICE, build_golden_store
from swarmctl import registry


def test_call_runs_a_tool_with_json_arguments(sw):
    build_golden_store(sw)
    ran = sw("--repo", str(sw.store), "call", "op_log", '{"limit": 2, "actor": "agent/worker-17"}')
    assert ran.exit == 0
    assert ran.envelope["op"] == "op_log"
    assert [op["op"] for op in ran.result["ops"]] == [6, 5]


def test_call_reads_the_arguments_from_stdin_with_a_dash(sw):
    build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "--as", AGENT, "call", "undo", "-", input='{"op": 6}\n')
    assert ran.exit == 0, ran.stderr
    assert ran.result == {**ran.result, "undone": 6, "op": 7, "already_applied": False}


def test_call_without_arguments_passes_an_empty_object(sw):
    build_golden_store(sw)
    assert sw.ok("--repo", str(sw.store), "call", "ref_list")["refs"][0]["name"] == "main"
    missing = sw("--repo", str(sw.store), "call", "ref_show")
    assert missing.exit == 2 and missing.error["details"]["errors"][0]["field"] == "name"


def test_an_unknown_tool_is_not_found_and_lists_the_tools(sw):
    ran = sw("call", "undoo", '{"op": 6}')
    assert ran.exit == 4
    assert ran.envelope["op"] is None
    assert ran.error["code"] == "E_NOT_FOUND"
    assert ran.error["details"] == {"tool": "undoo", "tools": sorted(t.name for t in registry.tools())}


def test_bad_json_and_a_field_named_twice_are_invalid_and_write_nothing(sw):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store), "--as", AGENT)
    bad = sw(*repo, "call", "undo", '{"op": 6')
    assert bad.exit == 2 and bad.error["code"] == "E_INVALID_ARG" and "not valid JSON" in bad.error["message"]
    twice = sw(*repo, "call", "undo", '{"op": 6, "op": 4}')
    assert twice.exit == 2 and twice.error["details"] == {"fields": ["op"]}
    nested = sw(*repo, "call", "changeset_create", '{"message": "m", "metadata": {"k": "a", "k": "b"}}')
    assert nested.exit == 2 and nested.error["details"] == {"fields": ["k"]}
    not_an_object = sw(*repo, "call", "undo", "[6]")
    assert not_an_object.exit == 2 and not_an_object.error["code"] == "E_INVALID_ARG"
    assert sw.ok(*repo, "op", "log", "-n", "1")["ops"][0]["op"] == 6  # nothing was written


def test_call_also_runs_the_tools_mcp_does_not_serve(sw):
    made = sw.ok("--as", ALICE, "call", "init", json.dumps({"path": "made"}))
    assert made["op"] == 1 and made["repo"] == str((sw.tmp / "made").resolve())


def test_op_log_imports_neither_the_doors_nor_other_areas(sw):
    """The doors cost `swarmctl op log` nothing: no SDK, no pydantic, no other tool area."""
    build_golden_store(sw)
    probe = (
        "import sys, io, contextlib\n"
        "from swarmctl.cli import run\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert run(['--repo', {str(sw.store)!r}, 'op', 'log']) == 0\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    for module in ("mcp", "mcp_types", "anyio", "pydantic", "rich", "swarmctl.mcp", "swarmctl.calls", "swarmctl.schemas",
                   "swarmctl.tools.ref", "swarmctl.tools.changeset", "swarmctl.gen"):
        assert module not in loaded, f"`swarmctl op log` imported {module}"
    assert "swarmctl.tools.op" in loaded  # the probe did run op log


def test_call_of_one_tool_imports_only_its_area(sw):
    """`swarmctl call ref_set` (and each line of `call --lines`) builds the types of the ref
    area only: not workflows', transactions' or the other areas'."""
    build_golden_store(sw)
    probe = (
        "import sys, io, contextlib, json\n"
        "from swarmctl.cli import run\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    status = run(['--repo', {str(sw.store)!r}, '--as', {AGENT!r}, 'call', 'ref_set', sys.argv[1]])\n"
        "print(json.dumps({'status': status, 'out': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    arguments = json.dumps({"name": "scratch", "target": "main"})
    ran = json.loads(subprocess.run([sys.executable, "-c", probe, arguments], capture_output=True, text=True, check=True).stdout)
    assert ran["status"] == 0 and json.loads(ran["out"])["ok"], ran["out"]
    loaded = set(ran["modules"])
    assert "swarmctl.tools.ref" in loaded
    for module in ("swarmctl.tools.workflow", "swarmctl.tools.tx", "swarmctl.tools.op", "swarmctl.tools.token",
                   "swarmctl.tools.policy", "swarmctl.tools.store", "swarmctl.tools.schema", "swarmctl.mcp"):
        assert module not in loaded, f"`swarmctl call ref_set` imported {module}"


def test_the_doors_find_every_tool_by_name_as_the_registry_lists_it():
    """registry.Named looks a name up in its first word's area first; it finds each tool the
    registry lists, the same entry, and no other name."""
    named = registry.Named()
    assert sorted(named) == sorted(registry.by_name()) and len(named) == len(registry.tools())
    for name, tool in registry.by_name().items():
        assert named[name] is tool and name in named
    for absent in ("ref", "ref_", "ref_nope", "undo_", "op_logs", "", "workflow_runs"):
        assert absent not in named and named.get(absent) is None


# --- `swarmctl call --lines`: a batch of calls on one open store ------------------------------


def lines(*calls: object) -> str:
    return "".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in calls)


def run_lines(sw, text: str, *flags: str) -> tuple[int, list[dict]]:
    ran = sw.process("--repo", str(sw.store), "--as", AGENT, "call", "--lines", *flags, input=text)
    assert ran.stderr == "", ran.stderr
    return ran.exit, [json.loads(line) for line in ran.stdout.splitlines()]


def test_call_lines_prints_one_envelope_per_call_each_its_own_op(sw):
    ids = build_golden_store(sw)
    code, out = run_lines(sw, lines(
        {"tool": "ref_set", "arguments": {"name": "main", "target": ids["base"][:8]}, "id": 1},
        "",  # blank lines are skipped
        {"tool": "ref_show", "arguments": {"name": "no/such/ref"}, "id": "second"},
        {"tool": "ref_set", "arguments": {"name": "main", "target": "release/v1"}, "id": [3]},
        {"tool": "undo", "arguments": {"op": 99}},
        {"tool": "op_log", "arguments": {"limit": 2}, "id": None},
    ))
    assert [(e["op"], e["ok"]) for e in out] == [
        ("ref_set", True), ("ref_show", False), ("ref_set", True), ("undo", False), ("op_log", True)
    ]
    assert [e["meta"].get("id", "absent") for e in out] == [1, "second", [3], "absent", None]
    assert list(out[0]["meta"]) == ["repo", "elapsed_ms", "resolved", "auth", "id"]
    assert [out[0]["result"]["op"], out[2]["result"]["op"]] == [7, 8]  # each call its own op
    assert [op["op"] for op in out[4]["result"]["ops"]] == [8, 7]
    assert code == 4  # the first failure's exit status (E_NOT_FOUND), though later calls ran


def test_call_lines_gives_the_envelope_call_gives(sw):
    build_golden_store(sw)
    one = sw.process("--repo", str(sw.store), "call", "op_show", '{"op": 6}').envelope
    _, (batched,) = run_lines(sw, lines({"tool": "op_show", "arguments": {"op": 6}, "id": 9}))
    assert batched["meta"].pop("id") == 9
    assert {**batched, "meta": {**batched["meta"], "elapsed_ms": 0}} == {**one, "meta": {**one["meta"], "elapsed_ms": 0, "auth": "trust"}}


def test_call_lines_stop_on_error_runs_nothing_after_the_first_failure(sw):
    ids = build_golden_store(sw)
    batch = lines(
        {"tool": "ref_set", "arguments": {"name": "main", "target": ids["base"][:8], "expect": ids["base"][:8]}},
        {"tool": "ref_set", "arguments": {"name": "release/v2", "target": "main", "create": True}},
    )
    code, out = run_lines(sw, batch, "--stop-on-error")
    assert (code, [e["error"]["code"] for e in out]) == (3, ["E_CAS_MISMATCH"])
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 6  # the second never ran
    code, out = run_lines(sw, batch)
    assert (code, [e["ok"] for e in out]) == (3, [False, True])


def test_call_lines_all_succeeding_exit_0(sw):
    build_golden_store(sw)
    code, out = run_lines(sw, lines(*({"tool": "ref_list", "id": i} for i in range(3))))
    assert code == 0 and [e["meta"]["id"] for e in out] == [0, 1, 2]


def test_call_lines_refuses_a_line_that_is_not_a_call_and_runs_nothing_for_it(sw):
    build_golden_store(sw)
    code, out = run_lines(sw, lines(
        "not json",
        "[1, 2]",
        {"tool": "ref_set", "argument": {"name": "x", "target": "main"}, "id": "typo"},
        {"tool": 7},
        '{"tool": "ref_set", "arguments": {"name": "x", "name": "y", "target": "main"}}',
        {"tool": "ref_sett", "arguments": {}},
    ))
    assert [e["error"]["code"] for e in out] == ["E_INVALID_ARG"] * 5 + ["E_NOT_FOUND"]
    assert out[2]["error"]["details"]["fields"] == ["argument"] and out[2]["meta"]["id"] == "typo"
    assert out[4]["error"]["details"]["fields"] == ["name"]
    assert code == 2
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 6


def test_call_lines_with_a_tool_or_stop_on_error_alone_is_bad_usage(sw):
    for args in (("call", "--lines", "ref_list"), ("call", "--stop-on-error", "ref_list"), ("call",)):
        ran = sw(*args)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), args
        assert "usage" in ran.error["details"]


def test_open_stores_keep_one_connection_per_store_until_the_file_is_replaced(sw, tmp_path):
    """The MCP server and `call --lines` borrow a store from OpenStores for each call."""
    import shutil

    from swarmctl.context import Context, OpenStores
    from swarmctl.envelope import SwarmError

    build_golden_store(sw)
    stores = OpenStores()
    try:
        first = Context(repo=str(sw.store), stores=stores)
        held = first.store()
        first.close()  # a borrowed store stays open
        assert held.conn.execute("SELECT COUNT(*) FROM ops").fetchone() == (6,)
        assert Context(repo=str(sw.store), stores=stores).store() is held
        missing = Context(repo=str(tmp_path / "none"), stores=stores)
        with pytest.raises(SwarmError):
            missing.store()
        shutil.rmtree(sw.store)
        sw.ok("--as", ALICE, "init", str(sw.store))  # another store at the same path
        again = Context(repo=str(sw.store), stores=stores).store()
        assert again is not held and again.conn.execute("SELECT COUNT(*) FROM ops").fetchone() == (1,)
    finally:
        stores.close()


def test_call_lines_checks_the_newest_op_again_once_another_process_wrote(sw):
    """A door skips re-checking the newest op's hash while that op is its own last write and no
    other connection has committed since (SQLite's data_version); an edit made in between by
    anyone else is still refused (E_STORE_CORRUPT), as on a fresh process."""
    import sqlite3

    from swarm import swarmctl_argv

    ids = build_golden_store(sw)
    door = subprocess.Popen(
        [*swarmctl_argv(), "--repo", str(sw.store), "--as", AGENT, "call", "--lines"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sw.env,
    )

    def call(name: str, target: str) -> dict:
        door.stdin.write(lines({"tool": "ref_set", "arguments": {"name": name, "target": target}}))
        door.stdin.flush()
        return json.loads(door.stdout.readline())

    try:
        assert call("a", ids["base"])["result"]["op"] == 7
        assert call("b", ids["base"])["result"]["op"] == 8  # its own op: not hashed again
        with sqlite3.connect(sw.store / "swarmops.db") as db:  # another process edits op 8
            db.execute("UPDATE ops SET description = 'edited' WHERE op = 8")
        refused = call("c", ids["base"])
        assert (refused["ok"], refused["error"]["code"]) == (False, "E_STORE_CORRUPT"), refused
        assert "hash_chain" in [p["code"] for p in refused["error"]["details"]["problems"]]
    finally:
        door.stdin.close()
        door.wait(timeout=120)
        door.stdout.close()
        door.stderr.close()


def test_call_lines_reads_the_newest_op_again_once_another_process_appended_one(sw):
    """A door keeps the newest op (its number, time and hash) from its own last write, and reads
    it again once another connection has committed: an op another process appends between two
    of the door's writes is the one the door's next op follows, in the hash chain and in time,
    and a fence another process sets in between is obeyed."""
    from core_helpers import problems
    from swarm import swarmctl_argv

    ids = build_golden_store(sw)
    door = subprocess.Popen(
        [*swarmctl_argv(), "--repo", str(sw.store), "--as", "agent/worker-17", "call", "--lines"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sw.env,
    )

    def call(name: str) -> dict:
        door.stdin.write(lines({"tool": "ref_set", "arguments": {"name": name, "target": ids["base"]}}))
        door.stdin.flush()
        return json.loads(door.stdout.readline())

    try:
        assert call("a")["result"]["op"] == 7
        assert call("b")["result"]["op"] == 8  # the door's own newest op: not read again
        other = sw.process("--repo", str(sw.store), "--as", "human/alice", "ref", "set", "c", ids["base"])
        assert (other.exit, other.result["op"]) == (0, 9)
        assert call("d")["result"]["op"] == 10  # follows op 9, which the door did not write
        assert problems(sw.store) == []
        ops = sw.ok("--repo", str(sw.store), "op", "log", "-n", "4")["ops"]
        assert [o["op"] for o in ops] == [10, 9, 8, 7]
        assert ops[0]["at"] >= ops[1]["at"]
        copied = sw.process("--as", "human/alice", "store", "copy", str(sw.store), str(sw.tmp / "copy"), "--fence")
        assert copied.exit == 0, copied.stdout
        fenced = call("e")
        assert (fenced["ok"], fenced["error"]["code"]) == (False, "E_STATE"), fenced
    finally:
        door.stdin.close()
        door.wait(timeout=120)
        door.stdout.close()
        door.stderr.close()


def test_a_door_takes_the_time_of_an_op_another_connection_appended_since_its_last_write(sw, monkeypatch):
    """The newest op a door remembers from its own last write is read again once another
    connection has committed: an op written since under a clock a minute ahead (within
    SWARMCTL_CLOCK_SKEW_S) pins the door's next op to its time, as on a fresh process."""
    from swarm import SUBPROCESS
    from swarmctl import names
    from swarmctl.calls import call_line
    from swarmctl.context import Context, OpenStores

    if SUBPROCESS:
        pytest.skip("the clock is set in this process")
    ids = build_golden_store(sw)
    clock = {"now": "2026-11-30T12:00:00.000Z"}
    monkeypatch.setattr(names, "now", lambda: clock["now"])
    stores, tools = OpenStores(), registry.by_name()

    def door(name: str) -> dict:
        ctx = Context(repo=str(sw.store), actor="agent/worker-17", stores=stores)
        return call_line(json.dumps({"tool": "ref_set", "arguments": {"name": name, "target": ids["base"]}}), ctx, tools)

    try:
        assert door("a")["result"]["op"] == 7
        clock["now"] = "2026-11-30T12:01:00.000Z"  # another writer, its clock a minute ahead
        sw.ok("--repo", str(sw.store), "--as", "human/alice", "ref", "set", "b", ids["base"])
        clock["now"] = "2026-11-30T12:00:01.000Z"
        assert door("c")["result"]["op"] == 9
    finally:
        stores.close()
    ops = sw.ok("--repo", str(sw.store), "op", "log", "-n", "3")["ops"]
    assert [(o["op"], o["at"]) for o in ops] == [
        (9, "2026-11-30T12:01:00.000Z"), (8, "2026-11-30T12:01:00.000Z"), (7, "2026-11-30T12:00:00.000Z")
    ]
