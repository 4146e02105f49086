"""Where a store keeps its policy: the versions in table `policies` (schema.py POLICIES), the
newest in force. A store below POLICY_FORMAT has never had a policy and has no such table.

The rules themselves are swarmctl/policy.py's; this module reads and writes their text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from swarmctl import policy as rules
from swarmctl.store.schema import POLICY_FORMAT
from swarmctl.store.sql import Conn, stored_format


class Version(NamedTuple):
    op: int  # the op that made this version
    text: str | None  # None: no policy


def current_version(conn: Conn, known_format: int | None = None) -> Version | None:
    """The version in force (None: the store never had a policy). `known_format`: the
    format the store records, where the caller read it in this transaction (None: ask)."""
    if (known_format if known_format is not None else stored_format(conn)) < POLICY_FORMAT:
        return None
    row = conn.execute("SELECT op, text FROM policies ORDER BY op DESC LIMIT 1").fetchone()
    return Version(*row) if row is not None else None


def version_before(conn: Conn, op: int) -> Version | None:
    """The version in force just before op `op` (None: there was none)."""
    if stored_format(conn) < POLICY_FORMAT:
        return None
    row = conn.execute("SELECT op, text FROM policies WHERE op < ? ORDER BY op DESC LIMIT 1", (op,)).fetchone()
    return Version(*row) if row is not None else None


def made_by(conn: Conn, op: int) -> Version | None:
    """The version op `op` made, if it made one."""
    if stored_format(conn) < POLICY_FORMAT:
        return None
    row = conn.execute("SELECT op, text FROM policies WHERE op = ?", (op,)).fetchone()
    return Version(*row) if row is not None else None


def current(conn: Conn, known_format: int | None = None) -> rules.Policy | None:
    """The policy in force, parsed (None: the store has none); `known_format` as for
    `current_version`."""
    found = current_version(conn, known_format)
    if found is None or found.text is None:
        return None
    return _parsed(found.text, found.op)


_CACHE: dict[tuple[str, int], rules.Policy] = {}


def _parsed(text: str, op: int) -> rules.Policy:
    key = (text, op)
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        from swarmctl import policy as rules  # here: a store without a policy never needs its rules

        _CACHE[key] = rules.parse(text, op, given=False)  # the store's own: SWARMCTL_MAX_JSON_DEPTH bounds inputs
    return _CACHE[key]


def record(w: Any, op: int, text: str | None) -> None:
    """Make `text` the policy in force, as op `op`, in that op's write transaction `w` (a
    Writer), raising the store to POLICY_FORMAT at its first policy; the store's backend then
    holds the database to it too (PostgreSQL: swarmctl/store/postgres/guard.py)."""
    from swarmctl.store import migrate  # only a change of the policy needs the migrations

    migrate.raise_for_policy(w.conn)
    w.stored_format = None  # raised just now, perhaps: read it again where it is asked
    w.conn.execute("INSERT INTO policies(op, text) VALUES (?, ?)", (op, text))
    from swarmctl import policy as rules

    w.store.policy_changed(w.conn, rules.parse(text, op, given=False) if text is not None else None)


def all_versions(conn: Conn) -> list[Version]:
    """Every version, oldest first (`store copy` takes them across)."""
    if stored_format(conn) < POLICY_FORMAT:
        return []
    return [Version(*r) for r in conn.execute("SELECT op, text FROM policies ORDER BY op")]
