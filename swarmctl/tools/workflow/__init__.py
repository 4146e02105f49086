"""Workflows: `workflow run`, `status`, `list`, `approve`, `resume`, `cancel`, `rollback` and
`show-definition`.

A workflow is a sequence of steps defined in a TOML file, run and recorded by swarmctl, and
rolled back after a preview of its blast radius. Where each part lives:

    definition.py    the TOML format: checking it strictly, `${env:...}`, writing it back
    records.py       a workflow as read from the store, what a saved state means now (liveness),
                     and saving changes (the SQL is in swarmctl/store/workflows.py)
    process.py       running a command with a timeout (liveness of pids: swarmctl/pids.py)
    group.py         where a run's commands start: a process group saved before each command
                     starts, led by a holder process, and the files their output goes to
    execute.py       carrying out steps: running forward, undoing in a rollback
    rollback.py      `workflow rollback`: the preview, and the confirmation that acts on it
    blast_radius.py  what a rollback would do, its fingerprint, and what blocks it
    guards.py        the rules of approve, resume and cancel
    models.py        request and result types
    rollback_types.py  the types of a rollback: its blast radius, each undo's outcome, its result
    calls.py         each tool's name, command and request type: the registry entries below are
                     built on them, and a `next` call is built from them
    views.py         the status view and what to call next

This module holds the tool functions (whose docstrings are the help text) and the registry
entries. Every result and error leaves through `_public`, which redacts secrets
(swarmctl/secrets.py). The CLI, `swarmctl call` and MCP all call these functions, so every
safety rule here holds at every door.

States of a workflow: pending (created, no step started), running, awaiting_approval (stopped
at a gate, approved or not), completed, failed, rolling_back, rolled_back, rollback_failed,
cancelled. A workflow saved `running`/`rolling_back` whose process is gone reads as `failed`/
`rollback_failed`, and its step in flight as `interrupted` (records.py).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from swarmctl import hosts, secrets
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations, plain
from swarmctl.store import policies
from swarmctl.tools.workflow import calls, definition, execute, guards, records, rollback, views
from swarmctl.tools.workflow.examples import EXAMPLES  # noqa: F401  (read by registry.examples)
from swarmctl.tools.workflow.models import (
    WorkflowApproveReq,
    WorkflowApproveResult,
    WorkflowCancelReq,
    WorkflowCancelResult,
    WorkflowDefinitionResult,
    WorkflowListReq,
    WorkflowListResult,
    WorkflowResumeReq,
    WorkflowRollbackReq,
    WorkflowRunReq,
    WorkflowShowDefinitionReq,
    WorkflowStatus,
    WorkflowStatusReq,
    WorkflowSummary,
)
from swarmctl.tools.workflow.rollback_types import WorkflowRollbackResult


# --- the door-independent guard: every output redacted ---------------------------------------


def _public(fn: Callable[[Context, Any], Any]) -> Callable[[Context, Any], Any]:
    """Results and errors of a workflow tool with every secret-named value masked."""

    @functools.wraps(fn)
    def guarded(ctx: Context, req: Any) -> Any:
        try:
            return secrets.redact(plain(fn(ctx, req)))
        except SwarmError as exc:
            exc.details = secrets.redact(exc.details)
            raise

    return guarded


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
    E_STEP_FAILED, with `next` the rollback preview. Ctrl-C or SIGTERM while a command runs
    kills its process group and saves the step `interrupted` (its effect unknown) before
    swarmctl exits. An invalid file is E_INVALID_ARG (naming
    the step and key), as is an `${env:NAME}` that is not set; nothing is created then. The
    store's policy may forbid it (E_FORBIDDEN, nothing created): `[run] actors` (who may run
    workflows) and `[run] definitions` (which files, matched after resolving symlinks). A store
    step that moves a ref protected from the caller fails with E_FORBIDDEN.

    The file: `name` (and `description`), then a `[[step]]` table a step, each with a unique
    `name` and one kind: `ref_set = { name = "REF", to = "CHANGESET" }`, `ref_delete = { name =
    "REF" }`, `approval = "what is signed off"` (a gate), or `run = ["PROGRAM", "ARG"]` with
    optional `rollback = [...]`, `env = { KEY = "${env:NAME}" }` and `timeout_s` (default 600).
    """
    actor = ctx.require_actor()
    given = ctx.path(req.file).absolute()
    definition.refuse_stdin(given)
    path = definition.resolved(given)  # checked, read and run from: one path
    store = ctx.store()
    with store.read() as conn:  # before the file is read: what an error about it says shows what it holds
        rules.refuse(rules.may_run(policies.current(conn), actor, str(path)))
    spec = definition.load(path, follow=False)
    if ctx.refuse_commands is not None and any("run" in step for step in spec["steps"]):
        raise ctx.refuse_commands()  # asked of what is run: the file is read once
    guards.require_env(spec["steps"])
    with store.write(actor) as w:
        rules.refuse(rules.may_run(w.policy, actor, str(path)))  # the policy as it is now
        wf_id = records.create(w, spec, str(path), str(path.parent), hosts.me())
    with guards.interrupted_workflow(wf_id, "run"):  # it exists: a signal from here on names it
        with store.read() as conn:
            wf = records.load(conn, wf_id)
        failed = execute.Executor(ctx, store, wf, actor, ctx.progress).run()
    return views.after_run(ctx, wf_id, failed)


