"""Issue 11, item 3: store format 3 puts each op's actor and kind beside its ref moves, so that
`op log --ref R` with `--actor`/`--kind`/`--since` reads a page at the cost of the page, and
makes the tokens table in every store.

A store made by the release before it (format 2, tests/fixtures/format2-store, made with that
release's code at 73f84c2) is read as it is and never written by a read; its first write or
`store upgrade` upgrades it in one transaction, through the one migration path
(swarmctl/store/migrate.py), on both backends. (How flat the filters are is measured by
bench/core.py; here, that each is answered by the index that makes it so.)"""

import itertools
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from core_helpers import AGENT, ALICE, CI, build_golden_store, connect, file_digests, op_count, tamper
from swarmctl.store import Store, queries
from swarmctl.store.schema import DB_FILE, FORMAT_VERSION

FIXTURES = Path(__file__).parent / "fixtures"

# Every combination of --ref with --actor/--kind/--since, with values that match many, few and
# no ops of the fixture.
REFS = ("main", "release/v1", "staging", "scratch", "nothing")
ACTORS = (None, ALICE, AGENT, CI, "human/nobody")
KINDS = (None, "ref_set", "changeset_create", "tx_commit", "undo", "revert", "init")
SINCE = (None, "2026-01-01", "2030-01-01")


def filters():
    for ref, actor, kind, since in itertools.product(REFS, ACTORS, KINDS, SINCE):
        yield queries.LogQuery(limit=100, ref=ref, actor=actor, kind=kind, since=since and f"{since}T00:00:00.000Z")


def every_filter(store) -> dict[tuple, list[int]]:
    """What `op log` selects for every combination (through the store's own query, in-process:
    the CLI path is the same call, run for a few of them below)."""
    opened = Store.open(store, readonly=True)
    try:
        with opened.read() as conn:
            return {q[3:7]: queries.op_log(conn, q)[0] for q in filters()}
    finally:
        opened.close()


def fixture_store(sw) -> Path:
    store = sw.tmp / "format2"
    shutil.copytree(FIXTURES / "format2-store", store)
    return store


def log(sw, store, *args: str) -> list[int]:
    return [o["op"] for o in sw.ok("--repo", str(store), "op", "log", "-n", "100", *args)["ops"]]


def test_format_3_is_what_this_release_makes(sw):
    assert FORMAT_VERSION == 4  # format 3 and, since, workflow leases (format 4, test_workflow_hosts.py)
    build_golden_store(sw)
    assert sw.ok("--repo", str(sw.store), "store", "check")["format"] == FORMAT_VERSION
    conn = sqlite3.connect(sw.store / DB_FILE)
    moves = conn.execute("SELECT op, name, actor, kind FROM ref_moves ORDER BY op, seq").fetchall()
    assert moves[-1] == (6, "release/v1", AGENT, "ref_set")
    assert moves[0] == (2, "main", ALICE, "changeset_create")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "tokens" in tables  # made with the store, not by its first `token create`


def test_a_format_2_store_is_read_as_it_is_and_reads_never_write(sw):
    store = fixture_store(sw)
    before = file_digests(store)
    assert sw.ok("--repo", str(store), "op", "log", "-n", "50") == json.loads((FIXTURES / "format2-store.op-log.json").read_text())
    assert sw.ok("--repo", str(store), "ref", "list") == json.loads((FIXTURES / "format2-store.ref-list.json").read_text())
    checked = sw.ok("--repo", str(store), "store", "check")
    assert (checked["problems"], checked["format"], checked["head"]["op"]) == ([], 2, 12)
    assert log(sw, store, "--ref", "main", "--actor", ALICE) == [8, 2]
    assert log(sw, store, "--ref", "main", "--kind", "tx_commit") == [7]
    assert log(sw, store, "--ref", "release/v1", "--actor", AGENT, "--kind", "ref_set", "--since", "2026-01-01") == [6]
    assert [t["actor"] for t in sw.ok("--repo", str(store), "token", "list")["tokens"]] == [AGENT]
    assert file_digests(store) == before


