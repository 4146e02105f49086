"""Tables for people: they fit the terminal, speak local time, and take durations.

- At any width from 40 (COLUMNS), no line is wider than the terminal; op, actor and kind stay
  whole; long text is cut with `…` while the JSON keeps everything.
- Times are shown in the local time zone (TZ), short; on a terminal, the last 24 hours as
  relative times. The JSON stays RFC 3339 UTC.
- `--since`/`--until` take durations before now (90s, 15m, 2h, 7d) at every door.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from core_helpers import AGENT, build_golden_store
from mcp_client import McpClient
from swarmctl.cli.tables import Fit, when
from test_cli_output import ANSI, run_on_terminal

WIDTHS = [40, 41, 50, 60, 72, 80, 100, 120, 160]


@pytest.fixture
def store(sw):
    build_golden_store(sw)
    sw.ok("--repo", str(sw.store), "--as", AGENT, "op", "undo", "6")  # a description with "(undone by 7)"
    return str(sw.store)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_op_log_fits_the_terminal_and_keeps_op_actor_and_kind_whole(sw, store, width):
    ops = sw.ok("--repo", store, "op", "log")["ops"]
    ran = sw("--repo", store, "-o", "table", "op", "log", env={"COLUMNS": str(width), "TZ": "UTC"})
    assert ran.exit == 0
    lines = ran.stdout.splitlines()
    assert max(len(line) for line in lines) <= width, "\n" + ran.stdout
    rows = [line for line in lines if re.match(r"^[│ ]*\d+ ", line)]
    assert len(rows) == len(ops)
    for op, row in zip(ops, rows):
        cells = [cell.strip() for cell in re.split(r"│|\s{2,}", row.strip("│ ")) if cell.strip()]
        assert cells[0] == str(op["op"])
        assert op["actor"] in cells and op["kind"] in cells, row


@pytest.mark.parametrize("width", [40, 80])
def test_an_actor_too_long_for_the_terminal_is_cut_and_the_op_stays(sw, width):
    """Where op, actor and kind cannot all fit (an actor of 76 characters), the op column went
    to nothing (Rich shrank it) and actor and kind were cut: an op log without op numbers. Now
    the op stays whole, and the widest of the others is cut."""
    actor = "agent/" + "nightly-release-bot-" * 3 + "x" * 10
    sw.ok("--as", actor, "init", str(sw.store))
    sw.ok("--repo", str(sw.store), "--as", actor, "changeset", "create", "-m", "hi", "--ref", "main")
    ran = sw("--repo", str(sw.store), "-o", "table", "op", "log", env={"COLUMNS": str(width), "TZ": "UTC", "NO_COLOR": "1"})
    lines = ran.stdout.splitlines()
    assert ran.exit == 0 and max(len(line) for line in lines) <= width, "\n" + ran.stdout
    assert re.search(r"^[│ ]*op\b", lines[0]), ran.stdout
    rows = [line for line in lines if re.match(r"^[│ ]*2 ", line)]
    assert rows and "agent/nightly" in rows[0] and "…" in rows[0], ran.stdout
    # `op show` shows the op in full, a field a line: the actor folded over lines, never cut.
    shown = sw("--repo", str(sw.store), "-o", "table", "op", "show", "2", env={"COLUMNS": str(width), "TZ": "UTC", "NO_COLOR": "1"})
    lines = shown.stdout.splitlines()
    assert shown.exit == 0 and max(len(line) for line in lines) <= width, "\n" + shown.stdout
    assert re.match(r"op +2 *$", lines[0]) and "…" not in shown.stdout, shown.stdout
    assert actor in "".join(line[len("description  "):].strip() for line in lines), shown.stdout


def test_op_show_shows_the_op_in_full(sw, store):
    """`-o table op show` printed the op log's one-row table: the description and the ids cut,
    no hash, no `undone by` of its own. It shows every field a line, ids whole."""
    op = sw.ok("--repo", store, "op", "show", "6")
    ran = sw("--repo", store, "-o", "table", "op", "show", "6", env={"COLUMNS": "200", "TZ": "UTC", "NO_COLOR": "1"})
    fields = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in ran.stdout.splitlines() if line.strip()}
    assert list(fields) == ["op", "when", "actor", "kind", "description", "undoes", "undone by", "ref moves", "created", "hash"]
    assert (fields["op"], fields["actor"], fields["description"], fields["hash"]) == ("6", op["actor"], op["description"], op["hash"])
    assert fields["undone by"] == str(op["undone_by"]) and fields["undoes"] == "-"
    move = op["ref_moves"][0]
    assert fields["ref moves"] == f"{move['name']}: {move['old']} → {move['new']}", ran.stdout


def test_long_text_is_cut_with_an_ellipsis_and_the_json_keeps_it(sw, store):
    narrow = sw("--repo", store, "-o", "table", "op", "log", env={"COLUMNS": "60"}).stdout
    assert "…" in narrow and "Fix flaky deploy check" not in narrow
    wide = sw("--repo", store, "-o", "table", "op", "log", env={"COLUMNS": "200"}).stdout
    assert "…" not in wide and "Fix flaky deploy check" in wide and "(undone by 7)" in wide
    full = sw("--repo", store, "op", "log").stdout
    assert "Fix flaky deploy check" in full


def cells(line: str) -> int:
    """Terminal cells of a line, measured apart from swarmctl: East Asian wide and fullwidth two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


