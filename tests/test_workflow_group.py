"""Where a run's commands start (swarmctl/tools/workflow/group.py): a process group led by a
holder, saved with the step before its command starts, used again by the next command unless
the last one left something behind in it, or was killed with it. Real processes throughout."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from core_helpers import child_commands
from wfkit import WAIT_S, Kit
from wfkit import envelope as wf_envelope

from swarmctl import pids
from swarmctl.tools.workflow import process
from swarmctl.tools.workflow.group import CommandGroup

# A command that says which process group it runs in (and then what it is asked to).
SAY_GROUP = [sys.executable, "-c", "import os, sys; print(os.getpgid(0)); sys.stdout.flush(); exec(sys.argv[1] if len(sys.argv) > 1 else '')"]


def run(group: CommandGroup, tmp_path: Path, *code: str, timeout_s: float = WAIT_S, on_start=None) -> process.CommandOutcome:
    return process.run_command([*SAY_GROUP, *code], cwd=tmp_path, env=os.environ, timeout_s=timeout_s, group=group,
                               on_start=on_start, inherit_env=True)


def members(pgid: int) -> list[int]:
    """The live processes of group `pgid` but its leader."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != pgid:
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_command_starts_in_the_group_handed_to_on_start_only_after_it_returns(tmp_path):
    seen = []

    def on_start(leader):
        assert pids.group_alive(leader.pid, leader.start)  # the group exists before the command
        assert seen or not (tmp_path / "ran").exists()  # the first command has not run yet
        seen.append(leader)

    with CommandGroup() as group:
        first = run(group, tmp_path, "open('ran', 'w')", on_start=on_start)
        second = run(group, tmp_path, on_start=on_start)
        assert first.ok and second.ok
        assert int(first.stdout_tail) == int(second.stdout_tail) == seen[0].pid == seen[1].pid  # one group, two commands
        holder = seen[0]
    wait_until(lambda: not pids.group_alive(holder.pid, holder.start), "the holder outlived close()")


def test_a_command_whose_group_cannot_be_saved_never_starts(tmp_path):
    class Refused(Exception):
        pass

    def on_start(leader):
        raise Refused

    with CommandGroup() as group:
        with pytest.raises(Refused):
            run(group, tmp_path, "open('ran', 'w')", on_start=on_start)
        leader = group.ready()
        assert pids.joined_since(leader.pid, leader.pid) is False  # nothing but the holder ever joined
    assert not (tmp_path / "ran").exists()


def test_after_a_timeout_kills_the_group_the_next_command_gets_a_new_one(tmp_path):
    with CommandGroup() as group:
        slow = run(group, tmp_path, "import time; time.sleep(60)", timeout_s=0.2)
        assert slow.timed_out
        killed = int(slow.stdout_tail) if slow.stdout_tail else None
        old = group.leader
        assert not pids.group_alive(old.pid, old.start)  # the command and its holder, gone
        after = run(group, tmp_path)
        assert after.ok and int(after.stdout_tail) == group.leader.pid != old.pid
        assert killed in (None, old.pid)


