"""Man pages, from the CLI as Typer builds it from the registry: swarmctl(1) and one per command.

Each page reads the command's own definition (its help, arguments and options as the parser
knows them), so what `--help` says and what `man` says cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import typer
from typer._click.types import _NumberParamTypeBase
from typer._types import TyperChoice
from typer.core import TyperArgument, TyperGroup, TyperOption

from swarmctl import registry, version
from swarmctl.environment import VARIABLES
from swarmctl.envelope import ERROR_CODES
from swarmctl.gen.notice import NOTICE

# What the doors (commands that are not tools) print.
DOOR_OUTPUT = {
    "mcp": "Stdout carries the protocol: one JSON-RPC message a line, nothing else. Each `tools/call` result "
    "holds a tool's envelope. Only an invalid --as, found before serving, prints an envelope instead "
    "(E_INVALID_ARG, exit status 2). The exit status is 0 once the client has closed stdin.",
    "completion": "The completion script on stdout, the same text as the one the wheel installs under "
    "share/bash-completion/completions/swarmctl, share/zsh/site-functions/_swarmctl or "
    "share/fish/vendor_completions.d/swarmctl.fish. An unknown SHELL prints an envelope instead "
    "(E_INVALID_ARG, exit status 2).",
    "call": "One JSON envelope on stdout: the tool's, as the tool's own command prints it, with `op` the tool's "
    "name (null for an unknown TOOL).",
}


def pages() -> dict[str, str]:
    from swarmctl.cli.app import build

    root = typer.main.get_command(build())
    commands = list(_leaves(root, ()))
    files = {"man/swarmctl.1": _main_page(root, commands)}
    for path, command in commands:
        files[f"man/{_page_name(path)}.1"] = _command_page(root, path, command, commands)
    return files


def _leaves(group: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            yield from _leaves(command, (*path, name))
        elif not command.hidden:
            yield (*path, name), command


def _page_name(path: tuple[str, ...]) -> str:
    return "-".join(("swarmctl", *path))


# --- pages -----------------------------------------------------------------------------------


def _main_page(root: Any, commands: list[tuple[tuple[str, ...], Any]]) -> str:
    out = _header("swarmctl", "the safe undo button for a swarmops store")
    out += [".SH SYNOPSIS", r".B swarmctl", r"[\fIGLOBAL OPTIONS\fR] \fICOMMAND\fR [\fIARGS\fR]...", ".SH DESCRIPTION"]
    out += _paragraphs(root.help or "")
    out += [".SH COMMANDS"]
    for path, command in commands:
        out += [".TP", rf"\fB{_esc(' '.join(path))}\fR", _text(command.short_help or ""), f"See {_ref(path)}."]
    out += [".SH GLOBAL OPTIONS", ".PP", "Given before the command, e.g. " + _code("swarmctl --repo ./store op log")
            + ", or after it (but for " + _code("call") + ", whose words are its own and the tool's)."]
    out += _options(root)
    out += _output_section(None) + _exit_status() + _environment(root) + _examples(())
    out += [".SH SEE ALSO", ",\n".join(_ref(path) for path, _ in commands)]
    return "\n".join(out) + "\n"


def _command_page(root: Any, path: tuple[str, ...], command: Any, commands: list[tuple[tuple[str, ...], Any]]) -> str:
    tool = registry.by_command(path)
    out = _header(_page_name(path), (command.short_help or "").rstrip("."))
    arguments = [p for p in command.params if isinstance(p, TyperArgument)]
    usage = " ".join(_argument_usage(p) for p in arguments)
    out += [
        ".SH SYNOPSIS",
        r".B swarmctl",
        rf"[\fIGLOBAL OPTIONS\fR] \fB{_esc(' '.join(path))}\fR [\fIOPTIONS\fR] {usage}".rstrip(),
        ".SH DESCRIPTION",
    ]
    out += _paragraphs(command.help or "")
    if arguments:
        out += [".SH ARGUMENTS"]
        for p in arguments:
            out += [".TP", rf"\fI{_esc(_argument_name(p))}\fR", _text(p.help or "")]
    out += [".SH OPTIONS"]
    out += _options(command)
    out += [".SH GLOBAL OPTIONS", ".PP", f"As in {_ref(())}: " + ", ".join(rf"\fB{_esc(o.opts[0])}\fR" for o in _visible_options(root)) + "."]
    out += (_output_section(tool) if path[0] not in DOOR_OUTPUT else [".SH OUTPUT", ".PP", _text(DOOR_OUTPUT[path[0]])])
    out += _exit_status() + _environment(root) + _examples(path)
    related = [p for p, _ in commands if p != path and p[:-1] == path[:-1] and len(path) > 1]
    out += [".SH SEE ALSO", ",\n".join(_ref(p) for p in [(), *related])]
    return "\n".join(out) + "\n"


def _examples(path: tuple[str, ...]) -> list[str]:
    """The command's examples, the ones its --help ends with (cli/app.py `examples_of`)."""
    from swarmctl.cli.app import examples_of

    out = [".SH EXAMPLES"]
    for caption, command in examples_of(path):
        out += [".PP", _text(caption), ".PP", ".RS", ".nf", _code(command), ".fi", ".RE"]
    return out


