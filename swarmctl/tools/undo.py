"""`op undo`: move every ref an operation moved back, by compare-and-swap.

A module of its own, beside op.py (registry.AREAS lists both under `op`), so that `op log` and
`op show`, the commonest reads, do not build the undo's types at every start (bench/core.py,
start-up), nor `op undo` the log's. Other tools that take back store effects (revert,
restore, workflow rollback, a transaction's undo) call `undo_in` and `plan_undo`.

Why this module is long: what an undo takes back differs by the op (ref moves, a change of the
policy, a token's creation), and each kind's rules (compare-and-swap, the policy, what comes
first and whether the caller may do it, the candidates completion offers) are kept here, one
place for what `op undo` means.
"""

from typing import Any, Callable, Mapping

from swarmctl import names
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Annotations, Call, Example, Tool, arg, request_type, result_type
from swarmctl.store import Conn, Move, Writer, conflicts, policies, queries, records, reverts, tokens
from swarmctl.tools.common import ADMINS_POLICY, SET_AGENTS, SET_PROTECT, OpSpec, op_arg, resolve_op


# --- result types ----------------------------------------------------------------------------


@result_type
class UndoMove:
    name: str
    new: str | None
    actor: str
    at: str


@result_type
class UndoResult:
    undone: int
    op: int | None
    ref_moves: list[UndoMove]
    already_applied: bool


# --- the request ------------------------------------------------------------------------------


@request_type
class UndoReq:
    """`undo` (CLI `op undo`): restore every ref an operation moved to what it named before, by
    compare-and-swap, in one transaction: all of them or none. Changesets are never removed."""

    op: OpSpec = op_arg("The operation to undo", complete="undoable_ops")
    dry_run: bool = arg(False, description="Compute the result and any conflicts; write nothing.")


# --- the work --------------------------------------------------------------------------------


def undo(ctx: Context, req: UndoReq) -> UndoResult:
    """Move every ref an operation moved back to what it named before, by compare-and-swap in
    one transaction: all of them or none. A ref the op created is deleted; a ref it deleted is
    recreated.

    A ref moved since stops it (E_CAS_MISMATCH, nothing written): `error.details.conflicts`
    lists each ref with what was expected, what is there and the later ops that moved it, and
    `error.next` names the later op to undo first. Run again, an undo is a replay
    (`already_applied`, the op of the undo that did it, nothing written) when every ref still
    names what that undo left it naming; a ref moved after the undo is E_CAS_MISMATCH, with
    `details.undone_by` and the ops that moved it, never a report of a restore that is not
    there. An op that moved no
    ref gives E_NOTHING_TO_UNDO. Undoing an undo redoes the original moves. `@` names the newest
    op by the calling actor, so one agent's undo never takes back another's work by accident.
    `--dry-run` computes the same result and conflicts and writes nothing. Changesets are never
    removed. The undo of a `token create` revokes the token; a revocation is final, so the undo
    of a `token revoke` (or of that undo) is E_REFUSED.

    The store's policy may forbid it (E_FORBIDDEN, before any conflict, in a dry run too): a
    ref protected from the caller, or an op of another actor (`[undo] others`). The undo of a
    `policy_set` (or of the undo of one) puts back the policy before it: admins only, and
    E_CAS_MISMATCH when the policy changed since (`error.next` undoes that change first).
    """
    actor = ctx.require_actor("an undo is made as someone, so even a --dry-run needs one") if req.dry_run else ctx.require_actor()
    store = ctx.store()
    if req.dry_run:
        with store.read() as conn:
            return plan_undo(conn, resolve_op(ctx, conn, req.op), actor, names.now())
    with store.write(actor) as w:
        return undo_in(w, resolve_op(ctx, w.conn, req.op))


def plan_undo(conn: Conn, target: int, actor: str, at: str, refs_now: Mapping[str, str | None] | None = None) -> UndoResult:
    """What undoing `target` would do now, writing nothing (`op` is null unless a replay).
    `refs_now`: what refs will name by then, where that differs from the store (a rollback's
    preview: what the undos before this one in the same rollback leave them naming).

    Raises what the undo itself would: E_NOTHING_TO_UNDO, or E_CAS_MISMATCH with the conflicts.
    """
    return _undo(conn, target, actor, at, writer=None, refs_now=refs_now)


