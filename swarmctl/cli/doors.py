"""The commands that are not tools: the doors `swarmctl mcp` and `swarmctl call`, and
`swarmctl completion SHELL`.

`mcp` and `call` open every tool of the registry to JSON callers; neither is in the registry
itself. They take the global --repo/--as like every command. Their imports (the MCP SDK,
pydantic, every tool area) happen when they run, so they cost other commands nothing.
`completion` prints a shell's completion script, as gh, kubectl and jj do: pipx and uv link no
completions, and zsh and fish never look inside a virtual environment.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Annotated, Any, Literal, Optional

import typer

from swarmctl.cli.params import door_parameters
from swarmctl.cli.prescan import DOORS

MCP_HELP = """Serve every tool over MCP (the Model Context Protocol) on stdin/stdout, or over HTTP.

An MCP client starts this command and talks JSON-RPC to it, one message a line. `tools/list`
gives each tool's input schema, output schema (the envelope) and annotations; `tools/call`
returns the envelope as `structuredContent` and as the text of its one content block, with
`isError` true exactly when `ok` is false. The server acts on the store of --repo (else
SWARMCTL_REPO, else the store enclosing the working directory) as the actor of --as; a
missing store or a failing tool fails that call only, and the server serves on. It ends when
the client closes stdin, or at once on Ctrl-C or SIGTERM (exit 130; a call under way is
stopped, its write rolled back, and answered E_INTERRUPTED).

With --http HOST:PORT (127.0.0.1:8765, [::1]:8765, 0.0.0.0:8765; port 0: any free port) it
serves the same tools over MCP's Streamable HTTP at http://HOST:PORT/mcp for any number of
clients, says `listening on http://HOST:PORT/mcp` on stderr, and serves until SIGINT or
SIGTERM; then it runs no new call (E_UNAVAILABLE) and answers the calls under way, waiting up
to 30 s for them (a second Ctrl-C: not at all). With --auth token (the default) each request's `Authorization: Bearer TOKEN` names
its actor (`swarmctl token create ACTOR` makes tokens; meta.auth is "token"); a missing,
unknown, expired or revoked token is HTTP 401, and --as is refused. --auth trust acts as --as,
as stdio does, and only on a loopback address. Requests whose Host is not an allowed host
(default: the bound address and, on a loopback or wildcard address, 127.0.0.1, localhost and
[::1] with its port) get HTTP 421; an Origin that is not allowed gets 403. What would run a
command on this host is E_FORBIDDEN unless --allow-run: a workflow_run of a workflow with
command steps, a workflow_resume that would run one, a confirmed workflow_rollback that would
run rollback commands.
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

