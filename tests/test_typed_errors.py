"""Issue 10, item 4: typed errors where E_INTERNAL came out. Real files, real permissions (the
tests run as root, so the process that must be refused runs without root's file-permission
capabilities), real processes where bytes on argv and stdout matter."""

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from core_helpers import ALICE, fold_wal
from swarm import swarmctl_argv


def make_store(sw, path: Path) -> Path:
    sw.ok("--as", ALICE, "init", str(path))
    sw.ok("--repo", str(path), "--as", ALICE, "changeset", "create", "-m", "first", "--ref", "main")
    return path


def run_bytes(argv: list, *, cwd: Path, drop_dac: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    """swarmctl as a real process, with bytes arguments; with `drop_dac`, without root's
    capabilities to ignore file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH)."""
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if drop_dac else []
    return subprocess.run(
        [*prefix, *swarmctl_argv(), *argv],
        cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")}, **(env or {})},
        capture_output=True,
        timeout=60,
    )


def envelope_of(proc: subprocess.CompletedProcess) -> dict:
    text = proc.stdout.decode("utf-8")  # raises if stdout is not valid UTF-8
    lines = text.splitlines()
    assert len(lines) == 1, text
    return json.loads(lines[0])


needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv(1) to drop capabilities"
)


@needs_setpriv
@pytest.mark.parametrize("what", ["directory", "database"])
def test_a_store_this_user_may_not_read_is_e_forbidden_naming_the_file(sw, what):
    store = make_store(sw, sw.tmp / "store")
    blocked = store if what == "directory" else store / "swarmops.db"
    blocked.chmod(0o000)
    try:
        for argv in (["--repo", str(store), "op", "log"], ["--repo", str(store), "--as", ALICE, "ref", "set", "x", "main"]):
            proc = run_bytes(argv, cwd=sw.tmp, drop_dac=True)
            env = envelope_of(proc)
            assert (proc.returncode, env["error"]["code"]) == (6, "E_FORBIDDEN"), env
            assert env["error"]["details"]["file"] == str(blocked)
            assert str(blocked) in env["error"]["message"] and "-shm" not in env["error"]["message"]
    finally:
        blocked.chmod(0o755 if what == "directory" else 0o644)


def test_init_with_a_name_too_long_is_e_invalid_arg(sw):
    ran = sw("--as", ALICE, "init", "a" * 256)
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    assert "too long" in ran.error["message"]


def test_repo_at_a_symlink_loop_is_e_not_a_repo(sw):
    (sw.tmp / "loop1").symlink_to(sw.tmp / "loop2")
    (sw.tmp / "loop2").symlink_to(sw.tmp / "loop1")
    ran = sw("--repo", str(sw.tmp / "loop1"), "op", "log")
    assert (ran.exit, ran.error["code"]) == (5, "E_NOT_A_REPO")
    assert "symbolic links" in ran.error["message"]
    made = sw("--as", ALICE, "init", str(sw.tmp / "loop1"))
    assert (made.exit, made.error["code"]) == (2, "E_INVALID_ARG")