@pytest.mark.parametrize("width", [40, 120])
def test_a_list_of_more_than_300_refs_is_printed_plain_and_fits(sw, width):
    """`ref list -o table` of 8,700 refs took 3.6 s through Rich; above PLAIN_ROWS refs it is
    plain columns, as the op log is: every ref a line, fitted to the terminal."""
    sw.ok("--as", AGENT, "init", str(sw.store))
    sw.ok("--repo", str(sw.store), "--as", AGENT, "changeset", "create", "-m", "base", "--ref", "main")
    names = [f"feature/{'long-name-' * (i % 7)}{i}" for i in range(301)]
    calls = "".join('{"tool": "ref_set", "arguments": {"name": "%s", "target": "main"}}\n' % name for name in names)
    assert sw.process("--repo", str(sw.store), "--as", AGENT, "call", "--lines", input=calls).exit == 0
    ran = sw("--repo", str(sw.store), "-o", "table", "ref", "list", env={"COLUMNS": str(width)})
    lines = ran.stdout.splitlines()
    assert ran.exit == 0 and "┃" not in ran.stdout and lines[0].split()[:2] == ["ref", "changeset"], ran.stdout[:500]
    assert len(lines) == 2 + 302 and max(cells(line) for line in lines) <= width
    shown = [line.split()[0] for line in lines[2:]]
    assert all(name in names + ["main"] or "…" in name for name in shown), shown  # whole, or cut
    assert {n for n in names + ["main"] if len(n) <= width - 40} <= set(shown)  # a name that fits is whole
    assert any("…" in name for name in shown) == (width == 40)
    # Cut in the middle, names that share a long beginning still read apart (cut at the end,
    # every `feature/long-name-long-name-...` row read `feature/long-na…`).
    assert len(set(shown)) == len(shown), [name for name in shown if shown.count(name) > 1][:5]


@pytest.mark.parametrize("rows", [1, 301])  # Rich's table, and the plain one above PLAIN_ROWS
@pytest.mark.parametrize("width", [40, 80, 120, 250])
def test_a_table_of_wide_characters_fits_the_terminal_by_cells_and_cuts_only_what_must_be_cut(sw, rows, width):
    """Widths were counted in characters: CJK text (two cells each) was cut with room to spare,
    and the plain table (above 300 rows) ignored COLUMNS. Both now measure cells and fit."""
    message = "中文字符测试和日本語テキストが混在する説明文"
    sw.ok("--as", AGENT, "init", str(sw.store))
    calls = "".join('{"tool": "changeset_create", "arguments": {"message": "%s %d", "ref": "分支/功能"}}\n' % (message, i) for i in range(rows))
    assert sw.process("--repo", str(sw.store), "--as", AGENT, "call", "--lines", input=calls).exit == 0
    ran = sw("--repo", str(sw.store), "-o", "table", "op", "log", "-n", str(rows + 1), env={"COLUMNS": str(width), "TZ": "UTC"})
    lines = ran.stdout.splitlines()
    assert ran.exit == 0 and max(cells(line) for line in lines) <= width, "\n" + ran.stdout[:3000]
    if width == 250:  # room for all of it: nothing cut (but the plain table's descriptions, at 60 cells)
        row = next(line for line in lines if re.match(rf"^[│ ]*{rows + 1} ", line))
        assert re.search(r"分支/功能: (-|[0-9a-f]{12}) → [0-9a-f]{12}", row), row
        assert (f"{message} {rows - 1}" in row and "…" not in row) if rows == 1 else row.count("…") == 1, row


