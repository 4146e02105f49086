"""The Typer app, built from the registry: one command per tool, its options read from the
fields of the tool's request type (cli/params.py), the global options from their one
declaration (cli/options.py), each area's group help from its module's docstring. A command
parses, builds the tool's request (cli/convert.py) and runs it (cli/invoke.py). `run` parses a
command line with it: every command line but those cli/fast.py parses itself."""

from __future__ import annotations

import inspect
import os
import shlex
import sys
import typing
from functools import lru_cache
from typing import Annotated, Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError
from typer.exceptions import Abort

from swarmctl import registry, version
from swarmctl.cli import doors
from swarmctl.cli.convert import request_from_cli
from swarmctl.cli.inert import inert
from swarmctl.cli.invoke import invoke
from swarmctl.cli.options import Globals, take_late
from swarmctl.cli.params import late_parameters, param, root_parameters
from swarmctl.cli.output import emit, errors_on_stderr
from swarmctl.cli.prescan import completing, options_given_twice, printing_as, tools_for
from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, failure
from swarmctl.envelope import exit_code as exit_status_of
from swarmctl.spec import EXAMPLE_ACTOR, WORKFLOW, Tool

HELP = """The safe undo button for a swarmops store.

Every command prints one JSON envelope on stdout (`-o table` for people) and exits with the
code of its error (0 on success). Mutations need an identity: --as kind/name or SWARMCTL_AS.
"""


# What the root's --help and swarmctl(1) show as examples: a first session.
ROOT_EXAMPLES = [
    ("Make a store with a short history to try things on, and list its ops for people.", "swarmctl demo demo-store && cd demo-store && swarmctl -o table op log"),
    ("What undoing op 6 would move, then undo it, as agent/worker-17.", "swarmctl --as agent/worker-17 op undo 6 --dry-run && swarmctl --as agent/worker-17 op undo 6"),
    ("One field of the envelope, for a script: agent/worker-17's newest op (`@` is the caller's).",
     "swarmctl --as agent/worker-17 op show @ | jq -r .result.op"),
]
# A workflow id as the examples show one ("{workflow}" in an example: ids are random).
SHOWN_WORKFLOW = "wf-7k3mq2xa"


def shown_examples(tool: Tool) -> list[tuple[str, str]]:
    """The examples the command's --help ends with and its man page's EXAMPLES holds, as
    (caption, command line): those declared beside the tool with a caption, at most three."""
    shown = []
    for example in registry.examples(tool):
        if example.caption and len(shown) < 3:
            # `@` names the caller's newest op: it needs an identity in a read too
            identity = ["--as", EXAMPLE_ACTOR] if tool.needs_identity or "@" in example.cli else []
            words = [word.replace(WORKFLOW, SHOWN_WORKFLOW) for word in ("swarmctl", *identity, *example.cli)]
            shown.append((example.caption, shlex.join(words)))
    return shown


def examples_of(path: tuple[str, ...]) -> list[tuple[str, str]]:
    """The examples of the command `path` (() for swarmctl itself): (caption, command line)."""
    if not path:
        return ROOT_EXAMPLES
    if path[0] in doors.DOORS:
        return doors.EXAMPLES[path[0]]
    tool = registry.by_command(path)
    return shown_examples(tool) if tool is not None else []


def epilog(examples: list[tuple[str, str]]) -> str | None:
    """The end of a --help: its examples, each kept as written (Click's `\\b`: no rewrapping)."""
    if not examples:
        return None
    lines = ["Examples:"]
    for caption, command in examples:
        lines += ["", "\b", f"  # {caption}", f"  {command}"]
    return "\n".join(lines)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"swarmctl {version()}")
        raise typer.Exit()


