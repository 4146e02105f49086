"""The Typer app, built from the registry: one command per tool, its options read from the
fields of the tool's request type. The command parses, runs the tool, prints the envelope.

Why this module is long: it still does four jobs (pre-scanning argv, building parameters from
request fields, converting values, the global options); issue 13 item 1 splits it by job."""

import dataclasses
import inspect
import os
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, get_args, get_origin

import typer

from swarmctl import registry, version
from swarmctl.cli import doors
from swarmctl.cli.doors import DOORS
from swarmctl.envelope import SwarmError
from swarmctl.twice import twice
from swarmctl.spec import MAX_INT, Range, Tool, cli_of, long_flag

GROUP_HELP = {
    "op": "The op log: list, show and undo operations.",
    "ref": "Refs: set, delete, list and show.",
    "changeset": "Changesets: create and show.",
    "store": "Stores as a whole: copy one into a new one, local or on a database server.",
    "tx": "Transactions: stage ref moves, then commit or roll back.",
    "workflow": "Workflows: run multi-step workflows and roll them back.",
    "store": "The store itself: check it, upgrade its format.",
    "policy": "The store's policy (who may do what): show, set and check it.",
}

HELP = """The safe undo button for a swarmops store.

Every command prints one JSON envelope on stdout (`-o table` for people) and exits with the
code of its error (0 on success). Mutations need an identity: --as kind/name or SWARMCTL_AS.
"""


class Globals:
    """The global options, as the command functions find them on the Typer context."""

    def __init__(
        self,
        repo: str | None = None,
        actor: str | None = None,
        output: str = "json",
        color: str = "auto",
        args: list[str] | None = None,
        quiet: bool = False,
    ):
        self.repo = repo
        self.actor = actor
        self.output = output
        self.color = color
        self.args = args or []  # the command line as given, for checks Click does not make
        self.quiet = quiet  # nothing on stdout; an error's code and message on one stderr line


# The global options that take a value, for finding the command word in argv before Typer
# parses it (see `tools_for`). A test holds this to the options `_global_options` declares.
GLOBAL_FLAGS = {"--repo": "--repo", "-R": "--repo", "--as": "--as", "--output": "--output", "-o": "--output", "--color": "--color"}
GLOBAL_VALUE_OPTIONS = frozenset(GLOBAL_FLAGS)


def tools_for(args: list[str]) -> list[Tool] | None:
    """The tools a command line needs built: the one it names, else its area's, else all (None).

    Building every command means importing every tool area; a command needs only its own.
    """
    words = iter(args)
    for word in words:
        if word in ("-h", "--help"):
            return None
        if word == "--version":
            return []
        if word in GLOBAL_VALUE_OPTIONS:
            next(words, None)
            continue
        if word.startswith("-"):
            continue
        if word in DOORS:
            return []  # `mcp`, `call` and `completion` find their tools themselves
        if word not in registry.AREAS:
            return None
        following = next(words, None)
        named = registry.by_command((word, following)) or registry.by_command((word,))
        return [named] if named else registry.area(word)
    return None


def options_given_twice(tool: Tool, args: list[str]) -> list[str]:
    """The options `args` gives more than once: global ones (before or after the command) and
    the tool's single-valued ones. Click would keep the last; a field named twice is an error
    at the JSON doors, and so here (`--as a ... --as b` must never pass silently).

    The words are read as Click reads them: an option that takes a value consumes the next word
    (so `-m "-mighty fix"` is one option), and nothing after `--` is an option.
    """
    hints = typing.get_type_hints(tool.request)
    own: dict[str, tuple[str, bool, bool]] = {}  # flag -> (name, takes a value, repeatable)
    for f in tool.fields():
        cli = cli_of(f)
        if not cli.positional:
            repeatable = bool(cli.parse) or get_origin(_is_optional(hints[f.name])[0]) is list
            for flag in {long_flag(f), *cli.flags}:
                own[flag] = (long_flag(f), hints[f.name] is not bool, repeatable)
    given: list[str] = []  # the single-valued options, as often as they were given
    path, in_command, i = list(tool.cli), False, 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1:
            name, joined = (word.partition("=")[0], "=" in word) if word.startswith("--") else (word[:2], len(word) > 2)
            if name in GLOBAL_FLAGS:
                key, takes_value, repeatable = GLOBAL_FLAGS[name], True, False
            elif in_command and name in own:
                key, takes_value, repeatable = own[name]
            else:
                i += 1
                continue
            if not repeatable:
                given.append(key)
            if takes_value and not joined:
                i += 1  # the option's value, whatever it looks like
        elif not in_command and path and word == path[0]:
            path.pop(0)
            in_command = not path
        i += 1
    return twice(given)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"swarmctl {version()}")
        raise typer.Exit()