def test_the_first_write_upgrades_a_format_2_store_in_one_transaction(sw):
    store = fixture_store(sw)
    old = every_filter(store)
    failed = sw("--repo", str(store), "--as", ALICE, "ref", "set", "main", "release/v1", "--expect", "release/v1")
    assert failed.error["code"] == "E_CAS_MISMATCH"
    assert sw.ok("--repo", str(store), "store", "check")["format"] == 2  # a failed write upgrades nothing
    assert sw.ok("--repo", str(store), "--as", ALICE, "ref", "set", "main", "release/v1")["op"] == 13
    checked = sw.ok("--repo", str(store), "store", "check")
    assert (checked["problems"], checked["format"], checked["head"]["op"]) == ([], FORMAT_VERSION, 13)
    expected = json.loads((FIXTURES / "format2-store.op-log.json").read_text())["ops"]
    assert sw.ok("--repo", str(store), "op", "log", "-n", "50")["ops"][1:] == expected  # history unchanged
    new = every_filter(store)
    assert {k: [op for op in v if op != 13] for k, v in new.items()} == old  # same answers, now from the index
    assert new[("main", ALICE, "ref_set", None)] == [13]
    assert sw.ok("--repo", str(store), "--as", ALICE, "token", "create", CI)["op"] == 14


def test_store_upgrade_upgrades_a_format_2_store_once_as_one_op(sw):
    store = fixture_store(sw)
    first = sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade")
    assert first == {"format": FORMAT_VERSION, "upgraded_from": 2, "op": 13}
    assert sw.ok("--repo", str(store), "op", "show", "13")["kind"] == "store_upgrade"
    assert sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade") == {"format": FORMAT_VERSION, "upgraded_from": None, "op": None}
    assert sw.ok("--repo", str(store), "store", "check")["problems"] == []
    conn = sqlite3.connect(store / DB_FILE)
    assert conn.execute("SELECT COUNT(*) FROM ref_moves WHERE actor IS NULL OR kind IS NULL").fetchone()[0] == 0
    assert conn.execute(
        "SELECT COUNT(*) FROM ref_moves m JOIN ops o ON o.op = m.op WHERE m.actor <> o.actor OR m.kind <> o.kind"
    ).fetchone()[0] == 0


def test_a_format_1_store_gets_the_tokens_table_from_its_upgrade(sw):
    store = sw.tmp / "format1"
    shutil.copytree(FIXTURES / "format1-store", store)
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'tokens'"
    assert sqlite3.connect(store / DB_FILE).execute(tables).fetchall() == []
    assert sw.ok("--repo", str(store), "token", "list")["tokens"] == []  # read as it is
    assert sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade")["upgraded_from"] == 1
    assert sqlite3.connect(store / DB_FILE).execute(tables).fetchall() == [("tokens",)]
    assert sw.ok("--repo", str(store), "store", "check")["problems"] == []


def test_store_check_finds_a_move_whose_actor_or_kind_is_not_its_ops(sw):
    build_golden_store(sw)
    with tamper(sw.store) as conn:
        conn.execute("UPDATE ref_moves SET actor = 'human/mallory' WHERE op = 6")
        conn.execute("UPDATE ref_moves SET kind = NULL WHERE op = 4")
    ran = sw("--repo", str(sw.store), "store", "check")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT")
    found = [(p["code"], p.get("op")) for p in ran.error["details"]["problems"]]
    assert found == [("moves_match_ops", 4), ("moves_match_ops", 6)]


def test_store_copy_of_a_format_2_store_fills_the_moves_actor_and_kind(sw):
    store = fixture_store(sw)
    old = every_filter(store)
    copy = sw.tmp / "copy"
    sw.ok("--as", ALICE, "store", "copy", str(store), str(copy))
    assert sw.ok("--repo", str(copy), "store", "check")["problems"] == []
    assert every_filter(copy) == old


