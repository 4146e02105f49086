"""JSON text a caller sent, read with the one check for a field named twice (swarmctl/twice.py).

A field named twice is E_INVALID_ARG at every door, never last-one-wins. `swarmctl call` and
`call --lines` read their JSON with `parse_arguments`; an MCP transport (stdio in mcp.py, or
HTTP) reads each JSON-RPC message with `read_pairs`, which keeps every pair of every object,
and asks `named_twice` about the message and `arguments_named_twice` about a `tools/call`'s
arguments. The CLI counts the options it was given and asks `twice` too.

This module imports neither pydantic nor the MCP SDK: an HTTP middleware can use it as is.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from swarmctl import limits
from swarmctl.envelope import SwarmError
from swarmctl.twice import twice


class DuplicateField(ValueError):
    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):  # a key came twice: say which
        raise DuplicateField(twice(key for key, _ in pairs))
    return found


class NotJson(ValueError):
    """What json.loads takes that RFC 8259 does not: NaN, Infinity, -Infinity, and a number
    beyond a float's range (which it reads as infinity). Echoed back (`call --lines`' `id`,
    an error's details), it would make the envelope itself no JSON."""


class LoneSurrogate(NotJson):
    """A string that holds half of a UTF-16 surrogate pair alone (`loads`): JSON's grammar takes
    the escape, but it is no Unicode text."""


def _constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON value")


def _real(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise NotJson(f"{text if len(text) <= 24 else text[:20] + '…'} is beyond what a JSON number may be here (a float's range)")
    return value


STRICT = {"parse_constant": _constant, "parse_float": _real}  # json.loads' hooks: only what RFC 8259 says is JSON

# `\ud800`-`\udfff`: half of a UTF-16 surrogate pair, escaped.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str, **hooks: Any) -> Any:
    """json.loads with `STRICT`, and no string that holds half of a surrogate pair alone
    (`"\\ud800"`): json.loads takes one, but it is no Unicode text (RFC 8259 §8.2 leaves what
    a reader does with it open): it cannot be written as UTF-8, so pydantic's reading of it
    said "unexpected end of hex escape", and no store could keep it."""
    value = json.loads(text, **hooks, **STRICT)
    if _SURROGATE.search(text) is not None:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LoneSurrogate(f"a string holds \\u{ord(exc.object[exc.start]):04x} alone, half of a UTF-16 surrogate pair, "
                          "which is no Unicode character") from None
    return value


ARGUMENTS = "the arguments' JSON"  # what the bounds' refusals call a tool's arguments (`it nests deeper...`)


def parse_arguments(text: str, what: str = ARGUMENTS) -> Any:
    """JSON text as arguments; a field named twice is E_INVALID_ARG, never last-one-wins, and so
    is text larger than SWARMCTL_MAX_INPUT_BYTES or nested deeper than SWARMCTL_MAX_JSON_DEPTH."""
    limits.check_size(text, what)
    limits.check_json_depth(text, what)
    try:
        return loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:  # within the depth bound this cannot happen; if it does, it is the same refusal
        raise limits.too_deep(what, limits.max_json_depth()) from None
    except DuplicateField as exc:
        raise SwarmError(
            "E_INVALID_ARG",
            f"a field is named twice: {exc}",
            details={"fields": exc.names},
            hint="Name each field once.",
        ) from None
    except ValueError as exc:
        said = "arguments are" if what == ARGUMENTS else f"{what} is"
        if isinstance(exc, json.JSONDecodeError):
            raise SwarmError("E_INVALID_ARG", f"{said} not valid JSON: {exc}", details={"position": exc.pos}) from None
        if isinstance(exc, NotJson):
            raise SwarmError("E_INVALID_ARG", f"{said} not valid JSON: {exc}") from None
        raise SwarmError("E_INVALID_ARG", f"{said} unreadable: {not_read(exc, 'them' if what == ARGUMENTS else 'it')}") from None


def not_read(exc: ValueError, text: str) -> str:
    """Why json.loads (with `STRICT`) refused `text` (what to call it): not JSON, or (the one
    other ValueError it raises) a whole number of more digits than Python converts
    (sys.get_int_max_str_digits, 4300 by default: CPython's guard against a conversion that
    takes quadratic time)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{text} is not JSON"
    if isinstance(exc, NotJson):
        return f"{text} is not JSON: {exc}"
    from swarmctl.names import max_digits

    return f"a number in {text} has more than {max_digits()} digits"


# --- a JSON-RPC message, read with every pair kept ----------------------------------------


class Pairs(list):
    """A JSON object as its list of (key, value) pairs, duplicates kept."""

    def get(self, key: str) -> Any:
        return next((value for k, value in self if k == key), None)


def read_pairs(text: str) -> Any:
    """JSON text with each object as `Pairs`; ValueError (or RecursionError) if it is not JSON."""
    return loads(text, object_pairs_hook=Pairs)


def read_pairs_leniently(text: str) -> Any:
    """As `read_pairs`, as Python's json module reads JSON: what RFC 8259 and `loads` refuse (a
    lone surrogate, NaN, 1e400) is read too. Only to find what a refused text names (its tool,
    its id): never a value to keep, unless `is_plain_scalar` says it is JSON as it is."""
    return json.loads(text, object_pairs_hook=Pairs)


def is_plain_scalar(value: Any) -> bool:
    """A value that is JSON as it is, and no object or array: a string of Unicode characters, a
    whole number, a finite number, true, false or null."""
    import math

    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return value is None or isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value))


def call_arguments(message: Any) -> Any:
    """What a `tools/call` message read by `read_pairs` sends as `params.arguments` (None if
    it is no tools/call or sends none)."""
    if not isinstance(message, Pairs) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    return params.get("arguments") if isinstance(params, Pairs) else None


def named_twice(message: Any) -> list[str]:
    """The keys named twice in an object of `message` (read by `read_pairs`), outside a
    tools/call's `arguments` (those are the tool's to refuse, with an envelope: see
    `arguments_named_twice`)."""
    skip = call_arguments(message)
    repeated: dict[str, None] = {}
    stack: list[Any] = [message]
    while stack:
        node = stack.pop()
        if node is skip and skip is not None:
            continue
        if isinstance(node, Pairs):
            repeated.update(dict.fromkeys(twice(key for key, _ in node)))
            stack.extend(value for _, value in node)
        elif isinstance(node, list):
            stack.extend(node)
    return list(repeated)


def arguments_named_twice(line: str) -> SwarmError | None:
    """E_INVALID_ARG if `line` is a `tools/call` whose `arguments` name a field twice (or are too
    big or too deep: `parse_arguments`), else None.

    The line is read keeping every pair of every object, so nothing is collapsed; the
    arguments are written back as the text they were and checked by `parse_arguments`, the
    check `swarmctl call` makes on its own JSON.
    """
    try:
        arguments = call_arguments(read_pairs(line))
    except (ValueError, RecursionError):
        return None  # not JSON: the transport answers it as a parse error
    if not isinstance(arguments, Pairs):
        return None
    try:
        parse_arguments(_as_json(arguments))
    except SwarmError as exc:
        return exc
    return None


def _as_json(node: Any) -> str:
    if isinstance(node, Pairs):
        return "{" + ",".join(json.dumps(k) + ":" + _as_json(v) for k, v in node) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_as_json(v) for v in node) + "]"
    return json.dumps(node)
