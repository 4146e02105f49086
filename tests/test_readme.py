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
