"""The committed completion scripts (completions/), in real bash, zsh and fish shells.

Each shell loads the script as a user installs it and is asked what it offers after TAB:
bash through COMP_WORDS/COMP_CWORD and the function the script registers with `complete`,
zsh through a pseudo-terminal (`zpty`) running an interactive zsh whose `compadd` records what
the completion system adds, fish through `complete -C`. Each is asked for `op undo <TAB>`,
`ref show <TAB>`, `workflow rollback <TAB>` and `call <TAB>` on a store with a history, a
commit message that spans lines and a workflow. No description may hold a newline or a tab:
fish would show the rest of the line as a candidate of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from swarmctl import registry

from core_helpers import AGENT, build_golden_store
from golden import ROOT
from swarm import Swarm, swarmctl_argv
from swarmctl.gen import completions

WORKFLOW = """\
name = "ship"

[[step]]
name = "promote"
ref_set = { name = "release/v2", to = "main" }
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The golden store, a commit whose message spans lines (op 7), and a completed workflow."""
    tmp = tmp_path_factory.mktemp("completion")
    mp = pytest.MonkeyPatch()
    try:
        sw = Swarm(tmp, mp)
        build_golden_store(sw)
        repo = ("--repo", str(sw.store), "--as", AGENT)
        sw.ok(*repo, "tx", "begin")
        sw.ok(*repo, "tx", "set", "release/v2", "main")
        sw.ok(*repo, "tx", "commit", "-m", "cut release/v2\n\twith a tab and\na second line")
        (tmp / "ship.toml").write_text(WORKFLOW)
        workflow = sw.ok(*repo, "workflow", "run", str(tmp / "ship.toml"))["workflow"]["id"]
    finally:
        mp.undo()
    (tmp / "workflow-id").write_text(workflow)
    return sw.store


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMCTL_", "_SWARMCTL"))}
    env["PATH"] = f"{Path(swarmctl_argv()[0]).parent}{os.pathsep}{env['PATH']}"
    env["SWARMCTL_REPO"] = str(store)
    return env


def _workflow(store: Path) -> str:
    return (store.parent / "workflow-id").read_text()


# --- the shells ------------------------------------------------------------------------------


def bash_complete(store: Path, line: str) -> list[str]:
    # The line ends with a space: the last word is the empty one under the cursor.
    return bash_words(store, line.split(" "))


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def fish_complete(store: Path, line: str) -> list[tuple[str, str]]:
    """`complete -C` after loading the script from a directory fish searches, as installed."""
    config = store.parent / "fish-config"
    (config / "fish" / "completions").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / completions.PATHS["fish"], config / "fish" / "completions" / "swarmctl.fish")
    ran = subprocess.run(["fish", "--no-config", "-c", f"set fish_complete_path {config}/fish/completions $fish_complete_path; complete -C {_quote(line)}"],
                         capture_output=True, text=True, env={**_env(store), "XDG_CONFIG_HOME": str(config)},
                         cwd=store.parent, timeout=60)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    return [tuple(entry.split("\t", 1)) if "\t" in entry else (entry, "") for entry in ran.stdout.splitlines()]


# zpty runs an interactive zsh with the script in $fpath (as installed: share/zsh/site-functions)
# and compinit (the technique of zsh-capture-completion): its `compadd` is wrapped to print each
# candidate with its description between two marker lines, TAB runs completion on the typed
# line, and Return is unbound, so nothing typed is ever run.
ZSH_INIT = r"""
PROMPT='' RPROMPT='' COLUMNS=1000
fpath=($SITE $fpath)
autoload -Uz compinit && compinit -u -D
bindkey '^M' undefined
bindkey '^J' undefined
bindkey '^I' complete-word
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
capture-mark () { echo -E - '@@MARK@@' }
compprefuncs=( capture-mark )
comppostfuncs=( capture-mark exit )
compadd () {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  typeset -a __hits __dscr __tmp
  if (( $@[(I)-d] )); then
    __tmp=${@[$[${@[(i)-d]}+1]]}
    if [[ $__tmp == \(* ]]; then eval "__dscr=$__tmp"; else __dscr=( "${(@P)__tmp}" ); fi
  fi
  builtin compadd -A __hits -D __dscr "$@"
  [[ -n $__hits ]] || return
  local i; for i in {1..$#__hits}; do echo -E - "@@HIT@@${__hits[$i]}@@DESC@@${__dscr[$i]}"; done
}
echo '@@READY''@@'
"""

ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "source ${(q)INIT}"
local line
while zpty -r z line; do [[ $line == @@READY@@* ]] && break; done
zpty -w z "$LINE"$'\t'
integer marks=0
while zpty -r z line; do
  [[ $line == *@@MARK@@* ]] && { (( marks++ )) && break || continue }
  (( marks )) && [[ $line == *@@HIT@@* ]] && print -r -- "${${line#*@@HIT@@}%%$'\r'*}"
done
zpty -d z
"""


def zsh_complete(store: Path, line: str) -> list[tuple[str, str]]:
    site = store.parent / "zsh-site-functions"
    site.mkdir(exist_ok=True)
    shutil.copy(ROOT / completions.PATHS["zsh"], site / "_swarmctl")
    init = store.parent / "zsh-init.zsh"
    init.write_text(ZSH_INIT)
    ran = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER], capture_output=True, text=True,
                         env={**_env(store), "SITE": str(site), "INIT": str(init), "LINE": line, "TERM": "dumb"},
                         cwd=store.parent, timeout=60)
    assert ran.returncode == 0, ran.stderr
    found = []
    for entry in ran.stdout.splitlines():
        value, _, shown = entry.partition("@@DESC@@")
        found.append((value, shown.partition(" -- ")[2].strip()))
    return found


