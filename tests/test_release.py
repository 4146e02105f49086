"""The release: an sdist and a wheel, built as `python -m build` builds them (the wheel from the
sdist), installed as people install command-line tools, and checked there.

The build runs once per test run, from a copy of the checkout in a temporary directory (and
once, not once per xdist worker: the first worker to need it builds it under a lock, the others
wait for it on that lock and take it as built; so with the installations). The
wheel is installed non-editably into a fresh virtual environment (dependencies from the package
index, as a user gets them) and, at the same time, with pipx, its homes under a temporary
directory laid out like ~/.local. Each installation must run the demo, find its man pages and
completion scripts where `man` and the shells look, with the content committed here, and print
the version pyproject.toml declares.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from golden import ROOT
from swarmctl.gen import completions

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PYPROJECT["version"]
MAN_PAGES = sorted(p.name for p in (ROOT / "man").glob("*.1"))

# What never goes into a build: environments, caches, local stores, earlier builds.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "demo-store", "results"
)


@contextmanager
def once_per_run(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, bool]]:
    """A directory made once for the whole run, all xdist workers included: (its path, whether
    it is made already). Held under a lock until the block ends, so a worker that comes second
    waits for the first to finish making it (on the lock, not on a clock), then finds it made.
    The block marks it made only if it ends without an error."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's, above each worker's
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        where, done = shared / name, shared / f"{name}.done"
        if where.exists() and not done.exists():
            shutil.rmtree(where)  # an attempt that failed: start again
        made = done.exists()
        where.mkdir(exist_ok=True)
        yield where, made
        done.touch()


@dataclass
class Dist:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """`python -m build` on a copy of this checkout: the sdist, then a wheel built from it."""
    with once_per_run("release", tmp_path_factory) as (base, made):
        source, out = base / "source", base / "dist"
        if not made:
            shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
            ran = subprocess.run(
                [sys.executable, "-m", "build", "--outdir", str(out), str(source)], capture_output=True, text=True, timeout=600
            )
            assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        (sdist,), (wheel,) = out.glob("*.tar.gz"), out.glob("*.whl")
    return Dist(sdist, wheel)


@dataclass
class Installed:
    """One installation of the wheel: its `swarmctl`, and where its man pages and completions are."""

    bin: Path
    prefix: Path  # the environment the wheel's data files went into
    man1: Path  # where `man` finds the pages

    def run(self, *args: str, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMCTL_", "_SWARMCTL", "VIRTUAL_ENV", "PYTHON"))}
        env["PATH"] = os.pathsep.join([str(self.bin), path or os.defpath])
        return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMCTL_", "_SWARMCTL", "VIRTUAL_ENV", "PYTHON", "PIP_"))}
    return {**env, **extra}


def _pipx() -> list[str] | None:
    try:
        import pipx  # noqa: F401
    except ImportError:
        return [shutil.which("pipx")] if shutil.which("pipx") else None
    return [sys.executable, "-m", "pipx"]


@pytest.fixture(scope="session")
def installs(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Installed]:
    """The wheel installed into a fresh venv with pip, and (where pipx is there) with pipx; both at once."""
    with once_per_run("installs", tmp_path_factory) as (base, made):
        if not made:
            _install(dist, base)
    found = {"venv": Installed(base / "venv" / "bin", base / "venv", base / "venv" / "share" / "man" / "man1")}
    local, pipx_venv = base / "pipx" / "local", base / "pipx" / "home" / "venvs" / "swarmctl"
    if pipx_venv.exists():
        found["pipx"] = Installed(local / "bin", pipx_venv, local / "share" / "man" / "man1")
    return found


def _install(dist: Dist, base: Path) -> None:
    """Into `base`: venv/ (pip) and, where pipx is there, pipx/ (laid out like ~/.local).

    Without byte-compiling every module of every dependency at install time (`--no-compile`):
    what is checked here does not depend on it, and it was a third of each installation's
    CPU time. The modules a command imports are compiled as it first imports them. The venv
    gets no pip of its own (`--without-pip`): this environment's pip installs into it
    (`pip --python`), the same resolution from the same index, without the 3 s of CPU that
    bootstrapping pip into each new venv costs."""
    pipx, pipx_run = _pipx(), None
    if pipx is not None:
        local = base / "pipx" / "local"  # laid out like ~/.local, where pipx puts things by default
        homes = {
            "PIPX_HOME": str(base / "pipx" / "home"),
            "PIPX_BIN_DIR": str(local / "bin"),
            "PIPX_MAN_DIR": str(local / "share" / "man"),
            # pipx 1.18 links completion scripts too, by default under the real ~/.local/share:
            # links into this test's directory, left dangling in the user's home once it is gone.
            "PIPX_COMPLETION_DIR": str(local / "share"),
            "PIPX_SHARED_LIBS": str(base / "pipx" / "shared"),
        }
        pipx_run = subprocess.Popen(
            [*pipx, "install", "--python", sys.executable, "--pip-args=--no-compile", str(dist.wheel)],
            env=_clean_env(**homes), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
         "--disable-pip-version-check", "--no-compile", str(dist.wheel)],
        env=_clean_env(), capture_output=True, text=True, timeout=600,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    if pipx_run is not None:
        output, _ = pipx_run.communicate(timeout=600)
        assert pipx_run.returncode == 0, output[-3000:]


@pytest.fixture(params=["venv", "pipx"])
def installed(request, installs) -> Installed:
    if request.param not in installs:
        pytest.skip("pipx is not installed (pip install -e '.[test]' brings it)")
    return installs[request.param]


# --- the artefacts ---------------------------------------------------------------------------


def test_the_sdist_holds_what_a_wheel_needs(dist):
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    needed = {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "swarmctl/__init__.py", "swarmctl/cli/app.py"}
    needed |= {f"man/{page}" for page in MAN_PAGES} | set(completions.PATHS.values())
    assert needed <= names, sorted(needed - names)


def test_the_wheel_carries_man_pages_completions_and_the_licence(dist):
    data = f"swarmctl-{VERSION}.data/data/"
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"swarmctl-{VERSION}.dist-info/METADATA").decode()
    assert {f"{data}share/man/man1/{page}" for page in MAN_PAGES} <= names
    assert {data + path for path in completions.INSTALLED.values()} <= names
    assert f"swarmctl-{VERSION}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in metadata and "Description-Content-Type: text/markdown" in metadata
    assert f"Version: {VERSION}" in metadata


