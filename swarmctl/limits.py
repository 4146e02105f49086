"""Bounds on what a caller may send: how deep JSON may nest, how big one input may be.

Every input is held to them before it is parsed: a `--file`, stdin, a workflow's TOML file, a
JSON argument, an MCP line. Past a bound it is E_INVALID_ARG, found in bounded memory and
time: a stream is read to at most the bound plus one byte, never to its end. TOML (a workflow,
a policy) is read by `read_toml`, held to the same depth.
"""

from __future__ import annotations

import os
import re
from typing import Any, BinaryIO, Iterator

from swarmctl.envelope import SwarmError
from swarmctl.names import max_digits, whole_number

DEFAULT_MAX_JSON_DEPTH = 64
DEFAULT_MAX_INPUT_BYTES = 16 * 1024 * 1024


def _setting(name: str, default: int, most: int | None = None) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    value = whole_number(text)
    if value is None or value < 1 or (most is not None and value > most):
        span = f"from 1 to {most}" if most is not None else "from 1"
        raise SwarmError(
            "E_INVALID_ARG",
            f"{name}={text!r} is not a whole number {span}",
            details={"variable": name, "value": text},
            hint=f"Unset it for the default ({default}), or give a whole number {span}.",
        )
    return value


def seconds(name: str, default: float, low: float, high: float, span: str | None = None) -> float:
    """A duration setting in seconds from the environment variable `name`: `default` when unset
    or empty (as every setting, and SWARMCTL_REPO, SWARMCTL_AS and SWARMCTL_OUTPUT), E_INVALID_ARG
    when it is not a number from `low` to `high` (said as `span`)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    # ASCII digits and a point: float() would take `５`, `1_0`, `1e3`, `nan`
    value = float(raw) if re.fullmatch(r"\s*([0-9]+\.?[0-9]*|\.[0-9]+)\s*", raw) else -1.0
    if not low <= value <= high:
        raise SwarmError(
            "E_INVALID_ARG",
            f"{name}={raw!r} must be a number of seconds from {span or f'{low:g} to {high:g}'}",
            details={"variable": name, "value": raw},
            hint=f"Unset it for the default ({default:g}), or give a number of seconds in that span.",
        )
    return value


DEFAULT_CLOCK_SKEW_S = 300.0


def clock_skew_s() -> float:
    """SWARMCTL_CLOCK_SKEW_S: how far ahead of this writer's clock the newest op may be before
    it is taken for the work of a clock that ran ahead (default 300 seconds)."""
    return seconds("SWARMCTL_CLOCK_SKEW_S", DEFAULT_CLOCK_SKEW_S, 0, 10 * 365 * 86400, "0 to 315360000 (ten years)")


# The deepest nesting swarmctl reads: Python's own parsers (json, tomllib) and what walks their
# values recurse a level at a time, and past a few hundred levels run out of stack, so a larger
# SWARMCTL_MAX_JSON_DEPTH would be taken and then not honoured.
MOST_JSON_DEPTH = 256


def max_json_depth() -> int:
    return _setting("SWARMCTL_MAX_JSON_DEPTH", DEFAULT_MAX_JSON_DEPTH, MOST_JSON_DEPTH)


def max_input_bytes() -> int:
    return _setting("SWARMCTL_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES)


class Unreadable(ValueError):
    """Why text could not be read (`read_toml`): the message says it, `details` add to it."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


def read_toml(text: str, what: str, *, given: bool = True) -> dict[str, Any]:
    """`text` read as TOML, nested no deeper than SWARMCTL_MAX_JSON_DEPTH (`given`: it is input;
    else, text the store holds, which that bound on inputs is not for: no deeper than
    MOST_JSON_DEPTH). Unreadable, saying why (`what` names the text), when it is not TOML,
    nests deeper, or holds a whole number of more digits than Python converts (tomllib raises a
    bare ValueError for that one)."""
    import tomllib

    depth = max_json_depth() if given else MOST_JSON_DEPTH
    deeper = f"{what} nests deeper than {depth} levels" + (" (SWARMCTL_MAX_JSON_DEPTH)" if given else "")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"{what} is not valid TOML: {exc}") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise Unreadable(deeper, max_depth=depth) from None
    except ValueError:
        raise Unreadable(f"{what} holds a number of more than {max_digits()} digits") from None
    if depth_of(data, depth) > depth:
        raise Unreadable(deeper, max_depth=depth)
    return data


