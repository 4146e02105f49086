"""Staged transactions: `tx begin`, `tx set`, `tx delete`, `tx status`, `tx undo`, `tx redo`,
`tx commit`, `tx rollback`, and `tx config` for the store's bound on revisions.

A transaction stages ref moves without touching the store's refs, then commits them as one op
(kind `tx_commit`) by compare-and-swap against each ref's baseline, or is rolled back. It lives
in the store (each CLI call is a new process), one open transaction per actor per store, so
every tx command needs an identity: the transaction is the calling actor's. The rows are in
swarmctl/store/txs.py; the request and result types in models.py beside this file.
"""

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations, Tool
from swarmctl.store import Move, conflicts, policies, queries, txs
from swarmctl.tools.tx.examples import EXAMPLES  # noqa: F401  (read by registry.examples)
from swarmctl.tools.common import RefMove, resolve_changeset
from swarmctl.tools.tx.models import (
    TxBeginResult,
    TxCommitReq,
    TxCommitResult,
    TxConfigReq,
    TxConfigResult,
    TxDeleteReq,
    TxMoved,
    TxRedoResult,
    TxReq,
    TxRevision,
    TxRollbackResult,
    TxSetReq,
    TxStageResult,
    TxStatusResult,
    TxUndoResult,
)

# Why every tx command, `tx status` too, needs --as: E_IDENTITY_REQUIRED says so.
_WHY = "every tx command, tx status too, acts on the calling actor's own transaction"

# --- the work --------------------------------------------------------------------------------


def tx_begin(ctx: Context, req: TxReq) -> TxBeginResult:
    """Open a transaction for the calling actor (--as): ref moves are staged with `tx set` and
    `tx delete`, then made as one op by `tx commit`, or discarded by `tx rollback`. Nothing in
    the store's refs changes until the commit.

    Records the baseline: the store's newest op now (`base_op`) and, as each ref is first
    staged, what it names then. The number of staged revisions is bounded by the store's
    setting when the transaction begins (`max`; see `tx config`).

    Refused with E_STATE if the actor already has an open transaction (see it with `tx status`,
    end it with `tx commit` or `tx rollback`). Other actors' transactions do not matter: each
    actor may have one. Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    with ctx.store().write(actor) as w:
        existing = txs.open_tx(w.conn, actor)
        if existing is not None:
            raise SwarmError(
                "E_STATE",
                f"{actor} already has an open transaction: tx {existing.tx} ({existing.state}, "
                f"revision {existing.revision})",
                details={"tx": existing.tx, "state": existing.state, "revision": existing.revision},
                hint="One open transaction per actor: see it with `swarmctl tx status`, then finish it with "
                "`swarmctl tx commit` or discard it with `swarmctl tx rollback`.",
                next=TX_STATUS.call(),
            )
        base_op, limit = queries.newest_op(w.conn), txs.max_revisions(w.conn)
        tx = txs.begin(w.conn, actor, base_op, limit, w.at)
    return TxBeginResult(tx=tx, state="Active", base_op=base_op, max=limit, begun_at=w.at)


def tx_set(ctx: Context, req: TxSetReq) -> TxStageResult:
    """Stage one revision in the calling actor's transaction: ref NAME is to name TARGET when
    it commits. The store's refs do not change now. TARGET may be a changeset id, a unique
    prefix of one, or a ref name (resolved now).

    The first time a ref is staged, what it names in the store is recorded as its baseline
    (`old`; null if it does not exist): the commit moves it only if it still names that. A
    stage after `tx undo` discards the undone revisions (`dropped` says how many).

    Refused: no open transaction, a Conflicted one, or the revision bound reached (E_STATE;
    nothing is ever dropped to make room); a bad ref name (E_INVALID_ARG); an unknown target
    (E_NOT_FOUND); a ref the store's policy protects from the caller (E_FORBIDDEN, now rather
    than at the commit). Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    name = names.check_new_ref_name(req.name)
    with ctx.store().write(actor) as w:
        tx = _open_active(w.conn, actor, "stage")
        w.refuse_forbidden_moves([name])  # now, not at the commit
        new = resolve_changeset(ctx, w.conn, req.target)
        return _stage(w, tx, name, new)


