"""The fast parse (swarmctl/cli/fast.py) reads a command line as Typer does, or not at all.

For every example and parity case declared beside each tool (registry.examples), and for
variants of each (the global options moved, joined with `=`, repeated, bad, missing; a word
changed; an unknown option; --help; the environment's SWARMCTL_* set), the fast parse gives
the very request Typer builds from the same words, with the same global options, or declines
(None) and leaves the line to Typer. So it never decides an error: each error, its message and
usage, stays Typer's. And it does read the hot commands: every example of `op log`, `op show`,
`op undo`, `ref list`, `ref show` and `ref set` is read without Typer, and so is `swarmctl call
TOOL JSON` for every example's arguments.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmctl import registry
from swarmctl.cli import app, fast
from swarmctl.cli import invoke as invoking
from swarmctl.envelope import SwarmError
from swarmctl.gen.examples import ACTOR

HOT = ("op_log", "op_show", "undo", "ref_list", "ref_show", "ref_set")
STORE = "/srv/store"  # neither parser opens it
ENVIRONMENTS = [
    {},
    {"SWARMCTL_OUTPUT": "table"},
    {"SWARMCTL_OUTPUT": "yaml"},
    {"SWARMCTL_OUTPUT": ""},
    {"SWARMCTL_AS": "", "SWARMCTL_REPO": "/elsewhere"},
    {"SWARMCTL_AS": "human/alice"},
]


def typer_reading(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """What Typer makes of `args`: ("ok", tool, global options, request fields), ("error", code),
    ("call", tool name, global options, JSON text) for `swarmctl call`, or ("exit", status) for
    a line that runs no tool (--help, a usage error)."""
    seen: list[Any] = []

    def capture(tool, globals_, make_request, usage=None):
        try:
            seen.append(("ok", tool.name, vars(globals_), fields_of(make_request())))
        except SwarmError as exc:
            seen.append(("error", exc.code))
        return 0

    def capture_call(globals_, name, read_arguments):
        text = "<stdin>" if read_arguments is invoking.stdin_text else read_arguments()
        seen.append(("call", name, vars(globals_), text))
        return 0

    monkeypatch.setattr(app, "invoke", capture)
    monkeypatch.setattr(invoking, "call", capture_call)
    status = app.run(list(args))
    return seen[0] if seen else ("exit", status)


def fast_reading(args: list[str]) -> Any:
    parsed = fast.parse(list(args), os.environ)
    if parsed is None:
        return None
    if isinstance(parsed, fast.ParsedCall):
        return ("call", parsed.name, vars(parsed.globals_), "<stdin>" if parsed.text is None else parsed.text)
    return ("ok", parsed.tool.name, vars(parsed.globals_), fields_of(parsed.request))


def fields_of(request: Any) -> dict[str, Any]:
    """The request's fields, each with its type (6 is not "6")."""
    return {f.name: (type(getattr(request, f.name)), getattr(request, f.name)) for f in dataclasses.fields(request)}


def same_or_declined(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Any:
    """The fast parse's reading of `args`, checked against Typer's where it reads them at all
    (where it declines, Typer's reading is the only one, whatever it is)."""
    fast_read = fast_reading(args)
    if fast_read is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))  # a `-` Typer reads
        assert typer_reading(args, monkeypatch) == fast_read, args
        capsys.readouterr()  # Typer's usage error, had it found one
    return fast_read


