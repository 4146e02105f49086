"""Secrets: which keys name one, and hiding their values in everything swarmctl prints.

This is the one place that decides what counts as a secret. A key (an environment variable, a
field, a flag without its dashes) is split into words at `_`, `-`, `.` and lower-to-upper case
changes (`DB_PASS`, `x-api-key`, `dbPassword`). It names a secret when
- one of its words is in SECRET_WORDS (`DB_PASS`, `API_KEY`, `DEPLOY_PWD`, `GITHUB_TOKEN`), or
- its letters and digits, lower-cased, contain a word of SECRET_WORDS of 5 letters or more
  (`DEPLOYTOKEN`, `dbpassword`, `AWS_SECRETACCESSKEY`);
except the keys in NOT_SECRET_KEYS: `key` alone names a field, not a secret, and `PWD` is the
working directory the shell sets. The short words (`pass`, `pwd`, `key`) count only as whole
words, so near misses stay plain: `BYPASS_CACHE`, `KEYBOARD_LAYOUT`, `OLDPWD`, `monkey`.
Over-matching is safe (a value is hidden that need not be); under-matching is not.

Three shapes of output carry values next to their keys, and each gets a function:
- `redact(value)`: a JSON-like structure; the value of every secret-named key becomes `***`.
- `redact_argv(argv)`: a command line; `redact_text(text)`: free text such as a command's output.
Both find values with one grammar (`secret_spans`, `argv_secrets`: `KEY=X`, `key: X`,
`--token X`, `--token=X`, `Authorization: Bearer X`, `https://user:X@host`), which is also
what a workflow definition is checked with: a literal secret there is refused, never stored.
Values that came from `${env:...}` are removed from command output separately, by value and in
their common encodings (`scrub_values`, `secret_forms`), before the output is cut to its tail
(`scrub_cut` hides what is left of one at the cut).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Iterable, NamedTuple

MASK = "***"

# The one list of words that name a secret (see the module docstring for the rule).
SECRET_WORDS: tuple[str, ...] = (
    "pass",
    "passwd",
    "password",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "credentials",
    "apikey",
    "privatekey",
    "accesskey",
    "signingkey",
    "encryptionkey",
    "sshkey",
    "authorization",
    "cookie",
)
# Words of at least this many letters also name a secret inside a longer word.
INSIDE_WORDS_FROM = 5
SECRET_MARKERS: tuple[str, ...] = tuple(w for w in SECRET_WORDS if len(w) >= INSIDE_WORDS_FROM)
# Keys made only of a secret word that name no secret (compared lower-cased).
NOT_SECRET_KEYS = frozenset({"key", "pwd"})

_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])|[0-9]+")
_WHOLE_WORDS = frozenset(SECRET_WORDS)


def key_words(key: str) -> list[str]:
    """The words of a key, lower-cased: `dbPassword` -> ["db", "password"], `API-KEY` -> ["api", "key"]."""
    return [w.lower() for w in _WORD.findall(str(key))]


@lru_cache(maxsize=4096)  # a status of 1,000 steps asks about the same dozen keys 13,000 times
def is_secret_key(key: str) -> bool:
    """Whether `key` (an environment variable, a field, a flag without its dashes) names a secret."""
    key = str(key)
    if key.lower() in NOT_SECRET_KEYS:
        return False
    if any(word in _WHOLE_WORDS for word in key_words(key)):
        return True
    normalised = _NOT_ALNUM.sub("", key.lower())
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

# A key and its `=` or `:`, where a key starts: after a character no key holds (or its
# quote). Where one could start anywhere, a run of key characters with no `=` or `:` after it
# (a line of progress dots, a long hex string) was scanned again from each of its characters:
# time that grew with the square of the run's length, hours for a megabyte of output.
_KEY = re.compile(r"""(?P<kq>["']?)(?<![A-Za-z0-9_.-])(?P<key>[A-Za-z0-9_.-]+)(?P=kq)\s*[=:]""")
# What follows a key's `=` or `:`: its value (only a secret-named key's value is looked for).
_VALUE = re.compile(
    r"""\s*(?:(?:bearer|basic|token|digest|bot|negotiate)[ \t]+)?"""
    r"""(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"',;]+))""",
    re.IGNORECASE,
)
# A URL's userinfo after its `://` (the scheme before it is looked for from there, backwards).
_SCHEME_END = re.compile(r"://")
_USERINFO = re.compile(r"[^\s/?#@:]*:(?P<password>[^\s/?#@]+)@")
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")


class Span(NamedTuple):
    """Where a secret value sits in a text (`text[start:end]`), and the key that names it."""

    start: int
    end: int
    key: str


def secret_spans(text: str, *, whole: bool = False) -> list[Span]:
    """Each secret value in `text`, in order, not overlapping (see the grammar above). With
    `whole` (one argument of a command line), an assignment at the start runs to the end."""
    found: list[Span] = []
    pos = 0  # where the last secret value ended: a key inside it is part of it
    for key in _KEY.finditer(text):
        if key.start() < pos or not is_secret_key(key.group("key")):
            continue  # a key that names no secret: its value is looked in for one (`x=token=V`)
        m = _VALUE.match(text, key.end())
        if m is None:
            continue
        group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
        start, end = m.span(group)
        if whole and key.start() == 0 and group == "bare":
            end = len(text)
        if end > start:
            found.append(Span(start, end, key.group("key")))
        pos = max(end, m.end())
    found += _url_passwords(text)
    return _disjoint(found)


def _url_passwords(text: str) -> list[Span]:
    """The password of each URL's userinfo (`https://user:V@host`): found from each `://`,
    the scheme before it (a letter, then letters, digits, `+`, `.`, `-`) looked for backwards,
    so that a long run of scheme characters is read once, not from each of its characters."""
    found: list[Span] = []
    done = 0  # where the last URL's password ended
    for sep in _SCHEME_END.finditer(text):
        start = at = sep.start()
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < at and not (text[start].isascii() and text[start].isalpha()):
            start += 1
        if start == at:
            continue  # no scheme
        m = _USERINFO.match(text, sep.end())
        if m is not None:
            found.append(Span(*m.span("password"), "password"))
            done = m.end()
    return found


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


_SHELL_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})


