"""JSON Schemas of request and result types, and validation of JSON arguments into requests.

This is the one module that imports pydantic, and only the JSON doors (MCP, `swarmctl call`)
and `swarmctl schema` import it: the CLI's own options are parsed by Typer from the same fields.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from swarmctl.envelope import SwarmError
from swarmctl.spec import Tool

DIALECT = "https://json-schema.org/draft/2020-12/schema"

class _Schema(GenerateJsonSchema):
    """pydantic's schema, without the per-field titles it derives from field names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


@lru_cache(maxsize=None)
def adapter(cls: type) -> TypeAdapter:
    """Unknown fields are ignored, as pydantic does for dataclasses: a newer client may send more."""
    return TypeAdapter(cls)


def json_schema(cls: type, *, mode: str = "validation") -> dict[str, Any]:
    """The type's JSON Schema with each `$ref` replaced by its definition, so it stands alone."""
    schema = adapter(cls).json_schema(schema_generator=_Schema, mode=mode)
    defs = schema.pop("$defs", {})
    schema = _inline(schema, defs)
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(cls.__name__ + "("):  # dataclasses invent a docstring
        import inspect

        schema["description"] = inspect.cleandoc(doc)
    else:
        schema.pop("description", None)
    return {"$schema": DIALECT, **schema}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node and len(node) == 1:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _inline(copy.deepcopy(defs[name]), defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def validate_request(tool: Tool, arguments: Any) -> Any:
    """JSON arguments as the tool's request, or E_INVALID_ARG saying what does not fit."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise SwarmError(
            "E_INVALID_ARG",
            f"arguments to {tool.name} must be a JSON object, not {type(arguments).__name__}",
            details={"type": type(tool.request).__name__},
        )
    try:
        # Strict, as JSON: "6" is not a number, 1 is not true. (Strict Python validation would
        # want a dataclass instance rather than an object; strict JSON validation takes one.)
        return adapter(tool.request).validate_json(json.dumps(arguments), strict=True)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]) or None, "message": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        summary = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
        raise SwarmError(
            "E_INVALID_ARG",
            f"arguments do not fit {tool.request.__name__}: {summary}",
            details={"type": tool.request.__name__, "errors": errors},
            hint=f"`swarmctl schema {tool.request.__name__}` prints the type.",
        ) from None


class DuplicateField(ValueError):
    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    twice = []
    for key, value in pairs:
        if key in seen:
            twice.append(key)
        seen[key] = value
    if twice:
        raise DuplicateField(twice)
    return seen


def parse_arguments(text: str) -> Any:
    """JSON text as arguments; a field named twice is E_INVALID_ARG, never last-one-wins."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except DuplicateField as exc:
        raise SwarmError(
            "E_INVALID_ARG",
            f"a field is named twice: {exc}",
            details={"fields": exc.names},
            hint="Name each field once.",
        ) from None
    except json.JSONDecodeError as exc:
        raise SwarmError("E_INVALID_ARG", f"arguments are not valid JSON: {exc}", details={"position": exc.pos}) from None
