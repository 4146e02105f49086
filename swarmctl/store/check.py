"""The store's own consistency checks: what `swarmctl store check` runs (the full check), what
every write runs of it cheaply (`head_problems`, `ref_problems`: only what that write depends
on), and what the tests run after racing and killing processes.

The op log is the history and the refs table is its result, so each can be checked against
the other: replaying every ref move in op order must be a chain of compare-and-swaps (each
move starts from what the ref named after the previous one) and must end exactly at the refs
table. Op numbers must run 1, 2, 3, ... without a gap; each op's hash must be the link its
content and the op before it give (swarmctl/store/chain.py); a changeset's id must be the hash
of its content, a blob's of its bytes. Op times may go back only where a writer's clock was
behind an op written by a clock that ran ahead, and such ops are listed in time_breaks.

A check that cannot read what it checks (a page SQLite finds corrupt, text that is not UTF-8)
reports that as a problem instead of failing: a damaged store gets a list, not a traceback.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, NamedTuple

from swarmctl.envelope import SwarmError
from swarmctl.names import shadows_changeset_id
from swarmctl.store import reverts, tokens, workflows
from swarmctl.store.errors import Problem, StoreDamaged
from swarmctl.store.sql import SQLITE, Conn, dialect

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$", re.ASCII)  # \d: 0-9 only


def check_store(
    conn: Conn,
    *,
    integrity: bool = False,
    workflow_states: Iterable[str] | None = None,
    step_statuses: Iterable[str] | None = None,
) -> list[Problem]:
    """Every inconsistency found in the store (none: [])."""
    checks: list[Callable[[Conn], list[Problem]]] = []
    if integrity and dialect(conn) == SQLITE:
        checks.append(_integrity)
    checks += [_format_tables, _ops_gapless, _ops_ordered, _reverts_earlier, _replay, _moves_beside_ops, _hash_chain]
    checks += [_changesets, _blobs, _refs_shadowing_ids, _settings, tokens.problems]
    if dialect(conn) == SQLITE:
        checks.append(_foreign_keys)
    else:
        checks.append(_head_row)
    def workflows_rows(c: Conn) -> list[Problem]:
        return _workflows(c, workflow_states, step_statuses)

    checks.append(workflows_rows)
    problems: list[Problem] = []
    for run in checks:
        problems += [p for p in _guarded(run, conn) if p not in problems]  # a check may meet another's
    return problems


def _format_tables(conn: Conn) -> list[Problem]:
    """The store's tables are those of the format it records: a write upgrades by that number
    (and refuses a store whose tables say otherwise), and reads take it at its word."""
    from swarmctl.store import migrate

    mismatch = migrate.format_mismatch(conn)
    return [] if mismatch is None else [Problem("format_tables", mismatch)]


def _head_row(conn: Conn) -> list[Problem]:
    """PostgreSQL numbers ops from its `head` row: it must name the newest op. A head moved with
    no op behind it makes every later write's op follow a gap."""
    head = conn.execute("SELECT last_op FROM head WHERE id = 1").fetchone()
    newest = conn.execute("SELECT COALESCE(MAX(op), 0) FROM ops").fetchone()[0]
    if head is None or head[0] != newest:
        found = "no head row" if head is None else f"the head row names op {head[0]}"
        return [Problem("head_row", f"{found}, but the newest op is {newest}", newest or None)]
    return []


# A server's refusal (a grant missing), a cancelled statement (a timeout), a lost connection or
# a lack of resources says nothing of the store: raised, it is typed where the read is
# (E_FORBIDDEN, E_BUSY, E_UNAVAILABLE), never listed as damage (SQLSTATE classes and codes).
_NOT_DAMAGE = ("42501", "57014", "08", "57P", "53", "40001", "40P01")


def _lack_of_resources(exc: Exception) -> Exception | None:
    """What stopped a check when it was this machine, not the store: no file descriptor or
    memory left (`ulimit -n`: BLAKE3's module could not be opened, SQLite "unable to open" its
    files) is E_UNAVAILABLE, safe to retry, never damage. None: it may be the store's."""
    import errno

    from swarmctl.store import errors

    if isinstance(exc, MemoryError):
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return errors.too_many_open_files(None, f"{exc.strerror}: {exc.filename}")
    if errors.no_descriptor_free():
        return errors.too_many_open_files(None, f"{type(exc).__name__}: {exc}")
    return None


