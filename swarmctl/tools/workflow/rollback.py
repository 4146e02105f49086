"""`workflow rollback`: the preview, which changes nothing, and the confirmation, which acts
on exactly what was previewed.

Both start from the same assessment: the workflow read in one snapshot and its blast radius
(blast_radius.py). A confirmation is refused (E_REFUSED) while the radius has blockers; it then
claims the workflow (only if nothing changed since the assessment: E_STATE otherwise), undoes
the steps (execute.py), and releases the workflow in its new state.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from swarmctl import hosts, names, stopping
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import plain
from swarmctl.store import Writer
from swarmctl.store import workflows as rows
from swarmctl.tools.workflow import blast_radius, calls, execute, guards, records
from swarmctl.tools.workflow.blast_radius import Radius
from swarmctl.tools.workflow.models import WorkflowRollbackReq
from swarmctl.tools.workflow.rollback_types import BlastRadius, UndoByCommand, WorkflowRollbackResult
from swarmctl.tools.workflow.records import Workflow


def preview(ctx: Context, req: WorkflowRollbackReq) -> WorkflowRollbackResult:
    """What a rollback would do, and (when nothing blocks it) the call that confirms it."""
    wf, radius = _assess(ctx, req, ctx.actor or "")
    confirm = None if radius.blast_radius.blockers else confirm_call(wf.id, req, radius.preview_id)
    including = _including_completed(wf.id, req, radius)
    hint = _preview_hint(radius, confirm)
    if including is not None:
        hint += f" The workflow completed: preview its rollback with `{shlex.join(including['argv'])}`."
    return WorkflowRollbackResult(
        action="preview", preview_id=radius.preview_id, blast_radius=radius.blast_radius,
        hint=hint, next=confirm or including, state=None, results=None, acknowledged=None,
    )


def _including_completed(wf_id: str, req: WorkflowRollbackReq, radius: Radius) -> dict[str, Any] | None:
    """Where a blocker is that the workflow completed, the preview that includes it
    (`--include-completed`), which the caller reviews (and resolves any other refusal of)
    before confirming; else None."""
    if not any(b.code == "completed_not_included" for b in radius.blast_radius.blockers):
        return None
    return calls.ROLLBACK.call(workflow=wf_id, **{**_flags(req), "include_completed": True})


def confirm(ctx: Context, req: WorkflowRollbackReq) -> WorkflowRollbackResult:
    """Undo the steps of `would_roll_back`, last first, unless something blocks it."""
    actor = ctx.require_actor()
    wf, radius = _assess(ctx, req, actor)
    # A step's command that outlives its swarmctl is a blocker of the radius (`command_running`):
    # refused as the preview said, E_REFUSED with the refusals (SPEC 5), not E_STATE.
    _refuse_forbidden(wf, radius, actor)
    _refuse_blocked(wf, radius, req)
    if ctx.refuse_commands is not None and any(isinstance(e.undo, UndoByCommand) for e in radius.blast_radius.would_roll_back):
        raise ctx.refuse_commands()  # its rollback commands would run on this host
    store = ctx.store()
    with store.write(actor) as w:
        _claim(w, wf, req)
    executor = execute.Executor(ctx, store, wf, actor, ctx.progress)
    with guards.interrupted_workflow(wf.id, "rollback"):
        results = executor.roll_back(radius.blast_radius.would_roll_back)
        state = "rolled_back" if all(r.status == "rolled_back" for r in results) else "rollback_failed"
        with stopping.interrupts_held():  # every undo done: its last outcome and the state saved, then a signal
            executor.release(state)
    acknowledged = [e.step for e in radius.blast_radius.unknown_effects if e.acknowledged]
    if state == "rollback_failed":
        failed = [r.step for r in results if r.status != "rolled_back"]
        first = executor.undo_first.get(failed[0]) if len(failed) == 1 else None
        hint = ("The other undos were done and saved. Fix the cause (see each result's error), then preview again "
                "and confirm to retry what failed.")
        if first is not None:  # a ref of the step moved since: that op is undone first, as `op undo` says
            hint = (f"The other undos were done and saved. Step {failed[0]}'s refs moved since: "
                    f"`{shlex.join(first['argv'])}` first, then preview again and confirm to retry it.")
        raise SwarmError(
            "E_STEP_FAILED",
            f"rollback of workflow {wf.id} failed: {len(failed)} of {len(results)} undo(s) failed ({', '.join(failed)}); "
            "the workflow is rollback_failed",
            details={"workflow": wf.id, "state": state, "preview_id": radius.preview_id, "failed": failed,
                     "results": plain(results), "acknowledged": acknowledged},
            hint=hint,
            next=first or preview_call(wf.id, req),
        )
    hint = "Every undo succeeded."
    if acknowledged:
        hint += (f" The steps acknowledged as having unknown effects ({', '.join(acknowledged)}) were not undone: "
                 "whatever they did stays in place.")
    return WorkflowRollbackResult(
        action="rolled_back", preview_id=radius.preview_id, blast_radius=radius.blast_radius, hint=hint, next=None,
        state=state, results=results, acknowledged=acknowledged,
    )


# --- the calls a rollback points to: built once, carrying the flags the caller gave ------------


def _flags(req: WorkflowRollbackReq) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    if req.acknowledge_unknown_effects:
        flags["acknowledge_unknown_effects"] = list(req.acknowledge_unknown_effects)
    if req.include_completed:
        flags["include_completed"] = True
    return flags


def preview_call(wf_id: str, req: WorkflowRollbackReq) -> dict[str, Any]:
    """The preview that goes with a refused or partly failed confirmation: the same flags, no --confirm."""
    return calls.ROLLBACK.call(workflow=wf_id, **_flags(req))


def confirm_call(wf_id: str, req: WorkflowRollbackReq, preview_id: str) -> dict[str, Any]:
    """The confirmation of the preview `preview_id`: the same flags, --confirm --expect-preview."""
    return calls.ROLLBACK.call(workflow=wf_id, confirm=True, expect_preview=preview_id, **_flags(req))


# --- the steps ---------------------------------------------------------------------------------


def _assess(ctx: Context, req: WorkflowRollbackReq, actor: str) -> tuple[Workflow, Radius]:
    def read() -> tuple[Workflow, Radius]:
        with ctx.store().read() as conn:
            wf = records.load(conn, records.resolve(ctx, conn, req.workflow))
            guards.check_acknowledged(wf, req.acknowledge_unknown_effects)
            return wf, blast_radius.compute(
                conn, wf, actor=actor, at=names.now(), acknowledged=req.acknowledge_unknown_effects,
                include_completed=req.include_completed, expect_preview=req.expect_preview, environ=os.environ,
            )

    return records.settled(read, lambda got: got[0])  # not a rollback that just ended, read as interrupted


def _refuse_forbidden(wf: Workflow, radius: Radius, actor: str) -> None:
    """E_FORBIDDEN, as the preview's `forbidden` blockers predicted (the same rules, asked again
    here of the same snapshot's policy), before any other refusal."""
    forbidden = [b for b in radius.blast_radius.blockers if b.code == "forbidden"]
    if forbidden:
        first = forbidden[0]
        raise SwarmError(
            "E_FORBIDDEN",
            f"rollback of workflow {wf.id} forbidden by the store's policy: {first.message}",
            details={"rule": first.rule, "actor": actor, "workflow": wf.id, "step": first.step,
                     "refusals": plain(forbidden)},
            hint="Someone the policy allows must roll it back; `swarmctl policy show` shows who.",
        )


