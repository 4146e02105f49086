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
