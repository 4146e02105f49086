"""Golden outputs: the syrupy extension that keeps snapshots as plain text files in the
top-level `snapshots/` folder, and the normaliser every snapshot test uses, which lives in
swarmctl/gen/normalize.py (the reference pages' examples are normalised by it too).
"""

from __future__ import annotations

import re
from pathlib import Path

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from swarmctl.gen.normalize import Normalizer

__all__ = ["GoldenText", "Normalizer", "ROOT", "SNAPSHOTS"]

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "snapshots"


class GoldenText(SingleFileSnapshotExtension):
    """One text file per snapshot: snapshots/<test file>/<test name>.txt."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOTS / test_location.basename)

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        """One golden output for every kind of store: the backend's parameter is not in the name."""
        name = super().get_snapshot_name(test_location=test_location, index=index)
        name = _BACKEND_PARAM.sub("", name)
        return name.replace("[]", "")


# A test's `backend` parameter (conftest.py) as pytest writes it into the test's id.
_BACKEND_PARAM = re.compile(r"(?<=\[)(?:sqlite|postgres)-|-(?:sqlite|postgres)(?=\])|(?<=\[)(?:sqlite|postgres)(?=\])")
