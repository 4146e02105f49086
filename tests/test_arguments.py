"""JSON arguments read without pydantic (swarmctl/arguments.py) give the very request pydantic
gives from them, or are left to pydantic.

For every example and parity case (each example's arguments and its setup calls', and the
parity test's misfits), for variants of each (each value replaced by a value of another JSON
type, a number at and past 64 bits, a lone surrogate, a required field dropped), and for any
arguments hypothesis makes, the plain reading is either None or equal, field by field and type
by type, to pydantic's strict reading of the same arguments. So it never decides an error. And
it does read the common calls: every example of the tools whose fields are all plain is read
without pydantic, and `swarmctl call` then imports none of it (tests/test_startup.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swarmctl import arguments, constraints, fields, registry, schemas
from swarmctl.envelope import SwarmError
from swarmctl.spec import MAX_INT, WORKFLOW
from test_parity import OTHER_MISFITS, OUT_OF_CONSTRAINTS

WORKFLOW_ID = "wf-7d3c2a91"  # in place of "{workflow}", which each case fills in from its store


def typed(request: Any) -> dict[str, Any]:
    """The request's fields, each with its type (6 is not "6", 1 is not True)."""
    return {f.name: (type(getattr(request, f.name)), getattr(request, f.name)) for f in dataclasses.fields(request)}


def pydantic_reading(tool, given: dict[str, Any]) -> Any:
    try:
        return ("ok", typed(schemas.validated(tool, given)))
    except SwarmError as exc:
        return ("error", exc.code, exc.message)


def same_or_declined(tool, given: Any) -> Any:
    """The plain reading of `given`, checked against pydantic's wherever there is one. What the
    doors check before either (names, constraints) is not a reading of types: skipped."""
    if not isinstance(given, dict):
        return None
    try:
        named, _ = fields.read(tool.request, given)
        constraints.check(tool.request, named)
    except SwarmError:
        return None
    plain = arguments.plain_request(tool.request, named)
    if plain is not None:
        assert pydantic_reading(tool, named) == ("ok", typed(plain)), (tool.name, given)
    return plain


def filled(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(WORKFLOW, WORKFLOW_ID)
    if isinstance(value, list):
        return [filled(v) for v in value]
    if isinstance(value, dict):
        return {k: filled(v) for k, v in value.items()}
    return value


def cases() -> list[Any]:
    found = []
    for tool in registry.tools():
        for i, example in enumerate(registry.examples(tool)):
            found.append(pytest.param(tool.name, filled(example.arguments), id=f"{tool.name}-{i}"))
            for j, call in enumerate(example.setup):
                found.append(pytest.param(call.tool, filled(call.arguments), id=f"{tool.name}-{i}-setup-{j}-{call.tool}"))
    for name, case in OUT_OF_CONSTRAINTS + OTHER_MISFITS:
        found.append(pytest.param(name, case.arguments, id=f"misfit-{' '.join(case.cli)}"))
    return found


OTHER_VALUES = [None, True, False, 0, 1, -1, 6, 6.0, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30,
                "", "6", "@", "x", "main", "é", "\ud800", "a\x00b", "x" * 5000, [], [1], {}, {"k": "v"}]


def variants(given: dict[str, Any], request: type) -> list[dict[str, Any]]:
    """`given`, each of its values (and each field it leaves out) set to each other value, each
    field left out in turn, and an unknown field beside it."""
    found = [given, {**given, "comment": "x"}]
    for name in [f.name for f in dataclasses.fields(request)]:
        found += [{**given, name: other} for other in OTHER_VALUES]
        found.append({k: v for k, v in given.items() if k != name})
    return found


@pytest.mark.parametrize("name, given", cases())
def test_the_plain_reading_is_pydantics_for_each_case_and_its_variants(name, given):
    tool = registry.get(name)
    for each in variants(given, tool.request):
        same_or_declined(tool, each)


def test_the_plain_reading_reads_the_common_calls():
    """Every example of a tool whose fields are all plain is read without pydantic; and the
    tools whose fields are not all plain are the ones that take a list, an object or more."""
    not_all_plain = set()
    for tool in registry.tools():
        fits, _ = arguments._plain_fields(tool.request)
        if fits.keys() != {f.name for f in dataclasses.fields(tool.request)}:
            not_all_plain.add(tool.name)
            continue
        for example in registry.examples(tool):
            assert same_or_declined(tool, filled(example.arguments)) is not None, (tool.name, example.arguments)
    assert not_all_plain == {"changeset_create", "op_restore", "workflow_rollback", "policy_check"}


def test_the_plain_reading_leaves_what_pydantic_refuses_to_it():
    ref_show, undo = registry.get("ref_show"), registry.get("undo")
    for tool, given in [
        (ref_show, {"name": "\ud800"}),  # not UTF-8: pydantic's JSON reader refuses it
        (ref_show, {"name": 6}),
        (ref_show, {}),  # a required field missing
        (undo, {"op": True}),
        (undo, {"op": 6.0}),
        (undo, {"op": "6"}),
        (undo, {"op": MAX_INT + 1}),
    ]:
        assert arguments.plain_request(tool.request, given) is None, given
        assert pydantic_reading(tool, given)[0] == "error", given
    assert typed(arguments.plain_request(undo.request, {"op": "@"})) == typed(schemas.validated(undo, {"op": "@"}))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_plain_reading_is_pydantics_for_any_arguments(data):
    tool = data.draw(st.sampled_from(registry.tools()))
    names = [f.name for f in dataclasses.fields(tool.request)]
    words = sorted({w for c in constraints.constraints_of(tool.request).values() for w in c.choices or ()})
    value = JSON_VALUES | st.sampled_from(words or ["@"]) | st.integers(min_value=-(2**64), max_value=2**64)
    given = data.draw(st.dictionaries(st.sampled_from(names), value, max_size=len(names))) if names else {}
    same_or_declined(tool, given)
