"""Workflow records: reading them, seeing what they mean now, and saving changes. (The rows
themselves are read and written by swarmctl/store/workflows.py.)

What a reader sees is the *observed* state: a step saved as `running` or `undoing` is shown
`interrupted` (its effect is unknown) once both the swarmctl that saved it and the process
group of its command are gone; while the command lives on without its swarmctl (killed with
SIGKILL), the step stays `running` and the workflow is held: nothing may run it or its rollback
again beside it. A workflow saved as `running` or `rolling_back` whose owner is gone (and no
command of it running) is shown `failed` or `rollback_failed`. Reads never write; the next
command that changes the workflow saves what was observed (`settle`).

Every change here runs inside a `Store.write()` transaction passed in as `w`, and bumps the
workflow's `rev`, which a rollback compares to claim the workflow only if nothing changed
since it checked its safety rules.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, get_args

from swarmctl import hosts, pids
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.store import Conn, Writer, faults
from swarmctl.store import workflows as rows
from swarmctl.tools.workflow.models import StepStatus, WorkflowState

WORKFLOW_STATES: tuple[str, ...] = get_args(WorkflowState)
STEP_STATUSES: tuple[str, ...] = get_args(StepStatus)
IN_FLIGHT = ("running", "undoing")
T = TypeVar("T")
# A workflow saved in one of these states is held by its owner process while that lives; once
# it is gone, it reads as the second state.
HELD = {"running": "failed", "rolling_back": "rollback_failed"}
# A step whose process is gone: the columns that named it and its command's process group.
NO_PROCESS: dict[str, None] = {"pid": None, "pid_start": None, "command_pid": None, "command_start": None}


def new_id() -> str:
    """A short, readable workflow id: `wf-` and 8 lower-case base32 characters (40 random bits)."""
    return "wf-" + base64.b32encode(os.urandom(5)).decode("ascii").lower()


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
    command_pid: int | None  # the process group of the command it started (the leader's pid)
    command_start: str | None
    problems: list[str] = field(default_factory=list)  # what could not be read
    observed: str = ""  # the status as it stands now (see module docstring)
    command_alive: bool = False  # its command's process group still runs
    process_alive: bool = False  # the swarmctl that saved it in flight still runs

    @property
    def known_status(self) -> bool:
        return self.status in STEP_STATUSES

    @property
    def phase(self) -> str:
        """What the step was doing when its effect became unknown: `run` or `rollback`. A step in
        flight is doing what its status says; an interrupted one, what was saved with it."""
        if self.status in IN_FLIGHT or self.interrupted_during is None:
            return "rollback" if self.status == "undoing" else "run"
        return self.interrupted_during


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
    owner_host: str | None
    owner_lease: str | None
    rollback_by: str | None
    rollback_at: str | None
    rev: int
    steps: list[Step]
    owner_alive: bool = False
    observed: str = ""

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def gate(self) -> Step | None:
        """The approval gate the workflow waits at, approved or not (None unless it waits)."""
        if self.observed != "awaiting_approval" or not self.cursor:
            return None
        return self.steps[self.cursor - 1]

    @property
    def stopped_at(self) -> Step | None:
        """The step a failed workflow stopped at: the first that failed or was interrupted."""
        return next((s for s in self.steps if s.observed in ("failed", "interrupted")), None)

    @property
    def definition(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["steps"] = [s.spec for s in self.steps]
        return d


def resolve_id(conn: Conn, given: str) -> str:
    """The workflow id `given` names: the id itself or a unique prefix of it (wf- and 4+ characters)."""
    text = given.strip()
    if rows.exists(conn, text):
        return text
    if text.startswith("wf-") and len(text) < 7:
        raise SwarmError(
            "E_INVALID_ARG",
            f"workflow id prefix {given!r} is too short: wf- and at least 4 characters",
            details={"workflow": given, "min_length": 7},
            hint="`swarmctl workflow list` lists the workflows with their ids.",
        )
    found = rows.ids_with_prefix(conn, text, 5) if text.startswith("wf-") else []
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


def resolve(ctx: Context, conn: Conn, given: str) -> str:
    """The workflow id `given` names (see `resolve_id`), recorded in the envelope's `meta.resolved`."""
    wf_id = resolve_id(conn, given)
    ctx.resolve(given, wf_id)
    return wf_id


