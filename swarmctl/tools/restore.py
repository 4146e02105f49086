"""`op restore OP`: put refs back to what they named right after op OP, as one op (kind
`restore`). Like `workflow rollback`, it previews by default; the confirmation acts only if the
store's newest op is still the one the preview saw, so it does exactly what was previewed."""

from __future__ import annotations

import shlex
from typing import Any, Literal

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Annotations, Cli, Tool, arg, request_type, result_type, Example, Call
from swarmctl.store import Conn, Move, conflicts, policies, queries, reverts
from swarmctl.tools.common import OpNumber, OpSpec, resolve_op
from swarmctl.tools.undo import UndoMove

# How many of the ops since the preview an E_CAS_MISMATCH names (with their total count).
_OPS_SINCE_SHOWN = 100


@request_type
class OpRestoreReq:
    """`op_restore` (CLI `op restore`): put refs back to what they named right after an op."""

    op: OpSpec = arg(
        description="The op to restore to: its number in the op log, or `@` for the newest op by the calling actor.",
        cli=Cli(positional=True, metavar="OP", complete="ops"),
    )
    ref: list[str] = arg(
        default_factory=list,
        description="Restore only this ref (repeatable); default: every ref.",
        cli=Cli(metavar="NAME", complete="refs"),
    )
    confirm: bool = arg(False, description="Act. Without it: only preview the moves and change nothing.")
    expect_head: OpNumber | None = arg(
        None,
        description="With --confirm: the store's newest op the preview showed (`head`); refused (E_CAS_MISMATCH) if the store moved since.",
        cli=Cli(metavar="N"),
    )


@result_type
class RestoreResult:
    """A preview (`action: preview`, `op` null) or a restore (`action: restored`). `head` is the
    store's newest op the moves were worked out at; after a preview, `next` is the exact call
    that confirms it."""

    restored_to: int
    action: Literal["preview", "restored"]
    head: int
    op: int | None
    ref_moves: list[UndoMove]
    hint: str
    next: dict[str, Any] | None


def op_restore(ctx: Context, req: OpRestoreReq) -> RestoreResult:
    """Put every ref back to what it named right after op OP, as one op (kind `restore`): refs
    created since are deleted, refs deleted since are recreated. `--ref NAME` (repeatable)
    limits it to those refs.

    Without `--confirm` it only previews: the moves, and `head`, the store's newest op now;
    `next` is the exact call that confirms: `op restore OP --confirm --expect-head N`. Confirmed,
    it acts only if the store's newest op is still N, else E_CAS_MISMATCH naming the ops since
    (`error.details.ops_since`) and the refs they moved, nothing written: preview again.
    `--confirm` needs `--expect-head` (E_INVALID_ARG). A ref the store's policy protects from
    the caller is E_FORBIDDEN, in the preview too and before any conflict. Nothing to restore is E_NOTHING_TO_UNDO; a `--ref` that
    never existed is E_NOT_FOUND. `op undo` of the restore takes it back. Changesets are never
    removed.
    """
    if req.confirm != (req.expect_head is not None):
        raise SwarmError(
            "E_INVALID_ARG",
            "--confirm and --expect-head go together: confirm the preview whose head you saw",
            details={"confirm": req.confirm, "expect_head": req.expect_head},
            hint="Preview first (without --confirm); its `next` is the exact call that confirms it.",
        )
    refs = list(dict.fromkeys(names.check_ref_name(n) for n in req.ref))
    actor = ctx.require_actor("a restore is made as someone, so even a preview needs one")
    store = ctx.store()
    if not req.confirm:
        with store.read() as conn:
            target = resolve_op(ctx, conn, req.op)
            head = queries.newest_op(conn) or 0
            moves = _moves(conn, target, refs)
            _refuse_forbidden(conn, actor, moves)  # the preview predicts it
        return _preview(target, refs, head, moves, actor, names.now())
    with store.write(actor) as w:
        target = resolve_op(ctx, w.conn, req.op)
        head = queries.newest_op(w.conn) or 0
        _refuse_forbidden(w.conn, actor, _moves(w.conn, target, refs))  # forbidden wins over a conflict
        if head != req.expect_head:
            raise _moved_since(w.conn, target, refs, req.expect_head, head)
        moves = _moves(w.conn, target, refs)
        if not moves:
            raise _nothing_to_restore(target, refs)
        which = f"{', '.join(refs)}" if refs else "refs"
        op = w.append_op("restore", f"restore {which} to op {target}", moves)
        at = w.at
    return RestoreResult(
        restored_to=target,
        action="restored",
        head=head,
        op=op,
        ref_moves=[UndoMove(m.name, m.new, actor, at) for m in moves],
        hint=f"Restored {len(moves)} ref(s) to what they named after op {target}; `swarmctl op undo {op}` takes it back.",
        next=None,
    )


def _refuse_forbidden(conn: Conn, actor: str, moves: list[Move]) -> None:
    policy = policies.current(conn)
    for m in moves if policy is not None else []:
        rules.refuse(rules.may_move(policy, actor, m.name))


