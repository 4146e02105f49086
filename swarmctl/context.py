"""What a tool runs with besides its request: which store, who, and what was resolved.

Both doors build a Context the same way (from --repo/--as or SWARMCTL_REPO/SWARMCTL_AS), so a
tool cannot tell which door called it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Mapping

from swarmctl import names
from swarmctl.envelope import SwarmError
from swarmctl.store import Store, discover, is_url, not_a_repo, os_failure, resolve
from swarmctl.store.files import shown
from swarmctl.store.schema import DB_FILE

if TYPE_CHECKING:
    from pathlib import Path

    from swarmctl.spec import Tool


def working_directory() -> str | None:
    """This process's working directory; None where it no longer exists (a shell left in a
    directory that was removed): then only absolute paths lead anywhere. (Paths on the way to
    a store are strings: see store/files.py.)"""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


_LOOK = object()  # Context's working directory, not looked up yet


class OpenStores:
    """The local stores a long-lived door (the MCP server, `swarmctl call --lines`) keeps open
    across its calls: one connection per store for the door's life. Opening one per call would
    cost more than a small write (the schema and format read, the -shm mapping, and a directory
    sync at the connection's first commit).

    A store is opened read-write where this process may write it (reads use the same
    connection; a read still never writes). It is opened again if its database file was
    replaced since (another store made at the same path), and never kept when it failed to
    open. A store on a database server is opened per call, as before (a dropped connection
    must not outlive the call that found it dropped).
    """

    def __init__(self) -> None:
        self._open: dict[str, tuple[Store, tuple[int, int] | None]] = {}
        # Group commit (`call --lines`): while True, a held store writes each call as a
        # savepoint of one transaction until end_groups commits it (Store.begin_group).
        self.grouping = False
        self.wrote = False
        self._lost: SwarmError | None = None
        # Where each (--repo as given, working directory) led, found once for the door's life.
        self._targets: dict[tuple[str | None, str | None], str] = {}

    def target(self, ctx: "Context") -> str:
        key = (ctx.repo, ctx.cwd)
        found = self._targets.get(key)
        if found is None:
            found = self._targets[key] = ctx.target()
        return found

    def get(self, where: str) -> tuple[Store, bool]:
        """The store at `where`, and whether it is held here (else the caller closes it)."""
        if is_url(where):
            return Store.open(where), False
        key = str(where)
        held = self._open.get(key)
        identity = _file_identity(os.path.join(key, DB_FILE))
        if held is not None:
            store, opened_as = held
            if opened_as == identity:
                if self.grouping:
                    store.begin_group()
                return store, True
            del self._open[key]
            self._end_group(store)
            store.close()
        store = Store.open(where)
        self._open[key] = (store, identity)
        if self.grouping:
            store.begin_group()
        return store, True

    def end_groups(self) -> SwarmError | None:
        """Commit each held store's group (see Store.begin_group) and stop grouping: None when
        every write since grouping began is committed, else the error that lost some of them.
        `wrote` says whether any group held its store's write lock."""
        self.grouping, self.wrote = False, False
        for store, _ in self._open.values():
            self._end_group(store)
        lost, self._lost = self._lost, None
        return lost

    def _end_group(self, store: Store) -> None:
        try:
            self.wrote = store.end_group() or self.wrote  # type: ignore[attr-defined]
        except SwarmError as exc:
            self._lost = self._lost or exc
            self.wrote = True

    def close(self) -> None:
        for store, _ in self._open.values():
            store.close()
        self._open.clear()


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class Context:
    def __init__(
        self,
        repo: str | None = None,  # as given; None: discover from cwd
        actor: str | None = None,
        cwd: str | Path | None = None,
        readonly: bool = True,
        _store: Store | None = None,
        stores: OpenStores | None = None,
        auth: str | None = None,
        json_text: bool = False,
    ) -> None:
        # The registry's tools by name, for a tool that acts on other tools (`schema`, `policy
        # check`): set by the runner, the one path from a request to an envelope. A tool module
        # cannot import the registry, which imports it (tests/test_import_graph.py).
        self.tools: Callable[[], Mapping[str, Tool]] | None = None
        self.repo = repo
        self._auth = auth  # set by a door that checked the actor itself ("token")
        self._db_auth: str | None = None  # what the store's database says of the actor (Store.auth_of)
        self.actor = actor
        self._cwd: Any = os.fspath(cwd) if cwd is not None else _LOOK  # the process's, looked up when asked
        self.readonly = readonly
        self.resolved: dict[str, Any] = {}
        self._store = _store
        self._stores = stores  # a door's open stores to borrow from (None: open and close our own)
        # A door that prints the envelope as JSON text with envelope.dumps sets this: a tool may
        # then give a long list of records as their JSON text (spec.JsonTexts), not as values.
        self.json_text = json_text
        self._borrowed = False
        # A door may set this to show progress to people (tools call it with a dict per event;
        # see tools/workflow/execute.py). None: report nothing.
        self.progress: Callable[[dict[str, Any]], None] | None = None
        # A door may set this to show warnings to people (the CLI: on stderr). None: drop them.
        self.on_warning: Callable[[str], None] | None = None
        # A door that runs no command a call brings (`mcp --http` without --allow-run) sets this
        # to the error to refuse one with; the tool asks it of the definition it read, once.
        self.refuse_commands: Callable[[], SwarmError] | None = None

    @property
    def auth(self) -> str:
        """How the actor was established: as the door says ("token": a bearer token over
        `swarmctl mcp --http`), "database" (a store on a server verified it against the policy's
        [roles]), "trust" (declared, and well-formed) or "none"."""
        if self._auth is not None:
            return self._auth
        if self._db_auth is not None:
            return self._db_auth
        return "trust" if self.actor and names.is_actor(self.actor) else "none"

    @property
    def repo_path(self) -> str | None:
        """The store's absolute path (or its server's URL without the password) once it is
        opened: the envelope's meta.repo."""
        return self._store.repo if self._store else None

    @property
    def cwd(self) -> str | None:
        """Where relative paths start, and the store is looked for: as given, else this
        process's working directory (None: it no longer exists)."""
        if self._cwd is _LOOK:
            self._cwd = working_directory()
        return self._cwd

    def path(self, given: str | Path) -> Path:
        """A path as given, from the working directory (E_INVALID_ARG: it is relative, and
        the working directory no longer exists)."""
        from pathlib import Path

        return Path(self._absolute(given))

    def _absolute(self, given: str | Path) -> str:
        """`given` from the working directory, as pathlib shows a path (files.shown)."""
        path = os.fspath(given)
        if os.path.isabs(path):
            return shown(path)
        if self.cwd is None:
            raise SwarmError(
                "E_INVALID_ARG",
                f"{str(given)!r} is a relative path, and the working directory no longer exists (it was removed)",
                details={"path": str(given)},
                hint="Give an absolute path, or cd to a directory that exists.",
            )
        return shown(os.path.join(self.cwd, path))

    def locate(self, given: str) -> str:
        """What `--repo` or `init PATH` names: a server's URL as given, or a path."""
        if is_url(given):
            return given
        path = self._absolute(given)
        try:
            return resolve(path)
        except OSError:  # a symlink loop, a name too long: opening or creating it says which, typed
            return path

    def target(self) -> str:
        """Where the store is or would be, without opening it: a path, or a server's URL."""
        if self.repo is not None and is_url(self.repo):
            return self.repo
        return self.target_path()

    def target_path(self) -> str:
        """Where the local store is or would be, without opening it."""
        if self.repo is None and self.cwd is None:
            raise SwarmError(
                "E_NOT_A_REPO",
                "no swarmops store found: the working directory no longer exists (it was removed)",
                details={"path": None},
                hint="cd to the store's directory (or one inside it), or give it with --repo PATH or SWARMCTL_REPO.",
            )
        path = self._absolute(self.repo) if self.repo is not None else self.cwd
        try:
            if self.repo is not None:
                return resolve(path)
            found = discover(path)
            if found is None:
                raise not_a_repo(resolve(path), discovered=True)
            return found
        except OSError as exc:
            raise os_failure(exc, path) or exc

    def store(self) -> Store:
        if self._store is None:
            if self._stores is not None:
                self._store, self._borrowed = self._stores.get(self._stores.target(self))
                self._store.committed.clear()  # what it committed is this call's from here (runner.stopped)
            else:
                self._store = Store.open(self.target(), readonly=self.readonly)
            self._db_auth = self._store.auth_of(self.actor)
        return self._store

    def adopt(self, store: Store) -> Store:
        """Use a store this command just made (init, demo)."""
        self.close()
        self._store, self._borrowed = store, False
        return store

    def require_actor(self, why: str = "this command changes the store") -> str:
        if not self.actor:
            raise SwarmError(
                "E_IDENTITY_REQUIRED",
                f"an identity is required: {why}",
                hint="Say who you are with --as kind/name (e.g. --as agent/worker-17) or SWARMCTL_AS.",
            )
        return names.check_actor(self.actor)

    def warn(self, message: str) -> None:
        """Tell the person running the command something they should act on (not an error)."""
        if self.on_warning is not None:
            self.on_warning(message)

    def resolve(self, given: str, meaning: Any) -> None:
        if str(given) != str(meaning):
            self.resolved[str(given)] = meaning

    def close(self) -> None:
        """Close the store this call opened (one borrowed from the door's OpenStores stays open)."""
        if self._store is not None and not self._borrowed:
            self._store.close()
