"""A command's parameters, read from the fields of its tool's request type.

Each field becomes a Typer option or argument: its help is the field's description, its
metavar, flags and completion come from its `Cli`, and its type from its annotation. Typer
parses the words into values of that type; whether a value is within its field's constraints
(a Range, a Literal's words, a length) is not Typer's to say but `swarmctl.constraints`', the
check the JSON doors make too (cli/convert.py calls it). So the types below keep what the help
shows (`[1<=x<=1000]`, `<json|table>`) and the shell completes, and check nothing more.

The global options become Typer parameters here too, from their one declaration (cli/options.py):
the root's, the same ones hidden after each command, and those `swarmctl mcp` takes itself.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Annotated, Any, Literal, Optional, get_args, get_origin

import typer
from typer._click.types import IntRange
from typer._types import TyperChoice

from swarmctl import names
from swarmctl.cli.options import GLOBAL_OPTIONS, LATE
from swarmctl.spec import MAX_INT, Range, cli_of, is_op_spec, long_flag, unoptional


class Words(TyperChoice):
    """A Literal's words, for the help's metavar and for completion; any word passes."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return value


class Bounded(IntRange):
    """A whole number, as `parse_int` reads one; its bounds are shown in the help
    (`[1<=x<=1000]`), not enforced here."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, int):
            return value
        if (number := names.whole_number(value)) is not None:
            return number
        self.fail(_not_a_number(value, f"a valid {self.name}."), param, ctx)  # as Click's IntRange says it


def parse_op_spec(text: str) -> int | str:
    """An op as typed: a whole number, or @ (which numbers are ops is `constraints`' to say)."""
    text = text.strip()
    if text == "@":
        return "@"
    if not names.digits(text) or names.too_long_number(text):
        raise typer.BadParameter(_not_a_number(text, "an op number (a whole number from 1) or @"))
    return int(text)


def parse_int(text: str) -> int:
    """A whole number as git reads one: ASCII digits, maybe a sign (`names.whole_number`)."""
    value = names.whole_number(text)
    if value is None:
        raise typer.BadParameter(_not_a_number(text, "a whole number"))
    return value


def _not_a_number(text: str, wanted: str) -> str:
    """Why `text` is not `wanted`: too many digits, or not a number (long text shortened)."""
    text = text.strip()
    if names.too_long_number(text):
        return f"{text[:20]!r}… has {len(text.lstrip('+-'))} digits: a number may have at most {names.max_digits()}"
    return f"{text!r} is not {wanted}" if len(text) <= 40 else f"{text[:20]!r}… ({len(text)} characters) is not {wanted}"


def _completer(source: str) -> typing.Callable[..., Any]:
    """A completion callback that imports the completion code only when the shell asks."""

    def complete(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
        from swarmctl.cli import complete

        return complete.SOURCES[source](ctx, incomplete)

    return complete


def _parsed_as(f: dataclasses.Field, base: Any, options: dict[str, Any]) -> Any:
    """The Python type Typer parses the field as, with the parser or click type it needs in `options`."""
    bounds = None
    if get_origin(base) is Annotated:
        base, *extras = get_args(base)
        bounds = next((e for e in extras if isinstance(e, Range)), None)
    if is_op_spec(base):
        options["parser"] = parse_op_spec
        return str
    if cli_of(f).parse in ("kv", "file") or get_origin(base) is list:
        return list[str]
    if cli_of(f).parse in ("text", "json"):
        return str
    if get_origin(base) is Literal:
        options["click_type"] = Words(get_args(base))
        return str
    if base is int and (bounds is None or bounds.le == MAX_INT):
        options["parser"] = parse_int  # an op number or the like: bounded by SQLite, not worth a line of help
        return str
    if base is int:
        options["click_type"] = Bounded(bounds.ge, bounds.le)
    return base


def _default(f: dataclasses.Field, py_type: Any) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return None if py_type == list[str] else f.default_factory()  # type: ignore[misc]
    return inspect.Parameter.empty


def param(f: dataclasses.Field, annotation: Any) -> inspect.Parameter:
    """The Typer parameter of a request field."""
    cli = cli_of(f)
    base = unoptional(annotation)
    options: dict[str, Any] = {"help": f.metadata.get("description"), "show_default": False}
    if cli.metavar:
        options["metavar"] = cli.metavar
    if cli.hidden:
        options["hidden"] = True
    if cli.complete:
        options["autocompletion"] = _completer(cli.complete)
    py_type = _parsed_as(f, base, options)
    default = _default(f, py_type)
    plain = get_args(base)[0] if get_origin(base) is Annotated else base
    if plain is not bool and "metavar" not in options and get_origin(plain) is not Literal:
        options["metavar"] = "N" if plain is int else f.name.upper()
    if default not in (None, False, inspect.Parameter.empty) and not cli.positional:
        options["show_default"] = True  # e.g. `-n, --limit N  ... [default: 50]`
    if cli.positional:
        info = typer.Argument(**options)
    else:
        info = typer.Option(long_flag(f), *[flag for flag in cli.flags if not flag.startswith("--")], **options)
    if default is None:
        py_type = py_type | None
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[py_type, info])


# --- the global options (declared as data in cli/options.py) as Typer parameters ---------------


def root_parameters() -> list[inspect.Parameter]:
    """The options of `swarmctl` itself (before the command), as shown by `swarmctl --help`."""
    params = []
    for o in GLOBAL_OPTIONS:
        info = typer.Option(
            *o.flags,
            **({"envvar": o.envvar, "show_envvar": False} if o.envvar else {}),
            **({"metavar": o.metavar} if o.metavar else {}),
            help=o.help,
        )
        kind = o.kind if o.default is not None else Optional[o.kind]
        params.append(_keyword(o.name, Annotated[kind, info], o.default))
    return params


def late_parameters() -> list[inspect.Parameter]:
    """The same options after a command, hidden there (`swarmctl --help` documents them once);
    None when not given."""
    return [
        _keyword(LATE + o.name, Annotated[Optional[o.kind], typer.Option(*o.flags, metavar=o.metavar, hidden=True)], None)
        for o in GLOBAL_OPTIONS
    ]


def door_parameters() -> list[inspect.Parameter]:
    """The global options `swarmctl mcp` takes itself, shown in its help."""
    return [
        _keyword(
            o.name,
            Annotated[Optional[o.kind], typer.Option(*o.flags, metavar=o.metavar, help=o.door_help, show_default=False)],
            None,
        )
        for o in GLOBAL_OPTIONS
        if o.door_help
    ]


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
