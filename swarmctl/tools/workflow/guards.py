"""The rules of the workflow lifecycle that are not rollback's: which gate `approve` approves,
where `resume` may continue, who holds a workflow, and the environment a run needs. Each raises
the SwarmError a caller can act on (E_STATE, E_INVALID_ARG, E_NOT_FOUND), with `next` where
one call resolves it."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from swarmctl import policy as rules
from swarmctl.envelope import SwarmError
from swarmctl.tools.workflow import calls, definition, records
from swarmctl.tools.workflow.models import ACKNOWLEDGE_ALL
from swarmctl.tools.workflow.records import Step, Workflow


def require_env(steps: list[dict[str, Any]]) -> None:
    """Every `${env:NAME}` the steps to run refer to must be set: checked before anything runs."""
    for step in steps:
        missing = definition.missing_references(step, os.environ) if step and step["kind"] == "run" else []
        if missing:
            raise SwarmError(
                "E_INVALID_ARG",
                f"step {step['name']} refers to {', '.join('${env:' + m + '}' for m in missing)}, which is not set; nothing was run",
                details={"step": step["name"], "variables": missing},
                hint="Set the variables in the environment of swarmctl and run again.",
            )


def no_orphaned_command(wf: Workflow) -> None:
    """E_STATE while a step's command outlives the swarmctl that started it: running it (or its
    rollback) again now would run a second copy beside it."""
    step = records.orphaned_command(wf)
    if step is None:
        return
    pid = step.command_pid
    raise SwarmError(
        "E_STATE",
        f"the command of step {step.name} of workflow {wf.id} is still running (pid {pid}), though the swarmctl "
        "that started it is gone; nothing was changed",
        details={"workflow": wf.id, "step": step.name, "status": step.status, "pid": pid},
        hint=f"Wait for it to end, or stop it and its children with `kill -TERM -{pid}`; then "
        f"`swarmctl workflow status {wf.id}` shows the step interrupted, to retry or roll back.",
        next=calls.STATUS.call(workflow=wf.id),
    )


def ended_state(wf: Workflow, message: str, **details: Any) -> SwarmError:
    """E_STATE for a workflow in a state the call cannot act on, with the way on: the preview of
    its rollback's retry where that failed, else its status."""
    if "rollback_failed" in (wf.state, wf.observed):
        hint, way = f"Its rollback failed: `swarmctl workflow rollback {wf.id}` previews the retry.", calls.ROLLBACK.call(workflow=wf.id)
    else:
        hint, way = f"`swarmctl workflow status {wf.id}` shows where it is.", calls.STATUS.call(workflow=wf.id)
    return SwarmError("E_STATE", message, details={"workflow": wf.id, **details}, hint=hint, next=way)


def not_held(wf: Workflow) -> None:
    no_orphaned_command(wf)
    if records.held_by_other(wf):
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} is {wf.state}, held by a live process ({records.holder(wf)})",
            details={"workflow": wf.id, "state": wf.state, "owner": records.owner_view(wf)},
            hint=f"Wait for it to finish; `swarmctl workflow status {wf.id}` shows its progress.",
            next=calls.STATUS.call(workflow=wf.id),
        )


def gate_to_approve(wf: Workflow, name: str | None) -> Step:
    if name is not None:
        step = wf.step(name)
        if step is None:
            raise SwarmError("E_NOT_FOUND", f"workflow {wf.id} has no step {name}", details={"workflow": wf.id, "step": name})
        if step.kind != "approval":
            raise SwarmError("E_INVALID_ARG", f"step {name} is not an approval gate", details={"workflow": wf.id, "step": name})
        if step.approved_by:
            return step
    gate = wf.gate
    if gate is None:
        raise ended_state(wf, f"workflow {wf.id} is {wf.observed}, not waiting for an approval", state=wf.observed)
    if name is not None and gate.name != name:
        raise SwarmError(
            "E_STATE",
            f"workflow {wf.id} waits at gate {gate.name}, not at {name}",
            details={"workflow": wf.id, "waiting_at": gate.name, "step": name},
        )
    return gate


