"""What staging means, for the tx tools (__init__): the actor's open transaction, staging one
move under the revision bound, what a commit would conflict on, and how staged moves and
revisions are shown. The rows are swarmctl/store/txs.py's."""

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.envelope import SwarmError
from swarmctl.store import Conn, Writer, conflicts, policies, queries, txs
from swarmctl.tools.common import RefMove
from swarmctl.tools.tx import calls
from swarmctl.tools.tx.models import TxRevision, TxStageResult


def open_active(conn: Conn, actor: str, doing: str) -> txs.Tx:
    """The actor's open transaction, which must be Active."""
    tx = txs.open_tx(conn, actor)
    if tx is None:
        raise no_open_tx(conn, actor, doing)
    if tx.state == "Conflicted":
        raise SwarmError(
            "E_STATE",
            f"cannot {doing}: tx {tx.tx} is Conflicted (a staged ref moved in the store since it was staged)",
            details={"tx": tx.tx, "state": tx.state},
            hint="A Conflicted transaction can only be rolled back: `swarmctl tx rollback`, then re-read the "
            "refs and stage again in a new transaction. `swarmctl tx status` shows which refs moved.",
            next=calls.ROLLBACK.call(),
        )
    return tx


def no_open_tx(conn: Conn, actor: str, doing: str) -> SwarmError:
    """E_STATE for a command that needs an open transaction, saying what became of the last one.

    For `tx rollback` and `tx undo` the hint names `op undo`: what was already committed is
    taken back there, and `error.next` is that call when the last transaction was committed.
    """
    from swarmctl.tools.undo import UNDO

    last = txs.last_tx(conn, actor)
    message = f"cannot {doing}: {actor} has no open transaction"
    details = {"actor": actor, "last_tx": None, "last_state": None, "op": None}
    hint = "Start one with `swarmctl tx begin`."
    next_call = calls.BEGIN.call() if doing == "stage" else None
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


def stage(w: Writer, tx: txs.Tx, name: str, new: str | None) -> TxStageResult:
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


def forbidden(conn: Conn, actor: str, moves: list[txs.StagedMove]) -> bool:
    """Whether the store's policy forbids `actor` to move one of the staged refs."""
    policy = policies.current(conn)
    return policy is not None and any(rules.may_move(policy, actor, m.name) for m in moves)


def moved_since_staged(conn: Conn, tx: txs.Tx, moves: list[txs.StagedMove]) -> list[conflicts.Conflict]:
    """The staged refs the store moved after their baseline: what a commit would conflict on."""
    return conflicts.find(conn, moves, since={name: base.op for name, base in txs.baselines(conn, tx.tx).items()})


def conflict_error(tx: txs.Tx, moved: list[conflicts.Conflict]) -> SwarmError:
    return conflicts.cas_mismatch(
        moved,
        f"cannot commit tx {tx.tx}: {conflicts.listed(moved)} moved in the store since staged; no ref moved and no "
        "op was written",
        details={"tx": tx.tx, "state": "Conflicted"},
        hint="The transaction is now Conflicted and stays open. Discard it with `swarmctl tx rollback`, re-read the "
        "refs, and stage again in a new transaction.",
        next=calls.ROLLBACK.call(),
    )


def summary(moves: list[txs.StagedMove], shown: int = 3) -> str:
    parts = [
        f"delete {m.name}" if m.new is None else f"set {m.name} to {names.short_id(m.new)}" for m in moves[:shown]
    ]
    if len(moves) > shown:
        parts.append(f"and {len(moves) - shown} more")
    return ", ".join(parts)


def ref_moves(moves: list[txs.StagedMove]) -> list[RefMove]:
    return [RefMove(m.name, m.old, m.new) for m in moves]


def revision_view(rev: txs.Revision, current: int) -> TxRevision:
    return TxRevision(
        revision=rev.revision,
        action="delete" if rev.new is None else "set",
        name=rev.name,
        new=rev.new,
        at=rev.at,
        applied=rev.revision <= current,
    )
