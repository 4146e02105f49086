"""A store's URL: what libpq is given, which schema is the store, and what may be shown.

`postgresql://user:secret@host/db?schema=team_a&sslmode=require` is the schema `team_a` of the
database `db`; libpq sees the URL without `schema` (a parameter it does not know), and people
see it without the password (`meta.repo`, messages, hints), never anything else.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import quote, unquote, urlencode, urlsplit

from swarmctl.envelope import SwarmError

DEFAULT_SCHEMA = "swarmctl"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Query parameters that carry a secret: removed from what is shown.
_SECRET_PARAMS = {"password", "sslpassword"}


class StoreUrl(NamedTuple):
    libpq: str  # what libpq connects with: the URL less `schema`
    schema: str
    shown: str  # the URL less its password: meta.repo
    password: str | None  # to scrub from a driver's messages, should one repeat it
    database: str | None  # as the URL names it (None: libpq's default, the user's name)


def parse(url: str) -> StoreUrl:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # `postgresql://[::1`: an IPv6 host never closed
        raise SwarmError("E_INVALID_ARG", f"the store's URL cannot be read: {exc}", details={}) from None
    # Decoded as libpq decodes a URI's query: %XX only (parse_qsl also reads `+` as a space)
    params = [(unquote(k), unquote(v)) for k, _, v in (p.partition("=") for p in parts.query.split("&") if p)]
    schemas = [v for k, v in params if k == "schema"]
    if len(schemas) > 1:  # which one was meant? Never the last one silently
        raise SwarmError(
            "E_INVALID_ARG",
            f"the store's URL names a schema {len(schemas)} times: {', '.join(map(repr, schemas))}",
            details={"schemas": schemas},
            hint="Name the store's schema once: ?schema=NAME.",
        )
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(schema) or _reserved(schema):
        why = "a name PostgreSQL keeps for its own schemas" if _reserved(schema) else "not a plain PostgreSQL name"
        raise SwarmError(
            "E_INVALID_ARG",
            f"schema {schema!r} in the store's URL is {why}",
            details={"schema": schema},
            hint="Name a schema with lower-case letters, digits and _ (at most 63), starting with a letter or _, "
            "and not pg_ nor information_schema.",
        )
    kept = [(k, v) for k, v in params if k != "schema"]
    libpq = _join(parts.scheme, parts.netloc, parts.path, kept)
    netloc = parts.netloc
    password = parts.password
    if password is not None:
        userinfo, _, hostinfo = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}@{hostinfo}"
        password = unquote(password)
    secret_params = [v for k, v in params if k.lower() in _SECRET_PARAMS]  # ?PASSWORD= is never shown either
    shown_params = [(k, v) for k, v in params if k.lower() not in _SECRET_PARAMS]
    shown = _join(parts.scheme, netloc, parts.path, shown_params)
    database = unquote(parts.path.lstrip("/")) or None
    return StoreUrl(libpq, schema, shown, password or (secret_params[0] if secret_params else None), database)


def _reserved(schema: str) -> bool:
    """PostgreSQL's own schemas: `pg_catalog`, `pg_toast`, any `pg_` (which CREATE SCHEMA refuses)
    and `information_schema` (which a superuser could fill with a store's tables)."""
    return schema.startswith("pg_") or schema == "information_schema"


def _join(scheme: str, netloc: str, path: str, params: list[tuple[str, str]]) -> str:
    # %20 for a space, as libpq reads a URI: urlencode's default `+` reached libpq as a `+`
    # (`options=-c%20statement_timeout%3D5000` became `-c+statement_timeout=5000`)
    query = urlencode(params, safe="/", quote_via=quote)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def scrub(text: str, url: StoreUrl) -> str:
    """`text` with the URL's password (if any) taken out."""
    if url.password:
        text = text.replace(url.password, "***")
    return text


def shown(url: str) -> str:
    """The URL without its password, as meta.repo shows it (an unreadable one as it is)."""
    try:
        return parse(url).shown
    except SwarmError:
        return url