def undo_in(w: Writer, target: int, *, kind: str = "undo", description: str | None = None) -> UndoResult:
    """Undo `target` inside the write transaction `w`, appending the undo op (or finding the
    undo already in effect: a replay). Other tools that take back store effects call this."""
    return _undo(w.conn, target, w.actor, w.at, writer=w, kind=kind, description=description)


def _undo(
    conn: Conn,
    target: int,
    actor: str,
    at: str,
    *,
    writer: Writer | None,
    kind: str = "undo",
    description: str | None = None,
    refs_now: Mapping[str, str | None] | None = None,
) -> UndoResult:
    prior = queries.undo_in_effect(conn, target)
    record = records.op_records(conn, [target])[0]
    if prior is not None:
        if policies.made_by(conn, target) is not None:
            _check_policy_still_undone(conn, target, prior)
        done = records.op_records(conn, [prior])[0]
        # A revert that took `target` back moved other ops' refs too: only `target`'s are its undo.
        moved = {m.name for m in record.ref_moves}
        undone_moves = [m for m in done.ref_moves if m.name in moved]
        _check_still_undone(conn, target, prior, _left_by(conn, prior, record.ref_moves, undone_moves), refs_now, actor)
        return UndoResult(
            undone=target,
            op=prior,
            ref_moves=[UndoMove(m.name, m.new, done.actor, done.at) for m in undone_moves],
            already_applied=True,
        )
    if record.kind in ("token_create", "token_revoke") or _undid_token_create(conn, record):
        return _undo_token(conn, target, record, actor, writer=writer, description=description)
    if policies.made_by(conn, target) is not None:
        return _undo_policy(conn, target, actor, writer=writer, description=description)
    if not record.ref_moves:
        raise SwarmError(
            "E_NOTHING_TO_UNDO",
            f"op {target} ({record.kind}: {record.description}) moved no ref, so there is nothing to undo",
            details={"op": target, "kind": record.kind},
            hint="Changesets are never removed; only ref moves are undone.",
        )
    moves = [Move(m.name, old=m.new, new=m.old) for m in record.ref_moves]
    refuse_forbidden_undo(conn, actor, target, record.actor, [m.name for m in moves])
    _check_unmoved(conn, target, moves, refs_now, actor)
    op = None
    if writer is not None:
        op = writer.append_op(kind, description or f"undo op {target}: {record.description}", moves, undoes=target)
    return UndoResult(
        undone=target,
        op=op,
        ref_moves=[UndoMove(m.name, m.new, actor, at) for m in moves],
        already_applied=False,
    )


def undoable(conn: Conn, ops: list[int]) -> set[int]:
    """Those of `ops` an undo would take back now, as `_undo` decides (shell completion's
    candidates for `op undo`): an op that moved a ref, changed the policy, or made a token not
    revoked since (an expired one too: its undo revokes it); not one taken back already (its
    undo would be a replay), nor one that moved nothing (E_NOTHING_TO_UNDO) or revoked a token
    (final). Whether the refs are still as it left them, and whether the actor may, is the
    undo's to say."""
    taken_back = queries.undos_in_effect(conn, ops)
    found = queries.moved_refs(conn, ops)
    others = [op for op in ops if op not in found and op not in taken_back]
    for record in records.op_records(conn, others) if others else []:
        if record.kind == "token_create":
            token = tokens.get(conn, record.op)
            if token is not None and token.revoked_at is None:
                found.add(record.op)
        elif policies.made_by(conn, record.op) is not None:  # as `_undo` asks it, of any op
            found.add(record.op)
    return found.difference(taken_back)