def shell_variable(argv: list[str], i: int, value: str) -> str | None:
    """The NAME when a secret's `value` in `argv[i]` is `$NAME` alone in the script of a shell's
    -c (`["sh", "-c", "echo token=$API_TOKEN"]`): the shell reads it from its environment as it
    runs. None otherwise: a program that is no shell, or an argument after the script ($0, $1,
    ...), gets `$NAME` as it is."""
    found = _SHELL_VARIABLE.fullmatch(value)
    if found is None or i < 2 or os.path.basename(argv[0]) not in _SHELLS:
        return None
    flag = argv[i - 1]
    return found.group(1) if flag.startswith("-") and not flag.startswith("--") and flag.endswith("c") else None


def _masked(text: str, spans: Iterable[Span]) -> str:
    pieces, at = [], 0
    for span in sorted(spans):  # disjoint: each piece copied once, however many secrets
        pieces += (text[at : span.start], MASK)
        at = span.end
    return "".join(pieces) + text[at:]


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
# words and digits everywhere, and a secret that short protects nothing. (A door warns on
# stderr when a shorter one is passed: see `too_short`.)
MIN_SCRUB_LEN = 4


def too_short(values: Iterable[str]) -> int:
    """How many of `values` are too short to be scrubbed (and not empty)."""
    return sum(1 for v in values if 0 < len(v) < MIN_SCRUB_LEN)


def secret_forms(value: str) -> set[str]:
    """`value` as a command might print it: itself, hex, URL-encoded, JSON-escaped, base64.

    Base64 of a value inside a longer encoded text depends on where the value starts (its
    offset modulo 3), so each of the three alignments gives the characters that encode only the
    value (as GitHub Actions masks them); the standard and URL-safe alphabets both.
    """
    import base64
    import json
    from urllib.parse import quote, quote_plus

    raw = value.encode("utf-8", "surrogatepass")
    forms = {value, raw.hex(), raw.hex().upper(), quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode())
        for shift in range(3):
            encoded = encode(b"\0" * shift + raw).decode().rstrip("=")
            first = -(-shift * 8 // 6)  # the first character made only of the value's bits
            last = (shift + len(raw)) * 8 // 6  # past the last one
            forms.add(encoded[first:last])
    return {f for f in forms if len(f) >= MIN_SCRUB_LEN}


def _all_forms(values: Iterable[str]) -> list[str]:
    forms: set[str] = set()
    for value in values:
        if len(value) >= MIN_SCRUB_LEN:
            forms |= secret_forms(value)
    return sorted(forms, key=len, reverse=True)


def scrub_values(text: str | None, values: Iterable[str]) -> str | None:
    """`text` with each of `values` (e.g. what `${env:...}` resolved to), in each of its
    `secret_forms`, replaced by `***`; the longest first. A text of many lines is scrubbed of
    each form wrapped over lines too, as `base64`, `openssl base64` and `xxd -p` print one
    (a line break, and the next line's indent, may come between any two characters)."""
    if not text:
        return text
    forms = _all_forms(values)
    if "\n" in text and forms:
        return _wrapped(tuple(forms)).sub(MASK, text)
    for form in forms:
        text = text.replace(form, MASK)
    return text


@lru_cache(maxsize=4)
def _wrapped(forms: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern of every form, longest first, each one's characters with a line break allowed between."""
    line_break = r"(?:\r?\n[ \t]*)?"
    return re.compile("|".join(line_break.join(map(re.escape, form)) for form in forms))


def scrub_cut(text: str, values: Iterable[str], *, start: bool = False, end: bool = False) -> str:
    """`text` cut out of a longer one, with what is left of a secret at a cut hidden: at the
    `start`, the longest end of a value (in any form) that `text` starts with; at the `end`, the
    longest beginning of one that `text` ends with. Any length counts: the text is cut anyway."""
    forms = _all_forms(values)
    if start:
        cut = max((n for f in forms for n in range(1, len(f)) if text.startswith(f[-n:])), default=0)
        if cut:
            text = MASK + text[cut:]
    if end:
        cut = max((n for f in forms for n in range(1, len(f)) if text.endswith(f[:n])), default=0)
        if cut:
            text = text[: len(text) - cut] + MASK
    return text
