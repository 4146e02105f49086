"""Issue 10, item 1: a store that notices its own damage.

`store check` (read-only, the full check), damage as E_STORE_CORRUPT on reads too, writes that
refuse on a store whose refs or newest op disagree with the op log, the op log's hash chain,
and the one format-migration path: a store made by an earlier release (format 1, kept in
tests/fixtures/format1-store, and format 2, in tests/fixtures/format2-store, each made with
that release's code) is read as it is and upgraded by its first write or `store upgrade`, in
one transaction. The fuzz tests are seeded."""

import json
import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, build_golden_store, file_digests, fold_wal, op_count
from swarmctl.store.schema import FORMAT_VERSION


FIXTURES = Path(__file__).parent / "fixtures"


def edit(store: Path, *statements: str) -> None:
    """Change the database behind swarmctl's back, as a person with sqlite3 would."""
    conn = sqlite3.connect(store / "swarmops.db")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def check(sw, store: Path):
    return sw("--repo", str(store), "store", "check")


def codes(ran) -> set[str]:
    return {p["code"] for p in ran.error["details"]["problems"]}


def test_a_sound_store_checks_clean_and_prints_its_head_hash(sw):
    build_golden_store(sw)
    before = file_digests(sw.store)
    ran = check(sw, sw.store)
    assert ran.exit == 0
    head = sw.ok("--repo", str(sw.store), "op", "show", "6")
    assert ran.result["problems"] == [] and ran.result["format"] == FORMAT_VERSION
    assert ran.result["head"] == {"op": 6, "at": head["at"], "hash": head["hash"]}
    assert len(head["hash"]) == 64 and list(head)[-1] == "hash"
    assert file_digests(sw.store) == before  # read-only


def test_a_ref_edited_behind_the_op_log_is_found_and_writes_that_move_it_are_refused(sw):
    ids = build_golden_store(sw)
    edit(sw.store, f"UPDATE refs SET target = '{ids['base']}' WHERE name = 'main'")
    ran = check(sw, sw.store)
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT")
    assert "refs_match_log" in codes(ran)
    before, count = file_digests(sw.store), op_count(sw.store)
    for args in (
        ("--as", ALICE, "ref", "set", "main", ids["fix"]),
        ("--as", ALICE, "changeset", "create", "-m", "m", "--ref", "main"),
        ("--as", AGENT, "op", "undo", "5"),
    ):
        refused = sw("--repo", str(sw.store), *args)
        assert (refused.exit, refused.error["code"]) == (9, "E_STORE_CORRUPT"), refused.stdout
        assert refused.error["details"]["problems"][0]["ref"] == "main"
    assert file_digests(sw.store) == before and op_count(sw.store) == count


def test_an_edited_op_breaks_the_hash_chain_there_and_the_newest_op_stops_writes(sw):
    build_golden_store(sw)
    edit(sw.store, "UPDATE ops SET description = 'nothing to see' WHERE op = 3")
    ran = check(sw, sw.store)
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT")
    assert [(p["code"], p.get("op")) for p in ran.error["details"]["problems"]] == [("hash_chain", 3)]
    assert sw.ok("--repo", str(sw.store), "--as", ALICE, "ref", "set", "x", "main")["op"] == 7  # op 3 is history
    edit(sw.store, "UPDATE ops SET actor = 'human/mallory' WHERE op = 7")
    refused = sw("--repo", str(sw.store), "--as", ALICE, "ref", "set", "y", "main")
    assert (refused.exit, refused.error["code"]) == (9, "E_STORE_CORRUPT")
    assert refused.error["details"]["problems"][0]["code"] == "hash_chain"
    assert op_count(sw.store) == 7


