"""Workflow records in the store: reading them, seeing what they mean now, and saving changes.

What a reader sees is the *observed* state: a step saved as `running` or `undoing` whose
process is gone is shown `interrupted` (its effect is unknown), and a workflow saved as
`running` or `rolling_back` whose owner is gone is shown `failed` or `rollback_failed`. Reads
never write; the next command that changes the workflow saves what was observed (`settle`).

Every change here runs inside a `Store.write()` transaction passed in as `w`, and bumps the
workflow's `rev`, which a rollback compares to claim the workflow only if nothing changed
since it checked its safety rules.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from swarmctl import names
from swarmctl.envelope import SwarmError
from swarmctl.store import Writer
from swarmctl.tools.workflow import process

WORKFLOW_STATES = (
    "pending",
    "running",
    "awaiting_approval",
    "completed",
    "failed",
    "rolling_back",
    "rolled_back",
    "rollback_failed",
    "cancelled",
)
STEP_STATUSES = (
    "pending",
    "running",
    "success",
    "failed",
    "skipped",
    "interrupted",
    "undoing",
    "rolled_back",
    "rollback_failed",
)
IN_FLIGHT = ("running", "undoing")

def new_id() -> str:
    """A short, readable workflow id: `wf-` and 8 lower-case base32 characters (40 random bits)."""
    return "wf-" + base64.b32encode(os.urandom(5)).decode("ascii").lower()


class Unreadable(Exception):
    """A stored record that does not parse: rollback refuses to act on what it cannot read."""


@dataclass
class Step:
    idx: int
    name: str
    kind: str
    spec: dict[str, Any] | None  # None: unreadable
    status: str  # as saved
    pid: int | None
    pid_start: str | None
    attempts: int
    started_at: str | None
    finished_at: str | None
    op: int | None
    result: dict[str, Any] | None
    approved_by: str | None
    approved_at: str | None
    undo_op: int | None
    undo_result: dict[str, Any] | None
    interrupted_during: str | None
    problems: list[str] = field(default_factory=list)  # what could not be read
    observed: str = ""  # the status as it stands now (see module docstring)

    @property
    def known_status(self) -> bool:
        return self.status in STEP_STATUSES

    @property
    def has_undo(self) -> bool:
        if self.spec is None:
            return False
        return self.kind in ("ref_set", "ref_delete") or bool(self.spec.get("rollback"))


@dataclass
class Workflow:
    id: str
    name: str
    description: str | None
    state: str  # as saved
    source: str
    base_dir: str
    created_by: str
    created_at: str
    updated_at: str
    cursor: int | None
    owner_pid: int | None
    owner_start: str | None
    owner_actor: str | None
    rollback_by: str | None
    rollback_at: str | None
    rev: int
    steps: list[Step]
    owner_alive: bool = False
    observed: str = ""

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def definition(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["steps"] = [s.spec for s in self.steps]
        return d


_WF_COLUMNS = (
    "id, name, description, state, source, base_dir, created_by, created_at, updated_at, cursor, "
    "owner_pid, owner_start, owner_actor, rollback_by, rollback_at, rev"
)
_STEP_COLUMNS = (
    "idx, name, kind, spec, status, pid, pid_start, attempts, started_at, finished_at, op, result, "
    "approved_by, approved_at, undo_op, undo_result, interrupted_during"
)


def resolve_id(conn: sqlite3.Connection, given: str) -> str:
    """The workflow id `given` names: the id itself or a unique prefix of it (wf- and 4+ characters)."""
    text = given.strip()
    if conn.execute("SELECT 1 FROM workflows WHERE id = ?", (text,)).fetchone():
        return text
    found = []
    if text.startswith("wf-") and len(text) >= 7:
        found = [
            r[0]
            for r in conn.execute("SELECT id FROM workflows WHERE id >= ? AND id < ? ORDER BY id LIMIT 5", (text, text + "\x7f"))
        ]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise SwarmError(
            "E_INVALID_ARG",
            f"workflow id prefix {given!r} is ambiguous",
            details={"workflow": given, "candidates": found},
            hint="Give more characters of the id.",
        )
    raise SwarmError(
        "E_NOT_FOUND",
        f"no workflow {given}",
        details={"workflow": given},
        hint="`swarmctl workflow list` lists the workflows.",
    )


def load(conn: sqlite3.Connection, workflow_id: str) -> Workflow:
    row = conn.execute(f"SELECT {_WF_COLUMNS} FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    if row is None:
        raise SwarmError("E_NOT_FOUND", f"no workflow {workflow_id}", details={"workflow": workflow_id})
    steps = [_step(r) for r in conn.execute(f"SELECT {_STEP_COLUMNS} FROM workflow_steps WHERE workflow = ? ORDER BY idx", (workflow_id,))]
    wf = Workflow(*row, steps=steps)
    observe(wf)
    return wf


def _json(text: str | None, what: str, problems: list[str]) -> Any:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        problems.append(f"{what} is not valid JSON ({exc})")
        return None
    if not isinstance(value, dict):
        problems.append(f"{what} is not a JSON object")
        return None
    return value


def _step(row: tuple) -> Step:
    problems: list[str] = []
    values = list(row)
    values[3] = _json(row[3], "spec", problems)
    values[11] = _json(row[11], "result", problems)
    values[15] = _json(row[15], "undo_result", problems)
    step = Step(*values, problems=problems)
    if step.spec is not None and (step.spec.get("kind") != step.kind or step.spec.get("name") != step.name):
        step.problems.append("spec does not match the step's name and kind")
    return step


def observe(wf: Workflow) -> None:
    """Fill in what the saved states mean now (see the module docstring)."""
    wf.owner_alive = process.alive(wf.owner_pid, wf.owner_start)
    for s in wf.steps:
        s.observed = s.status
        if s.status in IN_FLIGHT and not process.alive(s.pid, s.pid_start):
            s.observed = "interrupted"
    wf.observed = wf.state
    if wf.state == "running" and not wf.owner_alive:
        wf.observed = "failed"
    elif wf.state == "rolling_back" and not wf.owner_alive:
        wf.observed = "rollback_failed"


def held_by_other(wf: Workflow) -> bool:
    """Whether another live process is acting on the workflow right now."""
    return wf.state in ("pending", "running", "rolling_back") and wf.owner_alive and wf.owner_pid != process.me().pid


def owner_view(wf: Workflow) -> dict[str, Any] | None:
    if wf.owner_pid is None:
        return None
    return {"pid": wf.owner_pid, "actor": wf.owner_actor, "alive": wf.owner_alive}


# --- saving --------------------------------------------------------------------------------


def insert(w: Writer, wf_id: str, definition: dict[str, Any], source: str, base_dir: str, owner: process.ProcessId) -> None:
    w.conn.execute(
        "INSERT INTO workflows(id, name, description, state, source, base_dir, created_by, created_at, updated_at, "
        "owner_pid, owner_start, owner_actor, rev) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (wf_id, definition["name"], definition.get("description"), source, base_dir, w.actor, w.at, w.at,
         owner.pid, owner.start, w.actor),
    )
    w.conn.executemany(
        "INSERT INTO workflow_steps(workflow, idx, name, kind, spec, status) VALUES (?, ?, ?, ?, ?, 'pending')",
        [(wf_id, i, s["name"], s["kind"], json.dumps(s, ensure_ascii=False)) for i, s in enumerate(definition["steps"], start=1)],
    )


def set_workflow(w: Writer, wf_id: str, **columns: Any) -> None:
    """Change columns of a workflow; its `updated_at` and `rev` move with every change."""
    sets = ", ".join(f"{c} = ?" for c in columns)
    w.conn.execute(
        f"UPDATE workflows SET {sets}{', ' if sets else ''}updated_at = ?, rev = rev + 1 WHERE id = ?",
        (*columns.values(), w.at, wf_id),
    )


def set_step(w: Writer, wf_id: str, idx: int, **columns: Any) -> None:
    """Change columns of a step (dicts are stored as JSON); the workflow's `rev` moves too."""
    values = [json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else v for v in columns.values()]
    sets = ", ".join(f"{c} = ?" for c in columns)
    w.conn.execute(f"UPDATE workflow_steps SET {sets} WHERE workflow = ? AND idx = ?", (*values, wf_id, idx))
    set_workflow(w, wf_id)


