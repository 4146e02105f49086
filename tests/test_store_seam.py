"""The store seam: tools/ speak to `swarmctl.store`, never to a database driver, and the two
backends keep one schema."""

import ast
from pathlib import Path

import swarmctl

PACKAGE = Path(swarmctl.__file__).parent
DRIVERS = ("sqlite3", "psycopg", "psycopg2", "psycopg_binary")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_tool_module_imports_a_database_driver():
    found = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "tools").rglob("*.py"))
        for name in sorted(_imports(path))
        if name.split(".")[0] in DRIVERS
    ]
    assert found == []


def test_tools_import_the_store_package_and_its_query_modules_only():
    """Not a backend's module: which backend a store has is decided in swarmctl.store."""
    backends = ("swarmctl.store.sqlite", "swarmctl.store.postgres", "swarmctl.store.files", "swarmctl.store.errors")
    found = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "tools").rglob("*.py"))
        for name in sorted(_imports(path))
        if name.startswith(backends)
    ]
    assert found == []


def test_the_check_finds_a_driver_import(tmp_path):
    """The checks above can fail: they see an import of sqlite3 written either way."""
    source = tmp_path / "mod.py"
    source.write_text("import sqlite3\nfrom psycopg import sql\n")
    assert _imports(source) == {"sqlite3", "psycopg"}


def test_both_backends_have_the_same_tables_and_columns():
    """A column added to one schema and not the other fails here (store/schema.py and
    store/postgres/schema.py), not in a user's store."""
    import re
    import sqlite3

    from swarmctl.store.postgres import schema as pg
    from swarmctl.store.schema import SCHEMA

    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
    on_sqlite = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    on_postgres = {}
    for table, body in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+) \((.*?)\n\);", pg.SCHEMA, re.S):
        columns = {line.split()[0] for line in body.strip().splitlines()}
        on_postgres[table] = columns - {"PRIMARY", "UNIQUE"}
    for table, only in pg.ONLY_HERE.items():
        if only is None:
            on_postgres.pop(table)
        else:
            on_postgres[table] -= only
    assert on_postgres == on_sqlite