@pytest.mark.parametrize(
    "damage, code",
    [
        ("UPDATE ops SET description = CAST(X'66ff' AS TEXT) WHERE op = 2", "unreadable"),
        ("UPDATE changesets SET message = 'rewritten' WHERE op = 3", "changeset_id"),
        ("UPDATE blobs SET content = X'00'", "blob_id"),
        ("DELETE FROM ops WHERE op = 4", "ops_gapless"),
        ("UPDATE ops SET at = '2001-01-01T00:00:00.000Z' WHERE op = 3", "ops_time_order"),
        ("UPDATE ops SET at = at || char(10) WHERE op = 3", "op_time"),  # `$` matched before it
        ("UPDATE ops SET at = '\u0662' || substr(at, 2) WHERE op = 3", "op_time"),  # `\d` took an Arabic-Indic 2
    ],
)
def test_each_kind_of_damage_is_a_problem_with_a_code_never_a_traceback(sw, damage, code):
    build_golden_store(sw)
    (sw.tmp / "notes.txt").write_text("some notes\n")
    sw.ok("--repo", str(sw.store), "--as", ALICE, "changeset", "create", "-m", "with a file", "--file", "notes.txt", cwd=sw.tmp)
    edit(sw.store, "PRAGMA foreign_keys = OFF", damage)
    ran = check(sw, sw.store)
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    assert code in codes(ran)
    assert all(p["message"] for p in ran.error["details"]["problems"])


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE tokens SET actor = 'agent/h' WHERE id = 3",  # a flipped bit: the token acts as another
        "UPDATE tokens SET read_only = 0 WHERE id = 4",  # a read-only token that writes
        "UPDATE tokens SET revoked_at = NULL, revoked_op = NULL WHERE id = 5",  # a revocation taken back
        "UPDATE tokens SET revoked_at = NULL, revoked_op = NULL WHERE id = 6",  # the undo of its making, too
    ],
)
def test_a_tokens_row_changed_behind_the_op_log_is_a_problem(sw, damage):
    """Found by a probe: one flipped bit turned a token's actor from agent/x to agent/h, and
    `store check` said nothing; the token table was in no check. A token's row is held to the
    ops that made and revoked it, which the hash chain covers."""
    sw.ok("--as", ALICE, "init", str(sw.store))
    sw.ok("--repo", str(sw.store), "--as", ALICE, "changeset", "create", "-m", "base", "--ref", "main")
    for words in (["agent/x"], ["agent/y", "--read-only"], ["agent/z"], ["agent/w"]):  # ops 3, 4, 5, 6
        sw.ok("--repo", str(sw.store), "--as", ALICE, "token", "create", *words)
    sw.ok("--repo", str(sw.store), "--as", ALICE, "token", "revoke", "5")  # op 7
    sw.ok("--repo", str(sw.store), "--as", ALICE, "op", "undo", "6")  # op 8: revokes token 6
    assert sw.ok("--repo", str(sw.store), "store", "check")["problems"] == []
    edit(sw.store, damage)
    ran = check(sw, sw.store)
    assert (ran.exit, codes(ran)) == (9, {"tokens"}), ran.stdout


