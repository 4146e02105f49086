"""Each error code the core can produce, with its exit status, and nothing half-written.

Usage errors, identity, which store (--repo, SWARMCTL_REPO, discovery), stores that cannot be
used (missing, not a store, corrupt, of a newer format, read-only, locked)."""

import errno
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from core_helpers import (
    AGENT, ALICE, CI, as_, build_golden_store, file_digests, fold_wal, op_count, open_files, paused_at_commit,
)
from swarm import swarmctl_argv
from swarmctl.store.schema import FORMAT_VERSION, POLICY_FORMAT


def digests_after(sw, store: Path, *commands: tuple[str, ...]) -> list:
    """Run each command; return them, asserting that none changed the store's files."""
    before = file_digests(store)
    runs = [sw(*command) for command in commands]
    assert file_digests(store) == before, "a failed command changed the store"
    return runs


# --- bad usage: E_INVALID_ARG, exit 2, usage on stderr too ------------------------------------


def test_bad_usage(sw, golden):
    build_golden_store(sw)
    repo = ("--repo", str(sw.store))
    runs = digests_after(
        sw,
        sw.store,
        (*as_(sw, AGENT), "op", "undo", "banana"),
        (*as_(sw, AGENT), "op", "undo", "-1"),
        (*repo, "op", "show"),
        (*repo, "op", "log", "--bogus"),
        (*repo, "op", "log", "-n", "0"),
        (*repo, "op", "log", "-n", "10001"),
        (*repo, "op", "log", "--before", "0"),
        (*repo, "op", "log", "--after", "99999999999999999999"),
        (*repo, "op", "show", "9223372036854775808"),
        (*repo, "op", "log", "--kind", "nope"),
        (*repo, "op", "log", "--since", "yesterday"),
        (*repo, "op", "log", "--actor", "worker-17"),
        (*repo, "op", "log", "--ref", "a..b"),
        (*as_(sw, ALICE), "ref", "set", "main"),
        (*as_(sw, ALICE), "ref", "set", "release/v1.lock", "main"),
        (*as_(sw, "worker-17"), "ref", "set", "x", "main"),
        (*repo, "frobnicate"),
    )
    for ran in runs:
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.transcript()
    # What the parser refuses carries the usage, in the envelope and on stderr; what the tool
    # refuses (a time, an actor, a ref name) says which value and why instead.
    parser_refused = [*range(10), 13, 16]
    for i, ran in enumerate(runs):
        usage = ran.error["details"].get("usage")
        if i in parser_refused:
            assert usage.startswith("Usage: swarmctl") and usage in ran.stderr, ran.transcript()
        else:
            assert usage is None and ran.stderr == "", ran.transcript()
    assert sw.transcript(*runs) == golden


@pytest.mark.backends("sqlite", "postgres")
def test_op_numbers_beyond_the_log(sw, golden):
    build_golden_store(sw)
    runs = digests_after(
        sw,
        sw.store,
        ("--repo", str(sw.store), "op", "show", "7"),
        ("--repo", str(sw.store), "op", "show", "9223372036854775807"),
        (*as_(sw, AGENT), "op", "undo", "99"),
    )
    assert [(r.exit, r.error["code"]) for r in runs] == [(4, "E_NOT_FOUND")] * 3
    assert sw.transcript(*runs) == golden


def test_a_bad_swarmctl_output_names_the_variable_not_a_flag_never_given(sw):
    """The README: a bad value of a setting is E_INVALID_ARG naming the variable. SWARMCTL_OUTPUT
    was refused as "Invalid value for '--output'", a flag the user never gave."""
    build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "op", "log", env={"SWARMCTL_OUTPUT": "bogus"})
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    assert ran.error["message"].startswith("SWARMCTL_OUTPUT='bogus' is not a valid value")
    assert (ran.error["details"]["variable"], ran.error["details"]["value"]) == ("SWARMCTL_OUTPUT", "bogus")
    flag = sw.process("--repo", str(sw.store), "-o", "bogus", "op", "log")  # given: the flag is named
    assert "variable" not in flag.error["details"] and "'--output'" in flag.error["message"]


@pytest.mark.backends("sqlite", "postgres")
def test_lock_timeout_variable_is_checked(sw):
    build_golden_store(sw)
    ran = sw(*as_(sw, ALICE), "ref", "set", "x", "main", env={"SWARMCTL_LOCK_TIMEOUT": "soon"})
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    ran = sw(*as_(sw, ALICE), "ref", "set", "x", "main", env={"SWARMCTL_LOCK_TIMEOUT": "-1"})
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG")
    assert op_count(sw.store) == 6


def test_an_empty_setting_is_the_default_as_an_unset_one(sw):
    """Every setting read as empty (`SWARMCTL_LOCK_TIMEOUT= swarmctl ...`, a CI file's blank
    line) is its default, as Click takes SWARMCTL_REPO, SWARMCTL_AS and SWARMCTL_OUTPUT: the
    durations refused one that the sizes and the host id took."""
    build_golden_store(sw)
    empty = dict.fromkeys(("SWARMCTL_LOCK_TIMEOUT", "SWARMCTL_CLOCK_SKEW_S", "SWARMCTL_LEASE_S",
                           "SWARMCTL_HTTP_READ_TIMEOUT", "SWARMCTL_MAX_JSON_DEPTH", "SWARMCTL_MAX_INPUT_BYTES",
                           "SWARMCTL_HOST_ID", "SWARMCTL_OUTPUT"), "")
    ran = sw(*as_(sw, ALICE), "ref", "set", "x", "main", env=empty)
    assert (ran.exit, ran.result["op"]) == (0, 7), ran.stdout
    blank = sw(*as_(sw, ALICE), "ref", "set", "y", "main", env={"SWARMCTL_LOCK_TIMEOUT": "  "})
    assert (blank.exit, blank.result["op"]) == (0, 8), blank.stdout
    refused = sw(*as_(sw, ALICE), "ref", "set", "z", "main", env={"SWARMCTL_LOCK_TIMEOUT": "soon"})
    assert refused.error["hint"] == "Unset it for the default (10), or give a number of seconds in that span."


