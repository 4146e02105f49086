"""Bearer tokens for `swarmctl mcp --http` (table `tokens`, see schema.py): which actor a token
names, who made it, when it expires, whether it was revoked. Only a token's SHA-256 is kept.

Every store of format 3 has the `tokens` table; one made before tokens existed, read as it is,
has none until its first write upgrades it (swarmctl/store/migrate.py), and the reads below
then find no tokens, as is true of such a store. On PostgreSQL a read asks the catalogue
first, since a failed statement would end the reading transaction.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from swarmctl.store.sql import SQLITE, Conn, dialect


class Token(NamedTuple):
    """A token's record (never its value: the store keeps only its SHA-256)."""

    id: int  # the op that made it
    actor: str  # whom it names
    created_by: str
    created_at: str
    expires_at: str
    revoked_at: str | None  # None: not revoked
    read_only: bool
    revoked_op: int | None  # the op that revoked it

    def good(self, now: str) -> bool:
        """Unrevoked and unexpired at `now` (times in the store's fixed-width format compare as text)."""
        return self.revoked_at is None and self.expires_at > now


_COLUMNS = ", ".join(Token._fields)


def digest(token: str) -> str:
    """The SHA-256 of a token, as stored."""
    import hashlib  # here: loading OpenSSL costs every command a few ms, and few hash a token

    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _exists(conn: Conn) -> bool:
    if dialect(conn) == SQLITE:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tokens'").fetchone() is not None
    return conn.execute("SELECT to_regclass('tokens') IS NOT NULL").fetchone()[0]


def _record(row: Any) -> Token:
    found = Token(*row)
    return found._replace(read_only=bool(found.read_only))  # SQLite keeps 0 and 1


def create(w: Any, token: str, actor: str, expires_at: str, read_only: bool) -> Token:
    """Record the token inside the write transaction `w` (a store.Writer, after its append_op:
    the op's number is the token's id)."""
    if w.op is None:
        raise RuntimeError("record a token after appending its op")
    w.conn.execute(
        "INSERT INTO tokens(id, digest, actor, created_by, created_at, expires_at, read_only) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (w.op, digest(token), actor, w.actor, w.at, expires_at, read_only),
    )
    return Token(w.op, actor, w.actor, w.at, expires_at, None, read_only, None)


def revoke(w: Any, token_id: int) -> None:
    """Mark the token revoked by `w`'s op (append the op first)."""
    if w.op is None:
        raise RuntimeError("revoke a token after appending its op")
    w.conn.execute("UPDATE tokens SET revoked_at = ?, revoked_op = ? WHERE id = ? AND revoked_at IS NULL", (w.at, w.op, token_id))


def get(conn: Conn, token_id: int) -> Token | None:
    if not _exists(conn):
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE id = ?", (token_id,)).fetchone()
    return _record(row) if row else None


def listed(conn: Conn) -> list[Token]:
    """Every token, oldest first."""
    if not _exists(conn):
        return []
    return [_record(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM tokens ORDER BY id")]


def by_value(conn: Conn, token: str) -> Token | None:
    """The record of the token with this value (found by its SHA-256), whatever its state."""
    if not _exists(conn):
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE digest = ?", (digest(token),)).fetchone()
    return _record(row) if row else None


def problems(conn: Conn) -> list[Any]:
    """Each token's row against the ops that made and revoked it (`store check`): those are in
    the op log's hash chain, the row is not, so a row changed by hand (whom a token names,
    whether it only reads, its revocation undone) shows here. `errors.Problem`s."""
    if not _exists(conn):
        return []
    from swarmctl.store.errors import Problem

    def op_row(op: int) -> Any:
        return conn.execute("SELECT kind, actor, at, description FROM ops WHERE op = ?", (op,)).fetchone()

    found, by_id = [], {}
    for token in listed(conn):
        by_id[token.id] = token
        said = ("token_create", token.created_by, token.created_at, made_description(token.actor, token.read_only))
        if tuple(op_row(token.id) or ()) != said:
            found.append(Problem("tokens", f"token {token.id} (for {token.actor}) is not as op {token.id}, which made it, says: its row was changed", token.id))
        revoked = op_row(token.revoked_op) if token.revoked_op is not None else None
        if (token.revoked_op is None) != (token.revoked_at is None) or revoked is not None and revoked[2] != token.revoked_at:
            found.append(Problem("tokens", f"token {token.id} says it was revoked by op {token.revoked_op} at {token.revoked_at}, which the op log does not", token.id))
    revoked_by = {t.revoked_op: t for t in by_id.values() if t.revoked_op is not None}
    revocations = conn.execute(
        "SELECT op, kind, description, undoes FROM ops WHERE kind = 'token_revoke' OR kind = 'undo' AND undoes IN (SELECT id FROM tokens)"
    ).fetchall()
    for op, kind, description, undoes in revocations:  # each in the row of the token it revoked
        token = revoked_by.get(op)
        if token is None or (undoes != token.id if kind == "undo" else description != revoked_description(token.id, token.actor)):
            found.append(Problem("tokens", f"op {op} revoked a token, which the tokens table does not say", op))
    return found


def made_description(actor: str, read_only: bool) -> str:
    """The description of the op that makes a token for `actor`."""
    return f"create a {'read-only ' if read_only else ''}token for {actor}"


def revoked_description(token_id: int, actor: str) -> str:
    """The description of the op that revokes token `token_id` of `actor`."""
    return f"revoke token {token_id} of {actor}"