def test_text_that_is_not_utf8_is_e_store_corrupt_on_reads(sw):
    build_golden_store(sw)
    edit(sw.store, "UPDATE ops SET description = CAST(X'66ff' AS TEXT) WHERE op = 6")
    for args in (("op", "log"), ("op", "show", "6")):
        ran = sw("--repo", str(sw.store), *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout


@pytest.mark.parametrize("damage", [
    "UPDATE ops SET description = X'80ff' WHERE op = 3",
    "UPDATE ops SET actor = X'80' WHERE op = 3",
    "UPDATE ref_moves SET old = X'80' WHERE op = 4",
])
def test_bytes_where_text_belongs_are_e_store_corrupt_on_reads_and_a_batch_answers_every_call(sw, damage):
    """A BLOB put into a text column (SQLite keeps what it is given): every read of it is
    E_STORE_CORRUPT, never a traceback (the JSON encoder met bytes), and a batch still answers
    each of its calls, those after the damaged read included."""
    build_golden_store(sw)
    edit(sw.store, "PRAGMA foreign_keys = OFF", damage)
    op = 4 if "ref_moves" in damage else 3
    for args in (("op", "show", str(op)), ("op", "log"), ("-o", "jsonl", "op", "log")):
        ran = sw.process("--repo", str(sw.store), *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout + ran.stderr
    table = sw.process("--repo", str(sw.store), "-o", "table", "op", "log")
    assert (table.exit, table.stdout) == (9, "") and table.stderr.startswith("E_STORE_CORRUPT: "), table.stderr
    calls = [{"tool": "ref_set", "arguments": {"name": "a1", "target": "main"}}, {"tool": "op_show", "arguments": {"op": op}},
             {"tool": "ref_set", "arguments": {"name": "a2", "target": "main"}}]
    batch = sw.process("--repo", str(sw.store), "--as", ALICE, "call", "--lines", input="".join(json.dumps(c) + "\n" for c in calls))
    answers = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [True, False, True] and answers[1]["error"]["code"] == "E_STORE_CORRUPT", batch.stdout
    assert batch.exit == 9 and "Traceback" not in batch.stderr
    assert {r["name"] for r in sw.ok("--repo", str(sw.store), "ref", "list")["refs"]} >= {"a1", "a2"}


def test_a_ref_name_stored_as_bytes_is_e_store_corrupt_in_ref_list(sw):
    build_golden_store(sw)
    edit(sw.store, "PRAGMA foreign_keys = OFF", "UPDATE refs SET name = CAST(name AS BLOB) WHERE name = 'main'")
    for args in (("ref", "list"), ("-o", "table", "ref", "list")):
        ran = sw.process("--repo", str(sw.store), *args)
        assert ran.exit == 9 and "Traceback" not in ran.stderr and "E_STORE_CORRUPT" in ran.stdout + ran.stderr, ran.stderr


def test_a_gap_in_the_op_numbers_is_e_store_corrupt_on_reads_by_time(sw):
    """`--since` and `--until` find their bounds by a binary search over op numbers: a missing
    op is damage (store check: ops_gapless), not E_INTERNAL."""
    build_golden_store(sw)
    edit(sw.store, "PRAGMA foreign_keys = OFF", "DELETE FROM ops WHERE op = 4")
    ran = sw("--repo", str(sw.store), "op", "log", "--since", "2000-01-01T00:00:00Z")  # every op is later: the search reads op 4
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    assert [p["code"] for p in ran.error["details"]["problems"]] == ["ops_gapless"]
    ran = sw("--repo", str(sw.store), "op", "log", "--since", "1d")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout


def test_a_workflow_row_in_an_unknown_state_is_reported(sw):
    build_golden_store(sw)
    (sw.tmp / "flow.toml").write_text('name = "w"\n[[step]]\nname = "gate"\napproval = "someone"\n')
    sw.ok("--repo", str(sw.store), "--as", ALICE, "workflow", "run", "flow.toml", cwd=sw.tmp)
    edit(sw.store, "UPDATE workflows SET state = 'exploded'", "UPDATE workflow_steps SET result = '{oops'")
    ran = check(sw, sw.store)
    assert codes(ran) == {"workflow_row"} and len(ran.error["details"]["problems"]) == 2


def test_a_file_that_is_not_a_store_database_is_a_problem_list(sw):
    sw.store.mkdir()
    (sw.store / "swarmops.db").write_bytes(b"not a database" * 100)
    ran = check(sw, sw.store)
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT")
    assert codes(ran) == {"unreadable"}


# --- byte flips: seeded, fast -----------------------------------------------------------------


def test_a_flipped_byte_gives_a_typed_outcome_and_writes_never_build_on_known_damage(sw):
    """30 copies of one store, each with one byte flipped (seeded): `store check`, a read and a
    write each give an envelope with a typed code, never E_INTERNAL; a write that `store check`
    says depends on damage (the ref it moves, the newest op) is refused."""
    build_golden_store(sw)
    source = sw.store / "swarmops.db"
    sw.ok("--repo", str(sw.store), "op", "log")  # the last connection closes: one file, no WAL
    data = source.read_bytes()
    rng = random.Random(1010)
    outcomes = {}
    for i in range(30):
        copy = sw.tmp / f"flip{i}"
        copy.mkdir()
        flipped = bytearray(data)
        at = rng.randrange(100, len(flipped))  # past the header, which SQLite checks itself
        flipped[at] ^= 1 << rng.randrange(8)
        (copy / "swarmops.db").write_bytes(bytes(flipped))
        checked = check(sw, copy)
        read = sw("--repo", str(copy), "op", "log")
        write = sw("--repo", str(copy), "--as", ALICE, "ref", "set", "main", "release/v1")
        for ran in (checked, read, write):
            assert ran.envelope["ok"] or ran.error["code"] in ("E_STORE_CORRUPT", "E_NOT_FOUND", "E_INVALID_ARG"), ran.stdout
        if not checked.envelope["ok"]:
            depends = {p.get("ref") for p in checked.error["details"]["problems"]} & {"main"}
            if depends or "hash_chain" in codes(checked) and any(p.get("op") == 6 for p in checked.error["details"]["problems"]):
                assert not write.envelope["ok"], (at, checked.stdout, write.stdout)
        outcomes[i] = (checked.envelope["ok"], read.envelope["ok"], write.envelope["ok"])
    assert any(not c for c, _, _ in outcomes.values())  # the flips did damage something


# --- the format-migration path: a store made by the previous release -----------------------------


def fixture_store(sw) -> Path:
    store = sw.tmp / "format1"
    shutil.copytree(FIXTURES / "format1-store", store)
    return store


def test_a_format_1_store_is_read_as_it_is_and_reads_never_write(sw):
    store = fixture_store(sw)
    before = file_digests(store)
    log = sw.ok("--repo", str(store), "op", "log", "-n", "50")
    expected = json.loads((FIXTURES / "format1-store.op-log.json").read_text())
    assert [o.pop("hash") for o in log["ops"]] == [None] * len(log["ops"])
    assert log == expected
    assert sw.ok("--repo", str(store), "ref", "list") == json.loads((FIXTURES / "format1-store.ref-list.json").read_text())
    checked = sw.ok("--repo", str(store), "store", "check")
    assert (checked["problems"], checked["format"], checked["head"]["hash"]) == ([], 1, None)
    assert sw.ok("--repo", str(store), "op", "log", "--since", "2026-01-01", "-n", "3")["ops"][0]["op"] == 10
    assert file_digests(store) == before


def test_the_first_write_upgrades_a_format_1_store_in_one_transaction(sw):
    store = fixture_store(sw)
    failed = sw("--repo", str(store), "--as", ALICE, "ref", "set", "main", "release/v1", "--expect", "release/v1")
    assert failed.error["code"] == "E_CAS_MISMATCH"
    assert sw.ok("--repo", str(store), "store", "check")["format"] == 1  # a failed write upgrades nothing
    moved = sw.ok("--repo", str(store), "--as", ALICE, "ref", "set", "main", "release/v1")
    assert moved["op"] == 11
    checked = sw.ok("--repo", str(store), "store", "check")
    assert (checked["problems"], checked["format"], checked["head"]["op"]) == ([], FORMAT_VERSION, 11)
    log = sw.ok("--repo", str(store), "op", "log", "-n", "50")["ops"]
    assert all(len(o["hash"]) == 64 for o in log)
    expected = json.loads((FIXTURES / "format1-store.op-log.json").read_text())["ops"]
    assert [{k: v for k, v in o.items() if k != "hash"} for o in log[1:]] == expected  # history unchanged


def test_store_upgrade_upgrades_once_as_one_op(sw):
    store = fixture_store(sw)
    first = sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade")
    assert first == {"format": FORMAT_VERSION, "upgraded_from": 1, "op": 11}
    assert sw.ok("--repo", str(store), "op", "show", "11")["kind"] == "store_upgrade"
    again = sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade")
    assert again == {"format": FORMAT_VERSION, "upgraded_from": None, "op": None}
    assert sw.ok("--repo", str(store), "store", "check")["problems"] == []


def test_losing_the_wal_is_not_detected_by_the_store_but_by_a_recorded_head_hash(sw):
    """The documented limit: ops still in the -wal file when it is lost are gone and their
    numbers are reused; the store left is consistent (store check passes). Only a head hash
    recorded before (as the README says to keep) shows that history changed."""
    build_golden_store(sw)
    keeper = sqlite3.connect(sw.store / "swarmops.db")  # an open connection keeps ops in the WAL
    keeper.execute("SELECT COUNT(*) FROM ops").fetchone()
    keeper.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # ops 1-6 in the main file, the WAL empty
    sw.ok("--repo", str(sw.store), "--as", ALICE, "ref", "set", "lost", "main")  # op 7: in the WAL only
    recorded = sw.ok("--repo", str(sw.store), "store", "check")["head"]
    assert recorded["op"] == 7
    copy = sw.tmp / "copy"
    copy.mkdir()
    shutil.copy(sw.store / "swarmops.db", copy / "swarmops.db")  # without its -wal file
    keeper.close()
    assert sw.ok("--repo", str(copy), "store", "check")["problems"] == []
    assert sw.ok("--repo", str(copy), "--as", ALICE, "ref", "set", "other", "main")["op"] == 7  # reused
    after = sw.ok("--repo", str(copy), "store", "check")["head"]
    assert after["op"] == recorded["op"] and after["hash"] != recorded["hash"]


@pytest.mark.backends("sqlite", "postgres")
def test_a_workflow_step_naming_another_op_is_found_and_never_undone(sw):
    """A step row edited (or damaged) to name another actor's op: `store check` only asked that
    the op exists, and a rollback then undid that op, deleting someone else's ref. The op a
    store step names must be its own (a workflow_step op of that workflow and step)."""
    from core_helpers import tamper

    ids = build_golden_store(sw)
    repo = ("--repo", str(sw.store))
    (sw.tmp / "one.toml").write_text('name = "one"\n[[step]]\nname = "p"\nref_set = { name = "rel", to = "main" }\n')
    wf = sw.ok(*repo, "--as", AGENT, "workflow", "run", str(sw.tmp / "one.toml"))["workflow"]["id"]  # op 7
    assert sw.ok(*repo, "store", "check")["problems"] == []
    with tamper(sw.store) as conn:
        conn.execute(f"UPDATE workflow_steps SET op = 4 WHERE workflow = '{wf}'")  # alice's op 4 made release/v1
    checked = sw(*repo, "store", "check")
    assert (checked.exit, checked.error["code"]) == (9, "E_STORE_CORRUPT")
    assert [p["message"] for p in checked.error["details"]["problems"]] == [f"workflow {wf} step 1 names op 4, which is not that step's"]
    before = op_count(sw.store)
    ran = sw(*repo, "--as", AGENT, "workflow", "rollback", wf, "--include-completed", "--confirm")
    assert (ran.exit, ran.error["code"]) == (7, "E_REFUSED"), ran.stdout
    assert "unreadable_record" in [r["code"] for r in ran.error["details"]["refusals"]]
    assert op_count(sw.store) == before
    assert sw.ok(*repo, "ref", "show", "release/v1")["target"] == ids["fix"]  # op 4's ref, untouched


@pytest.mark.backends("postgres")
def test_a_head_row_moved_with_no_op_is_found_and_writes_are_e_store_corrupt(sw):
    """On PostgreSQL ops are numbered from the `head` row. Moved by one with no op behind it (a
    role's guard lets the head move by one a transaction), every later write was E_INTERNAL
    ("cannot seal op N: the op before it has no hash", a bug) and `store check` passed."""
    from core_helpers import tamper

    build_golden_store(sw)
    with tamper(sw.store) as conn:
        conn.execute("UPDATE head SET last_op = last_op + 1")
    checked = sw("--repo", str(sw.store), "store", "check")
    assert (checked.exit, checked.error["code"]) == (9, "E_STORE_CORRUPT")
    assert [p["code"] for p in checked.error["details"]["problems"]] == ["head_row"]
    ran = sw("--repo", str(sw.store), "--as", ALICE, "ref", "set", "x", "main", "--create")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    assert op_count(sw.store) == 6


def test_a_wal_deleted_under_an_open_store_is_e_store_corrupt_never_e_internal(sw):
    """The -wal file deleted while another process has the store open: SQLite's read fails
    (SQLITE_IOERR_SHORT_READ) and ends the transaction itself. Ending it again, "cannot commit -
    no transaction is active", took the error's place: every read was E_INTERNAL, "a bug"."""
    build_golden_store(sw)
    keeper = sqlite3.connect(sw.store / "swarmops.db")  # another process's open store
    try:
        keeper.execute("SELECT COUNT(*) FROM ops").fetchone()
        sw.ok("--repo", str(sw.store), "--as", ALICE, "ref", "set", "lost", "main")  # op 7: in the WAL
        (sw.store / "swarmops.db-wal").unlink()
        for args in (("op", "log", "-n", "3"), ("store", "check"), ("ref", "list")):
            ran = sw("--repo", str(sw.store), *args)
            assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), (args, ran.stdout)
    finally:
        keeper.close()


@pytest.mark.backends("sqlite", "postgres")
def test_store_check_runs_on_both_backends(sw, backend):
    """The same check, and the same chain, on a local store and on one on a PostgreSQL server."""
    build_golden_store(sw)
    checked = sw.ok("--repo", str(sw.store), "store", "check")
    newest = sw.ok("--repo", str(sw.store), "op", "show", "6")
    assert checked["problems"] == [] and checked["format"] == FORMAT_VERSION
    assert checked["head"] == {"op": 6, "at": newest["at"], "hash": newest["hash"]}
    undone = sw.ok("--repo", str(sw.store), "--as", AGENT, "op", "undo", "6")
    assert sw.ok("--repo", str(sw.store), "store", "check")["head"]["op"] == undone["op"]


@pytest.mark.backends("sqlite", "postgres")
def test_a_write_naming_content_planted_under_its_id_is_refused(sw, backend):
    """A blob's id is the hash of its content, and a write stored a file's content under its id
    only if no row had that id. A role with psql on a shared store could plant other bytes
    under the id of content it expected (a template, a known file): a person's later write of
    that file then named the planted bytes, with no warning. The write is now refused
    (E_STORE_CORRUPT), and writes nothing."""
    from core_helpers import tamper
    from swarmctl.store.changesets import blob_id

    sw.ok("--as", ALICE, "init", str(sw.store))
    notes = sw.tmp / "NOTES.md"
    notes.write_bytes(b"deploy: safe\n")
    planted = b"deploy: rm -rf /"
    with tamper(sw.store) as conn:
        conn.execute("INSERT INTO blobs(id, size, content) VALUES (?, ?, ?)", (blob_id(notes.read_bytes()), len(planted), planted))
    before = op_count(sw.store)
    ran = sw("--repo", str(sw.store), "--as", ALICE, "changeset", "create", "-m", "notes", "--ref", "main", "--file", "NOTES.md")
    assert ran.exit == 9 and ran.error["code"] == "E_STORE_CORRUPT", ran.stdout
    assert "does not hash to its id" in ran.error["message"] + json.dumps(ran.error["details"])
    assert op_count(sw.store) == before


@pytest.mark.backends("sqlite", "postgres")
def test_a_check_that_cannot_read_leaves_the_others_to_run_on_either_store(sw):
    """A table dropped and a ref edited: on PostgreSQL the first failed query aborted the
    check's transaction, and every check after it said only "current transaction is aborted",
    the edited ref among them (SQLite went on and found it)."""
    from core_helpers import tamper

    ids = build_golden_store(sw)
    with tamper(sw.store) as conn:
        conn.execute("DROP TABLE time_breaks")
        conn.execute(f"UPDATE refs SET target = '{ids['base']}' WHERE name = 'main'")
    ran = check(sw, sw.store)
    problems = ran.error["details"]["problems"]
    assert "refs_match_log" in codes(ran), problems
    assert not any("aborted" in p["message"] for p in problems), problems
    # And the table gone is named (a store of this format has every table a new one is made with).
    assert any(p["code"] == "format_tables" and "lacks its table time_breaks" in p["message"] for p in problems)


@pytest.mark.parametrize("side, make", [("-wal", os.mkfifo), ("-shm", os.mkdir)])
def test_store_check_names_a_side_file_every_write_would_refuse(sw, side, make):
    """A FIFO at the -wal (a directory at the -shm): every write said E_STORE_CORRUPT naming it,
    while `store check`, the full check, said the store was sound."""
    build_golden_store(sw)
    fold_wal(sw.store)
    make(f"{sw.store / 'swarmops.db'}{side}")
    ran = sw("--repo", str(sw.store), "store", "check")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    assert [p["code"] for p in ran.error["details"]["problems"]] == ["side_files"], ran.stdout
    write = sw("--repo", str(sw.store), "--as", ALICE, "ref", "set", "x", "main", "--create")
    assert (write.exit, write.error["code"]) == (9, "E_STORE_CORRUPT") and side in write.error["message"], write.stdout
