"""The suite's pytest hooks. What tests use is in plugins loaded here: swarm.py (running swarmctl as
a user would: the `sw`, `backend`, `pg_cluster` and `golden` fixtures) and core_helpers.py (stores
with a known history, the actors, looking at a store's tables directly; the `frozen_clock` fixture).
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

pytest_plugins = ["swarm", "core_helpers"]


def pin_the_environment() -> None:
    """The same terminal for every test, however pytest runs (plain, or in xdist's workers).

    Tables are as wide as the terminal: pytest's own capture leaves none, so they take the
    fallback width (120), but an xdist worker runs with COLUMNS=80 and LINES=24 set, and with
    the checkout prepended to PYTHONPATH. A shell may export COLUMNS too. Pinned here, before
    any test runs, for in-process commands and the processes tests start alike.
    """
    os.environ["COLUMNS"], os.environ["LINES"] = "120", "24"
    checkout = os.getcwd() + os.pathsep
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("PYTHONPATH", "").startswith(checkout):
        os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"].removeprefix(checkout)
        if not os.environ["PYTHONPATH"]:
            del os.environ["PYTHONPATH"]


def compile_the_package() -> None:
    """swarmctl's bytecode, compiled once before any test runs, as an installed package has it.

    The suite starts swarmctl as a process thousands of times. Where PYTHONDONTWRITEBYTECODE is
    set (it is here), a module whose .pyc is missing or older than its source (after any edit
    or merge) is compiled again in every one of those processes, and never written."""
    import compileall

    import swarmctl

    compileall.compile_dir(os.path.dirname(swarmctl.__file__), quiet=1)


def keep_the_rewritten_tests() -> None:
    """pytest compiles each test module with its asserts rewritten, and keeps what it compiled
    in __pycache__ unless Python may not write bytecode: where PYTHONDONTWRITEBYTECODE is set
    (it is here), every xdist worker rewrote all of them again on every run, 4 to 5 seconds of
    each worker's start. The suite's own processes keep them, as they keep swarmctl's
    (compile_the_package); the processes the tests start are left as the environment says."""
    sys.dont_write_bytecode = False


def take_ctrl_c() -> None:
    """Tests send SIGINT (Ctrl-C) to the swarmctl processes they start. A run started in the
    background by a non-interactive shell (`pytest &` in a script) has SIGINT ignored, and the
    processes it starts inherit that: swarmctl rightly never sees a Ctrl-C its starter chose
    to ignore, and those tests fail. The suite takes SIGINT as Python does by default, so
    that the processes it starts get it as they would at a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def temporary_files_in_memory(config: pytest.Config) -> None:
    """The tests' stores and files on a RAM filesystem where one has room (Linux's /dev/shm,
    4 GiB free or more), unless TMPDIR or --basetemp says where. The suite makes thousands of
    stores and commits each write with a sync, which a disk makes the tests wait for: about a
    sixth of the suite's time here. The code is the same (each sync is still made: a RAM
    filesystem answers at once); bench/perf.py measures the syncs on a disk. The processes the
    tests start, xdist's workers among them, inherit TMPDIR. Like /tmp, the directory is
    everyone's (the PostgreSQL cluster runs as its own user; some tests run as `nobody`)."""
    import tempfile

    if os.environ.get("TMPDIR") or config.option.basetemp:
        return
    try:
        room = os.statvfs("/dev/shm")
    except OSError:
        return
    if room.f_bavail * room.f_frsize < 4 << 30 or room.f_flag & os.ST_NOEXEC or not os.access("/dev/shm", os.W_OK | os.X_OK):
        return  # too small, or no running the scripts tests write there (Docker mounts it noexec)
    base = f"/dev/shm/swarmctl-tests-{os.getuid()}"
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o1777)
    os.environ["TMPDIR"] = base
    tempfile.tempdir = None  # asked again: TMPDIR


def same_cases_in_ci() -> None:
    """In CI (CI=true, as CI services set it) every property test draws the same cases on every
    run (hypothesis's `derandomize`: a seed from the test itself), so that what lands is decided
    by the code and not by the cases a run happened to draw. Run anywhere else, each run draws
    new cases, and one that fails is kept in .hypothesis/ and tried first next time. (A test
    with its own @seed keeps it either way.)"""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True)
    if os.environ.get("CI") == "true":  # as tests/pgcluster.py reads it
        settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    same_cases_in_ci()
    pin_the_environment()
    keep_the_rewritten_tests()
    take_ctrl_c()
    if not hasattr(config, "workerinput"):  # once, in the process that starts xdist's workers
        compile_the_package()
        temporary_files_in_memory(config)
    config.addinivalue_line("markers", "backends(*names): run the test on each kind of store named")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject.toml's addopts): one worker more than this process may use CPUs.

    Many tests wait on a process they started (a server coming up, a workflow's command, a
    PostgreSQL query), and a worker that waits leaves its CPU idle; one more worker keeps every
    CPU busy. On 2 CPUs: 2 workers 240-256 s, 3 workers 210 s, 4 workers 215 s. xdist's own
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides where it is set (None: xdist's rule)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return usable + 1


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", marker.args)


# The modules whose tests take longest (seconds each: a release built and installed, the README
# run as one session, a copy's own test run, processes racing on both backends), run first.
# xdist hands each worker a share of the tests in this order and moves the rest to whichever
# worker runs out; a long test started last would leave the other workers idle while it ends.
LONGEST_FIRST = (
    "test_release.py", "test_readme_session.py", "test_adding_a_tool.py", "test_pg_races.py",
    "test_concurrency.py", "test_fuzz_doors.py", "test_http.py", "test_backends.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each module's tests keep their order