def _guarded(run: Callable[[Conn], list[Problem]], conn: Conn) -> list[Problem]:
    # On PostgreSQL a failed query aborts the transaction, and every check after it said only
    # "current transaction is aborted": each runs in a savepoint, and a failure is undone alone.
    savepoint = dialect(conn) != SQLITE and conn.in_transaction()  # (autocommit: nothing to abort)
    if savepoint:
        conn.execute("SAVEPOINT a_check")
    try:
        found = run(conn)
    except Exception as exc:  # noqa: BLE001 - whatever stops a check is what it found
        state = getattr(exc, "sqlstate", None)
        if isinstance(state, str) and state.startswith(_NOT_DAMAGE):
            raise
        if (lack := _lack_of_resources(exc)) is not None:
            raise lack from exc
        if isinstance(exc, StoreDamaged):  # what a walk of the store met (a loop of undos): those problems
            if savepoint:
                conn.execute("ROLLBACK TO SAVEPOINT a_check")
            return exc.problems
        if savepoint:
            conn.execute("ROLLBACK TO SAVEPOINT a_check")
        name = getattr(run, "__name__", "check").strip("_")
        return [Problem("unreadable", f"{name}: the store cannot be read here: {type(exc).__name__}: {exc}")]
    if savepoint:
        conn.execute("RELEASE SAVEPOINT a_check")
    return found


# --- the cheap checks every write makes --------------------------------------------------------


def head_problems(conn: Conn, chained: bool | None = None) -> list[Problem]:
    """Is the newest op well-formed: a known kind, a time, and (format 2) its hash? `chained`:
    whether the store's format has the hash chain, where the caller read it already (None: ask)."""
    from swarmctl.store.schema import OP_KINDS

    chained = _has_chain(conn) if chained is None else chained
    row = conn.execute(f"SELECT op, kind, at, {'hash' if chained else 'NULL'} FROM ops ORDER BY op DESC LIMIT 1").fetchone()
    if row is None:
        return []
    op, kind, at, stored = row
    problems = []
    if kind not in OP_KINDS:
        problems.append(Problem("head_op", f"the newest op, {op}, has an unknown kind {kind!r}", op))
    if not isinstance(at, str) or not _TIME.fullmatch(at):
        problems.append(Problem("head_op", f"the newest op, {op}, has no valid time ({at!r})", op))
    if chained:
        from swarmctl.store import chain

        previous = chain.previous_hash(conn, op)
        content = chain.op_content(conn, op)
        if previous is None or content is None or stored != chain.op_hash(previous, content):
            problems.append(Problem("hash_chain", f"the newest op, {op}, does not match its hash: it was changed", op))
    return problems


def ref_problems(conn: Conn, names: Iterable[str], targets: dict[str, Any] | None = None) -> list[Problem]:
    """Does each ref agree with its last move in the op log (what it names, which op)? What
    each names as read (None: absent) goes into `targets`, when given."""
    problems = []
    for name in dict.fromkeys(names):
        ref = conn.execute("SELECT target, op FROM refs WHERE name = ?", (name,)).fetchone()
        if targets is not None:
            targets[name] = ref[0] if ref is not None else None
        last = conn.execute(
            "SELECT op, new FROM ref_moves WHERE name = ? ORDER BY op DESC LIMIT 1", (name,)
        ).fetchone()
        expected = (last[1], last[0]) if last is not None and last[1] is not None else None
        actual = (ref[0], ref[1]) if ref is not None else None
        if expected != actual:
            said = f"names {actual[0]} (op {actual[1]})" if actual else "does not exist"
            logged = f"op {last[0]} left it at {last[1]}" if last else "no op moved it"
            problems.append(Problem("refs_match_log", f"ref {name} {said}, but in the op log {logged}", ref=name))
    return problems


def _has_chain(conn: Conn) -> bool:
    from swarmctl.store.queries import stored_format

    return stored_format(conn) >= 2


# --- the full check ----------------------------------------------------------------------------


def _integrity(conn: Conn) -> list[Problem]:
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    return [] if rows == ["ok"] else [Problem("sqlite_integrity", row) for row in rows]


