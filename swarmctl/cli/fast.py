"""The hot commands parsed without Typer: `swarmctl op log -n 20` need not import it.

Typer and its Click are most of what a short command costs at start (bench/core.py). So a
command line that names a tool whose fields are all plain (text, a whole number, an op as `N`
or `@`, one of a Literal's words, an off-by-default flag), written in the plain forms (`--flag
VALUE`, `--flag=VALUE`, `-n VALUE`, a bare flag, positional words; the global options before
the command or after it), is read here, from the same registry fields and the same global
option declarations (cli/options.py) Typer's parser is built from. Its request is built by the
same code (cli/convert.py, with the constraint check) and run by the same cli/invoke.py.
So is `swarmctl call TOOL [JSON]` (JSON `-`: from stdin; the global options before `call`, as
Typer takes them; not --lines), which cli/invoke.py's `call` runs for both parsers.

This parse never decides an error. Whatever it does not read exactly as Typer would (--help,
`--`, a word or option it does not know, an option given twice, a value not plainly of its
type, a value the constraint check refuses, a bad SWARMCTL_OUTPUT, shell completion) makes it
decline, and Typer parses the command line as ever, with its own errors, usage and help. Both
parsers give the same request, or this one declines: tests/test_fast_parse.py holds them to it
for every example and parity case and for variants of each.
"""

import dataclasses
import errno
import os
import sys
import typing
from typing import Annotated, Any, Literal, Mapping, NamedTuple, get_args, get_origin

from swarmctl import registry, version
from swarmctl.cli.convert import request_from_cli
from swarmctl.cli import invoke as invoking
from swarmctl.cli.options import GLOBAL_OPTIONS, GlobalOption, Globals
from swarmctl.cli.prescan import completing, options_given_twice
from swarmctl.names import digits, too_long_number
from swarmctl.spec import Tool, cli_of, is_op_spec, long_flag, unoptional

# Words that are Typer's alone: its help, and the end of options.
TYPER_ONLY = frozenset({"-h", "--help", "--"})
GLOBAL_FLAGS: dict[str, GlobalOption] = {flag: o for o in GLOBAL_OPTIONS for flag in o.flags}


class Parsed(NamedTuple):
    """A command line read: the tool it names, the global options, the tool's request (or the
    Ctrl-C or SIGTERM that came while it was made, reading a file it names)."""

    tool: Tool
    globals_: Globals
    request: Any

    def made(self) -> Any:
        if isinstance(self.request, KeyboardInterrupt):
            raise self.request
        return self.request


class ParsedCall(NamedTuple):
    """`swarmctl call TOOL [JSON]` read: the global options, the tool's name, the JSON text
    (None: stdin's, `-`)."""

    globals_: Globals
    name: str
    text: str | None


class Field(NamedTuple):
    """A request field as the command line gives it: `kind` is how its words are read
    ("text", "word", "int", "op" or "flag")."""

    name: str
    kind: str
    positional: bool
    flags: tuple[str, ...]  # an option's, the long one first


def version_asked(args: list[str], environ: Mapping[str, str]) -> bool:
    """`swarmctl --version` alone (the root's eager --version prints it before anything else)."""
    return args == ["--version"] and not completing(environ)


def print_version() -> int:
    print(f"swarmctl {version()}")  # as the root's --version (cli/app.py) echoes it
    return 0


def parse(args: list[str], environ: Mapping[str, str]) -> Parsed | ParsedCall | None:
    """`args` read as Typer would read them, or None: Typer's to read."""
    if completing(environ) or TYPER_ONLY.intersection(args):
        return None
    root, i = _global_options(args)
    if root is None or i >= len(args):
        return None
    if args[i] == "call":
        return _call(args, root, args[i + 1 :], environ)
    if args[i] not in registry.AREAS:
        return None
    tool = _tool_at(args, i)
    fields = plain_fields(tool) if tool is not None else None
    if tool is None or fields is None:
        return None
    read = _command_words(args[i + len(tool.cli) :], fields)
    if read is None:
        return None
    late, values = read
    globals_ = _globals(args, root, late, environ)
    if globals_ is None or options_given_twice(tool, args) or (tool.shown_once and globals_.quiet):
        return None
    if (complete := _with_defaults(tool, values)) is None:
        return None
    try:
        request = request_from_cli(tool, complete)
    except KeyboardInterrupt as exc:  # reading a file it names (a pipe, a FIFO): the command says so
        request = exc
    except Exception:  # an E_INVALID_ARG with its usage text, or anything else: Typer's to tell
        return None
    return Parsed(tool, globals_, request)


def _call(args: list[str], root: dict[str, Any], words: list[str], environ: Mapping[str, str]) -> ParsedCall | None:
    """`call TOOL [JSON]`: one or two words after `call`, neither an option (JSON may be `-`,
    stdin); the `call` command takes no global option after it (cli/doors.py)."""
    if not 1 <= len(words) <= 2 or any(word.startswith("-") for word in words if word != "-") or words[0] == "-":
        return None
    globals_ = _globals(args, root, {}, environ)
    if globals_ is None:
        return None
    text = words[1] if len(words) == 2 else "{}"
    return ParsedCall(globals_, words[0], None if text == "-" else text)