def _global_options(
    ctx: typer.Context,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            "-R",
            envvar="SWARMCTL_REPO",
            metavar="PATH",
            help="The store. Default: SWARMCTL_REPO, else the nearest enclosing store of the current directory.",
            show_envvar=False,
        ),
    ] = None,
    actor: Annotated[
        str | None,
        typer.Option(
            "--as",
            envvar="SWARMCTL_AS",
            metavar="ACTOR",
            help="Who is acting, as kind/name (agent/worker-17, human/alice, ci/release). Default: SWARMCTL_AS.",
            show_envvar=False,
        ),
    ] = None,
    output: Annotated[
        Literal["json", "table", "jsonl"],
        typer.Option(
            "--output",
            "-o",
            envvar="SWARMCTL_OUTPUT",
            help="json: the envelope (default). table: the same result rendered for people. jsonl: a list "
            "result one record a line (paging keys dropped: use -n), any other result as one line, a "
            "failure as its envelope.",
            show_envvar=False,
        ),
    ] = "json",
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print nothing on stdout, for scripts that want only the exit status; a failure's "
            "code and message go to stderr, on one line.",
        ),
    ] = False,
    color: Annotated[
        Literal["auto", "always", "never"],
        typer.Option("--color", help="Colour on a terminal: auto (unless NO_COLOR is set or TERM=dumb), always, never."),
    ] = "auto",
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.obj = Globals(
        repo=repo or None, actor=actor or None, output=output, color=color, args=(ctx.obj or {}).get("argv"), quiet=quiet
    )


# --- types: from a request field's annotation to what Typer parses ---------------------------


def _parse_op_spec(text: str) -> int | str:
    """An op as typed: a number from 1 up, or @."""
    text = text.strip()
    if text == "@":
        return "@"
    if not text.isdigit():
        raise typer.BadParameter(f"{text!r} is not an op number (a whole number from 1) or @")
    value = int(text)
    if not 1 <= value <= MAX_INT:
        raise typer.BadParameter(f"{text} is out of range: op numbers run from 1 to {MAX_INT}")
    return value


def _int_parser(low: int | None, high: int) -> typing.Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not a whole number") from None
        if (low is not None and value < low) or value > high:
            raise typer.BadParameter(f"{text} is out of range: from {low} to {high}")
        return value

    return parse


def _is_optional(annotation: Any) -> tuple[Any, bool]:
    args = get_args(annotation)
    if get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return annotation, False


def _is_op_spec(annotation: Any) -> bool:
    return any(get_origin(a) is Literal and get_args(a) == ("@",) for a in get_args(annotation))


