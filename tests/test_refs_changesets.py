"""Refs (set, delete, list, show; compare-and-swap with --expect/--create), changesets (create,
show) and `schema`."""

import json

import pytest
from core_helpers import AGENT, ALICE, FROZEN, as_, build_golden_store, file_digests, op_count, problems, refs

from swarmctl.store import changesets

pytestmark = pytest.mark.backends("sqlite", "postgres")


def test_ref_set_and_delete(sw, golden):
    ids = build_golden_store(sw)
    me = as_(sw, ALICE)
    create = sw(*me, "ref", "set", "staging", ids["base"][:6])  # 7: a prefix resolves
    move = sw(*me, "ref", "set", "staging", "main")  # 8: a ref name resolves to what it names
    same = sw(*me, "ref", "set", "staging", ids["fix"])  # already there: nothing written, op null
    delete = sw(*me, "ref", "delete", "staging")  # 9
    missing = sw(*me, "ref", "delete", "staging")
    assert create.envelope["meta"]["resolved"] == {ids["base"][:6]: ids["base"]}
    assert move.envelope["meta"]["resolved"] == {"main": ids["fix"]}
    assert (create.result["op"], move.result["op"], same.result["op"], delete.result["op"]) == (7, 8, None, 9)
    assert missing.exit == 4 and op_count(sw.store) == 9
    assert sw.transcript(create, move, same, delete, missing) == golden


def test_ref_compare_and_swap(sw, golden):
    ids = build_golden_store(sw)
    me = as_(sw, ALICE)
    before = (op_count(sw.store), file_digests(sw.store))
    create_exists = sw(*me, "ref", "set", "release/v1", ids["base"], "--create")
    expect_wrong = sw(*me, "ref", "set", "release/v1", ids["base"], "--expect", ids["base"])
    delete_wrong = sw(*me, "ref", "delete", "release/v1", "--expect", ids["base"])
    both = sw(*me, "ref", "set", "release/v1", ids["base"], "--expect", ids["fix"], "--create")
    expect_missing = sw(*me, "ref", "set", "nope", ids["base"], "--expect", ids["fix"])
    assert [r.exit for r in (create_exists, expect_wrong, delete_wrong, both, expect_missing)] == [3, 3, 3, 2, 3]
    assert (op_count(sw.store), file_digests(sw.store)) == before
    expect_right = sw(*me, "ref", "set", "release/v1", ids["base"], "--expect", ids["fix"])  # 7
    create_new = sw(*me, "ref", "set", "release/v2", ids["fix"], "--create")  # 8
    delete_right = sw(*me, "ref", "delete", "release/v2", "--expect", ids["fix"][:8])  # 9
    assert (expect_right.result["op"], create_new.result["op"], delete_right.result["op"]) == (7, 8, 9)
    assert sw.transcript(
        create_exists, expect_wrong, delete_wrong, both, expect_missing, expect_right, create_new, delete_right
    ) == golden


def test_an_empty_expect_is_bad_usage_pointing_at_create_not_a_missing_ref(sw):
    """`--expect "$OLD"` with OLD empty (never set, or read from a ref that did not exist) was
    E_NOT_FOUND (exit 4), which a script reads as "no such ref"; it names no changeset at all."""
    ids = build_golden_store(sw)
    me = as_(sw, ALICE)
    before = (op_count(sw.store), file_digests(sw.store))
    for ran in (
        sw(*me, "ref", "set", "release/v1", ids["base"], "--expect", ""),
        sw(*me, "ref", "set", "release/v9", ids["base"], "--expect", " "),
        sw(*me, "ref", "delete", "release/v1", "--expect", ""),
        sw(*me, "call", "ref_set", json.dumps({"name": "release/v1", "target": ids["base"], "expect": ""})),
    ):
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
        assert "--expect is empty" in ran.error["message"] and "--create" in ran.error["hint"], ran.error
    assert (op_count(sw.store), file_digests(sw.store)) == before


def test_ref_list_and_show(sw, golden):
    ids = build_golden_store(sw)
    sw.ok(*as_(sw, ALICE), "ref", "set", "release/v2", ids["base"])  # 7
    sw.ok(*as_(sw, ALICE), "ref", "set", "releases", ids["base"])  # 8: not under release/
    repo = ("--repo", str(sw.store))
    every = sw(*repo, "ref", "list")
    release = sw(*repo, "ref", "list", "--prefix", "release/")
    none = sw(*repo, "ref", "list", "--prefix", "zzz")
    show = sw(*repo, "ref", "show", "release/v1")
    missing = sw(*repo, "ref", "show", "release/v3")
    assert [r["name"] for r in every.result["refs"]] == ["main", "release/v1", "release/v2", "releases"]
    assert [r["name"] for r in release.result["refs"]] == ["release/v1", "release/v2"]
    assert show.result["op"] == 6 and show.result["message"] == "Fix flaky deploy check"
    assert sw.transcript(every, release, none, show, missing) == golden


