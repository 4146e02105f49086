"""The two commands that are doors rather than tools: `swarmctl mcp` and `swarmctl call`.

Each opens every tool of the registry to JSON callers; neither is in the registry itself.
They take the global --repo/--as like every command. Their imports (the MCP SDK, pydantic,
every tool area) happen when they run, so they cost other commands nothing.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

MCP_HELP = """Serve every tool over MCP (the Model Context Protocol) on stdin/stdout.

An MCP client starts this command and talks JSON-RPC to it, one message a line. `tools/list`
gives each tool's input schema, output schema (the envelope) and annotations; `tools/call`
returns the envelope as `structuredContent` and as the text of its one content block, with
`isError` true exactly when `ok` is false. The server acts on the store of --repo (else
SWARMCTL_REPO, else the store enclosing the working directory) as the actor of --as; a
missing store or a failing tool fails that call only, and the server serves on. It ends when
the client closes stdin.
"""

CALL_HELP = """Run any tool with JSON arguments, as an MCP client would, and print its envelope.

TOOL is a tool's name (`undo`, `op_log`, `ref_set`, ...: the envelope's `op`). JSON is its
arguments as one JSON object, `-` to read them from stdin; omitted, `{}`. They are validated
by the tool's request type (`swarmctl schema TYPE`). Fields it does not know are ignored,
listed in `meta.ignored` and named in a warning on stderr; a near miss of a known field
(`dryrun`, `dry-run`, `dryRun` for `dry_run`, `expected` for `expect`) is E_INVALID_ARG with
`details.did_you_mean`, and nothing is run. A field named twice is E_INVALID_ARG. Arguments
larger than SWARMCTL_MAX_INPUT_BYTES (16 MiB) or nested deeper than SWARMCTL_MAX_JSON_DEPTH
(64) are E_INVALID_ARG. An unknown TOOL is E_NOT_FOUND with the list of tools.
"""


def mcp(
    cli_ctx: typer.Context,
    repo: Annotated[
        Optional[str],
        typer.Option("--repo", "-R", metavar="PATH", help="The store, as the global --repo (here for `swarmctl mcp --repo PATH`).", show_default=False),
    ] = None,
    actor: Annotated[
        Optional[str],
        typer.Option("--as", metavar="ACTOR", help="Who the server acts as, as the global --as.", show_default=False),
    ] = None,
) -> None:
    from swarmctl import names
    from swarmctl.envelope import SwarmError

    globals_ = cli_ctx.obj
    # `swarmctl mcp --repo PATH --as ACTOR` (as MCP client configurations write it) and
    # `swarmctl --repo PATH --as ACTOR mcp` mean the same; given after `mcp`, they win.
    globals_.repo = repo or globals_.repo
    globals_.actor = actor or globals_.actor
    from swarmctl import limits

    try:
        if globals_.actor is not None:
            names.check_actor(globals_.actor)
        limits.max_json_depth(), limits.max_input_bytes()  # a bad setting fails here, not mid-serve
    except SwarmError as exc:
        _fail(exc, globals_)
    if sys.stdin.isatty():
        print(
            "swarmctl mcp: serving MCP on stdin/stdout for an MCP client (Ctrl-D ends).",
            file=sys.stderr,
        )
    from swarmctl import mcp as server

    raise typer.Exit(server.serve(globals_.repo, globals_.actor))


def _complete_tools(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    from swarmctl.cli import complete

    return complete.SOURCES["tools"](ctx, incomplete)


def call(
    cli_ctx: typer.Context,
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="The tool's name, e.g. undo or op_log.", autocompletion=_complete_tools, show_default=False)],
    arguments: Annotated[
        Optional[str],
        typer.Argument(metavar="JSON", help="The arguments as a JSON object, or - to read them from stdin. Default: {}.", show_default=False),
    ] = None,
) -> None:
    from swarmctl import registry
    from swarmctl.calls import call_text
    from swarmctl.cli.output import emit
    from swarmctl.context import Context
    from swarmctl.envelope import exit_status

    from swarmctl.envelope import Meta, SwarmError, failure

    globals_ = cli_ctx.obj
    tools = registry.by_name()
    ctx = Context(repo=globals_.repo, actor=globals_.actor)
    try:
        # stdin is read to at most SWARMCTL_MAX_INPUT_BYTES and one byte more, never to its end
        text = _stdin_text() if arguments == "-" else ("{}" if arguments is None else arguments)
    except SwarmError as exc:
        envelope = failure(tool if tool in tools else None, exc, Meta(auth=ctx.auth))
    else:
        envelope = call_text(tool, text, ctx, tools)
    ignored = envelope["meta"].get("ignored")
    if ignored:
        print(f"swarmctl call: {tool} does not know {', '.join(map(repr, ignored))}: ignored", file=sys.stderr)
    emit(envelope, globals_, tools.get(tool))
    raise typer.Exit(exit_status(envelope))


def _stdin_text() -> str:
    from swarmctl import limits
    from swarmctl.envelope import SwarmError

    data = limits.read_bounded(sys.stdin.buffer, "stdin")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SwarmError("E_INVALID_ARG", f"stdin is not UTF-8 text: {exc}", details={"input": "stdin"}) from None


def _fail(error: Any, globals_: Any) -> None:
    from swarmctl.cli.output import emit
    from swarmctl.envelope import Meta, exit_status, failure

    from swarmctl.context import Context

    envelope = failure(None, error, Meta(auth=Context(actor=globals_.actor).auth))
    emit(envelope, globals_, None)
    raise typer.Exit(exit_status(envelope))


def add_to(app: typer.Typer) -> None:
    app.command(name="mcp", help=MCP_HELP, short_help="Serve every tool over MCP on stdin/stdout.")(mcp)
    app.command(name="call", help=CALL_HELP, short_help="Run any tool with JSON arguments; print its envelope.")(call)


DOORS = ("mcp", "call")
