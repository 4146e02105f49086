"""Reads. Each takes a connection (a read snapshot or a write transaction) and returns plain
values or typed rows (rows.py; txs.py and workflows.py have their own); none of
them writes. Every query here is bounded by an index, so its cost does not grow with the length
of the op log.

Why this module is long: it is every read the tools share (ops, refs, changesets, the chains
of undos that `op undo` and `op revert` walk), each a few lines of SQL; split by table, the
chain walks would import each other's halves."""

import json
from typing import Iterable, NamedTuple, Sequence

from swarmctl.names import digits
from swarmctl.store import reverts
from swarmctl.store.errors import Ambiguous, NotFound, Problem, damaged
from swarmctl.store.rows import ActorRow, ChangesetBrief, ChangesetRow, OpBrief, RefRow, strings
from swarmctl.store.sql import Conn, starts_with, stored_format

# --- ops -----------------------------------------------------------------------------------


def newest_op(conn: Conn, actor: str | None = None) -> int | None:
    if actor is None:
        row = conn.execute("SELECT MAX(op) FROM ops").fetchone()
    else:
        row = conn.execute("SELECT MAX(op) FROM ops WHERE actor = ?", (actor,)).fetchone()
    return row[0]


def op_exists(conn: Conn, op: int) -> bool:
    return conn.execute("SELECT 1 FROM ops WHERE op = ?", (op,)).fetchone() is not None


class LogQuery(NamedTuple):
    limit: int
    before: int | None = None
    after: int | None = None
    ref: str | None = None
    actor: str | None = None
    kind: str | None = None
    since: str | None = None  # store time format
    until: str | None = None


class LogPage(NamedTuple):
    ops: list[int]  # newest first
    more: bool  # more ops match beyond them


def op_log(conn: Conn, q: LogQuery) -> LogPage:
    """The op numbers that match, newest first, and whether more match beyond them.

    With only `after`, the ops nearest after it are taken (a cursor paging forward);
    otherwise the newest. Either way the cost is that of the page, not of the log.

    `--since`/`--until` select by each op's own time. Op times are in op order except at the
    time breaks a skewed clock left (see store.db.op_time), so the log is a few runs of ops
    whose times are in order: in each, the ops of the time range are one range of op numbers,
    found by bisection (a few lookups by op number), and the page is read from those ranges,
    newest first.
    """
    forward = q.after is not None and q.before is None
    if q.since is None and q.until is None:
        ranges = [(q.after, q.before)]
    else:
        ranges = []
        for first, last in time_runs(conn):
            low = first if q.since is None else _first_at_or_after(conn, first, last, q.since)
            high = last if q.until is None else _last_at_or_before(conn, first, last, q.until)
            if low is None or high is None or low > high:
                continue
            lower = low - 1 if q.after is None else max(low - 1, q.after)
            upper = high + 1 if q.before is None else min(high + 1, q.before)
            if lower + 1 < upper:
                ranges.append((lower, upper))
        if not forward:
            ranges.reverse()  # newest run first
    found: list[int] = []
    beside = q.ref is None or (q.actor is None and q.kind is None) or stored_format(conn) >= 3
    for lower, upper in ranges:
        sql, params = log_sql(q, lower, upper, beside=beside)
        found += [r[0] for r in conn.execute(sql, params)]
        if len(found) > q.limit:
            break
    has_more = len(found) > q.limit
    found = found[: q.limit]
    if forward:
        found.reverse()
    return LogPage(found, has_more)


def time_breaks(conn: Conn) -> list[int]:
    """The ops whose time is earlier than the op before them (a store of format 1 has none:
    its times never went back)."""
    if stored_format(conn) < 2:
        return []
    return [r[0] for r in conn.execute("SELECT op FROM time_breaks ORDER BY op")]


class TimeRun(NamedTuple):
    """A run of ops whose times are in op order."""

    first: int
    last: int


def time_runs(conn: Conn) -> list[TimeRun]:
    """Each run of ops whose times are in op order, oldest first."""
    newest = newest_op(conn)
    if newest is None:
        return []
    starts = [1, *(b for b in time_breaks(conn) if 1 < b <= newest)]
    return [TimeRun(start, end - 1) for start, end in zip(starts, [*starts[1:], newest + 1])]