def variants(cli: tuple[str, ...], path: tuple[str, ...]) -> list[list[str]]:
    """The example's command line, and the same call written otherwise, right or wrong: the
    first three mean the same call."""
    own = list(cli[len(path) :])
    rest = [*path, *own]
    found = [
        ["--repo", STORE, "--as", ACTOR, *rest],
        [*rest, "--repo", STORE, "--as", ACTOR],
        ["-R", STORE, *rest, f"--as={ACTOR}"],
        ["--repo", STORE, "-o", "table", "--color", "never", "-q", *rest],
        [*rest, "-o", "jsonl", "-q", "--color=always"],
        [*rest, "-o", "yaml"],
        ["--repo", STORE, *rest, "--repo", STORE],
        ["-o", "json", *rest, "--output", "json"],
        [*rest, "--bogus"],
        [*rest, "extra"],
        [*rest, "--help"],
        [*rest, "-h"],
        [*path, "--", *own],
        [*path[:-1], "-q", *path[-1:], *own],
        [*rest, *own],
        rest[:-1],
        path[:1],
        [*rest, "--as"],
        ["--as=", *rest],
        ["--quiet=yes", *rest],
    ]
    for i, word in enumerate(own):
        for other in ("0", "-1", "@", " 6", "\u0666", "\uff16", "1_0", "9" * 5000, "", "x", "--x", "-"):
            found.append([*path, *own[:i], other, *own[i + 1 :]])
        if word.startswith("--") and i + 1 < len(own) and not own[i + 1].startswith("-"):
            found.append([*path, *own[:i], f"{word}={own[i + 1]}", *own[i + 2 :]])
    return found


def read_in_each_environment(lines: list[list[str]], monkeypatch, capsys) -> dict[tuple, Any]:
    """Each line read by both parsers (`same_or_declined`) in a bare environment, and the first
    three (the same call) in each of ENVIRONMENTS too: by (line, environment)."""
    read = {}
    for environment in ENVIRONMENTS:
        bare_environment(monkeypatch)
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        for args in lines if not environment else lines[:3]:
            read[tuple(args), tuple(environment.items())] = same_or_declined(args, monkeypatch, capsys)
    return read


def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("SWARMCTL_OUTPUT", "SWARMCTL_AS", "SWARMCTL_REPO"):
        monkeypatch.delenv(key, raising=False)


def every_example() -> list[Any]:
    cases = []
    for tool in registry.tools():
        for i, example in enumerate(registry.examples(tool)):
            cases.append(pytest.param(tool, example, id=f"{tool.name}-{i}"))
    return cases


@pytest.mark.parametrize("tool, example", every_example())
def test_both_parsers_read_each_example_and_its_variants_alike(tool, example, monkeypatch, capsys):
    """Each variant in a bare environment; the first three (the same call) in each environment."""
    lines = variants(example.cli, tool.cli)
    read = read_in_each_environment(lines, monkeypatch, capsys)
    if tool.name in HOT:
        for args in lines[:3]:
            assert read[tuple(args), ()] is not None, f"{tool.name}: the fast parse left {args} to Typer"


def test_the_hot_commands_are_all_read_without_typer():
    """Each hot tool's fields are plain: none of them is left to Typer whole."""
    for name in HOT:
        assert fast.plain_fields(registry.get(name)) is not None, name


VOCABULARY = sorted(
    {word for name in HOT for example in registry.examples(registry.get(name)) for word in example.cli}
    | {flag for name in HOT for field in fast.plain_fields(registry.get(name)) or () for flag in field.flags}
    | {"-R", "--repo", "--as", ACTOR, "-o", "--output", "table", "yaml", "-q", "--quiet", "--color", "never"}
    | {"-n", "--limit=3", "--ref=main", "--dry-run=1", "0", "7", "@", "", "-", "--", "-h", "main", "x=y", "\u0666"}
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from([registry.get(name).cli for name in HOT]),
    before=st.lists(st.sampled_from(VOCABULARY), max_size=3),
    after=st.lists(st.sampled_from(VOCABULARY), max_size=6),
)
def test_both_parsers_read_any_line_of_the_hot_commands_alike(path, before, after, monkeypatch, capsys):
    """Lines made of the hot commands' own words, in any order: right, wrong and odd ones
    (an option's value missing or taken from the next option, a word twice, `=` on a flag)."""
    bare_environment(monkeypatch)
    same_or_declined([*before, *path, *after], monkeypatch, capsys)


