"""What ships beside the code, generated from the registry and the CLI built from it.

`python -m swarmctl.gen` regenerates everything (the reference pages' examples are recorded on a
demo store and normalised by normalize.py, as the golden tests' outputs are):

- man/           roff man pages: swarmctl(1) and one per command (man.py)
- completions/   bash, zsh and fish scripts on Typer's completion machinery, each under the name
                 its shell looks for: bash/swarmctl, zsh/_swarmctl, fish/swarmctl.fish (completions.py)
- docs/reference one page per tool, an index and the error codes (reference.py), with
                 examples recorded by running each tool on a demo store (examples.py)

Every generated file says so in its first line and names the command; the staleness test
(tests/test_generated.py) regenerates into memory and compares with the committed copies.
"""

from __future__ import annotations

from pathlib import Path

from swarmctl.gen.notice import COMMAND, NOTICE

__all__ = ["COMMAND", "NOTICE", "OWNED", "generate", "is_generated", "says_generated", "stale", "write"]

# The directories this package owns: a generated file there that is no longer generated goes.
OWNED = ("man", "completions", "docs/reference")


def generate() -> dict[str, str]:
    """Every generated file: its path under the repository root, and its text."""
    from swarmctl.gen import completions, man, reference

    files: dict[str, str] = {}
    files.update(man.pages())
    files.update(completions.scripts())
    files.update(reference.pages())
    return files


def is_generated(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            return says_generated(f.readline() + f.readline())
    except (OSError, UnicodeDecodeError):
        return False


def says_generated(text: str) -> bool:
    """The notice is on the first line, or on the second after a line its reader needs first
    (zsh's `#compdef`, which compinit reads from the first line only)."""
    first, _, rest = text.partition("\n")
    if first.startswith("#compdef "):
        first = rest.partition("\n")[0]
    return COMMAND in first


def stale(root: Path, files: dict[str, str] | None = None) -> list[str]:
    """The paths whose committed copy differs from what the code generates (or should not exist)."""
    files = generate() if files is None else files
    found = [p for p, text in files.items() if not (root / p).is_file() or (root / p).read_text(encoding="utf-8") != text]
    found += [p for p in _committed(root) if p not in files]
    return sorted(found)


def write(root: Path, files: dict[str, str] | None = None) -> list[str]:
    """Write every generated file under `root`; remove generated files no longer generated."""
    files = generate() if files is None else files
    changed = stale(root, files)
    for path in changed:
        target = root / path
        if path in files:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(files[path], encoding="utf-8")
        else:
            target.unlink()
    return changed


def _committed(root: Path) -> list[str]:
    found = []
    for owned in OWNED:
        base = root / owned
        if base.is_dir():
            found += [str(p.relative_to(root)) for p in base.rglob("*") if p.is_file() and is_generated(p)]
    return found
