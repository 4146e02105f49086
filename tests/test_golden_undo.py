"""The golden example of reference/swarmops-undo.md: undo op 6 that moved release/v1."""

import pytest
from core_helpers import AGENT, UNDO_REFERENCE_TEXT, build_golden_store

pytestmark = pytest.mark.backends("sqlite", "postgres")


def test_undo_matches_the_reference_page_byte_for_byte(sw, golden):
    ids = build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "--as", AGENT, "op", "undo", "6")
    assert ran.exit == 0, ran.stderr
    assert ran.stdout.endswith("\n") and ran.stdout.count("\n") == 1
    assert sw.transcript(ran).splitlines()[-1] == UNDO_REFERENCE_TEXT
    assert ran.result["ref_moves"][0]["new"] == ids["base"]
    assert sw.transcript(ran) == golden