def test_an_interrupt_while_the_command_starts_kills_it_though_swarmctl_never_got_its_pid(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) can come after the command runs but before Popen has returned its
    pid to swarmctl, on a busy machine (CI once saw a command outlive Ctrl-C so): the group the
    command went into is killed all the same, and the command is reaped, not left a zombie."""
    real = subprocess.Popen
    started = []

    def popen_then_interrupt(args, **kwargs):
        proc = real(args, **kwargs)
        if kwargs.get("process_group"):  # the command (the holder starts with process_group=0)
            started.append(proc.pid)
            wait_until((tmp_path / "up").exists, "the command never ran")
            raise KeyboardInterrupt
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_interrupt)
    leaders = []
    with CommandGroup() as group, pytest.raises(KeyboardInterrupt):
        run(group, tmp_path, "open('up', 'w').close(); import time; time.sleep(600)", on_start=leaders.append)
    (pid,) = started
    assert not Path(f"/proc/{pid}").exists(), "the command outlived the interrupt, or was left a zombie"
    assert not pids.group_alive(leaders[0].pid, None)


def test_a_command_that_leaves_a_process_behind_leaves_the_group_to_it(tmp_path):
    """The next command gets a new group: a timeout that kills it spares what the first left."""
    with CommandGroup() as group:
        first = run(group, tmp_path, "import subprocess; print(subprocess.Popen(['sleep', '300']).pid)")
        old_group, left = (int(n) for n in first.stdout_tail.split())
        try:
            assert old_group == os.getpgid(left)
            slow = run(group, tmp_path, "import time; time.sleep(60)", timeout_s=0.2)
            assert slow.timed_out and group.leader.pid != old_group
            assert pids.alive(left) and os.getpgid(left) == old_group  # not killed with the second's group
        finally:
            os.kill(left, signal.SIGKILL)


def test_an_output_file_another_process_still_holds_is_not_read_as_the_next_commands_output(tmp_path):
    """A process the first command left (in a session of its own, so not in the group) writes
    to the first command's stdout while the second runs: none of it is the second's output."""
    late = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while not os.path.exists('go'): time.sleep(0.01)\n"
        "    print('written late by the first'); sys.stdout.flush(); open('wrote', 'w').close(); os._exit(0)\n"
    )
    second = "import os, time\nopen('go', 'w').close()\nwhile not os.path.exists('wrote'): time.sleep(0.01)\nprint('second')"
    with CommandGroup() as group:
        assert run(group, tmp_path, late).ok
        out = run(group, tmp_path, second)
    assert out.ok and out.stdout_tail.split()[1:] == ["second"], out.stdout_tail


# --- through `workflow run` and `workflow rollback` --------------------------------------------

WAITS = """\
    #!/bin/sh
    echo "$1" >> marks.log
    while [ ! -e "$1.go" ]; do sleep 0.01; done
    """


def _step(kit: Kit, wf: str, name: str) -> dict:
    steps = kit("workflow", "status", wf, actor=None).result["steps"]
    return next(s for s in steps if s["name"] == name)


def test_a_command_never_runs_if_swarmctl_dies_before_saving_its_step(sw):
    """The store stays locked from the moment the first command ends: the second step's
    `running` cannot commit, swarmctl is killed, and the second command never ran."""
    kit = Kit(sw)
    (kit.dir / "waits.sh").write_text(WAITS.replace("    ", ""))
    (kit.dir / "waits.sh").chmod(0o755)
    kit.write('name = "w"\n[[step]]\nname = "first"\nrun = ["./waits.sh", "first"]\n'
              '[[step]]\nname = "second"\nrun = ["./mark.sh", "second"]\n')
    proc = kit.popen("workflow", "run", "flow.toml", env={"SWARMCTL_LOCK_TIMEOUT": "600"})
    try:
        wait_until(lambda: kit.marks() == ["first"], "the first step never started")
        wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
        holder = _step(kit, wf, "first")["command_pid"]
        lock = sqlite3.connect(kit.repo + "/swarmops.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the store's write lock: no commit gets past it
        (kit.dir / "first.go").touch()
        wait_until(lambda: members(holder) == [], "the first command never ended")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
    lock.execute("ROLLBACK")
    lock.close()
    wait_until(lambda: not pids.group_alive(holder, None), "the holder outlived swarmctl")
    second = _step(kit, wf, "second")
    assert second["status"] == "pending" and kit.marks() == ["first"]


def test_a_holder_killed_mid_step_does_not_stop_the_command_nor_the_run(sw):
    kit = Kit(sw)
    (kit.dir / "waits.sh").write_text(WAITS.replace("    ", ""))
    (kit.dir / "waits.sh").chmod(0o755)
    kit.write('name = "w"\n[[step]]\nname = "first"\nrun = ["./waits.sh", "first"]\n'
              '[[step]]\nname = "second"\nrun = ["./mark.sh", "second"]\n')
    proc = kit.popen("workflow", "run", "flow.toml")
    wait_until(lambda: kit.marks() == ["first"], "the first step never started")
    wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
    holder = _step(kit, wf, "first")["command_pid"]
    os.kill(holder, signal.SIGKILL)  # the holder alone: its group lives on with the command
    running = _step(kit, wf, "first")
    (kit.dir / "first.go").touch()
    out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, (out, err)
    assert running["status"] == "running" and running["command_pid"] == holder
    status = kit("workflow", "status", wf, actor=None).result
    assert [s["status"] for s in status["steps"]] == ["success", "success"]
    assert kit.marks() == ["first", "second"]


def test_a_rollback_command_after_one_killed_by_its_timeout_runs_in_a_new_group(sw):
    """The later step's undo times out (its group, holder and all, is killed); the earlier
    step's undo still runs, in a group of its own."""
    kit = Kit(sw)

    def record(word: str, then: str = "") -> str:  # writes its group to WORD.pgid
        return f'["{sys.executable}", "-c", "import os, time; open(\'{word}.pgid\', \'w\').write(str(os.getpgid(0))){then}"]'

    _, wf = kit.run(
        'name = "w"\n'
        f'[[step]]\nname = "a"\nrun = ["./mark.sh", "a"]\nrollback = {record("undo-a")}\n'
        f'[[step]]\nname = "b"\nrun = ["./mark.sh", "b"]\nrollback = {record("undo-b", "; time.sleep(300)")}\n'
        "timeout_s = 3\n"  # for mark.sh, time enough however loaded the machine
    )
    rolled = kit("workflow", "rollback", wf, "--confirm", "--include-completed")
    results = {r["step"]: r for r in rolled.error["details"]["results"]}
    assert results["b"]["status"] == "rollback_failed" and results["b"]["timed_out"]
    assert results["a"]["status"] == "rolled_back"
    killed = int((kit.dir / "undo-b.pgid").read_text())
    assert not pids.group_alive(killed, None)
    assert int((kit.dir / "undo-a.pgid").read_text()) != killed
    assert kit.marks() == ["a", "b"]


