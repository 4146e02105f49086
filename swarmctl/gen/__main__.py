"""`python -m swarmctl.gen [--check] [--root DIR]`: regenerate man pages, completions, reference pages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swarmctl.gen import COMMAND, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("--check", action="store_true", help="Change nothing; exit 1 if a generated file is stale.")
    parser.add_argument("--root", type=Path, default=_checkout(), help="The repository root (default: this checkout).")
    args = parser.parse_args(argv)
    if args.check:
        found = stale(args.root)
        for path in found:
            print(f"stale: {path}", file=sys.stderr)
        if found:
            print(f"Run `{COMMAND}` to regenerate.", file=sys.stderr)
        return 1 if found else 0
    for path in write(args.root):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _checkout() -> Path:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else Path.cwd()


if __name__ == "__main__":
    sys.exit(main())
