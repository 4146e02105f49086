"""The list of tools: what the CLI, the MCP server, `swarmctl schema` and the generators read.

Each tool is defined once, in its area's module under `tools/` (its `TOOLS` list). AREAS says
which module defines the commands under each first word of the command line, in the order
they are listed; a command imports only its own area, so `swarmctl op log` does not pay for
building the types of workflows and transactions. A new tool is one new entry in its module's
`TOOLS` (and, for a new area, one line here); both doors, its schema, its man page and its
completion follow from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from functools import lru_cache

from swarmctl.spec import Example, Tool

# A word whose commands are defined in more than one module names them all, in order.
AREAS: dict[str, str | tuple[str, ...]] = {
    "init": "swarmctl.tools.store",
    "demo": "swarmctl.tools.store",
    "store": "swarmctl.tools.store",
    "changeset": "swarmctl.tools.changeset",
    "ref": "swarmctl.tools.ref",
    "op": ("swarmctl.tools.op", "swarmctl.tools.undo", "swarmctl.tools.revert", "swarmctl.tools.restore"),
    "tx": "swarmctl.tools.tx",
    "schema": "swarmctl.tools.schema",
    "workflow": "swarmctl.tools.workflow",
    "token": "swarmctl.tools.token",
    "policy": "swarmctl.tools.policy",
}


def _modules(word: str) -> tuple[str, ...]:
    modules = AREAS[word]
    return (modules,) if isinstance(modules, str) else modules


def _defined_in(module: str, word: str) -> list[Tool]:
    return [t for t in importlib.import_module(module).TOOLS if t.cli[0] == word]


def area(word: str) -> list[Tool]:
    """The tools whose command starts with `word` (importing only their modules)."""
    found: list[Tool] = []
    for module in _modules(word):
        found += _defined_in(module, word)
    return found


@lru_cache(maxsize=None)
def tools() -> tuple[Tool, ...]:
    found: list[Tool] = []
    for word in AREAS:
        found += area(word)
    names = [t.name for t in found]
    commands = [t.cli for t in found]
    assert len(set(names)) == len(names), "two tools share a name"
    assert len(set(commands)) == len(commands), "two tools share a command"
    return tuple(found)


def by_name() -> dict[str, Tool]:
    return {t.name: t for t in tools()}


def get(name: str) -> Tool:
    return by_name()[name]


class Named(Mapping[str, Tool]):
    """The tools by name, for a door that runs tools named by its caller (`swarmctl call`):
    a name is looked up first in the area its first word names (`ref_set` in `ref`), which
    imports only that area's modules, so a call to one tool does not pay for building every
    other's types; any other name (`undo`), and listing them, read every tool. A name found is
    kept: a long-lived door (`call --lines`) looks each one up once."""

    def __init__(self) -> None:
        self._found: dict[str, Tool] = {}

    def __getitem__(self, name: str) -> Tool:
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = self._find(name)
        return found

    def _find(self, name: str) -> Tool:
        word = name.split("_", 1)[0]
        if word in AREAS:
            found = next((t for t in area(word) if t.name == name), None)
            if found is not None:
                return found
        return by_name()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(by_name())

    def __len__(self) -> int:
        return len(tools())


def by_command(path: tuple[str, ...]) -> Tool | None:
    """The tool of the command `path`, importing its area's modules in order only until one
    defines it (so `op log` does not pay for `op revert`)."""
    if not path or path[0] not in AREAS:
        return None
    for module in _modules(path[0]):
        found = next((t for t in _defined_in(module, path[0]) if t.cli == path), None)
        if found is not None:
            return found
    return None


def examples(tool: Tool) -> tuple[Example, ...]:
    """The tool's examples, declared beside it: `EXAMPLES[tool.name]` of the area module that
    defines it (spec.Example says what reads them)."""
    for module in _modules(tool.cli[0]):
        declared = importlib.import_module(module)
        if tool in declared.TOOLS:
            return tuple(getattr(declared, "EXAMPLES", {}).get(tool.name, ()))
    return ()


def area_help(word: str) -> str | None:
    """The help of the command group `word` (`swarmctl op --help`): the first paragraph of the
    docstring of the (first) module that defines its commands."""
    doc = importlib.import_module(_modules(word)[0]).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split()) or None


def mcp_tools() -> list[Tool]:
    return [t for t in tools() if t.mcp]


def types() -> dict[str, type]:
    """Every request and result type by name, for `swarmctl schema`."""
    from swarmctl.tools.schema import types_of

    return types_of(tools())