def _completer(source: str) -> typing.Callable[..., Any]:
    """A completion callback that imports the completion code only when the shell asks."""

    def complete(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
        from swarmctl.cli import complete

        return complete.SOURCES[source](ctx, incomplete)

    return complete


def _param(f: dataclasses.Field, annotation: Any) -> inspect.Parameter:
    cli = cli_of(f)
    base, _optional = _is_optional(annotation)
    bounds = None
    if get_origin(base) is Annotated:
        base, *extras = get_args(base)
        bounds = next((e for e in extras if isinstance(e, Range)), None)
    options: dict[str, Any] = {"help": f.metadata.get("description"), "show_default": False}
    if cli.metavar:
        options["metavar"] = cli.metavar
    if cli.hidden:
        options["hidden"] = True
    if cli.complete:
        options["autocompletion"] = _completer(cli.complete)
    if _is_op_spec(base):
        py_type: Any = str
        options["parser"] = _parse_op_spec
    elif cli.parse in ("kv", "file") or get_origin(base) is list:
        py_type = list[str]
    elif cli.parse in ("text", "json"):
        py_type = str
    elif base is int:
        # The bounds of `Annotated[int, Range(lo, hi)]`: the same ones pydantic holds the JSON doors to.
        low, high = (bounds.ge, bounds.le) if bounds else (None, MAX_INT)
        if high == MAX_INT:  # an op number or the like: bounded by SQLite, not worth a line of help
            py_type = str
            options["parser"] = _int_parser(low, high)
        else:
            py_type = int
            options["min"], options["max"] = low, high
    else:
        py_type = base
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = None if py_type == list[str] else f.default_factory()  # type: ignore[misc]
    else:
        default = inspect.Parameter.empty
    if base is not bool and "metavar" not in options and get_origin(base) is not Literal:
        options["metavar"] = "N" if base is int else f.name.upper()
    if default not in (None, False, inspect.Parameter.empty) and not cli.positional:
        options["show_default"] = True  # e.g. `-n, --limit N  ... [default: 50]`
    if cli.positional:
        info = typer.Argument(**options)
    else:
        flags = [long_flag(f), *[flag for flag in cli.flags if not flag.startswith("--")]]
        info = typer.Option(*flags, **options)
    if default is None:
        py_type = py_type | None
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[py_type, info]
    )


def _request_from_cli(tool: Tool, values: dict[str, Any]) -> Any:
    """What was typed, as the tool's request: the CLI's own forms (K=V, file paths) converted."""
    for f in tool.fields():
        cli = cli_of(f)
        value = values.get(f.name)
        if cli.parse == "kv":
            values[f.name] = _parse_kv(long_flag(f), value or [])
        elif cli.parse == "file":
            values[f.name] = _read_files(long_flag(f), value or [])
        elif cli.parse == "text" and value is not None:
            values[f.name] = _read_text(cli.metavar or f.name.upper(), value)
        elif cli.parse == "json" and value is not None:
            values[f.name] = _parse_json(cli.metavar or f.name.upper(), value)
        elif value is None and f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            values[f.name] = f.default_factory()  # type: ignore[misc]
        _check_length(f, values.get(f.name))
    return tool.request(**values)


def _check_length(f: dataclasses.Field, value: Any) -> None:
    """The length bounds the JSON doors check through pydantic (`arg(min_length=..)`), checked here."""
    low, high = f.metadata.get("min_length"), f.metadata.get("max_length")
    if value is None or (low is None and high is None):
        return
    if (low is not None and len(value) < low) or (high is not None and len(value) > high):
        name = cli_of(f).metavar if cli_of(f).positional else long_flag(f)
        bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"{low} to {high}"
        unit = "characters" if isinstance(value, str) else "items"
        raise SwarmError(
            "E_INVALID_ARG",
            f"{name} must be {bounds} {unit} long, not {len(value)}",
            details={"field": f.name, "min_length": low, "max_length": high, "length": len(value)},
        )


