"""What a failure of PostgreSQL (or of reaching it) means to the caller, as a typed error.

Decided by the SQLSTATE the server sent where there is one. A failure to connect has none
(libpq reports it as text), so there the server's FATAL message is read: a refused login or
an unknown role or database is the server answering; anything else is the server not reached.
No message here includes the password: the URL shown is the one without it, and a driver's
text is scrubbed of it too.
"""

from __future__ import annotations

import re

import psycopg

from swarmctl.envelope import SwarmError, bug
from swarmctl.store.errors import CommitUnknown, NoDatabase
from swarmctl.store.files import lock_timeout
from swarmctl.store.postgres.url import StoreUrl, scrub

_LOCK_NOT_AVAILABLE = "55P03"
_RETRY = {"40001", "40P01"}  # serialization failure, deadlock: no such failure on SQLite
_CANCELED = "57014"  # the server's statement_timeout (a role's, a database's, PGOPTIONS), or pg_cancel_backend
_GONE = {"57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004", "25P03"}
_FORBIDDEN = {"42501", "28000", "28P01"}  # privilege, authorization, password
_READ_ONLY = "25006"  # a write in a read-only transaction: a standby, or default_transaction_read_only
_MISSING = {"42P01", "3F000", "42703"}  # no such table, schema, column
_NO_ROOM = "53"  # insufficient resources: disk full, out of memory, too many connections


def translate(exc: BaseException, url: StoreUrl) -> SwarmError:
    text = scrub(str(exc).strip(), url)
    where = {"repo": url.shown}
    state = getattr(exc, "sqlstate", None)
    if isinstance(exc, psycopg.DataError) and "NUL" in text:
        return nul_in_text()
    if state == _LOCK_NOT_AVAILABLE:  # SWARMCTL_LOCK_TIMEOUT passed: the envelope SQLite's busy store gives
        return SwarmError(
            "E_BUSY",
            f"the store stayed locked past the timeout ({lock_timeout():g}s): database is locked",
            details=where,
            hint="Another process is writing; nothing was written. Retry, or raise SWARMCTL_LOCK_TIMEOUT.",
        )
    if state in _RETRY:
        return SwarmError(
            "E_BUSY",
            f"the server chose this write to retry (it conflicted with another): {text}",
            details={**where, "sqlstate": state},
            hint="Another process is writing; nothing was written. Retry.",
        )
    if state == _CANCELED:  # not a lock wait of ours: that is SWARMCTL_LOCK_TIMEOUT's 55P03 above
        return SwarmError(
            "E_BUSY",
            f"the server canceled the statement: {text}",
            details={**where, "sqlstate": state, "reason": "canceled"},
            hint="Nothing was written. The server's statement_timeout (set for this role, this database, or in "
            "PGOPTIONS) or an administrator cut it off: retry; if it recurs, raise statement_timeout for swarmctl's role.",
        )
    if state == _READ_ONLY:
        return SwarmError(
            "E_FORBIDDEN",
            f"the database server takes no writes here: {text}",
            details={**where, "reason": "read_only"},
            hint="Nothing was written; reads work. The server is a standby (point --repo at the primary), or "
            "default_transaction_read_only is on for this database or role.",
        )
    if state in _FORBIDDEN:
        return forbidden(url, f"the database server refused: {text}")
    if state in _MISSING:
        return SwarmError(
            "E_STORE_CORRUPT",
            f"the store's schema {url.schema} lacks part of its tables: {text}",
            details={**where, "sqlstate": state},
            hint="Nothing was written. Restore the store from a backup, or inspect it with `psql`.",
        )
    if state in _GONE or (state is None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))):
        return unavailable(url, f"lost the connection to the store's database server: {text}")
    if state is not None and state.startswith(_NO_ROOM):
        return unavailable(
            url, f"the store's database server has no room for this now: {text}", sqlstate=state,
            hint="Nothing was written. The server is out of a resource (disk space, memory, connections): "
            "retry once it has room.",
        )
    return bug(
        f"unexpected PostgreSQL error (a bug in swarmctl): {type(exc).__name__}: {text}",
        {**where, "exception": type(exc).__name__, "sqlstate": state},
    )


