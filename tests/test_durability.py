"""A committed change is on the disk before anyone is told of it, with one disk sync as a rule.

A writing connection runs with synchronous=NORMAL and syncs the WAL itself right after each
COMMIT (wal.WalFile), and the store's directory only the first time for a -wal file (a mark on
the file says it was done); no reader begins a snapshot between the two. SQLite with
synchronous=FULL synced the directory at every connection's first commit: two syncs for a
command that commits one change. These tests watch the real system calls of real processes
with strace, and the WAL's size over many processes.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, as_, build_golden_store, problems
from swarm import swarmctl_argv

from swarmctl.store.wal import WAL_NAMED, WalFile
from swarmctl.store.schema import DB_FILE

pytestmark = pytest.mark.backends("sqlite")

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (apt-get install strace)")

CALL = re.compile(r"^(?P<pid>\d+) +(?P<name>\w+)\((?P<args>.*)\) += (?P<ret>-?\d+)")


def traced(sw, *args: str) -> tuple[dict, list[tuple[str, str, int]]]:
    """Run swarmctl under strace: its envelope, and the calls that matter here, in order, each as
    (name, first argument, return value)."""
    log = sw.tmp / "strace.log"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=openat,fsync,fdatasync,write", "-o", str(log), *swarmctl_argv(), *args],
        cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = []
    for line in log.read_text().splitlines():
        found = CALL.match(line)
        if found:
            calls.append((found["name"], found["args"].split(", ")[0 if found["name"] != "openat" else 1], int(found["ret"])))
    import json

    return json.loads(proc.stdout), calls


def marks_kept(directory: Path) -> bool:
    """Whether files here keep extended attributes (tmpfs before Linux 6.6 keeps none)."""
    probe = directory / "xattr-probe"
    probe.touch()
    try:
        os.setxattr(probe, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink()


def syncs_before_printing(calls: list[tuple[str, str, int]]) -> tuple[list[str], bool]:
    """What each sync call synced (the path its descriptor was opened with), and whether all of
    them came before the envelope was written to stdout."""
    opened: dict[str, str] = {}
    synced, printed_at, last_sync = [], None, -1
    for i, (name, arg, ret) in enumerate(calls):
        if name == "openat" and ret >= 0:
            opened[str(ret)] = arg.strip('"')
        elif name in ("fsync", "fdatasync"):
            synced.append(f"{name} {opened.get(arg, arg)}")
            last_sync = i
        elif name == "write" and arg == "1" and printed_at is None:
            printed_at = i
    return synced, printed_at is not None and last_sync < printed_at


@needs_strace
def test_a_write_syncs_the_wal_once_before_it_prints_its_envelope(sw):
    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # the -wal file is there, marked
    envelope, calls = traced(sw, *as_(sw, ALICE), "ref", "set", "release/v3", "main")
    assert envelope["ok"], envelope
    synced, in_time = syncs_before_printing(calls)
    wal = f"fdatasync {sw.store / DB_FILE}-wal"
    # Where files keep no marks, the directory too, at each process's first commit (as SQLite did).
    assert synced == ([wal] if marks_kept(sw.store) else [wal, f"fsync {sw.store}"]), synced
    assert in_time, "the envelope was printed before the commit was synced"


@needs_strace
def test_the_first_write_to_a_new_wal_syncs_the_directory_once_and_marks_the_file(sw):
    """`init` leaves the store one file: the first write makes the -wal file, so the directory
    that names it is synced too, before the envelope; the next process finds the mark."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    wal = Path(f"{sw.store / DB_FILE}-wal")
    assert not wal.exists()
    envelope, calls = traced(sw, *as_(sw, ALICE), "changeset", "create", "-m", "first")
    assert envelope["ok"], envelope
    synced, in_time = syncs_before_printing(calls)
    assert f"fsync {sw.store}" in synced and f"fdatasync {wal}" in synced and in_time, synced
    envelope, calls = traced(sw, *as_(sw, ALICE), "changeset", "create", "-m", "second")
    assert envelope["ok"], envelope
    if marks_kept(sw.store):
        directory = os.stat(sw.store)
        assert os.getxattr(wal, WAL_NAMED) == f"{directory.st_dev}:{directory.st_ino}:{wal.stat().st_ino}".encode()
        assert syncs_before_printing(calls) == ([f"fdatasync {wal}"], True)
    else:  # no marks: each process syncs the directory at its first commit, as SQLite did
        assert syncs_before_printing(calls) == ([f"fdatasync {wal}", f"fsync {sw.store}"], True)


