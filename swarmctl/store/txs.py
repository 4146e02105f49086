"""Staged transactions as rows: what `swarmctl tx` reads and writes (tables in schema.py).

A transaction belongs to one actor; at most one is open (Active or Conflicted) per actor per
store. Its revisions are the staged ref moves, numbered 1, 2, ...; `revision` is how many of
them currently apply (undo lowers it, redo raises it, a new stage drops those above it). Its
baselines are what each ref named when first staged: what `tx commit` compares and swaps
against. None of this is an op; only the commit appends one.

Reads take any connection; writes must run inside Store.write().
"""

from __future__ import annotations

from typing import NamedTuple

from swarmctl.store.sql import Conn

# A transaction's states; the open ones are at most one per actor. schema.py repeats them as
# literals in the txs table's CHECK and its partial index txs_open: DDL is the stored format,
# which a constant must not change under existing stores (tests/test_tx.py checks they agree).
STATES = ("Active", "Conflicted", "Committed", "RolledBack")
OPEN_STATES = STATES[:2]
# As literals in SQL, not parameters: only then can SQLite see that a query's WHERE implies
# txs_open's, and use that index.
_OPEN = "state IN ({})".format(", ".join(f"'{s}'" for s in OPEN_STATES))
DEFAULT_MAX_REVISIONS = 20
MAX_REVISIONS_LIMIT = 1000  # the most a store may allow; what `tx config` accepts
_SETTING = "tx.max_revisions"  # the store's bound, a row in `meta`


class Tx(NamedTuple):
    tx: int
    actor: str
    state: str
    base_op: int
    revision: int
    max_revisions: int
    begun_at: str
    ended_at: str | None
    op: int | None


class Revision(NamedTuple):
    revision: int
    name: str
    new: str | None  # None: the revision deletes the ref
    at: str


class Baseline(NamedTuple):
    name: str
    old: str | None  # None: the ref did not exist when first staged
    op: int  # the store's newest op when it was recorded


class StagedMove(NamedTuple):
    name: str
    old: str | None  # the baseline
    new: str | None  # what the applied revisions leave it naming


_TX_COLUMNS = "tx, actor, state, base_op, revision, max_revisions, begun_at, ended_at, op"


# --- reads ---------------------------------------------------------------------------------


def open_tx(conn: Conn, actor: str) -> Tx | None:
    row = conn.execute(
        f"SELECT {_TX_COLUMNS} FROM txs WHERE actor = ? AND {_OPEN}", (actor,)
    ).fetchone()
    return Tx(*row) if row else None


def last_tx(conn: Conn, actor: str) -> Tx | None:
    """The actor's newest transaction, open or ended."""
    row = conn.execute(
        f"SELECT {_TX_COLUMNS} FROM txs WHERE actor = ? ORDER BY tx DESC LIMIT 1", (actor,)
    ).fetchone()
    return Tx(*row) if row else None


def revisions(conn: Conn, tx: int) -> list[Revision]:
    rows = conn.execute("SELECT revision, name, new, at FROM tx_revisions WHERE tx = ? ORDER BY revision", (tx,))
    return [Revision(*r) for r in rows]


def baselines(conn: Conn, tx: int) -> dict[str, Baseline]:
    """By ref name, in the order the refs were first staged."""
    rows = conn.execute("SELECT name, old, op FROM tx_baselines WHERE tx = ? ORDER BY seq", (tx,))
    return {r[0]: Baseline(*r) for r in rows}


def staged_targets(revs: list[Revision], upto: int) -> dict[str, str | None]:
    """What revisions 1..upto leave each staged ref naming (None: deleted)."""
    staged: dict[str, str | None] = {}
    for rev in revs:
        if rev.revision > upto:
            break
        staged[rev.name] = rev.new
    return staged


def net_moves(conn: Conn, tx: Tx) -> list[StagedMove]:
    """The moves a commit would make now: one per ref whose staged target differs from its
    baseline, in the order the refs were first staged."""
    staged = staged_targets(revisions(conn, tx.tx), tx.revision)
    return [
        StagedMove(name, base.old, staged[name])
        for name, base in baselines(conn, tx.tx).items()
        if name in staged and staged[name] != base.old
    ]


def stored_max_revisions(conn: Conn) -> str:
    """The bound as the store holds it (the default's text where none is set)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_SETTING,)).fetchone()
    return str(DEFAULT_MAX_REVISIONS) if row is None else row[0]


def max_revisions(conn: Conn) -> int:
    """The store's bound on staged revisions, for transactions begun from now on. One that is
    not a bound `tx config` could set is damage (E_STORE_CORRUPT); `tx config` sets it right."""
    text = stored_max_revisions(conn)
    if not (isinstance(text, str) and text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_REVISIONS_LIMIT):
        from swarmctl.store.errors import corrupt

        raise corrupt(f"the store's {_SETTING} is {str(text)[:40]!r}, not a whole number from 1 to {MAX_REVISIONS_LIMIT}", None)
    return int(text)


# --- writes (inside Store.write) -------------------------------------------------------------


def set_max_revisions(conn: Conn, value: int) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_SETTING, str(value)),
    )


def begin(conn: Conn, actor: str, base_op: int, max_revisions: int, at: str) -> int:
    return conn.execute(
        "INSERT INTO txs(actor, state, base_op, revision, max_revisions, begun_at) "
        "VALUES (?, 'Active', ?, 0, ?, ?) RETURNING tx",
        (actor, base_op, max_revisions, at),
    ).fetchone()[0]


def stage(conn: Conn, tx: Tx, name: str, new: str | None, at: str, current: str | None, newest_op: int) -> int:
    """Stage one revision after the current one, dropping any above it (the redo branch).
    `current` is what the ref names in the store now: its baseline, if this is its first stage.
    Returns how many revisions were dropped."""
    dropped = conn.execute("DELETE FROM tx_revisions WHERE tx = ? AND revision > ?", (tx.tx, tx.revision)).rowcount
    if dropped:  # a ref only they staged is not the transaction's any more: staged again, it takes its value then
        conn.execute("DELETE FROM tx_baselines WHERE tx = ? AND name NOT IN (SELECT name FROM tx_revisions WHERE tx = ?)",
                     (tx.tx, tx.tx))
    revision = tx.revision + 1
    conn.execute(
        "INSERT INTO tx_revisions(tx, revision, name, new, at) VALUES (?, ?, ?, ?, ?)", (tx.tx, revision, name, new, at)
    )
    conn.execute(
        "INSERT INTO tx_baselines(tx, name, seq, old, op) "
        "SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ? FROM tx_baselines WHERE tx = ? "
        "ON CONFLICT(tx, name) DO NOTHING",
        (tx.tx, name, current, newest_op, tx.tx),
    )
    set_revision(conn, tx.tx, revision)
    return dropped


def set_revision(conn: Conn, tx: int, revision: int) -> None:
    conn.execute("UPDATE txs SET revision = ? WHERE tx = ?", (revision, tx))


def mark_conflicted(conn: Conn, tx: int) -> None:
    conn.execute("UPDATE txs SET state = 'Conflicted' WHERE tx = ?", (tx,))


def end(conn: Conn, tx: int, state: str, at: str, op: int | None = None) -> None:
    """End a transaction (Committed or RolledBack): its staged revisions and baselines go."""
    conn.execute("DELETE FROM tx_revisions WHERE tx = ?", (tx,))
    conn.execute("DELETE FROM tx_baselines WHERE tx = ?", (tx,))
    conn.execute("UPDATE txs SET state = ?, ended_at = ?, op = ? WHERE tx = ?", (state, at, op, tx))