def run(parsed: Parsed | ParsedCall) -> int:
    """Run a parsed command; what escapes the tool ends as Typer's `main` ends it."""
    try:
        if isinstance(parsed, ParsedCall):
            text = parsed.text
            return invoking.call(parsed.globals_, parsed.name, invoking.stdin_text if text is None else lambda: text)
        return invoking.invoke(parsed.tool, parsed.globals_, parsed.made)
    except KeyboardInterrupt:  # also SIGTERM (Terminated) while printing: typer.core._main's Exit(130)
        return 130
    except EOFError:
        print(file=sys.stderr)
        print("Aborted.", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)  # as Click's PacifyFlushWrapper: nothing more to say
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
        return 1


def _tool_at(args: list[str], i: int) -> Tool | None:
    if i + 1 < len(args) and (tool := registry.by_command((args[i], args[i + 1]))) is not None:
        return tool
    return registry.by_command((args[i],))


def plain_fields(tool: Tool) -> list[Field] | None:
    """The tool's fields, if each is plain and no flag of its is a global option's; else None."""
    hints = typing.get_type_hints(tool.request, include_extras=True)
    fields = []
    for f in tool.fields():
        kind = _kind(f, hints[f.name])
        flags = {long_flag(f), *cli_of(f).flags}
        if kind is None or (not cli_of(f).positional and flags & GLOBAL_FLAGS.keys()):
            return None
        fields.append(Field(f.name, kind, cli_of(f).positional, (long_flag(f), *sorted(flags - {long_flag(f)}))))
    return fields


def _kind(f: dataclasses.Field, annotation: Any) -> str | None:
    """How cli/params.py has Typer read the field, when that is plain; None otherwise."""
    if cli_of(f).parse:
        return None
    base = unoptional(annotation)
    if get_origin(base) is Annotated:
        base = get_args(base)[0]
    if is_op_spec(base):
        return "op"
    if get_origin(base) is Literal:
        return "word"
    if base is bool:
        return "flag" if f.default is False and not cli_of(f).positional else None
    return {int: "int", str: "text"}.get(base)


def _value(kind: str, word: str) -> Any:
    """The word as Typer converts it for a field of `kind`, or None where it is not plainly one."""
    if kind in ("int", "op") and digits(word) and not too_long_number(word):
        return int(word)
    if kind == "op" and word == "@":
        return "@"
    return word if kind in ("text", "word") else None


def _option(args: list[str], i: int, known: Mapping[str, Any], is_flag: typing.Callable[[Any], bool]):
    """The option at args[i] among `known` flags: (what it is, its word or True, the next index),
    or None where it is not plainly one (unknown, `-nVALUE`, a flag given `=`, no value)."""
    flag, joined, value = args[i].partition("=") if args[i].startswith("--") else (args[i], "", "")
    if flag not in known:
        return None
    if is_flag(known[flag]):
        return None if joined else (known[flag], True, i + 1)
    if joined:
        return known[flag], value, i + 1
    if i + 1 >= len(args) or args[i + 1].startswith("-"):
        return None
    return known[flag], args[i + 1], i + 2


def _global_options(args: list[str]) -> tuple[dict[str, Any] | None, int]:
    """The global options before the command word, by name, and where the command starts."""
    given: dict[str, Any] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        found = _option(args, i, GLOBAL_FLAGS, lambda o: o.flag)
        if found is None or found[0].name in given:
            return None, i
        option, given[option.name], i = found
    return given, i


def _command_words(args: list[str], fields: list[Field]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The command's own words: (global options given after it, by name; the fields' values)."""
    known: dict[str, Any] = {**GLOBAL_FLAGS, **{flag: f for f in fields if not f.positional for flag in f.flags}}
    positional = [f for f in fields if f.positional]
    late: dict[str, Any] = {}
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        if not args[i].startswith("-"):
            if not positional:
                return None
            field, word, i = positional.pop(0), args[i], i + 1
        elif (found := _option(args, i, known, _takes_no_value)) is None:
            return None
        else:
            field, word, i = found
        if isinstance(field, GlobalOption):
            if field.name in late:
                return None
            late[field.name] = word
            continue
        if field.name in values or (value := True if field.kind == "flag" else _value(field.kind, word)) is None:
            return None
        values[field.name] = value
    return late, values


def _takes_no_value(what: GlobalOption | Field) -> bool:
    return what.flag if isinstance(what, GlobalOption) else what.kind == "flag"


def _globals(args: list[str], root: dict[str, Any], late: dict[str, Any], environ: Mapping[str, str]) -> Globals | None:
    """The global options as the root command's callback sets them (cli/app.py), then those given
    after the command on top; None where Typer would refuse one (a word not among its choices)."""
    values: dict[str, Any] = {}
    for o in GLOBAL_OPTIONS:
        value = root.get(o.name, environ.get(o.envvar) if o.envvar else None)
        value = o.default if value in (None, "") and o.name not in root else value
        if o.choices and any(v is not None and v not in o.choices for v in (value, late.get(o.name))):
            return None
        values[o.name] = value
    for name in ("repo", "actor"):
        values[name] = values[name] or None  # an empty SWARMCTL_REPO or --as "" is not given
    globals_ = Globals(args=list(args), **values)
    for name, value in late.items():
        setattr(globals_, name, value)
    return globals_


def _with_defaults(tool: Tool, values: dict[str, Any]) -> dict[str, Any] | None:
    """Every field's value, as the command function receives it: given, else its default."""
    for f in tool.fields():
        if f.name in values:
            continue
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            values[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            return None  # a required field not given: Typer's error
    return values
