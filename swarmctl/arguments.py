"""JSON arguments read into a tool's request: the one reading of the JSON doors (`swarmctl
call`, `call --lines`, MCP's tools/call, `policy check`'s arguments).

First the names (swarmctl.fields: another name of a field renamed, a near miss refused, an
unknown name ignored and listed), then the check of values against their fields' constraints
that every door shares (swarmctl.constraints), then the types, strictly as JSON has them: "6" is
not a number, 1 is not true.

The types are pydantic's to judge (schemas.validated). But where every value given is plainly
of its field's type, the request is built here, as pydantic builds it, and pydantic is not
imported: its import and its first validator cost a `swarmctl call` about 0.1 s, where the
rest of the command takes about as much again. Plainly of its type is: a string for a text field (one that is UTF-8, as
pydantic's JSON reader wants), one of its words for a Literal's, a whole number within 64 bits
(and its Range) for an int, true or false for a bool, null for an optional field, and for a union
of these (an op: a number or "@") what one of its members takes. Each value is kept as given,
as pydantic keeps it. Anything else (a list, an object, a number where text is wanted, a required
field missing, a field declared with more than this module knows) is pydantic's, with its
errors. tests/test_arguments.py holds the two readings to the same request for every example
and parity case, and for any values hypothesis makes.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import lru_cache
from typing import Annotated, Any, Callable, Literal, NamedTuple, get_args, get_origin

from swarmctl import constraints, fields
from swarmctl.envelope import SwarmError
from swarmctl.spec import MAX_INT, Range, Tool

Fit = Callable[[Any], bool]

# What a field's metadata (spec.arg) may hold for the field to be read here: what these keys
# mean is checked above (constraints) or here; any other key leaves the field to pydantic.
KNOWN_METADATA = frozenset({"description", "cli", "json_aliases", "min_length", "max_length"})


class Request(NamedTuple):
    request: Any
    ignored: list[str]  # the fields the request type does not know: the envelope's meta.ignored


def read_request(tool: Tool, arguments: Any) -> Request:
    """JSON arguments as the tool's request, with the names of the fields it ignored (see
    `swarmctl.fields`), or E_INVALID_ARG saying what does not fit."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise SwarmError(
            "E_INVALID_ARG",
            f"arguments to {tool.name} must be a JSON object, not {type(arguments).__name__}",
            details={"type": tool.request.__name__},
        )
    arguments, ignored = fields.read(tool.request, arguments)
    arguments = _whole_floats_as_ints(tool.request, arguments)
    constraints.check(tool.request, arguments)  # the CLI's check too: one message at every door
    request = plain_request(tool.request, arguments)
    if request is None:
        from swarmctl import schemas

        request = schemas.validated(tool, arguments)
    return Request(request, ignored)


def _whole_floats_as_ints(request: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """`1.0` (or `1E0`) for a field that takes an integer is that integer: JSON Schema, which
    the tools' inputSchema is written in, counts a number with no fraction as an integer, and
    a client may send one so. Any other float stays what it is (and does not fit)."""
    takes_int = _int_fields(request)
    if not any(type(v) is float for v in arguments.values()):
        return arguments
    return {
        name: int(v) if name in takes_int and type(v) is float and v.is_integer() and abs(v) <= MAX_INT else v
        for name, v in arguments.items()
    }


@lru_cache(maxsize=None)
def _int_fields(request: type) -> frozenset[str]:
    hints = typing.get_type_hints(request, include_extras=True)

    def takes_int(annotation: Any) -> bool:
        origin = get_origin(annotation)
        if origin is Annotated:
            return takes_int(get_args(annotation)[0])
        if origin in (typing.Union, types.UnionType):
            return any(takes_int(a) for a in get_args(annotation))
        return annotation is int

    return frozenset(f.name for f in dataclasses.fields(request) if f.init and takes_int(hints[f.name]))


def validate_request(tool: Tool, arguments: Any) -> Any:
    """JSON arguments as the tool's request, or E_INVALID_ARG saying what does not fit."""
    return read_request(tool, arguments).request


def plain_request(request: type, arguments: dict[str, Any]) -> Any | None:
    """The request built from `arguments` (known field names only, as `fields.read` leaves
    them) where each is plainly of its field's type and each required field is given; None
    where that is not so, for pydantic to read."""
    fits, required = _plain_fields(request)
    for name, value in arguments.items():
        fit = fits.get(name)
        if fit is None or not fit(value):
            return None
    if not required <= arguments.keys():
        return None
    return request(**arguments)


@lru_cache(maxsize=None)
def _plain_fields(request: type) -> tuple[dict[str, Fit], frozenset[str]]:
    """The fields read here, each with what it takes; the names of the required fields."""
    hints = typing.get_type_hints(request, include_extras=True)
    fits: dict[str, Fit] = {}
    for f in dataclasses.fields(request):
        fit = _fit(hints[f.name]) if f.init and f.metadata.keys() <= KNOWN_METADATA else None
        if fit is not None:
            fits[f.name] = _within_lengths(fit, f.metadata.get("min_length"), f.metadata.get("max_length"))
    required = frozenset(
        f.name
        for f in dataclasses.fields(request)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
    )
    return fits, required


def _fit(annotation: Any) -> Fit | None:
    """What a value must be to be plainly of the type `annotation`; None where the type is not
    one read here."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extras = get_args(annotation)
        if base is not int or not all(isinstance(e, Range) for e in extras):
            return None  # (a Range gives pydantic a strict int schema, whatever it annotates)
        return lambda v: _whole(v) and all(r.ge <= v <= r.le for r in extras)
    if origin in (typing.Union, types.UnionType):
        members = [_fit(a) for a in get_args(annotation)]
        if any(m is None for m in members):
            return None
        return lambda v: any(m(v) for m in members)  # type: ignore[misc]
    if origin is Literal:
        words = get_args(annotation)
        return (lambda v: type(v) is str and v in words) if all(type(w) is str for w in words) else None
    return _SIMPLE.get(annotation)


def _text(value: Any) -> bool:
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")  # a lone surrogate (JSON's "\ud800") is not text to pydantic's reader
    except UnicodeEncodeError:
        return False
    return True


def _whole(value: Any) -> bool:
    return type(value) is int and -MAX_INT - 1 <= value <= MAX_INT


_SIMPLE: dict[Any, Fit] = {
    str: _text,
    int: _whole,
    bool: lambda v: type(v) is bool,
    type(None): lambda v: v is None,
}


def _within_lengths(fit: Fit, low: int | None, high: int | None) -> Fit:
    if low is None and high is None:
        return fit
    return lambda v: fit(v) and (type(v) is not str or ((low is None or len(v) >= low) and (high is None or len(v) <= high)))