def _parse_kv(flag: str, items: list[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SwarmError("E_INVALID_ARG", f"{flag} {item!r}: expected KEY=VALUE", details={"value": item})
        if key in parsed:
            raise SwarmError("E_INVALID_ARG", f"{flag}: {key!r} is given twice", details={"fields": [key]})
        parsed[key] = value
    return parsed


def _read_text(what: str, path: str) -> str:
    """The text of the file at `path`, or of stdin for `-` (bounded, UTF-8)."""
    if path != "-":
        return next(iter(_read_files(what, [path]).values()))
    from swarmctl import limits

    try:
        return limits.read_bounded(sys.stdin.buffer, "stdin").decode("utf-8")
    except UnicodeDecodeError:
        raise SwarmError("E_INVALID_ARG", f"{what} -: stdin is not UTF-8 text", details={"path": "-"}) from None


def _parse_json(what: str, text: str) -> Any:
    import json

    from swarmctl import limits

    limits.check_size(text, what)
    limits.check_json_depth(text, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SwarmError("E_INVALID_ARG", f"{what} is not JSON: {exc}", details={"field": what}) from None


def _read_files(flag: str, paths: list[str]) -> dict[str, str]:
    from swarmctl import limits

    files: dict[str, str] = {}
    for path in paths:
        try:
            # at most SWARMCTL_MAX_INPUT_BYTES and one byte more: `--file /dev/zero` is refused, not read
            files[Path(path).as_posix()] = limits.read_file(path, f"{flag} {path}").decode("utf-8")
        except UnicodeDecodeError:
            raise SwarmError("E_INVALID_ARG", f"{flag} {path}: not UTF-8 text", details={"path": path}) from None
        except OSError as exc:
            raise SwarmError(
                "E_INVALID_ARG", f"{flag} {path}: {exc.strerror}", details={"path": path}
            ) from None
    return files


# The global options are accepted after the command too (`swarmctl op log -R store`), as gh and
# kubectl accept theirs; hidden there, since `swarmctl --help` documents them once.
_LATE_GLOBALS = {
    "late_repo": ("repo", Optional[str], typer.Option("--repo", "-R", metavar="PATH", hidden=True)),
    "late_actor": ("actor", Optional[str], typer.Option("--as", metavar="ACTOR", hidden=True)),
    "late_output": ("output", Optional[Literal["json", "table", "jsonl"]], typer.Option("--output", "-o", hidden=True)),
    "late_quiet": ("quiet", Optional[bool], typer.Option("--quiet", "-q", hidden=True)),
    "late_color": ("color", Optional[Literal["auto", "always", "never"]], typer.Option("--color", hidden=True)),
}


def _command(tool: Tool) -> typing.Callable[..., None]:
    hints = typing.get_type_hints(tool.request, include_extras=True)
    params = [inspect.Parameter("cli_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)]
    params += [_param(f, hints[f.name]) for f in tool.fields()]
    params += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind, option])
        for name, (_, kind, option) in _LATE_GLOBALS.items()
    ]

    def command(cli_ctx: typer.Context, **values: Any) -> None:
        from swarmctl.cli import invoke

        for name, (attribute, _, _) in _LATE_GLOBALS.items():
            if (given := values.pop(name)) is not None:
                setattr(cli_ctx.obj, attribute, given)

        def request() -> Any:
            if twice := options_given_twice(tool, cli_ctx.obj.args):
                raise SwarmError(
                    "E_INVALID_ARG",
                    f"{', '.join(twice)} given twice",
                    details={"fields": twice},
                    hint="Give each option once.",
                )
            return _request_from_cli(tool, values)

        invoke(tool, cli_ctx.obj, request, usage=cli_ctx.get_usage())

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = tool.name
    command.__doc__ = tool.description
    return command


def build(tools: list[Tool] | None = None) -> typer.Typer:
    app = typer.Typer(
        name="swarmctl",
        help=HELP,
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    app.callback()(_global_options)
    groups: dict[str, typer.Typer] = {}
    for tool in tools if tools is not None else registry.tools():
        parent = app
        for part in tool.cli[:-1]:
            if part not in groups:
                groups[part] = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=GROUP_HELP.get(part))
                parent.add_typer(groups[part], name=part)
            parent = groups[part]
        parent.command(name=tool.cli[-1], help=tool.description, short_help=tool.summary)(_command(tool))
    doors.add_to(app)
    return app


def wants_color(color: str) -> bool:
    if color == "never":
        return False
    if color == "always":
        return True
    # NO_COLOR (no-color.org) and TERM=dumb (a terminal that cannot show escape codes) both say no.
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