def downgrade_to_format_2(store) -> None:
    """Make the store what the release before format 3 made: no actor and kind beside the ref
    moves, no owner_host and owner_lease on workflows (format 4), and format 2 recorded (as a person with psql might, to test the upgrade)."""
    with tamper(store) as conn:
        for index in ("ref_moves_actor", "ref_moves_kind", "ref_moves_actor_kind"):
            conn.execute(f"DROP INDEX {index}")
        conn.execute("ALTER TABLE ref_moves DROP COLUMN actor")
        conn.execute("ALTER TABLE ref_moves DROP COLUMN kind")
        conn.execute("ALTER TABLE workflows DROP COLUMN owner_host")  # format 4's
        conn.execute("ALTER TABLE workflows DROP COLUMN owner_lease")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'format'")


@pytest.mark.backends("sqlite", "postgres")
def test_the_format_3_step_runs_on_both_backends(sw, backend):
    ids = build_golden_store(sw)
    assert sw.ok("--repo", str(sw.store), "--as", CI, "ref", "set", "main", ids["base"])["op"] == 7
    downgrade_to_format_2(sw.store)
    old = every_filter(sw.store)
    assert old[("main", CI, "ref_set", None)] == [7]
    assert sw.ok("--repo", str(sw.store), "store", "check")["format"] == 2
    assert sw.ok("--repo", str(sw.store), "--as", ALICE, "store", "upgrade")["upgraded_from"] == 2
    assert sw.ok("--repo", str(sw.store), "store", "check")["problems"] == []
    assert {k: [op for op in v if op != 8] for k, v in every_filter(sw.store).items()} == old
    with connect(sw.store) as conn:
        assert conn.execute("SELECT actor, kind FROM ref_moves WHERE op = 7").fetchall() == [(CI, "ref_set")]


def test_an_older_store_read_as_it_is_joins_the_ops_and_a_format_3_one_needs_not():
    q = queries.LogQuery(limit=20, ref="main", actor=AGENT, kind="ref_set")
    old, _ = queries.log_sql(q, None, None, beside=False)
    new, _ = queries.log_sql(q, None, None)
    assert "JOIN ops" in old and "o.actor = ?" in old
    assert "JOIN" not in new and "m.actor = ?" in new and "m.kind = ?" in new


