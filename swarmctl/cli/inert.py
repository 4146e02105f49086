"""Text from the store shown to people, made inert: what a terminal would act on is escaped.

A changeset message, a ref or workflow name, a command's output: any of it may hold control
characters (Unicode category Cc: ESC, BEL, CR, ...) or format characters (Cf: the bidi
overrides such as U+202E, zero-width characters), which a terminal would act on (retitle or
clear it, hide or reorder text). Every table cell, progress line and stderr message goes
through `inert`, whatever the colour setting; JSON needs nothing of this (it escapes control
characters itself, and no JSON reader acts on a format character).
"""

from __future__ import annotations

import json
from typing import Any

# Also escaped: line and paragraph separators (Zl, Zp) and lone surrogates (Cs, from bytes
# that are not UTF-8), which are no more printable than the rest.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def inert(text: str, *, keep: str = "\n") -> str:
    """`text` with each control or format character (except those in `keep`) written as an
    escape: `\\x1b`, `\\u202e`, `\\U000e0001`."""
    if text.isprintable():
        return text
    import unicodedata

    out = []
    for char in text:
        if char not in keep and unicodedata.category(char) in _ESCAPED:
            out.append(_escape(ord(char)))
        else:
            out.append(char)
    return "".join(out)


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def inert_all(value: Any) -> Any:
    """`inert` applied to every string in a JSON-like value (keys too)."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, list):
        return [inert_all(v) for v in value]
    if isinstance(value, dict):
        return {inert(k) if isinstance(k, str) else k: inert_all(v) for k, v in value.items()}
    return value


def line(value: Any) -> str:
    """One line for stderr: a value as text, with nothing a terminal would act on."""
    return inert(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