# --- identity ----------------------------------------------------------------------------------


@pytest.mark.backends("sqlite", "postgres")
def test_mutations_need_an_identity_and_reads_do_not(sw, golden):
    ids = build_golden_store(sw)
    repo = ("--repo", str(sw.store))
    runs = digests_after(
        sw,
        sw.store,
        (*repo, "ref", "set", "x", "main"),
        (*repo, "ref", "delete", "main"),
        (*repo, "changeset", "create", "-m", "m"),
        (*repo, "op", "undo", "6"),
        (*repo, "op", "undo", "6", "--dry-run"),
        (*repo, "--as", "", "ref", "set", "x", "main"),
    )
    assert [(r.exit, r.error["code"]) for r in runs] == [(6, "E_IDENTITY_REQUIRED")] * 6
    no_init = sw("init", str(sw.tmp / "other"))
    assert (no_init.exit, no_init.error["code"]) == (6, "E_IDENTITY_REQUIRED")
    assert not (sw.tmp / "other").exists()
    read = sw(*repo, "ref", "show", "main")
    assert read.result["target"] == ids["fix"] and read.envelope["meta"]["auth"] == "none"
    assert sw.transcript(*runs, no_init) == golden


@pytest.mark.backends("sqlite", "postgres")
def test_identity_from_the_environment(sw):
    build_golden_store(sw)
    by_env = sw("--repo", str(sw.store), "ref", "set", "x", "main", env={"SWARMCTL_AS": CI})
    assert by_env.envelope["meta"]["auth"] == "trust"
    assert sw.ok("--repo", str(sw.store), "op", "show", "7")["actor"] == CI
    # --as wins over SWARMCTL_AS.
    sw.ok(*as_(sw, ALICE), "ref", "set", "y", "main", env={"SWARMCTL_AS": CI})
    assert sw.ok("--repo", str(sw.store), "op", "show", "8")["actor"] == ALICE
    bad = sw("--repo", str(sw.store), "ref", "set", "z", "main", env={"SWARMCTL_AS": "not an actor"})
    assert (bad.exit, bad.error["code"]) == (2, "E_INVALID_ARG") and op_count(sw.store) == 8


# --- which store -------------------------------------------------------------------------------


def test_store_discovery_and_repo_variable(sw, golden):
    build_golden_store(sw)
    deep = sw.store / "notes" / "2026"
    deep.mkdir(parents=True)
    found = sw("ref", "show", "main", cwd=deep)
    from_env = sw("ref", "show", "main", env={"SWARMCTL_REPO": str(sw.store)})
    relative_env = sw("ref", "show", "main", env={"SWARMCTL_REPO": "store"})
    # --repo wins over SWARMCTL_REPO, and over the store around the current directory.
    (sw.tmp / "empty").mkdir()
    flag_wins = sw("--repo", str(sw.tmp / "empty"), "ref", "show", "main", env={"SWARMCTL_REPO": str(sw.store)})
    flag_wins_cwd = sw("--repo", str(sw.tmp / "empty"), "ref", "show", "main", cwd=deep)
    for ran in (found, from_env, relative_env):
        assert ran.envelope["meta"]["repo"] == str(sw.store.resolve())
    assert flag_wins.error["code"] == flag_wins_cwd.error["code"] == "E_NOT_A_REPO"
    assert sw.transcript(found, from_env, relative_env, flag_wins) == golden


def test_repo_naming_the_database_file_says_to_name_its_directory(sw):
    build_golden_store(sw)
    ran = sw("--repo", str(sw.store / "swarmops.db"), "op", "log")
    assert (ran.exit, ran.error["code"]) == (5, "E_NOT_A_REPO")
    assert ran.error["hint"] == f"That is a store's database file: --repo takes the store's directory, {sw.store}."
    assert sw("--repo", str(sw.tmp / "swarmops.db"), "op", "log").error["hint"].startswith("Create one with")  # none there


def test_no_store(sw, golden):
    (sw.tmp / "plain").mkdir()
    (sw.tmp / "plain" / "file.txt").write_text("not a store\n")
    runs = [
        sw("--repo", str(sw.tmp / "missing"), "op", "log"),
        sw("--repo", str(sw.tmp / "plain"), "op", "log"),
        sw("--repo", str(sw.tmp / "plain" / "file.txt"), "op", "log"),
        sw("op", "log", cwd=sw.tmp / "plain"),
        sw("--as", ALICE, "ref", "set", "x", "y", cwd=sw.tmp / "plain"),
        sw("op", "log", env={"SWARMCTL_REPO": str(sw.tmp / "missing")}),
    ]
    assert [(r.exit, r.error["code"]) for r in runs] == [(5, "E_NOT_A_REPO")] * 6
    assert sorted(p.name for p in sw.tmp.iterdir()) == ["plain"]  # nothing was created
    assert sw.transcript(*runs) == golden


