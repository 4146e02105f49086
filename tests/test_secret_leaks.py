"""Issue 10, item 2: nothing of a secret's value is ever stored or shown: not a part of it left
at the cut of an output tail, not its base64, URL, JSON or hex encodings. The test greps the
database, its -wal file and every output (stdout and stderr of each command) for each form."""

import base64
import json
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

from swarmctl import secrets
from wfkit import Kit

TOKEN = "tk_" + "0123456789abcdefghijKLMNOPQRSTUVWXYZ-_"[:37]  # 40 characters

# Prints the token, then 4,060 dots: a 4 KiB tail cut by bytes would start inside the token.
PRINTS = {
    "cut.sh": 'printf "%s" "$API_TOKEN"; head -c 4060 /dev/zero | tr "\\0" "."; echo\n',
    "b64.sh": 'printf "%s" "$API_TOKEN" | base64; printf "x%s" "$API_TOKEN" | base64; printf "xy%s" "$API_TOKEN" | base64\n',
    "url.sh": 'python3 -c "import os, urllib.parse; print(urllib.parse.quote(os.environ[\'API_TOKEN\'], safe=\'\'))"\n',
    "json.sh": 'python3 -c "import os, json; print(json.dumps({\'t\': os.environ[\'API_TOKEN\']}))"\n',
    "hex.sh": 'printf "%s" "$API_TOKEN" | od -An -tx1 | tr -d " \\n"; echo\n',
}


def forms(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "plain": value,
        "base64": base64.b64encode(raw).decode(),
        "base64 after 1": base64.b64encode(b"x" + raw).decode()[4:-4],
        "base64 after 2": base64.b64encode(b"xy" + raw).decode()[4:-4],
        "url": quote(value, safe=""),
        "json": json.dumps(value)[1:-1],
        "hex": raw.hex(),
        "last 36": value[-36:],
        "first 36": value[:36],
        "middle 12": value[14:26],
    }


def test_no_form_of_a_secret_reaches_the_store_its_wal_or_any_output(sw):
    kit = Kit(sw)
    # Holding a connection open keeps the -wal file on disk, so the grep sees both files.
    keeper = sqlite3.connect(Path(kit.repo) / "swarmops.db")
    keeper.execute("SELECT COUNT(*) FROM ops").fetchone()
    for name, body in PRINTS.items():
        (kit.dir / name).write_text("#!/bin/sh\n" + body)
        (kit.dir / name).chmod(0o755)
    steps = "".join(
        f'[[step]]\nname = "{name[:-3]}"\nrun = ["./{name}"]\nenv = {{ API_TOKEN = "${{env:API_TOKEN}}" }}\n'
        for name in PRINTS
    )
    env = {"API_TOKEN": TOKEN}
    ran, wf = kit.run(f'name = "leaky"\n{steps}', env=env)
    assert ran.exit == 0, ran.stdout
    outputs = [
        ran,
        kit("workflow", "status", wf, actor=None),
        kit("-o", "table", "workflow", "status", wf, actor=None),
        kit("workflow", "list", actor=None),
        kit("call", "workflow_status", json.dumps({"id": wf}), actor=None),
    ]
    tails = {s["name"]: s["result"]["stdout_tail"] for s in outputs[1].result["steps"]}
    # Scrubbed first, then cut: the mask stands where the token was, and the dots fit after it.
    assert tails["cut"] == "***" + "." * 4060 + "\n", tails["cut"][:60]
    for name in ("b64", "url", "json", "hex"):
        assert "***" in tails[name], (name, tails[name])
    stored = kit.db_bytes()
    assert (Path(kit.repo) / "swarmops.db-wal").stat().st_size > 0
    for what, form in forms(TOKEN).items():
        assert form.encode() not in stored, f"the {what} form is in the database or its -wal"
        for out in outputs:
            assert form not in out.stdout + out.stderr, f"the {what} form is in an output"
    keeper.close()


def test_a_long_secret_wrapped_over_lines_as_base64_and_hex_print_it_is_hidden(sw):
    """`base64` wraps its output at 76 characters, `xxd -p` and `fold` at 60: a secret long
    enough to be wrapped was kept whole in the step's output tail and the store, a line at a
    time, which joined and decoded gave it back."""
    long_token = "github_pat_11ABCDEFG0123456789_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    kit = Kit(sw)
    (kit.dir / "wrap.sh").write_text('#!/bin/sh\nprintf "%s" "$API_TOKEN" | base64\n'
                                     'printf "%s" "$API_TOKEN" | od -An -tx1 | tr -d " \\n" | fold -w 60; echo\n')
    (kit.dir / "wrap.sh").chmod(0o755)
    ran, wf = kit.run('name = "wrapped"\n[[step]]\nname = "wrap"\nrun = ["./wrap.sh"]\n'
                      'env = { API_TOKEN = "${env:API_TOKEN}" }\n', env={"API_TOKEN": long_token})
    assert ran.exit == 0, ran.stdout
    status = kit("workflow", "status", wf, actor=None)
    tail = status.result["steps"][0]["result"]["stdout_tail"]
    raw = long_token.encode()
    lines = base64.encodebytes(raw).decode().split() + [raw.hex()[i:i + 60] for i in range(0, len(raw.hex()), 60)]
    assert len(lines) >= 4 and tail.count("***") == 2, tail
    stored = kit.db_bytes()
    for line in lines:
        assert line not in tail and line.encode() not in stored, line