@needs_strace
@pytest.mark.parametrize("command", ["init", "store copy"])
def test_making_a_store_syncs_its_own_files_never_every_filesystem(sw, command):
    """A store is made on SQLite's own connection, which syncs its commits itself: the sync after
    a commit looked for a -wal file beside a database of another name, found none, and synced
    every filesystem of the machine (sync(2)) at each `init` and `store copy`."""
    if command == "store copy":
        build_golden_store(sw)
    args = ["--as", ALICE, "init", str(sw.tmp / "made")] if command == "init" else [
        *as_(sw, ALICE), "store", "copy", str(sw.store), str(sw.tmp / "made")]
    log = sw.tmp / "sync.log"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=sync,syncfs", "-o", str(log), *swarmctl_argv(), *args],
        cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line for line in log.read_text().splitlines() if "sync" in line] == []


def test_a_copied_wal_is_not_taken_for_one_whose_name_is_on_disk(sw):
    """A copy that keeps extended attributes (cp -a) carries the mark of the file it was copied
    from: its directory is another, so the mark does not fit, and it is marked anew."""
    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")
    if not marks_kept(sw.store):
        pytest.skip("this filesystem keeps no extended attributes: there are no marks to copy")
    copy = sw.tmp / "copy"
    shutil.copytree(sw.store, copy)  # copy2: with the extended attributes
    wal = Path(f"{copy / DB_FILE}-wal")
    assert os.getxattr(wal, WAL_NAMED) == os.getxattr(f"{sw.store / DB_FILE}-wal", WAL_NAMED)
    copied = WalFile(str(copy / DB_FILE))
    try:
        size = copied.synced()
    finally:
        copied.close()
    directory = os.stat(copy)
    mark = f"{directory.st_dev}:{directory.st_ino}:{wal.stat().st_ino}".encode()
    assert copied.named == mark == os.getxattr(wal, WAL_NAMED)
    assert size == wal.stat().st_size > 0


def test_the_wal_stays_small_when_every_write_is_a_process_of_its_own(sw):
    """Each write opens the store anew, as one command does. SQLite's own checkpoint kept the
    WAL from growing only while some process held the store open: a process that opens it
    alone rebuilds the WAL's index and forgets what was checkpointed, so the WAL grew by each
    write for good (to 12 MiB here, and each write checkpointed all of it again)."""
    from swarmctl.store import Store
    from swarmctl.store.wal import WAL_LIMIT

    sw.ok("--as", ALICE, "init", str(sw.store))
    wal = Path(f"{sw.store / DB_FILE}-wal")
    sizes = []
    for i in range(12):  # 1 MiB of new pages each
        blob = os.urandom(1 << 20).hex()[: 1 << 20]
        path = sw.tmp / f"file{i}"
        path.write_text(blob)
        sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", f"big {i}", "--file", path.name, cwd=sw.tmp)
        sizes.append(wal.stat().st_size)
    assert max(sizes) <= WAL_LIMIT + (2 << 20), sizes
    assert min(sizes[4:]) < WAL_LIMIT, sizes  # folded, and grown again
    store = Store.open(sw.store, readonly=True)
    try:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        store.close()
    assert problems(sw.store) == []
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 13


def test_a_sync_that_fails_after_the_commit_says_the_change_is_committed_and_not_known_stored(sw):
    """The disk fails the sync (EIO, as a dying disk does; injected): the change is committed,
    and others may see it, so the command must not say that nothing was written."""
    build_golden_store(sw)
    reached = sw.tmp / "sync-reached"
    ran = sw.process(*as_(sw, ALICE), "ref", "set", "release/v2", "main", env={"SWARMCTL_FAULT": f"fail-sync:{reached}"})
    assert reached.exists()
    assert ran.exit == 11 and ran.error["code"] == "E_UNAVAILABLE", ran.stdout
    assert ran.error["details"] == {"repo": str(sw.store), "reason": "sync_failed", "committed": [7]}
    assert "Input/output error" in ran.error["message"] and "may be lost" in ran.error["hint"]
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 7
    assert problems(sw.store) == []


def held_by(writer: subprocess.Popen, wal: Path) -> None:
    """Wait until `writer` holds the -wal file's gate (its COMMIT under way or made, its sync
    not returned): an event, not a time."""
    import fcntl
    import time

    with open(wal, "rb") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                return
            assert writer.poll() is None, "the writer ended before it was seen holding the gate"
            time.sleep(0.002)


