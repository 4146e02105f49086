"""Tokens: bearer tokens that name actors, for `swarmctl mcp --http`. CLI-only, with a store
policy too: over MCP a token holder could mint one for anyone (a policy's admins make them)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Annotated

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import MAX_INT, Annotations, Cli, READ, Range, Tool, arg, request_type, result_type, Example, Call
from swarmctl.store import tokens

DEFAULT_EXPIRES = "90d"


@result_type
class TokenEntry:
    id: int  # the op that created it
    actor: str
    created_by: str
    created_at: str
    expires_at: str
    revoked_at: str | None
    read_only: bool


@result_type
class TokenCreateResult:
    id: int
    actor: str
    expires_at: str
    read_only: bool
    op: int
    token: str  # the one place the token's value ever appears


@result_type
class TokenListResult:
    tokens: list[TokenEntry]


@result_type
class TokenRevokeResult:
    id: int
    actor: str
    revoked_at: str
    op: int


@request_type
class TokenCreateReq:
    actor: str = arg(description="The actor the token names (kind/name), e.g. agent/worker-17.", cli=Cli(positional=True, metavar="ACTOR", complete="actors"))
    expires: str = arg(
        DEFAULT_EXPIRES,
        description="How long it is valid: a duration (90s, 15m, 2h, 30d) or an RFC 3339 time.",
    )
    read_only: bool = arg(False, description="The token may call only tools that do not write (others: E_FORBIDDEN).")


@request_type
class TokenListReq:
    pass


@request_type
class TokenRevokeReq:
    id: Annotated[int, Range(1, MAX_INT)] = arg(description="The token's id (`token list`).", cli=Cli(positional=True, metavar="ID"))


def _expiry(text: str, at: str) -> str:
    """When a token made at `at` (the op's time) expires."""
    seconds = names.duration_seconds(text)
    if seconds == 0:  # as a time not ahead (below): a token that expires as it is made
        raise _never_works(text, "is no time at all")
    if seconds is not None:
        moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
        try:
            return names.format_time(moment + timedelta(seconds=seconds))
        except OverflowError:
            pass
        raise SwarmError("E_INVALID_ARG", f"--expires {text}: too far ahead", details={"field": "expires", "value": text})
    try:
        until = names.parse_time(text, field="expires")
    except SwarmError as exc:  # its hint is the filters' (a duration before now): an expiry is ahead
        exc.hint = _AHEAD
        raise
    if until <= at:
        raise _never_works(text, "is in the past")
    return until


def _never_works(text: str, why: str) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        f"--expires {text} {why}: the token would never work",
        details={"field": "expires", "value": text},
        hint=_AHEAD,
    )


_AHEAD = (
    "Give a duration from now, such as 30d, 12h or 90m, or a time ahead: RFC 3339 (2030-01-31T12:00:00Z) "
    "or a date (2030-01-31, UTC)."
)


def token_create(ctx: Context, req: TokenCreateReq) -> TokenCreateResult:
    """Make a bearer token naming ACTOR for `swarmctl mcp --http`, as one op: `swt_` and 32
    random URL-safe bytes. Its value is printed once, here (`result.token`), and never again:
    the store keeps only its SHA-256, the actor, who made it and when. `--expires` takes a
    duration (`30d`) or a time (default 90d); `--read-only` makes a token whose calls of tools
    that write are E_FORBIDDEN. `op undo` of the op revokes the token. A malformed ACTOR is
    E_INVALID_ARG. Once the store has a policy, only its admins may (E_FORBIDDEN)."""
    creator = ctx.require_actor()
    actor = names.check_actor(req.actor)
    _expiry(req.expires, names.now())  # a bad --expires is refused before the store is opened
    value = "swt_" + secrets.token_urlsafe(32)
    store = ctx.store()
    with store.write(creator) as w:
        rules.refuse(rules.may_admin(w.policy, creator, "manage tokens"))
        expires_at = _expiry(req.expires, w.at)
        op = w.append_op("token_create", tokens.made_description(actor, req.read_only))
        tokens.create(w, value, actor, expires_at, req.read_only)
    return TokenCreateResult(id=op, actor=actor, expires_at=expires_at, read_only=req.read_only, op=op, token=value)


