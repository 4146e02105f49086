"""Shell completion scripts: Typer's own, for bash, zsh and fish.

Each script calls back into `swarmctl` on TAB (with `_SWARMCTL_COMPLETE` set), so what it
offers comes from the CLI as built from the registry and from the store itself: the
`autocompletion` callbacks of swarmctl/cli/complete.py give op numbers with their
descriptions (`op undo <TAB>`), ref names, changeset ids and workflow ids. The scripts never
go stale with the data, only with the program's name and Typer's protocol.
"""

from __future__ import annotations

from typer._completion_shared import get_completion_script

from swarmctl.gen import NOTICE

PROG = "swarmctl"
COMPLETE_VAR = "_SWARMCTL_COMPLETE"  # what Typer derives from the name; swarmctl.cli.run looks for it

INSTALL = {
    "bash": "Install: `source completions/swarmctl.bash` in ~/.bashrc (or copy it to ~/.local/share/bash-completion/completions/swarmctl).",
    "zsh": "Install: `source completions/swarmctl.zsh` in ~/.zshrc, after `autoload -Uz compinit && compinit`.",
    "fish": "Install: copy to ~/.config/fish/completions/swarmctl.fish.",
}


def scripts() -> dict[str, str]:
    return {f"completions/{PROG}.{shell}": script(shell) for shell in INSTALL}


def script(shell: str) -> str:
    body = get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell)
    return f"# {NOTICE}\n# {INSTALL[shell]}\n\n{body}\n"