def _ops_gapless(conn: Conn) -> list[Problem]:
    count, low, high = conn.execute("SELECT COUNT(*), MIN(op), MAX(op) FROM ops").fetchone()
    if count == 0:
        return [Problem("ops_gapless", "the op log is empty: op 1 (init) is missing")]
    if low != 1 or high != count:
        return [Problem("ops_gapless", f"{count} ops numbered {low}..{high}: the numbers have gaps")]
    return []


class LateOp(NamedTuple):
    """An op whose time is earlier than the op before it."""

    op: int
    at: str
    previous_at: str  # the time of the op before it
    recorded: bool  # a known break (time_breaks): a clock that ran ahead, not damage


def times_out_of_order(conn: Conn) -> list[LateOp]:
    """Each op whose time is earlier than the op before it, and whether it is a known break."""
    breaks = set(_time_breaks(conn))
    found = []
    previous_at = ""
    for op, at in conn.execute("SELECT op, at FROM ops ORDER BY op"):
        if at < previous_at:
            found.append(LateOp(op, at, previous_at, op in breaks))
        previous_at = at
    return found


def _time_breaks(conn: Conn) -> list[int]:
    from swarmctl.store.queries import time_breaks

    return time_breaks(conn)


def _ops_ordered(conn: Conn) -> list[Problem]:
    problems = [
        Problem(
            "ops_time_order",
            f"op {t.op} at {t.at} is earlier than the op before it ({t.previous_at}), "
            "and no clock skew recorded it",
            t.op,
        )
        for t in times_out_of_order(conn)
        if not t.recorded
    ]
    for op, undoes, kind, at in conn.execute("SELECT op, undoes, kind, at FROM ops ORDER BY op"):
        if undoes is not None and not 1 <= undoes < op:
            problems.append(Problem("undoes_earlier_op", f"op {op} undoes op {undoes}, which is not earlier", op))
        if not isinstance(at, str) or not _TIME.fullmatch(at):
            problems.append(Problem("op_time", f"op {op} has no valid time ({at!r})", op))
    return problems


def _reverts_earlier(conn: Conn) -> list[Problem]:
    """Each op a revert took back is earlier than it, and the op taking it back is a revert."""
    return [
        Problem("reverts_earlier_op", f"op {op} ({kind}) is recorded as reverting op {target}, which is not an earlier op", op)
        for op, target, kind in reverts.records(conn)
        if kind != "revert" or not 1 <= target < op
    ]


def _replay(conn: Conn) -> list[Problem]:
    """Replay every ref move in op order; each must start where the last left the ref."""
    problems = []
    state: dict[str, str] = {}
    last_moved: dict[str, int] = {}
    for op, name, old, new in conn.execute("SELECT op, name, old, new FROM ref_moves ORDER BY op, seq"):
        if state.get(name) != old:
            problems.append(
                Problem("move_chain", f"op {op} moved {name} from {old}, but it named {state.get(name)}", op, name)
            )
        if new is None:
            state.pop(name, None)
        else:
            state[name] = new
        last_moved[name] = op
    refs = {name: (target, op) for name, target, op in conn.execute("SELECT name, target, op FROM refs")}
    for name in sorted(state.keys() | refs.keys()):
        replayed = state.get(name)
        target, op = refs.get(name, (None, None))
        if replayed != target:
            problems.append(
                Problem("refs_match_log", f"ref {name} names {target}, but the op log leaves it at {replayed}", ref=name)
            )
        elif target is not None and op != last_moved.get(name):
            problems.append(
                Problem("refs_match_log", f"ref {name} says op {op} moved it last; the op log says {last_moved.get(name)}", op, name)
            )
    return problems


def _moves_beside_ops(conn: Conn) -> list[Problem]:
    """Format 3: the actor and kind beside each ref move are its op's (`op log --ref` with
    `--actor`/`--kind` reads them, not the op)."""
    from swarmctl.store.queries import stored_format

    if stored_format(conn) < 3:
        return []
    rows = conn.execute(
        "SELECT m.op, m.name, m.actor, m.kind, o.actor, o.kind FROM ref_moves m JOIN ops o ON o.op = m.op "
        "WHERE m.actor IS NULL OR m.kind IS NULL OR m.actor <> o.actor OR m.kind <> o.kind ORDER BY m.op, m.seq"
    )
    return [
        Problem("moves_match_ops", f"op {op}'s move of {name} records actor {actor!r} and kind {kind!r}; "
                f"the op's are {op_actor!r} and {op_kind!r}", op, name)
        for op, name, actor, kind, op_actor, op_kind in rows
    ]


