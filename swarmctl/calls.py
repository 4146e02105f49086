"""Calling a tool by its name with JSON arguments: the path `swarmctl call` and the MCP server share.

Both doors end in `runner.run_json` (validation by the request type, unknown fields ignored);
this module adds what comes before it: finding the tool by name, and reading the arguments as
JSON, where a field named twice is E_INVALID_ARG rather than last-one-wins.
"""

from __future__ import annotations

from typing import Any, Mapping

from swarmctl import runner
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
    from swarmctl import schemas

    if name not in tools:
        return call_tool(name, None, ctx, tools)
    try:
        arguments = schemas.parse_arguments(text)
    except SwarmError as exc:
        return call_tool(name, None, ctx, tools, rejected=exc)
    return call_tool(name, arguments, ctx, tools)
