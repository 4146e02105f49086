"""Reading argv before (or beside) Typer: which command it names, and what Click would let pass.

Building every command means importing every tool area, and a command needs only its own:
`tools_for` finds the command word the way Click will (a global option that takes a value
consumes the next word). `options_given_twice` finds an option given twice, which Click would
let the last win. Both read the global options from their one declaration (cli/options.py).
"""

from __future__ import annotations

import typing
from typing import Mapping, get_origin

from swarmctl import registry
from swarmctl.cli.options import GLOBAL_OPTIONS, VALUE_FLAGS, Globals
from swarmctl.cli.output import is_utf8
from swarmctl.spec import Tool, cli_of, long_flag, unoptional
from swarmctl.twice import twice

# The commands that are not tools (cli/doors.py): `mcp`, `call` and `completion`.
DOORS = ("mcp", "call", "completion")


def completing(environ: Mapping[str, str]) -> bool:
    """Whether the shell asks Typer to complete this command line (`_SWARMCTL_COMPLETE=...`)."""
    return any(key.endswith("_COMPLETE") and key.startswith("_SWARMCTL") for key in environ)


def tools_for(args: list[str]) -> list[Tool] | None:
    """The tools a command line needs built: the one it names, else its area's, else all (None)."""
    words = iter(args)
    for word in words:
        if word in ("-h", "--help"):
            return None
        if word == "--version":
            return []
        if word in VALUE_FLAGS:
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


def _own_flags(tool: Tool) -> dict[str, tuple[str, bool, bool]]:
    """Each flag of the tool's options: (its long flag, takes a value, repeatable)."""
    hints = typing.get_type_hints(tool.request)
    own: dict[str, tuple[str, bool, bool]] = {}
    for f in tool.fields():
        cli = cli_of(f)
        if not cli.positional:
            repeatable = bool(cli.parse) or get_origin(unoptional(hints[f.name])) is list
            for flag in {long_flag(f), *cli.flags}:
                own[flag] = (long_flag(f), hints[f.name] is not bool, repeatable)
    return own


def options_given_twice(tool: Tool, args: list[str]) -> list[str]:
    """The options `args` gives more than once: global ones (before or after the command) and
    the tool's single-valued ones. Click would keep the last; a field named twice is an error
    at the JSON doors, and so here (`--as a ... --as b` must never pass silently).

    The words are read as Click reads them: an option that takes a value consumes the next word
    (so `-m "-mighty fix"` is one option), and nothing after `--` is an option.
    """
    own = _own_flags(tool)
    given: list[str] = []  # the single-valued options, as often as they were given
    path, in_command, i = list(tool.cli), False, 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1:
            name, joined = (word.partition("=")[0], "=" in word) if word.startswith("--") else (word[:2], len(word) > 2)
            if name in VALUE_FLAGS:
                key, takes_value, repeatable = VALUE_FLAGS[name], True, False
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


def printing_as(args: list[str], environ: Mapping[str, str]) -> Globals:
    """The global options that say how an error found before the command line is parsed (or
    while it is) is printed, read from anywhere on it (before `--`) as Click reads them: -q
    (bundled too: `-qo table`), and the last -o/--output that names a format (else
    SWARMCTL_OUTPUT's, if it names one). A word an option takes as its value is its value
    (`-m -otable` is a message), where the option is a global one or the command's own."""
    output = next(o for o in GLOBAL_OPTIONS if o.name == "output")
    tool = command_in(args)
    own = _own_flags(tool) if tool else {}
    takes_value = set(VALUE_FLAGS) | {flag for flag, (_, value, _) in own.items() if value}
    flags = takes_value | set(own) | {"-q"}  # Click stops at the first letter of a bundle it does not know
    words = args[: args.index("--")] if "--" in args else args
    quiet, given, i = False, [environ.get(output.envvar or "", "")], 0
    while i < len(words):
        word = words[i]
        following = words[i + 1] if i + 1 < len(words) else None
        if word.startswith("--"):
            name, joined, value = word.partition("=")
            quiet = quiet or name == "--quiet"
            if name in takes_value:
                given += [value if joined else following] if name in output.flags else []
                i += 0 if joined else 1
        elif word.startswith("-") and len(word) > 1:
            for j, letter in enumerate(word[1:], start=2):  # bundled short flags: -qo table, -otable
                if f"-{letter}" not in flags:
                    break
                if f"-{letter}" in takes_value:
                    given += [word[j:] or following] if f"-{letter}" in output.flags else []
                    i += 0 if word[j:] else 1
                    break
                quiet = quiet or f"-{letter}" == "-q"
        i += 1
    named = [value for value in given if value in (output.choices or ())]
    return Globals(quiet=quiet, output=named[-1] if named else output.default)


def command_in(args: list[str]) -> Tool | None:
    """The tool an argument list names, found without parsing it (for an error's `op`)."""
    words = [a for a in args if not a.startswith("-") and is_utf8(a)]
    for start in range(len(words)):
        for count in (2, 1):
            if (tool := registry.by_command(tuple(words[start : start + count]))) is not None:
                return tool
    return None