def test_init(sw, golden):
    made = sw("--as", ALICE, "init", str(sw.store))
    again = sw("--as", ALICE, "init", str(sw.store))
    (sw.tmp / "afile").write_text("x")
    on_a_file = sw("--as", ALICE, "init", str(sw.tmp / "afile"))
    bad_actor = sw("--as", "alice", "init", str(sw.tmp / "other"))
    assert made.result == {"repo": str(sw.store.resolve()), "op": 1, "format": FORMAT_VERSION}
    assert (again.exit, again.error["code"]) == (7, "E_STATE")
    assert (on_a_file.exit, bad_actor.exit) == (2, 2)
    assert sorted(p.name for p in sw.store.iterdir()) == ["swarmops.db"]
    assert not (sw.tmp / "other").exists()
    assert sw.transcript(made, again, on_a_file, bad_actor) == golden


# --- stores that cannot be used: nothing is written ---------------------------------------------

READ = ("op", "log")
WRITE = ("--as", ALICE, "ref", "set", "release/v2", "main")


def _read_and_write(sw, store: Path) -> list:
    return digests_after(sw, store, ("--repo", str(store), *READ), ("--repo", str(store), *WRITE))


def test_corrupt_store_random_bytes(sw, golden):
    store = sw.tmp / "store"
    store.mkdir()
    (store / "swarmops.db").write_bytes(random.Random(7).randbytes(8192))
    runs = _read_and_write(sw, store)
    assert [(r.exit, r.error["code"]) for r in runs] == [(9, "E_STORE_CORRUPT")] * 2
    assert sorted(p.name for p in store.iterdir()) == ["swarmops.db"]
    assert sw.transcript(*runs) == golden


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_corrupt_store_truncated(sw, keep):
    build_golden_store(sw)
    # The database file alone, truncated. (With commits still in the WAL, a write that fails on
    # the damage may leave uncommitted frames after the WAL's last commit, which SQLite ignores.)
    fold_wal(sw.store)
    db = sw.store / "swarmops.db"
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.truncate(int(size * keep) // 4096 * 4096 + 1000)  # ends in the middle of a page
    runs = _read_and_write(sw, sw.store)
    assert [(r.exit, r.error["code"]) for r in runs] == [(9, "E_STORE_CORRUPT")] * 2, [r.stdout for r in runs]


def test_corrupt_page_inside_the_store(sw):
    """A store whose header is fine but one of its tables is garbage: found when it is read."""
    build_golden_store(sw)
    db = sw.store / "swarmops.db"
    conn = sqlite3.connect(db)
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'refs'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(random.Random(3).randbytes(page_size))
    runs = digests_after(
        sw,
        sw.store,
        ("--repo", str(sw.store), "ref", "list"),
        ("--repo", str(sw.store), *WRITE),
        (*as_(sw, AGENT), "op", "undo", "6"),
    )
    assert [(r.exit, r.error["code"]) for r in runs] == [(9, "E_STORE_CORRUPT")] * 3, [r.stdout for r in runs]


def test_sqlite_database_that_is_not_a_store(sw, golden):
    store = sw.tmp / "store"
    store.mkdir()
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("CREATE TABLE notes(text)")
    conn.commit()
    conn.close()
    runs = _read_and_write(sw, store)
    # A store with its meta table but no format recorded in it, and one missing its op log.
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.commit()
    conn.close()
    runs += _read_and_write(sw, store)
    conn = sqlite3.connect(store / "swarmops.db")
    conn.execute("INSERT INTO meta VALUES ('format', '1')")
    conn.commit()
    conn.close()
    runs += _read_and_write(sw, store)
    assert [(r.exit, r.error["code"]) for r in runs] == [(9, "E_STORE_CORRUPT")] * 6
    assert sw.transcript(*runs) == golden


def test_store_of_a_newer_format(sw, golden):
    build_golden_store(sw)
    conn = sqlite3.connect(sw.store / "swarmops.db")
    # Past every format this swarmctl knows (POLICY_FORMAT, a store with a policy, is one of them).
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(POLICY_FORMAT + 1),))
    conn.commit()
    conn.close()
    runs = _read_and_write(sw, sw.store)
    assert [(r.exit, r.error["code"]) for r in runs] == [(9, "E_STORE_VERSION")] * 2
    assert sw.transcript(*runs) == golden


# --- a read-only store -------------------------------------------------------------------------


