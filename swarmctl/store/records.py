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
from swarmctl.store.sql import SQLITE, Conn, dialect, stored_format

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
        if dialect(conn) == SQLITE:  # a column of a SQLite file may hold a BLOB, put there behind our back
            _refuse_bytes(heads, [m for op_moves in moves.values() for move in op_moves for m in move.values()])
        return [
            {
                "op": op, "kind": kind, "actor": actor, "at": at, "description": description, "ref_moves": moves[op],
                "changesets": made[op], "undoes": undoes, "undone_by": undone_by.get(op), "hash": digest,
            }
            for op, kind, actor, at, description, undoes, digest in heads
        ]


def _refuse_bytes(heads: list[tuple], values: list[Any]) -> None:
    """Records in their JSON form go out as they are (spec.JsonRows, which `plain` does not walk):
    bytes in them, where the store should hold text, are damage, named here."""
    if any(type(v) is bytes for row in heads for v in row) or any(type(v) is bytes for v in values):
        from swarmctl.store.errors import corrupt

        raise corrupt("the store holds bytes (a BLOB) where an op record's text belongs", None)


def op_record_texts(conn: Conn, ops: list[int]) -> list[str] | None:
    """As op_record_dicts, each record as the compact JSON text envelope.dumps writes of it,
    built by SQLite's JSON functions (half the time of building the dicts and encoding them); None
    on PostgreSQL, or where this SQLite's JSON text is not Python's (see `_sqlite_writes_json_as_python`)."""
    if dialect(conn) != SQLITE or not _sqlite_writes_json_as_python(conn):
        return None
    if not ops:
        return []
    with _no_gc():
        among, given, run = _among(ops)
        link = "o.hash" if stored_format(conn) >= 2 else "NULL"  # format 1: no hash chain yet
        order = (" ORDER BY o.op DESC" if ops[0] > ops[-1] else " ORDER BY o.op") if run else ""
        rows = conn.execute(_RECORD_JSON.format(link=link, among=among) + order, given).fetchall()
        undone_by = _undone_by(conn, ops, among, given)
        if run and not undone_by:
            return [text for _, text in rows]  # in the page's order already
        texts = dict(rows)
        for op, by in undone_by.items():  # `,"undone_by":null,` can be in no string: its quotes would be escaped
            if op in texts:
                texts[op] = texts[op].replace(',"undone_by":null,', f',"undone_by":{int(by)},', 1)
        return [texts[op] for op in ops if op in texts]


# One record's JSON, keys in OpRecord's order (op_record_dicts'); its ref moves in order, and the
# changesets it made by time and id, as arrays built from subqueries that give them in that order.
_RECORD_JSON = (
    "SELECT o.op, json_object('op', o.op, 'kind', o.kind, 'actor', o.actor, 'at', o.at, 'description', o.description, "
    "'ref_moves', (SELECT json_group_array(json_object('name', m.name, 'old', m.old, 'new', m.new)) "
    "FROM (SELECT name, old, new FROM ref_moves WHERE op = o.op ORDER BY seq) m), "
    "'changesets', (SELECT json_group_array(c.id) FROM (SELECT id FROM changesets WHERE op = o.op ORDER BY at, id) c), "
    "'undoes', o.undoes, 'undone_by', NULL, 'hash', {link}) FROM ops o WHERE o.op {among}"
)

# Every character below U+0080, and some beyond: SQLite's JSON text of a string is Python's
# (json.dumps with ensure_ascii=False) for each on the SQLite this was written against (3.40).
# The probe also asks for an array of objects from a subquery in its order, as _RECORD_JSON
# does: another SQLite that writes any of it otherwise gets the dicts' path instead.
_PROBE = "".join(map(chr, range(0x80))) + "\x85\xa0\xe9\u2028\u2029\ufeff\U0001f600"
_PROBE_SQL = (
    "SELECT json_object('s', ?, 'n', ?, 'z', NULL, 'a', (SELECT json_group_array(json_object('x', x, 'y', NULL)) "
    "FROM (SELECT value AS x FROM json_each('[3, 1, 2]') ORDER BY x DESC)), 'e', (SELECT json_group_array(1) WHERE 0))"
)
_PROBE_JSON = {"s": _PROBE, "n": -(2**63), "z": None, "a": [{"x": 3, "y": None}, {"x": 2, "y": None}, {"x": 1, "y": None}], "e": []}
_json_as_python: bool | None = None


def _sqlite_writes_json_as_python(conn: Conn) -> bool:
    global _json_as_python
    if _json_as_python is None:
        import json

        import sqlite3

        try:
            written = conn.execute(_PROBE_SQL, (_PROBE, -(2**63))).fetchone()[0]
        except sqlite3.Error:  # an SQLite without its JSON functions
            written = None
        _json_as_python = written == json.dumps(_PROBE_JSON, separators=(",", ":"), ensure_ascii=False)
    return _json_as_python


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
    among, given, run = _among(ops)
    step = -1 if ops[0] > ops[-1] else 1
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
    return heads, moves, made, _undone_by(conn, ops, among, given)


def _among(ops: list[int]) -> tuple[str, tuple[int, ...] | list[int], bool]:
    """The condition on an op column that picks `ops`, its parameters, and whether they are a
    run. A page of the whole log is a run of op numbers (newest first, or oldest first): read
    as a range, not as a list of them, and in the page's order, so that no lookup puts it in order."""
    step = -1 if ops[0] > ops[-1] else 1
    # (The length first: two ops far apart must not build the range between them to compare.)
    run = len(ops) == abs(ops[-1] - ops[0]) + 1 and ops == list(range(ops[0], ops[-1] + step, step))
    if run:
        return "BETWEEN ? AND ?", (min(ops), max(ops)), True
    return f"IN ({','.join('?' * len(ops))})", ops, False


def _undone_by(conn: Conn, ops: list[int], among: str, given: Any) -> dict[int, int]:
    """`undone_by` of the ops undone among `ops`: the undo that takes each back now (none once
    that undo was undone too)."""
    undone = {r[0] for r in conn.execute(f"SELECT DISTINCT undoes FROM ops WHERE undoes {among}", given)}
    undone |= reverts.reverted_among(conn, ops)
    return undos_in_effect(conn, undone)
