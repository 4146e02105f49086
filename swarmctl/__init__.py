"""swarmctl: the safe undo button for a swarmops store."""

from __future__ import annotations

from functools import cache
from typing import Any

DIST = "swarmctl"


@cache
def version() -> str:
    """The version, from the one place it is written: pyproject.toml's `version`.

    Installed (a wheel, pipx, uv or `pip install -e`), it is the distribution's metadata; run
    from a checkout that was never installed, it is read from the checkout's pyproject.toml.
    """
    from importlib import metadata

    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return _checkout_version()


def _checkout_version() -> str:
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0+unknown"
    return project["version"] if project.get("name") == DIST else "0+unknown"


def __getattr__(name: str) -> Any:
    # Looked up when asked for (--version, the MCP server, the man pages), not at every start:
    # importlib.metadata costs a short command more than the command itself.
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