def refuse_forbidden_undo(conn: Conn, actor: str, target: int, op_actor: str, refs: list[str]) -> None:
    """E_FORBIDDEN if the store's policy forbids `actor` to take back op `target` (made by
    `op_actor`) or to move its refs back; asked before any compare-and-swap, so forbidden wins
    over a conflict, and by a dry run and a rollback preview alike."""
    policy = policies.current(conn)
    if policy is None:
        return
    from swarmctl import policy as rules  # here: a store without a policy never needs its rules

    rules.refuse(rules.may_undo(policy, actor, target, op_actor))
    for ref in refs:
        rules.refuse(rules.may_move(policy, actor, ref))


def _undo_policy(
    conn: Conn, target: int, actor: str, *, writer: Writer | None, description: str | None
) -> UndoResult:
    """The undo of an op that changed the policy (a `policy_set`, or the undo of one) puts back
    the policy before it: admins only, and by compare-and-swap on the policy's version (a later
    change of the policy stops it, unless it was taken back since)."""
    from swarmctl import policy as rules

    rules.refuse(rules.may_admin(policies.current(conn), actor, f"undo op {target}, a change of the policy"))
    # The policy must still be what `target` made it (a later change undone since is no change).
    _refuse_policy_changed(
        conn, target, {"op": target},
        lambda later: f"cannot undo op {target}: the policy was changed since, by op {later}; nothing was written",
        lambda later: f"Undo op {later} first (the latest change of the policy), then undo op {target}.",
    )
    previous = policies.version_before(conn, target)
    op = None
    if writer is not None:
        what = "restore the policy of op" if previous and previous.text else "remove the policy"
        suffix = f" {previous.op}" if previous and previous.text else ""
        op = writer.append_op("undo", description or f"undo op {target}: {what}{suffix}", undoes=target)
        policies.record(writer, op, previous.text if previous else None)
    return UndoResult(undone=target, op=op, ref_moves=[], already_applied=False)


def _policy_made_by(conn: Conn, op: int) -> int:
    """The change of the policy whose version is in force through op `op`'s record: `op` itself,
    or, where `op` was an undo (which put back the version before the change it took back), the
    change that made that version. Its undo is the one to take first: the undo of an undo would
    redo a change taken back, and a caller that follows `next` would go round and round."""
    record = records.op_records(conn, [op])[0]
    while record.kind == "undo" and record.undoes is not None:
        before = policies.version_before(conn, record.undoes)
        if before is None:
            break
        op, record = before.op, records.op_records(conn, [before.op])[0]
    return op


def _check_policy_still_undone(conn: Conn, target: int, prior: int) -> None:
    """A replay of the undo of a policy change reports it only while the policy is what that
    undo left (a later change undone since is no change): else E_CAS_MISMATCH, as for a ref."""
    _refuse_policy_changed(
        conn, prior, {"op": target, "undone_by": prior},
        lambda later: f"op {target} was undone by op {prior}, but the policy was changed since, by op {later}; nothing was written",
        lambda later: f"Undo op {later} first (the latest change of the policy); then op {target} is undone as op {prior} left it.",
    )


def _refuse_policy_changed(
    conn: Conn, made_by: int, details: dict[str, Any], message: Callable[[int | None], str], first: Callable[[int | None], str],
) -> None:
    """E_CAS_MISMATCH unless the policy in force is the one op `made_by` made (as its text: a
    later change undone since is no change), as `_refuse_moved_since` is for refs; `next` is the
    undo of the change of the policy in force."""
    found, made = policies.current_version(conn), policies.made_by(conn, made_by)
    if found is not None and made is not None and found.text == made.text:
        return
    later = _policy_made_by(conn, found.op) if found is not None else None
    raise conflicts.cas_mismatch(
        [],
        message(later),
        details={**details, "policy": {"expected": made_by, "actual": later}},
        hint=first(later),
        next=UNDO.call(op=later) if later is not None else None,
    )


def _undid_token_create(conn: Conn, record: records.OpRow) -> bool:
    """Whether `record` is the undo that revoked a token (its undo would bring the token back)."""
    if record.kind != "undo" or record.undoes is None:
        return False
    return records.op_records(conn, [record.undoes])[0].kind == "token_create"