# A server that answers but cannot take a connection now (its FATAL messages, as libpq gives no
# SQLSTATE for a failed connect): all its slots are taken (max_connections, or a role's or a
# database's CONNECTION LIMIT), or it is starting up, shutting down or recovering. Not a refusal
# of who we are: E_UNAVAILABLE, safe to retry, as when it is not reached at all.
_NO_SLOT = re.compile(r"too many clients|too many connections for|connection slots are reserved")
_NOT_READY = re.compile(r"the database system is (starting up|shutting down|in recovery mode|not (yet )?accepting)")


# libpq's words for an option of the URL it cannot take, found before it tries any host (its
# parser's own failures reach psycopg as ProgrammingError): "invalid sslmode value: ...",
# "invalid integer value "x" for connection option "port"", "invalid port number: ...".
_BAD_OPTION = re.compile(r"^(?:connection is bad: )?invalid (?:\S+ value: |integer value .* for connection option |port number)")


def connect_failure(exc: BaseException, url: StoreUrl) -> SwarmError:
    """Why connecting failed: the URL cannot be used as written, or the server refused us, has
    no such database, cannot take a connection now, or was not reached."""
    text = scrub(str(exc).strip(), url)
    if isinstance(exc, psycopg.ProgrammingError) or _BAD_OPTION.search(text):
        return SwarmError(
            "E_INVALID_ARG",
            f"the store's URL cannot be used: {text.removeprefix('connection is bad: ')}",
            details={"repo": url.shown},
            hint="Nothing was tried on any server. Correct the URL: libpq's connection parameters are in "
            "PostgreSQL's documentation (\"Connection Strings\"); the README's \"Sharing a store between "
            "machines\" shows the form.",
        )
    fatal = re.search(r"FATAL:\s+(.*)", text)
    reason = fatal.group(1).strip() if fatal else ""
    if re.search(r'database ".*" does not exist', reason):
        return NoDatabase(url.shown, url.database, reason)
    if _NO_SLOT.search(reason):
        return unavailable(
            url, f"the database server has no connection free: {reason}", reason="no_connection_free",
            hint="Nothing was written. Every connection the server (or this role or database) allows is in use: "
            "retry later, or raise max_connections (or the CONNECTION LIMIT).",
        )
    if _NOT_READY.search(reason):
        return unavailable(url, f"the database server cannot take connections now: {reason}", reason="not_ready")
    if fatal:
        return forbidden(url, f"the database server refused the connection: {reason}")
    return unavailable(url, f"cannot reach the store's database server: {text}")


def unavailable(url: StoreUrl, message: str, hint: str | None = None, **details) -> SwarmError:
    where = {"repo": url.shown, **details}
    if details.get("commit_unknown"):
        return CommitUnknown(message, where)  # what to do names commands: tools/common.py says it
    hint = hint or "Nothing was written. Check that the server is up and reachable, then retry."
    return SwarmError("E_UNAVAILABLE", message, details=where, hint=hint)


def forbidden(url: StoreUrl, message: str) -> SwarmError:
    return SwarmError(
        "E_FORBIDDEN",
        message,
        details={"repo": url.shown, "reason": "server_refused"},
        hint="Nothing was written. Check the user and password (PGUSER, PGPASSWORD, ~/.pgpass) and the "
        "grants on the database and on the store's schema.",
    )


def nul_in_text() -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        "text may not contain a NUL character (U+0000)",
        hint="Remove the NUL character; no store keeps one in text.",
    )


def scrub_text(exc: BaseException, url: StoreUrl) -> str:
    return scrub(str(exc).strip(), url)