def slow_writer(sw, log: Path, *args: str, inject: tuple[str, ...] = ()) -> subprocess.Popen:
    """swarmctl under strace, each fdatasync held back 1.5 s (and whatever `inject` adds)."""
    specs = ("fdatasync:delay_enter=1500000", *inject)
    injected = [a for spec in specs for a in ("-e", f"inject={spec}")]
    traced = ",".join(spec.split(":")[0] for spec in specs)  # strace injects only into what it traces
    return subprocess.Popen(
        ["strace", "-f", "-qq", "-ttt", "-T", "-e", f"trace={traced}", *injected, "-o", str(log), *swarmctl_argv(), *args],
        cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def waiting(sw) -> dict[str, str]:
    """The environment of a process that must wait for the slow writer, however busy the machine."""
    return {**sw.env, "SWARMCTL_LOCK_TIMEOUT": "100"}


def sync_returned_at(log: Path) -> float:
    """When the writer's last sync returned (a signal in the middle of one makes it sync again)."""
    synced = [line for line in log.read_text().splitlines() if "fdatasync(" in line][-1]
    began, took = re.search(r"(\d+\.\d+) fdatasync\(.*<(\d+\.\d+)>", synced).groups()
    return float(began) + float(took)


@needs_strace
@pytest.mark.parametrize("other", ["reader", "refused writer"])
def test_no_one_reads_a_commit_between_it_and_its_sync(sw, other):
    """The writer's sync is held back 1.5 s (strace injects the delay): a reader that begins
    while the writer holds the -wal file's gate ends after that sync returned, and sees the
    change; so does a write that the change makes refuse (its E_CAS_MISMATCH names the op).
    Both read the change at once, before it was on disk (found by probes)."""
    import json
    import time

    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # op 7; the -wal file is there
    log = sw.tmp / "writer.strace"
    writer = slow_writer(sw, log, *as_(sw, ALICE), "ref", "set", "feat", "main", "--create")
    try:
        held_by(writer, Path(f"{sw.store / DB_FILE}-wal"))
        args = ["--repo", str(sw.store), "op", "log", "-n", "1"] if other == "reader" else [
            *as_(sw, AGENT), "ref", "set", "feat", "release/v1", "--create"]
        ran = subprocess.run([*swarmctl_argv(), *args], cwd=sw.tmp, env=waiting(sw), stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
        ended = time.time()
        out, err = writer.communicate(timeout=120)
    finally:
        writer.kill()
    assert writer.returncode == 0 and json.loads(out)["op"] == "ref_set", out + err
    seen = json.loads(ran.stdout)
    if other == "reader":
        assert seen["result"]["ops"][0]["op"] == 8
    else:
        assert seen["error"]["code"] == "E_CAS_MISMATCH" and seen["error"]["details"]["conflicts"][0]["moved_by"] == [8]
    assert ended >= sync_returned_at(log), (ended, log.read_text())


@needs_strace
def test_a_signal_during_the_commit_leaves_the_gate_held_until_the_sync(sw):
    """SIGTERM while COMMIT writes the WAL (each write held back 0.1 s): the change is
    committed, so the sync is made before the gate opens and the signal has its way
    (E_INTERRUPTED naming the op). The gate was let go first, and a reader read the change
    while its sync was still under way (found by a probe)."""
    import json
    import signal
    import time

    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")
    log = sw.tmp / "writer.strace"
    writer = slow_writer(sw, log, *as_(sw, ALICE), "ref", "set", "feat", "main", "--create",
                         inject=("pwrite64:delay_enter=100000",))
    try:
        held_by(writer, Path(f"{sw.store / DB_FILE}-wal"))
        child = int(subprocess.run(["pgrep", "-P", str(writer.pid)], capture_output=True, text=True).stdout.split()[0])
        os.kill(child, signal.SIGTERM)
        ran = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), "op", "log", "-n", "1"], cwd=sw.tmp,
                             env=waiting(sw), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        ended = time.time()
        out, err = writer.communicate(timeout=120)
    finally:
        writer.kill()
    interrupted = json.loads(out)
    assert interrupted["error"]["code"] == "E_INTERRUPTED" and interrupted["error"]["details"]["committed"] == [8], out + err
    assert json.loads(ran.stdout)["result"]["ops"][0]["op"] == 8
    assert ended >= sync_returned_at(log), (ended, log.read_text())


