"""The request and result types of the workflow tools: their fields are the CLI's options,
the JSON Schema and the keys of the envelope's result, in order."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from swarmctl.spec import Cli, Range, arg, request_type, result_type

# The one list of each (records.py reads them with typing.get_args).
WorkflowState = Literal[
    "pending", "running", "awaiting_approval", "completed", "failed",
    "rolling_back", "rolled_back", "rollback_failed", "cancelled",
]
StepStatus = Literal[
    "pending", "running", "success", "failed", "skipped", "interrupted", "undoing", "rolled_back", "rollback_failed",
]

# `--acknowledge-unknown-effects all`: every step with unknown effects (so no step may be named so).
ACKNOWLEDGE_ALL = "all"
# The lists of a blast radius, each step in exactly one of them (blast_radius.py), in this order.
RADIUS_LISTS = ("would_roll_back", "left_in_place", "unknown_effects", "not_reversed", "already_rolled_back", "no_effect")


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
    owner: dict[str, Any] | None  # the process acting on it: pid, host, actor, alive, lease_until
    rollback_by: str | None
    rollback_at: str | None


@result_type
class StepView:
    index: int
    name: str
    kind: str
    status: str
    command_pid: int | None  # while its command runs: the pid of its process group (`kill -TERM -PID` stops it)
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


# --- the blast radius of a rollback (blast_radius.py) and what a rollback did ------------------


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
    state_after: Literal["rolled_back", "rollback_failed"]
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
    `hint`); after a rollback that failed in part, the preview to retry it. `state`, `results`
    and `acknowledged` are null in a preview."""

    action: Literal["preview", "rolled_back"]
    preview_id: str
    blast_radius: BlastRadius
    hint: str
    next: dict[str, Any] | None
    state: Literal["rolled_back", "rollback_failed"] | None
    results: list[UndoResult] | None
    acknowledged: list[str] | None


# --- requests --------------------------------------------------------------------------------

_WORKFLOW = Cli(positional=True, metavar="ID", complete="workflows")


def _workflow_arg(what: str) -> Any:
    return arg(
        description=f"{what}: its id (wf-...) or a unique prefix of it. At the JSON doors (MCP, `swarmctl call`) "
        "it may also be named `workflow_id`, as vmware-pilot's callers name it (not both: E_INVALID_ARG).",
        cli=_WORKFLOW,
        min_length=1,
        json_aliases=("workflow_id",),
    )


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
        f"or `{ACKNOWLEDGE_ALL}` (repeatable). Acknowledged steps are not undone. At the JSON doors, "
        f"`true` (as vmware-pilot's callers send it) means `[\"{ACKNOWLEDGE_ALL}\"]` and `false` means `[]`.",
        json_bool={True: (ACKNOWLEDGE_ALL,), False: ()},
        cli=Cli(flags=("--acknowledge-unknown-effects",), metavar=f"STEP|{ACKNOWLEDGE_ALL}", complete="steps"),
    )
    expect_preview: str | None = arg(
        None,
        description="The preview_id you reviewed: refuse (E_REFUSED) if the blast radius changed since.",
        cli=Cli(metavar="PREVIEW_ID"),
    )
    include_completed: bool = arg(False, description="Allow rolling back a workflow that completed.")
