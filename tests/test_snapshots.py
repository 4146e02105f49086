"""Golden outputs no test uses fail the run. syrupy finds the unused snapshots of each test file
that runs; this finds the folders of test files that are gone, which syrupy cannot see."""

from golden import ROOT, SNAPSHOTS


def test_every_snapshot_folder_belongs_to_a_test_file():
    tests = {path.stem for path in (ROOT / "tests").glob("test_*.py")}
    orphans = sorted(folder.name for folder in SNAPSHOTS.iterdir() if folder.is_dir() and folder.name not in tests)
    assert not orphans, f"snapshots of test files that no longer exist: {orphans} (delete them)"


def test_every_snapshot_is_a_text_file_in_a_test_files_folder():
    loose = sorted(str(p.relative_to(SNAPSHOTS)) for p in SNAPSHOTS.iterdir() if p.is_file())
    assert not loose, f"snapshots outside a test file's folder: {loose}"
    assert all(p.suffix == ".txt" for p in SNAPSHOTS.rglob("*") if p.is_file())


def test_an_unused_snapshot_fails_a_parallel_run(tmp_path):
    """The suite runs under pytest-xdist (addopts), where each worker sees only its own tests:
    syrupy must still fail the run on a snapshot no test uses. A small suite with this suite's
    snapshot extension (writing to its own folder) and one stale snapshot, run in two workers,
    exits 1 and says so."""
    import os
    import subprocess
    import sys
    import textwrap

    tests, snapshots = tmp_path / "tests", tmp_path / "snapshots"
    tests.mkdir()
    (tests / "conftest.py").write_text(textwrap.dedent(f"""\
        import pathlib
        import sys

        import pytest

        sys.path.insert(0, {str(ROOT / "tests")!r})
        import golden

        golden.SNAPSHOTS = pathlib.Path({str(snapshots)!r})


        @pytest.fixture
        def golden_text(snapshot):
            return snapshot.use_extension(golden.GoldenText)
        """))
    for name in ("a", "b"):
        (tests / f"test_{name}.py").write_text(f"def test_{name}(golden_text):\n    assert {name!r} == golden_text\n")
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')

    for name in ("a", "b"):
        (snapshots / f"test_{name}").mkdir(parents=True)
        (snapshots / f"test_{name}" / f"test_{name}.txt").write_text(name)
    (snapshots / "test_a" / "test_gone.txt").write_text("a test that was deleted\n")
    stale = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "tests"],
        cwd=tmp_path,
        # Not as one of this run's workers: syrupy would take the inner run for a worker too.
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")},
        capture_output=True, text=True, timeout=300,
    )
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "2 snapshots passed. 1 snapshot unused." in stale.stdout, stale.stdout
