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
