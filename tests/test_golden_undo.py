"""The golden example of reference/swarmops-undo.md: undo op 6 that moved release/v1."""

from conftest import build_golden_store

# The envelope text of the MCP example on the reference page, byte for byte.
REFERENCE_TEXT = (
    '{"ok":true,"op":"undo","api":1,"result":{"undone":6,"op":7,"ref_moves":[{"name":"release/v1",'
    '"new":"[c1]","actor":"agent/worker-17","at":"[at]"}],"already_applied":false},'
    '"meta":{"repo":"[tmp]/store","elapsed_ms":"[elapsed_ms]","resolved":{},"auth":"trust"}}'
)


def test_undo_matches_the_reference_page_byte_for_byte(sw, golden):
    ids = build_golden_store(sw)
    ran = sw.process("--repo", str(sw.store), "--as", "agent/worker-17", "op", "undo", "6")
    assert ran.exit == 0, ran.stderr
    assert ran.stdout.endswith("\n") and ran.stdout.count("\n") == 1
    assert sw.transcript(ran).splitlines()[-1] == REFERENCE_TEXT
    assert ran.result["ref_moves"][0]["new"] == ids["base"]
    assert sw.transcript(ran) == golden
