"""Staged transactions: `tx begin`, `tx set`, `tx delete`, `tx status`, `tx undo`, `tx redo`,
`tx commit`, `tx rollback`, and `tx config` for the store's bound on revisions.

A transaction stages ref moves without touching the store's refs, then commits them as one op
(kind `tx_commit`) by compare-and-swap against each ref's baseline, or is rolled back. It lives
in the store (each CLI call is a new process), one open transaction per actor per store, so
every tx command needs an identity: the transaction is the calling actor's. The rows are in
swarmctl/store/txs.py; beside this file are the request and result types (models.py), what
staging means (staging.py: the open transaction, the revision bound, conflicts) and each tool's
address (calls.py), on which the registry entries at the end are built.
"""

from swarmctl import names
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations
from swarmctl.store import Move, queries, txs
from swarmctl.tools.common import resolve_changeset
from swarmctl.tools.tx.examples import EXAMPLES  # noqa: F401  (read by registry.examples)
from swarmctl.tools.tx import calls, staging
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
    TxRollbackResult,
    TxSetReq,
    TxStageResult,
    TxStatusResult,
    TxUndoResult,
)

# Why every tx command, `tx status` too, needs --as: E_IDENTITY_REQUIRED says so.
_WHY = "every tx command, tx status too, acts on the calling actor's own transaction"

# --- the work --------------------------------------------------------------------------------


def _max_revisions(conn) -> int:
    """The store's bound; one no command could have set is E_STORE_CORRUPT, saying what sets it right."""
    try:
        return txs.max_revisions(conn)
    except SwarmError as exc:
        exc.hint = "Nothing was written. `swarmctl tx config --max-revisions N` sets it right."
        raise


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
                next=calls.STATUS.call(),
            )
        base_op, limit = queries.newest_op(w.conn), _max_revisions(w.conn)
        tx = txs.begin(w.conn, actor, base_op, limit, w.at)
    return TxBeginResult(tx=tx, state="Active", base_op=base_op, max=limit, begun_at=w.at)


