"""Issue 10, item 3: data shown to people is inert. Control (Cc) and format (Cf) characters from
the store are escaped in every table cell, progress line and stderr message, whatever the colour
setting; the JSON envelope is unchanged (JSON escapes control characters itself)."""

import io
import json

import pytest

from core_helpers import ALICE
from swarmctl.cli.inert import inert
from swarmctl.cli.progress import StepProgress
from wfkit import Kit

EVIL = "evil\x1b]0;PWNED\x07\x1b[2J"
BIDI = "release\u202egnp.exe"
# What a terminal would act on: an OSC or CSI introducer, BEL, a bidi override.
RAW = ("\x1b]", "\x1b[2J", "\x07", "\u202e")


def log_id(sw, repo: str, op: int) -> str:
    return sw.ok("--repo", repo, "op", "show", str(op))["changesets"][0]


def assert_inert(text: str) -> None:
    for raw in RAW:
        assert raw not in text, (raw, text)


@pytest.mark.parametrize("color", ["never", "always", "auto"])
def test_op_log_as_a_table_escapes_a_message_s_terminal_controls(sw, color):
    repo = str(sw.store)
    sw.ok("--as", ALICE, "init", repo)
    sw.ok("--repo", repo, "--as", ALICE, "changeset", "create", "-m", EVIL, "--ref", "main")
    sw.ok("--repo", repo, "--as", ALICE, "changeset", "create", "-m", BIDI, "--meta", f"note={EVIL}")
    # Wide enough that no description is cut with an ellipsis: the escapes are shown whole.
    table = sw("--repo", repo, "--color", color, "-o", "table", "op", "log", env={"COLUMNS": "400"})
    assert table.exit == 0
    assert_inert(table.stdout + table.stderr)
    # (a table that fits the terminal cuts long descriptions short: the full message is below)
    shown = sw("--repo", repo, "--color", color, "-o", "table", "changeset", "show", "main")
    assert_inert(shown.stdout + shown.stderr)
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in shown.stdout
    bidi = sw("--repo", repo, "--color", color, "-o", "table", "changeset", "show", log_id(sw, repo, 3))
    assert_inert(bidi.stdout)
    assert "\\u202e" in bidi.stdout
    # JSON is unchanged: the message comes back exactly, escaped as JSON escapes it.
    log = sw("--repo", repo, "op", "log")
    assert "\\u001b]0;PWNED\\u0007" in log.stdout
    assert any(EVIL in op["description"] for op in log.result["ops"])


def test_a_workflow_s_name_and_step_names_are_inert_in_its_tables(sw):
    kit = Kit(sw)
    name = json.dumps(EVIL)  # a TOML basic string takes JSON's escapes
    ran, wf = kit.run(f'name = {name}\n[[step]]\nname = "s"\nrun = ["./mark.sh", "x"]\ndescription = {json.dumps(BIDI)}\n')
    for args in (("workflow", "status", wf), ("workflow", "list"), ("workflow", "rollback", wf, "--include-completed")):
        for color in ("never", "always"):
            shown = kit("--color", color, "-o", "table", *args, actor=None)
            assert_inert(shown.stdout + shown.stderr)
    listed = kit("workflow", "list", actor=None).result["workflows"]
    assert ran.exit == 0 and [w["name"] for w in listed] == [EVIL]


def test_progress_lines_escape_names():
    stream = io.StringIO()
    progress = StepProgress(stream, color=False)
    event = {"phase": "run", "workflow": EVIL, "step": BIDI, "index": 1, "position": 1, "count": 1}
    progress({**event, "event": "start"})
    progress({**event, "event": "finish", "status": EVIL})
    progress.close()
    assert_inert(stream.getvalue())
    assert "\\x1b" in stream.getvalue()


def test_usage_errors_and_warnings_on_stderr_are_inert(sw):
    bad = sw("op", "undo", EVIL)
    assert bad.exit == 2
    assert_inert(bad.stderr)
    assert "\\x1b]0;PWNED" in bad.stderr
    assert bad.error["code"] == "E_INVALID_ARG"
    unknown = sw(f"--{EVIL}")
    assert unknown.exit == 2
    assert_inert(unknown.stderr)


@pytest.mark.parametrize(
    "text, shown",
    [
        ("plain", "plain"),
        ("two\nlines", "two\nlines"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("a\rb\tc\x00", "a\\x0db\\x09c\\x00"),
        ("\u202eabc\u200b", "\\u202eabc\\u200b"),
        ("\U000e0041tag", "\\U000e0041tag"),
        ("\x85next\u2028line", "\\x85next\\u2028line"),
        ("\udcff", "\\udcff"),
        ("naïve ünïcode ✓ 日本", "naïve ünïcode ✓ 日本"),
    ],
)
def test_inert_escapes_control_and_format_characters_only(text, shown):
    assert inert(text) == shown


def test_json_lines_on_a_terminal_are_inert_too(sw):
    """`-o jsonl` and `call --lines` wrote a ref named with a bidi override, and a message's C1
    CSI (U+009B), raw to a terminal, where the indented envelope writes them as JSON escapes. On
    a terminal every JSON line is written so (the same JSON); a pipe gets it as it is."""
    from test_cli_output import run_on_terminal

    repo = str(sw.store)
    sw.ok("--as", ALICE, "init", repo)
    made = sw.ok("--repo", repo, "--as", ALICE, "changeset", "create", "-m", "c1 \u009b31m red", "--ref", BIDI)
    env = {**sw.env, "SWARMCTL_REPO": repo}
    for args in (("-o", "jsonl", "ref", "list"), ("-o", "jsonl", "changeset", "show", made["changeset"]["id"])):
        status, out, _ = run_on_terminal(list(args), env, sw.tmp)
        assert status == 0 and "\u202e" not in out and "\u009b" not in out, out
        assert "\\u202e" in out or "\\u009b" in out, out
        assert sw(*args, env={"SWARMCTL_REPO": repo}).stdout.count("\\u") == 0  # a pipe: the JSON as it is
    lines = sw.tmp / "calls.jsonl"
    lines.write_text(json.dumps({"tool": "ref_list", "arguments": {}}) + "\n")
    with lines.open("rb") as stdin:
        status, out, _ = run_on_terminal(["call", "--lines"], env, sw.tmp, stdin=stdin)
    assert status == 0 and "\u202e" not in out and "\\u202e" in out, out
    assert json.loads(out)["result"]["refs"][0]["name"] == BIDI
