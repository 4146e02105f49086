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
    found = _metadata_version()
    if found is not None:
        return found
    from importlib import metadata

    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return _checkout_version()


def _metadata_version() -> str | None:
    """The `Version:` of the first swarmctl metadata directory on sys.path, as importlib.metadata
    finds it (a `.dist-info`, or an `.egg-info` a checkout may hold), without importing it, which
    costs `swarmctl --version` more than the rest of its start. None: look the slow way (no such
    directory, or a sys.path entry that is not a directory, such as a zip)."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return None
        except OSError:
            continue
        for name in sorted(names):
            stem, _, kind = name.rpartition(".")
            if kind in ("dist-info", "egg-info") and stem.partition("-")[0].lower().replace("_", "-") == DIST:
                headers = os.path.join(entry or ".", name, "METADATA" if kind == "dist-info" else "PKG-INFO")
                return _version_header(headers)
    return None


def _version_header(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as text:
            for line in text:
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
                if not line.strip():
                    break  # the headers end at the first blank line
    except OSError:
        pass
    return None


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
