"""Secrets: which keys name one, and hiding their values in everything swarmctl prints.

This is the one place that decides what counts as a secret. A key names a secret when its
letters and digits, lower-cased, contain one of SECRET_MARKERS: `DEPLOY_TOKEN`, `dbPassword`,
`x-api-key` and `AWS_SECRET_ACCESS_KEY` all do. Over-matching is safe (a value is hidden that
need not be); under-matching is not, so the markers are substrings, not whole words.

Three shapes of output carry values next to their keys, and each gets a function:
- `redact(value)`: a JSON-like structure; the value of every secret-named key becomes `***`.
- `redact_argv(argv)`: a command line; `redact_text(text)`: free text such as a command's output.
Both find values with one grammar (`secret_spans`, `argv_secrets`: `KEY=X`, `key: X`,
`--token X`, `--token=X`, `Authorization: Bearer X`, `https://user:X@host`), which is also
what a workflow definition is checked with: a literal secret there is refused, never stored.
Values that came from `${env:...}` are removed from command output separately, by value
(`scrub_values`), before anything is stored.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, NamedTuple

MASK = "***"

# Substrings of a normalised key (lower case, letters and digits only) that make it secret.
SECRET_MARKERS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
    "signingkey",
    "encryptionkey",
    "sshkey",
    "authorization",
    "cookie",
)

_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def is_secret_key(key: str) -> bool:
    """Whether `key` (an environment variable, a field, a flag without its dashes) names a secret."""
    normalised = _NOT_ALNUM.sub("", str(key).lower())
    return any(marker in normalised for marker in SECRET_MARKERS)


def redact(value: Any) -> Any:
    """A copy of `value` (dicts, lists, scalars) with the value of every secret-named key masked."""
    if isinstance(value, dict):
        return {k: (MASK if is_secret_key(k) and v is not None else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


# --- where a secret value sits next to its key: the one grammar --------------------------------
#
# In text (a command's output, one argument of a command line), a value is secret when it is
# - assigned to a secret-named key: `KEY=V`, `--key=V`, `key: V`, `"key": "V"` (the key may be
#   quoted; the value runs to whitespace, a quote, `,` or `;`, or is the quoted text); after
#   an HTTP auth scheme (`Authorization: Bearer V`) the value is what follows the scheme;
# - the password of a URL's userinfo: `https://user:V@host`.
# In a command line, an argument that *starts* with such an assignment of an unquoted value
# holds the value up to its end (`Authorization: Bearer a b` hides `a b`), and the argument after a secret-named flag
# (`--token V`, `-password V`) is a value as a whole.

_ASSIGNMENT = re.compile(
    r"""(?P<kq>["']?)(?P<key>[A-Za-z0-9_.-]+)(?P=kq)\s*[=:]\s*"""
    r"""(?:(?:bearer|basic|token|digest|bot|negotiate)[ \t]+)?"""
    r"""(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"',;]+))""",
    re.IGNORECASE,
)
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:(?P<password>[^\s/?#@]+)@")


class Span(NamedTuple):
    """Where a secret value sits in a text (`text[start:end]`), and the key that names it."""

    start: int
    end: int
    key: str


def secret_spans(text: str, *, whole: bool = False) -> list[Span]:
    """Each secret value in `text`, in order, not overlapping (see the grammar above). With
    `whole` (one argument of a command line), an assignment at the start runs to the end."""
    found: list[Span] = []
    pos = 0
    while (m := _ASSIGNMENT.search(text, pos)) is not None:
        group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
        if not is_secret_key(m.group("key")):
            pos = m.start(group)  # look again inside the value: `x=token=V`
            continue
        start, end = m.span(group)
        if whole and m.start() == 0 and group == "bare":
            end = len(text)
        if end > start:
            found.append(Span(start, end, m.group("key")))
        pos = max(end, m.end())
    for m in _USERINFO.finditer(text):
        found.append(Span(*m.span("password"), "password"))
    return _disjoint(found)


def _disjoint(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), last.key)
        else:
            merged.append(span)
    return merged


def secret_flag(item: str) -> bool:
    """`--token`, `-password`: a flag whose name is a secret, so the next argument is its value."""
    return item.startswith("-") and "=" not in item and ":" not in item and is_secret_key(item.lstrip("-"))


def argv_secrets(argv: Iterable[str]) -> list[tuple[int, Span]]:
    """(position, span) of each secret value in a command line (see the grammar above)."""
    items = list(argv)
    found: list[tuple[int, Span]] = []
    for i, item in enumerate(items):
        if i > 0 and secret_flag(items[i - 1]):
            if item:
                found.append((i, Span(0, len(item), items[i - 1])))
            continue
        found.extend((i, span) for span in secret_spans(item, whole=True))
    return found


def _masked(text: str, spans: Iterable[Span]) -> str:
    for span in sorted(spans, reverse=True):
        text = text[: span.start] + MASK + text[span.end :]
    return text


def redact_argv(argv: Iterable[str] | None) -> list[str] | None:
    """A command line with every secret value masked (the flags and keys stay readable)."""
    if argv is None:
        return None
    items = list(argv)
    by_item: dict[int, list[Span]] = {}
    for i, span in argv_secrets(items):
        by_item.setdefault(i, []).append(span)
    return [_masked(item, by_item.get(i, ())) for i, item in enumerate(items)]


def redact_text(text: str | None) -> str | None:
    """Free text (a command's output) with every secret value masked."""
    if not text:
        return text
    return _masked(text, secret_spans(text))


# Values shorter than this are not scrubbed from command output: they would mask ordinary
# words and digits everywhere, and a secret that short protects nothing.
MIN_SCRUB_LEN = 4


def scrub_values(text: str | None, values: Iterable[str]) -> str | None:
    """`text` with each of `values` (e.g. what `${env:...}` resolved to) replaced by `***`."""
    if not text:
        return text
    for value in sorted({v for v in values if len(v) >= MIN_SCRUB_LEN}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