@contextmanager
def read_only_mount(path: Path):
    """Make `path` a read-only bind mount of itself: not even root can write under it."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a read-only bind mount needs root and mount(8)")
    if subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (no CAP_SYS_ADMIN)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path), str(path)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_store_on_a_read_only_filesystem(sw, golden):
    """Reads work, with the last changes still in the WAL (read through the -wal and -shm files
    the last write left); writes are E_FORBIDDEN."""
    ids = build_golden_store(sw)
    before, files = file_digests(sw.store), sorted(p.name for p in sw.store.iterdir())
    assert files == ["swarmops.db", "swarmops.db-shm", "swarmops.db-wal"] and before["swarmops.db-wal"] != "empty"
    with read_only_mount(sw.store):
        with pytest.raises(OSError):
            (sw.store / "probe").write_text("x")  # root really cannot write there
        log = sw("--repo", str(sw.store), "op", "log", "-n", "1")
        dry = sw(*as_(sw, AGENT), "op", "undo", "6", "--dry-run")
        refused = [
            sw("--repo", str(sw.store), *WRITE),
            sw(*as_(sw, AGENT), "op", "undo", "6"),
            sw(*as_(sw, AGENT), "changeset", "create", "-m", "m"),
        ]
        listing = sorted(p.name for p in sw.store.iterdir())
    assert log.result["ops"][0]["op"] == 6
    assert dry.result["ref_moves"][0]["new"] == ids["base"]
    assert [(r.exit, r.error["code"]) for r in refused] == [(6, "E_FORBIDDEN")] * 3
    assert listing == files and file_digests(sw.store) == before
    assert sw.transcript(refused[0]) == golden


def test_store_on_a_read_only_filesystem_with_its_wal_folded_in(sw):
    """With nothing in the WAL (and no -shm file, which SQLite cannot make there), the store is
    read as an immutable file."""
    build_golden_store(sw)
    fold_wal(sw.store)
    with read_only_mount(sw.store):
        log = sw("--repo", str(sw.store), "op", "log", "-n", "1")
        refused = sw("--repo", str(sw.store), *WRITE)
        listing = sorted(p.name for p in sw.store.iterdir())
    assert log.result["ops"][0]["op"] == 6
    assert (refused.exit, refused.error["code"]) == (6, "E_FORBIDDEN")
    assert listing == ["swarmops.db"]


NOBODY = 65534


def _run_as_nobody(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *swarmctl_argv(), *args],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if not k.startswith("SWARMCTL_")},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def shared_dir():
    """A directory every user may enter (pytest's own tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="swarmctl-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_store_this_user_may_not_write(sw, shared_dir):
    """A store owned by root, used by the unprivileged user `nobody`: writes are E_FORBIDDEN.

    SQLite reads a WAL database through its -shm file, which it must be able to create beside
    the database: without write access to the directory even a read is refused, E_FORBIDDEN
    with a message that says so (not E_STORE_CORRUPT); once the -shm file exists, reads work.
    """
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv(1) to run as another user")
    if _run_as_nobody("--version", cwd=shared_dir).returncode != 0:
        pytest.skip("the user nobody cannot run this interpreter")
    store = shared_dir / "store"
    sw.ok("--as", ALICE, "init", str(store))
    sw.ok("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "m", "--ref", "main")
    fold_wal(store)  # no -shm file yet: as a store whose last connection did not write
    before = file_digests(store)

    write = _run_as_nobody("--repo", str(store), *WRITE, cwd=shared_dir)
    read = _run_as_nobody("--repo", str(store), "op", "log", cwd=shared_dir)
    assert (write.returncode, '"E_FORBIDDEN"' in write.stdout) == (6, True), write.stdout
    assert (read.returncode, '"E_FORBIDDEN"' in read.stdout, "-shm" in read.stdout) == (6, True, True), read.stdout
    sw.ok("--repo", str(store), "op", "log")  # root reads: SQLite leaves the -shm file there
    read = _run_as_nobody("--repo", str(store), "op", "log", cwd=shared_dir)
    write = _run_as_nobody("--repo", str(store), *WRITE, cwd=shared_dir)
    assert read.returncode == 0, read.stdout
    assert (write.returncode, '"E_FORBIDDEN"' in write.stdout) == (6, True), write.stdout
    assert file_digests(store) == before and op_count(store) == 2


# --- a store locked by another process ----------------------------------------------------------


@pytest.mark.backends("sqlite", "postgres")
def test_busy_store(sw, golden):
    ids = build_golden_store(sw)
    with paused_at_commit(sw, *as_(sw, ALICE), "ref", "set", "held", "main"):
        started = time.monotonic()
        busy = sw(*as_(sw, AGENT), "ref", "set", "release/v2", "main", env={"SWARMCTL_LOCK_TIMEOUT": "0.3"})
        waited = time.monotonic() - started
        # Reads are not blocked by a writer (WAL): they see the store as of the last commit.
        read = sw("--repo", str(sw.store), "ref", "show", "release/v1")
    assert (busy.exit, busy.error["code"]) == (8, "E_BUSY")
    assert waited >= 0.3 and "past the timeout (0.3s)" in busy.error["message"]  # it waited as long as told
    assert read.result["target"] == ids["fix"]
    # The killed holder's op never committed; the store takes writes again.
    assert op_count(sw.store) == 6
    assert sw.ok(*as_(sw, AGENT), "ref", "set", "release/v2", "main")["op"] == 7
    assert sw.transcript(busy) == golden


@pytest.mark.backends("sqlite", "postgres")
def test_ctrl_c_while_a_write_waits_for_the_lock_ends_it_at_once(sw):
    """A Ctrl-C to a write waiting for the store's write lock ends it now (E_INTERRUPTED, exit
    130, nothing written), not once SWARMCTL_LOCK_TIMEOUT has passed: SQLite waits in C, where
    Python handles no signal, so the wait is taken in slices."""
    import signal

    build_golden_store(sw)
    before = op_count(sw.store)
    with paused_at_commit(sw, *as_(sw, ALICE), "ref", "set", "held", "main"):
        waiter = subprocess.Popen(
            [*swarmctl_argv(), *as_(sw, AGENT), "ref", "set", "release/v2", "main"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sw.tmp,
            env={**sw.env, "SWARMCTL_LOCK_TIMEOUT": "600"},
        )
        try:
            _await_lock_wait(sw, waiter)
            waiter.send_signal(signal.SIGINT)
            out, err = waiter.communicate(timeout=60)  # without the slices: 600 s
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.communicate()
    envelope = json.loads(out)
    assert (waiter.returncode, envelope["error"]["code"]) == (130, "E_INTERRUPTED"), (out, err)
    assert op_count(sw.store) == before



def _sleeps_with_the_database_open(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state == "S" and any(path.endswith("swarmops.db") for path in open_files(pid).values())
    except (FileNotFoundError, ProcessLookupError):
        return False


_HEAD_ROW_WAITED_FOR = """
    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE l.locktype = 'tuple' AND c.relname = 'head' AND c.relnamespace = current_schema()::regnamespace"""


def _await_lock_wait(sw, waiter: subprocess.Popen) -> None:
    """Until `waiter` waits for the store's write lock: on PostgreSQL the server says so; on
    SQLite, it sleeps with the database open (between opening it and the wait nothing of a
    write sleeps; SQLite's wait is a sleep, tried again)."""
    from core_helpers import connect

    deadline = time.monotonic() + 60
    look = connect(sw.store) if isinstance(sw.store, str) else None
    try:
        while True:
            assert waiter.poll() is None, waiter.communicate()
            assert time.monotonic() < deadline, "the write never waited for the lock"
            if look is not None:
                # The first waiter for a row holds its tuple lock while it waits (the holder of the
                # row holds none): only a waiter for this store's head row, not another test's.
                if look.execute(_HEAD_ROW_WAITED_FOR).fetchone()[0]:
                    return
            elif _sleeps_with_the_database_open(waiter.pid):
                return
            time.sleep(0.005)
    finally:
        if look is not None:
            look.close()


def test_a_working_directory_that_was_removed(sw):
    """A shell left in a directory that was removed: a store given by its absolute path works
    as from anywhere; finding the store from there, or a relative path, is a clear error
    (E_NOT_A_REPO, E_INVALID_ARG), never a traceback."""
    ids = build_golden_store(sw)
    removed = iter(range(100))

    def run(*args: str, input: str | None = None) -> tuple[int, list[dict]]:
        gone = sw.tmp / f"gone-{next(removed)}"
        gone.mkdir()
        # The shell enters it, removes it, then becomes swarmctl, there.
        done = subprocess.run(
            ["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), *swarmctl_argv(), *args],
            env=sw.env, input=input, capture_output=True, text=True, timeout=60,
        )
        assert not done.stderr, done.stderr
        return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]

    status, [read] = run("--repo", str(sw.store), "op", "log", "-n", "1")
    assert (status, read["result"]["ops"][0]["op"]) == (0, 6)
    status, [moved] = run("--repo", str(sw.store), "--as", AGENT, "ref", "set", "release/v2", ids["base"])
    assert (status, moved["result"]["op"]) == (0, 7)
    status, [found] = run("op", "log")
    assert (status, found["error"]["code"]) == (5, "E_NOT_A_REPO") and "no longer exists" in found["error"]["message"]
    for args in (["--repo", "store", "op", "log"], ["--as", ALICE, "init", "store"]):
        status, [relative] = run(*args)
        assert (status, relative["error"]["code"], relative["error"]["details"]) == (2, "E_INVALID_ARG", {"path": "store"})
    lines = '{"tool": "op_log", "arguments": {"limit": 1}}\n'
    status, answers = run("--repo", str(sw.store), "call", "--lines", input=lines)
    assert (status, [a["result"]["ops"][0]["op"] for a in answers]) == (0, [7])
    status, answers = run("call", "--lines", input=lines)
    assert (status, [a["error"]["code"] for a in answers]) == (5, ["E_NOT_A_REPO"])


def test_init_where_the_database_name_is_taken_by_something_else(sw):
    """A directory, or a dangling link, where the store's database would go: E_STATE naming it
    (it said a store was just made there by another process), and nothing left behind. So is
    an empty file or one that is no SQLite database (init said "there is already a store"
    there, use it with --repo, where every other command calls it unreadable)."""
    makers = (("dir", lambda db: db.mkdir()), ("link", lambda db: db.symlink_to(sw.tmp / "nowhere")),
              ("empty", lambda db: db.write_bytes(b"")), ("text", lambda db: db.write_bytes(b"not a database\n" * 100)))
    for name, make in makers:
        where = sw.tmp / name
        where.mkdir()
        make(where / "swarmops.db")
        ran = sw("--as", ALICE, "init", str(where))
        assert (ran.exit, ran.error["code"]) == (7, "E_STATE"), ran.stdout
        assert "swarmops.db is there and is not a store's database" in ran.error["message"]
        assert [p.name for p in where.iterdir()] == ["swarmops.db"]


_NO_DESCRIPTOR_LEFT = """
import json, os, sys
from swarmctl.calls import call_tool
from swarmctl.context import Context, OpenStores
from swarmctl import registry

tools, stores = registry.Named(), OpenStores()
call = lambda repo: call_tool("changeset_create", {"message": "fd"}, Context(repo=repo, actor="agent/fd", stores=stores), tools)
assert call(sys.argv[1])["ok"]  # the tool's code loaded, and one store open: a server that has served
held = []
while True:  # every descriptor this process may have
    try:
        held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
refused = call(sys.argv[2])  # a store it has not opened yet
for fd in held:
    os.close(fd)
print(json.dumps([refused, call(sys.argv[2])]))
"""


def test_a_process_out_of_file_descriptors_is_e_unavailable_not_a_corrupt_store(sw):
    """A long-lived door that may open no more files (RLIMIT_NOFILE): SQLite says only "unable
    to open database file", which read as a damaged store (E_STORE_CORRUPT, restore a backup).
    It is E_UNAVAILABLE, reason too_many_open_files, nothing written; once files are closed,
    the same door writes."""
    build_golden_store(sw)
    other = sw.tmp / "other"
    sw.ok("--as", ALICE, "init", str(other))
    done = subprocess.run([sys.executable, "-c", _NO_DESCRIPTOR_LEFT, str(sw.store), str(other)], capture_output=True,
                          text=True, env=sw.env, timeout=60)
    assert done.returncode == 0, done.stderr
    refused, written = json.loads(done.stdout)
    assert (refused["error"]["code"], refused["error"]["details"]["reason"]) == ("E_UNAVAILABLE", "too_many_open_files"), refused
    assert written["ok"] and written["result"]["op"] == 2, written


def test_init_where_this_user_may_not_write(sw):
    (sw.tmp / "ro").mkdir()
    with read_only_mount(sw.tmp / "ro"):
        inside = sw("--as", ALICE, "init", str(sw.tmp / "ro"))
        below = sw("--as", ALICE, "init", str(sw.tmp / "ro" / "store"))
    assert [(r.exit, r.error["code"]) for r in (inside, below)] == [(6, "E_FORBIDDEN")] * 2
    assert list((sw.tmp / "ro").iterdir()) == []


def test_an_unexpected_failure_is_e_internal_with_a_correlation_id(sw):
    """A bug is reported as one, as an envelope: E_INTERNAL, exit 70, an id to find it by."""
    from swarmctl import runner
    from swarmctl.context import Context
    from swarmctl.envelope import exit_status
    from swarmctl.spec import READ, Tool
    from swarmctl.tools.schema import SchemaReq, SchemaResult

    def broken(ctx, req):
        raise ZeroDivisionError("division by zero")

    tool = Tool("broken", ("broken",), "Broken", "A broken tool.", SchemaReq, SchemaResult, broken, READ, False, False)
    envelope = runner.run(tool, SchemaReq(), Context())
    error = envelope["error"]
    assert (error["code"], exit_status(envelope)) == ("E_INTERNAL", 70)
    assert error["details"]["correlation_id"] in error["message"] and "ZeroDivisionError" in error["message"]


@pytest.mark.parametrize(
    "tool, arguments, field",
    [
        ("undo", {"op": "6"}, "op"),
        ("undo", {"op": 6.5}, "op"),  # (6.0 is 6, as JSON Schema's "integer" counts it)
        ("undo", {"op": True}, "op"),
        ("undo", {"op": 0}, "op"),
        ("undo", {"op": 2**64}, "op"),
        ("undo", {"op": 6, "dry_run": "yes"}, "dry_run"),
        ("undo", {}, "op"),
        ("op_log", {"limit": 0}, "limit"),
        ("op_log", {"limit": "20"}, "limit"),
        ("op_log", {"kind": "frobnicate"}, "kind"),
        ("op_log", {"before": -1}, "before"),
        ("ref_set", {"name": "main", "target": 12}, "target"),
        ("changeset_create", {"message": "m", "metadata": {"k": 1}}, "metadata.k"),
        ("changeset_create", {"message": "m", "parents": "abcd"}, "parents"),
    ],
)
def test_json_arguments_of_the_wrong_type(sw, tool, arguments, field):
    """The JSON door (`runner.run_json`, behind MCP and `swarmctl call`) checks types strictly,
    and values against their fields' constraints as the CLI does."""
    from swarmctl import registry, runner
    from swarmctl.context import Context

    build_golden_store(sw)
    before = file_digests(sw.store)
    envelope = runner.run_json(registry.get(tool), arguments, Context(repo=str(sw.store), actor=ALICE))
    assert envelope["error"]["code"] == "E_INVALID_ARG", envelope
    details = envelope["error"]["details"]
    # A value of the field's type outside its constraints names its field as the CLI does
    # (swarmctl/constraints.py); a value of the wrong type gets pydantic's list of errors.
    named = [details["field"]] if "field" in details else [e["field"] for e in details["errors"]]
    assert any(name.startswith(field) for name in named), envelope
    assert file_digests(sw.store) == before


def test_json_arguments_a_type_does_not_know_are_ignored(sw):
    from swarmctl import registry, runner
    from swarmctl.context import Context

    build_golden_store(sw)
    envelope = runner.run_json(registry.get("op_show"), {"op": 6, "verbose": True}, Context(repo=str(sw.store)))
    assert envelope["ok"] and envelope["result"]["op"] == 6


def test_read_only_filesystem_with_changes_still_in_the_wal(sw):
    """A copy of a store taken while its WAL held commits: readable with its -shm file; without
    it SQLite cannot read the WAL on a read-only filesystem, which E_FORBIDDEN says (an
    immutable read would silently miss those commits)."""
    build_golden_store(sw)
    live = sqlite3.connect(sw.store / "swarmops.db", isolation_level=None)
    live.execute("PRAGMA wal_autocheckpoint = 0")
    live.execute("INSERT INTO meta VALUES ('note', 'x')")  # a commit that stays in the WAL
    copies = {}
    for name, files in (("with-shm", ["", "-wal", "-shm"]), ("without-shm", ["", "-wal"])):
        copies[name] = sw.tmp / name
        copies[name].mkdir()
        for suffix in files:
            shutil.copy(sw.store / f"swarmops.db{suffix}", copies[name] / f"swarmops.db{suffix}")
    live.close()
    with read_only_mount(copies["with-shm"]):
        readable = sw("--repo", str(copies["with-shm"]), "op", "log", "-n", "1")
    with read_only_mount(copies["without-shm"]):
        refused = sw("--repo", str(copies["without-shm"]), "op", "log", "-n", "1")
    assert readable.result["ops"][0]["op"] == 6
    assert (refused.exit, refused.error["code"]) == (6, "E_FORBIDDEN")
    assert "write-ahead log" in refused.error["message"]


@contextmanager
def small_filesystem(path: Path, options: str = "size=1m"):
    """A tmpfs mounted at `path` with `options`, to fill up (root and mount(8), else skip)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small filesystem needs root and mount(8)")
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN)")
    try:
        yield
    finally:  # lazily, if something still holds a file there: a mount is never left behind
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def held_under(path: Path) -> list[str]:
    """The files under `path` this process has open."""
    return [name for name in open_files().values() if name.startswith(f"{path}/")]


def fill(filesystem: Path) -> Path:
    """Write a file until the filesystem has no room left (ENOSPC); it is returned, to free."""
    filler = filesystem / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_e_unavailable_not_a_corrupt_store_nor_a_bug(sw):
    """No room on the store's disk: E_UNAVAILABLE (exit 11, `details.reason: "disk_full"`), for
    a write whose WAL frames find no room (SQLite's SQLITE_FULL, which was E_INTERNAL, "a bug in
    swarmctl") and for any command that must first make the -shm file SQLite maps (its "disk I/O
    error", which was E_STORE_CORRUPT with the advice to restore a backup). Nothing is written;
    once there is room, the same write goes through and the store passes its checks."""
    disk = sw.tmp / "disk"
    with small_filesystem(disk):
        store = disk / "store"
        sw.ok("--as", ALICE, "init", str(store))  # leaves the database alone: no -wal, no -shm
        assert sorted(p.name for p in store.iterdir()) == ["swarmops.db"]
        filler = fill(disk)
        no_shm = [sw("--repo", str(store), "op", "log"), sw("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "m")]
        assert held_under(disk) == []  # a store that failed to open was closed, not left to the GC
        filler.unlink()
        sw.ok("--repo", str(store), "op", "log")  # now with its -wal and -shm
        filler = fill(disk)
        no_wal_room = sw("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "x" * 60_000)
        log = sw.ok("--repo", str(store), "op", "log")  # reads need no room once the -shm is there
        filler.unlink()
        again = sw.ok("--repo", str(store), "--as", ALICE, "changeset", "create", "-m", "x" * 60_000)
        checked = sw.ok("--repo", str(store), "store", "check")
        assert held_under(disk) == []
    for ran in [*no_shm, no_wal_room]:
        error = ran.error
        assert (ran.exit, error["code"], error["details"]["reason"]) == (11, "E_UNAVAILABLE", "disk_full"), ran.stdout
        assert error["message"].startswith("the disk that holds the store is full") and "Free space" in error["hint"]
    assert [op["op"] for op in log["ops"]] == [1]
    assert again["op"] == 2 and checked["problems"] == []


def test_a_disk_with_no_inode_left_is_e_unavailable_too(sw):
    """Room enough, but no inode for the -wal and -shm files SQLite makes beside the database
    (SQLite's "unable to open database file", which was E_STORE_CORRUPT), for a new store's
    directory (init's mkdir, which was E_INVALID_ARG) or its database (which was E_FORBIDDEN, its
    not-yet-made file blamed as unreadable): disk_full as well, and no half-made store left."""
    disk = sw.tmp / "disk"
    with small_filesystem(disk, "size=16m,nr_inodes=40"):
        store = disk / "store"
        sw.ok("--as", ALICE, "init", str(store))
        (disk / "empty").mkdir()
        made = []
        with pytest.raises(OSError) as full:
            while True:
                made.append(disk / f"file-{len(made)}")
                made[-1].touch()
        assert full.value.errno == errno.ENOSPC
        ran = sw("--repo", str(store), "op", "log")
        inits = [sw("--as", ALICE, "init", str(disk / "new")), sw("--as", ALICE, "init", str(disk / "empty"))]
        assert held_under(disk) == [] and not (disk / "new").exists() and list((disk / "empty").iterdir()) == []
        made[0].unlink(), made[1].unlink()
        log = sw.ok("--repo", str(store), "op", "log")
    for failed in (ran, *inits):  # init's own mkdir, and SQLite making the database: disk_full too
        assert (failed.exit, failed.error["code"], failed.error["details"]["reason"]) == (11, "E_UNAVAILABLE", "disk_full"), failed.stdout
    assert [op["op"] for op in log["ops"]] == [1]


def test_a_new_store_on_a_nearly_full_disk_is_whole_or_not_there(sw):
    """`init`, `store copy` and `demo` with a little room left: the new database's WAL could not
    be folded into its file when it closed (silently), the file was linked into place without
    it, and the command said E_STORE_CORRUPT "Nothing was written" of a malformed store that then
    refused the retry as "already a store". Now: a whole store, or E_UNAVAILABLE (disk_full) and
    nothing there, not even the directory it made; `demo`'s hint says what it left."""
    source = sw.tmp / "source"
    sw.ok("--as", ALICE, "init", str(source))
    (sw.tmp / "big.txt").write_text("x" * 300_000)
    sw.ok("--repo", str(source), "--as", ALICE, "changeset", "create", "-m", "big", "--ref", "main", "--file", "big.txt", cwd=sw.tmp)
    disk = sw.tmp / "disk"
    seen = set()
    with small_filesystem(disk, "size=2m"):
        filler = fill(disk)
        full = filler.stat().st_size
        for room_kib in range(8, 1400, 48):
            os.truncate(filler, full - room_kib * 1024)
            for words in (["init"], ["store", "copy", str(source)], ["demo"]):
                ran = sw("--as", ALICE, *words, str(disk / "new"))
                if ran.exit == 0:
                    assert sw.ok("--repo", str(disk / "new"), "store", "check")["problems"] == []
                    seen.add("made")
                elif words == ["demo"] and "history stopped short: remove it" in ran.error["hint"]:
                    assert sw.ok("--repo", str(disk / "new"), "store", "check")["problems"] == []  # whole, and short
                    seen.add("demo stopped short")
                else:
                    assert (ran.exit, ran.error["code"], ran.error["details"].get("reason")) == (11, "E_UNAVAILABLE", "disk_full"), ran.stdout
                    assert not (disk / "new").exists(), (room_kib, words, sorted(os.listdir(disk / "new")))
                    seen.add("refused")
                shutil.rmtree(disk / "new", ignore_errors=True)
    assert {"made", "refused"} <= seen, seen


def test_every_e_internal_carries_a_correlation_id(tmp_path):
    """The spec: E_INTERNAL "carries a correlation id". The one a store's driver error became
    (an SQLite or PostgreSQL error swarmctl does not expect) carried none."""
    import psycopg

    from swarmctl.envelope import internal_error
    from swarmctl.store import errors as sqlite_errors
    from swarmctl.store.postgres import errors as pg_errors
    from swarmctl.store.postgres.url import parse

    odd = sqlite3.OperationalError("something swarmctl does not expect")
    odd.sqlite_errorcode, odd.sqlite_errorname = 1, "SQLITE_ERROR"  # SQLITE_ERROR: no typed meaning
    made = [
        sqlite_errors.translate(odd, tmp_path),
        pg_errors.translate(psycopg.errors.FeatureNotSupported("something swarmctl does not expect"), parse("postgresql://h/db")),
        internal_error(ValueError("boom")),
    ]
    for error in made:
        cid = error.details["correlation_id"]
        assert error.code == "E_INTERNAL" and len(cid) == 12 and error.message.endswith(f"[correlation id {cid}]")
        assert "correlation id" in error.hint


@pytest.mark.parametrize(
    ("actor", "said"),
    [
        ("worker-17", "expected kind/name"),
        ("AGENT/x", "its kind 'AGENT' must be lower case"),
        ("k" * 33 + "/x", "is more than 32 characters"),
        ("agent/" + "x" * 129, "its name is 129 characters, more than 128"),
        ("agent/wörker", "may hold only ASCII letters, digits"),
        ("agent/-x", "must start with a letter or digit"),
    ],
)
def test_an_invalid_actor_says_which_part_breaks_which_rule(sw, actor, said):
    """Every invalid actor said "expected kind/name", also of `AGENT/x` or a name too long,
    which are kind/name: the message says which part is wrong and how."""
    ran = sw("--as", actor, "init", str(sw.store))
    assert (ran.exit, ran.error["code"], ran.error["details"]) == (2, "E_INVALID_ARG", {"actor": actor}), ran.stdout
    assert not sw.store.exists()
    assert said in ran.error["message"], ran.error["message"]


def test_a_message_too_long_for_an_envelope_keeps_its_end_which_says_what_is_wrong(sw):
    """A message echoing a 5,000-character ref name was cut at 1,000 characters, its reason
    with it (`invalid ref name 'aaa…… [4053 more characters]`): it is cut in its middle."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    ran = sw("--repo", str(sw.store), "--as", ALICE, "ref", "set", "a" * 5000, "main")
    message = ran.error["message"]
    assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG") and len(message) < 1100, len(message)
    assert message.startswith("invalid ref name 'aaa") and message.endswith("': it is longer than 255 characters"), message
    assert "more characters] …" in message


@pytest.mark.parametrize("limit", [5, 6])
def test_store_check_out_of_file_descriptors_is_e_unavailable_not_a_corrupt_store(sw, limit):
    """`store check` run with `ulimit -n 6` said a sound store "fails 3 of its checks" (BLAKE3's
    module could not be opened: "the store cannot be read here"), E_STORE_CORRUPT, restore a
    backup: a cron check's false alarm. It is E_UNAVAILABLE, safe to retry, as `op log` is there."""
    import resource

    build_golden_store(sw)

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    ran = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), "store", "check"], capture_output=True, text=True,
                         env=sw.env, cwd=sw.tmp, stdin=subprocess.DEVNULL, preexec_fn=low, timeout=60)
    error = json.loads(ran.stdout)["error"]
    assert (ran.returncode, error["code"], error["details"]["reason"]) == (11, "E_UNAVAILABLE", "too_many_open_files"), ran.stdout
    assert sw.ok("--repo", str(sw.store), "store", "check")["problems"] == []
