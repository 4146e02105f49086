"""Secrets: which keys name one, and hiding their values in everything swarmctl prints.

This is the one place that decides what counts as a secret. A key names a secret when its
letters and digits, lower-cased, contain one of SECRET_MARKERS: `DEPLOY_TOKEN`, `dbPassword`,
`x-api-key` and `AWS_SECRET_ACCESS_KEY` all do. Over-matching is safe (a value is hidden that
need not be); under-matching is not, so the markers are substrings, not whole words.

Three shapes of output carry values next to their keys, and each gets a function:
- `redact(value)`: a JSON-like structure; the value of every secret-named key becomes `***`.
- `redact_argv(argv)`: a command line; `--token X`, `--token=X` and `TOKEN=X` hide X.
- `redact_text(text)`: free text such as a command's output; `TOKEN=X` and `token: X` hide X.
Values that came from `${env:...}` are removed from command output separately, by value
(`scrub_values`), before anything is stored.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

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


def secret_flag(item: str) -> bool:
    """`--token`, `-password`: a flag whose name is a secret, so the next argument is its value."""
    return item.startswith("-") and "=" not in item and is_secret_key(item.lstrip("-"))


def secret_assignments(argv: Iterable[str]) -> list[tuple[int, str]]:
    """(position, key) of each argument that holds a secret value: after a secret flag, or
    `--key=value` / `KEY=value` with a secret key."""
    found: list[tuple[int, str]] = []
    items = list(argv)
    for i, item in enumerate(items):
        key, sep, _ = item.partition("=")
        if sep and is_secret_key(key.lstrip("-")):
            found.append((i, key))
        elif i > 0 and secret_flag(items[i - 1]):
            found.append((i, items[i - 1]))
    return found


def redact_argv(argv: Iterable[str] | None) -> list[str] | None:
    """A command line with every secret value masked (the flags themselves stay readable)."""
    if argv is None:
        return None
    items = list(argv)
    for i, _key in secret_assignments(items):
        key, sep, _ = items[i].partition("=")
        items[i] = f"{key}={MASK}" if sep and is_secret_key(key.lstrip("-")) else MASK
    return items


# KEY=value or key: value, where the value runs to the next whitespace or quote.
_TEXT_ASSIGNMENT = re.compile(r"([A-Za-z0-9_.-]+)(\s*[=:]\s*)([^\s\"',;]+)")


def redact_text(text: str | None) -> str | None:
    """Free text with `KEY=value` and `key: value` masked where the key names a secret."""
    if not text:
        return text
    return _TEXT_ASSIGNMENT.sub(
        lambda m: m.group(1) + m.group(2) + MASK if is_secret_key(m.group(1)) else m.group(0), text
    )


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
