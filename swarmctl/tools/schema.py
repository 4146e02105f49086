"""`schema`: the JSON Schema of any request or result type."""

from typing import Any, Iterable

from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Cli, READ, Tool, arg, request_type, result_type, Example


@result_type
class SchemaResult:
    type: str | None
    schema: dict[str, Any] | None
    types: list[str] | None  # the listing, when no type was asked for


@request_type
class SchemaReq:
    type: str | None = arg(
        None,
        description="A request or result type, e.g. UndoReq. Omitted: list the types.",
        cli=Cli(positional=True, metavar="TYPE", complete="schema_types"),
    )


def schema(ctx: Context, req: SchemaReq) -> SchemaResult:
    """Print the JSON Schema of a request or result type (e.g. `swarmctl schema UndoReq`), with
    each `$ref` replaced by its definition, as `tools/list` gives it. Without TYPE, list the
    types."""
    from swarmctl import schemas

    known = types_of(ctx.tools().values() if ctx.tools else ())
    if req.type is None:
        return SchemaResult(type=None, schema=None, types=sorted(known))
    if req.type not in known:
        raise SwarmError(
            "E_NOT_FOUND",
            f"no type {req.type}",
            details={"type": req.type, "types": sorted(known)},
            hint="`swarmctl schema` lists the types.",
        )
    return SchemaResult(type=req.type, schema=schemas.json_schema(known[req.type]), types=None)


def types_of(tools: Iterable[Tool]) -> dict[str, type]:
    """Every request and result type of `tools` by name (`swarmctl schema` lists them)."""
    found: dict[str, type] = {}
    for t in tools:
        found.setdefault(t.request.__name__, t.request)
        found.setdefault(t.result.__name__, t.result)
    return found


SCHEMA = Tool(
    name="schema",
    cli=("schema",),
    title="JSON Schema of a type",
    summary="Print the JSON Schema of a request or result type.",
    request=SchemaReq,
    result=SchemaResult,
    run=schema,
    annotations=READ,
    mutates=False,
    needs_store=False,
)

TOOLS = [SCHEMA]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "schema": (
        Example(("schema", "RefShowReq"), {"type": "RefShowReq"}, caption="The JSON Schema of ref show's request."),
        Example(("schema", "UndoReq"), {"type": "UndoReq"}),
    ),
}