def _at(conn: Conn, op: int) -> str:
    row = conn.execute("SELECT at FROM ops WHERE op = ?", (op,)).fetchone()
    if row is None:  # numbers run 1..N in a sound store: a missing one is damage (store check: ops_gapless)
        raise damaged([Problem("ops_gapless", f"op {op} is missing: the op numbers have gaps", op=op)])
    return row[0]


def _first_at_or_after(conn: Conn, first: int, last: int, since: str) -> int | None:
    low, high = first, last + 1
    while low < high:
        mid = (low + high) // 2
        if _at(conn, mid) >= since:
            high = mid
        else:
            low = mid + 1
    return low if low <= last else None


def _last_at_or_before(conn: Conn, first: int, last: int, until: str) -> int | None:
    low, high = first - 1, last
    while low < high:
        mid = (low + high + 1) // 2
        if _at(conn, mid) <= until:
            low = mid
        else:
            high = mid - 1
    return low if low >= first else None


def log_sql(q: LogQuery, lower: int | None, upper: int | None, *, beside: bool = True) -> tuple[str, list]:
    """The page query of `op_log`, with op bounds `lower < op < upper` (None: unbounded).

    Each filter has an index that yields ops in op order, so a page costs its own size:
    ops(actor, op), ops(kind, op), ops(actor, kind, op) without `--ref`; with it,
    ref_moves(name, op) and, since format 3 (`beside`: each move carries its op's actor and
    kind), ref_moves(name, actor, op), (name, kind, op), (name, actor, kind, op). A store of an
    older format, read as it is, joins the ops instead and may walk all of the ref's history.
    """
    where, params = [], []
    alone = q.ref is not None and beside  # ref_moves answers it without the ops
    col = "m.op" if q.ref is not None else "o.op"
    if q.ref is not None:
        where.append("m.name = ?")
        params.append(q.ref)
    if lower is not None:
        where.append(f"{col} > ?")
        params.append(lower)
    if upper is not None:
        where.append(f"{col} < ?")
        params.append(upper)
    for column, value in (("actor", q.actor), ("kind", q.kind)):
        if value is not None:
            where.append(f"{'m' if alone else 'o'}.{column} = ?")
            params.append(value)
    source = "ops o" if q.ref is None else "ref_moves m" if alone else "ref_moves m JOIN ops o ON o.op = m.op"
    forward = q.after is not None and q.before is None
    sql = (
        f"SELECT {col} FROM {source}"
        + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY {col} {'ASC' if forward else 'DESC'} LIMIT ?"
    )
    return sql, [*params, q.limit + 1]


def ops_numbered(conn: Conn, prefix: str, limit: int) -> list[OpBrief]:
    """The newest ops whose number starts with `prefix`, for shell
    completion. Numbers starting with 12 are 12, 120-129, 1200-1299, ...: one indexed range
    each, newest first, so a prefix costs the same on a log of any length."""
    newest = newest_op(conn) or 0
    if prefix and (not digits(prefix) or prefix.startswith("0")):
        return []
    start, scale, ranges = int(prefix or 0), 1, []
    if not prefix:
        ranges = [(1, newest)]
    while prefix and start * scale <= newest:
        ranges.append((start * scale, min((start + 1) * scale - 1, newest)))
        scale *= 10
    found: list[OpBrief] = []
    for low, high in reversed(ranges):
        found += map(OpBrief._make, conn.execute(
            "SELECT op, actor, description FROM ops WHERE op BETWEEN ? AND ? ORDER BY op DESC LIMIT ?",
            (low, high, limit - len(found)),
        ))
        if len(found) >= limit:
            break
    return found


def moved_refs(conn: Conn, ops: Sequence[int]) -> set[int]:
    """Those of `ops` that moved a ref (of what `op undo` takes back, what most ops are)."""
    found: set[int] = set()
    for chunk in reverts.chunks(ops):
        marks = ",".join("?" * len(chunk))
        found.update(r[0] for r in conn.execute(f"SELECT DISTINCT op FROM ref_moves WHERE op IN ({marks})", chunk))
    return found