@pytest.mark.parametrize("rows", [1, 301])  # Rich's table, and the plain one above PLAIN_ROWS
def test_that_an_op_was_undone_stays_in_sight_where_its_description_is_cut(sw, rows):
    """The mark was put after the description, which is what a table cuts: at 120 columns and
    at 150, no undone op of a long message showed it. It comes first now."""
    sw.ok("--as", AGENT, "init", str(sw.store))
    calls = "".join('{"tool": "changeset_create", "arguments": {"message": "%s %d", "ref": "main"}}\n' % ("long " * 30, i) for i in range(rows))
    assert sw.process("--repo", str(sw.store), "--as", AGENT, "call", "--lines", input=calls).exit == 0
    sw.ok("--repo", str(sw.store), "--as", AGENT, "op", "undo", str(rows + 1))
    for width in (120, 150):
        ran = sw("--repo", str(sw.store), "-o", "table", "op", "log", "-n", str(rows + 2), env={"COLUMNS": str(width), "TZ": "UTC"})
        row = next(line for line in ran.stdout.splitlines() if re.match(rf"^[│ ]*{rows + 1} ", line))
        assert f"(undone by {rows + 2})" in row and "…" in row, ran.stdout[-3000:]


@pytest.mark.parametrize("width", [40, 60, 80])
@pytest.mark.parametrize(
    "args",
    [("ref", "list"), ("op", "show", "5"), ("tx", "status"), ("workflow", "list")],
)
def test_other_tables_fit_too(sw, store, width, args):
    ran = sw("--repo", store, "--as", AGENT, "-o", "table", *args, env={"COLUMNS": str(width)})
    assert ran.exit == 0, ran.stdout + ran.stderr
    assert max(len(line) for line in ran.stdout.splitlines() or [""]) <= width, "\n" + ran.stdout


def test_workflow_list_keeps_the_id_and_the_state_whole_at_any_width(sw, store):
    """At 40 columns every column of `workflow list` was folded a character a line."""
    (sw.tmp / "flow.toml").write_text(
        'name = "a-workflow-whose-name-is-longer-than-the-terminal-is-wide"\n'
        '[[step]]\nname = "s"\nref_set = { name = "x", to = "main" }\n'
    )
    wf = sw.ok("--repo", store, "--as", AGENT, "workflow", "run", "flow.toml")["workflow"]["id"]
    for width in (40, 60, 80, 120, 160):
        ran = sw("--repo", store, "-o", "table", "workflow", "list", env={"COLUMNS": str(width), "TZ": "UTC"})
        lines = ran.stdout.splitlines()
        assert ran.exit == 0 and max(map(len, lines)) <= width, "\n" + ran.stdout
        (row,) = [line for line in lines if wf in line]
        assert "completed" in row, ran.stdout
        assert len(lines) <= 5, ran.stdout  # a row a workflow: nothing folded
        # Who made it: whole or not shown (it was cut to `agent/w…` while the name took the room).
        assert AGENT in row or AGENT[:5] not in row, ran.stdout
        assert AGENT in row or width < 120, ran.stdout
        # Its status: the step's kind and status whole (they were folded mid-word: `ref_se`, `t`).
        status = sw("--repo", store, "-o", "table", "workflow", "status", wf, env={"COLUMNS": str(width)})
        boxed = [line for line in status.stdout.splitlines() if line[:1] in "┏┃┡│└"]  # the heading and `next`: whole
        assert status.exit == 0 and boxed and max(map(len, boxed)) <= width, "\n" + status.stdout
        (step,) = [line for line in status.stdout.splitlines() if re.match(r"^[│ ]*1 ", line)]
        assert "success" in step and ("ref_set" in step or width < 60), status.stdout


