"""Text from the store shown to people, made inert: what a terminal would act on is escaped.

A changeset message, a ref or workflow name, a command's output: any of it may hold control
characters (Unicode category Cc: ESC, BEL, CR, ...) or format characters (Cf: the bidi
overrides such as U+202E, zero-width characters), which a terminal would act on (retitle or
clear it, hide or reorder text). Every table cell, progress line and stderr message goes
through `inert`, whatever the colour setting. JSON text escapes only U+0000-U+001F itself:
on a terminal the envelope (and each line of `-o jsonl` and `call --lines`) goes through
`inert_json`, which writes the rest (DEL, the C1
controls such as U+009B, CSI to a terminal that reads UTF-8, and the format characters) as
JSON escapes too; the JSON means the same. A pipe gets JSON as it is: no terminal reads it.
"""

from __future__ import annotations

import json
import re
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


# Beyond ASCII, or DEL: the characters `inert_json` looks at (JSON escaped the C0 ones).
_NOT_PLAIN = re.compile(r"[^\x00-\x7e]")


def inert_json(text: str) -> str:
    """JSON text (as json.dumps or Rich writes it) with each control or format character that
    JSON leaves as it is written as a JSON escape (`\u009b`, `\u202e`, a surrogate pair
    beyond U+FFFF): they can only be in its strings, and the JSON reads the same. U+0000 to
    U+001F are left alone: JSON has escaped those of the text, and the rest (a newline, a
    colour's ESC) are the writer's own."""
    if text.isascii() and "\x7f" not in text:
        return text
    import unicodedata

    def escaped(m: re.Match[str]) -> str:
        char = m.group()
        if unicodedata.category(char) not in _ESCAPED:
            return char
        return json.dumps(char)[1:-1]  # \u009b; beyond U+FFFF, its surrogate pair

    return _NOT_PLAIN.sub(escaped, text)


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


def as_markup(text: str) -> str:
    """`text` made inert and escaped as Rich markup, to be shown as it is (`[bold]` in a message
    too). Rich's own escape doubles a trailing backslash, for a tag written right after the
    text; swarmctl's renderers write none after data, and a cell showed both backslashes
    (`C:\\temp\\\\` for `C:\\temp\\`): the second is left out."""
    from rich.markup import escape

    text = inert(text)
    escaped = escape(text)
    return escaped[:-1] if text.endswith("\\") and not text.endswith("\\\\") else escaped

