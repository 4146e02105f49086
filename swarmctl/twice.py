"""The one check for a name given twice, at every door: a JSON field (`swarmctl call`, MCP,
swarmctl/jsontext.py) or a command-line option (swarmctl/cli/). Given twice is E_INVALID_ARG,
never last-one-wins. A module of its own, importing nothing, because every command line is
checked with it and must not pay for JSON reading."""

from __future__ import annotations

from typing import Iterable


def twice(names: Iterable[str]) -> list[str]:
    """The names that occur more than once in `names`, each once, in the order they repeat."""
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for name in names:
        if name in seen:
            repeated[name] = None
        seen.add(name)
    return list(repeated)