def call_variants(name: str, text: str) -> list[list[str]]:
    """`swarmctl call` of the tool on the example's arguments, and the same call written
    otherwise, right or wrong: the first three mean the same call."""
    return [
        ["--repo", STORE, "--as", ACTOR, "call", name, text],
        ["-R", STORE, f"--as={ACTOR}", "call", name, text],
        ["--as", ACTOR, "--repo", STORE, "call", name, text],
        ["call", name, text],
        ["call", name],
        ["call", name, ""],
        ["call", "", text],
        ["call", "nope", text],
        ["--repo", STORE, "-o", "table", "-q", "--color", "never", "call", name, text],
        ["-o", "yaml", "call", name, text],
        ["-o", "bogus", "call", name, text],
        ["--repo", STORE, "--repo", STORE, "call", name, text],
        ["call", name, text, "--repo", STORE],
        ["call", name, text, "--as", ACTOR],
        ["call", name, "-"],
        ["call", name, "-1"],
        ["call", name, text, "extra"],
        ["call", name, text, "--help"],
        ["call", name, "--", text],
        ["call", "--lines"],
        ["call", "--lines", "--stop-on-error"],
        ["call", name, text, "--stop-on-error"],
        ["call", name, text, "--lines"],
        ["call"],
        ["--as", "call", name, text],
        ["--as=", "call", name, text],
        ["--quiet=yes", "call", name, text],
    ]


@pytest.mark.parametrize("tool, example", every_example())
def test_both_parsers_read_each_call_and_its_variants_alike(tool, example, monkeypatch, capsys):
    """`swarmctl call TOOL JSON` with each example's arguments: each variant in a bare
    environment, the first three (the same call) in each environment; those are all read (in the
    bare environment: SWARMCTL_OUTPUT=yaml, say, is Typer's error)."""
    lines = call_variants(tool.name, json.dumps(example.arguments))
    read = read_in_each_environment(lines, monkeypatch, capsys)
    for args in lines[:3]:
        assert read[tuple(args), ()] is not None, f"the fast parse left {args} to Typer"


def test_a_call_reading_its_arguments_from_stdin_is_read_without_typer(monkeypatch, capsys):
    bare_environment(monkeypatch)
    args = ["--repo", STORE, "--as", ACTOR, "call", "undo", "-"]
    assert same_or_declined(args, monkeypatch, capsys) == ("call", "undo", vars(fast.parse(args, os.environ).globals_), "<stdin>")


CALL_VOCABULARY = ["call", "op_log", "undo", '{"limit": 2}', "{}", "[]", "", "-", "--", "-1", "--lines",
                   "--stop-on-error", "-R", "--repo", STORE, "--as", ACTOR, "-o", "table", "-q", "--color", "x"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(CALL_VOCABULARY), max_size=7))
def test_both_parsers_read_any_line_of_call_alike(words, monkeypatch, capsys):
    bare_environment(monkeypatch)
    same_or_declined(["call", *words] if "call" not in words else words, monkeypatch, capsys)


def test_the_version_is_read_as_importlib_metadata_reads_it():
    """`swarmctl --version` reads the metadata directory itself (importing importlib.metadata
    costs it more than the rest of its start), and finds what importlib.metadata finds.
    (tests/test_release.py checks a wheel's installation prints pyproject.toml's version.)"""
    from importlib import metadata

    import swarmctl

    assert swarmctl._metadata_version() == metadata.version("swarmctl") == swarmctl.version()


def test_version_alone_is_printed_as_typer_prints_it(monkeypatch, capsys):
    monkeypatch.setenv("SWARMCTL_OUTPUT", "yaml")  # the root's eager --version does not look at it
    assert fast.version_asked(["--version"], os.environ)
    assert app.run(["--version"]) == 0
    by_typer = capsys.readouterr()
    assert fast.print_version() == 0
    assert capsys.readouterr() == by_typer
    for args in (["--version", "op"], ["-q", "--version"], ["op", "log", "--version"]):
        assert not fast.version_asked(args, os.environ)
    monkeypatch.setenv("_SWARMCTL_COMPLETE", "bash_complete")
    assert not fast.version_asked(["--version"], os.environ)
    assert fast.parse(["op", "log"], os.environ) is None