def _hash_chain(conn: Conn) -> list[Problem]:
    if not _has_chain(conn):
        return []
    from swarmctl.store import chain

    problems = []
    for link in chain.walk(conn):
        if link.stored != link.computed:
            what = "has no hash" if link.stored is None else "does not match its hash (its content or the op before it changed)"
            problems.append(Problem("hash_chain", f"op {link.op} {what}", link.op))
    return problems


def _changesets(conn: Conn) -> list[Problem]:
    from swarmctl.store.changesets import changeset_id

    problems = []
    for cid, message, actor, at, parents, metadata, files in conn.execute(
        "SELECT id, message, actor, at, parents, metadata, files FROM changesets ORDER BY id"
    ):
        try:
            computed = changeset_id(
                message=message, parents=json.loads(parents), actor=actor, at=at,
                metadata=json.loads(metadata), files=json.loads(files),
            )
        except (ValueError, TypeError) as exc:
            problems.append(Problem("changeset_content", f"changeset {cid} cannot be read: {exc}"))
            continue
        if computed != cid:
            problems.append(Problem("changeset_id", f"changeset {cid} does not hash to its id: its content changed"))
    return problems


def _settings(conn: Conn) -> list[Problem]:
    """The store's settings (`meta` rows) hold what their commands could set."""
    from swarmctl.store import txs

    try:
        txs.max_revisions(conn)
    except SwarmError as exc:
        return [Problem("settings", exc.message)]
    return []


def _blobs(conn: Conn) -> list[Problem]:
    from swarmctl.store.changesets import blob_id

    return [
        Problem("blob_id", f"file content {bid} does not hash to its id: it changed")
        for bid, content in conn.execute("SELECT id, content FROM blobs ORDER BY id")
        if blob_id(bytes(content)) != bid
    ]


def _refs_shadowing_ids(conn: Conn) -> list[Problem]:
    """Refs named like a changeset id (made before such names were refused): a TARGET of that
    text now means the changeset, so the ref is reachable only by `ref show`/`ref delete`."""
    return [
        Problem("ref_shadows_id", f"ref {name} is named like a changeset id prefix; rename it (set a new ref, delete this one)", ref=name)
        for (name,) in conn.execute("SELECT name FROM refs ORDER BY name")
        if shadows_changeset_id(name)
    ]


def _foreign_keys(conn: Conn) -> list[Problem]:
    return [
        Problem("foreign_key", f"{table} row {rowid} points at a missing row of {parent}")
        for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
    ]


def _workflows(conn: Conn, states: Iterable[str] | None, statuses: Iterable[str] | None) -> list[Problem]:
    known_states = set(states) if states is not None else None
    known_statuses = set(statuses) if statuses is not None else None
    problems, not_in_log = [], set()
    for wid, state in conn.execute("SELECT id, state FROM workflows ORDER BY id"):
        if known_states is not None and state not in known_states:
            problems.append(Problem("workflow_row", f"workflow {wid} is in an unknown state {state!r}"))
    for wid, idx, status, spec, result, undo_result, op in conn.execute(
        "SELECT workflow, idx, status, spec, result, undo_result, op FROM workflow_steps ORDER BY workflow, idx"
    ):
        if known_statuses is not None and status not in known_statuses:
            problems.append(Problem("workflow_row", f"workflow {wid} step {idx} has an unknown status {status!r}"))
        for column, text in (("spec", spec), ("result", result), ("undo_result", undo_result)):
            if text is None and column != "spec":
                continue
            try:
                json.loads(text)
            except (TypeError, ValueError):
                problems.append(Problem("workflow_row", f"workflow {wid} step {idx}: its {column} is not JSON"))
        if op is not None and conn.execute("SELECT 1 FROM ops WHERE op = ?", (op,)).fetchone() is None:
            problems.append(Problem("workflow_row", f"workflow {wid} step {idx} names op {op}, which is not in the log", op))
            not_in_log.add((wid, idx))
    for f in workflows.foreign_ops(conn):  # an op in the log, but another's: a rollback would undo it
        if (f.workflow, f.idx) not in not_in_log:
            problems.append(Problem("workflow_row", f"workflow {f.workflow} step {f.idx} names op {f.op}, which is not that step's", f.op))
    return problems
