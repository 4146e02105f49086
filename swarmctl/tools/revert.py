"""`op revert`: take back every op a filter selects (an actor's, a range's, a ref's), in one op of
kind `revert`, by compare-and-swap, all or nothing.

How a selection's effect is worked out, ref by ref. First, which of the selected ops the revert
takes back: each that moved a ref and would be in effect once the revert is made (read down the
chain of undos, with the revert the newest undo of the others), but not a selected undo of a
selected op nor a revert of selected ops only (such a pair nets out within the selection). Then
each ref goes back to what it named before the oldest move of those. A selected op that stays
taken back by an op outside the selection (an undo, or a revert, perhaps of moves outside the
selection too) does not decide what the ref goes back to: that op put the ref where it is, and
restoring what the ref named before the move would redo what that op took back. One that the
revert brings back into effect (taking back a selected op that took back the undo that took it
back) is taken back, and decides.

That is safe only if nothing but the selection moved the ref since its oldest selected move:
every later move must be by a selected op, or by an op that took a selected op back (its undo,
or a revert of it, and so on down the chain: an op and its undo cancel out), or an op outside
the selection that was taken back since, with the undo that took it back (they cancel out too,
unless that undo is selected: taking it back brings the op back), or by a revert that did not
move the ref (the moves it took back netted out, there and back: the later part of a revert
made in parts). Any other move, even one later moved back by another move, is someone else's
work in between, and stops the revert (E_CAS_MISMATCH, naming those ops).
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Annotations, Cli, Range, Tool, arg, request_type, result_type, Example, Call
from swarmctl.store import Conn, Move, Writer, conflicts, policies, queries, records, reverts
from swarmctl.tools.common import OpNumber
from swarmctl.tools.op import OpKind, log_query
from swarmctl.tools.undo import UNDO, UndoMove, forbidden_to

# The most ops one revert may select: a larger selection is refused, never cut silently.
MAX_SELECTION = 100_000

_FILTERS = ("actor", "ref", "kind", "after", "before", "since", "until")


@request_type
class OpRevertReq:
    """`op_revert` (CLI `op revert`): take back every op the filters select, in one op."""

    actor: str | None = arg(None, description="Select the ops by this actor (kind/name).", cli=Cli(complete="actors"))
    ref: str | None = arg(
        None,
        description="Select the ops that moved this ref (every move of those ops is taken back).",
        cli=Cli(complete="refs"),
    )
    kind: OpKind | None = arg(None, description="Select the ops of this kind.")
    after: Annotated[int, Range(0)] | None = arg(
        None, description="Select only ops after this op number (exclusive).", cli=Cli(metavar="OP", complete="ops")
    )
    before: OpNumber | None = arg(
        None, description="Select only ops before this op number (exclusive).", cli=Cli(metavar="OP", complete="ops")
    )
    since: str | None = arg(
        None, description="Select only ops at or after this time: RFC 3339 (without an offset, and a plain date, it is UTC, as the JSON shows times; tables show local time), or a duration before now (90s, 15m, 2h, 7d)."
    )
    until: str | None = arg(
        None, description="Select only ops at or before this time: RFC 3339 (without an offset, and a plain date, it is UTC, as the JSON shows times; tables show local time), or a duration before now (90s, 15m, 2h, 7d)."
    )
    dry_run: bool = arg(False, description="List what would be taken back and any conflicts; write nothing.")


@result_type
class RevertResult:
    reverted: list[int]
    op: int | None
    ref_moves: list[UndoMove]
    already_applied: bool


def op_revert(ctx: Context, req: OpRevertReq) -> RevertResult:
    """Take back every op the filters select, as one new op (kind `revert`), by compare-and-swap
    in one transaction: all of it or nothing. The filters are those of `op log` (`--actor`,
    `--ref`, `--kind`, `--after OP`, `--before OP`, both exclusive, `--since`, `--until`); at
    least one is required, and every matching op is selected (more than 100,000 is
    E_INVALID_ARG). With `--ref`, all the moves of the ops that moved that ref are taken back.

    Each ref the selected ops moved goes back to what it named before its oldest selected move.
    Ops already undone, and undos whose op is selected too, cancel out; an undo selected without
    its op is taken back like any op (that redoes). Which ops are taken back is read as it will
    be once the revert is made: a selected op that taking back a selected undo or revert brings
    back into effect is taken back too. A ref that anyone outside the selection moved
    after its oldest selected move (even if it was later moved back, unless by the undo of that
    move, not selected: the two cancel out) stops it: E_CAS_MISMATCH, nothing written,
    `error.details.conflicts` naming those ops in `moved_by`, and `error.next` the undo of the
    newest of them (or widen the selection to include them); null where that undo would change
    nothing or the policy does not let the caller make it (the hint says why). Each op taken back
    gets `undone_by` = the revert; `op undo` of the revert takes it all back. Run again with the
    same selection, it is a replay (`already_applied`, the revert that did it, nothing written).
    A selection with nothing to take back is E_NOTHING_TO_UNDO. `--dry-run` lists what would be
    taken back and the conflicts, and writes nothing. Changesets are never removed. The store's
    policy may forbid it (E_FORBIDDEN, before any conflict, in a dry run too): a selected op of
    another actor (`[undo] others`), or a ref protected from the caller.
    """
    given = {f: getattr(req, f) for f in _FILTERS if getattr(req, f) is not None}
    if not given:
        raise SwarmError(
            "E_INVALID_ARG",
            "op revert needs at least one filter, so that it never takes back the whole log by accident",
            details={"filters": [f"--{f}" for f in _FILTERS]},
            hint="Select the ops with --actor, --ref, --kind, --after, --before, --since or --until "
            "(as in `swarmctl op log`); preview with --dry-run.",
        )
    query = log_query(req, MAX_SELECTION)
    actor = ctx.require_actor("a revert is made as someone, so even a --dry-run needs one") if req.dry_run else ctx.require_actor()
    store = ctx.store()
    if req.dry_run:
        with store.read() as conn:
            return _revert(conn, query, given, actor, names.now(), writer=None)
    with store.write(actor) as w:
        return _revert(w.conn, query, given, actor, w.at, writer=w)


class _NetEffect(NamedTuple):
    moves: list[Move]  # one per ref that does not name already what it named before the selection
    names: list[str]  # every ref the selected ops moved, in the order they first moved it


def _revert(
    conn: Conn, query: queries.LogQuery, given: dict[str, Any], actor: str, at: str, *, writer: Writer | None
) -> RevertResult:
    selected = _select(conn, query, given)
    moves = reverts.ref_moves_of(conn, selected)
    if not moves:
        raise _nothing_to_undo(given, selected, "none of them moved a ref")
    _refuse_forbidden(conn, actor, moves)  # before any conflict: forbidden wins
    in_effect = {op: queries.undo_in_effect(conn, op) for op in dict.fromkeys(m.op for m in moves)}
    taken_back = _taken_back(conn, selected, in_effect)
    effect = _net_effect(conn, selected, moves, set(taken_back), given, actor)
    if not effect.moves:
        replay = _replay(conn, selected, effect.names, in_effect)
        if replay is not None:
            return replay
        raise _nothing_to_undo(given, selected, "every ref they moved already names what it named before them")
    op = None
    if writer is not None:
        described = " ".join(OP_REVERT.argv(**given)[3:])
        op = writer.append_op("revert", f"revert {len(taken_back)} op(s) selected by {described}", effect.moves)
        reverts.record(writer, taken_back)
    return RevertResult(
        reverted=taken_back,
        op=op,
        ref_moves=[UndoMove(m.name, m.new, actor, at) for m in effect.moves],
        already_applied=False,
    )


def _refuse_forbidden(conn: Conn, actor: str, moves: list[reverts.OpMove]) -> None:
    """E_FORBIDDEN if the store's policy forbids `actor` to take back one of the selected ops
    that moved a ref (made by another actor) or to move one of the refs they moved."""
    policy = policies.current(conn)
    if policy is None:
        return
    for record in records.op_records(conn, sorted({m.op for m in moves})):
        rules.refuse(rules.may_undo(policy, actor, record.op, record.actor))
    for name in dict.fromkeys(m.name for m in moves):
        rules.refuse(rules.may_move(policy, actor, name))


def _select(conn: Conn, query: queries.LogQuery, given: dict[str, Any]) -> list[int]:
    """The selected ops, oldest first; refused past MAX_SELECTION."""
    found, more = queries.op_log(conn, query)
    if more:
        raise SwarmError(
            "E_INVALID_ARG",
            f"the filters select more than {MAX_SELECTION:,} ops; a revert takes back at most that many at once",
            details={"filters": given, "max": MAX_SELECTION},
            hint="Narrow the selection (--after/--before, --since/--until) and revert it in parts; nothing was written.",
        )
    return sorted(found)


def _scope(conn: Conn, selected: list[int]) -> set[int]:
    """The selected ops and every op that took one of them back, down the chain (its undo, the
    undo of that undo, a revert of it, ...): moves by these are the selection's own."""
    scope = set(selected)
    todo = list(selected)
    while todo:
        for undo in queries.undos_of(conn, todo.pop()):
            if undo not in scope:
                scope.add(undo)
                todo.append(undo)
    return scope


