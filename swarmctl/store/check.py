"""The store's own consistency checks: what a future `swarmctl check` runs, and what the tests
run after racing and killing processes.

The op log is the history and the refs table is its result, so each can be checked against
the other: replaying every ref move in op order must be a chain of compare-and-swaps (each
move starts from what the ref named after the previous one) and must end exactly at the refs
table. Op numbers must run 1, 2, 3, ... without a gap.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from swarmctl.names import shadows_changeset_id
from swarmctl.store import reverts
from swarmctl.store.sql import SQLITE, Conn, dialect


class Problem(NamedTuple):
    check: str  # which rule: "ops_gapless", "move_chain", "refs_match_log", ...
    message: str
    op: int | None = None
    ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def check_store(conn: Conn, *, integrity: bool = False) -> list[Problem]:
    """Every inconsistency found between the op log, the refs and the changesets (none: [])."""
    # SQLite checks its file and foreign keys on request; PostgreSQL enforces foreign keys on
    # every write and checks its own pages.
    on_sqlite = dialect(conn) == SQLITE
    problems: list[Problem] = []
    if integrity and on_sqlite:
        problems += _integrity(conn)
    problems += _ops_gapless(conn)
    problems += _ops_ordered(conn)
    problems += _reverts_earlier(conn)
    problems += _replay(conn)
    if on_sqlite:
        problems += _foreign_keys(conn)
    problems += _refs_shadowing_ids(conn)
    return problems


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


def _ops_ordered(conn: Conn) -> list[Problem]:
    problems = []
    previous_at = ""
    for op, at, undoes in conn.execute("SELECT op, at, undoes FROM ops ORDER BY op"):
        if at < previous_at:
            problems.append(Problem("ops_time_order", f"op {op} at {at} is earlier than the op before it", op))
        previous_at = at
        if undoes is not None and not 1 <= undoes < op:
            problems.append(Problem("undoes_earlier_op", f"op {op} undoes op {undoes}, which is not earlier", op))
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