def token_list(ctx: Context, req: TokenListReq) -> TokenListResult:
    """List the store's tokens, oldest first: id, actor, who made each and when, when it
    expires, when it was revoked (null: not revoked) and whether it is read-only. Never a
    token's value."""
    store = ctx.store()
    with store.read() as conn:
        found = tokens.listed(conn)
    return TokenListResult(tokens=[TokenEntry(t.id, t.actor, t.created_by, t.created_at, t.expires_at, t.revoked_at, t.read_only) for t in found])


def token_revoke(ctx: Context, req: TokenRevokeReq) -> TokenRevokeResult:
    """Revoke a token, as one op: from then on a request bearing it is refused (HTTP 401), on a
    session opened before too. A revoke is final: its `op undo` is E_REFUSED. No such token:
    E_NOT_FOUND; a token already revoked: E_STATE. Once the store has a policy, only its
    admins may (E_FORBIDDEN)."""
    actor = ctx.require_actor()
    store = ctx.store()
    with store.write(actor) as w:
        rules.refuse(rules.may_admin(w.policy, actor, "manage tokens"))
        found = tokens.get(w.conn, req.id)
        if found is None:
            raise SwarmError(
                "E_NOT_FOUND", f"no token {req.id}", details={"token": req.id}, hint="`swarmctl token list` lists the tokens."
            )
        if found.revoked_at is not None:
            raise SwarmError(
                "E_STATE",
                f"token {req.id} ({found.actor}) was revoked at {found.revoked_at} by op {found.revoked_op}",
                details={"token": req.id, "revoked_at": found.revoked_at, "op": found.revoked_op},
                hint=f"Nothing to do: a revocation is final. `swarmctl token create {found.actor}` makes a new token.",
            )
        op = w.append_op("token_revoke", tokens.revoked_description(req.id, found.actor))
        tokens.revoke(w, req.id)
    return TokenRevokeResult(id=req.id, actor=found.actor, revoked_at=w.at, op=op)


_WRITE = Annotations(read_only=False, destructive=False, idempotent=False)

# Why the token commands are not MCP tools (Tool.cli_only).
_NO_TOKEN_HOLDER = "a token holder must not be able to mint a token for someone else, so the token commands are CLI-only"

TOKEN_CREATE = Tool(
    name="token_create",
    cli=("token", "create"),
    title="Create a token",
    summary="Make a bearer token naming an actor, for `mcp --http` (printed once).",
    request=TokenCreateReq,
    result=TokenCreateResult,
    run=token_create,
    annotations=_WRITE,
    mutates=True,
    cli_only=_NO_TOKEN_HOLDER,
    shown_once="token",
)
TOKEN_LIST = Tool(
    name="token_list",
    cli=("token", "list"),
    title="List tokens",
    summary="List tokens (never their values).",
    request=TokenListReq,
    result=TokenListResult,
    run=token_list,
    annotations=READ,
    mutates=False,
    cli_only=_NO_TOKEN_HOLDER,
    records="tokens",
)
TOKEN_REVOKE = Tool(
    name="token_revoke",
    cli=("token", "revoke"),
    title="Revoke a token",
    summary="Revoke a token (final).",
    request=TokenRevokeReq,
    result=TokenRevokeResult,
    run=token_revoke,
    annotations=Annotations(read_only=False, destructive=True, idempotent=False),
    mutates=True,
    cli_only=_NO_TOKEN_HOLDER,
)

TOOLS = [TOKEN_CREATE, TOKEN_LIST, TOKEN_REVOKE]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
# Tokens are CLI-only; on the demo store, the first token made is op 7.
EXAMPLES = {
    "token_create": (
        Example(
            ("token", "create", "agent/worker-42", "--expires", "30d"),
            {"actor": "agent/worker-42", "expires": "30d"},
            caption="A token for agent/worker-42, valid for 30 days (printed once).",
        ),
    ),
    "token_list": (
        Example(("token", "list"), {}, caption="List the store's tokens.", setup=(Call("token_create", {"actor": "agent/worker-42", "read_only": True}),)),
    ),
    "token_revoke": (
        Example(("token", "revoke", "7"), {"id": 7}, caption="Revoke token 7.", setup=(Call("token_create", {"actor": "agent/worker-42"}),)),
    ),
}