def _moves(conn: Conn, target: int, refs: list[str]) -> list[Move]:
    """The moves that put each ref (of `refs`; none: every ref moved since) back as after `target`."""
    for name in refs:
        if not reverts.ref_ever_moved(conn, name):
            raise SwarmError(
                "E_NOT_FOUND",
                f"no ref {name} has ever existed in this store",
                details={"ref": name},
                hint="`swarmctl ref list` lists the refs; `swarmctl op log --ref NAME` a ref's history.",
            )
    moves = []
    for name in refs or reverts.refs_moved_after(conn, target):
        then, now = reverts.ref_target_after(conn, name, target), queries.ref_target(conn, name)
        if then != now:
            moves.append(Move(name, old=now, new=then))
    return moves


def _preview(target: int, refs: list[str], head: int, moves: list[Move], actor: str, at: str) -> RestoreResult:
    if not moves:
        hint = f"Nothing to restore: every ref{'' if not refs else ' named'} already names what it named after op {target}."
        confirm = None
    else:
        confirm = _call(target, refs, confirm=True, expect_head=head)
        hint = (
            f"Nothing was changed. {len(moves)} ref(s) would move. If that is what you want, run "
            f"`{shlex.join(confirm['argv'])}`; it is refused if the store moves before then."
        )
    return RestoreResult(
        restored_to=target,
        action="preview",
        head=head,
        op=None,
        ref_moves=[UndoMove(m.name, m.new, actor, at) for m in moves],
        hint=hint,
        next=confirm,
    )


def _call(target: int, refs: list[str], **flags: Any) -> dict[str, Any]:
    return OP_RESTORE.call(op=target, **({"ref": refs} if refs else {}), **flags)


# --- errors ------------------------------------------------------------------------------------


def _moved_since(conn: Conn, target: int, refs: list[str], expected: int, head: int) -> SwarmError:
    """E_CAS_MISMATCH: the store's newest op is not the one the preview saw."""
    since = reverts.ops_after(conn, expected, _OPS_SINCE_SHOWN) if expected < head else []
    moved = [n for n in reverts.refs_moved_after(conn, expected) if not refs or n in refs] if expected < head else []
    # A ref moved since and back (made and deleted, or set away and back) is no conflict: it
    # names what the preview saw.
    found = [
        conflicts.Conflict(n, was, now, queries.moves_after(conn, n, expected))
        for n in moved
        if (was := reverts.ref_target_after(conn, n, expected)) != (now := queries.ref_target(conn, n))
    ]
    ops = f"op(s) {', '.join(map(str, since))}{', ...' if head - expected > len(since) else ''}" if since else "no op"
    said = (f"the store moved since the preview: its newest op is {head}, not {expected} ({ops} since)" if expected < head
            else f"--expect-head {expected} is no op of this store yet: its newest op is {head}, so no preview showed it")
    return conflicts.cas_mismatch(
        found,
        f"{said}; nothing was written",
        details={"restored_to": target, "expect_head": expected, "head": head, "ops_since": since, "ops_since_count": max(head - expected, 0)},
        hint=f"Every ref already names what it named after op {target} (a confirmation that already ran?): nothing more to do."
        if not _moves(conn, target, refs)
        else "Preview again, check the moves, then confirm with the new head.",
        next=_call(target, refs),
    )


def _nothing_to_restore(target: int, refs: list[str]) -> SwarmError:
    return SwarmError(
        "E_NOTHING_TO_UNDO",
        f"nothing to restore: every ref{' named' if refs else ''} already names what it named after op {target}",
        details={"restored_to": target, "refs": refs},
        hint="Nothing was written.",
    )


# --- registry entry ----------------------------------------------------------------------------

OP_RESTORE = Tool(
    name="op_restore",
    cli=("op", "restore"),
    title="Restore refs to an op",
    summary="Put refs back to what they named right after an op (a preview, then --confirm).",
    request=OpRestoreReq,
    result=RestoreResult,
    run=op_restore,
    # A second confirmation of the same preview is refused (the head moved): no further effect.
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    mutates=True,
)

TOOLS = [OP_RESTORE]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "op_restore": (
        # The preview: what putting the refs back as they were after op 4 would move, and the confirm call.
        Example(("op", "restore", "4"), {"op": 4}, caption="Preview putting every ref back as it was right after op 4."),
        Example(
            ("op", "restore", "4", "--confirm", "--expect-head", "6"),
            {"op": 4, "confirm": True, "expect_head": 6},
            caption="Do it, if op 6 is still the newest op (as the preview saw).",
        ),
        Example(  # op 7 since the preview: E_CAS_MISMATCH
            ("op", "restore", "4", "--confirm", "--expect-head", "6"),
            {"op": 4, "confirm": True, "expect_head": 6},
            outcome="E_CAS_MISMATCH",
            setup=(Call("changeset_create", {"message": "Hotfix on v1", "ref": "release/v1"}),),
        ),
        # release/v1 before it existed: deleted
        Example(("op", "restore", "2", "--ref", "release/v1"), {"op": 2, "ref": ["release/v1"]}),
    ),
}
