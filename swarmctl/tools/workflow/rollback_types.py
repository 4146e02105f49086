"""The types of a rollback: its blast radius (blast_radius.py computes it), what each undo did
(execute.py) and the result of `workflow rollback` (rollback.py). Their fields are the JSON
Schema of the MCP outputSchema and the keys of the envelope's result, in order."""

from __future__ import annotations

from typing import Any, Literal

from swarmctl.spec import result_type


@result_type
class RadiusWorkflow:
    id: str
    name: str
    state: str  # as observed now


@result_type
class RadiusCounts:
    would_roll_back: int
    left_in_place: int
    unknown_effects: int
    not_reversed: int
    already_rolled_back: int
    no_effect: int
    blockers: int
    unmeasured: int


@result_type
class UndoByOp:
    """A store step is undone by `op undo` of the op it appended."""

    op_undo: int


@result_type
class UndoByCommand:
    """A command step is undone by running its `rollback` argv (secrets shown as `***`)."""

    command: list[str]
    timeout_s: int | float


@result_type
class RefAfter:
    name: str
    new: str | None  # null: the ref is deleted


@result_type
class PredictedOk:
    """The undo would succeed, moving these refs."""

    outcome: Literal["ok"]
    ref_moves: list[RefAfter]


@result_type
class PredictedAlreadyUndone:
    """The op was undone already (by op `by`): nothing more is written."""

    outcome: Literal["already_undone"]
    by: int


@result_type
class PredictedUndoFailure:
    """The undo would fail with this error (E_CAS_MISMATCH: a ref moved since)."""

    outcome: Literal["fails"]
    code: str
    message: str
    details: dict[str, Any]


@result_type
class PredictedCommandFailure:
    """The rollback command would not start (`message` says why)."""

    outcome: Literal["fails"]
    message: str


@result_type
class NotPredicted:
    """A rollback command that can start: what it will do is not predicted."""

    outcome: Literal["not_predicted"]


Predicted = PredictedOk | PredictedAlreadyUndone | PredictedUndoFailure | PredictedCommandFailure | NotPredicted


@result_type
class RollbackEntry:
    """A step that would be undone (`would_roll_back`)."""

    step: str
    index: int
    kind: str
    status: str
    undo: UndoByOp | UndoByCommand
    predicted: Predicted
    retry: bool  # its undo failed before and is tried again


@result_type
class StepNote:
    """A step that stays as it is (`left_in_place`, `not_reversed`, `no_effect`), and why."""

    step: str
    index: int
    kind: str
    status: str
    reason: str


@result_type
class UnknownEffect:
    """A step whose effect is unknown (`unknown_effects`): running, undoing, interrupted, unreadable."""

    step: str
    index: int
    kind: str
    status: str
    saved_status: str
    during: Literal["run", "rollback"] | None
    acknowledged: bool  # by --acknowledge-unknown-effects: it is then listed, not undone


@result_type
class AlreadyRolledBack:
    step: str
    index: int
    kind: str
    status: str
    undo_op: int | None


# What `--confirm` refuses (E_REFUSED), one type per shape; each `{code, message, ...}`.


@result_type
class Blocker:
    code: Literal["workflow_state", "completed_not_included"]
    message: str


@result_type
class HeldBlocker:
    """Another live process holds the workflow."""

    code: Literal["workflow_state"]
    message: str
    owner: dict[str, Any]  # pid, actor


@result_type
class StepBlocker:
    code: Literal["unreadable_record", "unknown_step_status"]
    message: str
    step: str


@result_type
class CommandRunningBlocker:
    """A step's command still runs though the swarmctl that started it is gone (`--confirm`
    gives E_STATE): wait for it, or stop its process group `pid`."""

    code: Literal["command_running"]
    message: str
    step: str
    pid: int


@result_type
class UnacknowledgedBlocker:
    code: Literal["unknown_effects_unacknowledged"]
    message: str
    steps: list[str]


@result_type
class MissingEnvBlocker:
    code: Literal["missing_env"]
    message: str
    step: str
    variables: list[str]


@result_type
class PreviewMismatchBlocker:
    code: Literal["preview_mismatch"]
    message: str
    expected: str
    actual: str


@result_type
class PolicyBlocker:
    """The store's policy forbids the caller this rollback (`--confirm` gives E_FORBIDDEN): the
    rule, and the step whose undo it forbids (null: the whole rollback)."""

    code: Literal["forbidden"]
    message: str
    rule: str
    step: str | None


AnyBlocker = (
    Blocker | HeldBlocker | CommandRunningBlocker | StepBlocker | UnacknowledgedBlocker | MissingEnvBlocker
    | PreviewMismatchBlocker | PolicyBlocker
)


@result_type
class Unmeasured:
    """What the preview cannot know."""

    code: Literal["command_effects"]
    message: str
    steps: list[str]


@result_type
class BlastRadius:
    """What a rollback would do: each step in exactly one list, last first; then what blocks it."""

    workflow: RadiusWorkflow
    state_after: Literal["rolled_back", "rollback_failed", "pending", "cancelled"]  # the last two: it stays so
    counts: RadiusCounts
    would_roll_back: list[RollbackEntry]
    left_in_place: list[StepNote]
    unknown_effects: list[UnknownEffect]
    not_reversed: list[StepNote]
    already_rolled_back: list[AlreadyRolledBack]
    no_effect: list[StepNote]
    blockers: list[AnyBlocker]
    unmeasured: list[Unmeasured]


@result_type
class ErrorInfo:
    code: str
    message: str
    details: dict[str, Any]


@result_type
class StoreStepUndone:
    step: str
    index: int
    kind: str
    status: Literal["rolled_back"]
    op: int | None  # the undo op; that of the earlier undo when already_undone
    undid: int
    already_undone: bool
    ref_moves: list[RefAfter]
    at: str


@result_type
class StoreStepUndoFailed:
    step: str
    index: int
    kind: str
    status: Literal["rollback_failed"]
    undid: int
    error: ErrorInfo


@result_type
class CommandUndone:
    """A rollback command's run (output tails with secrets masked)."""

    step: str
    index: int
    kind: str
    status: Literal["rolled_back", "rollback_failed"]
    exit_code: int | None
    signal: str | None
    timed_out: bool
    duration_ms: int
    stdout_tail: str | None
    stderr_tail: str | None
    error: str | None
    summary: str | None


UndoResult = StoreStepUndone | StoreStepUndoFailed | CommandUndone


@result_type
class WorkflowRollbackResult:
    """A preview (`action: preview`) or a confirmed rollback (`action: rolled_back`). `next` is the
    call to make next: after a preview that may be confirmed, its confirmation (the command in
    `hint`); after a preview of a completed workflow not included, the preview with
    `--include-completed`; after a rollback that failed in part, the preview to retry it.
    `state`, `results` and `acknowledged` are null in a preview."""

    action: Literal["preview", "rolled_back"]
    preview_id: str
    blast_radius: BlastRadius
    hint: str
    next: dict[str, Any] | None
    state: Literal["rolled_back", "rollback_failed"] | None
    results: list[UndoResult] | None
    acknowledged: list[str] | None
