"""A committed change is on the disk before anyone is told of it, with one disk sync as a rule.

A writing connection runs with synchronous=NORMAL and syncs the WAL itself right after each
COMMIT (files.WalFile), and the store's directory only the first time for a -wal file (a
mark on the file says it was done); no reader begins a snapshot between the two: SQLite with synchronous=FULL synced the directory at every
connection's first commit, two syncs for a command that commits one change. These tests watch
the real system calls of real processes with strace, and the WAL's size over many processes.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core_helpers import ALICE, as_, build_golden_store, problems
from swarm import swarmctl_argv

from swarmctl.store.files import WAL_NAMED, WalFile
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
    from swarmctl.store.files import WAL_LIMIT

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


@needs_strace
def test_a_reader_that_begins_between_a_commit_and_its_sync_waits_for_the_sync(sw):
    """The writer's sync is held back 1.5 s (strace injects the delay): a reader that begins
    while the writer holds the -wal file's lock (its commit made, not yet synced) ends after
    that sync returned, and sees the change. It read the change at once, before it was on disk
    (found by a probe)."""
    import fcntl
    import json
    import time

    build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", "main")  # op 7; the -wal file is there
    log = sw.tmp / "writer.strace"
    writer = subprocess.Popen(
        ["strace", "-f", "-qq", "-ttt", "-T", "-e", "trace=fdatasync", "-e", "inject=fdatasync:delay_enter=1500000",
         "-o", str(log), *swarmctl_argv(), *as_(sw, ALICE), "ref", "set", "release/v3", "main"],
        cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        with open(f"{sw.store / DB_FILE}-wal", "rb") as wal:
            while True:  # until the writer holds the lock: its COMMIT made, its sync not returned
                try:
                    fcntl.flock(wal, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    fcntl.flock(wal, fcntl.LOCK_UN)
                except BlockingIOError:
                    break
                assert writer.poll() is None, "the writer ended before it was seen holding the lock"
                time.sleep(0.002)
        reader = subprocess.run([*swarmctl_argv(), "--repo", str(sw.store), "op", "log", "-n", "1"],
                                cwd=sw.tmp, env=sw.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        ended = time.time()
        out, err = writer.communicate(timeout=60)
    finally:
        writer.kill()
    assert writer.returncode == 0 and json.loads(out)["op"] == "ref_set", out + err
    assert json.loads(reader.stdout)["result"]["ops"][0]["op"] == 8
    [synced] = [line for line in log.read_text().splitlines() if "fdatasync(" in line]
    began, took = re.search(r"(\d+\.\d+) fdatasync\(.*<(\d+\.\d+)>", synced).groups()
    assert ended >= float(began) + float(took), (synced, ended)


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