@_public
def workflow_status(ctx: Context, req: WorkflowStatusReq) -> WorkflowStatus:
    """Show a workflow: its state, each step's status, what it did (the op of a store step; the
    exit code and output tails of a command), approvals and undo outcomes, and what to call next.

    A step saved as running whose swarmctl and command are both gone shows as `interrupted` (its
    effect is unknown). A step whose command outlives the swarmctl that started it (killed
    with SIGKILL) still shows as `running`, with the command's `command_pid`: resume, cancel
    and rollback refuse to act until it ends. Secrets are shown as `***`. Never writes to
    the store.
    """
    def read() -> records.Workflow:
        with ctx.store().read() as conn:
            return records.load(conn, records.resolve(ctx, conn, req.workflow))

    return views.status_view(records.settled(read, lambda wf: wf))


@_public
def workflow_list(ctx: Context, req: WorkflowListReq) -> WorkflowListResult:
    """List workflows, newest first: id, name, state, how many steps succeeded of how many.
    `--state` filters on the state as shown (a run whose swarmctl is gone shows, and is
    found, as `failed`, a rollback as `rollback_failed`). Never writes to the store."""
    with ctx.store().read() as conn:
        found = records.summaries(conn, req.state, req.limit + 1)
    return WorkflowListResult(workflows=[WorkflowSummary(**r) for r in found[: req.limit]], has_more=len(found) > req.limit)


@_public
def workflow_approve(ctx: Context, req: WorkflowApproveReq) -> WorkflowApproveResult:
    """Approve the gate a workflow waits at (state `awaiting_approval`), recording who and when.

    It does not run anything: `workflow resume ID` continues with the next step. Approving a
    gate that is already approved is a replay (`already_approved`, nothing written). A workflow
    not waiting at that gate gives E_STATE; a step that is not a gate, E_INVALID_ARG. The
    store's policy may forbid it (E_FORBIDDEN): `[approve] actors` (who may approve) and
    `[approve] self = false` (the workflow's creator may not approve its own gate).
    """
    actor = ctx.require_actor()
    with ctx.store().write(actor) as w:
        wf = records.load(w.conn, records.resolve(ctx, w.conn, req.workflow))
        rules.refuse(guards.policy_refusal(w.policy, "workflow_approve", actor, wf))
        gate = guards.gate_to_approve(wf, req.step)
        if gate.approved_by:
            return WorkflowApproveResult(wf.id, gate.name, gate.approved_by, gate.approved_at, True, wf.observed, [calls.RESUME.call(workflow=wf.id)])
        records.set_step(w, wf.id, gate.idx, status="success", approved_by=actor, approved_at=w.at, finished_at=w.at)
        at = w.at
    return WorkflowApproveResult(wf.id, gate.name, actor, at, False, wf.observed, [calls.RESUME.call(workflow=wf.id)])