def _undo_token(
    conn: Conn, target: int, record: records.OpRow, actor: str, *, writer: Writer | None, description: str | None
) -> UndoResult:
    """The undo of a token_create revokes the token; a revocation is final, so the undo of a
    token_revoke (or of the undo that revoked a token) is E_REFUSED. Under a policy it is held
    to the rules `token revoke` is (admins only) and to `[undo] others`, as any undo is: without
    them, anyone could revoke any token, a person's too, by undoing the op that made it."""
    from swarmctl import policy as rules

    policy = policies.current(conn)
    rules.refuse(rules.may_admin(policy, actor, f"undo op {target}, which manages a token"))
    rules.refuse(rules.may_undo(policy, actor, target, record.actor))
    if record.kind != "token_create":
        raise SwarmError(
            "E_REFUSED",
            f"op {target} revoked a token, and a revocation is final",
            details={"op": target, "kind": record.kind},
            hint="Make a new token with `swarmctl token create ACTOR`.",
        )
    token = tokens.get(conn, target)
    if token is not None and token.revoked_at is not None:
        raise SwarmError(
            "E_NOTHING_TO_UNDO",
            f"op {target} made token {target}, which op {token.revoked_op} revoked already; nothing to undo",
            details={"op": target, "kind": record.kind, "revoked_op": token.revoked_op},
        )
    op = None
    if writer is not None:
        op = writer.append_op("undo", description or f"undo op {target}: {record.description} (revoke it)", undoes=target)
        tokens.revoke(writer, target)
    return UndoResult(undone=target, op=op, ref_moves=[], already_applied=False)


def _check_unmoved(
    conn: Conn, target: int, moves: list[Move], refs_now: Mapping[str, str | None] | None = None, actor: str | None = None
) -> None:
    """Every ref must still name what `target` left it naming; else say who moved it since."""
    _refuse_moved_since(
        conn, moves, target, {"op": target}, refs_now, actor,
        lambda names_moved: f"cannot undo op {target}: {names_moved} moved since; nothing was written",
        lambda later, which: f"Undo op {later} first ({which}), then undo op {target}.",
    )


def _left_by(conn: Conn, prior: int, target_moves: list[records.MoveRow], moves: list[records.MoveRow]) -> list[Move]:
    """What the undo `prior` left each ref its target moved naming, as moves from that to
    itself: its own `moves` of them first, then each ref a revert did not move (its target's
    moves of it netted out with others it took back), as the ref was right after it."""
    left = {m.name: m.new for m in moves}
    rest = [n for n in dict.fromkeys(m.name for m in target_moves) if n not in left]
    return [Move(n, old=v, new=v) for n, v in left.items()] + [
        Move(n, old=v, new=v) for n in rest for v in [reverts.ref_target_after(conn, n, prior)]
    ]


def _check_still_undone(
    conn: Conn, target: int, prior: int, left: list[Move], refs_now: Mapping[str, str | None] | None = None,
    actor: str | None = None,
) -> None:
    """A replay reports the undo in effect only if every ref its target moved still names what
    that undo left it naming: a ref moved after the undo is E_CAS_MISMATCH, never a report of a
    restore that is not."""
    _refuse_moved_since(
        conn, left, prior, {"op": target, "undone_by": prior}, refs_now, actor,
        lambda names_moved: f"op {target} was undone by op {prior}, but {names_moved} moved since; nothing was written",
        lambda later, which: f"Undo op {later} first ({which}); then op {target} is undone as op {prior} left it.",
    )