def test_token_list_is_a_table_a_row_a_token_with_its_id_and_actor_whole(sw, store):
    """`token list -o table` printed each token as a block of `field: value` lines."""
    kept = sw.ok("--repo", store, "--as", AGENT, "token", "create", "agent/reader-with-a-long-name", "--read-only")
    gone = sw.ok("--repo", store, "--as", AGENT, "token", "create", "agent/w2")
    sw.ok("--repo", store, "--as", AGENT, "token", "revoke", str(gone["id"]))
    for width in (40, 80, 160):
        ran = sw("--repo", store, "-o", "table", "token", "list", env={"COLUMNS": str(width), "TZ": "UTC"})
        assert ran.exit == 0 and max(map(len, ran.stdout.splitlines())) <= width, "\n" + ran.stdout
        assert kept["token"] not in ran.stdout and gone["token"] not in ran.stdout
        rows = {int(m.group(1)): line for line in ran.stdout.splitlines() if (m := re.match(r"^[│ ]*(\d+) ", line))}
        assert set(rows) == {kept["id"], gone["id"]}, ran.stdout
        assert "agent/reader-with-a-long-name" in rows[kept["id"]] and "agent/w2" in rows[gone["id"]]
        if width >= 80:  # at 40, only the id and the actor fit
            revoked_at = sw.ok("--repo", store, "token", "list")["tokens"][1]["revoked_at"]
            assert revoked_at[:10] + " " + revoked_at[11:19] in rows[gone["id"]], ran.stdout
    assert "read-only" in rows[kept["id"]] and "read-write" in rows[gone["id"]]
    assert "created by" in ran.stdout


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_tables_show_short_local_times_and_the_json_stays_utc(sw, store, zone):
    op = sw.ok("--repo", store, "op", "show", "6")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", op["at"])
    local = datetime.fromisoformat(op["at"].replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    ran = sw("--repo", store, "-o", "table", "op", "log", env={"TZ": zone, "COLUMNS": "160"})
    row = next(line for line in ran.stdout.splitlines() if re.match(r"^│ 6 ", line))
    assert local.strftime("%Y-%m-%d %H:%M:%S") in row
    assert "T" not in row.split("│")[2] and "Z" not in row.split("│")[2]


def test_every_table_shows_times_as_the_op_log_does(sw, store):
    """`changeset show`, `ref show`, `store check` (its head), `token list` printed the JSON's
    RFC 3339 UTC time in a table that promised local short times."""
    sw.ok("--repo", store, "--as", AGENT, "token", "create", "agent/t1")
    ref = sw.ok("--repo", store, "ref", "show", "main")
    local = datetime.fromisoformat(ref["at"].replace("Z", "+00:00")).astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M:%S")
    for args in (("changeset", "show", "main"), ("ref", "show", "main"), ("store", "check"), ("token", "list")):
        ran = sw("--repo", store, "-o", "table", *args, env={"TZ": "Asia/Tokyo", "COLUMNS": "200", "NO_COLOR": "1"})
        assert ran.exit == 0 and not re.search(r"\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ran.stdout), (args, ran.stdout)
        if args[0] in ("changeset", "ref"):
            assert local in ran.stdout, ran.stdout


def test_on_a_terminal_the_last_day_is_relative(sw, store):
    env = {**sw.env, "COLUMNS": "160", "TZ": "UTC"}
    status, out, _ = run_on_terminal(["--repo", store, "-o", "table", "op", "log"], env, sw.tmp)
    assert status == 0
    assert re.search(r"│ 6 +│ \d+ (s|min) ago +│ agent/worker-17", ANSI.sub("", out)), out
    piped = sw.process("--repo", store, "-o", "table", "op", "log", env={"COLUMNS": "160"}).stdout
    assert " ago " not in piped  # not in a pipe or a file


@pytest.mark.parametrize(
    "at, shown",
    [
        ("2026-11-30T03:20:50.000Z", "6 s ago"),
        ("2026-11-30T03:17:56.000Z", "3 min ago"),
        ("2026-11-29T05:20:56.123Z", "22 h ago"),
        ("2026-11-29T03:20:56.123Z", "2026-11-29 03:20:56"),  # a day ago: the time itself
        ("2026-11-30T03:30:00.000Z", "2026-11-30 03:30:00"),  # a clock ahead: the time itself
    ],
)
def test_relative_times(at, shown, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    import time

    time.tzset()
    now = datetime(2026, 11, 30, 3, 20, 56, 123000, tzinfo=timezone.utc)
    assert when(at, now=now, relative=True) == shown
    assert when(at, now=now, relative=False) == datetime.fromisoformat(at[:-1]).strftime("%Y-%m-%d %H:%M:%S")


def test_the_widths_give_what_matters_most_first():
    columns = [("op", 2, "keep"), ("when", 19, "whole"), ("actor", 15, "keep"), ("kind", 16, "keep"),
               ("description", 50, "cut"), ("ref moves", 40, "cut")]
    drop = ["ref moves", "when", "description"]
    for width in range(40, 200):
        fit = Fit(width, columns, drop, least={"ref moves": 24})
        used = sum(fit.widths.values()) + Fit.overhead(len(fit.widths), fit.bordered)
        assert used <= width and {"op", "actor", "kind"} <= set(fit.widths)
        assert fit.widths["op"] == 2 and fit.widths["actor"] == 15 and fit.widths["kind"] == 16
    assert Fit(200, columns, drop).widths == {name: natural for name, natural, _ in columns}


# --- durations, at every door ----------------------------------------------------------------


def test_since_and_until_take_durations_at_the_cli_and_the_json_door(sw, frozen_clock):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store))
    assert len(sw.ok(*repo, "op", "log", "--since", "90s")["ops"]) == 6
    assert len(sw.ok(*repo, "op", "log", "--since", "0s")["ops"]) == 6  # at or after now: the frozen instant
    assert sw.ok(*repo, "op", "log", "--until", "1s")["ops"] == []
    for unit in ("15m", "2h", "7d"):
        assert len(sw.ok(*repo, "op", "log", "--since", unit)["ops"]) == 6
        assert sw.ok(*repo, "op", "log", "--until", unit)["ops"] == []
    assert len(sw.ok(*repo, "call", "op_log", '{"since": "2h"}')["ops"]) == 6
    assert sw.ok(*repo, "call", "op_log", '{"until": "7d"}')["ops"] == []
    bad = sw(*repo, "op", "log", "--since", "5 weeks")
    assert bad.exit == 2 and bad.error["code"] == "E_INVALID_ARG"
    assert "90s, 15m, 2h or 7d" in bad.error["hint"]


def test_durations_over_mcp(sw):
    build_golden_store(sw)
    with McpClient(sw.store) as client:
        recent = client.envelope("op_log", {"since": "1d"})
        none = client.envelope("op_log", {"until": "1d"})
    assert len(recent["result"]["ops"]) == 6 and none["result"]["ops"] == []


def test_a_line_break_in_a_nested_value_cannot_pass_for_more_of_the_table(sw, store):
    """A file named "ok.txt\\n  blob: 000…\\n- path: payload.sh" showed in `changeset show -o
    table` as two files, one of them with a made-up blob. Within a nested value (files,
    metadata) a line break is written `\\x0a`; a message, a cell of its own, keeps its lines."""
    (sw.tmp / "a").mkdir()
    spoof = "ok.txt\n  blob: 0000\n  size: 1\n- path: payload.sh"
    (sw.tmp / "a" / spoof).write_text("rm -rf /\n")
    made = sw.ok("--repo", store, "--as", AGENT, "changeset", "create", "-m", "first\nsecond",
                 "--file", f"a/{spoof}", "--meta", "k=v\n  x: y")
    ran = sw("--repo", store, "-o", "table", "changeset", "show", made["changeset"]["id"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    lines = [line.rstrip() for line in ran.stdout.splitlines()]
    assert [line for line in lines if "path:" in line] == [
        "files     - path: a/ok.txt\\x0a  blob: 0000\\x0a  size: 1\\x0a- path: payload.sh"
    ], ran.stdout
    assert "metadata  k: v\\x0a  x: y" in lines and "message   first" in lines and "          second" in lines, ran.stdout


def test_a_call_to_make_next_is_shown_as_a_command_line_to_copy(sw, store, tmp_path):
    """`next` shows each call's argv as one command line, quoted as a shell reads it: `workflow
    status` printed them joined with spaces (a store in `q;echo INJECTED` ran `echo` when pasted),
    and the generic table (`workflow approve -o table`) as a list with commas; `demo`'s own
    commands were unquoted in the JSON too."""
    import shlex

    odd = tmp_path / "q;echo INJECTED"
    sw.ok("--as", AGENT, "init", str(odd))
    flow = tmp_path / "g.toml"
    flow.write_text('name = "g"\n[[step]]\nname = "gate"\napproval = "ok?"\n')
    repo = ("--repo", str(odd), "--as", AGENT)
    wf = sw.ok(*repo, "workflow", "run", str(flow))["workflow"]["id"]
    env = {"COLUMNS": "400", "NO_COLOR": "1"}
    status = sw(*repo, "-o", "table", "workflow", "status", wf, env=env).stdout
    approve_argv = ["swarmctl", "--repo", str(odd), "--as", AGENT, "workflow", "approve", wf]
    assert f"next: {shlex.join(approve_argv)}" in status.splitlines(), status
    approved = sw(*repo, "-o", "table", "workflow", "approve", wf, env=env).stdout
    resume_argv = ["swarmctl", "--repo", str(odd), "--as", AGENT, "workflow", "resume", wf]
    assert f"argv: {shlex.join(resume_argv)}" in [line.strip() for line in approved.splitlines()], approved
    demo = sw.ok("demo", str(tmp_path / "a demo"))
    assert [shlex.split(line)[:3] for line in demo["next"]] == [["swarmctl", "--repo", str(tmp_path / "a demo")]] * 3


def test_a_failed_command_s_last_words_are_in_its_step_s_detail(sw, tmp_path):
    """`-o table workflow status` said only "exited with status 3": why it failed (what the command
    wrote last) was in the JSON alone. The detail adds the last lines of its stderr's tail (its
    stdout's, when stderr is empty), for the run and for a failed rollback."""
    repo = tmp_path / "store"
    sw.ok("--as", AGENT, "init", str(repo))
    script = tmp_path / "fail.sh"
    script.write_text('#!/bin/sh\necho "progress one"\necho "line 1" >&2\necho "fatal: [prod] unreachable" >&2\nexit 3\n')
    script.chmod(0o755)
    quiet = tmp_path / "quiet.sh"
    quiet.write_text('#!/bin/sh\necho "only stdout"\nexit 4\n')
    quiet.chmod(0o755)
    flow = tmp_path / "f.toml"
    flow.write_text('name = "f"\n[[step]]\nname = "ok"\nrun = ["true"]\nrollback = ["./quiet.sh"]\n'
                    '[[step]]\nname = "boom"\nrun = ["./fail.sh"]\nrollback = ["true"]\n')
    args = ("--repo", str(repo), "--as", AGENT)
    wf = sw(*args, "workflow", "run", str(flow)).error["details"]["workflow"]
    env = {"COLUMNS": "300", "NO_COLOR": "1"}
    status = sw(*args, "-o", "table", "workflow", "status", wf, env=env).stdout
    assert "exited with status 3; stderr: line 1\nfatal: [prod] unreachable" in _unboxed(status), status
    sw(*args, "workflow", "rollback", wf, "--confirm", "--expect-preview", sw.ok(*args, "workflow", "rollback", wf)["preview_id"])
    rolled = sw(*args, "-o", "table", "workflow", "status", wf, env=env).stdout
    assert "rollback exited with status 4; stdout: only stdout" in _unboxed(rolled), rolled


def _unboxed(table: str) -> str:
    """The detail column's text of a bordered table, its folded lines joined by newlines."""
    details = [line.rstrip().rstrip("│").rsplit("│", 1)[-1].strip() for line in table.splitlines() if line.startswith("│")]
    return "\n".join(details)


@pytest.mark.parametrize("width", [40, 50])
def test_ref_list_keeps_each_changeset_id_and_op_whole_at_a_narrow_terminal(sw, store, width):
    """Rich cut the changeset ids of `ref list -o table` as well as the names (`9b36f183f…`), so
    two refs could read alike; as the plain table of many refs, the short id and the op stay whole."""
    for end in ("1", "2"):
        sw.ok("--repo", store, "--as", AGENT, "ref", "set", "feature/" + "x" * 60 + end, "main", "--create")
    refs = sw.ok("--repo", store, "ref", "list")["refs"]
    table = sw("--repo", store, "-o", "table", "ref", "list", env={"COLUMNS": str(width), "NO_COLOR": "1"}).stdout
    for ref in refs:
        assert any(ref["target"][:12] in line and str(ref["op"]) in line for line in table.splitlines()), table
    assert max(len(line) for line in table.splitlines()) <= width, table
    names = [line.strip("│ ").split()[0] for line in table.splitlines() if line.lstrip("│ ").startswith("feature/")]
    assert len(names) == 2 and names[0] != names[1], table  # cut in the middle: their ends show


def test_a_trailing_backslash_is_shown_once(sw, store):
    """Rich's markup escape doubles a trailing backslash (for a tag written after the text), so a
    message `copy to C:\\temp\\` showed as `...C:\\temp\\\\` in a cell; one ending in two kept two."""
    for message in ("copy to C:\\temp\\", "two\\\\", "tag\\[bold]x[/bold]\\"):
        made = sw.ok("--repo", store, "--as", AGENT, "changeset", "create", "-m", message)["changeset"]["id"]
        shown = sw("--repo", store, "-o", "table", "changeset", "show", made, env={"COLUMNS": "200", "NO_COLOR": "1"}).stdout
        assert f"message   {message}" in [line.rstrip() for line in shown.splitlines()], shown
        log = sw("--repo", store, "-o", "table", "op", "log", "-n", "1", env={"COLUMNS": "200", "NO_COLOR": "1"}).stdout
        assert f"{made[:12]}: {message} " in log, log


def test_a_long_failed_output_cut_for_its_step_s_detail_never_turns_into_markup(sw, tmp_path):
    """The detail keeps the last 400 characters of a failed command's stderr: cut just after
    the backslash of an escaped `[` (the table's text is Rich markup, escaped), `[bold]` of the
    command's output became a style, and a `[/x]` a renderer's error."""
    repo = tmp_path / "store"
    sw.ok("--as", AGENT, "init", str(repo))
    script = tmp_path / "fail.sh"
    for tag in ("[bold]", "[/x]"):
        tail = "y" * (400 - len(tag))  # escaped, a backslash, the tag and this are 401 characters: cut just after the backslash
        script.write_text(f"#!/bin/sh\nprintf '%s' 'start {tag}{tail}' >&2\nexit 1\n")
        script.chmod(0o755)
        flow = tmp_path / "f.toml"
        flow.write_text('name = "f"\n[[step]]\nname = "boom"\nrun = ["./fail.sh"]\n')
        wf = sw("--repo", str(repo), "--as", AGENT, "workflow", "run", str(flow)).error["details"]["workflow"]
        ran = sw("--repo", str(repo), "-o", "table", "workflow", "status", wf, env={"COLUMNS": "1000", "NO_COLOR": "1"})
        assert ran.exit == 0 and "cannot render" not in ran.stderr, ran.stderr
        assert f"stderr: …{tag}{tail}" in ran.stdout, ran.stdout


def test_a_schemas_descriptions_read_as_prose_in_a_table(sw):
    """`-o table schema UndoReq` showed a docstring's line break as `by\\x0acompare-and-swap`
    (escaped as a nested value's would be): swarmctl's own prose, its line breaks are spaces."""
    ran = sw("-o", "table", "schema", "UndoReq", env={"COLUMNS": "200"})
    assert ran.exit == 0 and "\\x0a" not in ran.stdout, ran.stdout
    assert "before, by compare-and-swap, in one transaction" in ran.stdout, ran.stdout


def test_a_refusal_the_error_message_already_says_is_not_listed_again():
    """A rollback forbidden by the policy says its one refusal in its message: the table listed
    it a second time under it."""
    from swarmctl.cli import tables

    said = "agent/a may not roll back workflow wf-1: only human/* may"
    envelope = {"ok": False, "op": "workflow_rollback", "api": 1, "meta": {}, "error": {
        "code": "E_FORBIDDEN", "message": f"rollback of workflow wf-1 forbidden by the store's policy: {said}",
        "details": {"refusals": [{"code": "forbidden", "message": said}, {"code": "unknown_effects", "message": "step x: unknown"}]},
        "hint": None, "next": None}}
    text = tables.render(envelope, color=False)
    assert text.count(said) == 1 and "  unknown_effects: step x: unknown" in text, text
