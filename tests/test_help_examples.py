"""Every command's --help ends with one to three examples, and every man page has an EXAMPLES
section with the same ones: those declared beside each tool (its area module's EXAMPLES, with a
caption), beside each door (cli/doors.py EXAMPLES) and for swarmctl itself (cli/app.py)."""

from __future__ import annotations

import re

import pytest

from swarmctl import registry
from swarmctl.cli.app import examples_of, shown_examples
from swarmctl.cli.doors import DOORS
from swarmctl.gen import man

PATHS = [(), *[t.cli for t in registry.tools()], *[(door,) for door in DOORS]]


def _examples_at_the_end(help_text: str) -> list[tuple[str, str]]:
    """The examples a help text ends with: `Examples:`, then `# caption` and the command, each."""
    parts = re.split(r"\n *Examples:\n", help_text)
    assert len(parts) == 2, f"no examples at the end of:\n{help_text}"
    tail = parts[1]
    lines = [line.strip() for line in tail.strip("\n").split("\n") if line.strip()]
    assert len(lines) % 2 == 0 and all(line.startswith("# ") for line in lines[::2]), tail
    return [(caption[2:], command) for caption, command in zip(lines[::2], lines[1::2])]


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "swarmctl" for p in PATHS])
def test_every_help_ends_with_one_to_three_examples(sw, path):
    ran = sw(*path, "--help")
    assert ran.exit == 0, ran.stderr
    shown = _examples_at_the_end(ran.stdout)
    assert 1 <= len(shown) <= 3, shown
    assert shown == examples_of(path)


def test_every_man_page_has_the_same_examples():
    pages = man.pages()
    names = {f"man/{'-'.join(('swarmctl', *path))}.1": path for path in PATHS}
    assert set(pages) == set(names)
    for name, text in pages.items():
        section = re.search(r"^\.SH EXAMPLES\n(.*?)(?=^\.SH )", text, re.S | re.M)
        assert section, f"{name} has no EXAMPLES section"
        commands = re.findall(r"^\.nf\n(.*)\n\.fi$", section.group(1), re.M)
        assert len(commands) == len(examples_of(names[name])) >= 1, name


def test_a_tool_shows_examples_that_succeed_and_are_run_by_a_test():
    """The examples shown are declared ones: each an MCP tool's parity case (tests/test_parity.py
    runs them all) or a tool's first example (recorded on its reference page by the generator);
    they succeed, and they run as agent/worker-17 when the tool needs an identity."""
    for tool in registry.tools():
        declared = registry.examples(tool)
        shown = [(i, e) for i, e in enumerate(declared) if e.caption]
        assert shown, f"{tool.name}: no example has a caption for its --help"
        for index, example in shown:
            assert example.outcome == "ok", (tool.name, example.cli)
            assert tool.mcp or index == 0, f"{tool.name}: a shown example no test runs: {example.cli}"
        commands = [command for _, command in shown_examples(tool)]
        # `@` is the caller's newest op: shown without --as, `op show @` was E_IDENTITY_REQUIRED
        assert all(command.startswith("swarmctl --as agent/worker-17 " if tool.needs_identity or " @" in command else "swarmctl ")
                   for command in commands), commands


def test_swarmctls_own_examples_run_as_shown_one_after_another(sw):
    """`swarmctl --help`'s examples are a first session, run here in a shell as shown. The last
    (`op show @`) needed an identity it was not given, and printed null."""
    import subprocess

    from swarmctl.cli.app import ROOT_EXAMPLES
    from swarm import swarmctl_argv

    env = {k: v for k, v in sw.env.items() if k not in ("SWARMCTL_AS", "SWARMCTL_REPO")}
    script = "set -euo pipefail\nswarmctl() { %s \"$@\"; }\n" % " ".join(swarmctl_argv())
    script += "\n".join(command for _, command in ROOT_EXAMPLES) + "\n"
    ran = subprocess.run(["bash", "-c", script], cwd=sw.tmp, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1] == "7"  # agent/worker-17's newest op: its undo of op 6
