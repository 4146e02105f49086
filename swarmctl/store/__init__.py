"""The store: what tools/ use, and nothing of the doors.

tools/ import this package and the query modules beside it (queries, records, txs,
workflows, conflicts), never a database driver. A store is opened from what `--repo` says: a path is a
local store (swarmctl/store/sqlite.py: one SQLite database in a directory), a
`postgresql://` or `postgres://` URL a store on a database server (swarmctl/store/postgres/,
whose driver, psycopg, is imported only then). Both give a `Store`:

- `Store.open(where)` / `Store.create(where, actor)`; `discover(cwd)` finds a local one;
- `store.read()`: a consistent snapshot, a `Conn` the query modules take;
- `store.write(actor)`: the one transaction helper, a `Writer` (`append_op`, `insert_changeset`,
  ...; its `conn` for the query modules' writes);
- failures of either driver come out as typed errors (`SwarmError` with a code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from swarmctl.envelope import SwarmError
from swarmctl.store.db import Move, Store, Writer
from swarmctl.store.errors import (
    Ambiguous,
    CommitUnknown,
    NoDatabase,
    NoSchema,
    NoStore,
    NotFound,
    StoreDamaged,
    not_a_repo,
    os_failure,
)
from swarmctl.store.files import discover, is_file, is_store, resolve
from swarmctl.store.sql import Conn

if TYPE_CHECKING:
    from pathlib import Path

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(where: str | Path) -> bool:
    """Is `where` a database server's URL (rather than a local store's path)?"""
    return isinstance(where, str) and where[:13].lower().startswith(URL_SCHEMES)  # a scheme is any case (RFC 3986)


# libpq's variables that carry a password (PGPASSFILE names a file: a path, not a secret).
_PASSWORD_VARIABLES = ("PGPASSWORD", "PGSSLPASSWORD")


def without_store_password(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` for a command swarmctl starts (a workflow step): the store's password neither
    in SWARMCTL_REPO (its URL is given without it) nor in libpq's variables."""
    env = {k: v for k, v in environ.items() if k not in _PASSWORD_VARIABLES}
    repo = env.get("SWARMCTL_REPO")
    if repo and is_url(repo):
        from swarmctl.store.postgres.url import shown

        env["SWARMCTL_REPO"] = shown(repo)
    return env


def backend_for(where: str | Path) -> type[Store]:
    if is_url(where):
        try:
            from swarmctl.store.postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("psycopg"):
                raise
            raise SwarmError(
                "E_UNAVAILABLE",
                "this installation of swarmctl has no PostgreSQL driver (psycopg), which a postgresql:// store needs",
                details={"driver": "psycopg", "installed": False},
                hint="Install swarmctl with its postgres extra where it is installed: `pip install -e '.[postgres]'` in a "
                "checkout's venv, `pipx install '.[postgres]'` (or `pipx inject swarmctl 'psycopg[binary]'`).",
            ) from None
        return PostgresStore
    from swarmctl.store.sqlite import SqliteStore

    return SqliteStore


Store.backend_for = staticmethod(backend_for)  # type: ignore[method-assign]


def translated(exc: BaseException, store: Store | None) -> SwarmError | None:
    """A failure that escaped the store's own helpers, as a typed error (else None): a driver's;
    text in the store that is not UTF-8 or a JSON column that is not JSON (damage); a
    filesystem failure that means something to the caller (swarmctl/store/errors.py)."""
    import json

    if store is not None and (typed := store.translated(exc)) is not None:
        return typed
    from swarmctl.spec import NotJson

    if store is not None and isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError, NotJson)):
        from swarmctl.store.errors import corrupt

        return corrupt(f"the store holds a value it cannot read: {exc}", store.path)
    if isinstance(exc, OSError):
        return os_failure(exc, store.path if store is not None else None)
    import sqlite3

    if isinstance(exc, sqlite3.Error):
        from swarmctl.store.errors import translate

        return translate(exc)
    return None


__all__ = [
    "Ambiguous",
    "CommitUnknown",
    "Conn",
    "Move",
    "NoDatabase",
    "NoSchema",
    "NoStore",
    "NotFound",
    "StoreDamaged",
    "Store",
    "Writer",
    "backend_for",
    "discover",
    "is_store",
    "is_url",
    "not_a_repo",
    "os_failure",
    "resolve",
    "translated",
    "without_store_password",
]