def test_a_secret_one_step_names_is_hidden_in_every_steps_output_and_rollback(sw):
    """Each command gets swarmctl's whole environment, so a step that does not name a secret, or
    a rollback command, can print one another step names: it was kept in plaintext (in
    `workflow status`, the run's error, the store), only the naming step's output being scrubbed."""
    kit = Kit(sw)
    keeper = sqlite3.connect(Path(kit.repo) / "swarmops.db")
    keeper.execute("SELECT COUNT(*) FROM ops").fetchone()
    flow = (
        'name = "w"\n'
        '[[step]]\nname = "deploy"\nrun = ["sh", "-c", "echo deploy sees $API_TOKEN"]\nrollback = ["sh", "-c", "echo undo sees $API_TOKEN"]\n'
        'env = { API_TOKEN = "${env:API_TOKEN}" }\n'
        '[[step]]\nname = "after"\nrun = ["sh", "-c", "echo after sees $API_TOKEN; exit 1"]\nrollback = ["true"]\n'
    )
    ran, wf = kit.run(flow, env={"API_TOKEN": TOKEN})
    assert ran.exit == 10, ran.stdout  # E_STEP_FAILED: `after` exits 1
    rolled = kit("workflow", "rollback", wf, "--confirm", env={"API_TOKEN": TOKEN})
    assert rolled.exit == 0, rolled.stdout
    status = kit("workflow", "status", wf, actor=None)
    tails = {s["name"]: (s["result"] or {}).get("stdout_tail") for s in status.result["steps"]}
    assert tails["after"] == "after sees ***\n", tails
    stored = kit.db_bytes()
    for out in (ran, rolled, status):
        assert TOKEN not in out.stdout + out.stderr
    assert TOKEN.encode() not in stored
    keeper.close()


def test_a_secret_shorter_than_four_characters_is_run_with_a_warning_on_stderr(sw):
    kit = Kit(sw)
    ran, _ = kit.run(
        'name = "short"\n[[step]]\nname = "leak"\nrun = ["./leak.sh"]\nenv = { DEPLOY_TOKEN = "${env:PIN}" }\n',
        env={"PIN": "123"},
    )
    assert ran.exit == 0, ran.stdout
    assert "warning" in ran.stderr and "${env:PIN}" in ran.stderr and "shorter than 4" in ran.stderr
    quiet, _ = kit.run(
        'name = "long"\n[[step]]\nname = "leak"\nrun = ["./leak.sh"]\nenv = { DEPLOY_TOKEN = "${env:PIN}" }\n',
        env={"PIN": "1234"},
    )
    assert quiet.exit == 0 and "warning" not in quiet.stderr


# --- the secret-name rule: whole words, one list, near misses plain ------------------------------

@pytest.mark.parametrize("key", ["DB_PASS", "db-pass", "dbPass", "DEPLOY_PWD", "CACHE_KEY", "MY_SECRETS",
                                 "GOOGLE_CREDENTIALS", "SESSION_TOKEN", "PASS"])
def test_a_secret_word_anywhere_among_the_words_names_a_secret(key):
    assert secrets.is_secret_key(key)


@pytest.mark.parametrize("key", ["PWD", "OLDPWD", "KEYBOARD_LAYOUT", "BYPASS_CACHE", "PASSENGER_COUNT", "monkey",
                                 "key", "author", "keystone_url"])
def test_near_misses_stay_plain(key):
    assert not secrets.is_secret_key(key)


def test_a_literal_db_pass_in_a_definition_is_refused(sw):
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]]\nname = "s"\nrun = ["./mark.sh", "x"]\nenv = { DB_PASS = "hunter2hunter2" }\n')
    ran = kit("workflow", "run", "flow.toml")
    assert ran.error["code"] == "E_INVALID_ARG"
    assert "hunter2hunter2" not in ran.stdout + ran.stderr
    assert b"hunter2hunter2" not in kit.db_bytes()


def test_the_shell_s_pwd_is_passed_as_a_literal(sw):
    kit = Kit(sw)
    ran, _ = kit.run('name = "w"\n[[step]]\nname = "s"\nrun = ["./mark.sh", "x"]\nenv = { PWD = "/tmp", OLDPWD = "/" }\n')
    assert ran.exit == 0, ran.stdout


@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_scrub_values_hides_base64_at_each_alignment(shift, encode):
    """Inside a longer base64 text, all but the at most two characters that mix the value's bits
    with its neighbours' are masked."""
    value = "correct-horse-battery?>"
    encoded = encode(b"ab"[:shift] + value.encode() + b"tail").decode()
    scrubbed = secrets.scrub_values(encoded, [value])
    assert scrubbed.count(secrets.MASK) == 1
    hidden = len(encoded) - (len(scrubbed) - len(secrets.MASK))
    assert hidden >= len(value) * 8 // 6 - 2


def test_scrub_cut_hides_the_end_or_beginning_of_a_secret_at_a_cut():
    value = "correct-horse-battery"
    assert secrets.scrub_cut("battery and on", [value], start=True) == "*** and on"
    assert secrets.scrub_cut("up to corr", [value], end=True) == "up to ***"
    assert secrets.scrub_cut("plain text", [value], start=True, end=True) == "plain text"
