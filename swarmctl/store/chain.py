"""The op log's hash chain: each op records a BLAKE3 hash over its content and the hash of the
op before it, so that an op edited, removed or slipped in behind swarmctl's back shows.

The hash is BLAKE3-256 in key-derivation mode with the context `swarmops:op:v1` (as changeset
ids are made, with their own context), over the previous op's hash (64 hex digits; op 1 follows
GENESIS), a newline, and the op's content in the canonical JSON of changeset ids: `op`, `kind`,
`actor`, `at`, `description`, `undoes`, `ref_moves` (`[name, old, new]` in order), the ids of
the changesets it created (sorted) and, for a revert, the ops it took back (`reverts`, sorted;
the key only where there are some). `undone_by` is not content: it changes when a later op
undoes this one.

What this is and is not: anyone able to edit the database can recompute every hash after an
edit, so a rewrite is caught only against a head hash recorded elsewhere (`swarmctl store
check` prints it). The chain makes accidents and naive edits visible, not a determined insider.
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Sequence

from swarmctl.store import reverts
from swarmctl.store.changesets import canonical
from swarmctl.store.rows import MoveRow, OpHead
from swarmctl.store.sql import Conn

OP_DOMAIN = "swarmops:op:v1"
GENESIS = "0" * 64


class Link(NamedTuple):
    """One op's link in the chain, as `walk` finds it."""

    op: int
    stored: str | None  # the hash the op records (None: a format-1 store, not yet upgraded)
    computed: str  # the hash its content and the chain before it give


_HEAD = ", ".join(OpHead._fields)


def op_hash(previous: str, content: dict[str, Any]) -> str:
    from blake3 import blake3  # imported here: only writes and `store check` need it

    return blake3(previous.encode("ascii") + b"\n" + canonical(content), derive_key_context=OP_DOMAIN).hexdigest()


def content(head: OpHead, moves: list[MoveRow], changesets: list[str], reverted: Sequence[int] = ()) -> dict[str, Any]:
    """What an op's hash covers, as the JSON object it hashes (the key order is canonical's)."""
    extra = {"reverts": sorted(reverted)} if reverted else {}
    return {
        **head._asdict(),
        "ref_moves": [[m.name, m.old, m.new] for m in moves],
        "changesets": sorted(changesets),
        **extra,
    }


def op_content(conn: Conn, op: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_HEAD} FROM ops WHERE op = ?", (op,)).fetchone()
    if row is None:
        return None
    moves = [MoveRow(*m) for m in conn.execute("SELECT name, old, new FROM ref_moves WHERE op = ? ORDER BY seq", (op,))]
    made = [r[0] for r in conn.execute("SELECT id FROM changesets WHERE op = ?", (op,))]
    return content(OpHead(*row), moves, made, reverts.targets_of(conn, op))


def previous_hash(conn: Conn, op: int) -> str | None:
    """The hash the op before `op` recorded (GENESIS before op 1; None: that op has none)."""
    if op == 1:
        return GENESIS
    row = conn.execute("SELECT hash FROM ops WHERE op = ?", (op - 1,)).fetchone()
    return row[0] if row else None


def seal(conn: Conn, op: int, *, previous: str | None = None, appended: dict[str, Any] | None = None) -> str:
    """Record the hash of `op` (appended by this transaction, with all its content).

    The writer may say what it knows: `previous`, the hash of the op before (read as its
    transaction began), and `appended`, the op's content as it wrote it (a Writer sees every
    row an op is made of: its row and ref moves, the changesets it made, the ops it reverted);
    else both are read from the store."""
    previous = previous if previous is not None else previous_hash(conn, op)
    found = appended if appended is not None and appended["op"] == op else op_content(conn, op)
    if previous is None or found is None:  # no op before it (a gap: a head moved with no op), or none at all
        from swarmctl.store.errors import Problem, damaged

        raise damaged([Problem("hash_chain", f"op {op} cannot be sealed: the op before it is missing or has no hash", op)])
    digest = op_hash(previous, found)
    conn.execute("UPDATE ops SET hash = ? WHERE op = ?", (digest, op))
    return digest


def walk(conn: Conn, batch: int = 5000) -> Iterator[Link]:
    """Every op's link, in op order; what a check compares and what an upgrade stores. Reads
    in batches of ops, so a long log costs its length, not its length times three queries."""
    previous = GENESIS
    low = 0
    reverted: dict[int, list[int]] = {}
    for record in reverts.records(conn):
        reverted.setdefault(record.op, []).append(record.target)
    while True:
        rows = conn.execute(f"SELECT {_HEAD}, hash FROM ops WHERE op > ? ORDER BY op LIMIT ?", (low, batch)).fetchall()
        if not rows:
            return
        high = rows[-1][0]
        moves: dict[int, list[MoveRow]] = {}
        for op, name, old, new in conn.execute(
            "SELECT op, name, old, new FROM ref_moves WHERE op > ? AND op <= ? ORDER BY op, seq", (low, high)
        ):
            moves.setdefault(op, []).append(MoveRow(name, old, new))
        made: dict[int, list[str]] = {}
        for op, cid in conn.execute("SELECT op, id FROM changesets WHERE op > ? AND op <= ?", (low, high)):
            made.setdefault(op, []).append(cid)
        for *columns, stored in rows:
            head = OpHead(*columns)
            digest = op_hash(previous, content(head, moves.get(head.op, []), made.get(head.op, []), reverted.get(head.op, [])))
            yield Link(head.op, stored, digest)
            previous = stored if stored is not None else digest
        low = high
