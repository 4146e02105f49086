"""The one check of a request's values against their fields' constraints, for both doors.

A field is constrained by its declaration (swarmctl/spec.py): integer bounds as
`Annotated[int, Range(lo, hi)]`, a closed set of words as `Literal[...]`, and lengths as
`arg(min_length=.., max_length=..)`. The CLI checks what it parsed here, and the JSON doors
check their arguments here before pydantic validates them, so the same bad value gets the
same E_INVALID_ARG message at every door (`swarmctl op log -n 0`, `swarmctl call op_log
'{"limit": 0}'`, MCP). A value of the wrong type is left to each door's parser: only a value
of the field's type is checked (an int for a Range, a string for a Literal, a string, list
or object for a length).
"""

import dataclasses
import types
import typing
from functools import lru_cache
from typing import Annotated, Any, Literal, Mapping, NamedTuple, get_args, get_origin

from swarmctl.envelope import SwarmError
from swarmctl.spec import Range


class Constraint(NamedTuple):
    """What a field accepts, as declared: None where it says nothing."""

    bounds: Range | None = None
    choices: tuple[str, ...] | None = None
    min_length: int | None = None
    max_length: int | None = None


def check(request: type, values: Mapping[str, Any]) -> None:
    """E_INVALID_ARG for the first value (in field order) outside its field's constraints."""
    declared = constraints_of(request)
    for name, value in values.items():
        if name in declared:
            _check_value(name, value, declared[name])


@lru_cache(maxsize=None)
def constraints_of(request: type) -> dict[str, Constraint]:
    """The constrained fields of a request type, by name."""
    hints = typing.get_type_hints(request, include_extras=True)
    found = {}
    for f in dataclasses.fields(request):
        bounds, choices = _declared(hints[f.name])
        constraint = Constraint(bounds, choices, f.metadata.get("min_length"), f.metadata.get("max_length"))
        if constraint != Constraint():
            found[f.name] = constraint
    return found


def _declared(annotation: Any) -> tuple[Range | None, tuple[str, ...] | None]:
    """The Range and the Literal words of an annotation, looking through Optional and unions."""
    members = get_args(annotation) if get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    bounds, choices = None, None
    for member in members:
        if get_origin(member) is Annotated:
            bounds = next((e for e in get_args(member)[1:] if isinstance(e, Range)), bounds)
        elif get_origin(member) is Literal:
            choices = tuple(get_args(member))
    return bounds, choices


def _check_value(name: str, value: Any, constraint: Constraint) -> None:
    if constraint.bounds is not None and type(value) is int:
        low, high = constraint.bounds.ge, constraint.bounds.le
        if not low <= value <= high:
            raise _invalid(f"{name} must be from {low} to {high}, not {value}", name, value=value, minimum=low, maximum=high)
    # A word outside an int-or-word union (`op`: a number or @) is a wrong type, not a wrong word.
    words_only = constraint.choices is not None and constraint.bounds is None
    if words_only and isinstance(value, str) and value not in constraint.choices:
        words = ", ".join(repr(c) for c in constraint.choices)
        raise _invalid(f"{name} must be one of {words}, not {value!r}", name, value=value, choices=list(constraint.choices))
    low, high = constraint.min_length, constraint.max_length
    if (low is not None or high is not None) and isinstance(value, (str, list, dict)):
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"{low} to {high}"
            unit = "character" if isinstance(value, str) else "item"
            unit += "" if bounds in ("at least 1", "at most 1") else "s"  # "at least 1 character"
            raise _invalid(
                f"{name} must be {bounds} {unit} long, not {len(value)}",
                name,
                min_length=low,
                max_length=high,
                length=len(value),
            )


def _invalid(message: str, field: str, **details: Any) -> SwarmError:
    return SwarmError("E_INVALID_ARG", message, details={"field": field, **details})