With --lines (and no TOOL), it reads JSON Lines from stdin, one call a line:
{"tool": "ref_set", "arguments": {...}, "id": 7} (arguments optional; id optional, any JSON
value, echoed as meta.id), and prints one envelope a line, in order, once the call's write is
committed, on one open store. Each call is its own op and writes all of itself or nothing; a
failing call does not stop the rest unless --stop-on-error is given. Lines already waiting on
stdin commit together, each a savepoint of one transaction synced once (ref_*, changeset_*,
op_log, op_show, undo; any other tool runs alone). Blank lines are skipped. The exit status is 0
when every call succeeded, else the exit code of the first failure.
"""


def mcp(cli_ctx: typer.Context, **given: Any) -> None:
    from swarmctl import limits, names
    from swarmctl.envelope import SwarmError

    globals_ = cli_ctx.obj
    http = {name: given.pop(name) for name in HTTP_PARAMETERS}
    # `swarmctl mcp --repo PATH --as ACTOR` (as MCP client configurations write it) and
    # `swarmctl --repo PATH --as ACTOR mcp` mean the same; given after `mcp`, they win.
    for name, value in given.items():
        setattr(globals_, name, value or getattr(globals_, name))

    try:
        if globals_.actor is not None:
            names.check_actor(globals_.actor)
        limits.max_json_depth(), limits.max_input_bytes()  # a bad setting fails here, not mid-serve
    except SwarmError as exc:
        _fail(exc, globals_)
    http_only = {
        "--auth": http["auth"], "--allowed-host": http["allowed_host"],
        "--allowed-origin": http["allowed_origin"], "--allow-run": http["allow_run"],
    }
    _serve_http(cli_ctx, http["http"], http_only)  # with --http: serves, and exits
    if sys.stdin.isatty():
        print(
            "swarmctl mcp: serving MCP on stdin/stdout for an MCP client (Ctrl-D ends).",
            file=sys.stderr,
        )
    from swarmctl import mcp as server

    raise typer.Exit(server.serve(globals_.repo, globals_.actor))


# The options `mcp` takes itself besides the global ones: those of `swarmctl mcp --http`.
HTTP_PARAMETERS = {
    "http": Annotated[
        Optional[str],
        typer.Option("--http", metavar="HOST:PORT", help="Serve over Streamable HTTP at http://HOST:PORT/mcp instead of stdio.", show_default=False),
    ],
    "auth": Annotated[
        Optional[str],
        typer.Option("--auth", metavar="token|trust", help="With --http: token (each request's bearer token names its actor; the default) or trust (act as --as; loopback only).", show_default=False),
    ],
    "allowed_host": Annotated[
        Optional[list[str]],
        typer.Option("--allowed-host", metavar="HOST[:PORT]", help="With --http: a Host header to accept besides the defaults (repeatable), e.g. the name a proxy passes.", show_default=False),
    ],
    "allowed_origin": Annotated[
        Optional[list[str]],
        typer.Option("--allowed-origin", metavar="ORIGIN", help="With --http: an Origin header to accept (repeatable), e.g. https://mcp.example.com.", show_default=False),
    ],
    "allow_run": Annotated[
        bool, typer.Option("--allow-run", help="With --http: let workflow_run, workflow_resume and workflow_rollback run workflows' commands on this host.")
    ],
}

# The global options `mcp` takes itself, as cli/options.py declares them (`door_help`), and its own.
mcp.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("cli_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
        *door_parameters(),
        *(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False if name == "allow_run" else None, annotation=kind)
            for name, kind in HTTP_PARAMETERS.items()
        ),
    ]
)

def _serve_http(cli_ctx: typer.Context, address: str | None, flags: dict[str, Any]) -> None:
    """`swarmctl mcp --http HOST:PORT`: serve until stopped, then exit. Without --http, the
    flags that go with it are bad usage."""
    if address is None:
        given = [flag for flag, value in flags.items() if value]
        if given:
            from typer._click.exceptions import UsageError

            raise UsageError(f"{', '.join(given)}: only with --http HOST:PORT", ctx=cli_ctx)
        return
    from swarmctl import http_address
    from swarmctl.envelope import SwarmError

    globals_ = cli_ctx.obj
    try:
        host, port = http_address.parse_address(address)
        from swarmctl.http_timely import read_timeout_s

        options = http_address.Options(
            host, port, globals_.repo, globals_.actor, flags["--auth"] or "token",
            flags["--allowed-host"] or [], flags["--allowed-origin"] or [], flags["--allow-run"], read_timeout_s(),
        )
        # What cannot be served is refused, and the socket bound, before the server's stack
        # (the MCP SDK, uvicorn: a second to import) is.
        http_address.check(options)
        sock = http_address.listen(options.host, options.port)
        from swarmctl import mcp_http

        raise typer.Exit(mcp_http.serve(options, sock))
    except SwarmError as exc:
        _fail(exc, globals_)


def _complete_tools(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    from swarmctl.cli import complete

    return complete.SOURCES["tools"](ctx, incomplete)


def call(
    cli_ctx: typer.Context,
    tool: Annotated[
        Optional[str],
        typer.Argument(metavar="TOOL", help="The tool's name, e.g. undo or op_log.", autocompletion=_complete_tools, show_default=False),
    ] = None,
    arguments: Annotated[
        Optional[str],
        typer.Argument(metavar="JSON", help="The arguments as a JSON object, or - to read them from stdin. Default: {}.", show_default=False),
    ] = None,
    lines: Annotated[
        bool, typer.Option("--lines", help="Read calls from stdin as JSON Lines; print one envelope a line.")
    ] = False,
    stop_on_error: Annotated[
        bool, typer.Option("--stop-on-error", help="With --lines: run no more calls after the first that fails.")
    ] = False,
) -> None:
    from typer._click.exceptions import UsageError

    from swarmctl.cli import invoke

    globals_ = cli_ctx.obj
    if lines:
        if tool is not None:
            raise UsageError("--lines reads its calls from stdin: give no TOOL or JSON", ctx=cli_ctx)
        # Its output is JSON Lines, each call's envelope a line: -q or -o table would be ignored.
        # (SWARMCTL_OUTPUT, a shell's preference for every command, is: --lines is for programs.)
        if globals_.quiet:
            raise UsageError("-q/--quiet does not go with --lines: each call's envelope is a line of stdout", ctx=cli_ctx)
        if globals_.output != "json" and os.environ.get("SWARMCTL_OUTPUT") != globals_.output:
            raise UsageError(f"-o {globals_.output} does not go with --lines: each call's envelope is a line of JSON", ctx=cli_ctx)
        raise typer.Exit(_call_lines(globals_, stop_on_error))
    if stop_on_error:
        raise UsageError("--stop-on-error goes with --lines", ctx=cli_ctx)
    if tool is None:
        raise UsageError("Missing argument 'TOOL'.", ctx=cli_ctx)
    # stdin is read to at most SWARMCTL_MAX_INPUT_BYTES and one byte more, never to its end
    read = invoke.stdin_text if arguments == "-" else (lambda: "{}" if arguments is None else arguments)
    raise typer.Exit(invoke.call(globals_, tool, read))


def _call_lines(globals_: Any, stop_on_error: bool) -> int:
    """`call --lines`: each line of stdin a call, each envelope a line of stdout (calls.Batch)."""
    from swarmctl import limits
    from swarmctl.calls import Batch
    from swarmctl.cli.invoke import utf8
    from swarmctl.context import Context, working_directory
    from swarmctl.envelope import Meta, SwarmError, dumps, failure
    from swarmctl.envelope import exit_code as exit_status_of

    try:  # the bounds every line is held to: a bad one is the batch's one answer, before any line is read
        limits.max_input_bytes()
        limits.max_json_depth()
    except SwarmError as exc:
        _write_line(dumps(failure(None, exc, Meta())))
        return exit_status_of(exc.code)
    cwd = working_directory()  # where --repo is taken from, or the store discovered: the same for every line
    batch = Batch(lambda stores: Context(repo=globals_.repo, actor=globals_.actor, cwd=cwd, stores=stores, json_text=True),
                  lambda envelope: _write_line(dumps(envelope)), stop_on_error)

    def text(raw: bytes | None) -> str:
        if raw is None:
            raise limits.too_big("a line of stdin", limits.max_input_bytes())
        return utf8(raw, "a line of stdin")

    try:
        # Each line is held to SWARMCTL_MAX_INPUT_BYTES: a longer one is refused, never held whole.
        for run in limits.read_lines(sys.stdin.buffer):
            for raw in run:
                if (raw is None or raw.strip()) and not batch.call(lambda: text(raw)):
                    return batch.status
            if not batch.flush():  # the next line is not here yet: answer those before it
                return batch.status
    except KeyboardInterrupt as exc:  # waiting for a line, or held back while envelopes were printed
        batch.stopped_by(exc)
    finally:
        batch.close()
    return batch.status


def _write_line(text: str) -> bool:
    """Write one line to stdout now (a caller reads each result as it comes); False when the
    pipe is closed."""
    from swarmctl.cli.output import write_lines

    return write_lines(text + "\n")


COMPLETION_HELP = """Print the completion script for SHELL (bash, zsh or fish) on stdout.

