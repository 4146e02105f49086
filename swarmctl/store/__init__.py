"""The SQLite store: schema, the transaction helper, and queries. Knows nothing of the doors."""

from swarmctl.store.db import Move, Store, Writer
from swarmctl.store.errors import not_a_repo, os_failure, translate
from swarmctl.store.files import discover, is_store, resolve

__all__ = ["Move", "Store", "Writer", "discover", "is_store", "not_a_repo", "os_failure", "resolve", "translate"]