def undos_of(conn: Conn, op: int) -> list[int]:
    """The ops that took `op` back, oldest first: its undos, and the reverts that selected it."""
    undos = [r[0] for r in conn.execute("SELECT op FROM ops WHERE undoes = ? ORDER BY op", (op,))]
    taken_back_by_reverts = reverts.reverts_of(conn, op)
    return sorted(undos + taken_back_by_reverts) if taken_back_by_reverts else undos


def undo_in_effect(conn: Conn, op: int) -> int | None:
    """The undo (or revert) that currently takes `op` back, if any: the newest, unless that was
    taken back too."""
    chain: list[int] = []
    current: int | None = op
    while current is not None:
        undos = undos_of(conn, current)
        later = undos[-1] if undos else None
        _check_later(current, later)
        current = later
        if current is not None:
            chain.append(current)
    # chain = [undo of op, undo of that undo, ...]: odd length means op is taken back.
    return chain[0] if len(chain) % 2 == 1 else None


def newest_undos(conn: Conn, ops: Iterable[int]) -> dict[int, int | None]:
    """Each of `ops`, and each op down their chains of undos, -> the newest op that took it back
    (None: none): one query of each kind per link of the chains, not per op. Each link is
    checked to point to a later op, so a walk down a chain always ends."""
    newest: dict[int, int | None] = {}
    frontier = sorted(set(ops))
    while frontier:
        found = _newest_undos(conn, frontier)
        for op in frontier:
            _check_later(op, found.get(op))
            newest[op] = found.get(op)
        frontier = sorted({u for u in found.values() if u not in newest})
    return newest


def undos_in_effect(conn: Conn, ops: Iterable[int]) -> dict[int, int]:
    """`undo_in_effect` of many ops at once (those taken back now, each with its undo): one
    query of each kind per link of the chains of undos, not per op."""
    newest = newest_undos(conn, ops)
    taken_back: dict[int, int] = {}
    for op in ops:
        chain, current = [], newest.get(op)
        _check_later(op, current)
        while current is not None:
            chain.append(current)
            _check_later(current, newest.get(current))
            current = newest.get(current)
        if len(chain) % 2 == 1:  # as in undo_in_effect: odd length means op is taken back
            taken_back[op] = chain[0]
    return taken_back


def _check_later(op: int, undo: int | None) -> None:
    """An op is taken back only by a later one: a chain of undos always ends. One that does not
    (a damaged `undoes`, a revert's row naming a later op) is damage, never an endless walk."""
    if undo is not None and undo <= op:
        raise damaged([Problem("undoes_earlier_op", f"op {undo} undoes op {op}, which is not earlier", op=undo)])


def cancelling(conn: Conn, ops: Iterable[int], name: str | None = None) -> set[int]:
    """Those of `ops` (ops that moved ref `name`) that cancel out: each op taken back now by an
    undo (or a revert) that is among `ops` too, and that undo; and each taken back now by a
    revert that did not move `name` at all. Such a revert took back every move of the ref since
    its oldest one (else it would have been refused) and left the ref as it was before them: the
    moves it took back net out. What is left of `ops` is in effect."""
    given = set(ops)
    taken_back = undos_in_effect(conn, given)
    found = {op for pair in taken_back.items() if pair[1] in given for op in pair}
    if name is not None:
        for op, undo in taken_back.items():
            if undo not in given and conn.execute(
                "SELECT 1 FROM ref_moves WHERE op = ? AND name = ?", (undo, name)
            ).fetchone() is None:
                found.add(op)
    return found


def _newest_undos(conn: Conn, ops: Sequence[int]) -> dict[int, int]:
    """The newest undo or revert of each op of `ops` that has one."""
    found = reverts.newest_reverts_of(conn, ops)
    for chunk in reverts.chunks(ops):
        marks = ",".join("?" * len(chunk))
        for op, undo in conn.execute(f"SELECT undoes, MAX(op) FROM ops WHERE undoes IN ({marks}) GROUP BY undoes", chunk):
            found[op] = max(undo, found.get(op, undo))
    return found


def moves_after(conn: Conn, name: str, op: int) -> list[int]:
    """The ops after `op` that moved ref `name`, oldest first."""
    return [
        r[0] for r in conn.execute("SELECT op FROM ref_moves WHERE name = ? AND op > ? ORDER BY op", (name, op))
    ]