def test_run_command_alone_makes_and_ends_its_own_group(tmp_path):
    done = process.run_command([*SAY_GROUP], cwd=tmp_path, env=os.environ, timeout_s=WAIT_S)
    leader = int(done.stdout_tail)
    assert done.ok and leader != os.getpgid(0)
    wait_until(lambda: not pids.group_alive(leader, None), "its holder outlived it")


def test_no_process_of_a_finished_run_is_left(sw):
    kit = Kit(sw)
    ran, wf = kit.run('name = "w"\n[[step]]\nname = "a"\nrun = ["./mark.sh", "a"]\n')
    assert ran.exit == 0
    holders = [argv for argv in child_commands(os.getpid()) if "swarmctl-holder" in argv]
    assert holders == []


def test_the_argv_is_executed_as_it_is_no_shell_runs_a_script_without_its_hash_bang_line(tmp_path):
    (tmp_path / "plain.sh").write_text("echo ran > ran.log\n")
    (tmp_path / "plain.sh").chmod(0o755)
    outcome = process.run_command(["./plain.sh"], cwd=tmp_path, env=os.environ, timeout_s=WAIT_S)
    assert outcome.error == "cannot start ./plain.sh: Exec format error" and not (tmp_path / "ran.log").exists()


STUBBORN = """\
#!/bin/sh
trap '' TERM INT
(trap '' TERM INT; exec sleep 300) &
echo $$ > stubborn.pid
while :; do sleep 1; done
"""


def _ended_or_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_second_interrupt_while_the_group_is_killed_ends_its_grace_not_its_killing(sw, second):
    """Ctrl-C, then Ctrl-C or SIGTERM again, to `workflow run` while a command that ignores
    both runs: the second came in the grace between SIGTERM and SIGKILL, and swarmctl left with
    the group alive and its step saved `interrupted` with no process to wait for, so `resume
    --retry` ran a second copy beside the first. The second interrupt now ends the grace:
    SIGKILL at once, and the group is gone before swarmctl says anything."""
    kit = Kit(sw)
    (kit.dir / "stubborn.sh").write_text(STUBBORN)
    (kit.dir / "stubborn.sh").chmod(0o755)
    kit.write('name = "w"\n[[step]]\nname = "a"\nrun = ["./stubborn.sh"]\n')
    proc = kit.popen("workflow", "run", "flow.toml")
    pgid = None
    try:
        wait_until(lambda: kit._pid_written("stubborn"), "the command never started")
        pgid = os.getpgid(int((kit.dir / "stubborn.pid").read_text()))
        proc.send_signal(signal.SIGINT)
        # The holder leading the group does not ignore SIGTERM: once it has ended, swarmctl has
        # sent the group SIGTERM and waits out the grace.
        wait_until(lambda: _ended_or_zombie(pgid), "swarmctl never sent the group SIGTERM")
        proc.send_signal(second)
        code, envelope = wf_envelope(proc)
        assert code == 130 and envelope["error"]["code"] == "E_INTERRUPTED", envelope
        assert not pids.group_alive(pgid, None), "the command outlived swarmctl"
        wf = envelope["error"]["details"]["workflow"]
        step = _step(kit, wf, "a")
        assert step["status"] == "interrupted" and step["command_pid"] is None, step
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pgid is not None:
            kit.kill_group(pgid)