def tx_set(ctx: Context, req: TxSetReq) -> TxStageResult:
    """Stage one revision in the calling actor's transaction: ref NAME is to name TARGET when
    it commits. The store's refs do not change now. TARGET may be a changeset id, a unique
    prefix of one, or a ref name (resolved now).

    The first time a ref is staged, what it names in the store is recorded as its baseline
    (`old`; null if it does not exist): the commit moves it only if it still names that. A
    stage after `tx undo` discards the undone revisions (`dropped` says how many), and the
    baseline of a ref only they staged: staged again, it is recorded anew.

    Refused: no open transaction, a Conflicted one, or the revision bound reached (E_STATE;
    nothing is ever dropped to make room); a bad ref name (E_INVALID_ARG); an unknown target
    (E_NOT_FOUND); a ref the store's policy protects from the caller (E_FORBIDDEN, now rather
    than at the commit). Needs --as (E_IDENTITY_REQUIRED).
    """
    actor = ctx.require_actor(_WHY)
    name = names.check_new_ref_name(req.name)
    with ctx.store().write(actor) as w:
        tx = staging.open_active(w.conn, actor, "stage")
        w.refuse_forbidden_moves([name])  # now, not at the commit
        new = resolve_changeset(ctx, w.conn, req.target)
        return staging.stage(w, tx, name, new)


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
        tx = staging.open_active(w.conn, actor, "stage")
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
        return staging.stage(w, tx, name, None)


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
                max=_max_revisions(conn),
                moves=[],
                can_undo=False,
                can_redo=False,
                can_commit=False,
                moved=[],
                history=[],
            )
        revs = txs.revisions(conn, tx.tx)
        moves = txs.net_moves(conn, tx)
        moved = [TxMoved(*c) for c in staging.moved_since_staged(conn, tx, moves)]
        return TxStatusResult(
            state=tx.state,
            tx=tx.tx,
            base_op=tx.base_op,
            begun_at=tx.begun_at,
            revision=tx.revision,
            revisions=len(revs),
            max=tx.max_revisions,
            moves=staging.ref_moves(moves),
            can_undo=tx.state == "Active" and tx.revision > 0,
            can_redo=tx.state == "Active" and tx.revision < len(revs),
            # A commit now would fail on a ref in `moved`: it can commit only when none moved.
            # ... and only when the store's policy lets this actor move every staged ref.
            can_commit=tx.state == "Active" and bool(moves) and not moved and not staging.forbidden(conn, actor, moves),
            moved=moved,
            history=[staging.revision_view(r, tx.revision) for r in revs],
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
        tx = staging.open_active(w.conn, actor, "undo")
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
        undone=staging.revision_view(revs[tx.revision], tx.revision),
        revision=tx.revision,
        revisions=len(revs),
        moves=staging.ref_moves(moves),
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
        tx = staging.open_active(w.conn, actor, "redo")
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
        redone=staging.revision_view(revs[tx.revision - 1], tx.revision),
        revision=tx.revision,
        revisions=len(revs),
        moves=staging.ref_moves(moves),
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
        tx = staging.open_active(w.conn, actor, "commit")
        moves = txs.net_moves(w.conn, tx)
        if not moves:
            raise SwarmError(
                "E_STATE",
                f"nothing to commit in tx {tx.tx}: no applied revision changes a ref",
                details={"tx": tx.tx, "revision": tx.revision},
                hint="Stage a move with `swarmctl tx set NAME TARGET` or `swarmctl tx delete NAME` (or `swarmctl tx redo`), "
                "or end the transaction with `swarmctl tx rollback`.",
            )
        w.refuse_forbidden_moves(m.name for m in moves)  # forbidden wins over a conflict
        moved = staging.moved_since_staged(w.conn, tx, moves)
        if moved:
            # Store.write rolls back on an exception: record the state, let it commit, then raise.
            txs.mark_conflicted(w.conn, tx.tx)
            conflict = staging.conflict_error(tx, moved)
        else:
            description = f"tx {tx.tx}: " + (names.one_line(req.message or "") or staging.summary(moves))
            op = w.append_op("tx_commit", description, [Move(m.name, m.old, m.new) for m in moves])
            txs.end(w.conn, tx.tx, "Committed", w.at, op)
    if conflict is not None:
        raise conflict
    return TxCommitResult(tx=tx.tx, op=op, description=description, ref_moves=staging.ref_moves(moves))


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
            raise staging.no_open_tx(w.conn, actor, "roll back")
        discarded = len(txs.revisions(w.conn, tx.tx))
        moved = [m.name for m in staging.moved_since_staged(w.conn, tx, txs.net_moves(w.conn, tx))]
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
    Changing it needs --as (E_IDENTITY_REQUIRED); showing it does not. A setting, not an op:
    once the store has a policy, only its admins change it (E_FORBIDDEN), as they alone change
    the policy, for it binds every actor's transactions.
    """
    if req.max_revisions is None:
        with ctx.store().read() as conn:
            return TxConfigResult(max_revisions=_max_revisions(conn), changed=False)
    value = req.max_revisions
    actor = ctx.require_actor("changing a store setting")
    with ctx.store().write(actor) as w:
        from swarmctl import policy as rules  # here: reading the setting needs no rules

        rules.refuse(rules.may_admin(w.policy, actor, "change a store setting"))
        changed = txs.stored_max_revisions(w.conn) != str(value)  # a damaged value is set right too
        txs.set_max_revisions(w.conn, value)
    return TxConfigResult(max_revisions=value, changed=changed)


# --- registry entries ------------------------------------------------------------------------

# Staging adds a revision but may discard undone ones (the redo branch): not merely additive.
_STAGE = Annotations(read_only=False, destructive=True, idempotent=False)
# Moving through revisions loses nothing: undo and redo take each other back.
_STEP = Annotations(read_only=False, destructive=False, idempotent=False)
# Beginning adds a transaction and changes no ref; committing and rolling back end one for good.
_BEGIN = Annotations(read_only=False, destructive=False, idempotent=False)
_END = Annotations(read_only=False, destructive=True, idempotent=False)
_SETTING = Annotations(read_only=False, destructive=False, idempotent=True)

# One entry a tool: its address (calls.py: command, request), the function (its result type is
# the one it returns), what it does to the store, its title and its one-line summary.
TOOLS = [
    calls.BEGIN.tool(tx_begin, _BEGIN, "Begin a transaction", "Open a transaction for staging ref moves."),
    calls.SET.tool(tx_set, _STAGE, "Stage a ref move", "Stage: NAME is to name TARGET when the transaction commits."),
    calls.DELETE.tool(tx_delete, _STAGE, "Stage a ref delete", "Stage: NAME is to be deleted when the transaction commits."),
    calls.STATUS.tool(tx_status, READ, "Transaction status", "Show your transaction: staged moves, revisions, conflicts."),
    calls.UNDO.tool(tx_undo, _STEP, "Undo a staged revision", "Take back the newest applied staged revision."),
    calls.REDO.tool(tx_redo, _STEP, "Redo a staged revision", "Re-apply the staged revision undone last."),
    calls.COMMIT.tool(tx_commit, _END, "Commit a transaction", "Make the staged moves as one op, by compare-and-swap."),
    calls.ROLLBACK.tool(
        tx_rollback, _END, "Transaction Rollback", "Discard the transaction and its staged revisions; no ref changes."
    ),
    calls.CONFIG.tool(tx_config, _SETTING, "Transaction settings", "Show or set the store's bound on staged revisions."),
]
