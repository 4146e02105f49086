"""The JSON doors (`swarmctl call`, MCP) read field names carefully (issue 8, items 2 and 7).

A field the request type does not know is ignored and listed in `meta.ignored` (and `call`
warns on stderr); a near miss of a known field is E_INVALID_ARG with `details.did_you_mean`,
and nothing runs. `workflow_id` is another name of `workflow`, and `acknowledge_unknown_effects`
also takes `true` (`["all"]`) and `false` (`[]`), as vmware-pilot's callers send them.
"""

import dataclasses
import json

import pytest

from core_helpers import AGENT, ALICE, as_, build_golden_store, op_count, refs
from mcp_client import McpClient
from wfkit import Kit

from swarmctl import arguments, fields, registry
from swarmctl.envelope import SwarmError


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def variants(name: str) -> set[str]:
    """The near misses of `name` the rule names: spelled another way, and one edit away."""
    found = {name.replace("_", ""), _camel(name), name.replace("_", "-"), name.title(), name.upper()}
    if len(name) >= fields.NEAR_MIN_LEN:
        for i in range(len(name)):
            found.add(name[:i] + name[i + 1 :])  # delete
            found.add(name[:i] + ("q" if name[i] != "q" else "z") + name[i + 1 :])  # replace
            found.add(name[:i] + "q" + name[i:])  # insert
            if i + 1 < len(name) and name[i] != name[i + 1]:
                found.add(name[:i] + name[i + 1] + name[i] + name[i + 2 :])  # swap
    found.add(name + "s")  # a plural, however short the name (`refs` for `ref`)
    if name.endswith("s"):
        found.add(name[:-1])
    return found - {name}


def _request_names(tool) -> tuple[set[str], set[str]]:
    known = {f.name for f in tool.fields()}
    aliases = {a for f in tool.fields() for a in f.metadata.get("json_aliases", ())}
    return known, aliases


def test_every_near_miss_of_every_field_of_every_request_type_is_refused():
    walked = 0
    for tool in registry.tools():
        known, aliases = _request_names(tool)
        for name in sorted(known):
            for variant in sorted(variants(name) - known - aliases):
                with pytest.raises(SwarmError) as raised:
                    arguments.read_request(tool, {variant: 1})
                error = raised.value
                assert error.code == "E_INVALID_ARG", (tool.name, variant)
                assert error.details["field"] == variant, (tool.name, variant, error.details)
                assert error.details["did_you_mean"] in known, (tool.name, variant)
                walked += 1
    assert walked > 1000  # every field of every request type, each through every variant


def test_the_synonyms_are_refused_where_their_field_exists_and_other_names_are_ignored():
    for tool in registry.tools():
        known, aliases = _request_names(tool)
        for synonym, meant in fields.SYNONYMS.items():
            if synonym in known or synonym in aliases:
                continue
            if meant in known:
                with pytest.raises(SwarmError) as raised:
                    arguments.read_request(tool, {synonym: 1})
                assert raised.value.details["did_you_mean"] == meant
    undo = registry.by_name()["undo"]
    # Not near anything: ignored, and listed.
    assert arguments.read_request(undo, {"op": 6, "id": 20, "comment": "x"}).ignored == ["id", "comment"]


def test_near_miss_rules_exactly():
    assert fields.near_miss("dryrun", ["op", "dry_run"]) == "dry_run"
    assert fields.near_miss("Dry_Run", ["op", "dry_run"]) == "dry_run"
    assert fields.near_miss("dry-run", ["op", "dry_run"]) == "dry_run"
    assert fields.near_miss("limt", ["limit"]) == "limit"
    assert fields.near_miss("lmiit", ["limit"]) == "limit"  # a swap
    assert fields.near_miss("expected", ["expect"]) == "expect"  # the synonym table
    assert fields.near_miss("id", ["op", "dry_run"]) is None
    assert fields.near_miss("re", ["ref"]) is None  # one edit from a name shorter than 4: not a near miss
    assert fields.near_miss("lmt", ["limit"]) is None  # two edits
    assert fields.near_miss("refs", ["op", "ref"]) == "ref"  # a plural of a short name: `refs` was ignored
    assert fields.near_miss("Ops", ["op"]) == "op"
    assert fields.near_miss("parent", ["parents"]) == "parents"


def test_restore_with_refs_for_ref_is_refused_not_run_on_every_ref(sw):
    """`{"refs": ["main"]}` was ignored, and a confirmed restore moved (and deleted) every ref."""
    build_golden_store(sw)
    before = (op_count(sw.store), refs(sw.store))
    arguments = {"op": 2, "refs": ["main"], "confirm": True, "expect_head": op_count(sw.store)}
    ran = sw(*as_(sw, AGENT), "call", "op_restore", json.dumps(arguments))
    assert ran.exit == 2 and ran.error["details"]["did_you_mean"] == "ref", ran.stdout
    assert (op_count(sw.store), refs(sw.store)) == before


def test_call_refuses_a_misspelled_dry_run_and_writes_nothing(sw):
    build_golden_store(sw)
    before = (op_count(sw.store), refs(sw.store))
    for spelled in ("dryrun", "dryRun", "dry-run", "Dry_Run", "dry_rn"):
        ran = sw(*as_(sw, AGENT), "call", "undo", json.dumps({"op": 6, spelled: True}))
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout
        assert ran.error["details"]["field"] == spelled and ran.error["details"]["did_you_mean"] == "dry_run"
    assert (op_count(sw.store), refs(sw.store)) == before