def too_big(what: str, limit: int) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        f"{what} is larger than {limit} bytes (SWARMCTL_MAX_INPUT_BYTES); nothing was read past that",
        details={"input": what, "max_bytes": limit},
        hint="Send less, or raise SWARMCTL_MAX_INPUT_BYTES.",
    )


def too_deep(what: str, limit: int) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        f"{what} nests deeper than {limit} levels (SWARMCTL_MAX_JSON_DEPTH)",
        details={"input": what, "max_depth": limit},
        hint="Flatten it, or raise SWARMCTL_MAX_JSON_DEPTH.",
    )


def read_bounded(stream: BinaryIO, what: str) -> bytes:
    """All of `stream`, or E_INVALID_ARG once it passes the bound (reading one byte past it)."""
    limit = max_input_bytes()
    data = bytearray()
    while len(data) <= limit:
        chunk = stream.read(min(1 << 20, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    raise too_big(what, limit)


class Lines:
    """A byte stream cut into lines, holding at most `limit` bytes of any one: a longer line
    comes out as None, its bytes read and dropped as they come. Feed it chunks as they arrive
    (so each line is handed on as soon as it is complete), then `end()`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = bytearray()
        self.dropping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            part = chunk[start:] if end < 0 else chunk[start:end]
            if not self.dropping:
                self.held += part
                if len(self.held) > self.limit:
                    self.dropping = True
                    self.held.clear()
                    out.append(None)
            if end < 0:
                return out
            if not self.dropping:
                out.append(bytes(self.held))
            self.held.clear()
            self.dropping = False
            start = end + 1

    def end(self) -> list[bytes | None]:
        """The last line, when the stream did not end with a newline."""
        return [bytes(self.held)] if self.held and not self.dropping else []


def read_lines(stream: BinaryIO) -> Iterator[list[bytes | None]]:
    """The lines of `stream` as they arrive, each held to SWARMCTL_MAX_INPUT_BYTES (None: longer),
    in runs: each run the lines one read brought, all in hand (reading on would wait for more)."""
    lines = Lines(max_input_bytes())
    while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]
        if got := lines.feed(chunk):
            yield got
    if last := lines.end():
        yield last


def read_file(path: str | os.PathLike, what: str, *, regular: bool = False, follow: bool = True) -> bytes:
    """A file's bytes, held to the bound (`/dev/zero` is refused, not read to its end).
    `regular`: only a regular file's, NotRegularFile for anything else, before anything is read
    (a FIFO is opened without waiting for a writer, which may never come). `follow` False: a
    symlink is not followed (ELOOP), where the path was resolved and checked before."""
    if not regular:
        with open(path, "rb") as f:
            return read_bounded(f, what)
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(_FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file"))
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb") as f:
        return read_bounded(f, what)


class NotRegularFile(OSError):
    """What `read_file(..., regular=True)` found instead: its args[0] says what it is."""


_FILE_TYPES = {0o040000: "a directory", 0o010000: "a FIFO (named pipe)", 0o020000: "a character device",
               0o060000: "a block device", 0o140000: "a socket"}


def check_size(data: str | bytes, what: str) -> None:
    limit = max_input_bytes()
    size = len(data) if isinstance(data, bytes) else _utf8_len(data, limit)
    if size > limit:
        raise too_big(what, limit)


def _utf8_len(text: str, limit: int) -> int:
    return len(text) if len(text) * 4 <= limit else len(text.encode("utf-8", "surrogatepass"))


# Strings are skipped (a bracket inside one is text); what is left is counted as steps of +1
# and -1, in C (bytes.translate, itertools.accumulate), so 16 MiB of brackets takes a moment.
# (Patterns as text, compiled by `re` when first used: most calls never get this far.)
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"?'
_NOT_BRACKET = r"[^\[\]{}]+"
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether JSON `text` nests arrays and objects deeper than `limit` (strings skipped)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # not that many openings even counting those inside strings: a small call's case
    brackets = re.sub(_NOT_BRACKET, "", re.sub(_STRING, "", text, flags=re.S))
    if brackets.count("[") + brackets.count("{") <= limit:
        return False
    from array import array  # here: only a deeply nested text gets this far
    from itertools import accumulate

    steps = array("b", brackets.encode("ascii").translate(_STEPS))
    return max(accumulate(steps)) > limit


def check_json_depth(text: str, what: str) -> None:
    limit = max_json_depth()
    if json_depth_exceeds(text, limit):
        raise too_deep(what, limit)


def depth_of(value: Any, limit: int) -> int:
    """How deep a parsed value nests lists and dicts, counting no further than `limit` + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, dict)):
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
