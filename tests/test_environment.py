"""Every environment variable swarmctl reads is documented, in the man pages and in README.

Which variables a module reads is found in its source: any `SWARMCTL_*` name it mentions (a
setting is read through a helper such as limits.seconds("SWARMCTL_LEASE_S", ...), and its error
messages name it), any string that is a `PG*` name (libpq's: a comment or a hint naming one is
not a read, a tuple of names to drop from a step's environment is), and the constant argument of
every `os.environ.get(...)`, `os.getenv(...)`, `os.environ[...]`, `... in os.environ` (NO_COLOR,
TERM). swarmctl/environment.py, the declaration itself, is not scanned.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import swarmctl
from golden import ROOT
from swarmctl.cli.options import GLOBAL_OPTIONS
from swarmctl.environment import NOT_SETTINGS, VARIABLES

PACKAGE = Path(swarmctl.__file__).parent
_MENTIONED = re.compile(r"(?<![A-Za-z0-9_])_?SWARMCTL_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_])")
_LIBPQ = re.compile(r"PG[A-Z][A-Z_]*[A-Z]")


def _environ(node: ast.AST) -> bool:
    """`os.environ` or a mapping named `environ` (a copy of it)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _constant_reads(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if (node.func.attr == "get" and _environ(node.func.value)) or node.func.attr == "getenv":
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and _environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(_environ(c) for c in node.comparators):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _LIBPQ.fullmatch(node.value):
            found.add(node.value)
    return found


def variables_read() -> dict[str, list[str]]:
    """Each variable a module of swarmctl/ reads, with the modules that read it."""
    found: dict[str, list[str]] = {}
    for path in sorted(set(PACKAGE.rglob("*.py")) - {PACKAGE / "environment.py"}):
        source = path.read_text(encoding="utf-8")
        for name in set(_MENTIONED.findall(source)) | _constant_reads(ast.parse(source)):
            found.setdefault(name, []).append(str(path.relative_to(PACKAGE.parent)))
    return found


def documented() -> list[tuple[str, str]]:
    """(name, meaning) of each variable, in the order the man page and README list them."""
    options = [(o.envvar, f"As {o.flags[0]}.") for o in GLOBAL_OPTIONS if o.envvar]
    return options + [(v.name, v.meaning) for v in VARIABLES]


def test_the_scan_finds_what_it_should():
    """The scan sees the reads of each kind (else the next test could pass by seeing nothing)."""
    read = variables_read()
    for name in ("SWARMCTL_LEASE_S", "SWARMCTL_HOST_ID", "SWARMCTL_REPO", "NO_COLOR", "TERM", "PGCONNECT_TIMEOUT", "PATH"):
        assert name in read, name
    code = "import os\nos.getenv('A')\nos.environ['B']\n'C' in os.environ\nenviron.get('D', 1)\nx.get('E')\n"
    code += "drop = ('PGXY', 'PGY Z') # PGHOST\n"
    assert _constant_reads(ast.parse(code)) == {"A", "B", "C", "D", "PGXY"}
    assert _MENTIONED.findall("f'{SWARMCTL_X_Y}' _SWARMCTL_COMPLETE SWARMCTL_ NOT_SWARMCTL_X") == ["SWARMCTL_X_Y", "_SWARMCTL_COMPLETE"]


def test_every_variable_read_is_declared():
    names = {name for name, _ in documented()}
    undeclared = {name: where for name, where in variables_read().items() if name not in names and name not in NOT_SETTINGS}
    assert not undeclared, f"declare these in swarmctl/environment.py (VARIABLES), then run `python -m swarmctl.gen`: {undeclared}"
    assert len(names) == len(documented()), "a variable declared twice"


def test_the_man_pages_environment_section_lists_them_all():
    """swarmctl(1) and each command's page, as committed (the staleness test holds them to the code)."""
    expected = [name for name, _ in documented()]
    pages = sorted((ROOT / "man").glob("*.1"))
    assert len(pages) > 20
    for page in pages:
        section = page.read_text(encoding="utf-8").split("\n.SH ENVIRONMENT\n", 1)[1].split("\n.SH ", 1)[0]
        listed = [n.replace("\\-", "-") for n in re.findall(r"^\.TP\n\\fB(.+?)\\fR$", section, re.M)]
        assert listed == expected, page.name


def test_readme_lists_them_all_as_declared():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n### Environment\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", section, re.M)
    assert rows == documented(), "README's table (## Commands, ### Environment) must list swarmctl/environment.py's VARIABLES as written"
