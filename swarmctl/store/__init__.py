"""The SQLite store: schema, the transaction helper, and queries. Knows nothing of the doors."""

from swarmctl.store.db import Move, Store, Writer, discover, is_store, not_a_repo, translate

__all__ = ["Move", "Store", "Writer", "discover", "is_store", "not_a_repo", "translate"]
