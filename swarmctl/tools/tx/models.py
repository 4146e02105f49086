"""The request and result types of the transaction tools (swarmctl/tools/tx)."""

from typing import Annotated, Literal

from swarmctl.spec import Cli, Range, arg, request_type, result_type
from swarmctl.store import txs
from swarmctl.tools.common import REF_NAME_CLI, TARGET_CLI, RefMove

TxState = Literal["Ready", "Active", "Conflicted"]


# --- result types ----------------------------------------------------------------------------


@result_type
class TxRevision:
    revision: int
    action: Literal["set", "delete"]
    name: str
    new: str | None  # null for a delete
    at: str
    applied: bool  # false: undone, and available to `tx redo`


@result_type
class TxMoved:
    """A staged ref that the store moved after its baseline was recorded: a commit would conflict."""

    name: str
    expected: str | None  # the baseline
    actual: str | None  # what the store names now
    moved_by: list[int]  # the ops that moved it since the baseline, oldest first


@result_type
class TxBeginResult:
    tx: int
    state: TxState
    base_op: int
    max: int
    begun_at: str


@result_type
class TxStatusResult:
    state: TxState  # Ready: no open transaction
    tx: int | None
    base_op: int | None
    begun_at: str | None
    revision: int
    revisions: int
    max: int
    moves: list[RefMove]  # what a commit would do now: old is the baseline, new the staged target
    can_undo: bool
    can_redo: bool
    can_commit: bool
    moved: list[TxMoved]
    history: list[TxRevision]


@result_type
class TxStageResult:
    tx: int
    revision: int
    revisions: int
    max: int
    name: str
    old: str | None  # the ref's baseline: what a commit will expect it to name
    new: str | None  # the staged target (null: deleted)
    dropped: int  # undone revisions this stage discarded (the redo branch)


@result_type
class TxUndoResult:
    tx: int
    undone: TxRevision
    revision: int
    revisions: int
    moves: list[RefMove]
    can_undo: bool
    can_redo: bool


@result_type
class TxRedoResult:
    tx: int
    redone: TxRevision
    revision: int
    revisions: int
    moves: list[RefMove]
    can_undo: bool
    can_redo: bool


@result_type
class TxCommitResult:
    tx: int
    op: int
    description: str
    ref_moves: list[RefMove]


@result_type
class TxRollbackResult:
    state: Literal["Ready", "OutOfDate"]
    tx: int
    discarded: int  # staged revisions discarded, applied or undone
    hint: str | None  # with OutOfDate: what to do before staging again


@result_type
class TxConfigResult:
    max_revisions: int
    changed: bool


# --- requests --------------------------------------------------------------------------------


@request_type
class TxReq:
    """No arguments: the transaction is the calling actor's (--as / SWARMCTL_AS)."""


@request_type
class TxSetReq:
    """Stage one revision: NAME is to name TARGET when the transaction commits."""

    name: str = arg(description="The ref to move or create when the transaction commits, e.g. main or release/v1.", cli=REF_NAME_CLI)
    target: str = arg(
        description="The changeset it should name: an id, a unique prefix of 4+ hex digits, or a ref name "
        "(resolved now, to what that ref names in the store).",
        cli=TARGET_CLI,
    )


@request_type
class TxDeleteReq:
    """Stage one revision: NAME is to be deleted when the transaction commits."""

    name: str = arg(description="The ref to delete when the transaction commits.", cli=REF_NAME_CLI)


@request_type
class TxCommitReq:
    """Commit the calling actor's transaction."""

    message: str | None = arg(
        None,
        description="The commit op's description (default: the moves, summarised).",
        min_length=1,
        max_length=1000,
        cli=Cli(flags=("-m", "--message")),
    )


@request_type
class TxConfigReq:
    """The store's transaction settings; without options, show them."""

    max_revisions: Annotated[int, Range(1, txs.MAX_REVISIONS_LIMIT)] | None = arg(
        None,
        description=f"The bound on staged revisions per transaction (default {txs.DEFAULT_MAX_REVISIONS}, "
        f"at most {txs.MAX_REVISIONS_LIMIT}), for transactions begun from now on.",
        cli=Cli(metavar="N"),
    )