def test_a_gate_held_past_the_lock_timeout_is_e_busy_never_a_wait_for_good(sw):
    """A writer stopped between its commit and its sync (a hung disk, Ctrl-Z) holds the gate;
    here the test holds it. A read and a write each wait up to SWARMCTL_LOCK_TIMEOUT, then
    E_BUSY (exit 8), nothing written. They waited for good (found by a probe)."""
    import fcntl

    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # op 7
    env = {"SWARMCTL_LOCK_TIMEOUT": "1"}
    with open(f"{sw.store / DB_FILE}-wal", "rb") as wal:
        fcntl.flock(wal, fcntl.LOCK_EX)
        read = sw.process("--repo", str(sw.store), "op", "log", "-n", "1", env=env)
        write = sw.process(*as_(sw, ALICE), "ref", "set", "release/v3", "main", env=env)
        fcntl.flock(wal, fcntl.LOCK_UN)
    for ran in (read, write):
        assert ran.exit == 8 and ran.error["code"] == "E_BUSY", ran.stdout
        assert "between a commit and its sync" in ran.error["message"]
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 7


def test_a_group_whose_sync_fails_names_every_op_of_the_group(sw):
    """`call --lines` commits the calls it has in hand as one group; the sync after that commit
    fails (injected): each call's envelope names the group's ops, not the last one alone (each
    said [5], found by a probe)."""
    import json

    build_golden_store(sw)  # ops 1-6
    lines = "".join(
        json.dumps({"tool": "ref_set", "arguments": {"name": f"r{i}", "target": "main", "create": True}, "id": i}) + "\n"
        for i in range(3)
    )
    reached = sw.tmp / "sync-reached"
    ran = sw.process(*as_(sw, ALICE), "call", "--lines", input=lines, env={"SWARMCTL_FAULT": f"fail-sync:{reached}"})
    envelopes = [json.loads(line) for line in ran.stdout.splitlines()]
    assert reached.exists() and len(envelopes) == 3, ran.stdout + ran.stderr
    for envelope in envelopes:
        assert envelope["error"]["code"] == "E_UNAVAILABLE", envelope
        assert envelope["error"]["details"]["committed"] == [7, 8, 9], envelope
    assert sw.ok("--repo", str(sw.store), "op", "log", "-n", "1")["ops"][0]["op"] == 9
    assert problems(sw.store) == []


@needs_strace
def test_init_syncs_the_store_directory_once_its_database_is_in_place(sw):
    """`init` links the new database into place and reported success with that name not yet
    synced: a power cut could take the store away after `init` said it was made."""
    log = sw.tmp / "init.strace"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=link,linkat,openat,fsync,fdatasync,write", "-o", str(log),
         *swarmctl_argv(), "--as", ALICE, "init", str(sw.store)],
        cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [CALL.match(line) for line in log.read_text().splitlines()]
    calls = [c for c in calls if c]
    linked = max(i for i, c in enumerate(calls) if c["name"] in ("link", "linkat") and str(sw.store / DB_FILE) in c["args"])
    printed = min(i for i, c in enumerate(calls) if c["name"] == "write" and c["args"].startswith("1,"))
    opened, synced = {}, []
    for c in calls[linked:printed]:  # in order: a descriptor's number is used again once closed
        if c["name"] == "openat":
            opened[c["ret"]] = c["args"].split(", ")[1].strip('"')
        elif c["name"] in ("fsync", "fdatasync"):
            synced.append(opened.get(c["args"]))
    assert str(sw.store) in synced, synced


def test_a_group_that_cannot_pass_the_gate_is_rolled_back_and_the_door_writes_on(sw):
    """`call --lines`: the group's call is made (held at a fault point), then the test takes the
    gate, so the group's COMMIT waits past the lock timeout: the call is E_BUSY and the group
    rolled back (nothing written, the store's lock let go), and the next line, once the gate is
    free, is written. The group's transaction was left open, holding the store's lock."""
    import fcntl
    import json
    import time

    build_golden_store(sw)  # ops 1-6
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # op 7; the -wal file is there
    paused = sw.tmp / "paused"
    proc = subprocess.Popen(
        [*swarmctl_argv(), *as_(sw, ALICE), "call", "--lines"], cwd=sw.tmp, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env={**sw.env, "SWARMCTL_LOCK_TIMEOUT": "1", "SWARMCTL_FAULT": f"pause-after-call:{paused}"},
    )
    wal = open(f"{sw.store / DB_FILE}-wal", "rb")
    try:
        line = json.dumps({"tool": "ref_set", "arguments": {"name": "held", "target": "main", "create": True}})
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        while not paused.exists():  # the call made, in its group, not committed
            assert proc.poll() is None
            time.sleep(0.005)
        fcntl.flock(wal, fcntl.LOCK_EX)
        paused.unlink()
        first = json.loads(proc.stdout.readline())  # E_BUSY once the timeout has passed
        fcntl.flock(wal, fcntl.LOCK_UN)
        line = json.dumps({"tool": "ref_set", "arguments": {"name": "free", "target": "main", "create": True}})
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        while not paused.exists():
            assert proc.poll() is None
            time.sleep(0.005)
        paused.unlink()
        proc.stdin.close()
        second = json.loads(proc.stdout.readline())
        proc.wait(timeout=60)
    finally:
        wal.close()
        proc.kill()
    assert first["error"]["code"] == "E_BUSY", first
    assert second["ok"], second
    names = {r["name"] for r in sw.ok("--repo", str(sw.store), "ref", "list")["refs"]}
    assert "free" in names and "held" not in names
    assert problems(sw.store) == []