def actors_with_prefix(conn: Conn, prefix: str, limit: int) -> list[ActorRow]:
    """The actors whose name starts with `prefix`, with their newest op, by name (completion).
    One index seek per actor, on ops(actor, op)."""
    found: list[ActorRow] = []
    low, after = prefix, ">="
    matches, pattern = starts_with(conn, "actor", prefix)
    while len(found) < limit:
        row = conn.execute(
            f"SELECT actor, MAX(op) FROM ops WHERE actor = (SELECT MIN(actor) FROM ops WHERE actor {after} ? AND {matches}) "
            "GROUP BY actor",
            (low, pattern),
        ).fetchone()
        if row is None or row[0] is None:
            break
        found.append(ActorRow(row[0], row[1]))
        low, after = row[0], ">"  # the next actor after this one (no NUL: PostgreSQL keeps none in text)
    return found


# --- refs ----------------------------------------------------------------------------------


def ref_target(conn: Conn, name: str) -> str | None:
    row = conn.execute("SELECT target FROM refs WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def ref_row(conn: Conn, name: str) -> RefRow | None:
    row = conn.execute("SELECT name, target, op FROM refs WHERE name = ?", (name,)).fetchone()
    return RefRow(*row) if row else None


def list_refs(conn: Conn, prefix: str | None = None) -> list[RefRow]:
    if prefix:
        matches, pattern = starts_with(conn, "name", prefix)  # % and _ in a ref name are themselves
        rows = conn.execute(f"SELECT name, target, op FROM refs WHERE {matches} ORDER BY name", (pattern,))
    else:
        rows = conn.execute("SELECT name, target, op FROM refs ORDER BY name")
    return [RefRow(*r) for r in rows]


# --- changesets ----------------------------------------------------------------------------


def changeset_by_prefix(conn: Conn, prefix: str) -> str:
    """The full id of the one changeset whose id starts with `prefix` (lower-case hex): NotFound
    when none does, Ambiguous (with a few candidates) when more than one does."""
    found = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM changesets WHERE id >= ? AND id < ? ORDER BY id LIMIT 5",
            (prefix, prefix + "g"),
        )
    ]
    if not found:
        raise NotFound("changeset", prefix)
    if len(found) > 1:
        raise Ambiguous("changeset", prefix, found)
    return found[0]


def changesets_with_prefix(conn: Conn, prefix: str, limit: int) -> list[ChangesetBrief]:
    """The changesets whose id starts with `prefix`, newest first (completion)."""
    rows = conn.execute(
        "SELECT id, message FROM changesets WHERE id >= ? AND id < ? ORDER BY at DESC LIMIT ?",
        (prefix, prefix + "g", limit),
    )
    return [ChangesetBrief(*r) for r in rows]


def changeset_row(conn: Conn, cid: str) -> ChangesetRow | None:
    row = conn.execute(
        "SELECT id, op, message, actor, at, parents, metadata, files FROM changesets WHERE id = ?", (cid,)
    ).fetchone()
    if row is None:
        return None
    cid, op, message, actor, at, parents, metadata, files = row
    parents, metadata, files = json.loads(parents), json.loads(metadata), json.loads(files)
    if not (strings(parents, list) and strings(metadata, dict) and strings(files, dict)):
        from swarmctl.store.errors import corrupt  # a changeset's columns as no swarmctl writes them

        raise corrupt(f"changeset {cid} holds parents, metadata or files of a shape no changeset has", None)
    return ChangesetRow(cid, op, message, actor, at, parents, metadata, files)



def ref_changeset(conn: Conn, name: str, target: str) -> ChangesetRow:
    """The changeset a ref names; its absence is damage (the refs table points at changesets)."""
    row = changeset_row(conn, target)
    if row is None:
        from swarmctl.store.errors import corrupt

        raise corrupt(f"ref {name} names changeset {target}, which is not in the store", None)
    return row


def blob_sizes(conn: Conn, blob_ids: Iterable[str]) -> dict[str, int]:
    ids = list(blob_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return dict(conn.execute(f"SELECT id, size FROM blobs WHERE id IN ({marks})", ids).fetchall())

