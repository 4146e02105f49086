"""The size of the code: every function in swarmctl/ is at most 60 lines, and a module longer
than 400 lines says why at its top (in its docstring, a paragraph that starts `Why this module
is long:`). A function is counted from its `def` line to its last, docstring included."""

import ast
from pathlib import Path

from golden import ROOT

PACKAGE = ROOT / "swarmctl"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
REASON = "Why this module is long:"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_functions(path: Path) -> list[str]:
    """`line name (N lines)` of each function of `path` longer than MAX_FUNCTION_LINES."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def unexplained_length(path: Path) -> int | None:
    """The module's length, if it is over MAX_MODULE_LINES without a reason at its top."""
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    doc = ast.get_docstring(ast.parse(text)) or ""
    reason = doc[doc.find(REASON) + len(REASON):].strip() if REASON in doc else ""
    return lines if lines > MAX_MODULE_LINES and len(reason) < 40 else None


def test_every_function_is_at_most_60_lines():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in modules() for line in long_functions(path)]
    assert found == [], "functions over 60 lines:\n" + "\n".join(found)


def test_a_module_over_400_lines_says_why_at_its_top():
    found = [f"{path.relative_to(ROOT)} ({n} lines)" for path in modules() if (n := unexplained_length(path))]
    assert found == [], f"modules over {MAX_MODULE_LINES} lines without `{REASON}` at their top:\n" + "\n".join(found)


def test_the_checks_can_fail(tmp_path):
    """A function of 61 lines is found and one of 60 is not; a long module needs its reason."""
    body = "\n".join(f"    x{i} = {i}" for i in range(58))
    path = tmp_path / "sizes.py"
    path.write_text(f"def longer():\n{body}\n    y = 0\n    return y\n\n\ndef limit():\n{body}\n    return 0\n")
    assert long_functions(path) == ["1 longer (61 lines)"]
    filler = "\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES))
    path.write_text(f'"""A long module."""\n{filler}\n')
    assert unexplained_length(path) == MAX_MODULE_LINES + 1
    path.write_text(f'"""A long module.\n\n{REASON} it is a table of every case, read top to bottom."""\n{filler}\n')
    assert unexplained_length(path) is None