@_public
def workflow_resume(ctx: Context, req: WorkflowResumeReq) -> WorkflowStatus:
    """Continue a workflow: past an approved gate, or (with `--retry STEP`) from the step that
    failed or was interrupted, which is run again.

    Never re-runs a step silently: a failed or interrupted step is run again only when named
    with `--retry` (an interrupted step's effect is unknown: check the target system first).
    Ends like `workflow run` (E_STEP_FAILED when a step fails). E_STATE when there is nothing
    to continue (a gate not yet approved, a workflow completed, cancelled, rolled back, or held
    by a live process, including a step's command still running after its swarmctl was killed).
    Resuming another actor's workflow may be forbidden by the store's policy (`[workflow]
    others`: E_FORBIDDEN); under `[run] definitions`, so is a workflow whose stored steps are
    not what its definition file defines now.
    """
    actor = ctx.require_actor()
    store = ctx.store()
    with store.write(actor) as w:
        wf = records.load(w.conn, records.resolve(ctx, w.conn, req.workflow))
        rules.refuse(guards.policy_refusal(w.policy, "workflow_resume", actor, wf))
        rules.refuse(guards.definition_refusal(w.policy, actor, wf))
        records.settle(w, wf)
        retry = guards.resume_point(wf, req.retry)
        to_run = [s.spec for s in wf.steps if s.status == "pending" or s is retry]
        if ctx.refuse_commands is not None and any("run" in spec for spec in to_run):
            raise ctx.refuse_commands()  # what it would run: commands on this host
        guards.require_env(to_run)
        if retry is not None:
            records.set_step(w, wf.id, retry.idx, status="pending", interrupted_during=None)
        records.claim(w, wf.id, "running", hosts.me())
    with store.read() as conn:
        wf = records.load(conn, wf.id)
    failed = execute.Executor(ctx, store, wf, actor, ctx.progress).run()
    return views.after_run(ctx, wf.id, failed)


