"""E_CAS_MISMATCH: a ref is not what an operation expected. Every tool that refuses a move for
that reason builds its error here, so `error.details.conflicts` has one shape everywhere:
`[{name, expected, actual, moved_by}]`, where `moved_by` lists the ops that moved the ref after
the caller's baseline (oldest first) or, with no baseline, the op that last moved it."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Protocol, Sequence

from swarmctl.envelope import SwarmError
from swarmctl.store import queries
from swarmctl.store.sql import Conn


class Conflict(NamedTuple):
    """A ref that does not name what an operation expected (None: absent)."""

    name: str
    expected: str | None
    actual: str | None
    moved_by: list[int]


class Expected(Protocol):
    """What a ref should name now: a `Move` (its `old`) or anything with the same two fields."""

    @property
    def name(self) -> str: ...

    @property
    def old(self) -> str | None: ...


def find(
    conn: Conn, moves: Iterable[Expected], since: int | Mapping[str, int] | None,
    now: Mapping[str, str | None] | None = None,
) -> list[Conflict]:
    """The refs of `moves` that do not name their `old` now, in the order given.

    `since` is the baseline op the caller checked the refs at (one for all, or one per ref
    name): `moved_by` lists the ops after it that moved the ref. None: the op that last moved it.
    `now`: what refs will name when the move is made, where that is not what the store holds
    (a prediction: see undo.plan_undo).
    """
    found = []
    for m in moves:
        row = queries.ref_row(conn, m.name)
        actual = now[m.name] if now is not None and m.name in now else row.target if row else None
        if actual == m.old:
            continue
        baseline = since.get(m.name) if isinstance(since, Mapping) else since
        if baseline is not None:
            moved_by = queries.moves_after(conn, m.name, baseline)
        else:
            moved_by = [row.op] if row else []
        found.append(Conflict(m.name, m.old, actual, moved_by))
    if found:
        _refuse_if_damaged(conn, [c.name for c in found])
    return found


def _refuse_if_damaged(conn: Conn, names: list[str]) -> None:
    """A ref that disagrees with its own last move in the op log did not move: it was edited
    behind the op log. That is damage (E_STORE_CORRUPT), not a conflict to retry."""
    from swarmctl.store.check import ref_problems
    from swarmctl.store.errors import damaged

    problems = ref_problems(conn, names)
    if problems:
        raise damaged(problems)


def listed(conflicts: Sequence[Conflict]) -> str:
    """The conflicting refs' names, for a message: `main, release/v1`."""
    return ", ".join(c.name for c in conflicts)


def cas_mismatch(
    conflicts: Sequence[Conflict],
    message: str | None = None,
    *,
    hint: str = "Nothing was written. Re-read the refs and try again.",
    next: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> SwarmError:
    """The E_CAS_MISMATCH for `conflicts`. `details` are the caller's own keys (they come
    first, `conflicts` last); `hint` and `next` say what that caller's user should do."""
    return SwarmError(
        "E_CAS_MISMATCH",
        message or f"refs moved under the operation: {listed(conflicts)}",
        details={**(details or {}), "conflicts": [c._asdict() for c in conflicts]},
        hint=hint,
        next=next,
    )