def resume_point(wf: Workflow, retry_name: str | None) -> Step | None:
    """The step to re-run (or None), after checking the workflow may continue at all. Only after
    `records.settle`: the saved state is then the observed one."""
    not_held(wf)
    if retry_name is not None and wf.step(retry_name) is None:  # a misspelt name, said as such
        raise SwarmError(
            "E_NOT_FOUND", f"workflow {wf.id} has no step {retry_name}",
            details={"workflow": wf.id, "step": retry_name, "steps": [s.name for s in wf.steps]},
            hint=f"`swarmctl workflow status {wf.id}` lists its steps.",
            next=calls.STATUS.call(workflow=wf.id),
        )
    state = wf.state
    if state == "awaiting_approval":
        gate = wf.gate
        if gate is not None and not gate.approved_by:
            raise SwarmError(
                "E_STATE",
                f"workflow {wf.id} waits for approval at {gate.name}: {gate.spec.get('approval')}",
                details={"workflow": wf.id, "waiting_at": gate.name},
                hint=f"An approver calls `workflow approve {wf.id}` first.",
                next=calls.APPROVE.call(workflow=wf.id),
            )
    elif state == "failed":
        stuck = wf.stopped_at
        if stuck is not None:
            if retry_name != stuck.name:
                why = "was interrupted (its effect is unknown)" if stuck.status == "interrupted" else "failed"
                raise SwarmError(
                    "E_STATE",
                    f"workflow {wf.id} stopped at step {stuck.name}, which {why}; resume re-runs it only with --retry {stuck.name}",
                    details={"workflow": wf.id, "step": stuck.name, "status": stuck.status, "retry": retry_name},
                    hint="Check what the step did; then resume with --retry, or roll the workflow back.",
                    next=calls.RESUME.call(workflow=wf.id, retry=stuck.name),
                )
            return stuck
    elif state != "pending":
        raise ended_state(wf, f"workflow {wf.id} is {state}: nothing to resume", state=state)
    if retry_name is not None:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--retry {retry_name}: no failed or interrupted step {retry_name} to re-run",
            details={"workflow": wf.id, "retry": retry_name},
        )
    return None


def check_acknowledged(wf: Workflow, names_given: list[str]) -> None:
    unknown = [n for n in names_given if n != ACKNOWLEDGE_ALL and wf.step(n) is None]
    if unknown:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--acknowledge-unknown-effects: workflow {wf.id} has no step {unknown[0]}",
            details={"workflow": wf.id, "steps": unknown, "known": [s.name for s in wf.steps]},
        )


# The word each workflow tool's refusal uses for what was refused.
_STEERS = {"workflow_resume": "resume", "workflow_cancel": "cancel", "workflow_rollback": "roll back"}


def policy_refusal(policy: rules.Policy | None, tool: str, actor: str, wf: Workflow) -> rules.Refusal | None:
    """What the store's policy says of `actor` calling `tool` (approve, resume, cancel or
    rollback) on `wf`: [approve] for approving, [workflow] others for the rest."""
    if tool == "workflow_approve":
        return rules.may_approve(policy, actor, wf.id, wf.created_by)
    return rules.may_steer(policy, actor, wf.id, wf.created_by, _STEERS[tool])