def test_a_ref_whose_changeset_row_is_missing_is_e_store_corrupt_on_writes_and_reads(sw):
    store = make_store(sw, sw.tmp / "store")
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("DELETE FROM changesets")  # behind the store's back (foreign keys are off here)
    conn.commit()
    conn.close()
    for args in (("--as", ALICE, "ref", "set", "other", "main"), ("ref", "show", "main")):
        ran = sw("--repo", str(store), *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
        assert "FOREIGN KEY" not in ran.error["message"] or "missing" in ran.error["message"]


@pytest.mark.parametrize(
    "argv, position, option",
    [
        ([b"ref", b"set", b"\xff", b"main"], 7, None),
        ([b"changeset", b"create", b"-m", b"\xff\xfe"], 8, "-m"),
        ([b"changeset", b"create", b"-m", b"ok", b"--meta", b"k=\xff"], 10, "--meta"),
    ],
)
def test_an_argument_that_is_not_utf8_is_e_invalid_arg_naming_it(sw, argv, position, option):
    store = make_store(sw, sw.tmp / "store")
    proc = run_bytes([b"--repo", os.fsencode(store), b"--as", ALICE.encode(), *argv], cwd=sw.tmp)
    env = envelope_of(proc)
    assert (proc.returncode, env["error"]["code"]) == (2, "E_INVALID_ARG"), env
    assert env["error"]["details"]["argument"] == position
    assert env["error"]["details"].get("option") == option
    assert f"argument {position}" in env["error"]["message"] and "UTF-8" in env["error"]["message"]
    assert env["op"] in ("ref_set", "changeset_create")


def test_stdout_is_valid_utf8_json_when_a_path_is_not(sw):
    odd = sw.tmp / os.fsdecode(b"caf\xe9")
    odd.mkdir()
    proc = run_bytes([b"op", b"log"], cwd=odd)
    env = envelope_of(proc)  # valid UTF-8, one line of JSON
    assert (proc.returncode, env["error"]["code"]) == (5, "E_NOT_A_REPO")
    assert "\\udce9" in proc.stdout.decode() and b"\xe9" not in proc.stdout


def test_a_shm_that_is_a_directory_is_named_not_blamed_on_read_only(sw):
    store = make_store(sw, sw.tmp / "store")
    fold_wal(store)  # the WAL is kept between commands now: leave the store as a clean close does
    (store / "swarmops.db-shm").mkdir()
    ran = sw("--repo", str(store), "--as", ALICE, "ref", "set", "other", "main")
    assert ran.exit != 0
    assert ran.error["code"] == "E_STORE_CORRUPT"
    assert ran.error["details"]["file"] == str(store / "swarmops.db-shm")
    assert "directory" in ran.error["message"] and "read-only" not in ran.error["message"]


def test_text_that_is_not_utf8_in_the_store_is_e_store_corrupt(sw):
    store = make_store(sw, sw.tmp / "store")
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("UPDATE ops SET description = CAST(X'66ff' AS TEXT) WHERE op = 2")
    conn.commit()
    conn.close()
    ran = sw("--repo", str(store), "op", "log")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout


@pytest.mark.parametrize("files", ['[]', '"x"', '{"a": {"b": 1}}'])
def test_a_changeset_s_files_of_a_shape_no_changeset_has_is_e_store_corrupt(sw, files):
    """`files` edited to a list, a string or nested objects was E_INTERNAL (exit 70, "a bug in
    swarmctl": AttributeError, a binding error); malformed JSON was E_STORE_CORRUPT already."""
    store = make_store(sw, sw.tmp / "store")
    sw.ok("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "x", "--ref", "main")
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("UPDATE changesets SET files = ? WHERE id = (SELECT target FROM refs WHERE name = 'main')", (files,))
    conn.commit()
    conn.close()
    for args in (("changeset", "show", "main"), ("-o", "jsonl", "changeset", "show", "main")):
        ran = sw("--repo", str(store), *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), (args, ran.stdout)


@pytest.mark.parametrize("value", ["abc", "-5", "0", "1001", "99999999999999999999", ""])
def test_a_transaction_bound_no_command_could_set_is_e_store_corrupt_and_tx_config_sets_it_right(sw, value):
    """`tx.max_revisions` edited to `abc` made `tx begin` and `tx config` E_INTERNAL; `-5` was
    taken, and every `tx set` refused "at its bound of -5". It is damage, which `store check`
    names; `tx config --max-revisions N` sets it right."""
    store = make_store(sw, sw.tmp / "store")
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("INSERT INTO meta(key, value) VALUES ('tx.max_revisions', ?)", (value,))
    conn.commit()
    conn.close()
    repo = ("--repo", str(store), "--as", ALICE)
    for args in (("tx", "begin"), ("tx", "config"), ("store", "check")):
        ran = sw(*repo, *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), (args, ran.stdout)
        assert "tx.max_revisions" in ran.error["message"], ran.stdout
        assert args == ("store", "check") or "tx config --max-revisions N" in ran.error["hint"], ran.stdout
    assert sw.ok(*repo, "tx", "config", "--max-revisions", "20") == {"max_revisions": 20, "changed": True}
    assert sw.ok(*repo, "tx", "begin")["max"] == 20