def _refuse_blocked(wf: Workflow, radius: Radius, req: WorkflowRollbackReq) -> None:
    blockers = radius.blast_radius.blockers
    if blockers:
        codes = ", ".join(dict.fromkeys(b.code for b in blockers))
        including = _including_completed(wf.id, req, radius)
        raise SwarmError(
            "E_REFUSED",
            f"rollback of workflow {wf.id} refused ({codes}); nothing was changed",
            details={"workflow": wf.id, "preview_id": radius.preview_id, "refusals": plain(blockers)},
            hint="Review the blast radius (the same call without --confirm"
            + (", with --include-completed" if including else "") + "), resolve each refusal, then confirm.",
            next=including or preview_call(wf.id, req),
        )


def _claim(w: Writer, wf: Workflow, req: WorkflowRollbackReq) -> None:
    """Hold the workflow for this rollback, if nothing changed since it was assessed."""
    if rows.rev(w.conn, wf.id) != wf.rev:
        now = records.load(w.conn, wf.id)
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} changed while its rollback was being checked (now {now.observed}); nothing was changed",
            details={"workflow": wf.id, "state": now.observed, "owner": records.owner_view(now)},
            hint="Another process acted on it, perhaps another rollback. Preview again.",
            next=preview_call(wf.id, req),
        )
    records.settle(w, wf)
    records.claim(w, wf.id, "rolling_back", hosts.me(), rollback_by=w.actor, rollback_at=w.at)


def _preview_hint(radius: Radius, confirm: dict[str, Any] | None) -> str:
    br: BlastRadius = radius.blast_radius
    if confirm is None:
        return "Confirming would be refused: see blockers. Nothing was changed."
    failing = sum(1 for e in br.would_roll_back if e.predicted.outcome == "fails")
    warning = f"; {failing} of them predicted to fail, see `predicted`" if failing else ""
    return (
        f"Nothing was changed. Show this to the user; if they agree, confirm with `{shlex.join(confirm['argv'])}` "
        f"({br.counts.would_roll_back} step(s) would be undone{warning})."
    )
