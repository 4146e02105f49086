"""The reads of `op revert` and `op restore`, and the one write of a revert besides its op: the
ops it took back (table `op_reverts`, see schema.py). Every query here is bounded by an index.

A format-1 store, read as it is (reads never upgrade a store), may have no `op_reverts` table;
the reads below then find no reverts, as is true of such a store.
"""

from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from swarmctl.store.sql import Conn


class RevertRecord(NamedTuple):
    """One op a revert took back."""

    op: int  # the revert op
    target: int  # the op it took back
    kind: str  # the revert op's kind (a sound store: always "revert")


class OpMove(NamedTuple):
    """One ref move, with the op that made it: `old` None, it created the ref; `new` None, it
    deleted it."""

    op: int
    name: str
    old: str | None
    new: str | None


class OpKind(NamedTuple):
    kind: str
    undoes: int | None  # the op it undoes (an undo), else None

# Op numbers per `IN (...)` list: under SQLite's smallest bound on query parameters (999).
_CHUNK = 900


def chunks(ops: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ops), _CHUNK):
        yield ops[start : start + _CHUNK]


def _no_table(exc: Exception) -> bool:
    """SQLite's error for a store made before reverts existed (a PostgreSQL store always has
    the table, so there the error is a real one and goes on up)."""
    return "no such table: op_reverts" in str(exc)


# --- which ops a revert took back --------------------------------------------------------------


def reverts_of(conn: Conn, op: int) -> list[int]:
    """The revert ops that took `op` back, oldest first."""
    try:
        return [r[0] for r in conn.execute("SELECT op FROM op_reverts WHERE target = ? ORDER BY op", (op,))]
    except Exception as exc:
        if _no_table(exc):
            return []
        raise


def reverted_among(conn: Conn, ops: Sequence[int]) -> set[int]:
    """The ops of `ops` that some revert took back (whether or not that revert still holds)."""
    found: set[int] = set()
    try:
        for chunk in chunks(ops):
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in conn.execute(f"SELECT DISTINCT target FROM op_reverts WHERE target IN ({marks})", chunk))
    except Exception as exc:
        if not _no_table(exc):
            raise
    return found


def newest_reverts_of(conn: Conn, ops: Sequence[int]) -> dict[int, int]:
    """The newest revert that took back each op of `ops` that one took back."""
    found: dict[int, int] = {}
    try:
        for chunk in chunks(ops):
            marks = ",".join("?" * len(chunk))
            found.update(conn.execute(f"SELECT target, MAX(op) FROM op_reverts WHERE target IN ({marks}) GROUP BY target", chunk))
    except Exception as exc:
        if not _no_table(exc):
            raise
    return found


def targets_of(conn: Conn, revert_op: int) -> list[int]:
    """The ops the revert `revert_op` took back, oldest first."""
    try:
        return [r[0] for r in conn.execute("SELECT target FROM op_reverts WHERE op = ? ORDER BY target", (revert_op,))]
    except Exception as exc:
        if _no_table(exc):
            return []
        raise


def records(conn: Conn) -> list[RevertRecord]:
    """Every op a revert took back, by revert op and target, for the store's consistency check."""
    try:
        return [RevertRecord(*r) for r in conn.execute(
            "SELECT r.op, r.target, o.kind FROM op_reverts r JOIN ops o ON o.op = r.op ORDER BY r.op, r.target"
        )]
    except Exception as exc:
        if _no_table(exc):
            return []
        raise


def record(w: Any, targets: Iterable[int]) -> None:
    """Record, inside the write transaction `w` (a store.Writer, after its append_op), that its
    op took `targets` back. The table is there: a write upgrades a format-1 store first."""
    if w.op is None:
        raise RuntimeError("record a revert's targets after appending its op")
    targets = list(targets)
    w.conn.executemany("INSERT INTO op_reverts(op, target) VALUES (?, ?)", [(w.op, t) for t in targets])
    w.reverted.extend(targets)  # the op's content, for its hash (Writer.seal)


# --- the ops and ref moves a selection is made of ------------------------------------------------


def ref_moves_of(conn: Conn, ops: Sequence[int]) -> list[OpMove]:
    """Every ref move the ops made, in op order (and each op's order)."""
    found: list[OpMove] = []
    for chunk in chunks(sorted(ops)):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT op, name, old, new FROM ref_moves WHERE op IN ({marks}) ORDER BY op, seq"
        found += (OpMove(*r) for r in conn.execute(sql, chunk))
    return found


def kinds_of(conn: Conn, ops: Sequence[int]) -> dict[int, OpKind]:
    """op -> its kind and what it undoes, for each of `ops`."""
    found: dict[int, OpKind] = {}
    for chunk in chunks(ops):
        marks = ",".join("?" * len(chunk))
        found.update((op, OpKind(kind, undoes)) for op, kind, undoes in conn.execute(
            f"SELECT op, kind, undoes FROM ops WHERE op IN ({marks})", chunk
        ))
    return found


# --- the refs as they were after an op (restore) -------------------------------------------------


def refs_moved_after(conn: Conn, op: int) -> list[str]:
    """The names of the refs that ops after `op` moved, by name. Costs the moves since `op`."""
    return [r[0] for r in conn.execute("SELECT DISTINCT name FROM ref_moves WHERE op > ? ORDER BY name", (op,))]


def ref_target_after(conn: Conn, name: str, op: int) -> str | None:
    """What ref `name` named right after op `op` (None: it did not exist then)."""
    row = conn.execute(
        "SELECT new FROM ref_moves WHERE name = ? AND op <= ? ORDER BY op DESC LIMIT 1", (name, op)
    ).fetchone()
    return row[0] if row else None


def ref_ever_moved(conn: Conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM ref_moves WHERE name = ? LIMIT 1", (name,)).fetchone() is not None


def ops_after(conn: Conn, op: int, limit: int) -> list[int]:
    """The first `limit` ops after `op`, oldest first."""
    return [r[0] for r in conn.execute("SELECT op FROM ops WHERE op > ? ORDER BY op LIMIT ?", (op, limit))]
