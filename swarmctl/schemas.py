"""JSON Schemas of request and result types, and pydantic's validation of JSON arguments.

This is the one module that imports pydantic. `swarmctl schema` and the MCP server import it;
`swarmctl call` only for arguments that are not plainly of their fields' types
(swarmctl.arguments reads those). The CLI's own options are parsed by Typer from the same fields.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from swarmctl.envelope import API_VERSION, ERROR_CODES, SwarmError
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


# The envelope's `error` and `meta`: the same for every tool (swarmctl.envelope).
_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"enum": list(ERROR_CODES), "description": "Stable; each code has one exit code."},
        "message": {"type": "string"},
        "details": {"type": "object"},
        "hint": {"type": ["string", "null"]},
        "next": {
            "description": "The call that resolves the error, for MCP (`tool`, `arguments`) and the shell (`argv`).",
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "tool": {"type": "string"},
                        "arguments": {"type": "object"},
                        "argv": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["tool", "arguments", "argv"],
                },
            ],
        },
    },
    "required": ["code", "message", "details", "hint", "next"],
}
_META_SCHEMA = {
    "type": "object",
    "properties": {
        "repo": {"type": ["string", "null"], "description": "The store's absolute path; null where none was opened."},
        "elapsed_ms": {"type": "integer", "minimum": 0},
        "resolved": {"type": "object", "description": "Each symbolic argument resolved, to what it named."},
        "auth": {"type": "string", "description": "How the actor was established: trust (--as), none, database (verified by a PostgreSQL store against its policy), token (a bearer token over `swarmctl mcp --http`)."},
        "ignored": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The argument fields the request type does not know, which were ignored; "
            "present only when there were some.",
        },
    },
    "required": ["repo", "elapsed_ms", "resolved", "auth"],
}


def envelope_schema(tool: Tool) -> dict[str, Any]:
    """The JSON Schema of the envelope `tool` returns, success or failure: the MCP outputSchema.

    `structuredContent` is the whole envelope (as the CLI prints it), so this is what a client
    validates it against. Its `result` is the tool's result type; `error` and `meta` are the
    same for every tool (`swarmctl.envelope`); `ok` says which of the two the envelope is.
    """
    result = json_schema(tool.result, mode="serialization")
    del result["$schema"]
    return {
        "$schema": DIALECT,
        "title": f"Envelope of {tool.name}",
        "description": f"The envelope: `result` ({tool.result.__name__}) when `ok` is true, `error` when it is false.",
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "op": {"const": tool.name},
            "api": {"const": API_VERSION},
            "result": result,
            "error": copy.deepcopy(_ERROR_SCHEMA),
            "meta": copy.deepcopy(_META_SCHEMA),
        },
        "required": ["ok", "op", "api", "meta"],
        "oneOf": [
            {"properties": {"ok": {"const": True}}, "required": ["result"]},
            {"properties": {"ok": {"const": False}}, "required": ["error"]},
        ],
    }


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node and len(node) == 1:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _inline(copy.deepcopy(defs[name]), defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def validated(tool: Tool, arguments: dict[str, Any]) -> Any:
    """JSON arguments (their names read, their constraints checked: swarmctl.arguments) as
    the tool's request, by pydantic, or E_INVALID_ARG saying what does not fit."""
    try:
        # Strict, as JSON: "6" is not a number, 1 is not true. (Strict Python validation would
        # want a dataclass instance rather than an object; strict JSON validation takes one.)
        return adapter(tool.request).validate_json(json.dumps(arguments), strict=True)
    except ValidationError as exc:
        errors = [
            {"field": _field_path(tool.request, e["loc"]), "message": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        summary = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
        raise SwarmError(
            "E_INVALID_ARG",
            f"arguments do not fit {tool.request.__name__}: {summary}",
            details={"type": tool.request.__name__, "errors": errors},
            hint=f"`swarmctl schema {tool.request.__name__}` prints the type.",
        ) from None


def _field_path(request: type, loc: tuple) -> str | None:
    """Where an error is, as a caller names it: `metadata.k`, or `op` rather than pydantic's
    `op.constrained-int` (in a union, the rest of the location names the branch tried)."""
    if not loc:
        return None
    import types
    import typing

    hint = typing.get_type_hints(request).get(str(loc[0]))
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(members) > 1:
        return str(loc[0])
    return ".".join(str(part) for part in loc)