def claim(w: Writer, wf_id: str, state: str, me: process.ProcessId, **columns: Any) -> None:
    set_workflow(w, wf_id, state=state, owner_pid=me.pid, owner_start=me.start, owner_actor=w.actor, **columns)


def release(w: Writer, wf_id: str, state: str, **columns: Any) -> None:
    set_workflow(w, wf_id, state=state, owner_pid=None, owner_start=None, **columns)


def settle(w: Writer, wf: Workflow) -> None:
    """Save what was observed: steps whose process is gone become `interrupted`, and a workflow
    whose owner is gone leaves `running`/`rolling_back`. Only after `load` in the same transaction."""
    for s in wf.steps:
        if s.status in IN_FLIGHT and s.observed == "interrupted":
            during = "run" if s.status == "running" else "rollback"
            set_step(w, wf.id, s.idx, status="interrupted", interrupted_during=during, pid=None, pid_start=None,
                     finished_at=w.at)
            s.status, s.interrupted_during, s.pid = "interrupted", during, None
    if wf.observed != wf.state:
        release(w, wf.id, wf.observed)
        wf.state = wf.observed
        wf.owner_pid = None


def list_rows(conn: sqlite3.Connection, state: str | None, limit: int) -> list[dict[str, Any]]:
    where, params = ("WHERE state = ?", [state]) if state else ("", [])
    rows = conn.execute(
        f"SELECT id, name, state, created_by, created_at, updated_at, owner_pid, owner_start FROM workflows {where} "
        "ORDER BY created_at DESC, id DESC LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    out = []
    for r in rows:
        counts = dict(conn.execute("SELECT status, COUNT(*) FROM workflow_steps WHERE workflow = ? GROUP BY status", (r[0],)).fetchall())
        state_now = r[2]
        if state_now in ("running", "rolling_back") and not process.alive(r[6], r[7]):
            state_now = "failed" if state_now == "running" else "rollback_failed"
        out.append({
            "id": r[0], "name": r[1], "state": state_now, "steps": sum(counts.values()),
            "done": counts.get("success", 0), "created_by": r[3], "created_at": r[4], "updated_at": r[5],
        })
    return out


def now() -> str:
    return names.now()