def _net_effect(
    conn: Conn, selected: list[int], moves: list[reverts.OpMove], taking: set[int], given: dict[str, Any], actor: str
) -> _NetEffect:
    """Each ref back to what it named before the oldest move of the selected ops the revert
    takes back (`taking`), or the conflicts."""
    by_ref: dict[str, list[reverts.OpMove]] = {}  # name -> the selected moves of it, oldest first
    for m in moves:
        by_ref.setdefault(m.name, []).append(m)
    scope, chosen = _scope(conn, selected), set(selected)
    found, net, redone = [], [], set()
    for name, mine in by_ref.items():
        later = queries.moves_after(conn, name, mine[0].op)
        outside = [op for op in later if op not in scope]
        if outside:  # taken back since by another later op (the two cancel out), or netted out
            cancelled = queries.cancelling(conn, later, name)
            # ... unless by a selected op: taking that back brings the outside op back
            back = {op for op, undo in queries.undos_in_effect(conn, outside).items() if undo in chosen}
            redone |= back
            outside = [op for op in outside if op not in cancelled or op in back]
        actual = queries.ref_target(conn, name)
        if outside:
            found.append(conflicts.Conflict(name, mine[-1].new, actual, outside))
            continue
        mine = [m for m in mine if m.op in taking]
        if mine and actual != mine[0].old:
            net.append(Move(name, old=actual, new=mine[0].old))
    if found:
        raise _moved_by_others(conn, actor, found, given, len(selected), redone)
    return _NetEffect(net, list(by_ref))


