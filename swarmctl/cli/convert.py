"""From what Typer parsed to the tool's request: the CLI's own forms converted (repeated K=V
into a dict, file paths into their text), then the values checked against their fields'
constraints by `swarmctl.constraints`, the check the JSON doors make, with the same message."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from swarmctl import constraints
from swarmctl.envelope import SwarmError
from swarmctl.spec import Tool, cli_of, long_flag
from swarmctl.twice import twice


def request_from_cli(tool: Tool, values: dict[str, Any]) -> Any:
    """What was typed, as the tool's request."""
    for f in tool.fields():
        cli = cli_of(f)
        value = values.get(f.name)
        if cli.parse == "kv":
            values[f.name] = parse_kv(long_flag(f), value or [])
        elif cli.parse == "file":
            values[f.name] = read_files(long_flag(f), value or [], regular=True)
        elif cli.parse == "text" and value is not None:
            values[f.name] = read_text(cli.metavar or f.name.upper(), value)
        elif cli.parse == "json" and value is not None:
            values[f.name] = parse_json(cli.metavar or f.name.upper(), value)
        elif value is None and f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            values[f.name] = f.default_factory()  # type: ignore[misc]
    constraints.check(tool.request, values)
    return tool.request(**values)


def parse_kv(flag: str, items: list[str]) -> dict[str, str]:
    """Repeated KEY=VALUE as a dict; a key given twice is refused, as a field named twice is."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SwarmError("E_INVALID_ARG", f"{flag} {item!r}: expected KEY=VALUE", details={"value": item})
        pairs.append((key, value))
    if repeated := twice(key for key, _ in pairs):
        raise SwarmError("E_INVALID_ARG", f"{flag}: {', '.join(map(repr, repeated))} is given twice", details={"fields": repeated})
    return dict(pairs)


def read_text(what: str, path: str) -> str:
    """The text of the file at `path`, or of stdin for `-` (bounded, UTF-8)."""
    if path != "-":
        return next(iter(read_files(what, [path]).values()))
    from swarmctl import limits

    try:
        return limits.read_bounded(sys.stdin.buffer, "stdin").decode("utf-8")
    except UnicodeDecodeError:
        raise SwarmError("E_INVALID_ARG", f"{what} -: stdin is not UTF-8 text", details={"path": "-"}) from None


def parse_json(what: str, text: str) -> Any:
    """JSON text typed as an argument (`policy check TOOL JSON`), read as `swarmctl call` reads
    its own: bounded, and a field named twice refused (swarmctl/jsontext.py)."""
    from swarmctl import jsontext

    return jsontext.parse_arguments(text, what)


def read_files(flag: str, paths: list[str], regular: bool = False) -> dict[str, str]:
    """Each path's text by its path. `regular`: regular files only (a changeset's `--file`: a FIFO
    would wait for a writer, a device has no end); otherwise a pipe works (`<(cmd)`)."""
    from pathlib import Path

    from swarmctl import limits

    files: dict[str, str] = {}
    for path in paths:
        try:
            # at most SWARMCTL_MAX_INPUT_BYTES and one byte more (a pipe has no size to check first)
            files[Path(path).as_posix()] = limits.read_file(path, f"{flag} {path}", regular=regular).decode("utf-8")
        except limits.NotRegularFile as exc:
            raise SwarmError("E_INVALID_ARG", f"{flag} {path}: {exc.args[0]}, not a regular file", details={"path": path}) from None
        except UnicodeDecodeError:
            raise SwarmError("E_INVALID_ARG", f"{flag} {path}: not UTF-8 text", details={"path": path}) from None
        except OSError as exc:
            raise SwarmError("E_INVALID_ARG", f"{flag} {path}: {exc.strerror}", details={"path": path}) from None
    return files
