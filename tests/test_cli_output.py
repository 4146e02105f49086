"""The CLI's output contract: one envelope on stdout, compact to a pipe, readable on a terminal,
tables for people, usage errors as envelopes, and a closed pipe that ends quietly."""

import json
import os
import pty
import re
import signal
import time
import subprocess
import sys
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, build_golden_store
from swarm import swarmctl_argv

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_on_terminal(args, env, cwd, stdin=None):
    """Run swarmctl with stdout on a real pseudo-terminal (stdin: a file to read, or None);
    return (status, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*swarmctl_argv(), *args], stdin=stdin, stdout=slave, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    status = proc.wait(timeout=60)
    return status, b"".join(chunks).decode().replace("\r\n", "\n"), proc.stderr.read().decode()


@pytest.fixture
def store(sw):
    build_golden_store(sw)
    return str(sw.store)


def test_a_pipe_gets_one_compact_line(sw, store):
    ran = sw.process("--repo", store, "op", "log", "-n", "2")
    assert ran.exit == 0
    assert ran.stdout.count("\n") == 1 and ran.stdout.endswith("}\n")
    assert ": " not in ran.stdout.split('"description"')[0]  # no spaces after separators
    envelope = json.loads(ran.stdout)
    assert list(envelope) == ["ok", "op", "api", "result", "meta"]
    assert list(envelope["meta"]) == ["repo", "elapsed_ms", "resolved", "auth"]
    assert isinstance(envelope["meta"]["elapsed_ms"], int)


def test_a_terminal_gets_the_same_envelope_indented_and_coloured(sw, store):
    status, out, _ = run_on_terminal(["--repo", store, "op", "show", "6"], sw.env, sw.tmp)
    assert status == 0
    assert "\x1b[" in out
    plain = ANSI.sub("", out)
    assert plain.startswith("{\n  \"ok\": true,")
    piped = sw.process("--repo", store, "op", "show", "6").envelope
    shown = json.loads(plain)
    shown["meta"]["elapsed_ms"] = piped["meta"]["elapsed_ms"]
    assert shown == piped


@pytest.mark.parametrize("flags", [[], ["--color", "never"]])
def test_on_a_terminal_no_control_or_format_character_of_the_store_reaches_it_raw(sw, store, flags):
    """JSON escapes only U+0000-U+001F. A changeset message with C1 controls (U+009D OSC,
    U+009B CSI: a terminal that reads UTF-8 retitles and clears itself), DEL, a bidi override
    or a tag character reached the terminal raw in the default JSON output, coloured or not.
    They are JSON escapes there now, and the JSON reads the same; a pipe gets it as it is."""
    evil = "ok\u009d0;HACKED\u009c\u009b2J\u202eexe.txt\x7f\U000e0001 fine: é 日本"
    sw.ok("--repo", store, "--as", ALICE, "changeset", "create", "-m", evil)  # op 7
    status, out, _ = run_on_terminal([*flags, "--repo", store, "op", "show", "7"], sw.env, sw.tmp)
    assert status == 0
    plain = ANSI.sub("", out)
    assert not any(c in plain for c in "\u009d\u009c\u009b\u202e\x7f\U000e0001"), ascii(plain)
    assert "\\u009b2J\\u202eexe.txt\\u007f\\udb40\\udc01 fine: é 日本" in plain  # escaped; the rest as it was
    assert json.loads(plain)["result"]["description"].endswith(evil)
    piped = sw.process("--repo", store, "op", "show", "7")
    assert evil in piped.stdout and piped.envelope["result"]["description"].endswith(evil)


@pytest.mark.parametrize("how", [{"NO_COLOR": "1"}, {"TERM": "dumb"}, {"--color": "never"}])
def test_no_colour_when_asked(sw, store, how):
    env, flags = dict(sw.env), []
    if "NO_COLOR" in how or "TERM" in how:
        env.update(how)
    else:
        flags = ["--color", "never"]
    status, out, _ = run_on_terminal([*flags, "--repo", store, "op", "show", "6"], env, sw.tmp)
    assert status == 0
    assert "\x1b[" not in out
    assert json.loads(out)["result"]["op"] == 6


def test_table_output_for_people(sw, store):
    ran = sw("--repo", store, "-o", "table", "op", "log")
    assert ran.exit == 0
    lines = ran.stdout.splitlines()
    assert any("op" in line and "actor" in line and "kind" in line for line in lines[:3])
    assert any(line.strip("│ ").startswith("6 ") and AGENT in line for line in lines)
    assert not ran.stdout.lstrip().startswith("{")


def test_table_output_from_the_environment_and_json_back_with_o(sw, store):
    table = sw("--repo", store, "ref", "list", env={"SWARMCTL_OUTPUT": "table"})
    assert "release/v1" in table.stdout and not table.stdout.startswith("{")
    json_again = sw("--repo", store, "-o", "json", "ref", "list", env={"SWARMCTL_OUTPUT": "table"})
    assert json_again.envelope["op"] == "ref_list"


def test_an_error_as_a_table_is_one_line_with_its_hint_and_keeps_its_exit_code(sw, store):
    ran = sw("--repo", store, "-o", "table", "op", "undo", "6")
    assert ran.exit == 6
    assert ran.stdout == ""  # an error is for the person: on stderr, stdout empty (SPEC §1)
    assert ran.stderr.splitlines() == [
        "E_IDENTITY_REQUIRED: an identity is required: this command changes the store",
        "hint: Say who you are with --as kind/name (e.g. --as agent/worker-17) or SWARMCTL_AS.",
    ]


def test_a_table_error_keeps_stdout_empty_in_a_pipeline(sw, store):
    ran = sw.process("--repo", store, "-o", "table", "op", "show", "99")
    assert (ran.exit, ran.stdout) == (4, "")
    assert ran.stderr.startswith("E_NOT_FOUND: no op 99")
    usage = sw.process("--repo", store, "-o", "table", "op", "show", "banana")
    assert (usage.exit, usage.stdout) == (2, "") and "E_INVALID_ARG" in usage.stderr


def test_a_closed_pipe_ends_quietly(sw, store):
    script = f"{' '.join(swarmctl_argv())} --repo {store} op log -n 10000 --reverse | head -c 1"
    # Make the envelope bigger than a pipe buffer so the writer really meets a closed pipe:
    # 300 ops, written through the batch door (one process, one open store), not 300 commands.
    calls = "".join(
        json.dumps({"tool": "changeset_create", "arguments": {"message": f"bulk {i}" * 20}}) + "\n" for i in range(300)
    )
    bulk = sw.process("--repo", str(store), "--as", "agent/bulk", "call", "--lines", input=calls)
    assert bulk.exit == 0 and len(bulk.stdout.splitlines()) == 300, bulk.stderr[-2000:]
    proc = subprocess.run(["bash", "-c", "set -o pipefail; " + script], capture_output=True, text=True, env=sw.env)
    assert proc.stdout == "{"
    assert proc.stderr == ""
    assert proc.returncode == 0



@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, where every write fails with ENOSPC")
def test_stdout_that_cannot_be_written_is_said_in_one_stderr_line_with_exit_1(sw, store):
    """stdout on a full disk (`> /dev/full`): one line on stderr naming the failure, exit 1, as
    coreutils do; never a traceback. A write's change is committed all the same (the line says
    so); `--version` and `--help`, which change nothing, say only the failure."""
    def run(*args: str) -> subprocess.CompletedProcess:
        with open("/dev/full", "w") as full:
            return subprocess.run([*swarmctl_argv(), "--repo", store, *args], stdout=full, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True, env=sw.env, timeout=60)

    said = "swarmctl: cannot write to stdout: No space left on device"
    for args in (["op", "show", "1"], ["op", "log"], ["-o", "table", "op", "log"], ["-o", "jsonl", "op", "log"],
                 ["call", "op_log"], ["schema", "UndoReq"], ["--as", AGENT, "ref", "set", "full", "main", "--create"]):
        ran = run(*args)
        assert (ran.returncode, ran.stderr) == (1, said + "; the command ran, and any change it made is in the store\n"), (args, ran.stderr)
    assert sw.ok("--repo", store, "ref", "show", "full")["name"] == "full"  # it ran
    for args in (["--version"], ["--help"], ["op", "log", "--help"]):
        ran = run(*args)
        assert (ran.returncode, ran.stderr) == (1, said + "\n"), (args, ran.stderr)
    with open("/dev/full", "w") as full:
        batch = subprocess.run([*swarmctl_argv(), "--repo", store, "--as", AGENT, "call", "--lines"], stdout=full,
                               stderr=subprocess.PIPE, input='{"tool": "op_log"}\n', text=True, env=sw.env, timeout=60)
    assert batch.returncode == 1 and batch.stderr.startswith(said) and "Traceback" not in batch.stderr


def test_version_into_a_closed_pipe_ends_quietly(sw, store):
    proc = subprocess.run(["bash", "-c", f"{' '.join(swarmctl_argv())} --version | true"], capture_output=True, text=True,
                          env=sw.env, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")
    reader, writer = os.pipe()
    os.close(reader)  # closed before swarmctl writes: its print() meets EPIPE
    ran = subprocess.run([*swarmctl_argv(), "--version"], stdout=writer, stderr=subprocess.PIPE, text=True, env=sw.env, timeout=60)
    os.close(writer)
    assert "Traceback" not in ran.stderr and ran.stderr == "", ran.stderr


@pytest.mark.parametrize("args", [["--help"], ["op", "log", "--help"], ["completion", "bash"], ["schema", "UndoReq"]])
def test_help_and_other_text_into_a_closed_pipe_end_quietly_with_exit_0(sw, args):
    """`swarmctl --help | head -1` under `set -o pipefail` failed the script: Typer exits 1 on
    EPIPE, where a command whose envelope meets a closed pipe ends 0 (README: quietly)."""
    reader, writer = os.pipe()
    os.close(reader)  # closed before swarmctl writes: its print() meets EPIPE
    try:
        ran = subprocess.run([*swarmctl_argv(), *args], stdout=writer, stderr=subprocess.PIPE, text=True, env=sw.env, timeout=60)
    finally:
        os.close(writer)
    assert (ran.returncode, ran.stderr) == (0, ""), (args, ran.returncode, ran.stderr)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_signal_says_whether_the_change_was_written(sw, store, sig, when):
    """Ctrl-C or SIGTERM before the COMMIT: rolled back, as E_INTERRUPTED says. Just after it
    (found by a probe, 4 times in 80 random signals): E_INTERRUPTED still said "rolled back, not
    written ... run the command again", and running it again made the change twice. It now names
    the op it wrote (`details.committed`) and says not to."""
    from core_helpers import paused_at_commit

    head = sw.ok("--repo", store, "op", "log", "-n", "1")["ops"][0]["op"]
    with paused_at_commit(sw, "--repo", store, "--as", AGENT, "ref", "set", "late", "main", "--create", when=when) as proc:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    error = json.loads(out)["error"]
    assert (proc.returncode, error["code"]) == (130, "E_INTERRUPTED"), out + err
    written = sw("--repo", store, "ref", "show", "late")
    if when == "before":
        assert "committed" not in error["details"] and "rolled back" in error["hint"] and written.exit == 4
    else:
        assert error["details"]["committed"] == [head + 1] and f"op {head + 1}" in error["message"], error
        assert "again would make it again" in error["hint"] and "rolled back" not in error["hint"]
        assert written.exit == 0 and sw.ok("--repo", store, "op", "show", str(head + 1))["kind"] == "ref_set"
    assert sw.ok("--repo", store, "store", "check")["problems"] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("parser", ["fast", "typer"])
def test_a_signal_while_a_file_argument_is_read_still_gives_one_envelope(sw, store, sig, parser):
    """`policy set FILE` reads its file before anything runs; FILE may be a pipe or a FIFO that
    waits for its writer. A Ctrl-C or SIGTERM there ended swarmctl with exit 130 and nothing on
    stdout. It is E_INTERRUPTED, as any command stopped by a signal says, and nothing is written.
    (`--` leaves the command line to Typer's parser; without it the fast parse reads it.)"""
    fifo = sw.tmp / "policy.fifo"
    os.mkfifo(fifo)
    words = ["--", str(fifo)] if parser == "typer" else [str(fifo)]
    proc = subprocess.Popen(
        [*swarmctl_argv(), "--repo", store, "--as", ALICE, "policy", "set", *words],
        env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while True:  # a FIFO opens for writing without waiting only once its reader has it open
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
    try:
        proc.send_signal(sig)  # swarmctl is reading: nothing comes, and no end-of-file while we hold it
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(writer)
    assert proc.returncode == 130, (out, err)
    envelope = json.loads(out)
    assert (envelope["op"], envelope["error"]["code"]) == ("policy_set", "E_INTERRUPTED"), envelope
    assert envelope["error"]["details"]["signal"] == signal.Signals(sig).name and "Traceback" not in err, err
    assert sw.ok("--repo", store, "op", "log", "-n", "1")["ops"][0]["kind"] != "policy_set"


def test_closed_standard_streams(sw, store):
    """Started with stdout, stdin or stderr closed (`>&-`, `<&-`, `2>&-`), a command runs as it
    would have and exits with its status: what it prints goes nowhere, and no traceback."""
    def run(redirect: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["sh", "-c", f'exec "$@" {redirect}', "sh", *swarmctl_argv(), "--repo", store, *args],
            capture_output=True, text=True, env=sw.env, timeout=60,
        )

    moved = run(">&-", "--as", AGENT, "ref", "set", "closed", "main", "--create")
    assert (moved.returncode, moved.stderr) == (0, "")
    assert sw.ok("--repo", store, "ref", "show", "closed")["name"] == "closed"  # it ran
    failed = run(">&-", "op", "show", "999")
    assert (failed.returncode, failed.stderr) == (4, "")
    no_input = run("<&-", "call", "op_log", "-")  # stdin reads as empty: not JSON
    assert (no_input.returncode, json.loads(no_input.stdout)["error"]["code"]) == (2, "E_INVALID_ARG"), no_input.stderr
    quiet = run("2>&-", "-q", "op", "show", "999")  # -q says its failure on stderr
    assert (quiet.returncode, quiet.stdout) == (4, "")


def test_json_is_utf8_whatever_the_locale_and_a_table_falls_back_to_ascii(sw, store):
    """JSON is written as UTF-8 (RFC 8259) even where stdout's encoding is another (a legacy
    locale, PYTHONIOENCODING); a table is drawn in ASCII there, and what the encoding cannot
    show is `?`. Never a UnicodeEncodeError."""
    sw.ok("--repo", store, "--as", AGENT, "ref", "set", "café→☕", "main", "--create")
    utf8 = subprocess.run([*swarmctl_argv(), "--repo", store, "ref", "list"], capture_output=True, env=sw.env, timeout=60)
    for encoding in ("ascii", "latin-1"):
        env = {**sw.env, "PYTHONIOENCODING": encoding}
        listed = subprocess.run([*swarmctl_argv(), "--repo", store, "ref", "list"], capture_output=True, env=env, timeout=60)
        assert (listed.returncode, listed.stderr) == (0, b"")
        assert json.loads(listed.stdout)["result"] == json.loads(utf8.stdout)["result"]
        assert "café→☕".encode() in listed.stdout
        lines = subprocess.run(
            [*swarmctl_argv(), "--repo", store, "call", "--lines"], input=b'{"tool": "ref_list"}\n',
            capture_output=True, env=env, timeout=60,
        )
        assert (lines.returncode, json.loads(lines.stdout)["result"]) == (0, json.loads(utf8.stdout)["result"])
        table = subprocess.run(
            [*swarmctl_argv(), "--repo", store, "-o", "table", "ref", "list"], capture_output=True, env=env, timeout=60,
        )
        assert (table.returncode, table.stderr) == (0, b"")
        text = table.stdout.decode(encoding)
        assert text.startswith("+-") and "| caf" in text and "┃" not in text


@pytest.mark.parametrize(
    "args, op, message",
    [
        (["op", "undo", "banana"], "undo", "'banana' is not an op number"),
        (["op", "undo"], "undo", "Missing argument 'OP'"),
        (["op", "log", "--frobnicate"], "op_log", "No such option: --frobnicate"),
        (["op", "log", "-n", "0"], "op_log", "limit must be from 1 to 10000, not 0"),
        (["op", "log", "-n", "many"], "op_log", "'many' is not a valid"),
        (["op", "log", "--before", "99999999999999999999"], "op_log", "before must be from 1 to 9223372036854775807"),
        (["op", "log", "--kind", "teleport"], "op_log", "kind must be one of 'init', "),
        (["store", "copy", "src", ""], "store_copy", "destination must be at least 1 character long, not 0"),
        (["op", "frobnicate"], None, "No such command 'frobnicate'"),
        (["frobnicate"], None, "No such command 'frobnicate'"),
        ([], None, "issing command"),
        (["op"], None, "missing command: `swarmctl op` needs one"),
        # Click raises these without the command's context: op was null and usage missing
        (["ref", "set", "main", "x", "--expect"], "ref_set", "Option '--expect' requires an argument."),
        (["changeset", "create", "-m"], "changeset_create", "Option '-m' requires an argument."),
    ],
)
def test_bad_usage_is_an_envelope_with_exit_2(sw, store, args, op, message):
    ran = sw("--repo", store, "--as", AGENT, *args)
    assert ran.exit == 2, ran.stdout + ran.stderr
    envelope = ran.envelope
    assert envelope["op"] == op
    assert envelope["error"]["code"] == "E_INVALID_ARG"
    assert message in envelope["error"]["message"]
    assert envelope["error"]["details"]["usage"].startswith("Usage: swarmctl")
    assert "Usage: swarmctl" in ran.stderr


def test_help_and_version_print_text_and_exit_0(sw):
    helped = sw("op", "undo", "--help")
    assert helped.exit == 0 and "already_applied" in helped.stdout and "--dry-run" in helped.stdout
    top = sw("--help")
    assert top.exit == 0
    for word in ("op", "ref", "changeset", "init", "demo", "schema"):
        assert re.search(rf"^\s*│?\s*{word}\b", top.stdout, re.M), word
    version = sw.process("--version")
    from swarmctl import __version__

    assert version.exit == 0 and version.stdout == f"swarmctl {__version__}\n"


def test_the_envelope_is_the_same_in_process_and_as_a_real_process(sw, store):
    inside = sw("--repo", store, "op", "show", "4")
    outside = sw.process("--repo", store, "op", "show", "4")
    assert sw.transcript(inside) == sw.transcript(outside)
    assert sys.executable  # the process ran with this interpreter's swarmctl


def test_the_command_word_finder_knows_every_global_option_that_takes_a_value():
    import typer

    from swarmctl.cli.app import build
    from swarmctl.cli.options import VALUE_FLAGS
    from swarmctl.cli.prescan import tools_for

    root = typer.main.get_command(build([]))
    takes_value = {opt for p in root.params if not getattr(p, "is_flag", False) for opt in p.opts + p.secondary_opts}
    assert takes_value == set(VALUE_FLAGS)
    assert [t.name for t in tools_for(["-o", "table", "--repo", "op", "op", "log"])] == ["op_log"]
    assert tools_for(["--help"]) is None and tools_for(["--version"]) == []


@pytest.mark.parametrize(
    "args",
    [
        ["op", "log", "-n", "1", "-n", "2"],
        ["op", "log", "--limit=1", "-n2"],
        ["op", "log", "--ref", "main", "--ref", "release/v1"],
    ],
)
def test_an_option_given_twice_is_refused_as_a_field_named_twice_is(sw, store, args):
    ran = sw("--repo", store, *args)
    assert ran.exit == 2
    assert ran.error["code"] == "E_INVALID_ARG" and "given twice" in ran.error["message"]


def test_repeatable_options_and_values_after_double_dash_are_not_counted_twice(sw, store):
    one = sw("--repo", store, "--as", AGENT, "changeset", "create", "-m", "x", "--meta", "a=1", "--meta", "b=2")
    assert one.exit == 0 and one.result["changeset"]["metadata"] == {"a": "1", "b": "2"}
    message = sw("--repo", store, "--as", AGENT, "changeset", "create", "-m", "--", "--ref", "x")
    assert message.exit == 0, message.stdout
    # An option's value that looks like the option is its value, not the option again.
    mighty = sw("--repo", store, "--as", AGENT, "changeset", "create", "-m", "-mighty fix", "--ref", "main")
    assert mighty.exit == 0, mighty.stdout
    assert mighty.result["changeset"]["message"] == "-mighty fix"
    dashes = sw("--repo", store, "--as", AGENT, "-o", "json", "changeset", "create", "--message", "--message")
    assert dashes.exit == 0, dashes.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize(
    "command",
    [("ref", "set", "hotfix", "main", "--create"), ("call", "ref_set", '{"name": "hotfix", "target": "main", "create": true}')],
    ids=["cli", "call"],
)
def test_an_interrupted_command_still_prints_one_envelope_and_writes_nothing(sw, store, signum, command):
    """Stopped inside its write transaction (the fault hook holds it just before COMMIT), the
    command rolls back, prints E_INTERRUPTED and exits 130: as a command, and through `call`."""
    flag = sw.tmp / "paused"
    proc = subprocess.Popen(
        [*swarmctl_argv(), "--repo", store, "--as", ALICE, *command],
        env={**sw.env, "SWARMCTL_FAULT": f"pause-before-commit:{flag}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    envelope = json.loads(out)
    assert envelope["ok"] is False and envelope["op"] == "ref_set"
    assert envelope["error"]["code"] == "E_INTERRUPTED"
    name = signal.Signals(signum).name  # the signal that came, by its name: SIGTERM is not "Ctrl-C"
    assert envelope["error"]["details"]["signal"] == name and name in envelope["error"]["message"]
    assert ("Ctrl-C" in envelope["error"]["message"]) == (signum == signal.SIGINT)
    assert sw.ok("--repo", store, "op", "log", "-n", "1")["ops"][0]["op"] == 6  # nothing written
    assert sw("--repo", store, "ref", "show", "hotfix").error["code"] == "E_NOT_FOUND"


def test_a_huge_value_is_not_echoed_whole(sw, store):
    ran = sw("--repo", store, "ref", "show", "x" * 100_000)
    assert ran.error["code"] == "E_INVALID_ARG"
    assert len(ran.stdout) < 20_000


def test_global_options_after_the_command_and_given_twice(sw, store):
    assert sw("op", "log", "-n", "1", "--repo", store).result["ops"][0]["op"] == 6
    twice = sw("--as", ALICE, "ref", "set", "x", "main", "--as", "agent/evil", "--repo", store)
    assert twice.exit == 2 and twice.error["message"] == "--as given twice"
    assert sw("--repo", store, "ref", "show", "x").error["code"] == "E_NOT_FOUND"


def test_an_argument_the_cli_cannot_read_is_bad_usage_with_its_usage_text(sw, store):
    ran = sw("--repo", store, "--as", ALICE, "changeset", "create", "-m", "x", "--meta", "novalue")
    assert ran.exit == 2
    assert ran.error["details"]["usage"].startswith("Usage: swarmctl changeset create")
    assert "Usage: swarmctl changeset create" in ran.stderr


@pytest.mark.parametrize(
    "args",
    [["-o", "json", "-o", "table", "ref", "list"], ["-o", "table", "op", "log", "-n", "abc"],
     ["-o", "table", "ref", "set", "a", "main", "--expect-old", "1"]],
    ids=["given twice", "bad value", "no such option"],
)
def test_a_usage_error_in_a_table_is_said_once_with_its_code_and_hint(sw, store, args):
    """With -o table the error goes to stderr as the table says errors (code, message, hint):
    the usage text's `Error:` line said the same message a second time."""
    ran = sw("--repo", store, "--as", ALICE, *args)
    assert (ran.exit, ran.stdout) == (2, ""), ran.stdout
    assert ran.stderr.startswith("Usage: swarmctl "), ran.stderr
    assert "Error: " not in ran.stderr and ran.stderr.count("E_INVALID_ARG: ") == 1, ran.stderr
    assert "\nhint: " in ran.stderr, ran.stderr


def test_a_missing_choice_is_named_on_one_line_with_no_escaped_tabs(sw):
    """Click lists the values of a missing choice argument a line and a tab each; stderr showed
    the tabs as `\\x09` (control characters are escaped there) and the envelope's message ran
    over four lines."""
    ran = sw.process("completion")
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
    assert ran.error["message"] == "Missing argument 'SHELL'. Choose from: bash, zsh, fish", ran.error
    assert "\\x09" not in ran.stderr and "Error: Missing argument 'SHELL'. Choose from: bash, zsh, fish\n" in ran.stderr, ran.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_writes_envelope_is_printed_leaves_it_whole(sw, store, sig):
    """Once a change is committed its envelope is what says so: a Ctrl-C or SIGTERM while it
    was being printed ended swarmctl with exit 130 and the envelope cut off (or none at all,
    found by a probe around `tx commit`), the change made with no word of it. The envelope is
    printed whole and the exit status is its own. Here the envelope is longer than the pipe
    holds and the test reads nothing until the signal is sent, so the signal comes while
    swarmctl waits to write the rest."""
    message = "m" * 65536  # the longest a message may be: the envelope is longer than a pipe holds
    proc = subprocess.Popen(
        [*swarmctl_argv(), "--repo", store, "--as", ALICE, "changeset", "create", "-m", message],
        env=sw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text():  # blocked: the pipe is full
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    envelope = json.loads(out)
    assert (proc.returncode, envelope["ok"], envelope["result"]["op"]) == (0, True, 7), (out[-300:], err)
    assert envelope["result"]["changeset"]["message"] == message and b"Traceback" not in err, err


SIGNALLED = """\
import os, signal, sys
import {module} as where
original = where.{name}

def signalled(*args, **kwargs):
    {before}os.kill(os.getpid(), signal.{sig})
    {after}
where.{name} = signalled
from swarmctl.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("door", ["command", "call"])
def test_a_signal_once_the_tool_returned_never_leaves_its_write_unanswered(sw, store, door, sig, tmp_path):
    """Found by a probe: a signal that came after the tool returned (its write committed) and
    before the envelope was printed with interrupts held ended swarmctl with exit 130 and stdout
    empty; and `swarmctl call` printed its envelope with no interrupt held at all, so a signal
    then did the same. A script that retried made the change twice. Now the first names the op
    it wrote (as a signal just after the COMMIT does), and the second is held while the
    envelope is printed, which says what was written. The process signals itself from a wrapper
    around that step (after `_run` returns; as `emit` starts), so the signal comes then every time."""
    if door == "command":  # just after the tool returned
        module, name, before, after = "swarmctl.cli.invoke", "_run", "answer = original(*args, **kwargs)\n    ", "return answer"
    else:  # as the envelope is printed
        module, name, before, after = "swarmctl.cli.invoke", "emit", "", "return original(*args, **kwargs)"
    script = tmp_path / "signalled.py"
    script.write_text(SIGNALLED.format(module=module, name=name, sig=sig, before=before, after=after))
    head = sw.ok("--repo", store, "op", "log", "-n", "1")["ops"][0]["op"]
    words = ["ref", "set", "late", "main", "--create"] if door == "command" else ["call", "ref_set", '{"name": "late", "target": "main", "create": true}']
    proc = subprocess.run([sys.executable, str(script), "--repo", store, "--as", AGENT, *words],
                          env=sw.env, capture_output=True, text=True, timeout=60)
    envelope = json.loads(proc.stdout)
    if door == "command":
        error = envelope["error"]
        assert (proc.returncode, error["code"], error["details"]["committed"]) == (130, "E_INTERRUPTED", [head + 1]), proc
        assert "again would make it again" in error["hint"]
    else:
        assert (proc.returncode, envelope["ok"], envelope["result"]["op"]) == (0, True, head + 1), proc
    assert "Traceback" not in proc.stderr, proc.stderr
    assert sw.ok("--repo", store, "op", "show", str(head + 1))["kind"] == "ref_set"


def test_a_stderr_that_cannot_be_written_costs_no_command_its_answer(sw, store):
    """Found by a probe: a message to stderr that could not be written (`2>/dev/full`) was taken
    for stdout failing: `call` with an ignored field exited 1 with stdout empty though its write
    was made, usage errors printed no envelope, and `-q op show 99` exited 1, not 4."""
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        def ran(*words: str) -> subprocess.CompletedProcess:
            return subprocess.run([*swarmctl_argv(), "--repo", store, "--as", AGENT, *words], env=sw.env,
                                  stdout=subprocess.PIPE, stderr=full, text=True, timeout=60)
        written = ran("call", "ref_set", '{"name": "r2", "target": "main", "create": true, "zzz": 1}')
        usage = ran("--bogus")
        quiet = ran("-q", "op", "show", "99")
    finally:
        os.close(full)
    envelope = json.loads(written.stdout)
    assert (written.returncode, envelope["ok"], envelope["meta"]["ignored"]) == (0, True, ["zzz"]), written
    assert (usage.returncode, json.loads(usage.stdout)["error"]["code"]) == (2, "E_INVALID_ARG"), usage
    assert (quiet.returncode, quiet.stdout) == (4, ""), quiet
    assert sw.ok("--repo", store, "ref", "show", "r2")["op"] == envelope["result"]["op"]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_line_is_read_is_e_interrupted_not_a_traceback(sw, store, sig, tmp_path):
    """Found by a probe: Ctrl-C or SIGTERM while the command line was parsed printed a traceback
    and no envelope, and SIGTERM's exit status was 1, which says a command ran. Nothing ran:
    E_INTERRUPTED, exit 130. The process signals itself from a wrapper around the parse."""
    script = tmp_path / "signalled.py"
    script.write_text(SIGNALLED.format(module="swarmctl.cli.fast", name="parse", sig=sig, before="",
                                       after="return original(*args, **kwargs)"))
    proc = subprocess.run([sys.executable, str(script), "--repo", store, "--as", AGENT, "ref", "set", "p1", "main", "--create"],
                          env=sw.env, capture_output=True, text=True, timeout=60)
    envelope = json.loads(proc.stdout)
    assert (proc.returncode, envelope["op"], envelope["error"]["code"]) == (130, "ref_set", "E_INTERRUPTED"), proc
    assert "Traceback" not in proc.stderr and sw("--repo", store, "ref", "show", "p1").exit == 4


@pytest.mark.parametrize(
    "args",
    [["-q", "changeset", "create", "-m", os.fsdecode(b"x\xff")], ["-o", "table", "changeset", "create", "-m", os.fsdecode(b"x\xff")],
     ["op", "undo", "banana", "-o", "table"], ["op", "log", "--limt", "3", "--output=table"], ["op", "log", "-n", "abc", "-otable"],
     ["op", "undo", "banana", "-q"], ["-qo", "table", "ref", "show"], ["-qotable", "ref", "show"]],
    ids=["not UTF-8 -q", "not UTF-8 -o table", "-o after the command", "--output= after", "-oVALUE after", "-q after",
         "-qo bundled", "-qotable bundled"],
)
def test_an_error_found_before_the_command_line_is_read_is_printed_as_it_asks(sw, store, args):
    """An argument that is not UTF-8 printed the JSON envelope on stdout under -q or -o table,
    and a usage error did so with `-o table` after the command (Click stops reading before it
    gets there): both now read how to print from anywhere on the command line, as -q was."""
    ran = sw("--repo", store, *args)
    assert (ran.exit, ran.stdout) == (2, ""), ran.stdout
    assert ran.stderr.count("E_INVALID_ARG: ") == 1 and "Error: " not in ran.stderr, ran.stderr


@pytest.mark.parametrize("value", ["-otable", "-q", "--output=table"])
def test_an_options_value_that_looks_like_o_or_q_is_its_value_when_an_error_is_printed(sw, store, value):
    """`changeset create -m -otable --bogus`: `-otable` is the message, as Click reads it, and the
    usage error is the JSON envelope on stdout (read from the raw words, it was taken for -o and
    stdout was left empty)."""
    ran = sw("--repo", store, "changeset", "create", "-m", value, "--bogus")
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", (ran.stdout, ran.stderr)


def test_a_signal_nohup_ignores_is_not_held_as_the_first_of_two():
    """Where interrupts are held (a committed write's envelope being printed), a SIGHUP that
    `nohup` ignores was held too, as the first of two, so that a SIGTERM after it went through at
    once instead of once the envelope was out. Run in a child: it sets its own handlers."""
    code = """
import os, signal, time
from swarmctl import stopping
from swarmctl.envelope import raise_terminated
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, raise_terminated)
try:
    with stopping.interrupts_held():
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        print("held to the end")
except KeyboardInterrupt:
    print("then delivered")
print("SIGHUP still ignored:", signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)
"""
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.stdout.split("\n")[:3] == ["held to the end", "then delivered", "SIGHUP still ignored: True"], ran.stdout + ran.stderr
