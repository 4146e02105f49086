"""Whole op records, a page at a time: an op's row, its ref moves, the changesets it made and
the undo in effect, each read for the whole page in one query (a page of the whole log as a
range of op numbers). `op_records` gives OpRows, for the tools that work with records;
`op_record_dicts` their JSON form, for `op log`, whose pages may be 10,000 records long."""

import gc
from contextlib import contextmanager
from typing import Any, Iterator

from swarmctl.store import reverts
from swarmctl.store.queries import undos_in_effect
from swarmctl.store.rows import MoveRow, OpHead, OpRow
from swarmctl.store.sql import Conn, stored_format

_OP_COLUMNS = ", ".join(OpHead._fields)


def op_records(conn: Conn, ops: list[int]) -> list[OpRow]:
    """Whole op records, in the order asked (an op that does not exist is left out)."""
    with _no_gc():
        heads, moves, made, undone_by = _record_parts(conn, ops, as_json=False)
        return [
            OpRow(op, kind, actor, at, description, moves[op], made[op], undoes, undone_by.get(op), digest)
            for op, kind, actor, at, description, undoes, digest in heads
        ]


def op_record_dicts(conn: Conn, ops: list[int]) -> list[dict[str, Any]]:
    """As op_records, each record in its JSON form (OpRow.json's), built straight from the rows:
    a page of 10,000 ops (`op log -n 10000`) costs half what it costs through OpRow."""
    with _no_gc():
        heads, moves, made, undone_by = _record_parts(conn, ops, as_json=True)
        return [
            {
                "op": op, "kind": kind, "actor": actor, "at": at, "description": description, "ref_moves": moves[op],
                "changesets": made[op], "undoes": undoes, "undone_by": undone_by.get(op), "hash": digest,
            }
            for op, kind, actor, at, description, undoes, digest in heads
        ]


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector off while a page's rows are built (as Mercurial's
    util.nogc does): they make no cycles, and each collection it would start walks every
    container made so far, so a page of 10,000 records cost a fifth more with it on. Only the
    caller that turned it off turns it back on (another thread may be inside too)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _record_parts(conn: Conn, ops: list[int], *, as_json: bool) -> tuple[list[tuple], dict[int, list], dict[int, list[str]], dict[int, int]]:
    """The rows of an op record: each op's own row (OpHead's columns, then its hash), in the
    order of `ops` (an op that does not exist left out); by op, its ref moves (MoveRows, or
    their JSON form), the changesets it made, the undo in effect."""
    if not ops:
        return [], {}, {}, {}
    # A page of the whole log is a run of op numbers: read as a range, not as a list of them,
    # and in the page's order (newest first, or oldest first), so that no lookup puts it in order.
    step = -1 if ops[0] > ops[-1] else 1
    run = ops == list(range(ops[0], ops[-1] + step, step))
    among, given = ("BETWEEN ? AND ?", (min(ops), max(ops))) if run else (f"IN ({','.join('?' * len(ops))})", ops)
    link = "hash" if stored_format(conn) >= 2 else "NULL"  # format 1: no hash chain yet
    heads_sql = f"SELECT {_OP_COLUMNS}, {link} FROM ops WHERE op {among}"
    if run:
        heads = conn.execute(heads_sql + (" ORDER BY op DESC" if step < 0 else " ORDER BY op"), given).fetchall()
    else:
        by_op = {row[0]: row for row in conn.execute(heads_sql, given)}
        heads = [by_op[op] for op in ops if op in by_op]
    moves: dict[int, list] = {op: [] for op in ops}
    cursor = conn.execute(f"SELECT op, name, old, new FROM ref_moves WHERE op {among} ORDER BY op, seq", given)
    if as_json:
        for op, name, old, new in cursor:
            moves[op].append({"name": name, "old": old, "new": new})
    else:
        for op, name, old, new in cursor:
            moves[op].append(MoveRow(name, old, new))
    made: dict[int, list[str]] = {op: [] for op in ops}
    for op, cid in conn.execute(f"SELECT op, id FROM changesets WHERE op {among} ORDER BY op, at, id", given):
        made[op].append(cid)
    # `undone_by` is the undo that takes the op back now: none once that undo was undone too.
    undone = {r[0] for r in conn.execute(f"SELECT DISTINCT undoes FROM ops WHERE undoes {among}", given)}
    undone |= reverts.reverted_among(conn, ops)
    return heads, moves, made, undos_in_effect(conn, undone)
