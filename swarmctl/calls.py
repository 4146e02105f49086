"""Calling a tool by its name with JSON arguments: the path `swarmctl call` and the MCP server share.

Both doors end in `runner.run_json` (validation by the request type, unknown fields ignored);
this module adds what comes before it: finding the tool by name, and reading the arguments as
JSON, where a field named twice is E_INVALID_ARG rather than last-one-wins; and, for
`swarmctl call --lines`, reading one call from each line of JSON Lines.
"""

from __future__ import annotations

from typing import Any, Mapping

from swarmctl import jsontext, runner
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, failure
from swarmctl.spec import Tool


def unknown_tool(name: str, tools: Mapping[str, Tool]) -> SwarmError:
    return SwarmError(
        "E_NOT_FOUND",
        f"no tool {name!r}",
        details={"tool": name, "tools": sorted(tools)},
        hint="`details.tools` lists the tools; `swarmctl schema` prints their request types.",
    )


def call_tool(
    name: str,
    arguments: Any,
    ctx: Context,
    tools: Mapping[str, Tool],
    *,
    rejected: SwarmError | None = None,
) -> dict[str, Any]:
    """The envelope of tool `name` run on JSON `arguments`. Never raises.

    `rejected` is what was wrong with the arguments' JSON text, found before it was parsed
    (a field named twice): the call fails with it and runs nothing.
    """
    tool = tools.get(name)
    if tool is None:
        return failure(None, unknown_tool(name, tools), Meta(auth=ctx.auth))
    if rejected is not None:
        return failure(tool.name, rejected, Meta(auth=ctx.auth))
    return runner.run_json(tool, arguments, ctx)


def call_text(name: str, text: str, ctx: Context, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """As `call_tool`, with the arguments as JSON text (`swarmctl call`)."""
    if name not in tools:
        return call_tool(name, None, ctx, tools)
    try:
        arguments = jsontext.parse_arguments(text)
    except SwarmError as exc:
        return call_tool(name, None, ctx, tools, rejected=exc)
    return call_tool(name, arguments, ctx, tools)


# --- `swarmctl call --lines`: many calls, one JSON object a line ---------------------------

LINE_FIELDS = ("tool", "arguments", "id")


def call_line(line: str, ctx: Context, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """The envelope of one line of `swarmctl call --lines`: `{"tool": NAME, "arguments": {...},
    "id": ...}` (`arguments` optional, `{}`; `id` optional, any JSON value, echoed as `meta.id`).
    A line that is not such an object is E_INVALID_ARG and runs nothing. Never raises."""
    try:
        call = jsontext.parse_arguments(line)
    except SwarmError as exc:
        return failure(None, exc, Meta(auth=ctx.auth))
    if not isinstance(call, dict):
        return failure(None, _bad_line("a line must be a JSON object", {}), Meta(auth=ctx.auth))
    unknown = [key for key in call if key not in LINE_FIELDS]
    name = call.get("tool")
    if unknown:
        error = _bad_line(f"unknown field(s) {', '.join(map(repr, unknown))} in a call", {"fields": unknown})
        envelope = failure(name if name in tools else None, error, Meta(auth=ctx.auth))
    elif not isinstance(name, str):
        envelope = failure(None, _bad_line('a call names its tool as a string: "tool": NAME', {"field": "tool"}), Meta(auth=ctx.auth))
    else:
        envelope = call_tool(name, call.get("arguments", {}), ctx, tools)
    if "id" in call:
        envelope["meta"]["id"] = call["id"]
    return envelope


def _bad_line(message: str, details: dict[str, Any]) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        message,
        details={**details, "known": list(LINE_FIELDS)},
        hint='Write one call a line: {"tool": "ref_set", "arguments": {"name": "main", "target": "3f9a"}, "id": 1}.',
    )