def _header(name: str, summary: str) -> list[str]:
    return [
        rf'.\" {NOTICE}',
        f'.TH "{_esc(name.upper())}" "1" "" "swarmctl {version()}" "swarmctl manual"',
        ".ad l",  # ragged right, no hyphenation: envelopes, paths and command names stay whole
        ".nh",
        ".SH NAME",
        rf"{_esc(name)} \- {_text(summary)}",
    ]


def _output_section(tool: Any) -> list[str]:
    out = [".SH OUTPUT", ".PP"]
    if tool is None:
        out += [
            _text("Every command prints one JSON envelope on stdout, on success and on failure (the exceptions: "
                  "`-q` prints nothing there, `-o table` prints a table and an error on stderr, `-o jsonl` a record "
                  "a line, `call --lines` an envelope a call, and `--help`, `--version` and completion what they say):"),
            ".PP",
            ".RS",
            ".nf",
            _esc('{"ok":true,"op":...,"api":1,"result":{...},"meta":{...}}'),
            _esc('{"ok":false,"op":...,"api":1,"error":{...},"meta":{...}}'),
            ".fi",
            ".RE",
            ".PP",
            _text(
                "`error` holds `code`, `message`, `details`, `hint` and `next` (the call that resolves it); "
                "`meta` holds `repo`, `elapsed_ms`, `resolved` and `auth`. "
                "To a pipe the envelope is compact, on one line; on a terminal it is indented. "
                "`-o table` renders the same result for people. Anything else (usage, warnings) goes to stderr."
            ),
        ]
        return out
    out.append(
        _text(
            f"One JSON envelope on stdout, whose `op` is `{tool.name}`; on success its `result` is of type "
            f"`{tool.result.__name__}` (`swarmctl schema {tool.result.__name__}` prints its JSON Schema). "
            + (
                f"Over MCP the same call is the tool `{tool.name}` (see swarmctl-mcp(1)), with the same envelope."
                if tool.mcp
                else f"It is not served over MCP: {tool.cli_only}."
            )
        )
    )
    return out


def _exit_status() -> list[str]:
    out = [".SH EXIT STATUS", ".PP", _text("The exit status is that of the envelope's `error.code`:"), ".TP", r"\fB0\fR", "Success, including a replay and every preview or dry run."]
    for code in ERROR_CODES.values():
        out += [".TP", rf"\fB{code.exit}\fR \fB{_esc(code.code)}\fR", _text(code.when[0].upper() + code.when[1:] + ".")]
    return out


def _environment(root: Any) -> list[str]:
    out = [".SH ENVIRONMENT", _text("A variable set empty is taken as unset; a bad value is E_INVALID_ARG naming it.")]
    for p in _visible_options(root):
        if p.envvar:
            out += [".TP", rf"\fB{_esc(p.envvar)}\fR", _text(f"As {p.opts[0]}.")]
    for name, meaning in VARIABLES:  # read outside the option parser
        out += [".TP", rf"\fB{_esc(name)}\fR", _text(meaning)]
    return out


# --- options and arguments -------------------------------------------------------------------


def _visible_options(command: Any) -> list[Any]:
    return [p for p in command.params if isinstance(p, TyperOption) and not p.hidden]


def _options(command: Any) -> list[str]:
    out: list[str] = []
    for p in _visible_options(command):
        names = sorted(p.opts, key=lambda o: (o.startswith("--"), o))  # -n, --limit
        label = ", ".join(rf"\fB{_esc(o)}\fR" for o in names)
        if not p.is_flag:
            # `\:` lets a long list of choices break after a `|` (else groff warns it cannot break the line).
            metavar = _esc(_metavar(p)).replace("|", r"|\:")
            label += rf" \fI{metavar}\fR"
        if p.multiple:
            label += " (repeatable)"
        text = _text(p.help or "")
        if not p.is_flag and p.default not in (None, (), []):
            text += " " + _text(f"Default: {p.default}.")
        out += [".TP", label, text]
    out += [".TP", r"\fB\-h\fR, \fB\-\-help\fR", "Print the help and exit."]
    return out


def _metavar(p: Any) -> str:
    if p.metavar:
        return p.metavar
    if isinstance(p.type, TyperChoice):
        return "{" + "|".join(str(c) for c in p.type.choices) + "}"
    if isinstance(p.type, _NumberParamTypeBase):
        return "N"
    return p.name.upper()


def _argument_usage(p: Any) -> str:
    name = rf"\fI{_esc(_argument_name(p))}\fR"
    return name if p.required else f"[{name}]"


def _argument_name(p: Any) -> str:
    return p.metavar or p.name.upper()


# --- roff ----------------------------------------------------------------------------------


def _esc(text: str) -> str:
    """Roff-safe text: backslashes, hyphens (so options copy as typed)."""
    return text.replace("\\", r"\e").replace("-", r"\-")


def _text(text: str) -> str:
    """One paragraph's text: escaped, `code` in bold, and never starting a line with a dot."""
    parts = re.split(r"`([^`]*)`", text)
    rendered = "".join(rf"\fB{_esc(part)}\fR" if i % 2 else _esc(part) for i, part in enumerate(parts))
    return re.sub(r"(?m)^([.'])", r"\\&\1", rendered)


def _code(text: str) -> str:
    return rf"\fB{_esc(text)}\fR"


def _paragraphs(text: str) -> list[str]:
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        if paragraph.strip():
            out += [".PP", _text(" ".join(line.strip() for line in paragraph.splitlines()))]
    return out


def _ref(path: tuple[str, ...]) -> str:
    return rf"\fB{_esc(_page_name(path))}\fR(1)"