def _root_callback() -> typing.Callable[..., None]:
    """The root command's callback: the global options onto `ctx.obj`, as `Globals`."""

    def global_options(ctx: typer.Context, **values: Any) -> None:
        values.pop("version", None)
        for name in ("repo", "actor"):
            values[name] = values[name] or None  # an empty SWARMCTL_REPO or --as "" is not given
        ctx.obj = Globals(args=(ctx.obj or {}).get("argv"), **values)

    version_flag = typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *root_parameters(),
        inspect.Parameter("version", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, version_flag]),
    ]
    global_options.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return global_options


def _command(tool: Tool) -> typing.Callable[..., None]:
    hints = typing.get_type_hints(tool.request, include_extras=True)
    params = [inspect.Parameter("cli_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)]
    params += [param(f, hints[f.name]) for f in tool.fields()]
    params += late_parameters()

    def command(cli_ctx: typer.Context, **values: Any) -> None:
        take_late(cli_ctx.obj, values)

        def request() -> Any:
            if twice := options_given_twice(tool, cli_ctx.obj.args):
                raise SwarmError(
                    "E_INVALID_ARG",
                    f"{', '.join(twice)} given twice",
                    details={"fields": twice},
                    hint="Give each option once.",
                )
            if tool.shown_once and cli_ctx.obj.quiet:
                raise SwarmError(
                    "E_INVALID_ARG",
                    f"-q/--quiet does not go with `{tool.command}`: it would print nothing, and the "
                    f"result's {tool.shown_once} is shown this once and never again",
                    details={"option": "--quiet"},
                    hint=f"Drop -q; `{tool.command} ... | jq -r .result.{tool.shown_once}` prints the {tool.shown_once} alone.",
                )
            return request_from_cli(tool, values)

        raise typer.Exit(invoke(tool, cli_ctx.obj, request, usage=cli_ctx.get_usage()))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = tool.name
    command.__doc__ = tool.description
    return command


def build(tools: list[Tool] | None = None) -> typer.Typer:
    app = typer.Typer(
        name="swarmctl",
        help=HELP,
        epilog=epilog(ROOT_EXAMPLES),
        no_args_is_help=True,
        # Typer's --install-completion would install Typer's scripts, which read its unsafe
        # answers: `swarmctl completion SHELL` prints ours (swarmctl/cli/shells.py).
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    app.callback()(_root_callback())
    groups: dict[str, typer.Typer] = {}
    for tool in tools if tools is not None else registry.tools():
        parent = app
        for part in tool.cli[:-1]:
            if part not in groups:
                groups[part] = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=registry.area_help(part))
                parent.add_typer(groups[part], name=part)
            parent = groups[part]
        parent.command(
            name=tool.cli[-1], help=tool.description, short_help=tool.summary, epilog=epilog(shown_examples(tool))
        )(_command(tool))
    doors.add_to(app, {door: epilog(examples) for door, examples in doors.EXAMPLES.items()})
    return app


@lru_cache(maxsize=64)
def click_command(tools: tuple[Tool, ...] | None) -> Any:
    """The Click command of the app built with `tools` (None: all). A process builds one; the
    tests, which run many command lines in one process, build each once."""
    return typer.main.get_command(build(None if tools is None else list(tools)))


def run(args: list[str]) -> int:
    """Parse `args` with Typer and run the command they name; return the exit status."""
    tools = None if completing(os.environ) else tools_for(args)
    command = click_command(None if tools is None else tuple(tools))
    if tools is None and completing(os.environ):
        from swarmctl.cli import shells

        shells.use()
    try:
        status = command.main(args, prog_name="swarmctl", standalone_mode=False, obj={"argv": list(args)})
    except NoArgsIsHelpError as exc:
        if exc.ctx is not None and exc.ctx.parent is None:
            # Bare `swarmctl`: the help on stdout, exit 0, as `--help` (and gh and kubectl) do.
            print(exc.ctx.get_help())
            return 0
        return _usage_error(exc, args)
    except UsageError as exc:
        if exc.ctx is None:  # Click raises "Option '--x' requires an argument." without one
            exc.ctx = _named_command(command, args)
        return _usage_error(exc, args)
    except Abort:
        print("Aborted.", file=sys.stderr)
        return 130
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):  # Typer's exit 1 for `--help | head -1`:
            return 0  # a closed pipe ends quietly, as a command's envelope does
        raise
    return status if isinstance(status, int) else 0


def _named_command(command: Any, args: list[str]) -> Any:
    """A context of the deepest command that `args` name (for the error's `op` and usage)."""
    from typer._click.core import Context as ClickContext

    ctx = ClickContext(command, info_name="swarmctl", **command.context_settings)
    for word in args:
        found = ctx.command.get_command(ctx, word) if hasattr(ctx.command, "get_command") else None
        if found is not None:
            ctx = ClickContext(found, info_name=word, parent=ctx, **found.context_settings)
    return ctx


def _bad_setting(exc: UsageError) -> str | None:
    """The environment variable whose value Click refused, if the refused value came from one
    (SWARMCTL_OUTPUT, SWARMCTL_REPO, ...), not from the command line."""
    param = getattr(exc, "param", None)
    variable = getattr(param, "envvar", None)
    ctx = exc.ctx
    if not isinstance(variable, str) or variable not in os.environ or ctx is None or param.name is None:
        return None
    source = ctx.get_parameter_source(param.name)
    return variable if source is not None and source.name == "ENVIRONMENT" else None


def _usage_error(exc: UsageError, args: list[str]) -> int:
    """Bad usage is an envelope too: E_INVALID_ARG, the usage text in details and on stderr."""
    click_ctx = exc.ctx
    tool = registry.by_command(tuple(click_ctx.command_path.split()[1:])) if click_ctx is not None else None
    usage = click_ctx.get_usage() if click_ctx is not None else None
    where = click_ctx.command_path if click_ctx is not None else "swarmctl"
    # With no command Click "fails" with the whole help as its message: say what is missing.
    message = f"missing command: `{where}` needs one" if isinstance(exc, NoArgsIsHelpError) else exc.format_message()
    # Click lists a missing choice's values a line and a tab each ("Choose from:\n\tbash,\n\tzsh"):
    # one line, as every other message is (on stderr the tabs read as \x09: inert escapes them).
    message = " ".join(part.strip() for part in message.split("\n\t"))
    if isinstance(exc, NoSuchOption) and (exc.option_name or "")[1:].isdigit():  # `op show -1`
        message += " (a negative number reads as an option, and none is valid here)"
    details: dict[str, Any] = {"usage": usage}
    variable = _bad_setting(exc)
    if variable is not None:  # Click names the option; the value came from the variable
        message = f"{variable}={os.environ[variable]!r} is not a valid value: {message}"
        details = {"variable": variable, "value": os.environ[variable], **details}
    error = SwarmError("E_INVALID_ARG", message, details=details, hint=f"Run `{where} --help` for usage.")
    # How to print it: as the command line asks, wherever on it (-o after the command too), since
    # Click stopped before it read all of it.
    printing = printing_as(args, os.environ)
    if not printing.quiet:
        if isinstance(exc, NoArgsIsHelpError):
            exc.show(file=sys.stderr)  # the help text, ours
        else:
            # As Click's `exc.show()`, which would echo a bad argument as given, controls and all.
            if click_ctx is not None:
                print(f"{usage}\nTry '{where} {click_ctx.help_option_names[0]}' for help.\n", file=sys.stderr)
            if not errors_on_stderr(printing):
                print(f"Error: {inert(message)}", file=sys.stderr)
    globals_ = click_ctx.find_object(Globals) if click_ctx is not None else None
    auth = Context(actor=globals_.actor if globals_ else None).auth
    if globals_ is not None:
        printing.color = globals_.color
    emit(failure(tool.name if tool else None, error, Meta(auth=auth)), printing, tool)
    return exit_status_of("E_INVALID_ARG")