The script is the one the wheel installs under share/ (and completions/ holds in a checkout):
on TAB it asks swarmctl what to offer, so `swarmctl op undo <TAB>` offers the store's recent
ops it can take back (with their descriptions in zsh and fish), and ref, workflow and tool
names where those are asked for.
Load it in the shell's start-up file: bash `eval "$(swarmctl completion bash)"` in ~/.bashrc;
zsh `eval "$(swarmctl completion zsh)"` in ~/.zshrc after compinit; fish
`swarmctl completion fish > ~/.config/fish/completions/swarmctl.fish` once.
"""


def completion(
    shell: Annotated[Literal["bash", "zsh", "fish"], typer.Argument(metavar="SHELL", help="bash, zsh or fish.", show_default=False)],
) -> None:
    from swarmctl.gen import completions

    sys.stdout.write(completions.script(shell))
    raise typer.Exit(0)


def _fail(error: Any, globals_: Any) -> None:
    from swarmctl.cli.output import emit
    from swarmctl.envelope import Meta, exit_status, failure

    from swarmctl.context import Context

    envelope = failure(None, error, Meta(auth=Context(actor=globals_.actor).auth))
    emit(envelope, globals_, None)
    raise typer.Exit(exit_status(envelope))


# Each door's examples, as --help ends with them and its man page shows them: (caption, command).
EXAMPLES = {
    "mcp": [
        ("Serve the store in ./store as agent/worker-17 (what an MCP client's configuration runs).", "swarmctl mcp --repo ./store --as agent/worker-17"),
        ("Serve it over HTTP to agents anywhere, each naming its actor by a token from `swarmctl token create`.", "swarmctl mcp --repo ./store --http 127.0.0.1:8765"),
    ],
    "call": [
        ("The two newest ops, called as an MCP client would.", """swarmctl call op_log '{"limit": 2}'"""),
        ("Undo op 6, the arguments read from stdin.", """echo '{"op": 6}' | swarmctl --as agent/worker-17 call undo -"""),
        ("Many calls, one JSON object a line; one envelope a line back.", "swarmctl --as agent/worker-17 call --lines < calls.jsonl"),
    ],
    "completion": [
        ("Complete swarmctl's commands, ops and refs in bash (in ~/.bashrc).", 'eval "$(swarmctl completion bash)"'),
        ("The same for fish, once.", "swarmctl completion fish > ~/.config/fish/completions/swarmctl.fish"),
    ],
}


def add_to(app: typer.Typer, epilogs: dict[str, str | None]) -> None:
    """Add the doors to `app`, each --help ending with `epilogs[name]` (its EXAMPLES, as app.py writes them)."""
    app.command(name="mcp", help=MCP_HELP, short_help="Serve every tool over MCP on stdin/stdout or HTTP.", epilog=epilogs["mcp"])(mcp)
    app.command(
        name="call", help=CALL_HELP, short_help="Run any tool with JSON arguments; print its envelope.", epilog=epilogs["call"]
    )(call)
    app.command(
        name="completion",
        help=COMPLETION_HELP,
        short_help="Print the shell completion script for bash, zsh or fish.",
        epilog=epilogs["completion"],
    )(completion)