@_public
def workflow_cancel(ctx: Context, req: WorkflowCancelReq) -> WorkflowCancelResult:
    """Stop a workflow for good: its steps not yet run become `skipped`; the steps that ran stay
    applied. A cancelled workflow cannot be resumed or rolled back: to undo it, call
    `workflow rollback` instead. Allowed while `pending`, `awaiting_approval` or `failed`;
    otherwise E_STATE (also when a live process is running it). Cancelling another actor's
    workflow may be forbidden by the store's policy (`[workflow] others`: E_FORBIDDEN).
    """
    actor = ctx.require_actor()
    with ctx.store().write(actor) as w:
        wf = records.load(w.conn, records.resolve(ctx, w.conn, req.workflow))
        rules.refuse(guards.policy_refusal(w.policy, "workflow_cancel", actor, wf))
        records.settle(w, wf)
        guards.not_held(wf)
        if wf.state not in ("pending", "awaiting_approval", "failed"):
            raise guards.ended_state(
                wf, f"workflow {wf.id} is {wf.state}; only a pending, awaiting_approval or failed workflow can be cancelled",
                state=wf.state,
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
    with ctx.store().read() as conn:
        wf = records.load(conn, records.resolve(ctx, conn, req.workflow))
    unreadable = [s.name for s in wf.steps if s.spec is None]
    if unreadable:
        raise SwarmError(
            "E_STORE_CORRUPT",
            f"workflow {wf.id}: the definition of step {unreadable[0]} cannot be read",
            details={"workflow": wf.id, "steps": unreadable},
        )
    return WorkflowDefinitionResult(workflow=wf.id, source=wf.source, toml=definition.to_toml(wf.definition))


@_public
def workflow_rollback(ctx: Context, req: WorkflowRollbackReq) -> WorkflowRollbackResult:
    """Roll back a workflow: undo its completed steps, last first. Without `--confirm` it only
    previews and changes nothing.

    The preview is `{action: "preview", preview_id, blast_radius, hint, next}`. `blast_radius` holds
    the workflow, `state_after` (the state confirming would leave: `rolled_back` or
    `rollback_failed`, or the state a `pending` or `cancelled` workflow stays in), `counts` and the lists: `would_roll_back` (successful steps that
    have an undo, last first: the op to undo, its outcome predicted by compare-and-swap, which
    is `fails` with the undo's error code when a ref moved since; or the rollback command,
    secrets redacted),
    `left_in_place` (commands without a rollback), `unknown_effects` (steps running, undoing
    or interrupted), `not_reversed` (failed commands that may have partly applied),
    `already_rolled_back`, `no_effect`, `blockers` and `unmeasured`. `next` (and the command in
    `hint`) confirms exactly this preview, with the flags given; it is null when confirming
    would be refused, but for a completed workflow not included: then it is the preview with
    --include-completed, to review before confirming. Show the preview to the user and get their decision: do not confirm on
    your own because a rollback was asked for earlier.

    With `--confirm` it acts: each step of `would_roll_back` is undone in that order (a store
    step by `op undo`, a command step by its `rollback` argv), saved as `undoing` before and
    with its outcome after; a failed undo does not stop the rest. When every undo succeeded the
    result adds the new `state` (`rolled_back`), per-step `results` and the `acknowledged` steps
    (listed, not undone; the hint says so). When one failed the workflow is `rollback_failed`
    and the call fails with E_STEP_FAILED (exit 10): `error.details` holds the per-step `results`
    and the steps that `failed`, and `error.next` is the preview that retries them (or, where the
    one that failed is a store step whose refs moved since, the undo of the op that moved them,
    as `op undo` gives it: then the preview).

    Refused with `--confirm` (E_REFUSED, nothing changed; `error.details.refusals` lists each
    reason): a workflow `pending`, `cancelled`, already `rolled_back`, or held by a live process;
    a `completed` workflow without `--include-completed`; a step status it does not recognise;
    a record it cannot read; unknown effects not acknowledged with
    `--acknowledge-unknown-effects STEP` (or `all`); a rollback command whose `${env:...}` is
    not set; `--expect-preview ID` that no longer matches the blast radius. When another
    rollback claims the workflow first, E_STATE; also while a step's command still runs after
    the swarmctl that started it was killed (blocker `command_running` in the preview: wait for
    it or stop it first). A rollback killed half-way leaves its step in flight under
    `unknown_effects`; after acknowledging it, a new rollback continues with the rest. Ctrl-C or
    SIGTERM during a rollback command kills it and saves its step `interrupted`.

    The store's policy may forbid the caller the rollback (`[workflow] others`) or the undo of a
    step (a protected ref, `[undo] others`): the preview lists each as a blocker `forbidden`
    (with its `rule`), and `--confirm` is then E_FORBIDDEN, nothing changed.
    """
    return rollback.confirm(ctx, req) if req.confirm else rollback.preview(ctx, req)


def policy_refusal(ctx: Context, tool: str, req: Any, actor: str) -> SwarmError | None:
    """What the store's policy would say to `actor` calling workflow tool `tool` with `req`
    (for `policy check`): the rules the tool itself asks, of the store as it is now."""
    with ctx.store().read() as conn:
        policy = policies.current(conn)
        if policy is None:
            return None
        if tool == "workflow_run":
            refusal = rules.may_run(policy, actor, str(ctx.path(req.file).resolve()))
        else:
            wf = records.load(conn, records.resolve(ctx, conn, req.workflow))
            refusal = guards.policy_refusal(policy, tool, actor, wf)
    return refusal.error() if refusal is not None else None


# --- registry entries ------------------------------------------------------------------------

_RUNS = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)

_APPROVES = Annotations(read_only=False, destructive=False, idempotent=True)
_CANCELS = Annotations(read_only=False, destructive=True, idempotent=False)

# One entry a tool: its address (calls.py: command, request), the function (its result type is
# the one it returns), what it does, its title and its one-line summary.
TOOLS = [
    calls.RUN.tool(workflow_run, _RUNS, "Run a workflow", "Create a workflow from a TOML file and run its steps."),
    calls.STATUS.tool(workflow_status, READ, "Workflow status", "Show a workflow and each step's status."),
    calls.LIST.tool(workflow_list, READ, "List workflows", "List workflows, newest first.", records="workflows"),
    calls.APPROVE.tool(workflow_approve, _APPROVES, "Approve a workflow gate", "Approve the gate a workflow waits at."),
    calls.RESUME.tool(
        workflow_resume, _RUNS, "Resume a workflow", "Continue a workflow past an approved gate or (with --retry) a failed step."
    ),
    calls.CANCEL.tool(workflow_cancel, _CANCELS, "Cancel a workflow", "Stop a workflow for good, leaving what ran in place."),
    calls.ROLLBACK.tool(
        workflow_rollback, _RUNS, "Roll back a workflow", "Preview, then (with --confirm) undo a workflow's steps, last first."
    ),
    calls.SHOW_DEFINITION.tool(
        workflow_show_definition, READ, "Show a workflow's definition", "Print a workflow's definition as TOML, secrets redacted."
    ),
]