def test_call_refuses_expected_for_expect_so_the_cas_is_never_dropped(sw):
    ids = build_golden_store(sw)
    before = (op_count(sw.store), refs(sw.store))
    args = {"name": "release/v1", "target": ids["base"], "expected": ids["base"]}
    ran = sw(*as_(sw, ALICE), "call", "ref_set", json.dumps(args))
    assert ran.exit == 2 and ran.error["details"] == {**ran.error["details"], "field": "expected", "did_you_mean": "expect"}
    assert (op_count(sw.store), refs(sw.store)) == before


def test_unknown_fields_are_ignored_listed_in_meta_and_warned_about(sw):
    build_golden_store(sw)
    ran = sw(*as_(sw, AGENT), "call", "undo", '{"op":6,"id":20}')
    assert ran.exit == 0 and ran.result["op"] == 7
    meta = ran.envelope["meta"]
    assert list(meta) == ["repo", "elapsed_ms", "resolved", "auth", "ignored"] and meta["ignored"] == ["id"]
    assert "ignored" in ran.stderr and "'id'" in ran.stderr
    clean = sw(*as_(sw, AGENT), "call", "op_show", '{"op":7}')
    assert "ignored" not in clean.envelope["meta"] and clean.stderr == ""


def test_over_mcp_the_same_rules(sw):
    ids = build_golden_store(sw)
    before = (op_count(sw.store), refs(sw.store))
    with McpClient(sw.store, AGENT) as client:
        dry = client.envelope("undo", {"op": 6, "dryRun": True})
        cas = client.envelope("ref_set", {"name": "release/v1", "target": ids["base"], "expected": ids["fix"]})
        assert (op_count(sw.store), refs(sw.store)) == before
        done = client.envelope("undo", {"op": 6, "id": 20})
    assert dry["error"]["code"] == "E_INVALID_ARG" and dry["error"]["details"]["did_you_mean"] == "dry_run"
    assert cas["error"]["details"]["did_you_mean"] == "expect"
    assert done["ok"] and done["meta"]["ignored"] == ["id"]


# --- item 7: what vmware-pilot's callers send -------------------------------------------------


def test_workflow_id_and_a_boolean_acknowledgement_at_the_json_doors(sw):
    kit = Kit(sw)
    _, wf = kit.run('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "release/v1", to = "main" }\n')
    preview = kit("call", "workflow_rollback", json.dumps({"workflow_id": wf, "include_completed": True}))
    assert preview.exit == 0 and preview.result["blast_radius"]["workflow"]["id"] == wf
    assert "ignored" not in preview.envelope["meta"]
    both = kit("call", "workflow_rollback", json.dumps({"workflow_id": wf, "workflow": wf}))
    assert both.exit == 2 and both.error["code"] == "E_INVALID_ARG"
    assert sorted(both.error["details"]["fields"]) == ["workflow", "workflow_id"]
    acked = kit("call", "workflow_rollback", json.dumps({"workflow_id": wf, "include_completed": True, "acknowledge_unknown_effects": True}))
    assert acked.result["next"]["arguments"]["acknowledge_unknown_effects"] == ["all"]
    not_acked = kit("call", "workflow_rollback", json.dumps({"workflow_id": wf, "include_completed": True, "acknowledge_unknown_effects": False}))
    assert "acknowledge_unknown_effects" not in not_acked.result["next"]["arguments"]
    with McpClient(sw.store, ALICE) as client:
        confirmed = client.envelope(
            "workflow_rollback",
            {"workflow_id": wf, "confirm": True, "include_completed": True, "acknowledge_unknown_effects": True},
        )
    assert confirmed["ok"] and confirmed["result"]["state"] == "rolled_back", confirmed
    assert "release/v1" not in refs(sw.store)
    # A string is still not a boolean, nor a list: strict as ever.
    wrong = kit("call", "workflow_rollback", json.dumps({"workflow_id": wf, "acknowledge_unknown_effects": "all"}))
    assert wrong.exit == 2


def test_schema_and_the_reference_page_show_the_other_names(sw):
    schema = sw.ok("schema", "WorkflowRollbackReq")["schema"]
    assert "workflow_id" in schema["properties"]["workflow"]["description"]
    assert "`true`" in schema["properties"]["acknowledge_unknown_effects"]["description"]
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "reference" / "workflow_rollback.md").read_text()
    assert "workflow_id" in page and "`true`" in page


def test_a_whole_number_written_as_a_float_is_that_integer_as_json_schema_counts_it(sw):
    """The inputSchema says `"type": "integer"`, which JSON Schema satisfies with `1.0`; the
    tools refused it ("Input should be a valid integer"). A fraction is still refused."""
    build_golden_store(sw)
    for text in ('{"op": 6.0}', '{"op": 6E0}'):
        assert sw.ok(*as_(sw, AGENT), "call", "op_show", text)["op"] == 6
    assert len(sw.ok(*as_(sw, AGENT), "call", "op_log", '{"limit": 2.0}')["ops"]) == 2
    for text in ('{"op": 6.5}', '{"op": 1e300}', '{"op": true}'):
        ran = sw(*as_(sw, AGENT), "call", "op_show", text)
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), text
