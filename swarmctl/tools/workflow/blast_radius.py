"""The blast radius of rolling a workflow back: what would be undone, what stays, what is
unknown, and what stops it. Computed from a read snapshot; it writes nothing.

Each step lands in exactly one list, by its observed status:

| list                | steps                                                                            |
| ------------------- | -------------------------------------------------------------------------------- |
| would_roll_back     | `success` (or `rollback_failed`: a retry) with an undo, last first               |
| left_in_place       | `success` commands without a `rollback`: they stay applied                       |
| unknown_effects     | `running`, `undoing` or `interrupted`: it may or may not have taken effect       |
| not_reversed        | `failed` commands: they may have partly applied, and nothing undoes them         |
| already_rolled_back | `rolled_back` by an earlier rollback                                             |
| no_effect           | gates, store steps that moved no ref or failed (all-or-nothing), steps never run |

A store step's undo is predicted with `op.plan_undo`, which raises what the real undo would:
a ref moved since shows up as a predicted E_CAS_MISMATCH. Each is predicted as the rollback
makes it, after the undos of the steps after it: two steps that moved one ref are undone in
turn, each finding the ref as the undo before it left it. `blockers` are what `--confirm`
refuses (E_REFUSED), each `{code, message}`; `unmeasured` says what the preview cannot know.
The types of all of it are in rollback_types.py (BlastRadius), so the MCP outputSchema shows them.

The `preview_id` fingerprints the radius: a hash of its canonical JSON without `blockers` and
the `acknowledged` marks (those are the caller's decisions, not the radius). It changes when a
step's status, its undo or its predicted outcome changes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from swarmctl import policy as rules
from swarmctl.envelope import SwarmError
from swarmctl.secrets import redact_argv
from swarmctl.spec import plain
from swarmctl.store import Conn, policies
from swarmctl.tools.undo import plan_undo
from swarmctl.tools.workflow import definition, process
from swarmctl.tools.workflow.guards import definition_refusal
from swarmctl.tools.workflow.models import ACKNOWLEDGE_ALL, RADIUS_LISTS as LISTS
from swarmctl.tools.workflow.rollback_types import (
    AlreadyRolledBack,
    AnyBlocker,
    BlastRadius,
    Blocker,
    CommandRunningBlocker,
    HeldBlocker,
    MissingEnvBlocker,
    NotPredicted,
    Predicted,
    PredictedAlreadyUndone,
    PredictedCommandFailure,
    PredictedOk,
    PolicyBlocker,
    PredictedUndoFailure,
    PreviewMismatchBlocker,
    RadiusCounts,
    RadiusWorkflow,
    RefAfter,
    RollbackEntry,
    StepBlocker,
    StepNote,
    UnacknowledgedBlocker,
    UndoByCommand,
    UndoByOp,
    UnknownEffect,
    Unmeasured,
)
from swarmctl.tools.workflow.records import (
    STEP_STATUSES, WORKFLOW_STATES, Step, Workflow, held_by_other, holder, orphaned_command,
)


class Radius(NamedTuple):
    preview_id: str
    blast_radius: BlastRadius


def compute(
    conn: Conn,
    wf: Workflow,
    *,
    actor: str,
    at: str,
    acknowledged: list[str],
    include_completed: bool,
    expect_preview: str | None,
    environ: Mapping[str, str],
) -> Radius:
    """The blast radius and its `preview_id` (see the module docstring)."""
    lists: dict[str, list[Any]] = {name: [] for name in LISTS}
    programs: dict[str, str | None] = {}  # each rollback program is looked up once
    refs_now: dict[str, str | None] = {}  # what the undos predicted so far leave refs naming
    for step in reversed(wf.steps):  # last first, in every list, as the rollback undoes them
        where, entry = _place(conn, wf, step, actor, at, programs, refs_now)
        lists[where].append(entry)
        if where == "would_roll_back" and isinstance(entry.predicted, PredictedOk):
            refs_now.update((m.name, m.new) for m in entry.predicted.ref_moves)
    for entry in lists["unknown_effects"]:
        entry.acknowledged = ACKNOWLEDGE_ALL in acknowledged or entry.step in acknowledged
    radius = BlastRadius(
        workflow=RadiusWorkflow(id=wf.id, name=wf.name, state=wf.observed),
        state_after=_state_after(wf, lists["would_roll_back"]),
        counts=RadiusCounts(**{name: len(lists[name]) for name in LISTS}, blockers=0, unmeasured=0),
        **lists,
        blockers=[],
        unmeasured=_unmeasured(lists),
    )
    preview_id = fingerprint(plain(radius))
    radius.blockers = blockers(wf, lists, include_completed, expect_preview, preview_id, environ)
    radius.blockers += policy_blockers(conn, wf, actor, lists["would_roll_back"])
    radius.counts.blockers = len(radius.blockers)
    radius.counts.unmeasured = len(radius.unmeasured)
    return Radius(preview_id, radius)


def fingerprint(radius: Mapping[str, Any]) -> str:
    """`pv-` and 16 hex digits of the SHA-256 of the radius's canonical JSON (see module doc)."""
    basis = {k: v for k, v in radius.items() if k not in ("blockers", "counts")}
    basis["unknown_effects"] = [{k: v for k, v in e.items() if k != "acknowledged"} for e in radius["unknown_effects"]]
    text = json.dumps(basis, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "pv-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _note(step: Step, reason: str) -> StepNote:
    return StepNote(step=step.name, index=step.idx, kind=step.kind, status=step.observed, reason=reason)


def _unknown(step: Step, during: str | None) -> UnknownEffect:
    return UnknownEffect(
        step=step.name, index=step.idx, kind=step.kind, status=step.observed, saved_status=step.status,
        during=during, acknowledged=False,
    )


def _place(
    conn: Conn, wf: Workflow, step: Step, actor: str, at: str, programs: dict[str, str | None],
    refs_now: Mapping[str, str | None],
) -> tuple[str, Any]:
    status = step.observed
    if step.problems or status not in STEP_STATUSES or step.kind not in definition.KINDS:
        # Unreadable or unknown: its effect cannot be told, and a blocker says so.
        return "unknown_effects", _unknown(step, None)
    if status in ("running", "undoing", "interrupted"):
        return "unknown_effects", _unknown(step, step.phase)
    if status == "rolled_back":
        return "already_rolled_back", AlreadyRolledBack(
            step=step.name, index=step.idx, kind=step.kind, status=status, undo_op=step.undo_op
        )
    if status == "failed":
        if step.kind == "run":
            return "not_reversed", _note(step, "the command failed and may have partly applied; nothing undoes it")
        return "no_effect", _note(step, "a store step that failed wrote nothing (all or nothing)")
    if status in ("pending", "skipped"):
        return "no_effect", _note(step, "never run")
    # success or rollback_failed: applied
    if step.kind == "approval":
        return "no_effect", _note(step, "an approval gate: nothing to undo")
    undo: UndoByOp | UndoByCommand
    if step.kind == "run":
        if not step.spec.get("rollback"):
            return "left_in_place", _note(step, "the command has no rollback: it stays applied")
        undo = UndoByCommand(command=redact_argv(step.spec["rollback"]), timeout_s=definition.plain_number(step.spec["timeout_s"]))
        program = step.spec["rollback"][0]
        if program not in programs:
            programs[program] = process.program_problem(program, Path(wf.base_dir), _path_env())
        problem = programs[program]
        predicted: Predicted = PredictedCommandFailure("fails", problem) if problem else NotPredicted("not_predicted")
    elif step.op is None:
        return "no_effect", _note(step, "it moved no ref (the ref already named the target)")
    else:
        undo, predicted = UndoByOp(op_undo=step.op), _predict(conn, step.op, actor, at, refs_now)
    return "would_roll_back", RollbackEntry(
        step=step.name, index=step.idx, kind=step.kind, status=status, undo=undo, predicted=predicted,
        retry=status == "rollback_failed",
    )


def _path_env() -> dict[str, str]:
    import os

    return {"PATH": os.environ.get("PATH", os.defpath)}


def _predict(conn: Conn, op: int, actor: str, at: str, refs_now: Mapping[str, str | None]) -> Predicted:
    """The undo of `op`, after the undos of the steps after it (`refs_now`: what they leave
    refs naming): each is predicted as the rollback will make it, last first."""
    try:
        planned = plan_undo(conn, op, actor, at, refs_now)
    except SwarmError as exc:
        return PredictedUndoFailure("fails", exc.code, exc.message, exc.details)
    if planned.already_applied:
        return PredictedAlreadyUndone("already_undone", planned.op)
    return PredictedOk("ok", [RefAfter(name=m.name, new=m.new) for m in planned.ref_moves])


# The states a rollback is refused in whatever is passed (_state_blocker): the workflow stays so.
_STAYS = {
    "pending": "it has not started, so there is nothing to roll back",
    "cancelled": "a cancelled workflow stays as it was left",
    "rolled_back": "it was rolled back already",
}


def _state_after(wf: Workflow, would: list[RollbackEntry]) -> str:
    """The workflow's state once `--confirm` has done what it may: the state it is in, where no
    rollback is allowed; else as the predicted undos come out."""
    if wf.observed in _STAYS:
        return wf.observed
    return "rollback_failed" if any(e.predicted.outcome == "fails" for e in would) else "rolled_back"


def _unmeasured(lists: Mapping[str, list[Any]]) -> list[Unmeasured]:
    commands = [e.step for e in lists["would_roll_back"] if isinstance(e.undo, UndoByCommand)]
    if not commands:
        return []
    return [
        Unmeasured(
            code="command_effects",
            message=f"{len(commands)} rollback command(s) will run; what they change outside the store is not predicted",
            steps=commands,
        )
    ]


def policy_blockers(conn: Conn, wf: Workflow, actor: str, would: list[Any]) -> list[AnyBlocker]:
    """What the store's policy forbids `actor` in this rollback: rolling back another actor's
    workflow ([workflow] others), commands that are not its definition file's ([run]
    definitions), and each step whose undo it forbids (predicted E_FORBIDDEN)."""
    policy = policies.current(conn)
    if policy is None or not actor:
        return []
    found: list[AnyBlocker] = []
    for refusal in (rules.may_steer(policy, actor, wf.id, wf.created_by, "roll back"), definition_refusal(policy, actor, wf)):
        if refusal is not None:
            found.append(PolicyBlocker("forbidden", refusal.error().message, refusal.rule, None))
    for e in would:
        if isinstance(e.predicted, PredictedUndoFailure) and e.predicted.code == "E_FORBIDDEN":
            found.append(PolicyBlocker("forbidden", f"step {e.step}: {e.predicted.message}", e.predicted.details["rule"], e.step))
    return found


def blockers(
    wf: Workflow,
    lists: Mapping[str, list[Any]],
    include_completed: bool,
    expect_preview: str | None,
    preview_id: str,
    environ: Mapping[str, str],
) -> list[AnyBlocker]:
    """What `--confirm` refuses, each `{code, message}` (plus what it names)."""
    found: list[AnyBlocker] = []
    for s in wf.steps:
        if s.problems or (s.kind not in definition.KINDS):
            why = "; ".join(s.problems) or f"unknown step kind {s.kind!r}"
            found.append(StepBlocker("unreadable_record", f"step {s.name}: its record cannot be read: {why}", s.name))
        elif not s.known_status:
            found.append(StepBlocker(
                "unknown_step_status", f"step {s.name} has status {s.status!r}, which this swarmctl does not recognise", s.name
            ))
    state_blocker = _state_blocker(wf, include_completed)
    if state_blocker is not None:
        found.append(state_blocker)
    unacknowledged = [e.step for e in lists["unknown_effects"] if not e.acknowledged]
    if unacknowledged:
        found.append(UnacknowledgedBlocker(
            "unknown_effects_unacknowledged",
            "the effect of " + ", ".join(unacknowledged) + " is unknown; check it in the target system, "
            f"then pass --acknowledge-unknown-effects STEP (or {ACKNOWLEDGE_ALL})",
            unacknowledged,
        ))
    by_name = {s.name: s for s in wf.steps}  # not wf.step() per entry: that is a walk of the steps each
    for e in lists["would_roll_back"]:
        if isinstance(e.undo, UndoByCommand):
            step = by_name[e.step]
            missing = definition.missing_references(step.spec, environ)
            if missing:
                found.append(MissingEnvBlocker(
                    "missing_env",
                    f"step {step.name}: its rollback needs {', '.join(missing)}, which is not set in this environment",
                    step.name,
                    missing,
                ))
    if expect_preview is not None and expect_preview != preview_id:
        found.append(PreviewMismatchBlocker(
            "preview_mismatch",
            f"the blast radius changed since preview {expect_preview}: it is now {preview_id}; preview again",
            expect_preview,
            preview_id,
        ))
    return found


def _state_blocker(wf: Workflow, include_completed: bool) -> AnyBlocker | None:
    """What the workflow's state (or a command of it still running) says against confirming."""
    state = wf.observed
    orphan = orphaned_command(wf)
    if state not in WORKFLOW_STATES:
        return Blocker("workflow_state", f"the workflow has state {state!r}, which this swarmctl does not recognise")
    if orphan is not None:
        return CommandRunningBlocker(
            "command_running",
            f"the command of step {orphan.name} is still running (pid {orphan.command_pid}), though the swarmctl that "
            f"started it is gone; wait for it to end, or stop it with `kill -TERM -{orphan.command_pid}`",
            orphan.name,
            orphan.command_pid,
        )
    if held_by_other(wf):
        return HeldBlocker(
            "workflow_state",
            f"the workflow is {state}, held by a live process ({holder(wf)})",
            {"pid": wf.owner_pid, "actor": wf.owner_actor},
        )
    if state in _STAYS:
        return Blocker("workflow_state", f"the workflow is {state}: {_STAYS[state]}")
    if state == "completed" and not include_completed:
        return Blocker(
            "completed_not_included", "the workflow completed; rolling back a completed workflow needs --include-completed"
        )
    return None