def load(conn: Conn, workflow_id: str) -> Workflow:
    row = rows.workflow(conn, workflow_id)
    if row is None:
        raise SwarmError("E_NOT_FOUND", f"no workflow {workflow_id}", details={"workflow": workflow_id})
    wf = Workflow(*row, steps=[_step(r) for r in rows.steps(conn, workflow_id)])
    by_idx = {s.idx: s for s in wf.steps}
    for foreign in rows.foreign_ops(conn, workflow_id):  # a damaged or edited store: never undo another's op
        by_idx[foreign.idx].problems.append(f"its op {foreign.op} is not its own (not this step's workflow_step op)")
    observe(wf, conn)
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


def _step(row: rows.StepRow) -> Step:
    problems: list[str] = []
    decoded = row._replace(
        spec=_json(row.spec, "spec", problems),
        result=_json(row.result, "result", problems),
        undo_result=_json(row.undo_result, "undo_result", problems),
    )
    step = Step(*decoded, problems=problems)
    if step.spec is not None and (step.spec.get("kind") != step.kind or step.spec.get("name") != step.name):
        step.problems.append("spec does not match the step's name and kind")
    return step


def observe(wf: Workflow, conn: Conn) -> None:
    """Fill in what the saved states mean now (see the module docstring).

    The pids of a workflow are of its owner's host. There they are asked; on another host
    (swarmctl/hosts.py) a pid means nothing, and the owner, its step in flight and that step's
    command count as alive until the owner's lease runs out."""
    faults.pause_before_pids()
    if wf.owner_host is None or wf.owner_host == hosts.host_id():
        alive, group_alive = pids.alive, pids.group_alive
        wf.owner_alive = alive(wf.owner_pid, wf.owner_start)
    else:
        leased = wf.owner_pid is not None and wf.owner_lease is not None and wf.owner_lease > rows.now(conn)

        def alive(pid: int | None, start: str | None) -> bool:
            return leased and pid is not None

        group_alive = alive
        wf.owner_alive = leased
    for s in wf.steps:
        s.observed = s.status
        s.command_alive = s.status in IN_FLIGHT and group_alive(s.command_pid, s.command_start)
        s.process_alive = s.status in IN_FLIGHT and alive(s.pid, s.pid_start)
        if s.status in IN_FLIGHT and not s.command_alive and not s.process_alive:
            s.observed = "interrupted"
    held = wf.owner_alive or running_command(wf) is not None
    wf.observed = HELD[wf.state] if wf.state in HELD and not held else wf.state


def gone_mid_step(wf: Workflow) -> bool:
    """Whether `observe` found the process the saved rows name as acting gone (a step in
    flight read `interrupted`, or a held workflow `failed`): true of the rows as read, but the
    process may have ended after saving more than those rows show: a snapshot is read before
    its pids are asked. Found gone after one snapshot, with the workflow unchanged (`rev`) in a
    later one, it did end mid-step (see `settled`)."""
    return any(s.status in IN_FLIGHT and s.observed == "interrupted" for s in wf.steps) or (
        wf.state in HELD and wf.observed != wf.state)


def settled(read: Callable[[], T], workflow: Callable[[T], Workflow]) -> T:
    """`read()`, which loads a workflow (`workflow` of what it returns) in a snapshot of its
    own, made again while it finds a process gone mid-step and the workflow changed since the
    read before: a process that saved its last step and ended between the snapshot and the
    question whether it lives would read as interrupted, its done work as unknown effects. Five
    reads at most (each one after the first needs the workflow to have changed)."""
    before = None
    for _ in range(5):
        got = read()
        wf = workflow(got)
        if not gone_mid_step(wf) or wf.rev == before:
            break
        before = wf.rev
    return got


def running_command(wf: Workflow) -> Step | None:
    """A step whose command still runs (its process group lives), whether or not the swarmctl
    that started it does."""
    return next((s for s in wf.steps if s.command_alive), None)


def held_by_other(wf: Workflow) -> bool:
    """Whether another live process is acting on the workflow right now: another swarmctl, or
    a command that outlived the swarmctl that started it."""
    mine = wf.owner_pid == os.getpid() and wf.owner_host in (None, hosts.host_id())
    other_owner = wf.state in ("pending", *HELD) and wf.owner_alive and not mine
    return other_owner or orphaned_command(wf) is not None


def orphaned_command(wf: Workflow) -> Step | None:
    """A step whose command still runs though the swarmctl that started it is gone: nothing will
    record its outcome, and running it (or its rollback) again would run a second copy beside it."""
    step = running_command(wf)
    return step if step is not None and not step.process_alive else None