def test_twine_accepts_the_metadata(dist):
    ran = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
        capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.count("PASSED") == 2, ran.stdout


# --- installed, as a user installs it --------------------------------------------------------


def test_the_installed_command_runs_the_demo_and_its_op_log(installed, tmp_path):
    demo = installed.run("swarmctl", "demo", "./demo-store", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    log = installed.run("swarmctl", "-R", "demo-store", "op", "log", cwd=tmp_path)
    assert log.returncode == 0, log.stdout + log.stderr
    import json

    envelope = json.loads(log.stdout)
    assert envelope["ok"] and [op["op"] for op in envelope["result"]["ops"]] == [6, 5, 4, 3, 2, 1]
    assert envelope["meta"]["repo"] == str(tmp_path / "demo-store")


def test_the_installed_command_is_the_wheel_not_this_checkout(installed, tmp_path):
    where = installed.prefix / "bin" / "python"
    ran = subprocess.run([str(where), "-c", "import swarmctl; print(swarmctl.__file__)"], cwd=tmp_path,
                         env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert Path(ran.stdout.strip()).is_relative_to(installed.prefix), ran.stdout


def test_the_installed_version_is_pyprojects(installed, tmp_path):
    ran = installed.run("swarmctl", "--version", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, f"swarmctl {VERSION}\n")


def test_man_pages_are_installed_where_man_finds_them(installed, tmp_path):
    for page in MAN_PAGES:
        assert (installed.man1 / page).read_text() == (ROOT / "man" / page).read_text(), page
    if shutil.which("man") is None:
        pytest.skip("man is not installed: the pages are in place, but `man -w` cannot be asked")
    # With the installation's bin on PATH, man-db finds its share/man (no MANPATH needed).
    found = installed.run("man", "-w", "swarmctl-op-undo", cwd=tmp_path, path=os.path.dirname(shutil.which("man")))
    assert found.returncode == 0, found.stderr
    # (pipx links each page to its venv's copy, which man may name instead of the link.)
    assert Path(found.stdout.strip()).resolve() == (installed.man1 / "swarmctl-op-undo.1").resolve()


def test_completion_scripts_are_installed_where_each_shell_looks(installed, tmp_path):
    for shell, path in completions.INSTALLED.items():
        script = installed.prefix / path
        assert script.read_text() == (ROOT / completions.PATHS[shell]).read_text(), path
        printed = installed.run("swarmctl", "completion", shell, cwd=tmp_path)
        assert (printed.returncode, printed.stdout) == (0, script.read_text()), shell


# --- the one version -------------------------------------------------------------------------


def test_the_version_is_read_from_pyproject_everywhere():
    import swarmctl
    from swarmctl.gen.normalize import Normalizer

    assert swarmctl.__version__ == swarmctl.version() == swarmctl._checkout_version() == VERSION
    assert Normalizer(ROOT)(f"swarmctl {VERSION}") == "swarmctl [version]"
    assert f'"swarmctl {VERSION}"' in (ROOT / "man" / "swarmctl.1").read_text()
    assert "__version__ =" not in (ROOT / "swarmctl" / "__init__.py").read_text()