def test_a_read_that_fails_as_it_begins_leaves_no_transaction_open(sw):
    """Another process holds SQLite's read locks (the -shm file's read marks) until SQLite gives
    up (about 10 s: SQLITE_PROTOCOL, E_BUSY): the read fails, and once the locks are free the
    same open store (as a server keeps it) reads and writes. The read's BEGIN was left open,
    and the next read and write were E_INTERNAL (found by a probe)."""
    import sys

    from swarmctl.envelope import SwarmError
    from swarmctl.store import Store

    build_golden_store(sw)
    store = Store.open(sw.store)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 123); print('held', flush=True); sys.stdin.read()",
         f"{sw.store / DB_FILE}-shm"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SwarmError) as failed:
            with store.read() as conn:
                conn.execute("SELECT count(*) FROM ops").fetchone()
        assert failed.value.code == "E_BUSY", failed.value
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    try:
        assert not store.conn.in_transaction
        with store.read() as conn:
            assert conn.execute("SELECT count(*) FROM ops").fetchone()[0] == 6
        with store.write(ALICE) as w:
            w.conn.execute("SELECT 1")
    finally:
        store.close()


@pytest.mark.parametrize("how", ["name too long", "symlink loop"])
def test_paths_that_cannot_be_resolved_are_said_as_before(sw, how):
    """Store paths are strings now (a read imports no pathlib): a name too long is still
    E_INVALID_ARG naming it, not "no store" (os.path's checks took every failure for "not
    there", which also let discovery go past a store it could not look into, to one further
    up), and a path that could not be resolved is shown as pathlib showed it."""
    base = sw.tmp / "base"
    base.mkdir()
    if how == "name too long":
        ran = sw.process("--repo", f"{'y' * 256}/sub", "op", "log", cwd=base)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG") and "too long" in ran.error["message"], ran.stdout
        made = sw.process("--as", ALICE, "init", "/".join(["ab"] * 1500), cwd=base)
        assert (made.exit, made.error["code"]) == (2, "E_INVALID_ARG"), made.stdout
    else:
        (base / "loop1").symlink_to("loop2")
        (base / "loop2").symlink_to("loop1")
        ran = sw.process("--repo", "./loop1/", "op", "log", cwd=base)
        assert ran.error["code"] == "E_NOT_A_REPO" and ran.error["details"] == {"path": str(base / "loop1")}, ran.stdout


def test_a_server_whose_sync_failed_writes_on_with_an_unbroken_chain(sw):
    """`call --lines` keeps the store open across its lines. Its first write's sync fails (once,
    injected): E_UNAVAILABLE sync_failed, the op committed. The next write, on the same
    connection, links its op to that one, and the store passes its own check. (Written while
    reading the change once more: it passed before the connection was made to forget its newest
    op on such a failure too, since the chain reads the op before from the store where the
    connection's own record is not of it.)"""
    import json

    build_golden_store(sw)  # ops 1-6
    lines = "".join(json.dumps(line) + "\n" for line in [
        {"tool": "op_revert", "arguments": {"after": 5}},  # not grouped: its own transaction (op 7)
        {"tool": "ref_set", "arguments": {"name": "after", "target": "main", "create": True}},  # op 8
    ])
    reached = sw.tmp / "sync-reached"
    ran = sw.process(*as_(sw, ALICE), "call", "--lines", input=lines, env={"SWARMCTL_FAULT": f"fail-sync:{reached}"})
    first, second = [json.loads(line) for line in ran.stdout.splitlines()]
    assert first["error"]["details"]["reason"] == "sync_failed" and first["error"]["details"]["committed"] == [7], first
    assert second["ok"] and second["result"]["op"] == 8, second
    assert problems(sw.store) == []
