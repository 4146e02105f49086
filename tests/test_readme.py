"""The README is part of the product: its error table and its set-up commands must stay true."""

import re

from golden import ROOT
from swarmctl.envelope import ERROR_CODES

README = (ROOT / "README.md").read_text()


def test_the_error_table_is_the_one_the_code_uses():
    rows = re.findall(r"^\| `(E_[A-Z_]+)` \| (\d+) \| (.+) \|$", README, re.M)
    assert [(code, int(exit_), when) for code, exit_, when in rows] == [
        (c.code, c.exit, c.when) for c in ERROR_CODES.values()
    ]


def test_ci_runs_the_readme_set_up_commands():
    block = re.search(r"## Set up and run, then test\n.*?```sh\n(.*?)```", README, re.S).group(1)
    setup, tests = [line for line in block.strip().splitlines() if not line.startswith("#")]
    ci = (ROOT / ".ci" / "run").read_text()
    assert setup in ci.splitlines()
    # One command that makes and uses a venv (PEP 668: Debian's python refuses a bare pip install).
    assert setup.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && ")
    assert tests == "pytest"
    assert re.search(r"^\.venv/bin/pytest$", ci, re.M)  # the same pytest, from the venv
    assert ".venv/bin/pytest" in README
    assert "-eq 5" in ci  # pytest's "no tests collected" is a failure


def test_the_command_table_is_the_registry():
    """README's command table (## Commands) names every tool once, each with its command, the
    metavar of each argument and every option the tool has (and none it has not)."""
    from swarmctl import registry
    from swarmctl.spec import cli_of, long_flag

    section = README.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(swarmctl [^`]+)` \| `([a-z_]+)` \|", section, re.M)
    named = [name for _, name in rows]
    assert sorted(named) == sorted(t.name for t in registry.tools()), "add or remove rows to match the registry"
    assert len(set(named)) == len(named), "a tool named twice"
    for synopsis, name in rows:
        tool, synopsis = registry.get(name), synopsis.replace("\\|", "|")
        assert synopsis == tool.command or synopsis.startswith(tool.command + " "), (name, synopsis)
        options = [f for f in tool.fields() if not cli_of(f).positional and not cli_of(f).hidden]
        known = {flag for f in options for flag in (long_flag(f), *cli_of(f).flags)}
        given = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", synopsis[len(tool.command) :]))
        assert given <= known, f"{name}: the README gives options it does not have: {given - known}"
        missing = [long_flag(f) for f in options if not ({long_flag(f), *cli_of(f).flags} & given)]
        assert not missing, f"{name}: the README's row lacks {missing}"
        for f in tool.fields():
            if cli_of(f).positional:
                metavar = cli_of(f).metavar or f.name.upper()
                assert re.search(rf"\b{re.escape(metavar)}\b", synopsis), f"{name}: the README's row lacks {metavar}"
