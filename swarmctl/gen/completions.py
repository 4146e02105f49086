"""Shell completion scripts for bash, zsh and fish, on Typer's completion protocol (what swarmctl
prints back is swarmctl/cli/shells.py's: data, never code).

Each script calls back into `swarmctl` on TAB (with `_SWARMCTL_COMPLETE` set), so what it
offers comes from the CLI as built from the registry and from the store itself: the
`autocompletion` callbacks of swarmctl/cli/complete.py give op numbers with their
descriptions (`op undo <TAB>`), ref names, changeset ids and workflow ids. The scripts never
go stale with the data, only with the program's name and Typer's protocol.

Each is written under the name its shell looks for, so that the wheel can install it as is
(setuptools' data files cannot rename): `completions/bash/swarmctl` goes to
`share/bash-completion/completions/`, `completions/zsh/_swarmctl` to `share/zsh/site-functions/`
and `completions/fish/swarmctl.fish` to `share/fish/vendor_completions.d/`. `swarmctl completion
SHELL` prints the same text.
"""

from __future__ import annotations

from swarmctl.gen.notice import NOTICE

PROG = "swarmctl"
COMPLETE_VAR = "_SWARMCTL_COMPLETE"  # what Typer derives from the name; swarmctl.cli.run looks for it

# Where each script lives in the repository (and so in the wheel's data files).
PATHS = {
    "bash": f"completions/bash/{PROG}",
    "zsh": f"completions/zsh/_{PROG}",
    "fish": f"completions/fish/{PROG}.fish",
}

# Where each shell looks for it under an installation prefix (/usr/local, a venv, ~/.local).
INSTALLED = {
    "bash": f"share/bash-completion/completions/{PROG}",
    "zsh": f"share/zsh/site-functions/_{PROG}",
    "fish": f"share/fish/vendor_completions.d/{PROG}.fish",
}

INSTALL = {
    "bash": "Install: `eval \"$(swarmctl completion bash)\"` in ~/.bashrc, or copy this file to "
    "~/.local/share/bash-completion/completions/swarmctl.",
    "zsh": "Install: `eval \"$(swarmctl completion zsh)\"` in ~/.zshrc after `autoload -Uz compinit && compinit`, "
    "or copy this file into a directory of $fpath.",
    "fish": "Install: `swarmctl completion fish > ~/.config/fish/completions/swarmctl.fish`.",
}

# The bodies: the variables Typer's protocol reads (swarmctl/cli/shells.py answers), written so
# each script works both sourced and where its shell finds it by name. What swarmctl prints is
# read as data, never run: bash reads its lines into COMPREPLY with mapfile (no word splitting,
# no globbing of a candidate), zsh adds them with compadd (no eval), fish splits them at a tab.
# Each keeps swarmctl's order of the candidates (ops newest first) rather than sorting them.
# zsh's first line must be `#compdef`: compinit reads only that line of each file in $fpath;
# when autoloaded the file is the body of `_swarmctl`, which then defines itself and runs (the
# pattern of kubectl's and gh's scripts).
BODIES = {
    "bash": f"""\
_{PROG}_completion() {{
    local IFS=$'\\n'
    mapfile -t COMPREPLY < <(env COMP_WORDS="${{COMP_WORDS[*]}}" \\
                                 COMP_CWORD=$COMP_CWORD \\
                                 {COMPLETE_VAR}=complete_bash $1)
    # Where nothing matches, swarmctl prints one empty line: no candidate, not an empty one
    # (bash would insert a space for it, and `-o default` would never offer files and directories).
    [[ ${{#COMPREPLY[@]}} -eq 1 && -z ${{COMPREPLY[0]}} ]] && COMPREPLY=()
    return 0
}}

# In swarmctl's order (ops newest first), not sorted: -o nosort, where this bash has it (4.4+).
complete -o default -o nosort -F _{PROG}_completion {PROG} 2>/dev/null || complete -o default -F _{PROG}_completion {PROG}
""",
    "zsh": f"""\
_{PROG}() {{
  local -a values shown
  local line
  for line in "${{(@f)$(env _TYPER_COMPLETE_ARGS="${{words[1,$CURRENT]}}" {COMPLETE_VAR}=complete_zsh {PROG})}}"; do
    [[ -n $line ]] || continue
    values+=("${{line%%$'\\t'*}}")
    if [[ $line == *$'\\t'* ]]; then shown+=("${{line%%$'\\t'*}} -- ${{line#*$'\\t'}}"); else shown+=("$line"); fi
  done
  if (( $#values )); then
    compadd -V {PROG} -l -d shown -a values  # -V: in swarmctl's order (ops newest first), not sorted
  else
    _files
  fi
}}

if [ "$funcstack[1]" = "_{PROG}" ]; then
  _{PROG} "$@"
else
  compdef _{PROG} {PROG}
fi
""",
    "fish": f"""\
complete --command {PROG} --no-files --keep-order \
--arguments "(env {COMPLETE_VAR}=complete_fish _TYPER_COMPLETE_FISH_ACTION=get-args _TYPER_COMPLETE_ARGS=(commandline -cp) {PROG})" \
--condition "env {COMPLETE_VAR}=complete_fish _TYPER_COMPLETE_FISH_ACTION=is-args _TYPER_COMPLETE_ARGS=(commandline -cp) {PROG}"
""",
}

SHELLS = tuple(PATHS)


def scripts() -> dict[str, str]:
    return {PATHS[shell]: script(shell) for shell in SHELLS}


def script(shell: str) -> str:
    first = f"#compdef {PROG}\n" if shell == "zsh" else ""
    return f"{first}# {NOTICE}\n# {INSTALL[shell]}\n\n{BODIES[shell]}"