def _pairs_off(conn: Conn, op: int, kind: reverts.OpKind, chosen: set[int]) -> bool:
    """Whether the selected `op` nets out within the selection: an undo of a selected op, or a
    revert of selected ops only."""
    return kind.undoes in chosen or kind.kind == "revert" and set(reverts.targets_of(conn, op)) <= chosen


def _taken_back(conn: Conn, selected: list[int], in_effect: dict[int, int | None]) -> list[int]:
    """The selected ops the revert takes back (each gets `undone_by` = the revert): of those that
    moved a ref, but not an undo of a selected op nor a revert of selected ops only (such a pair
    nets out), each that would be in effect once the revert took back the others. Taking back a
    selected revert that took back ops outside the selection too brings back what it took back:
    the selected ops among them are taken back again; taking back one that took back an undo
    brings that undo back, and the op it undoes stays taken back by it, not by this revert."""
    chosen = set(selected)
    kinds = reverts.kinds_of(conn, list(in_effect))
    candidates = [op for op in in_effect if not _pairs_off(conn, op, kinds[op], chosen)]
    newest = queries.newest_undos(conn, candidates)
    taken = {op for op in candidates if in_effect[op] is None}
    for _ in range(len(candidates)):  # what one taken op brings back may bring back another's undo
        now = {op for op in candidates if _in_effect_after(op, newest, taken)}
        if now == taken:
            break
        taken = now
    return sorted(taken)


def _in_effect_after(op: int, newest: dict[int, int | None], taken: set[int]) -> bool:
    """Whether `op` is in effect once a new op takes back the others of `taken` (as
    `undo_in_effect` reads a chain of undos: the new op is the newest undo of each op it takes
    back). `op` itself is left out by starting at its undo, not by a copy of `taken` less `op`
    for each op (quadratic in a selection of 100,000)."""
    links, current = 0, newest.get(op)
    while current is not None:
        links += 1
        if current in taken:
            return links % 2 == 1  # the new op is one more link
        current = newest.get(current)
    return links % 2 == 0


