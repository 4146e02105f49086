"""What workflow commands return: the status view (every step, redacted) and what to call next.
(A rollback's preview and result are rollback.py's.)"""

from __future__ import annotations

import shlex
from typing import Any

from swarmctl import secrets
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.tools.workflow import calls, definition, records
from swarmctl.tools.workflow.models import StepView, WorkflowInfo, WorkflowStatus
from swarmctl.tools.workflow.records import Step, Workflow


def after_run(ctx: Context, wf_id: str, failed: Step | None) -> WorkflowStatus:
    with ctx.store().read() as conn:
        wf = records.load(conn, wf_id)
    view = status_view(wf)
    if failed is not None:
        step = next(s for s in view.steps if s.name == failed.name)
        rollback = calls.ROLLBACK.call(workflow=wf_id)
        raise SwarmError(
            "E_STEP_FAILED",
            f"workflow {wf_id} failed at step {failed.name}: {failure_summary(failed)}",
            details={"workflow": wf_id, "state": wf.observed, "step": failed.name, "index": failed.idx,
                     "result": secrets.redact(step.result)},
            hint=f"`swarmctl workflow status {wf_id}` shows every step. Preview a rollback with "
            f"`{shlex.join(rollback['argv'])}`, or fix the cause and "
            f"`{shlex.join(['swarmctl', 'workflow', 'resume', wf_id, '--retry', failed.name])}`.",
            next=rollback,
        )
    return view


def failure_summary(step: Step) -> str:
    result = step.result or {}
    if "error" in result and isinstance(result["error"], dict):
        return f"{result['error'].get('code')}: {result['error'].get('message')}"
    return result.get("summary") or "failed"


def status_view(wf: Workflow) -> WorkflowStatus:
    """A workflow as `status` shows it: observed states, each step's definition and outcomes, redacted."""
    waiting = wf.gate.name if wf.gate is not None else None
    info = WorkflowInfo(
        id=wf.id, name=wf.name, description=wf.description, state=wf.observed, source=wf.source,
        base_dir=wf.base_dir, created_by=wf.created_by, created_at=wf.created_at, updated_at=wf.updated_at,
        waiting_at=waiting, owner=records.owner_view(wf), rollback_by=wf.rollback_by, rollback_at=wf.rollback_at,
    )
    steps = []
    counts: dict[str, int] = {}
    for s in wf.steps:
        counts[s.observed] = counts.get(s.observed, 0) + 1
        during = s.phase if s.observed == "interrupted" else s.interrupted_during
        public = definition.public_step(s.spec) if s.spec is not None else None
        if public is not None:
            public.pop("name")
        steps.append(StepView(
            index=s.idx, name=s.name, kind=s.kind, status=s.observed,
            command_pid=s.command_pid if s.command_alive else None, attempts=s.attempts,
            started_at=s.started_at, finished_at=s.finished_at, op=s.op, approved_by=s.approved_by,
            approved_at=s.approved_at, undo_op=s.undo_op, interrupted_during=during, definition=public,
            result=public_outcome(s.result), undo_result=public_outcome(s.undo_result),
        ))
    ordered = {k: counts[k] for k in records.STEP_STATUSES if k in counts}
    ordered.update({k: v for k, v in counts.items() if k not in ordered})
    return WorkflowStatus(workflow=info, steps=steps, counts=ordered, next=next_calls(wf))


def public_outcome(outcome: dict[str, Any] | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    shown = secrets.redact(outcome)
    for key in ("stdout_tail", "stderr_tail"):  # a command's output (`error`, `summary`: swarmctl's words)
        if isinstance(shown.get(key), str):
            shown[key] = secrets.redact_text(shown[key])
    return shown


def next_calls(wf: Workflow) -> list[dict[str, Any]]:
    state, gate, stuck = wf.observed, wf.gate, wf.stopped_at
    if gate is not None:
        return [calls.RESUME.call(workflow=wf.id)] if gate.approved_by else [calls.APPROVE.call(workflow=wf.id)]
    if state == "failed":
        retry = [calls.RESUME.call(workflow=wf.id, retry=stuck.name)] if stuck is not None else []
        return [calls.ROLLBACK.call(workflow=wf.id), *retry]
    if state == "rollback_failed":
        return [calls.ROLLBACK.call(workflow=wf.id)]
    if state == "completed":
        return [calls.ROLLBACK.call(workflow=wf.id, include_completed=True)]
    return []
