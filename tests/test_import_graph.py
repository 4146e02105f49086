"""swarmctl/'s module graph has no cycle, counting every import.

A deferred import (inside a function, or under `if TYPE_CHECKING:`) hides a cycle from the
interpreter, not from the reader: every `import` and `from ... import` anywhere in a module is
an edge, and so is each `importlib.import_module("...")` of a literal name; one of a name
computed at run time (the registry's) imports a tool area, so it is an edge to every module of
`registry.AREAS`. `from pkg import name` is an edge to the
submodule `pkg.name` when there is one (else to `pkg`); `import a.b` is an edge to `a.b`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import swarmctl
from swarmctl import registry

PACKAGE = Path(swarmctl.__file__).parent


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _base(module: str, node: ast.ImportFrom) -> str:
    """The package or module a `from` import names, with a relative one resolved."""
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _dynamic(node: ast.AST) -> bool:
    """`importlib.import_module(name)` of a name computed at run time."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and not (node.args and isinstance(node.args[0], ast.Constant))
    )


def _imported(module: str, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _base(module, node)
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


AREA_MODULES = {m for modules in registry.AREAS.values() for m in ((modules,) if isinstance(modules, str) else modules)}


def import_graph() -> dict[str, set[str]]:
    """Each module of swarmctl/ and the modules of swarmctl/ it imports, anywhere in it."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = AREA_MODULES if _dynamic(node) else set(_imported(name, node))
            graph[name] |= {target for target in targets if target in MODULES and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_module_graph_has_no_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles in swarmctl/ (break each: move what both sides need to a module below them):\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_the_graph_sees_deferred_and_registry_imports():
    """The checker itself: a function-level import, a TYPE_CHECKING one and the registry's are edges."""
    graph = import_graph()
    assert "swarmctl.tools.op" in graph["swarmctl.registry"]  # importlib.import_module(module), by name
    assert "swarmctl.spec" in graph["swarmctl.context"]  # under `if TYPE_CHECKING:`
    assert "swarmctl.arguments" in graph["swarmctl.runner"]  # imported inside run_json
    assert "swarmctl.cli.inert" in graph["swarmctl.cli.tables"]  # imported inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