def test_changeset_create_and_show(sw, golden, frozen_clock):
    sw.ok("--as", ALICE, "init", str(sw.store))
    me = as_(sw, AGENT)
    (sw.tmp / "docs").mkdir()
    (sw.tmp / "docs" / "guide.md").write_text("# Guide\n")
    (sw.tmp / "NOTES.md").write_text("v1: first release\n")
    first = sw(*me, "changeset", "create", "-m", "First", "--ref", "main")
    first_id = first.result["changeset"]["id"]
    other = sw(*me, "changeset", "create", "-m", "Side branch")  # no ref: moves nothing
    merge = sw(
        *me, "changeset", "create", "-m", "Merge\n\nwith a body", "--parent", first_id[:8], "--parent",
        other.result["changeset"]["id"], "--meta", "ticket=OPS-7", "--meta", "reviewed-by=human/alice",
        "--file", "docs/guide.md", "--file", "NOTES.md", "--ref", "main",
    )
    by_prefix = sw("--repo", str(sw.store), "changeset", "show", merge.result["changeset"]["id"][:5])
    by_ref = sw("--repo", str(sw.store), "changeset", "show", "main")
    # --ref with no --parent: the parent is what the ref names.
    on_main = sw(*me, "changeset", "create", "-m", "Next", "--ref", "main")
    assert on_main.result["changeset"]["parents"] == [merge.result["changeset"]["id"]]
    assert first.result["changeset"]["parents"] == []
    assert by_prefix.result == by_ref.result == merge.result["changeset"]
    assert merge.result["changeset"]["metadata"] == {"reviewed-by": ALICE, "ticket": "OPS-7"}
    assert sw.transcript(first, other, merge, by_prefix, by_ref, on_main) == golden


def test_changeset_ids_are_the_documented_hash(sw, frozen_clock):
    """The id is BLAKE3-256, keyed by the domain `swarmops:changeset:v1`, of the canonical JSON."""
    from blake3 import blake3

    sw.ok("--as", ALICE, "init", str(sw.store))
    (sw.tmp / "a.txt").write_text("hello\n")
    made = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "m", "--meta", "k=v", "--file", "a.txt")["changeset"]
    blob = blake3(b"hello\n", derive_key_context="swarmops:blob:v1").hexdigest()
    canonical = (
        '{"actor":"human/alice","at":"%s","files":{"a.txt":"%s"},"message":"m","metadata":{"k":"v"},"parents":[]}'
        % (FROZEN, blob)
    )
    assert made["id"] == blake3(canonical.encode(), derive_key_context="swarmops:changeset:v1").hexdigest()
    assert made["files"] == [{"path": "a.txt", "blob": blob, "size": 6}]