def _door(sw, store: Path):
    """`swarmctl call --lines` on `store`, as a process fed one line at a time."""
    import subprocess

    from swarm import swarmctl_argv

    return subprocess.Popen(
        [*swarmctl_argv(), "--repo", str(store), "--as", AGENT, "call", "--lines"], cwd=sw.tmp, env=sw.env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _ask(door, tool: str, **arguments) -> dict:
    door.stdin.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
    door.stdin.flush()
    return json.loads(door.stdout.readline())


@pytest.mark.parametrize("made_as", ["format1-store", "format2-store"])
def test_a_write_that_fails_takes_its_upgrade_with_it_and_the_next_write_makes_it_again(sw, made_as):
    """On an older store, a write that fails after its transaction began (its upgrade rolled
    back with it) left the open store taking itself for upgraded: in a door that keeps the store
    open (`call --lines`, `mcp`) every later write was E_INTERNAL (format 2: no column `actor`)
    or E_STORE_CORRUPT (format 1: no column `hash`), and `store upgrade` said it was current."""
    store = sw.tmp / made_as
    shutil.copytree(FIXTURES / made_as, store)
    door = _door(sw, store)
    try:
        failed = _ask(door, "ref_delete", name="no-such-ref")
        assert failed["error"]["code"] == "E_NOT_FOUND", failed
        written = _ask(door, "ref_set", name="after", target="main", create=True)
        assert written["ok"], written
        upgrade = _ask(door, "store_upgrade")
        assert upgrade["result"] == {"format": FORMAT_VERSION, "upgraded_from": None, "op": None}, upgrade
    finally:
        door.stdin.close()
        assert door.wait(timeout=60) == 4, door.stderr.read()  # the first failure's exit status
    assert sw.ok("--repo", str(store), "store", "check")["problems"] == []
    assert sqlite3.connect(store / DB_FILE).execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (str(FORMAT_VERSION),)


def test_store_upgrade_of_a_store_another_process_upgraded_since_it_was_opened_writes_nothing(sw):
    """`store upgrade` asked whether to upgrade of the store as it had opened it, not under the
    write lock: a door opened before another process's upgrade recorded a second, false
    `store_upgrade` op ("from format 2") on a store that was current."""
    store = fixture_store(sw)
    door = _door(sw, store)
    try:
        assert _ask(door, "op_log", limit=1)["ok"]  # the door has the store open, as format 2
        assert sw.ok("--repo", str(store), "--as", ALICE, "store", "upgrade")["upgraded_from"] == 2
        again = _ask(door, "store_upgrade")
        assert again["result"] == {"format": FORMAT_VERSION, "upgraded_from": None, "op": None}, again
    finally:
        door.stdin.close()
        assert door.wait(timeout=60) == 0, door.stderr.read()
    assert log(sw, store, "--kind", "store_upgrade") == [13]


@pytest.mark.backends("sqlite", "postgres")
@pytest.mark.parametrize("recorded", ["1", "2", "3", "5"])
def test_a_store_whose_tables_are_not_its_recorded_formats_is_corrupt_and_left_as_it_is(sw, backend, recorded):
    """A format number its tables contradict (a person with psql or sqlite3, a half-restored
    backup): the write's upgrade ran its steps on tables that had them (E_INTERNAL, "duplicate
    column name") and `store check` found nothing. Now every write and `store upgrade` are
    E_STORE_CORRUPT and write nothing, and `store check` names the contradiction."""
    build_golden_store(sw)
    before = op_count(sw.store)
    with tamper(sw.store) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (recorded,))
    # (`store upgrade` of a store of the current format or past it: it said that store was current.)
    for args in [("ref", "set", "x", "main", "--create"), ("store", "upgrade")]:
        ran = sw("--repo", str(sw.store), "--as", ALICE, *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), ran.stdout
    checked = sw("--repo", str(sw.store), "store", "check")
    problems = checked.error["details"]["problems"]
    if backend == "postgres" and recorded == "5":  # a read there looks for the policy first: it fails first
        assert (checked.exit, [p["code"] for p in problems]) == (9, ["unreadable"]), problems
    else:
        assert (checked.exit, [p["code"] for p in problems]) == (9, ["format_tables"]), problems
        assert f"records format {recorded} but" in problems[0]["message"]
    with connect(sw.store) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == recorded
    assert op_count(sw.store) == before


@pytest.mark.parametrize("recorded", ["0", "²", "٤"])
def test_a_format_that_is_no_format_number_is_corrupt_at_every_command(sw, recorded):
    """`²` passed str.isdigit() and failed int(): E_INTERNAL at every command, reads too; `٤`
    (an Arabic-Indic 4) was read as format 4; format 0 was E_INTERNAL at the first write."""
    build_golden_store(sw)
    with tamper(sw.store) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (recorded,))
    for args in (["op", "log"], ["store", "check"], ["--as", ALICE, "ref", "set", "x", "main", "--create"]):
        ran = sw("--repo", str(sw.store), *args)
        assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT"), (args, ran.stdout)
        assert "records no store format" in ran.error["message"]


def test_store_upgrade_of_a_store_that_has_no_tables_but_its_format_is_corrupt(sw):
    """A database holding only `meta` (format 4): every command said E_STORE_CORRUPT, but `store
    upgrade` answered ok, "format 4, nothing to do"."""
    (sw.tmp / "bare").mkdir()
    conn = sqlite3.connect(sw.tmp / "bare" / DB_FILE)
    conn.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
                       f"INSERT INTO meta VALUES ('format', '{FORMAT_VERSION}');")
    conn.close()
    ran = sw("--repo", str(sw.tmp / "bare"), "--as", ALICE, "store", "upgrade")
    assert (ran.exit, ran.error["code"]) == (9, "E_STORE_CORRUPT") and "lacks" in ran.error["message"], ran.stdout

