"""Carrying out steps: running a workflow forward, and undoing steps in a rollback.

The rules this module keeps:
- Each change of a step's state is one `Store.write()` transaction, and the store's write lock
  is never held while a command runs. A command's outcome is saved by the next transaction,
  which comes before anything else runs: the next step's start (so one transaction a step),
  the workflow's release, or the interrupted step.
- A command step is saved `running` (with this process's pid and start time, and the
  process group its command will start in) before the command starts (process.py: a swarmctl
  killed before that commit starts no command), and with its outcome after; during a
  rollback, `undoing` and the outcome after. A swarmctl killed in between leaves the step in
  flight: while the command's group lives on, readers see it still `running` and nothing may
  run it (or its rollback) again; once both are gone, `interrupted`: its effect is unknown,
  and it is never re-run silently. On Ctrl-C or SIGTERM the group is killed and the step
  saved `interrupted` first.
- A store step (and the undo of one) is a single transaction: its op and its new status
  commit together, so there is no moment at which its effect is unknown.
- Every transaction first checks that this process still owns the workflow (`_owned_write`);
  once it does not, the executor stops at once and saves nothing more (E_STATE).
- `${env:...}` values are resolved here, passed to the process, scrubbed from the output of
  every step and rollback command of the workflow (each gets swarmctl's whole environment, so
  any may print one), and never written to the store.

`progress`, when given, is called with a dict for each step that starts and finishes
(`phase`, `event`, `step`, `index`, `position`, `count`, `status`); the CLI shows it on a
terminal. It must not raise.

Why this module is long: running forward and rolling back share the executor's one record of
ownership, of the outcome not yet saved and of the step under way; split, each half would
need the other's view of them, and the rules above would live in two places.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from swarmctl import hosts, pids
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.secrets import MIN_SCRUB_LEN, redact_text, scrub_values
from swarmctl.spec import plain
from swarmctl.store import Store, Writer, without_store_password
from swarmctl.store import workflows as rows
from swarmctl.tools import ref
from swarmctl.tools.common import resolve_changeset
from swarmctl.tools.undo import undo_in
from swarmctl.tools.workflow import definition, guards, process, records
from swarmctl.tools.workflow.ownership import LostOwnership
from swarmctl.tools.workflow.rollback_types import (
    CommandUndone,
    ErrorInfo,
    RefAfter,
    RollbackEntry,
    StoreStepUndoFailed,
    StoreStepUndone,
    UndoResult,
)
from swarmctl.tools.workflow.records import Step, Workflow

Progress = Callable[[dict[str, Any]], None]


class Executor:
    def __init__(self, ctx: Context, store: Store, wf: Workflow, actor: str, progress: Progress | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.wf = wf
        self.actor = actor
        self.progress = progress
        self.me = hosts.me()
        self.environ: Mapping[str, str] = dict(os.environ)
        # The store's password goes to a command only where its step's `env` names it.
        self.command_env = without_store_password(self.environ)
        self.inherits = self.command_env == self.environ  # then a command without `env` inherits it as it is
        self.commands = process.CommandGroup()  # where this run's commands start, one at a time
        # A command's outcome, written by the next transaction (`_owned_write`) before its own
        # change, which also moves the workflow's `rev` (every one that finds an outcome unsaved
        # changes the workflow row: the next step's start, a release, `_saving_the_last`); and its step.
        self._unsaved: Callable[[Writer], None] | None = None
        self._at: dict[str, str] | None = None  # the step under way, and during what (`_stopped_at`)
        self._unsaved_at = self._at  # the `_at` of the step whose outcome is `_unsaved`: where a failure stops
        self.lease_s = hosts.lease_s()
        # A rolled-back store step whose undo a later move of its refs stopped: the undo's `next`
        # (the op to undo first), the way on the rollback's failure gives (rollback.py).
        self.undo_first: dict[str, dict[str, Any]] = {}
        self._renewed = time.monotonic()  # when this process last renewed its lease (any owned write)
        self.base_dir = Path(wf.base_dir)  # where its commands run
        # What every step's `${env:...}` references resolve to: each command gets swarmctl's whole
        # environment, so any step (or rollback) may print another's secret; all are scrubbed.
        self._hidden = sorted({v for s in wf.steps for v in definition.resolved_values(s.spec, self.environ)})

    # --- ownership ---------------------------------------------------------------------------

    @contextmanager
    def _owned_write(self, change: dict[str, Any] | None = None) -> Iterator[Writer]:
        """A write transaction, once it is checked that this process still owns the workflow
        (nobody took it over): LostOwnership otherwise. The check renews its lease (swarmctl/hosts.py)
        and makes `change` to the workflow's row (columns, maybe none: its `rev` moves), in one
        statement."""
        with self.store.write(self.actor) as w:
            lease = hosts.lease_until(w.at, self.lease_s)
            if not rows.renew_lease(w.conn, self.wf.id, self.me, lease, change, w.at):
                raise LostOwnership(self.wf.id)
            if self._unsaved is not None:
                self._unsaved(w)
            yield w
        self._unsaved = None  # committed
        self._renewed = time.monotonic()

    def _save_later(self, save: Callable[[Writer], None]) -> None:
        self._unsaved, self._unsaved_at = save, self._at  # the step whose command just ended

    @contextmanager
    def _saving_the_last(self) -> Iterator[None]:
        """Whatever stops the executor early: the outcome of the command that ended before it
        is saved first (if this process still holds the workflow and the store answers)."""
        try:
            yield
        except BaseException:
            if self._unsaved is not None:
                try:
                    with self._owned_write() as w:
                        records.set_workflow(w, self.wf.id)  # the outcome's change of the workflow
                except (LostOwnership, SwarmError):
                    pass
            raise

    def _set(self, w: Writer, step: Step, workflow: dict[str, Any] | None = None, **columns: Any) -> None:
        records.set_step(w, self.wf.id, step.idx, workflow, **columns)

    @contextmanager
    def _lost_as_error(self) -> Iterator[None]:
        try:
            yield
        except LostOwnership as lost:
            raise lost.as_error() from None
        except SwarmError as exc:
            if exc.code in ("E_BUSY", "E_UNAVAILABLE") and "workflow" not in exc.details:
                guards.name_the_workflow(exc, self.wf.id, self._unsaved_at if self._unsaved is not None else self._at)
            raise

    def release(self, state: str) -> None:
        """Leave the workflow in `state`, held by nobody (E_STATE if another process holds it)."""
        with self._lost_as_error(), self._owned_write() as w:
            records.release(w, self.wf.id, state)

    def renew(self) -> None:
        """While a command runs: renew the lease, so that other hosts keep taking this process
        for alive. A store that is busy or out of reach now is asked again at the next renewal;
        a workflow another process took over stops the command (LostOwnership). On a store that
        hosts share, a lease not renewed for two thirds of SWARMCTL_LEASE_S stops the command
        too: once the lease runs out another host may take the workflow over and run the step
        again, and it must not run twice at once. (A local store's processes are all on this
        host, which asks the pid, never the lease.)"""
        try:
            with self._owned_write():
                pass
        except SwarmError:
            if self.store.path is None and time.monotonic() - self._renewed > self.lease_s * 2 / 3:
                raise LostOwnership(self.wf.id, lease_lapsing=True) from None

    def _report(self, phase: str, event: str, step: Step, position: int, count: int, status: str | None = None) -> None:
        if self.progress is not None:
            self.progress({
                "phase": phase, "event": event, "workflow": self.wf.id, "step": step.name, "index": step.idx,
                "position": position, "count": count, "status": status,
            })

    @contextmanager
    def _stopped_at(self, step: Step, during: str) -> Iterator[None]:
        """The step under way within (what an error names: `_lost_as_error`, and an interrupt's
        envelope: guards.interrupted_workflow reads `in_flight` off it)."""
        self._at = {"step": step.name, "during": during}
        try:
            yield
        except KeyboardInterrupt as exc:
            exc.in_flight = self._at  # type: ignore[attr-defined]
            raise

    # --- running forward ---------------------------------------------------------------------

    def run(self) -> Step | None:
        """Run the pending steps in order. Returns the step that failed, or None; the workflow
        ends `completed`, `awaiting_approval` (at a gate not yet approved) or `failed`."""
        with guards.interrupted_workflow(self.wf.id, "run"), self._lost_as_error(), self.commands, \
                process.terminate_as_interrupt(), self._saving_the_last():
            return self._run()

    def _run(self) -> Step | None:
        todo = [s for s in self.wf.steps if s.status == "pending"]
        for position, step in enumerate(todo, start=1):
            if step.kind == "approval":
                with self._owned_write() as w:
                    self._set(w, step, started_at=w.at)
                    records.release(w, self.wf.id, "awaiting_approval", cursor=step.idx)
                self.wf.state = "awaiting_approval"
                return None
            self._report("run", "start", step, position, len(todo))
            with self._stopped_at(step, "run"):
                if step.kind == "run":
                    self._run_command(step)
                else:
                    self._run_store_step(step)
            self._report("run", "finish", step, position, len(todo), step.status)
            if step.status != "success":
                with self._owned_write() as w:
                    records.release(w, self.wf.id, "failed", cursor=step.idx)
                self.wf.state = "failed"
                return step
        with self._owned_write() as w:
            records.release(w, self.wf.id, "completed", cursor=None)
        self.wf.state = "completed"
        return None

    def _running_at(self, step: Step) -> dict[str, Any]:
        """The workflow's change as `step` starts: its cursor, and its state where it changes (SQLite
        rewrites the state index's entry wherever an UPDATE names `state`, even to its value)."""
        return {"cursor": step.idx} if self.wf.state == "running" else {"state": "running", "cursor": step.idx}

    def _run_store_step(self, step: Step) -> None:
        try:
            with self._owned_write() as w:
                op, moves = self._store_change(w, step)
                result = {"ref_moves": moves}
                self._set(w, step, status="success", op=op, result=result, started_at=w.at, finished_at=w.at,
                          attempts=step.attempts + 1, workflow=self._running_at(step))
            self.wf.state = "running"
            step.status, step.op, step.result = "success", op, result
        except SwarmError as exc:
            result = {"error": {"code": exc.code, "message": exc.message, "details": exc.details, "hint": exc.hint}}
            with self._owned_write() as w:
                self._set(w, step, status="failed", result=result, started_at=w.at, finished_at=w.at,
                          attempts=step.attempts + 1)
            step.status, step.result = "failed", result

    def _store_change(self, w: Writer, step: Step) -> tuple[int | None, list[dict[str, Any]]]:
        """The step's one op (or none, when the ref already is as the step wants it), as
        `ref set` / `ref delete` make it, described with the workflow and step."""
        context = f"workflow {self.wf.id} step {step.name}"
        if step.kind == "ref_set":
            target = resolve_changeset(self.ctx, w.conn, step.spec["ref_set"]["to"])
            moved = ref.set_in(w, step.spec["ref_set"]["name"], target, kind="workflow_step", context=context)
            if moved.op is None:
                return None, []
            return moved.op, [{"name": moved.name, "old": moved.old, "new": moved.new}]
        deleted = ref.delete_in(w, step.spec["ref_delete"]["name"], kind="workflow_step", context=context)
        return deleted.op, [{"name": deleted.name, "old": deleted.old, "new": None}]

    def _run_command(self, step: Step) -> None:
        def begin(w: Writer, **group: Any) -> None:  # the step is running: saved with its command's group
            records.set_step_alone(w, self.wf.id, step.idx, status="running", pid=self.me.pid, pid_start=self.me.start,
                                   started_at=w.at, finished_at=None, result=None, interrupted_during=None,
                                   attempts=step.attempts + 1, **group)

        outcome = self._command(step, step.spec["run"], during="run", begin=begin, status="running",
                                change=self._running_at(step))
        result = self._outcome(outcome)
        status = "success" if outcome.ok else "failed"
        began = step.status == "running"

        def save(w: Writer) -> None:
            if not began:  # its group was never saved (no holder could start): one state change, as the
                begin(w)   # transaction's own change to the workflow (the run stops there) moves its rev
            records.set_step_alone(w, self.wf.id, step.idx, status=status, finished_at=w.at, result=result,
                                   **records.NO_PROCESS)

        self._save_later(save)
        step.status, step.result = status, result

    def _command(
        self, step: Step, argv: list[str], *, during: str, begin: Callable[..., None], status: str,
        change: dict[str, Any],
    ) -> process.CommandOutcome:
        """Run the step's `run` or `rollback` argv. Before the command starts, one transaction
        saves the step `status` (what `begin` writes of the step, given the group's columns; and
        `change` of the workflow) with the process group it starts in, so that a reader can tell
        it still runs after this process is gone.
        On Ctrl-C or SIGTERM (`process.terminate_as_interrupt`, around the whole run) the group
        is killed, the step saved `interrupted` (if this process still holds the workflow) and
        the KeyboardInterrupt re-raised."""
        spec = step.spec
        short = [n for n in definition.step_references(spec) if 0 < len(self.environ.get(n, "")) < MIN_SCRUB_LEN]
        if short:
            self.ctx.warn(
                f"step {step.name}: ${{env:{short[0]}}}{' and others' if len(short) > 1 else ''} is shorter than "
                f"{MIN_SCRUB_LEN} characters, too short to be scrubbed from the step's output: use a longer secret"
            )
        env = self.command_env
        if spec.get("env"):
            env = {**env, **{k: definition.expand(v, self.environ) for k, v in spec["env"].items()}}

        def started(group: pids.ProcessId) -> None:
            with self._owned_write(change) as w:
                begin(w, command_pid=group.pid, command_start=group.start)
            step.status = status
            self.wf.state = change.get("state", self.wf.state)

        try:
            return process.run_command(
                [definition.expand(a, self.environ) for a in argv],
                cwd=self.base_dir,
                env=env,
                timeout_s=spec["timeout_s"],
                group=self.commands,
                on_start=started,
                hidden=self._hidden,
                tick=(self.renew, self.lease_s / 3),
                inherit_env=env is self.command_env and self.inherits,
            )
        except KeyboardInterrupt:
            self._save_interrupted(step, during)
            raise

    def _save_interrupted(self, step: Step, during: str) -> None:
        """The process group is killed, but what it did before is unknown."""
        try:
            with self._owned_write() as w:
                self._set(w, step, status="interrupted", interrupted_during=during, finished_at=w.at, **records.NO_PROCESS)
                records.release(w, self.wf.id, "failed" if during == "run" else "rollback_failed")
        except (LostOwnership, SwarmError):
            # Another process holds the workflow now (its record is not ours to write), or the
            # store stayed locked: either way the step reads `interrupted` once this process and
            # the command's group are gone, which they are about to be.
            pass
        step.status = "interrupted"

    def _outcome(self, outcome: process.CommandOutcome) -> dict[str, Any]:
        """What is kept of a command's run: never a value that came from `${env:...}`, nor one
        it printed as `SECRET_KEY=value`. The error and summary are swarmctl's own words about
        the program the definition names (which holds no literal secret: `definition.load`
        refuses one), so only what `${env:...}` put in them is scrubbed: masking `KEY: value`
        there made `cannot start ./rotate-token: no such program` read `...: *** such program`."""
        hidden = self._hidden

        def clean(text: str | None) -> str | None:
            return redact_text(scrub_values(text, hidden))

        return {
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "timed_out": outcome.timed_out,
            "duration_ms": outcome.duration_ms,
            "stdout_tail": clean(outcome.stdout_tail),
            "stderr_tail": clean(outcome.stderr_tail),
            "error": scrub_values(outcome.error, hidden),
            "summary": scrub_values(outcome.summary(), hidden),
        }

    # --- rolling back ------------------------------------------------------------------------

    def roll_back(self, entries: list[RollbackEntry]) -> list[UndoResult]:
        """Undo each step of `would_roll_back`, in that order; a failed undo does not stop the
        rest. Returns one result per step; the last one's outcome is saved by `release`, which
        must follow."""
        with guards.interrupted_workflow(self.wf.id, "rollback"), self._lost_as_error(), self.commands, \
                process.terminate_as_interrupt(), self._saving_the_last():
            return self._roll_back(entries)

    def _roll_back(self, entries: list[RollbackEntry]) -> list[UndoResult]:
        results: list[UndoResult] = []
        by_name = {s.name: s for s in self.wf.steps}
        for position, entry in enumerate(entries, start=1):
            step = by_name[entry.step]
            self._report("rollback", "start", step, position, len(entries))
            with self._stopped_at(step, "rollback"):
                result = self._undo_command(step) if step.kind == "run" else self._undo_store_step(step)
            self._report("rollback", "finish", step, position, len(entries), result.status)
            results.append(result)
        return results

    def _undo_store_step(self, step: Step) -> StoreStepUndone | StoreStepUndoFailed:
        try:
            with self._owned_write() as w:
                undone = undo_in(w, step.op, description=f"workflow {self.wf.id} rollback of step {step.name}: undo op {step.op}")
                result = StoreStepUndone(
                    step=step.name, index=step.idx, kind=step.kind, status="rolled_back", op=undone.op, undid=step.op,
                    already_undone=undone.already_applied,
                    ref_moves=[RefAfter(name=m.name, new=m.new) for m in undone.ref_moves], at=w.at,
                )
                saved = plain(result)
                self._set(w, step, status="rolled_back", undo_op=undone.op,
                          undo_result={k: saved[k] for k in ("op", "undid", "already_undone", "ref_moves", "at")})
            step.status = "rolled_back"
            return result
        except SwarmError as exc:
            error = ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
            if exc.next is not None:
                self.undo_first[step.name] = exc.next
            with self._owned_write() as w:
                self._set(w, step, status="rollback_failed", undo_result={"undid": step.op, "error": plain(error), "at": w.at})
            step.status = "rollback_failed"
            return StoreStepUndoFailed(
                step=step.name, index=step.idx, kind=step.kind, status="rollback_failed", undid=step.op, error=error
            )

    def _undo_command(self, step: Step) -> CommandUndone:
        def begin(w: Writer, **group: Any) -> None:  # the step is undoing: saved with its command's group
            records.set_step_alone(w, self.wf.id, step.idx, status="undoing", pid=self.me.pid, pid_start=self.me.start,
                                   undo_result={"started_at": w.at}, **group)

        outcome = self._command(step, step.spec["rollback"], during="rollback", begin=begin, status="undoing", change={})
        kept = self._outcome(outcome)
        status = "rolled_back" if outcome.ok else "rollback_failed"
        self._save_later(lambda w: records.set_step_alone(
            w, self.wf.id, step.idx, status=status, undo_result={**kept, "at": w.at}, **records.NO_PROCESS
        ))
        step.status = status
        return CommandUndone(step=step.name, index=step.idx, kind=step.kind, status=status, **kept)