def definition_refusal(policy: rules.Policy | None, actor: str, wf: Workflow) -> rules.Refusal | None:
    """Under `[run] definitions`, the commands of a workflow (its steps, their rollbacks) run
    only while they are what its definition file, one the rule allows, defines now: checked
    where `resume` and `rollback` would run them, as `run` checks the file it is given.

    The database guard cannot check this (it sees rows, not files): a role that may write
    workflow rows could otherwise store steps of its own under an allowed file's name and have
    swarmctl run them. A file changed since the workflow was started is refused the same way."""
    if policy is None or policy.run_definitions is None:
        return None
    path = Path(wf.source).resolve()
    subject = {"workflow": wf.id, "file": str(path)}
    if not rules.matches(policy.run_definitions, str(path)):
        why = f"workflow {wf.id} was defined by {path}, which is not a workflow definition this store runs"
        return rules.Refusal("run.definitions", actor, why, policy.run_definitions, subject)
    if Path(wf.base_dir).resolve() != path.parent:  # its commands would run elsewhere: `./deploy.sh` another's
        why = (f"workflow {wf.id} runs its commands in {wf.base_dir}, not in the directory of its definition {path} "
               "(it was started through a symlink by an earlier swarmctl, which ran commands where the symlink was; "
               f"they run only where the definition is now): `swarmctl workflow cancel {wf.id}`, then run {path} again")
        return rules.Refusal("run.definitions", actor, why, policy.run_definitions, subject)
    try:
        defined = definition.load(path)
    except SwarmError as exc:
        return rules.Refusal("run.definitions", actor, f"workflow {wf.id}: {exc.message}", policy.run_definitions, subject)
    defined = json.loads(json.dumps(defined))  # as the store keeps it: JSON
    if (defined["name"], defined.get("description") or None, defined["steps"]) != (wf.name, wf.description or None, [s.spec for s in wf.steps]):
        why = f"the steps stored for workflow {wf.id} are not those {path} defines now"
        return rules.Refusal("run.definitions", actor, why, policy.run_definitions, subject)
    return None


def name_the_workflow(exc: SwarmError, wf_id: str, at: dict[str, str] | None) -> None:
    """E_BUSY (the store stayed locked) or E_UNAVAILABLE (out of reach) once workflow `wf_id`
    existed, `at` a step (its name, and during what) or None: their own words, "nothing was
    written" and "retry", are not so. Steps may have run (the last one's outcome unsaved: it
    shows as interrupted), and the file run again would run them again. The error names the
    workflow and where it stopped, and what to do: look, then resume or roll back."""
    where = f" at step {at['step']}" if at else " before its first step"
    exc.details = {**exc.details, "workflow": wf_id, **(at or {})}
    exc.message = f"{exc.message}; workflow {wf_id} stopped{where}"
    exc.hint = (
        f"Workflow {wf_id} exists and may have run steps: do not run its file again. Once the store "
        f"answers, `swarmctl workflow status {wf_id}` shows what ran; then resume it or roll it back."
    )
    exc.next = calls.STATUS.call(workflow=wf_id)


def name_the_interrupted(exc: KeyboardInterrupt, wf_id: str, at: dict[str, str] | None, phase: str) -> None:
    """Ctrl-C or SIGTERM while workflow `wf_id` ran (`phase` "run") or rolled back ("rollback"),
    `at` the step under way (its name, and during what) or None: E_INTERRUPTED's own hint, "run
    the command again", would run the file's steps again in a new workflow. The error names the
    workflow and where it stopped (envelope.interrupted reads these off the exception), and what
    to do: look, then resume or roll back."""
    exc.details = {"workflow": wf_id, **(at or {})}  # type: ignore[attr-defined]
    status = f"`swarmctl workflow status {wf_id}`"
    if phase == "rollback":
        where = f" at step {at['step']}" if at else " with no undo in flight"
        hint = (f"The rollback of workflow {wf_id} stopped{where}; a step in flight is recorded as interrupted. "
                f"{status} shows what was undone; preview the rollback again (`swarmctl workflow rollback {wf_id}`) "
                "and confirm it to go on.")
    else:
        where = f" at step {at['step']}" if at else " with no step in flight"
        hint = (f"Workflow {wf_id} stopped{where} and exists: do not run its file again, which would run its steps "
                f"again in a new workflow. {status} shows what ran (a command in flight is recorded as interrupted, "
                f"its effect unknown); then resume it (`swarmctl workflow resume {wf_id}`, with --retry STEP to run "
                "an interrupted step again), or roll it back.")
    exc.hint, exc.next = hint, calls.STATUS.call(workflow=wf_id)  # type: ignore[attr-defined]


@contextmanager
def interrupted_workflow(wf_id: str, phase: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM within, once workflow `wf_id` exists (around its executor's run or
    rollback, and around what comes before and after it): the E_INTERRUPTED envelope names the
    workflow, the step under way (`in_flight`, set by the executor), and what to do
    (`name_the_interrupted`; named once, by the innermost)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if not getattr(exc, "details", None):
            name_the_interrupted(exc, wf_id, getattr(exc, "in_flight", None), phase)
        raise