needs = {shell: pytest.mark.skipif(shutil.which(shell) is None, reason=f"{shell} is not installed (apt-get install {shell})")
         for shell in ("bash", "zsh", "fish")}


# --- what each shell offers ------------------------------------------------------------------


@needs["bash"]
def test_bash(store):
    assert bash_complete(store, "swarmctl op undo ") == ["7", "6", "5", "4", "3", "2", "@"]  # op 1, init, moved no ref
    assert bash_complete(store, "swarmctl ref show ") == ["main", "release/v1", "release/v2"]
    assert bash_complete(store, "swarmctl workflow rollback ") == [_workflow(store)]
    offered = bash_complete(store, "swarmctl call ")
    assert offered == [t.name for t in registry.tools()]  # every tool `call` runs, in the registry's order
    assert bash_complete(store, "swarmctl completion ") == ["bash", "zsh", "fish"]


def test_bash_shows_the_candidates_in_swarmctls_order():
    """bash sorted what swarmctl offers, so `op undo <TAB>` listed 10 11 12 ... 2 3 ... 9 where
    swarmctl gives the newest op first: the script asks for `-o nosort` (bash 4.4+)."""
    ran = subprocess.run(["bash", "--norc", "-c", f"source {ROOT / completions.PATHS['bash']}; complete -p swarmctl"],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and " -o nosort " in ran.stdout, ran.stdout + ran.stderr


@needs["zsh"]
def test_zsh(store):
    ops = zsh_complete(store, "swarmctl op undo ")
    assert [value for value, _ in ops] == ["7", "6", "5", "4", "3", "2", "@"] or sorted(v for v, _ in ops) == sorted(
        ["7", "6", "5", "4", "3", "2", "@"]
    ), ops
    described = dict(ops)
    assert described["6"].startswith("agent/worker-17: set release/v1 to ")
    assert described["7"] == "agent/worker-17: tx 1: cut release/v2 with a tab and a second line"
    assert sorted(v for v, _ in zsh_complete(store, "swarmctl ref show ")) == ["main", "release/v1", "release/v2"]
    assert [v for v, _ in zsh_complete(store, "swarmctl workflow rollback ")] == [_workflow(store)]
    assert "workflow_rollback" in [v for v, _ in zsh_complete(store, "swarmctl call ")]


@needs["fish"]
def test_fish(store):
    ops = fish_complete(store, "swarmctl op undo ")
    assert sorted(value for value, _ in ops) == sorted(["7", "6", "5", "4", "3", "2", "@"]), ops
    described = dict(ops)
    assert described["7"] == "agent/worker-17: tx 1: cut release/v2 with a tab and a second line"
    assert described["6"].startswith("agent/worker-17: set release/v1 to ")
    assert sorted(v for v, _ in fish_complete(store, "swarmctl ref show ")) == ["main", "release/v1", "release/v2"]
    assert [v for v, _ in fish_complete(store, "swarmctl workflow rollback ")] == [_workflow(store)]
    assert "workflow_rollback" in [v for v, _ in fish_complete(store, "swarmctl call ")]


def test_no_description_holds_a_newline_or_a_tab(store):
    """What the scripts' callback gives, for every shell: one candidate a line, clean descriptions."""
    from swarmctl.cli import complete

    class Ctx:
        params = {"late_repo": str(store)}
        args: list[str] = []

        def find_root(self):
            return None

    for source in ("ops", "refs", "changesets", "workflows", "tools"):
        for value, description in complete.SOURCES[source](Ctx(), ""):
            assert not any(c in value + description for c in "\n\r\t"), (source, value, description)


def test_typers_install_completion_is_not_offered(sw):
    """Typer's `--install-completion` would install Typer's own scripts, which `eval` (zsh) or
    insert unquoted (bash) what they read: `swarmctl completion SHELL` prints the only scripts."""
    for option in ("--install-completion", "--show-completion"):
        ran = sw(option)
        assert ran.exit == 2 and ran.error["code"] == "E_INVALID_ARG", ran.stdout


# --- a store any actor wrote to: what completion offers is data, never code -------------------

HOSTILE_REFS = ("fix;touch${IFS}PWNED-bash", "q'uote", 'dq"x', "$(touch${IFS}PWNED-sub)", "`touch${IFS}PWNED-tick`", "a|b&c>d")
HOSTILE_MESSAGES = ("y\\", "<(touch PWNED-zsh)", "x\\", "[/oops] closing tag", "[bold]Hotfix[/bold] for [red]prod[/red]",
                    "Refactor the scheduler so that retries back off exponentially and never starve the queue, ever")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    mp = pytest.MonkeyPatch()
    try:
        sw = Swarm(tmp, mp)
        sw.ok("--as", AGENT, "init", str(sw.store))
        repo = ("--repo", str(sw.store), "--as", AGENT)
        for message in HOSTILE_MESSAGES:
            sw.ok(*repo, "changeset", "create", "-m", message, "--ref", "main")
        for name in HOSTILE_REFS:
            sw.ok(*repo, "ref", "set", name, "main", "--create")
    finally:
        mp.undo()
    return sw.store


def _described(store: Path) -> dict[str, str]:
    """Each op `op undo` is offered as completion describes it: its actor and its description,
    as the op log has them (every op but `init`, op 1: each moved a ref, and none is undone)."""
    import json

    ran = subprocess.run([*swarmctl_argv(), "--repo", str(store), "op", "log", "-n", "100"], capture_output=True, text=True)
    return {str(o["op"]): f"{o['actor']}: {o['description']}" for o in json.loads(ran.stdout)["result"]["ops"] if o["op"] > 1}


def _ran_nothing(store: Path) -> None:
    assert not [p.name for p in store.parent.rglob("PWNED*")]


@needs["bash"]
def test_bash_offers_each_ref_quoted_as_the_line_must_hold_it(hostile):
    offered = bash_complete(hostile, "swarmctl ref show ")
    _ran_nothing(hostile)
    # Each candidate, put on a command line as bash inserts it, reads back as the ref's name.
    program = "".join(f"set -- {word}; printf '%s\\0' \"$1\"\n" for word in offered)
    read = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, cwd=hostile.parent)
    _ran_nothing(hostile)
    assert sorted(read.stdout.split("\0")[:-1]) == sorted(["main", *HOSTILE_REFS]), (offered, read.stderr)