def test_the_same_changeset_twice_in_one_millisecond(sw, frozen_clock):
    """Same content, actor and time is the same id: the second create finds it, never E_INTERNAL."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    me = as_(sw, ALICE)
    first = sw.ok(*me, "changeset", "create", "-m", "same")
    second = sw.ok(*me, "changeset", "create", "-m", "same", "--ref", "main")
    assert second["changeset"] == first["changeset"] and second["changeset"]["op"] == 2
    assert refs(sw.store) == {"main": first["changeset"]["id"]}
    assert sw.ok("--repo", str(sw.store), "op", "show", "3")["changesets"] == []


def _colliding_messages(prefix_len: int = 4) -> tuple[str, str, str]:
    """Two messages whose changesets (by alice, at FROZEN, no parents) share an id prefix."""
    seen: dict[str, str] = {}
    for i in range(100_000):
        message = f"change {i}"
        cid = changesets.changeset_id(message=message, parents=[], actor=ALICE, at=FROZEN, metadata={}, files={})
        if cid[:prefix_len] in seen:
            return seen[cid[:prefix_len]], message, cid[:prefix_len]
        seen[cid[:prefix_len]] = message
    raise AssertionError("no collision found")


def test_changeset_argument_errors(sw, golden, frozen_clock):
    sw.ok("--as", ALICE, "init", str(sw.store))
    me = as_(sw, ALICE)
    first, second, prefix = _colliding_messages()
    sw.ok(*me, "changeset", "create", "-m", first)
    sw.ok(*me, "changeset", "create", "-m", second)
    before = (op_count(sw.store), file_digests(sw.store))
    runs = [
        sw(*me, "changeset", "create", "-m", "x", "--parent", prefix),  # ambiguous
        sw(*me, "changeset", "create", "-m", "x", "--parent", prefix[:3]),  # too short
        sw(*me, "changeset", "create", "-m", "x", "--parent", "ffff0000"),  # no such changeset
        sw(*me, "changeset", "create", "-m", "x", "--parent", "no-such-ref"),
        sw(*me, "changeset", "create", "-m", "x", "--meta", "novalue"),
        sw(*me, "changeset", "create", "-m", "x", "--meta", "=v"),
        sw(*me, "changeset", "create", "-m", "x", "--meta", "k=1", "--meta", "k=2"),
        sw(*me, "changeset", "create", "-m", "x", "--file", "missing.txt"),
        sw(*me, "changeset", "create", "-m", ""),
        sw(*me, "changeset", "create", "-m", "x", "--ref", "bad..name"),
        sw(*me, "changeset", "create"),  # -m is required
        sw("--repo", str(sw.store), "changeset", "show", prefix),
        sw("--repo", str(sw.store), "changeset", "show", "zz"),
    ]
    assert [r.exit for r in runs] == [2, 2, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 4]
    assert (op_count(sw.store), file_digests(sw.store)) == before
    assert sw.transcript(*runs) == golden


def test_schema(sw, golden):
    undo_req = sw("schema", "UndoReq")
    op_record = sw("schema", "OpRecord")
    assert undo_req.result["schema"]["required"] == ["op"]
    assert sw.transcript(undo_req, op_record) == golden


def test_schema_lists_every_type_and_each_one_has_a_schema(sw):
    from swarmctl import registry

    listing = sw.ok("schema")
    assert listing["types"] == sorted(registry.types()) and listing["schema"] is None
    for name in listing["types"]:
        schema = sw.ok("schema", name)["schema"]
        assert schema["title"] == name and schema["type"] == "object"
    missing = sw("schema", "NoSuchType")
    assert missing.exit == 4 and missing.error["code"] == "E_NOT_FOUND"
    assert missing.error["details"]["types"] == listing["types"]


def test_a_ref_name_never_shadows_a_changeset_id(sw, frozen_clock):
    """A ref may not be named like a changeset id (4-64 lowercase hex): refused at every door
    that names a ref. A store that already holds one (named before the rule) still reads it,
    but a TARGET that reads both ways is the changeset, and `meta.resolved` says so."""
    from swarmctl.store import Move, Store

    sw.ok("--as", ALICE, "init", str(sw.store))
    me = as_(sw, ALICE)
    first = sw.ok(*me, "changeset", "create", "-m", "first")["changeset"]["id"]
    second = sw.ok(*me, "changeset", "create", "-m", "second", "--ref", "main")["changeset"]["id"]
    before = op_count(sw.store)
    for name in (first[:4], first, "cafe", "0123456789abcdef"):
        for ran in (
            sw(*me, "ref", "set", name, second),
            sw(*me, "changeset", "create", "-m", "x", "--ref", name),
            sw(*me, "call", "ref_set", '{"name":"%s","target":"main"}' % name),
        ):
            assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout
            assert "hex" in ran.error["message"] and ran.error["details"]["name"] == name
    sw.ok(*me, "tx", "begin")
    staged = sw(*me, "tx", "set", first[:8], second)
    assert staged.exit == 2 and "changeset id prefix" in staged.error["details"]["problem"]
    sw.ok(*me, "tx", "rollback")
    # Not hex, or not lowercase, or too short: an ordinary name.
    for name in ("cafe-1", "release/cafe", "CAFE", "abc"):
        assert sw(*me, "ref", "set", name, second).exit == 0
    assert op_count(sw.store) == before + 4
    # A store made before the rule holds a ref named like the first's prefix, naming the second.
    prefix = first[:4]
    old_store = Store.open(sw.store)
    with old_store.write(ALICE) as w:
        w.append_op("ref_set", f"create {prefix} (before the rule)", [Move(prefix, None, second)])
    old_store.close()
    assert [p.check for p in problems(sw.store)] == ["ref_shadows_id"]
    shown = sw("--repo", str(sw.store), "changeset", "show", prefix)
    assert shown.result["id"] == first
    assert shown.envelope["meta"]["resolved"] == {prefix: {"chosen": "changeset", "id": first, "ref_target": second}}
    moved = sw(*me, "ref", "set", "main", prefix)
    assert moved.result["new"] == first and moved.envelope["meta"]["resolved"][prefix]["chosen"] == "changeset"
    # Reads of the ref itself keep working, and deleting it is allowed.
    assert sw.ok("--repo", str(sw.store), "ref", "show", prefix)["target"] == second
    assert sw.ok(*me, "ref", "delete", prefix)["old"] == second
    assert problems(sw.store) == []


def test_a_workflow_may_not_name_a_ref_like_a_changeset_id(sw):
    sw.ok("--as", ALICE, "init", str(sw.store))
    flow = sw.tmp / "flow.toml"
    flow.write_text('name = "w"\n[[step]]\nname = "promote"\nref_set = { name = "beef00", to = "main" }\n')
    ran = sw(*as_(sw, ALICE), "workflow", "run", str(flow))
    assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG" and "hex" in ran.error["message"]
    assert op_count(sw.store) == 1


def test_a_ref_named_in_upper_case_hex_is_the_ref_where_one_exists(sw, frozen_clock):
    """`CAFE` is a name a ref may have (only lowercase hex reads as an id first). A TARGET
    written `CAFE` read as the changeset whose id begins `cafe`, so `ref set tgt CAFE` moved tgt
    to that changeset, not to what the ref CAFE names; with no such ref it is still an id."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    me = as_(sw, ALICE)
    made = [sw.ok(*me, "changeset", "create", "-m", f"c{i}")["changeset"]["id"] for i in range(40)]
    lettered = next(c for c in made if any(ch in "abcdef" for ch in c[:6]))
    other = next(c for c in made if c != lettered)
    upper = lettered[:6].upper()
    assert sw.ok(*me, "ref", "set", upper, other)["new"] == other
    assert sw.ok(*me, "ref", "set", "tgt", upper)["new"] == other
    assert sw.ok("--repo", str(sw.store), "changeset", "show", lettered[:6])["id"] == lettered
    assert sw.ok(*me, "ref", "delete", upper)["old"] == other
    assert sw.ok(*me, "ref", "set", "tgt", upper)["new"] == lettered  # no ref of that name: the id
    assert problems(sw.store) == []


