"""Workflows as rows: what `swarmctl workflow` reads and writes (tables in schema.py).

A workflow row holds its state, the process acting on it (`owner_*`) and `rev`, which every
change to the workflow or one of its steps bumps: a rollback claims the workflow only if `rev`
is still what it checked. A step row holds its definition (`spec`, JSON) and what running and
undoing it did (`result`, `undo_result`, JSON). None of this is an op.

What the rows mean (a step saved `running` whose process is gone, ...) is decided in
swarmctl/tools/workflow/records.py. Reads take any connection; writes must run inside
Store.write(), and pass its time as `at`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from swarmctl import names
from swarmctl.store.migrate import stored_format
from swarmctl.store.sql import POSTGRES, Conn, dialect, starts_with


class WorkflowRow(NamedTuple):
    id: str
    name: str
    description: str | None
    state: str
    source: str
    base_dir: str
    created_by: str
    created_at: str
    updated_at: str
    cursor: int | None
    owner_pid: int | None
    owner_start: str | None
    owner_actor: str | None
    owner_host: str | None  # format 4 (None in an older store)
    owner_lease: str | None  # format 4
    rollback_by: str | None
    rollback_at: str | None
    rev: int


class StepRow(NamedTuple):
    idx: int
    name: str
    kind: str
    spec: str | None  # JSON text, as stored: the reader decides what an unreadable one means
    status: str
    pid: int | None
    pid_start: str | None
    attempts: int
    started_at: str | None
    finished_at: str | None
    op: int | None
    result: str | None  # JSON text
    approved_by: str | None
    approved_at: str | None
    undo_op: int | None
    undo_result: str | None  # JSON text
    interrupted_during: str | None
    command_pid: int | None  # the process group of its command (the leader's pid)
    command_start: str | None  # the leader's start time


class Listed(NamedTuple):
    id: str
    name: str
    state: str
    created_by: str
    created_at: str
    updated_at: str
    steps: int
    done: int  # steps that succeeded


class WorkflowBrief(NamedTuple):
    """A workflow as shell completion shows it."""

    id: str
    name: str
    state: str  # as saved


class StepBrief(NamedTuple):
    """A step as shell completion shows it."""

    name: str
    kind: str
    status: str  # as saved


_WF_COLUMNS = ", ".join(WorkflowRow._fields)
# A store older than format 4 has no owner_host nor owner_lease: read as it is, they are null.
LEASE_FORMAT = 4
_WF_COLUMNS_2 = _WF_COLUMNS.replace("owner_host, owner_lease", "NULL, NULL")
_STEP_COLUMNS = ", ".join(StepRow._fields)


# --- reads ---------------------------------------------------------------------------------


def exists(conn: Conn, workflow_id: str) -> bool:
    return conn.execute("SELECT 1 FROM workflows WHERE id = ?", (workflow_id,)).fetchone() is not None


def ids_with_prefix(conn: Conn, prefix: str, limit: int) -> list[str]:
    """Workflow ids that start with `prefix`, in id order."""
    matches, pattern = starts_with(conn, "id", prefix)
    rows = conn.execute(f"SELECT id FROM workflows WHERE {matches} ORDER BY id LIMIT ?", (pattern, limit))
    return [r[0] for r in rows]


def workflow(conn: Conn, workflow_id: str) -> WorkflowRow | None:
    columns = _WF_COLUMNS if stored_format(conn) >= LEASE_FORMAT else _WF_COLUMNS_2
    row = conn.execute(f"SELECT {columns} FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    return WorkflowRow(*row) if row else None


def steps(conn: Conn, workflow_id: str) -> list[StepRow]:
    rows = conn.execute(f"SELECT {_STEP_COLUMNS} FROM workflow_steps WHERE workflow = ? ORDER BY idx", (workflow_id,))
    return [StepRow(*r) for r in rows]


class ForeignOp(NamedTuple):
    workflow: str
    idx: int
    op: int  # what the step names as its op, which is not its own


# The op a store step names is its own: a `workflow_step` op whose description begins with
# `workflow ID step NAME: ` (tools/workflow/execute.py; the description is in the op's hash).
# A step row that names another op (a damaged or edited store) must never lead a rollback to
# undo someone else's work.
_FOREIGN = (
    "SELECT s.workflow, s.idx, s.op FROM workflow_steps s WHERE s.op IS NOT NULL AND NOT EXISTS ("
    "SELECT 1 FROM ops o WHERE o.op = s.op AND o.kind = 'workflow_step' "
    "AND substr(o.description, 1, length('workflow ' || s.workflow || ' step ' || s.name || ': ')) "
    "= 'workflow ' || s.workflow || ' step ' || s.name || ': ')"
)


def foreign_ops(conn: Conn, workflow_id: str | None = None) -> list[ForeignOp]:
    """The steps (of one workflow, or of all) whose op is not their own (see above)."""
    where, params = (" AND s.workflow = ?", (workflow_id,)) if workflow_id is not None else ("", ())
    return [ForeignOp(*r) for r in conn.execute(_FOREIGN + where + " ORDER BY s.workflow, s.idx", params)]


def rev(conn: Conn, workflow_id: str) -> int | None:
    row = conn.execute("SELECT rev FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    return row[0] if row else None


def renew_lease(
    conn: Conn, workflow_id: str, owner: tuple[str, int, str | None], until: str, change: dict[str, Any] | None = None,
    at: str | None = None,
) -> bool:
    """Extend `owner`'s lease on the workflow (host, pid, start time) if it still holds it:
    whether it does. One statement both asks and renews. By itself not a change of the workflow
    (neither `rev` nor `updated_at` moves); with `change` (columns, maybe none) and `at`, it is
    that change too, made in the same statement, as `set_workflow` makes it."""
    same = "IS NOT DISTINCT FROM" if dialect(conn) == POSTGRES else "IS"
    sets, values = "", []
    if change is not None:
        _check(change, WorkflowRow._fields)
        sets = "".join(f", {c} = ?" for c in change) + ", updated_at = ?, rev = rev + 1"
        values = [*change.values(), at]
    renewed = conn.execute(
        f"UPDATE workflows SET owner_lease = ?{sets} WHERE id = ? AND owner_host {same} ? AND owner_pid {same} ? "
        f"AND owner_start {same} ?",
        (until, *values, workflow_id, *owner),
    )
    return renewed.rowcount == 1


def now(conn: Conn) -> str:
    """The store's now, to compare a lease with: the server's clock on PostgreSQL (whose clock
    gives op times there), this machine's on a local store."""
    if dialect(conn) == POSTGRES:
        return conn.execute(
            """SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
        ).fetchone()[0]
    return names.now()


def listed(conn: Conn, states: Sequence[str], limit: int | None) -> Iterator[Listed]:
    """Newest first, at most `limit` (None: all), with each one's step counts; `states` (if
    any) filters on the saved state."""
    where = f"WHERE w.state IN ({','.join('?' * len(states))})" if states else ""
    rows = conn.execute(
        "SELECT w.id, w.name, w.state, w.created_by, w.created_at, w.updated_at, "
        "(SELECT COUNT(*) FROM workflow_steps s WHERE s.workflow = w.id), "
        "(SELECT COUNT(*) FROM workflow_steps s WHERE s.workflow = w.id AND s.status = 'success') "
        f"FROM workflows w {where} ORDER BY w.created_at DESC, w.id DESC" + (" LIMIT ?" if limit is not None else ""),
        (*states, *([limit] if limit is not None else [])),
    )
    return map(Listed._make, rows)


def list_ids(conn: Conn, prefix: str, limit: int) -> list[WorkflowBrief]:
    """The newest workflows whose id starts with `prefix`: for completion."""
    matches, pattern = starts_with(conn, "id", prefix)
    rows = conn.execute(
        f"SELECT id, name, state FROM workflows WHERE {matches} ORDER BY created_at DESC LIMIT ?", (pattern, limit)
    )
    return [WorkflowBrief(*r) for r in rows]


def step_names(conn: Conn, workflow_id: str) -> list[StepBrief]:
    """Each step, in order: for completion."""
    rows = conn.execute("SELECT name, kind, status FROM workflow_steps WHERE workflow = ? ORDER BY idx", (workflow_id,))
    return [StepBrief(*r) for r in rows]


# --- writes (inside Store.write) -------------------------------------------------------------


def insert(
    conn: Conn,
    workflow_id: str,
    *,
    name: str,
    description: str | None,
    source: str,
    base_dir: str,
    step_specs: Iterable[dict[str, Any]],
    actor: str,
    at: str,
    owner: tuple[str, int, str | None],
    lease: str,
) -> None:
    """A new workflow, `pending`, held by `owner` (host, pid, start time) until `lease` (while
    it does not renew it), with its steps `pending`."""
    host, pid, start = owner
    conn.execute(
        "INSERT INTO workflows(id, name, description, state, source, base_dir, created_by, created_at, updated_at, "
        "owner_pid, owner_start, owner_actor, owner_host, owner_lease, rev) "
        "VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (workflow_id, name, description, source, base_dir, actor, at, at, pid, start, actor, host, lease),
    )
    conn.executemany(
        "INSERT INTO workflow_steps(workflow, idx, name, kind, spec, status) VALUES (?, ?, ?, ?, ?, 'pending')",
        [(workflow_id, i, s["name"], s["kind"], _json(s)) for i, s in enumerate(step_specs, start=1)],
    )


def set_workflow(conn: Conn, workflow_id: str, at: str, **columns: Any) -> None:
    """Change columns of a workflow; its `updated_at` and `rev` move with every change."""
    _check(columns, WorkflowRow._fields)
    sets = "".join(f"{c} = ?, " for c in columns)
    conn.execute(
        f"UPDATE workflows SET {sets}updated_at = ?, rev = rev + 1 WHERE id = ?", (*columns.values(), at, workflow_id)
    )


def set_step(conn: Conn, workflow_id: str, idx: int, at: str, workflow: dict[str, Any] | None = None, **columns: Any) -> None:
    """Change columns of a step (dicts are stored as JSON); the workflow's `rev` moves too, in
    the statement that sets its `workflow` columns, if any."""
    set_step_alone(conn, workflow_id, idx, **columns)
    set_workflow(conn, workflow_id, at, **(workflow or {}))


def set_step_alone(conn: Conn, workflow_id: str, idx: int, **columns: Any) -> None:
    """Change columns of a step, not its workflow's row: only in a transaction that changes that
    row too (`set_workflow`), whose `rev` then moves for both."""
    _check(columns, StepRow._fields)
    values = [_json(v) if isinstance(v, dict) else v for v in columns.values()]
    sets = ", ".join(f"{c} = ?" for c in columns)
    conn.execute(f"UPDATE workflow_steps SET {sets} WHERE workflow = ? AND idx = ?", (*values, workflow_id, idx))


def _check(columns: dict[str, Any], known: tuple[str, ...]) -> None:
    # Column names go into the SQL text: only ever our own, never a caller's string.
    unknown = set(columns) - set(known)
    if unknown:
        raise ValueError(f"no such column: {', '.join(sorted(unknown))}")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
