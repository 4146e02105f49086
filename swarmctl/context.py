"""What a tool runs with besides its request: which store, who, and what was resolved.

Both doors build a Context the same way (from --repo/--as or SWARMCTL_REPO/SWARMCTL_AS), so a
tool cannot tell which door called it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from swarmctl import names
from swarmctl.envelope import SwarmError
from swarmctl.store import Store, discover, is_url, not_a_repo


class Context:
    def __init__(
        self,
        repo: str | None = None,  # as given; None: discover from cwd
        actor: str | None = None,
        cwd: Path | None = None,
        readonly: bool = True,
        _store: Store | None = None,
    ) -> None:
        self.repo = repo
        self.actor = actor
        self.cwd = cwd if cwd is not None else Path.cwd()
        self.readonly = readonly
        self.resolved: dict[str, Any] = {}
        self._store = _store
        # A door may set this to show progress to people (tools call it with a dict per event;
        # see tools/workflow/execute.py). None: report nothing.
        self.progress: Callable[[dict[str, Any]], None] | None = None

    @property
    def auth(self) -> str:
        """How the actor was established: "trust" (declared, and well-formed) or "none"."""
        return "trust" if self.actor and names.ACTOR_RE.match(self.actor) else "none"

    @property
    def repo_path(self) -> str | None:
        """The store's absolute path (or its server's URL without the password) once it is
        opened: the envelope's meta.repo."""
        return self._store.repo if self._store else None

    def target(self) -> str | Path:
        """Where the store is or would be, without opening it: a path, or a server's URL."""
        if self.repo is not None and is_url(self.repo):
            return self.repo
        return self.target_path()

    def target_path(self) -> Path:
        """Where the local store is or would be, without opening it."""
        if self.repo is not None:
            return (self.cwd / self.repo).resolve()
        found = discover(self.cwd)
        if found is None:
            raise not_a_repo(self.cwd.resolve(), discovered=True)
        return found

    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open(self.target(), readonly=self.readonly)
        return self._store

    def adopt(self, store: Store) -> Store:
        """Use a store this command just made (init, demo)."""
        self.close()
        self._store = store
        return store

    def require_actor(self, why: str = "this command changes the store") -> str:
        if not self.actor:
            raise SwarmError(
                "E_IDENTITY_REQUIRED",
                f"an identity is required: {why}",
                hint="Say who you are with --as kind/name (e.g. --as agent/worker-17) or SWARMCTL_AS.",
            )
        return names.check_actor(self.actor)

    def resolve(self, given: str, meaning: Any) -> None:
        if str(given) != str(meaning):
            self.resolved[str(given)] = meaning

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