def tx_delete(ctx: Context, req: TxDeleteReq) -> TxStageResult:
    """Stage one revision in the calling actor's transaction: ref NAME is to be deleted when it
    commits. The store's refs do not change now; the changeset it names stays.

    The ref must exist as the transaction sees it (its staged target if staged, else the
    store's ref): otherwise E_NOT_FOUND. Its baseline is recorded as for `tx set`. Refused like
    `tx set`: no open transaction, a Conflicted one, or the revision bound reached (E_STATE);
    a bad ref name (E_INVALID_ARG); a protected ref (E_FORBIDDEN). Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    name = names.check_ref_name(req.name)
    with ctx.store().write(actor) as w:
        tx = _open_active(w.conn, actor, "stage")
        w.refuse_forbidden_moves([name])  # now, not at the commit
        staged = txs.staged_targets(txs.revisions(w.conn, tx.tx), tx.revision)
        exists = staged[name] if name in staged else queries.ref_target(w.conn, name)
        if exists is None:
            where = "is deleted by a staged revision" if name in staged else "does not exist in the store"
            raise SwarmError(
                "E_NOT_FOUND",
                f"no ref {name} to delete: it {where}",
                details={"ref": name, "tx": tx.tx, "staged": name in staged},
                hint="`swarmctl tx status` shows the staged moves; `swarmctl ref list` lists the store's refs.",
            )
        return _stage(w, tx, name, None)


def tx_status(ctx: Context, req: TxReq) -> TxStatusResult:
    """Show the calling actor's transaction: its state (`Active`, `Conflicted`; `Ready` when
    none is open), the current revision, how many are staged and the bound (`max`), the moves
    a commit would make (`old` is each ref's baseline), `can_undo`/`can_redo`/`can_commit`,
    and `moved`: the staged refs that the store moved after their baseline was recorded, with
    the ops that moved them (a `tx commit` now would fail on them and leave the transaction
    Conflicted, so `can_commit` is false while `moved` is not empty). `history` lists every staged revision; `applied: false` ones can be redone.

    Never writes. Needs --as even though it only reads, because it shows the transaction of
    that actor (E_IDENTITY_REQUIRED). With no open transaction, `max` is the store's bound for
    the next one.
    """
    actor = ctx.require_actor(_WHY)
    with ctx.store().read() as conn:
        tx = txs.open_tx(conn, actor)
        if tx is None:
            return TxStatusResult(
                state="Ready",
                tx=None,
                base_op=None,
                begun_at=None,
                revision=0,
                revisions=0,
                max=txs.max_revisions(conn),
                moves=[],
                can_undo=False,
                can_redo=False,
                can_commit=False,
                moved=[],
                history=[],
            )
        revs = txs.revisions(conn, tx.tx)
        moves = txs.net_moves(conn, tx)
        moved = [TxMoved(*c) for c in _moved(conn, tx, moves)]
        return TxStatusResult(
            state=tx.state,
            tx=tx.tx,
            base_op=tx.base_op,
            begun_at=tx.begun_at,
            revision=tx.revision,
            revisions=len(revs),
            max=tx.max_revisions,
            moves=_ref_moves(moves),
            can_undo=tx.state == "Active" and tx.revision > 0,
            can_redo=tx.state == "Active" and tx.revision < len(revs),
            # A commit now would fail on a ref in `moved`: it can commit only when none moved.
            # ... and only when the store's policy lets this actor move every staged ref.
            can_commit=tx.state == "Active" and bool(moves) and not moved and not _forbidden(conn, actor, moves),
            moved=moved,
            history=[_revision(r, tx.revision) for r in revs],
        )


def tx_undo(ctx: Context, req: TxReq) -> TxUndoResult:
    """Take back the newest applied revision of the calling actor's transaction; `tx redo`
    restores it until a new stage discards it. The store's refs do not change.

    Refused with E_STATE: no open transaction (after `tx commit`, `swarmctl op undo` takes back
    the committed op), a Conflicted one, or nothing left to undo. Needs --as
    (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    with ctx.store().write(actor) as w:
        tx = _open_active(w.conn, actor, "undo")
        revs = txs.revisions(w.conn, tx.tx)
        if tx.revision == 0:
            raise SwarmError(
                "E_STATE",
                f"nothing to undo in tx {tx.tx}: no staged revision is applied",
                details={"tx": tx.tx, "revision": 0, "revisions": len(revs)},
                hint="`swarmctl tx redo` re-applies an undone revision; `swarmctl tx status` shows them."
                if revs
                else "Stage a move with `swarmctl tx set NAME TARGET` or `swarmctl tx delete NAME`.",
            )
        txs.set_revision(w.conn, tx.tx, tx.revision - 1)
        tx = tx._replace(revision=tx.revision - 1)
        moves = txs.net_moves(w.conn, tx)
    return TxUndoResult(
        tx=tx.tx,
        undone=_revision(revs[tx.revision], tx.revision),
        revision=tx.revision,
        revisions=len(revs),
        moves=_ref_moves(moves),
        can_undo=tx.revision > 0,
        can_redo=True,
    )


def tx_redo(ctx: Context, req: TxReq) -> TxRedoResult:
    """Re-apply the revision of the calling actor's transaction that `tx undo` took back last.
    The store's refs do not change.

    Refused with E_STATE: no open transaction (a rolled-back transaction's revisions are gone
    and cannot be redone), a Conflicted one, or nothing undone to redo (a stage after an undo
    discards the undone revisions). Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    with ctx.store().write(actor) as w:
        tx = _open_active(w.conn, actor, "redo")
        revs = txs.revisions(w.conn, tx.tx)
        if tx.revision >= len(revs):
            raise SwarmError(
                "E_STATE",
                f"nothing to redo in tx {tx.tx}: revision {tx.revision} is the newest",
                details={"tx": tx.tx, "revision": tx.revision, "revisions": len(revs)},
                hint="Only revisions taken back with `swarmctl tx undo`, and not discarded by a new stage since, can be redone.",
            )
        txs.set_revision(w.conn, tx.tx, tx.revision + 1)
        tx = tx._replace(revision=tx.revision + 1)
        moves = txs.net_moves(w.conn, tx)
    return TxRedoResult(
        tx=tx.tx,
        redone=_revision(revs[tx.revision - 1], tx.revision),
        revision=tx.revision,
        revisions=len(revs),
        moves=_ref_moves(moves),
        can_undo=True,
        can_redo=tx.revision < len(revs),
    )


def tx_commit(ctx: Context, req: TxCommitReq) -> TxCommitResult:
    """Make the calling actor's staged moves as ONE op (kind `tx_commit`): the net effect of the
    applied revisions, one move per ref, each by compare-and-swap against the ref's baseline.
    All of them or none. The transaction then ends; `swarmctl op undo OP` takes the op back
    like any other.

    If a staged ref moved in the store since its baseline: E_CAS_MISMATCH, no ref moves and no
    op is written; the transaction becomes `Conflicted` and stays open (`error.details.conflicts`
    lists each ref with `expected`, `actual` and the ops that `moved_by` it). A Conflicted
    transaction can only be rolled back (`tx rollback`, then re-read the refs and begin again).

    Refused with E_STATE: no open transaction, a Conflicted one, or nothing to commit (no
    applied revision changes a ref; end it with `tx rollback`). A staged ref the store's policy
    protects from the caller (the policy changed since it was staged) is E_FORBIDDEN, before
    any conflict; `tx status` says so first (`can_commit` false). Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    conflict: SwarmError | None = None
    with ctx.store().write(actor) as w:
        tx = _open_active(w.conn, actor, "commit")
        moves = txs.net_moves(w.conn, tx)
        if not moves:
            raise SwarmError(
                "E_STATE",
                f"nothing to commit in tx {tx.tx}: no applied revision changes a ref",
                details={"tx": tx.tx, "revision": tx.revision},
                hint="Stage a move with `swarmctl tx set` or `swarmctl tx delete` (or `swarmctl tx redo`), "
                "or end the transaction with `swarmctl tx rollback`.",
            )
        w.refuse_forbidden_moves(m.name for m in moves)  # forbidden wins over a conflict
        moved = _moved(w.conn, tx, moves)
        if moved:
            # Store.write rolls back on an exception: record the state, let it commit, then raise.
            txs.mark_conflicted(w.conn, tx.tx)
            conflict = _conflict_error(tx, moved)
        else:
            description = f"tx {tx.tx}: " + (req.message or _summary(moves))
            op = w.append_op("tx_commit", description, [Move(m.name, m.old, m.new) for m in moves])
            txs.end(w.conn, tx.tx, "Committed", w.at, op)
    if conflict is not None:
        raise conflict
    return TxCommitResult(tx=tx.tx, op=op, description=description, ref_moves=_ref_moves(moves))


def tx_rollback(ctx: Context, req: TxReq) -> TxRollbackResult:
    """Discard the calling actor's open transaction and all its staged revisions, without
    changing any ref. Use this to abandon staged work or to clear a Conflicted transaction; use
    `tx undo`/`tx redo` to step through individual staged revisions instead. Rollback ends the
    transaction, so its revisions cannot be restored with `tx redo`. It cannot undo an earlier
    commit: that is `swarmctl op undo OP`.

    Result `state`: `Ready`, or `OutOfDate` when the transaction was Conflicted (the store moved
    under it): then re-read the refs (`swarmctl ref list`, `swarmctl ref show NAME`) before
    staging again; `hint` says so. With no open transaction: E_STATE, naming the op to undo if
    the actor's last transaction was committed. Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    with ctx.store().write(actor) as w:
        tx = txs.open_tx(w.conn, actor)
        if tx is None:
            raise _no_open_tx(w.conn, actor, "roll back")
        discarded = len(txs.revisions(w.conn, tx.tx))
        moved = [m.name for m in _moved(w.conn, tx, txs.net_moves(w.conn, tx))]
        txs.end(w.conn, tx.tx, "RolledBack", w.at)
    if tx.state != "Conflicted":
        return TxRollbackResult(state="Ready", tx=tx.tx, discarded=discarded, hint=None)
    which = ", ".join(moved) if moved else "the staged refs"
    return TxRollbackResult(
        state="OutOfDate",
        tx=tx.tx,
        discarded=discarded,
        hint=f"The store moved under tx {tx.tx} ({which}): re-read the refs with `swarmctl ref list` "
        "or `swarmctl ref show NAME` before staging again in a new `swarmctl tx begin`.",
    )


def tx_config(ctx: Context, req: TxConfigReq) -> TxConfigResult:
    """Show or change the store's transaction settings. `--max-revisions N` sets the bound on
    staged revisions per transaction (default 20, from 1 to 1000) for transactions begun from
    now on; an open transaction keeps the bound it began with (`tx status` shows it as `max`).
    Changing it needs --as (E_IDENTITY_REQUIRED); showing it does not. A setting, not an op.
    """
    if req.max_revisions is None:
        with ctx.store().read() as conn:
            return TxConfigResult(max_revisions=txs.max_revisions(conn), changed=False)
    value = req.max_revisions
    actor = ctx.require_actor("changing a store setting")
    with ctx.store().write(actor) as w:
        changed = txs.max_revisions(w.conn) != value
        txs.set_max_revisions(w.conn, value)
    return TxConfigResult(max_revisions=value, changed=changed)


# --- helpers ---------------------------------------------------------------------------------


def _open_active(conn, actor: str, doing: str) -> txs.Tx:
    """The actor's open transaction, which must be Active."""
    tx = txs.open_tx(conn, actor)
    if tx is None:
        raise _no_open_tx(conn, actor, doing)
    if tx.state == "Conflicted":
        raise SwarmError(
            "E_STATE",
            f"cannot {doing}: tx {tx.tx} is Conflicted (a staged ref moved in the store since it was staged)",
            details={"tx": tx.tx, "state": tx.state},
            hint="A Conflicted transaction can only be rolled back: `swarmctl tx rollback`, then re-read the "
            "refs and stage again in a new transaction. `swarmctl tx status` shows which refs moved.",
            next=TX_ROLLBACK.call(),
        )
    return tx


def _no_open_tx(conn, actor: str, doing: str) -> SwarmError:
    """E_STATE for a command that needs an open transaction, saying what became of the last one.

    For `tx rollback` and `tx undo` the hint names `op undo`: what was already committed is
    taken back there, and `error.next` is that call when the last transaction was committed.
    """
    from swarmctl.tools.op import UNDO

    last = txs.last_tx(conn, actor)
    message = f"cannot {doing}: {actor} has no open transaction"
    details = {"actor": actor, "last_tx": None, "last_state": None, "op": None}
    hint = "Start one with `swarmctl tx begin`."
    next_call = TX_BEGIN.call() if doing == "stage" else None
    wants_undo = doing in ("roll back", "undo")
    if wants_undo:
        hint = "Nothing is staged. `swarmctl op undo OP` takes back a committed op; `swarmctl tx begin` starts a transaction."
    if last is not None:
        details.update(last_tx=last.tx, last_state=last.state, op=last.op)
    if last is not None and last.state == "RolledBack":
        message += f" (tx {last.tx} was rolled back: its revisions were discarded and cannot be redone)"
    elif last is not None and last.state == "Committed":
        message += f" (tx {last.tx} was committed as op {last.op})"
        undone_by = queries.undo_in_effect(conn, last.op)
        if wants_undo and undone_by is None:
            hint = f"What tx {last.tx} committed is taken back with `swarmctl op undo {last.op}` (compare-and-swap, like any op)."
            next_call = UNDO.call(op=last.op)
        elif wants_undo:
            hint = f"Op {last.op} (tx {last.tx}) was already undone by op {undone_by}. `swarmctl tx begin` starts a transaction."
    return SwarmError("E_STATE", message, details=details, hint=hint, next=next_call)


def _stage(w, tx: txs.Tx, name: str, new: str | None) -> TxStageResult:
    if tx.revision >= tx.max_revisions:
        raise SwarmError(
            "E_STATE",
            f"tx {tx.tx} is at its bound of {tx.max_revisions} staged revisions; nothing was staged",
            details={"tx": tx.tx, "revision": tx.revision, "max": tx.max_revisions},
            hint="Staged history is never dropped to make room: commit with `swarmctl tx commit`, take revisions back "
            "with `swarmctl tx undo`, or roll back. `swarmctl tx config --max-revisions N` raises the bound for "
            "transactions begun later.",
        )
    current = queries.ref_target(w.conn, name)
    dropped = txs.stage(w.conn, tx, name, new, w.at, current, queries.newest_op(w.conn))
    baseline = txs.baselines(w.conn, tx.tx)[name].old
    return TxStageResult(
        tx=tx.tx,
        revision=tx.revision + 1,
        revisions=tx.revision + 1,
        max=tx.max_revisions,
        name=name,
        old=baseline,
        new=new,
        dropped=dropped,
    )


def _forbidden(conn, actor: str, moves: list[txs.StagedMove]) -> bool:
    """Whether the store's policy forbids `actor` to move one of the staged refs."""
    policy = policies.current(conn)
    return policy is not None and any(rules.may_move(policy, actor, m.name) for m in moves)


def _moved(conn, tx: txs.Tx, moves: list[txs.StagedMove]) -> list[conflicts.Conflict]:
    """The staged refs the store moved after their baseline: what a commit would conflict on."""
    return conflicts.find(conn, moves, since={name: base.op for name, base in txs.baselines(conn, tx.tx).items()})


def _conflict_error(tx: txs.Tx, moved: list[conflicts.Conflict]) -> SwarmError:
    return conflicts.cas_mismatch(
        moved,
        f"cannot commit tx {tx.tx}: {conflicts.listed(moved)} moved in the store since staged; no ref moved and no "
        "op was written",
        details={"tx": tx.tx, "state": "Conflicted"},
        hint="The transaction is now Conflicted and stays open. Discard it with `swarmctl tx rollback`, re-read the "
        "refs, and stage again in a new transaction.",
        next=TX_ROLLBACK.call(),
    )


def _summary(moves: list[txs.StagedMove], shown: int = 3) -> str:
    parts = [
        f"delete {m.name}" if m.new is None else f"set {m.name} to {names.short_id(m.new)}" for m in moves[:shown]
    ]
    if len(moves) > shown:
        parts.append(f"and {len(moves) - shown} more")
    return ", ".join(parts)


def _ref_moves(moves: list[txs.StagedMove]) -> list[RefMove]:
    return [RefMove(m.name, m.old, m.new) for m in moves]


def _revision(rev: txs.Revision, current: int) -> TxRevision:
    return TxRevision(
        revision=rev.revision,
        action="delete" if rev.new is None else "set",
        name=rev.name,
        new=rev.new,
        at=rev.at,
        applied=rev.revision <= current,
    )


# --- registry entries ------------------------------------------------------------------------

# Staging adds a revision but may discard undone ones (the redo branch): not merely additive.
_STAGE = Annotations(read_only=False, destructive=True, idempotent=False)
# Moving through revisions loses nothing: undo and redo take each other back.
_STEP = Annotations(read_only=False, destructive=False, idempotent=False)

TX_BEGIN = Tool(
    name="tx_begin",
    cli=("tx", "begin"),
    title="Begin a transaction",
    summary="Open a transaction for staging ref moves.",
    request=TxReq,
    result=TxBeginResult,
    run=tx_begin,
    annotations=Annotations(read_only=False, destructive=False, idempotent=False),
    mutates=True,
)
TX_SET = Tool(
    name="tx_set",
    cli=("tx", "set"),
    title="Stage a ref move",
    summary="Stage: NAME is to name TARGET when the transaction commits.",
    request=TxSetReq,
    result=TxStageResult,
    run=tx_set,
    annotations=_STAGE,
    mutates=True,
)
TX_DELETE = Tool(
    name="tx_delete",
    cli=("tx", "delete"),
    title="Stage a ref delete",
    summary="Stage: NAME is to be deleted when the transaction commits.",
    request=TxDeleteReq,
    result=TxStageResult,
    run=tx_delete,
    annotations=_STAGE,
    mutates=True,
)
TX_STATUS = Tool(
    name="tx_status",
    cli=("tx", "status"),
    title="Transaction status",
    summary="Show your transaction: staged moves, revisions, conflicts.",
    request=TxReq,
    result=TxStatusResult,
    run=tx_status,
    annotations=READ,
    mutates=False,
)
TX_UNDO = Tool(
    name="tx_undo",
    cli=("tx", "undo"),
    title="Undo a staged revision",
    summary="Take back the newest applied staged revision.",
    request=TxReq,
    result=TxUndoResult,
    run=tx_undo,
    annotations=_STEP,
    mutates=True,
)
TX_REDO = Tool(
    name="tx_redo",
    cli=("tx", "redo"),
    title="Redo a staged revision",
    summary="Re-apply the staged revision undone last.",
    request=TxReq,
    result=TxRedoResult,
    run=tx_redo,
    annotations=_STEP,
    mutates=True,
)
TX_COMMIT = Tool(
    name="tx_commit",
    cli=("tx", "commit"),
    title="Commit a transaction",
    summary="Make the staged moves as one op, by compare-and-swap.",
    request=TxCommitReq,
    result=TxCommitResult,
    run=tx_commit,
    annotations=Annotations(read_only=False, destructive=True, idempotent=False),
    mutates=True,
)
TX_ROLLBACK = Tool(
    name="tx_rollback",
    cli=("tx", "rollback"),
    title="Transaction Rollback",
    summary="Discard the transaction and its staged revisions; no ref changes.",
    request=TxReq,
    result=TxRollbackResult,
    run=tx_rollback,
    annotations=Annotations(read_only=False, destructive=True, idempotent=False),
    mutates=True,
)
TX_CONFIG = Tool(
    name="tx_config",
    cli=("tx", "config"),
    title="Transaction settings",
    summary="Show or set the store's bound on staged revisions.",
    request=TxConfigReq,
    result=TxConfigResult,
    run=tx_config,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    mutates=True,
)

TOOLS = [TX_BEGIN, TX_SET, TX_DELETE, TX_STATUS, TX_UNDO, TX_REDO, TX_COMMIT, TX_ROLLBACK, TX_CONFIG]
