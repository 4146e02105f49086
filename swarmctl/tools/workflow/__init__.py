"""Workflows: `workflow run`, `status`, `list`, `approve`, `resume`, `cancel`, `rollback` and
`show-definition`.

A workflow is a sequence of steps defined in a TOML file (definition.py), run and recorded by
swarmctl (execute.py), kept in the store (records.py) and rolled back after a preview of its
blast radius (blast_radius.py). This module holds the request and result types, the tool
functions (whose docstrings are the help text) and the registry entries. Every result and
error leaves through `_public`, which redacts secrets (swarmctl/secrets.py).

States of a workflow: pending (created, no step started), running, awaiting_approval (stopped
at a gate, approved or not), completed, failed, rolling_back, rolled_back, rollback_failed,
cancelled. A workflow saved `running`/`rolling_back` whose process is gone reads as `failed`/
`rollback_failed`, and its step in flight as `interrupted` (records.py).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations, Cli, Range, Tool, arg, plain, request_type, result_type

WorkflowState = Literal[
    "pending", "running", "awaiting_approval", "completed", "failed",
    "rolling_back", "rolled_back", "rollback_failed", "cancelled",
]


# --- result types ----------------------------------------------------------------------------


@result_type
class WorkflowInfo:
    id: str
    name: str
    description: str | None
    state: str
    source: str
    base_dir: str
    created_by: str
    created_at: str
    updated_at: str
    waiting_at: str | None  # the gate it is stopped at (awaiting_approval)
    owner: dict[str, Any] | None  # the process acting on it: pid, actor, alive
    rollback_by: str | None
    rollback_at: str | None


@result_type
class StepView:
    index: int
    name: str
    kind: str
    status: str
    attempts: int
    started_at: str | None
    finished_at: str | None
    op: int | None
    approved_by: str | None
    approved_at: str | None
    undo_op: int | None
    interrupted_during: str | None
    definition: dict[str, Any] | None
    result: dict[str, Any] | None
    undo_result: dict[str, Any] | None


@result_type
class WorkflowStatus:
    workflow: WorkflowInfo
    steps: list[StepView]
    counts: dict[str, int]
    next: list[dict[str, Any]]


@result_type
class WorkflowSummary:
    id: str
    name: str
    state: str
    steps: int
    done: int
    created_by: str
    created_at: str
    updated_at: str


@result_type
class WorkflowListResult:
    workflows: list[WorkflowSummary]
    has_more: bool


@result_type
class WorkflowApproveResult:
    workflow: str
    step: str
    approved_by: str
    approved_at: str
    already_approved: bool
    state: str
    next: list[dict[str, Any]]


@result_type
class WorkflowCancelResult:
    workflow: str
    state: str
    skipped: list[str]
    left_applied: list[str]
    hint: str


@result_type
class WorkflowDefinitionResult:
    workflow: str
    source: str
    toml: str


@result_type
class WorkflowRollbackResult:
    """A preview has the first four keys only; a confirmed rollback has them all."""

    action: Literal["preview", "rolled_back"]
    preview_id: str
    blast_radius: dict[str, Any]
    hint: str
    state: str | None = None
    results: list[dict[str, Any]] | None = None
    acknowledged: list[str] | None = None


# --- requests --------------------------------------------------------------------------------

_WORKFLOW = Cli(positional=True, metavar="ID", complete="workflows")


def _workflow_arg(what: str) -> Any:
    return arg(description=f"{what}: its id (wf-...) or a unique prefix of it.", cli=_WORKFLOW, min_length=1)


@request_type
class WorkflowRunReq:
    file: str = arg(
        description="The workflow's TOML file. Relative command paths in it resolve against its directory.",
        cli=Cli(positional=True, metavar="FILE"),
        min_length=1,
    )


@request_type
class WorkflowStatusReq:
    workflow: str = _workflow_arg("The workflow")


@request_type
class WorkflowListReq:
    state: WorkflowState | None = arg(None, description="Only workflows in this state.")
    limit: Annotated[int, Range(1, 1000)] = arg(50, description="How many workflows at most, newest first.", cli=Cli(flags=("-n", "--limit")))


@request_type
class WorkflowApproveReq:
    workflow: str = _workflow_arg("The workflow waiting for approval")
    step: str | None = arg(
        None,
        description="The gate to approve; default: the one the workflow waits at. Naming it guards against approving the wrong gate.",
        cli=Cli(metavar="STEP", complete="steps"),
    )


@request_type
class WorkflowResumeReq:
    workflow: str = _workflow_arg("The workflow to continue")
    retry: str | None = arg(
        None,
        description="Re-run this failed or interrupted step (an interrupted step's effect is unknown: check first).",
        cli=Cli(metavar="STEP", complete="steps"),
    )


@request_type
class WorkflowCancelReq:
    workflow: str = _workflow_arg("The workflow to cancel")


@request_type
class WorkflowShowDefinitionReq:
    workflow: str = _workflow_arg("The workflow")


@request_type
class WorkflowRollbackReq:
    workflow: str = _workflow_arg("The workflow to roll back")
    confirm: bool = arg(False, description="Act. Without it: only preview the blast radius and change nothing.")
    acknowledge_unknown_effects: list[str] = arg(
        default_factory=list,
        description="A step listed under unknown_effects whose effect you have checked in the target system, "
        "or `all` (repeatable). Acknowledged steps are not undone.",
        cli=Cli(flags=("--acknowledge-unknown-effects",), metavar="STEP|all", complete="steps"),
    )
    expect_preview: str | None = arg(
        None,
        description="The preview_id you reviewed: refuse (E_REFUSED) if the blast radius changed since.",
        cli=Cli(metavar="PREVIEW_ID"),
    )
    include_completed: bool = arg(False, description="Allow rolling back a workflow that completed.")


# --- the door-independent guard: every output redacted ---------------------------------------


def _public(fn: Callable[[Context, Any], Any]) -> Callable[[Context, Any], Any]:
    """Results and errors of a workflow tool with every secret-named value masked."""
    from swarmctl import secrets

    @functools.wraps(fn)
    def guarded(ctx: Context, req: Any) -> Any:
        try:
            return secrets.redact(plain(fn(ctx, req)))
        except SwarmError as exc:
            exc.details = secrets.redact(exc.details)
            raise

    return guarded


def _progress(ctx: Context) -> Any:
    return getattr(ctx, "progress", None)


# --- the work --------------------------------------------------------------------------------


@_public
def workflow_run(ctx: Context, req: WorkflowRunReq) -> WorkflowStatus:
    """Create a workflow from a TOML file and run its steps in order.

    Each step is saved before it starts and its outcome after. A store step (`ref_set`,
    `ref_delete`) is one op, of kind `workflow_step`. A command step (`run`) runs its argv
    (never a shell) in the file's directory, with `${env:NAME}` values read from the
    environment now and never stored, under its `timeout_s`; the tails of its output are kept.
    The run stops at an approval gate (state `awaiting_approval`: call `workflow approve`, then
    `workflow resume`) or at a failed step: the workflow is then `failed` and the command gives
    E_STEP_FAILED, with `next` the rollback preview. An invalid file is E_INVALID_ARG (naming
    the step and key), as is an `${env:NAME}` that is not set; nothing is created then.
    """
    from swarmctl.tools.workflow import definition, execute, process, records

    actor = ctx.require_actor()
    path = (ctx.cwd / req.file).absolute()
    spec = definition.load(path)
    _require_env(spec["steps"])
    store = ctx.store()
    me = process.me()
    with store.write(actor) as w:
        wf_id = records.new_id()
        while w.conn.execute("SELECT 1 FROM workflows WHERE id = ?", (wf_id,)).fetchone():
            wf_id = records.new_id()
        records.insert(w, wf_id, spec, str(path), str(path.parent), me)
    with store.read() as conn:
        wf = records.load(conn, wf_id)
    failed = execute.Executor(ctx, store, wf, actor, _progress(ctx)).run()
    return _after_run(ctx, wf_id, failed)


@_public
def workflow_status(ctx: Context, req: WorkflowStatusReq) -> WorkflowStatus:
    """Show a workflow: its state, each step's status, what it did (the op of a store step; the
    exit code and output tails of a command), approvals and undo outcomes, and what to call next.

    A step saved as running whose process is gone shows as `interrupted` (its effect is
    unknown). Secrets are shown as `***`. Never writes to the store.
    """
    from swarmctl.tools.workflow import records

    with ctx.store().read() as conn:
        wf = records.load(conn, _resolve(ctx, conn, req.workflow))
    return _status(wf)


@_public
def workflow_list(ctx: Context, req: WorkflowListReq) -> WorkflowListResult:
    """List workflows, newest first: id, name, state, how many steps succeeded of how many.
    `--state` filters on the state as saved. Never writes to the store."""
    from swarmctl.tools.workflow import records

    with ctx.store().read() as conn:
        rows = records.list_rows(conn, req.state, req.limit)
    return WorkflowListResult(workflows=[WorkflowSummary(**r) for r in rows[: req.limit]], has_more=len(rows) > req.limit)


@_public
def workflow_approve(ctx: Context, req: WorkflowApproveReq) -> WorkflowApproveResult:
    """Approve the gate a workflow waits at (state `awaiting_approval`), recording who and when.

    It does not run anything: `workflow resume ID` continues with the next step. Approving a
    gate that is already approved is a replay (`already_approved`, nothing written). A workflow
    not waiting at that gate gives E_STATE; a step that is not a gate, E_INVALID_ARG.
    """
    from swarmctl.tools.workflow import records

    actor = ctx.require_actor()
    with ctx.store().write(actor) as w:
        wf = records.load(w.conn, _resolve(ctx, w.conn, req.workflow))
        gate = _gate_to_approve(wf, req.step)
        if gate.approved_by:
            return WorkflowApproveResult(wf.id, gate.name, gate.approved_by, gate.approved_at, True, wf.observed, [_call(RESUME, wf.id)])
        records.set_step(w, wf.id, gate.idx, status="success", approved_by=actor, approved_at=w.at, finished_at=w.at)
        at = w.at
    return WorkflowApproveResult(wf.id, gate.name, actor, at, False, wf.observed, [_call(RESUME, wf.id)])


@_public
def workflow_resume(ctx: Context, req: WorkflowResumeReq) -> WorkflowStatus:
    """Continue a workflow: past an approved gate, or (with `--retry STEP`) from the step that
    failed or was interrupted, which is run again.

    Never re-runs a step silently: a failed or interrupted step is run again only when named
    with `--retry` (an interrupted step's effect is unknown: check the target system first).
    Ends like `workflow run` (E_STEP_FAILED when a step fails). E_STATE when there is nothing
    to continue (a gate not yet approved, a workflow completed, cancelled, rolled back, or held
    by a live process).
    """
    from swarmctl.tools.workflow import execute, process, records

    actor = ctx.require_actor()
    store = ctx.store()
    with store.write(actor) as w:
        wf = records.load(w.conn, _resolve(ctx, w.conn, req.workflow))
        records.settle(w, wf)
        retry = _resume_point(wf, req.retry)
        _require_env([s.spec for s in wf.steps if s.status == "pending" or s is retry])
        if retry is not None:
            records.set_step(w, wf.id, retry.idx, status="pending", interrupted_during=None)
        records.claim(w, wf.id, "running", process.me())
    with store.read() as conn:
        wf = records.load(conn, wf.id)
    failed = execute.Executor(ctx, store, wf, actor, _progress(ctx)).run()
    return _after_run(ctx, wf.id, failed)


@_public
def workflow_cancel(ctx: Context, req: WorkflowCancelReq) -> WorkflowCancelResult:
    """Stop a workflow for good: its steps not yet run become `skipped`; the steps that ran stay
    applied. A cancelled workflow cannot be resumed or rolled back: to undo it, call
    `workflow rollback` instead. Allowed while `pending`, `awaiting_approval` or `failed`;
    otherwise E_STATE (also when a live process is running it).
    """
    from swarmctl.tools.workflow import records

    actor = ctx.require_actor()
    with ctx.store().write(actor) as w:
        wf = records.load(w.conn, _resolve(ctx, w.conn, req.workflow))
        records.settle(w, wf)
        _not_held(wf)
        if wf.state not in ("pending", "awaiting_approval", "failed"):
            raise SwarmError(
                "E_STATE",
                f"workflow {wf.id} is {wf.state}; only a pending, awaiting_approval or failed workflow can be cancelled",
                details={"workflow": wf.id, "state": wf.state},
            )
        skipped = [s for s in wf.steps if s.status == "pending"]
        for s in skipped:
            records.set_step(w, wf.id, s.idx, status="skipped")
        records.release(w, wf.id, "cancelled")
    applied = [s.name for s in wf.steps if s.status == "success" and s.kind != "approval"]
    return WorkflowCancelResult(
        workflow=wf.id,
        state="cancelled",
        skipped=[s.name for s in skipped],
        left_applied=applied,
        hint="The steps that ran stay applied; a cancelled workflow cannot be rolled back.",
    )


@_public
def workflow_show_definition(ctx: Context, req: WorkflowShowDefinitionReq) -> WorkflowDefinitionResult:
    """Print the definition a workflow was created from, as TOML, with secrets shown as `***`
    (`${env:...}` references of secret-named keys included). Never writes to the store."""
    from swarmctl.tools.workflow import definition, records

    with ctx.store().read() as conn:
        wf = records.load(conn, _resolve(ctx, conn, req.workflow))
    unreadable = [s.name for s in wf.steps if s.spec is None]
    if unreadable:
        raise SwarmError(
            "E_STORE_CORRUPT",
            f"workflow {wf.id}: the definition of step {unreadable[0]} cannot be read",
            details={"workflow": wf.id, "steps": unreadable},
        )
    return WorkflowDefinitionResult(workflow=wf.id, source=wf.source, toml=definition.to_toml(wf.definition))


@_public
def workflow_rollback(ctx: Context, req: WorkflowRollbackReq) -> Any:
    """Roll back a workflow: undo its completed steps, last first. Without `--confirm` it only
    previews and changes nothing.

    The preview is `{action: "preview", preview_id, blast_radius, hint}`. `blast_radius` holds
    the workflow, `state_after`, `counts` and the lists: `would_roll_back` (successful steps that
    have an undo, last first: the op to undo, predicted by compare-and-swap, e.g. a ref moved
    since gives a predicted E_CAS_MISMATCH; or the rollback command, secrets redacted),
    `left_in_place` (commands without a rollback), `unknown_effects` (steps running, undoing
    or interrupted), `not_reversed` (failed commands that may have partly applied),
    `already_rolled_back`, `no_effect`, `blockers` and `unmeasured`. Show it to the user and get
    their decision: do not confirm on your own because a rollback was asked for earlier.

    With `--confirm` it acts: each step of `would_roll_back` is undone in that order (a store
    step by `op undo`, a command step by its `rollback` argv), saved as `undoing` before and
    with its outcome after; a failed undo does not stop the rest. The result adds the new
    `state` (`rolled_back` when every undo succeeded, else `rollback_failed`), per-step
    `results` and the `acknowledged` steps (listed, not undone).

    Refused with `--confirm` (E_REFUSED, nothing changed; `error.details.refusals` lists each
    reason): a workflow `pending`, `cancelled`, already `rolled_back`, or held by a live process;
    a `completed` workflow without `--include-completed`; a step status it does not recognise;
    a record it cannot read; unknown effects not acknowledged with
    `--acknowledge-unknown-effects STEP` (or `all`); a rollback command whose `${env:...}` is
    not set; `--expect-preview ID` that no longer matches the blast radius. When another
    rollback claims the workflow first, E_STATE. A rollback killed half-way leaves its step in
    flight under `unknown_effects`; after acknowledging it, a new rollback continues with the rest.
    """
    from swarmctl import names
    from swarmctl.tools.workflow import blast_radius, execute, process, records

    actor = ctx.require_actor() if req.confirm else (ctx.actor or "")
    store = ctx.store()
    with store.read() as conn:
        wf = records.load(conn, _resolve(ctx, conn, req.workflow))
        _check_acknowledged(wf, req.acknowledge_unknown_effects)
        radius = blast_radius.compute(
            conn, wf, actor=actor, at=names.now(), acknowledged=req.acknowledge_unknown_effects,
            include_completed=req.include_completed, expect_preview=req.expect_preview, environ=os.environ,
        )
    preview_id, br = radius["preview_id"], radius["blast_radius"]
    if not req.confirm:
        return {"action": "preview", "preview_id": preview_id, "blast_radius": br, "hint": _preview_hint(wf.id, preview_id, br)}
    if br["blockers"]:
        codes = ", ".join(dict.fromkeys(b["code"] for b in br["blockers"]))
        raise SwarmError(
            "E_REFUSED",
            f"rollback of workflow {wf.id} refused ({codes}); nothing was changed",
            details={"workflow": wf.id, "preview_id": preview_id, "refusals": br["blockers"]},
            hint="Review the blast radius (the same call without --confirm), resolve each refusal, then confirm.",
            next=_preview_call(wf.id, req),
        )
    me = process.me()
    with store.write(actor) as w:
        rev = w.conn.execute("SELECT rev FROM workflows WHERE id = ?", (wf.id,)).fetchone()[0]
        if rev != wf.rev:
            now = records.load(w.conn, wf.id)
            raise SwarmError(
                "E_STATE",
                f"workflow {wf.id} changed while its rollback was being checked (now {now.observed}); nothing was changed",
                details={"workflow": wf.id, "state": now.observed, "owner": records.owner_view(now)},
                hint="Another process acted on it, perhaps another rollback. Preview again.",
                next=_preview_call(wf.id, req),
            )
        records.settle(w, wf)
        records.claim(w, wf.id, "rolling_back", me, rollback_by=actor, rollback_at=w.at)
    executor = execute.Executor(ctx, store, wf, actor, _progress(ctx))
    results = executor.roll_back(br["would_roll_back"])
    state = "rolled_back" if all(r["status"] == "rolled_back" for r in results) else "rollback_failed"
    with store.write(actor) as w:
        executor.owned(w)
        records.release(w, wf.id, state)
    acknowledged = [e["step"] for e in br["unknown_effects"] if e["acknowledged"]]
    hint = (
        "Every undo succeeded." if state == "rolled_back"
        else "Some undos failed (see results); fix the cause, then preview and confirm again to retry them."
    )
    return {"action": "rolled_back", "preview_id": preview_id, "blast_radius": br, "hint": hint,
            "state": state, "results": [_public_outcome(r) for r in results], "acknowledged": acknowledged}


# --- helpers ---------------------------------------------------------------------------------


def _resolve(ctx: Context, conn: Any, given: str) -> str:
    from swarmctl.tools.workflow import records

    wf_id = records.resolve_id(conn, given)
    ctx.resolve(given, wf_id)
    return wf_id


def _require_env(steps: list[dict[str, Any]]) -> None:
    """Every `${env:NAME}` the steps to run refer to must be set: checked before anything runs."""
    from swarmctl.tools.workflow import definition

    for step in steps:
        missing = definition.missing_references(step, os.environ) if step and step["kind"] == "run" else []
        if missing:
            raise SwarmError(
                "E_INVALID_ARG",
                f"step {step['name']} refers to {', '.join('${env:' + m + '}' for m in missing)}, which is not set; nothing was run",
                details={"step": step["name"], "variables": missing},
                hint="Set the variables in the environment of swarmctl and run again.",
            )


def _not_held(wf: Any) -> None:
    from swarmctl.tools.workflow import records

    if records.held_by_other(wf):
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} is {wf.state}, held by a live process (pid {wf.owner_pid}, {wf.owner_actor})",
            details={"workflow": wf.id, "state": wf.state, "owner": records.owner_view(wf)},
            hint="Wait for it to finish; `swarmctl workflow status` shows its progress.",
        )


def _gate_to_approve(wf: Any, name: str | None) -> Any:
    if name is not None:
        step = wf.step(name)
        if step is None:
            raise SwarmError("E_NOT_FOUND", f"workflow {wf.id} has no step {name}", details={"workflow": wf.id, "step": name})
        if step.kind != "approval":
            raise SwarmError("E_INVALID_ARG", f"step {name} is not an approval gate", details={"workflow": wf.id, "step": name})
        if step.approved_by:
            return step
    if wf.observed != "awaiting_approval" or wf.cursor is None:
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} is {wf.observed}, not waiting for an approval",
            details={"workflow": wf.id, "state": wf.observed},
        )
    gate = wf.steps[wf.cursor - 1]
    if name is not None and gate.name != name:
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} waits at gate {gate.name}, not at {name}",
            details={"workflow": wf.id, "waiting_at": gate.name, "step": name},
        )
    return gate


def _resume_point(wf: Any, retry_name: str | None) -> Any:
    """The step to re-run (or None), after checking the workflow may continue at all."""
    _not_held(wf)
    state = wf.state
    if state == "awaiting_approval":
        gate = wf.steps[wf.cursor - 1]
        if not gate.approved_by:
            raise SwarmError(
                "E_STATE",
                f"workflow {wf.id} waits for approval at {gate.name}: {gate.spec.get('approval')}",
                details={"workflow": wf.id, "waiting_at": gate.name},
                hint="An approver calls `workflow approve` first.",
                next=APPROVE.call(workflow=wf.id),
            )
    elif state == "failed":
        stuck = next((s for s in wf.steps if s.status in ("failed", "interrupted")), None)
        if stuck is not None:
            if retry_name != stuck.name:
                why = "was interrupted (its effect is unknown)" if stuck.status == "interrupted" else "failed"
                raise SwarmError(
                    "E_STATE",
                    f"workflow {wf.id} stopped at step {stuck.name}, which {why}; resume re-runs it only with --retry {stuck.name}",
                    details={"workflow": wf.id, "step": stuck.name, "status": stuck.status, "retry": retry_name},
                    hint="Check what the step did; then resume with --retry, or roll the workflow back.",
                    next=RESUME.call(workflow=wf.id, retry=stuck.name),
                )
            return stuck
    elif state != "pending":
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} is {state}: nothing to resume",
            details={"workflow": wf.id, "state": state},
        )
    if retry_name is not None:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--retry {retry_name}: no failed or interrupted step {retry_name} to re-run",
            details={"workflow": wf.id, "retry": retry_name},
        )
    return None


def _check_acknowledged(wf: Any, names_given: list[str]) -> None:
    unknown = [n for n in names_given if n != "all" and wf.step(n) is None]
    if unknown:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--acknowledge-unknown-effects: workflow {wf.id} has no step {unknown[0]}",
            details={"workflow": wf.id, "steps": unknown, "known": [s.name for s in wf.steps]},
        )


def _after_run(ctx: Context, wf_id: str, failed: Any) -> WorkflowStatus:
    from swarmctl.tools.workflow import records

    with ctx.store().read() as conn:
        wf = records.load(conn, wf_id)
    view = _status(wf)
    if failed is not None:
        from swarmctl import secrets

        step = next(s for s in view.steps if s.name == failed.name)
        raise SwarmError(
            "E_STEP_FAILED",
            f"workflow {wf_id} failed at step {failed.name}: {_failure_summary(failed)}",
            details={"workflow": wf_id, "state": wf.observed, "step": failed.name, "index": failed.idx,
                     "result": secrets.redact(step.result)},
            hint="`workflow status` shows every step; preview a rollback, or fix the cause and `workflow resume --retry STEP`.",
            next=ROLLBACK.call(workflow=wf_id),
        )
    return view


def _failure_summary(step: Any) -> str:
    result = step.result or {}
    if "error" in result and isinstance(result["error"], dict):
        return f"{result['error'].get('code')}: {result['error'].get('message')}"
    return result.get("summary") or "failed"


def _status(wf: Any) -> WorkflowStatus:
    from swarmctl import secrets
    from swarmctl.tools.workflow import definition, records

    waiting = wf.steps[wf.cursor - 1].name if wf.observed == "awaiting_approval" and wf.cursor else None
    info = WorkflowInfo(
        id=wf.id, name=wf.name, description=wf.description, state=wf.observed, source=wf.source,
        base_dir=wf.base_dir, created_by=wf.created_by, created_at=wf.created_at, updated_at=wf.updated_at,
        waiting_at=waiting, owner=records.owner_view(wf), rollback_by=wf.rollback_by, rollback_at=wf.rollback_at,
    )
    steps = []
    counts: dict[str, int] = {}
    for s in wf.steps:
        counts[s.observed] = counts.get(s.observed, 0) + 1
        during = s.interrupted_during
        if s.observed == "interrupted" and during is None:
            during = "rollback" if s.status == "undoing" else "run"
        public = definition.public_step(s.spec) if s.spec is not None else None
        if public is not None:
            public.pop("name")
        steps.append(StepView(
            index=s.idx, name=s.name, kind=s.kind, status=s.observed, attempts=s.attempts,
            started_at=s.started_at, finished_at=s.finished_at, op=s.op, approved_by=s.approved_by,
            approved_at=s.approved_at, undo_op=s.undo_op, interrupted_during=during, definition=public,
            result=_public_outcome(s.result), undo_result=_public_outcome(s.undo_result),
        ))
    ordered = {k: counts[k] for k in records.STEP_STATUSES if k in counts}
    ordered.update({k: v for k, v in counts.items() if k not in ordered})
    return WorkflowStatus(workflow=info, steps=steps, counts=ordered, next=_next_calls(wf, waiting))


def _public_outcome(outcome: dict[str, Any] | None) -> dict[str, Any] | None:
    from swarmctl import secrets

    if outcome is None:
        return None
    shown = secrets.redact(outcome)
    for key in ("stdout_tail", "stderr_tail", "error", "summary"):
        if isinstance(shown.get(key), str):
            shown[key] = secrets.redact_text(shown[key])
    return shown


def _next_calls(wf: Any, waiting: str | None) -> list[dict[str, Any]]:
    state = wf.observed
    if state == "awaiting_approval":
        gate = wf.steps[wf.cursor - 1]
        return [_call(RESUME, wf.id)] if gate.approved_by else [_call(APPROVE, wf.id)]
    if state == "failed":
        stuck = next((s for s in wf.steps if s.observed in ("failed", "interrupted")), None)
        retry = [RESUME.call(workflow=wf.id, retry=stuck.name)] if stuck is not None else []
        return [_call(ROLLBACK, wf.id), *retry]
    if state == "rollback_failed":
        return [_call(ROLLBACK, wf.id)]
    if state == "completed":
        return [ROLLBACK.call(workflow=wf.id, include_completed=True)]
    return []


def _call(tool: Tool, wf_id: str) -> dict[str, Any]:
    return tool.call(workflow=wf_id)


def _preview_call(wf_id: str, req: WorkflowRollbackReq) -> dict[str, Any]:
    """The preview that goes with a refused confirmation: the same call without --confirm."""
    flags: dict[str, Any] = {}
    if req.acknowledge_unknown_effects:
        flags["acknowledge_unknown_effects"] = req.acknowledge_unknown_effects
    if req.include_completed:
        flags["include_completed"] = True
    return ROLLBACK.call(workflow=wf_id, **flags)


def _preview_hint(wf_id: str, preview_id: str, br: dict[str, Any]) -> str:
    if br["blockers"]:
        return "Confirming would be refused: see blockers. Nothing was changed."
    n = br["counts"]["would_roll_back"]
    failing = sum(1 for e in br["would_roll_back"] if e["predicted"]["outcome"] == "fails")
    warning = f"; {failing} of them predicted to fail, see `predicted`" if failing else ""
    return (
        f"Nothing was changed. Show this to the user; if they agree, confirm with "
        f"`swarmctl workflow rollback {wf_id} --confirm --expect-preview {preview_id}` "
        f"({n} step(s) would be undone{warning})."
    )


# --- registry entries ------------------------------------------------------------------------

_RUNS = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)

RUN = Tool(
    name="workflow_run", cli=("workflow", "run"), title="Run a workflow",
    summary="Create a workflow from a TOML file and run its steps.",
    request=WorkflowRunReq, result=WorkflowStatus, run=workflow_run, annotations=_RUNS, mutates=True,
)
STATUS = Tool(
    name="workflow_status", cli=("workflow", "status"), title="Workflow status",
    summary="Show a workflow and each step's status.",
    request=WorkflowStatusReq, result=WorkflowStatus, run=workflow_status, annotations=READ, mutates=False,
)
LIST = Tool(
    name="workflow_list", cli=("workflow", "list"), title="List workflows",
    summary="List workflows, newest first.",
    request=WorkflowListReq, result=WorkflowListResult, run=workflow_list, annotations=READ, mutates=False,
)
APPROVE = Tool(
    name="workflow_approve", cli=("workflow", "approve"), title="Approve a workflow gate",
    summary="Approve the gate a workflow waits at.",
    request=WorkflowApproveReq, result=WorkflowApproveResult, run=workflow_approve,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True), mutates=True,
)
RESUME = Tool(
    name="workflow_resume", cli=("workflow", "resume"), title="Resume a workflow",
    summary="Continue a workflow past an approved gate or (with --retry) a failed step.",
    request=WorkflowResumeReq, result=WorkflowStatus, run=workflow_resume, annotations=_RUNS, mutates=True,
)
CANCEL = Tool(
    name="workflow_cancel", cli=("workflow", "cancel"), title="Cancel a workflow",
    summary="Stop a workflow for good, leaving what ran in place.",
    request=WorkflowCancelReq, result=WorkflowCancelResult, run=workflow_cancel,
    annotations=Annotations(read_only=False, destructive=True, idempotent=False), mutates=True,
)
ROLLBACK = Tool(
    name="workflow_rollback", cli=("workflow", "rollback"), title="Roll back a workflow",
    summary="Preview, then (with --confirm) undo a workflow's steps, last first.",
    request=WorkflowRollbackReq, result=WorkflowRollbackResult, run=workflow_rollback, annotations=_RUNS, mutates=True,
)
SHOW_DEFINITION = Tool(
    name="workflow_show_definition", cli=("workflow", "show-definition"), title="Show a workflow's definition",
    summary="Print a workflow's definition as TOML, secrets redacted.",
    request=WorkflowShowDefinitionReq, result=WorkflowDefinitionResult, run=workflow_show_definition,
    annotations=READ, mutates=False,
)

TOOLS = [RUN, STATUS, LIST, APPROVE, RESUME, CANCEL, ROLLBACK, SHOW_DEFINITION]