def holder(wf: Workflow) -> str:
    """Who holds the workflow, in words: its pid, and its host and lease when elsewhere."""
    if wf.owner_host is None or wf.owner_host == hosts.host_id():
        return f"pid {wf.owner_pid}, {wf.owner_actor}"
    return f"pid {wf.owner_pid} on host {wf.owner_host}, {wf.owner_actor}, leased until {wf.owner_lease}"


def owner_view(wf: Workflow) -> dict[str, Any] | None:
    if wf.owner_pid is None:
        return None
    return {
        "pid": wf.owner_pid, "host": wf.owner_host, "actor": wf.owner_actor, "alive": wf.owner_alive,
        "lease_until": wf.owner_lease,
    }


# --- saving --------------------------------------------------------------------------------


def create(w: Writer, definition: dict[str, Any], source: str, base_dir: str, owner: hosts.Owner) -> str:
    """A new workflow, `pending` and held by `owner`: its id."""
    wf_id = new_id()
    while rows.exists(w.conn, wf_id):
        wf_id = new_id()
    insert(w, wf_id, definition, source, base_dir, owner)
    return wf_id


def insert(w: Writer, wf_id: str, definition: dict[str, Any], source: str, base_dir: str, owner: hosts.Owner) -> None:
    rows.insert(
        w.conn, wf_id, name=definition["name"], description=definition.get("description"), source=source,
        base_dir=base_dir, step_specs=definition["steps"], actor=w.actor, at=w.at, owner=owner,
        lease=hosts.lease_until(w.at),
    )


def set_workflow(w: Writer, wf_id: str, **columns: Any) -> None:
    rows.set_workflow(w.conn, wf_id, w.at, **columns)


def set_step(w: Writer, wf_id: str, idx: int, workflow: dict[str, Any] | None = None, **columns: Any) -> None:
    """Change columns of a step, and of its workflow (`workflow`) in the same breath."""
    rows.set_step(w.conn, wf_id, idx, w.at, workflow, **columns)


def set_step_alone(w: Writer, wf_id: str, idx: int, **columns: Any) -> None:
    """Change columns of a step, in a transaction that goes on to change its workflow's row
    (which moves `rev` for both): see store/workflows.py."""
    rows.set_step_alone(w.conn, wf_id, idx, **columns)


def claim(w: Writer, wf_id: str, state: str, me: hosts.Owner, **columns: Any) -> None:
    set_workflow(w, wf_id, state=state, owner_pid=me.pid, owner_start=me.start, owner_actor=w.actor,
                 owner_host=me.host, owner_lease=hosts.lease_until(w.at), **columns)


def release(w: Writer, wf_id: str, state: str, **columns: Any) -> None:
    set_workflow(w, wf_id, state=state, owner_pid=None, owner_start=None, owner_host=None, owner_lease=None, **columns)


def settle(w: Writer, wf: Workflow) -> None:
    """Save what was observed: steps whose process is gone become `interrupted`, and a workflow
    whose owner is gone leaves `running`/`rolling_back`. Only after `load` in the same transaction."""
    for s in wf.steps:
        if s.status in IN_FLIGHT and s.observed == "interrupted":
            during = s.phase
            set_step(w, wf.id, s.idx, status="interrupted", interrupted_during=during, finished_at=w.at, **NO_PROCESS)
            s.status, s.interrupted_during, s.pid = "interrupted", during, None
    if wf.observed != wf.state:
        release(w, wf.id, wf.observed)
        wf.state = wf.observed
        wf.owner_pid = None


def summaries(conn: Conn, state: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest workflows (at most `limit`), each with its state as observed (see `observe`);
    `state` filters on that state, as printed: a run whose process is gone is `failed`, though
    saved `running` (so the saved states looked at are `state` and those held ones)."""
    found: list[dict[str, Any]] = []
    saved = [state, *(held for held, gone in HELD.items() if gone == state)] if state else []
    for r in rows.listed(conn, saved, None if state else limit):
        if len(found) == limit:
            break
        state_now = load(conn, r.id).observed if r.state in HELD else r.state
        if state and state_now != state:
            continue
        found.append({
            "id": r.id, "name": r.name, "state": state_now, "steps": r.steps, "done": r.done,
            "created_by": r.created_by, "created_at": r.created_at, "updated_at": r.updated_at,
        })
    return found