def _refuse_moved_since(
    conn: Conn, expected: list[Move], since: int, details: dict[str, Any], refs_now: Mapping[str, str | None] | None,
    actor: str | None, message: Callable[[str], str], first: Callable[[int, str], str],
) -> None:
    """E_CAS_MISMATCH if a ref of `expected` moved after op `since`: `message` words it from the
    refs' names, `first` the hint from the op to undo first and what it moved (`_first_to_undo`)."""
    found = conflicts.find(conn, expected, since=since, now=refs_now)
    if not found:
        return
    later, which = _first_to_undo(conn, found)
    hint = first(later, which) if later is not None else "Re-read the refs; nothing was written."
    forbidden = forbidden_to(conn, actor, later) if later is not None else None
    if forbidden is not None:  # a `next` the caller may not make is no way on
        hint += f" The store's policy does not let {actor} undo op {later} ({forbidden}): someone it allows must."
    raise conflicts.cas_mismatch(
        found,
        message(conflicts.listed(found)),
        details=details,
        hint=hint,
        next=UNDO.call(op=later) if later is not None and forbidden is None else None,
    )


def forbidden_to(conn: Conn, actor: str | None, op: int) -> str | None:
    """Why the policy forbids `actor` to undo `op` (None: it allows it, or there is no policy)."""
    if actor is None or policies.current(conn) is None:
        return None
    record = records.op_records(conn, [op])[0]
    try:
        refuse_forbidden_undo(conn, actor, op, record.actor, [m.name for m in record.ref_moves])
    except SwarmError as exc:
        return exc.message.removesuffix("; nothing was written")
    return None


def _first_to_undo(conn: Conn, found: list[conflicts.Conflict]) -> tuple[int | None, str]:
    """The op to undo first: the latest of the refs' later moves that is still in effect, and
    which op that is, in words (`the latest op that moved main`, naming the refs it moved).
    A later move taken back since (`op undo`, `op revert`) and the undo that took it back cancel
    out: naming that undo would redo the move, and a caller that follows `next` would go round
    and round (undo, undo of the undo, ...), one op a turn. None: every later move was taken
    back."""
    moved = {op for c in found for op in c.moved_by}
    later = max(moved - queries.cancelling(conn, moved), default=None)
    if later is None:
        return None, ""
    refs = conflicts.listed([c for c in found if later in c.moved_by])
    return later, f"the latest op that moved {refs}" if later == max(moved) else f"the latest op still in effect that moved {refs}"


# --- registry entry --------------------------------------------------------------------------

UNDO = Tool(
    name="undo", cli=("op", "undo"), title="undo", summary="Undo an operation.",
    request=UndoReq, result=UndoResult, run=undo,
    # Not idempotent: `@` names the caller's newest op, which after one undo is that undo, so
    # the same call again takes the undo back. (A numbered op undone again changes nothing.)
    annotations=Annotations(read_only=False, destructive=True, idempotent=False), mutates=True,
    group_commit=True,
)

TOOLS = [UNDO]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "undo": (
        Example(("op", "undo", "6"), {"op": 6}, caption="Undo op 6 (it moved release/v1): one new op moves it back."),
        Example(("op", "undo", "6", "--dry-run"), {"op": 6, "dry_run": True}, caption="What undoing op 6 would move, writing nothing."),
        # release/v1 moved since (op 6): undo op 6 first
        Example(("op", "undo", "4"), {"op": 4}, outcome="E_CAS_MISMATCH"),
        Example(("op", "undo", "6"), {"op": 6}, setup=(Call("undo", {"op": 6}),)),  # a replay: already_applied
        # undo.others unset: E_CAS_MISMATCH as without a policy
        Example(("op", "undo", "4"), {"op": 4}, outcome="E_CAS_MISMATCH", setup=(Call("policy_set", {"policy": ADMINS_POLICY}),)),
        # op 4 is human/alice's: undo.others, E_FORBIDDEN (over the conflict)
        Example(("op", "undo", "4"), {"op": 4}, outcome="E_FORBIDDEN", setup=(SET_PROTECT,)),
        Example(("op", "undo", "@"), {"op": "@"}, setup=(SET_PROTECT,)),  # @ is the policy_set: it is taken back
        # undo.others names agents: the newest op, human/alice's, is taken back
        Example(
            ("op", "undo", "@"),
            {"op": "@"},
            setup=(SET_AGENTS, Call("ref_set", {"name": "hotfix", "target": "main", "create": True}, actor="human/alice")),
        ),
    ),
}