def test_a_backslash_is_part_of_a_file_name_never_a_separator(sw, frozen_clock):
    """`x\\y` and `x/y` are two files, at both doors: the backslash was read as '/', so the two
    became one path and one file's content was dropped without a word."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    (sw.tmp / "x").mkdir()
    (sw.tmp / "x" / "y").write_text("in a directory\n")
    (sw.tmp / "x\\y").write_text("a backslash\n")
    made = sw.ok(*as_(sw, ALICE), "changeset", "create", "-m", "two", "--file", "x\\y", "--file", "x/y")
    assert [(f["path"], f["size"]) for f in made["changeset"]["files"]] == [("x/y", 15), ("x\\y", 12)]
    called = sw.ok(*as_(sw, ALICE), "call", "changeset_create", json.dumps({"message": "j", "files": {"x\\y": "A", "x/y": "BB"}}))
    assert [(f["path"], f["size"]) for f in called["changeset"]["files"]] == [("x/y", 2), ("x\\y", 1)]


def test_a_file_path_outside_the_working_directory_says_how_to_give_it(sw):
    """`--file ../notes.txt` or an absolute path is refused (a path is the file's name in the
    changeset); the error said so with no hint of what to do instead."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    (sw.tmp / "docs").mkdir()
    (sw.tmp / "docs" / "notes.txt").write_text("n\n")
    for given in ("docs/../docs/notes.txt", str(sw.tmp / "docs" / "notes.txt")):
        ran = sw(*as_(sw, ALICE), "changeset", "create", "-m", "x", "--file", given)
        assert (ran.exit, ran.error["code"], ran.error["details"]["path"]) == (2, "E_INVALID_ARG", given), ran.stdout
        assert "run from the directory that holds it" in ran.error["hint"], ran.error


def test_a_file_that_is_not_a_regular_file_is_refused_before_it_is_read(sw):
    """A FIFO given as --file waited for a writer for ever (and a SIGTERM then printed no
    envelope); a device was read up to the input bound. Each is E_INVALID_ARG at once."""
    import os

    sw.ok("--as", ALICE, "init", str(sw.store))
    os.mkfifo(sw.tmp / "fifo")
    (sw.tmp / "dir").mkdir()
    for path, kind in (("fifo", "a FIFO"), ("/dev/zero", "a character device"), ("dir", "a directory")):
        ran = sw.process(*as_(sw, ALICE), "changeset", "create", "-m", "x", "--file", path)  # a hang: 120 s, then fails
        assert (ran.exit, ran.error["code"]) == (2, "E_INVALID_ARG"), ran.stdout
        assert ran.error["message"] == f"--file {path}: {kind}{' (named pipe)' if kind == 'a FIFO' else ''}, not a regular file"
    assert op_count(sw.store) == 1
