"""What swarmctl answers a shell asking for completions (the scripts are swarmctl/gen/completions.py's).

Typer's own answers were unsafe with what a store holds, and any actor writes a store: its zsh
answer is shell code the script `eval`s, quoted in a way that a backslash at the end of a commit
message undid, so that `<(cmd)` in the next op's message ran on TAB; its bash answer went into
the command line unquoted, so that a ref named `x;cmd` ran `cmd` on the Enter after TAB; and its
zsh and fish descriptions went through Rich's markup, which turned `[/x]` in a message into a
traceback on the terminal and rewrapped long ones into candidates of their own.

Here every answer is data: one candidate a line. bash gets each value quoted as the line is to
hold it (bash inserts it as it is): with backslashes, or as the quote the word opened keeps
it (`bash_word`); zsh and fish get `VALUE<TAB>DESCRIPTION`,
read without `eval` (the zsh script adds the values with `compadd`, which quotes them itself;
fish quotes what it inserts). A value that no line could carry (a newline, a tab, a control
character) is not offered. What is offered, and from where, is swarmctl/cli/complete.py's.
"""

from __future__ import annotations

import os
import re
import sys
# Typer's own classes (its private modules: typer is held below 0.29 in pyproject.toml) read
# the command line each script passes; only what is printed back is ours.
from typer._click.shell_completion import CompletionItem, add_completion_class
from typer._completion_classes import BashComplete, FishComplete, ZshComplete

# Characters bash takes as they are in a word; every other one is quoted with a backslash.
_BASH_PLAIN = re.compile(r"[\w./:@%+,=-]")
_UNCARRIED = re.compile(r"[\x00-\x1f\x7f]")


def _carried(item: CompletionItem) -> bool:
    return item.type == "plain" and not _UNCARRIED.search(str(item.value))


def bash_word(value: str, quote: str = "") -> str:
    """`value` as a word of a bash command line: the same text once bash has read it. Inside a
    quote the word being completed opened (`"a'<TAB>`, `'x<TAB>`), bash inserts the candidate
    after it and closes it: there a backslash is kept as it is, so only what that quote does
    not keep is escaped (in '...', a ' ends the quote: `'\\''` puts one in)."""
    if quote == "'":
        return value.replace("'", "'\\''")
    if quote == '"':
        return re.sub(r'([\\"$`])', r"\\\1", value)
    return "".join(c if _BASH_PLAIN.fullmatch(c) else "\\" + c for c in value)


def _described(item: CompletionItem) -> str:
    """A candidate and its description, one line. A description is store text (an op's
    description, a commit message: any actor's words) that zsh and fish print as they get it:
    a control or format character in it (an escape sequence that retitles the terminal, a
    bidi override) is written as its escape, as everywhere swarmctl shows store text to people."""
    from swarmctl.cli.inert import inert

    help_ = inert(" ".join(str(item.help or "").split()))  # one line: tabs and newlines would split it
    return f"{item.value}\t{help_}" if help_ else str(item.value)


class Bash(BashComplete):
    _quote = ""  # the quote the word being completed is in (_open_quote)

    def get_completion_args(self) -> tuple[list[str], str]:
        """As Typer reads COMP_WORDS, with `--opt=value` made one word again: bash breaks a word
        at `=` (COMP_WORDBREAKS), so `--repo=../other` came as `--repo`, `=`, `../other`, and the
        store's path was taken for a command. Without the two variables bash's function sets
        (run by hand), the line is empty, as zsh's and fish's classes take it."""
        if "COMP_WORDS" not in os.environ or not os.environ.get("COMP_CWORD", "").isdigit():
            return [], ""
        args, incomplete = super().get_completion_args()
        words: list[str] = []
        glue = False
        for word in [*args, incomplete]:
            if word == "=" and words and words[-1].startswith("-") and "=" not in words[-1]:
                words[-1], glue = words[-1] + "=", True
            elif glue:
                words[-1], glue = words[-1] + word, False
            else:
                words.append(word)
        return words[:-1], words[-1]

    def format_completion(self, item: CompletionItem) -> str:
        return bash_word(str(item.value), self._quote)

    def complete(self) -> str:
        args, incomplete = self.get_completion_args()
        self._quote = _open_quote()
        return "\n".join(self.format_completion(i) for i in self.get_completions(args, incomplete) if _carried(i))


def _open_quote() -> str:
    """The quote the word being completed opened and has not closed (`"a'`: `"`), or "": the
    word as bash passed it (the script joins COMP_WORDS with newlines, one word a line)."""
    try:
        word = os.environ.get("COMP_WORDS", "").split("\n")[int(os.environ.get("COMP_CWORD", ""))]
    except (ValueError, IndexError):
        return ""
    quote = word[:1]
    return quote if quote in ("'", '"') and word.count(quote) == 1 else ""


class _Described:
    """zsh's and fish's answer: `VALUE<TAB>DESCRIPTION` a line."""

    def format_completion(self, item: CompletionItem) -> str:
        return _described(item)

    def complete(self) -> str:
        args, incomplete = self.get_completion_args()  # type: ignore[attr-defined]
        found = [self.format_completion(i) for i in self.get_completions(args, incomplete) if _carried(i)]  # type: ignore[attr-defined]
        if os.environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args":  # fish asks first: ours, or files?
            sys.exit(0 if found else 1)
        return "\n".join(found)


class Zsh(_Described, ZshComplete):
    pass


class Fish(_Described, FishComplete):
    pass


def use() -> None:
    """Answer the shells with these classes: Click looks one up by the shell's name (the app is
    built without Typer's own, `add_completion=False`)."""
    for cls, name in ((Bash, "bash"), (Zsh, "zsh"), (Fish, "fish")):
        add_completion_class(cls, name)
