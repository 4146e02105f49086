"""The op log: list, show, undo, revert and restore operations.

This module defines `op log` and `op show`; `op undo`, `op revert` and `op restore` are in
undo.py, revert.py and restore.py (registry.AREAS), so that the commonest reads build no
undo's types at start. The first paragraph here is `swarmctl op --help`'s.
"""

from typing import Annotated, Any, Literal

from swarmctl import names
from swarmctl.context import Context
from swarmctl.spec import READ, Cli, JsonRows, JsonTexts, Range, Tool, arg, request_type, result_type, Example
from swarmctl.store import queries, records
from swarmctl.store.schema import OP_KINDS
from swarmctl.tools.common import OpNumber, OpSpec, RefMove, op_arg, resolve_op

# Literal[a_tuple] is Literal[*a_tuple] at runtime, which is what pydantic and the doors read;
# tests/test_op_log.py checks that the two agree.
OpKind = Literal[OP_KINDS]  # type: ignore[valid-type]


# --- result types ----------------------------------------------------------------------------


@result_type
class OpRecord:
    op: int
    kind: str
    actor: str
    at: str
    description: str
    ref_moves: list[RefMove]
    changesets: list[str]
    undoes: int | None
    undone_by: int | None
    # The op's link in the op log's hash chain (BLAKE3 over its content and the previous op's
    # hash; null in a store of format 1, before its first write upgrades it).
    hash: str | None

    @classmethod
    def from_row(cls, row: records.OpRow) -> "OpRecord":
        return cls(**{**row._asdict(), "ref_moves": [RefMove(*m) for m in row.ref_moves]})


@result_type
class OpLogResult:
    ops: list[OpRecord]
    has_more: bool
    next_before: int | None
    next_after: int | None


# --- requests --------------------------------------------------------------------------------


@request_type
class OpLogReq:
    """Which ops to list, newest first."""

    limit: Annotated[int, Range(1, 10_000)] = arg(
        50, description="How many ops to return at most.", cli=Cli(flags=("-n", "--limit"))
    )
    before: OpNumber | None = arg(
        None, description="Only ops older than this op number (a cursor: pass `next_before`)."
    )
    after: Annotated[int, Range(0)] | None = arg(
        None,
        description="Only ops newer than this op number; alone, the ones right after it (a cursor: pass `next_after`).",
    )
    reverse: bool = arg(False, description="Oldest first (applied after the limit).")
    ref: str | None = arg(
        None, description="Only ops that moved this ref, also after it was deleted.", cli=Cli(complete="refs")
    )
    actor: str | None = arg(None, description="Only ops by this actor (kind/name).", cli=Cli(complete="actors"))
    kind: OpKind | None = arg(None, description="Only ops of this kind.")
    since: str | None = arg(
        None, description="Only ops at or after this time: RFC 3339 (without an offset, and a plain date, it is UTC, as the JSON shows times; tables show local time), or a duration before now (90s, 15m, 2h, 7d)."
    )
    until: str | None = arg(
        None, description="Only ops at or before this time: RFC 3339 (without an offset, and a plain date, it is UTC, as the JSON shows times; tables show local time), or a duration before now (90s, 15m, 2h, 7d)."
    )


@request_type
class OpShowReq:
    """The op to show."""

    op: OpSpec = op_arg("The op to show")


# --- the work --------------------------------------------------------------------------------


def op_log(ctx: Context, req: OpLogReq) -> OpLogResult:
    """List the store's operations, newest first, with the refs each one moved.

    Filters combine: `--ref` (ops that moved that ref, also after it was deleted), `--actor`,
    `--kind`, `--since`/`--until` (RFC 3339 times, or durations before now: `15m`, `2h`, `7d`). Page with `--before next_before` (older) or
    `--after next_after` (newer). Reading a page costs the same on a log of any length.
    Never writes to the store.
    """
    query = log_query(req, req.limit)
    store = ctx.store()
    with store.read() as conn:
        found, has_more = queries.op_log(conn, query)
        # The rows are OpRecords in their JSON form already (see spec.JsonRows), or their JSON
        # text for a door that prints JSON text (spec.JsonTexts).
        texts = records.op_record_texts(conn, found) if ctx.json_text else None
        page: JsonRows | JsonTexts = JsonRows(records.op_record_dicts(conn, found)) if texts is None else JsonTexts(texts)
    forward = req.after is not None and req.before is None
    result = OpLogResult(
        ops=page,
        has_more=has_more,
        next_before=found[-1] if found and has_more and not forward else None,
        next_after=found[0] if found and has_more and forward else None,
    )
    if req.reverse:
        result.ops = JsonRows(page[::-1]) if texts is None else JsonTexts(texts[::-1])
    return result


def log_query(filters: Any, limit: int) -> queries.LogQuery:
    """The op log query of the filters `op log` takes (`filters` has its fields: before, after,
    ref, actor, kind, since, until), each checked; `op revert` selects its ops with it too."""
    return queries.LogQuery(
        limit=limit,
        before=filters.before,
        after=filters.after,
        ref=names.check_ref_name(filters.ref) if filters.ref is not None else None,
        actor=names.check_actor(filters.actor) if filters.actor is not None else None,
        kind=filters.kind,
        since=names.parse_time(filters.since, field="since", round_up=True) if filters.since is not None else None,
        until=names.parse_time(filters.until, field="until") if filters.until is not None else None,
    )


def op_show(ctx: Context, req: OpShowReq) -> OpRecord:
    """Show one operation in full: its kind, actor, time, the refs it moved (old and new), the
    changesets it created, the op it undid and the undo that took it back."""
    store = ctx.store()
    with store.read() as conn:
        op = resolve_op(ctx, conn, req.op)
        return OpRecord.from_row(records.op_records(conn, [op])[0])


# --- registry entries ------------------------------------------------------------------------

OP_LOG = Tool(
    name="op_log", cli=("op", "log"), title="Op log", summary="List operations, newest first.",
    request=OpLogReq, result=OpLogResult, run=op_log, annotations=READ, mutates=False, records="ops",
    group_commit=True,
)
OP_SHOW = Tool(
    name="op_show", cli=("op", "show"), title="Show an op", summary="Show one operation in full.",
    request=OpShowReq, result=OpRecord, run=op_show, annotations=READ, mutates=False,
    group_commit=True,
)
TOOLS = [OP_LOG, OP_SHOW]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "op_log": (
        Example(("op", "log", "-n", "2"), {"limit": 2}, caption="The two newest ops."),
        Example(
            ("op", "log", "-n", "2", "--actor", "agent/worker-17", "--reverse"),
            {"limit": 2, "actor": "agent/worker-17", "reverse": True},
            caption="agent/worker-17's two newest ops, oldest first.",
        ),
    ),
    "op_show": (
        Example(("op", "show", "6"), {"op": 6}, caption="Show op 6."),
        Example(("op", "show", "@"), {"op": "@"}, caption="Show your newest op (`@`: the caller's, so it needs --as)."),
    ),
}