@needs["zsh"]
def test_zsh_runs_nothing_on_tab_and_offers_the_names_and_messages_as_they_are(hostile):
    ops = zsh_complete(hostile, "swarmctl op undo ")
    _ran_nothing(hostile)
    assert dict(ops) == {**_described(hostile), "@": "the newest op by you (--as)"}, ops
    assert all(message in text for message, text in zip(HOSTILE_MESSAGES[:2], [dict(ops)["2"], dict(ops)["3"]]))
    # zsh quotes what it inserts, each special character with a backslash: read back, the name.
    inserted = [v for v, _ in zsh_complete(hostile, "swarmctl ref show ")]
    assert sorted(re.sub(r"\\(.)", r"\1", v) for v in inserted) == sorted(["main", *HOSTILE_REFS]), inserted
    _ran_nothing(hostile)


@needs["fish"]
def test_fish_shows_messages_as_they_are_with_no_traceback(hostile):
    ops = fish_complete(hostile, "swarmctl op undo ")  # fails on anything on stderr
    ops_made = 1 + len(HOSTILE_MESSAGES) + len(HOSTILE_REFS)
    assert sorted(v for v, _ in ops) == sorted([str(n) for n in range(2, ops_made + 1)] + ["@"]), ops
    assert dict(ops) == {**_described(hostile), "@": "the newest op by you (--as)"}, ops
    assert sorted(v for v, _ in fish_complete(hostile, "swarmctl ref show ")) == sorted(["main", *HOSTILE_REFS])
    _ran_nothing(hostile)


@needs["bash"]
def test_bash_reads_an_option_given_with_equals(store, tmp_path):
    """bash breaks a word at `=`: `--repo=PATH` comes as `--repo`, `=`, `PATH` (COMP_WORDS as
    bash makes them), and was read as `--repo` `=` and a command named PATH, so the top-level
    commands were offered; `--ref=m` offered nothing."""
    other = tmp_path / "other"
    mp = pytest.MonkeyPatch()
    try:
        sw = Swarm(tmp_path, mp)
        sw.ok("--as", AGENT, "init", str(other))
        made = sw.ok("--repo", str(other), "--as", AGENT, "changeset", "create", "-m", "m")["changeset"]["id"]
        sw.ok("--repo", str(other), "--as", AGENT, "ref", "set", "only-here", made, "--create")
    finally:
        mp.undo()
    assert bash_words(store, ["swarmctl", "--repo", "=", str(other), "ref", "show", ""]) == ["only-here"]
    assert bash_words(store, ["swarmctl", "op", "log", "--ref", "=", "rel"]) == ["release/v1", "release/v2"]
    assert bash_words(store, ["swarmctl", "op", "log", "--ref", "=", ""]) == ["main", "release/v1", "release/v2"]


def bash_words(store: Path, words: list[str]) -> list[str]:
    """COMPREPLY for COMP_WORDS as given (as bash splits a line, at `=` too), the last under the cursor."""
    script = ROOT / completions.PATHS["bash"]
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(_quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={_quote(line)}\nCOMP_POINT={len(line)}\n"
        '$(complete -p swarmctl | sed -E "s/.* -F ([^ ]+) .*/\\1/") swarmctl\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         env=_env(store), cwd=store.parent, timeout=60)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    return [line for line in ran.stdout.splitlines() if line]