@pytest.mark.parametrize("steps", [1, 2])
def test_a_store_locked_once_a_command_ran_names_the_workflow_and_never_says_to_run_it_again(sw, steps):
    """The store is locked from the moment the command ends, past the lock timeout: the
    outcome cannot be saved. E_BUSY said "nothing was written; retry" with no workflow named,
    though the workflow existed and its command had run: run again, the file would run it twice.
    With a step after it, the error named that next step (whose start would have saved the
    outcome), which never ran, and not the step shown `interrupted` (found by a probe)."""
    kit = Kit(sw)
    (kit.dir / "waits.sh").write_text(WAITS.replace("    ", ""))
    (kit.dir / "waits.sh").chmod(0o755)
    second = '[[step]]\nname = "second"\nrun = ["./waits.sh", "second"]\n' if steps == 2 else ""
    kit.write('name = "w"\n[[step]]\nname = "first"\nrun = ["./waits.sh", "first"]\n' + second)
    proc = kit.popen("workflow", "run", "flow.toml", env={"SWARMCTL_LOCK_TIMEOUT": "0.5"})
    lock = None
    try:
        wait_until(lambda: kit.marks() == ["first"], "the first step never started")
        wf = kit("workflow", "list", actor=None).result["workflows"][0]["id"]
        lock = sqlite3.connect(kit.repo + "/swarmops.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the store's write lock, held until swarmctl has answered
        (kit.dir / "first.go").touch()
        code, envelope = wf_envelope(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    error = envelope["error"]
    assert code == 8 and error["code"] == "E_BUSY", envelope
    assert error["details"]["workflow"] == wf and error["details"]["step"] == "first", error
    assert "nothing was written" not in error["hint"] and "do not run its file again" in error["hint"], error
    assert error["next"]["tool"] == "workflow_status" and error["next"]["arguments"] == {"workflow": wf}
    assert kit.marks() == ["first"]


def test_a_chatty_command_takes_no_more_disk_than_what_is_read_of_its_output(tmp_path):
    """A step that printed for as long as its timeout let it (`yes`: a gigabyte in seconds)
    filled the disk the store is on: all of it went to a temporary file, of which only the end
    is read. What is before that end is given back to the disk while it runs; the end is whole."""
    wrote = 64 << 20
    seen: list[tuple[int, int]] = []  # the output file's size, and what of the disk it takes

    def look() -> None:  # every 0.1 s while the command runs
        st = os.fstat(group.stdout.file.fileno())
        seen.append((st.st_size, st.st_blocks * 512))
        if len([size for size, _ in seen if size > wrote]) >= 2:  # looked twice since it all was written
            (tmp_path / "go").touch()

    script = f"head -c {wrote} /dev/zero; echo THE-END; while [ ! -e go ]; do sleep 0.05; done"
    with CommandGroup() as group:
        outcome = process.run_command(["sh", "-c", script], cwd=tmp_path, env=os.environ, timeout_s=WAIT_S, group=group,
                                      tick=(look, 0.1), inherit_env=True)
    assert outcome.ok and outcome.stdout_tail.endswith("\x00THE-END\n"), outcome
    after = [used for size, used in seen if size > wrote]
    assert after[-1] <= 20 << 20, seen  # the 1 MiB read (SCRUB_BYTES), and at most 16 MiB more (FREE_STEP)