def _replay(
    conn: Conn, selected: list[int], moved: list[str], in_effect: dict[int, int | None]
) -> RevertResult | None:
    """The revert already in effect for this selection, if a revert took its ops back."""
    undoers = sorted({u for u in in_effect.values() if u is not None})
    kinds = reverts.kinds_of(conn, undoers)
    done = [u for u in undoers if kinds[u].kind == "revert"]
    if not done:
        return None
    revert = done[-1]
    record = records.op_records(conn, [revert])[0]
    return RevertResult(
        reverted=sorted(set(reverts.targets_of(conn, revert)) & set(selected)),
        op=revert,
        ref_moves=[UndoMove(m.name, m.new, record.actor, record.at) for m in record.ref_moves if m.name in moved],
        already_applied=True,
    )


# --- errors ------------------------------------------------------------------------------------


def _nothing_to_undo(given: dict[str, Any], selected: list[int], why: str) -> SwarmError:
    count = len(selected)
    message = "no op matches the filters" if not count else f"the filters select {count} op(s), but {why}"
    return SwarmError(
        "E_NOTHING_TO_UNDO",
        f"{message}: nothing to take back",
        details={"filters": given, "selected": count},
        hint="`swarmctl op log` with the same filters lists what they select. Changesets are never removed; only ref moves are taken back.",
    )


def _moved_by_others(
    conn: Conn, actor: str, found: list[conflicts.Conflict], given: dict[str, Any], count: int, redone: set[int]
) -> SwarmError:
    """E_CAS_MISMATCH naming the ops in between; `next` the undo of the newest, where that undo
    would change something (an op the selection's own undo took back is undone already: taking
    that undo back is what brings it back) and the policy lets the caller make it."""
    others = sorted({op for c in found for op in c.moved_by})
    listed = ", ".join(map(str, others))
    newest = others[-1]
    if newest in redone:
        back = ", ".join(map(str, sorted(redone & set(others))))
        hint = (
            f"Not selected: op(s) {listed}. Op(s) {back}: taken back now by an op the selection selects, whose "
            "revert would bring them back. Widen the selection to include them, or narrow it to leave that op out; "
            "then revert again."
        )
        next_call = None
    else:
        hint = (
            f"Not selected: op(s) {listed}. Undo them first, newest first (`swarmctl op undo {newest}`), "
            "or widen the selection to include them; then revert again."
        )
        forbidden = forbidden_to(conn, actor, newest)
        if forbidden is not None:  # a `next` the caller may not make is no way on
            hint += f" The store's policy does not let {actor} undo op {newest} ({forbidden}): someone it allows must."
        next_call = UNDO.call(op=newest) if forbidden is None else None
    return conflicts.cas_mismatch(
        found,
        f"cannot revert: ops outside the selection moved {conflicts.listed(found)} after the selected ops did; nothing was written",
        details={"filters": given, "selected": count},
        hint=hint,
        next=next_call,
    )


# --- registry entry ----------------------------------------------------------------------------

OP_REVERT = Tool(
    name="op_revert",
    cli=("op", "revert"),
    title="Revert ops",
    summary="Take back every op a filter selects (by actor, ref, kind or range), as one op.",
    request=OpRevertReq,
    result=RevertResult,
    run=op_revert,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    mutates=True,
    records="reverted",  # with --dry-run: the ops it would take back, one a line
)

TOOLS = [OP_REVERT]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "op_revert": (
        # Everything agent/worker-17 did (ops 3, 5 and 6), taken back in one op.
        Example(("op", "revert", "--actor", "agent/worker-17"), {"actor": "agent/worker-17"}, caption="Take back everything agent/worker-17 did, as one op."),
        Example(
            ("op", "revert", "--after", "4", "--dry-run"),
            {"after": 4, "dry_run": True},
            caption="What taking back every op after op 4 would move, writing nothing.",
        ),
        # ops 5 and 6 moved main and release/v1 since op 4: E_CAS_MISMATCH
        Example(("op", "revert", "--before", "5"), {"before": 5}, outcome="E_CAS_MISMATCH"),
        Example(  # a replay: already_applied
            ("op", "revert", "--actor", "agent/worker-17"),
            {"actor": "agent/worker-17"},
            setup=(Call("op_revert", {"actor": "agent/worker-17"}),),
        ),
        Example(("op", "revert"), {}, outcome="E_INVALID_ARG"),  # no filter
    ),
}
