"""Reference pages (docs/reference/): one per tool, an index, and the error codes.

They follow the pages this product mirrors (../shared/reference/swarmops-undo.md): the
description, the tool's facts as YAML, the input schema as a table and as the JSON Schema
`tools/list` gives, the result, the annotations, the CLI command, an example request and
response recorded by running the tool (examples.py), and the errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from swarmctl import registry, schemas
from swarmctl.envelope import ERROR_CODES
from swarmctl.gen.notice import NOTICE
from swarmctl.gen.examples import ACTOR, record
from swarmctl.spec import Tool

HEADER = f"<!-- {NOTICE} -->"

ANNOTATION_MEANINGS = {
    "destructiveHint": "True: a tool that changes the store may overwrite or delete what is there, not only add to it.",
    "idempotentHint": "True: calling it again with the same arguments changes nothing more.",
    "openWorldHint": "True: it reaches beyond the store: a workflow's command steps run programs, which may change anything. False: it stays inside the store.",
    "readOnlyHint": "True: the tool does not change its environment, the store.",
}


def pages() -> dict[str, str]:
    files = {f"docs/reference/{t.name}.md": tool_page(t) for t in registry.tools()}
    files["docs/reference/README.md"] = index_page()
    files["docs/reference/errors.md"] = errors_page()
    return files


# --- one tool ------------------------------------------------------------------------------


def tool_page(tool: Tool) -> str:
    request_schema = schemas.json_schema(tool.request)
    result_schema = schemas.json_schema(tool.result, mode="serialization")
    example = record(tool)
    out = [HEADER, "", f"# {tool.name}", "", tool.description, "", "```yaml"]
    facts = {
        "title": tool.title,
        "description": tool.summary,
        "since": tool.since,
        "mutates": tool.mutates,
        "identity_required": tool.needs_identity,
        "cli_command": tool.command,
        "envelope_op": tool.name,
        "request_type": tool.request.__name__,
        "result_type": tool.result.__name__,
        "mcp": tool.mcp,
        "annotations": tool.annotations.to_mcp(),
    }
    out += [f"{key}: {json.dumps(value, separators=(',', ':'))}" for key, value in facts.items()]
    out += ["```", "", "## Input schema", ""]
    out += [
        f"`arguments` is a `{tool.request.__name__}`: `swarmctl schema {tool.request.__name__}` prints the type. "
        "A field the type does not know is ignored; a field named twice is `E_INVALID_ARG`. "
        "Values are checked strictly: `\"6\"` is not a number, `1` is not `true`.",
        "",
    ]
    out += _fields_table(request_schema, tool) if tool.fields() else ["No arguments: `{}`."]
    out += ["", "### JSON Schema", "", "As `tools/list` gives it: each `$ref` replaced by its definition, so that it stands alone.", ""]
    out += ["```json", json.dumps(request_schema, indent=2, sort_keys=True, ensure_ascii=False), "```", ""]
    out += ["## Result", ""]
    out += [
        f"On success the envelope's `result` is a `{tool.result.__name__}` "
        f"(`swarmctl schema {tool.result.__name__}` prints its JSON Schema), its keys in this order:",
        "",
    ]
    out += _result_table(result_schema)
    if tool.mcp:
        out += [
            "",
            "The tool's `outputSchema` is the schema of the whole envelope, success or failure, with this as its "
            "`result`: `structuredContent` is the envelope (see [the envelope](README.md#the-envelope)).",
        ]
    out += ["", "## Annotations", ""]
    out += ["| Annotation | Value | Meaning |", "| --- | --- | --- |"]
    out += [f"| `{key}` | `{json.dumps(value)}` | {ANNOTATION_MEANINGS[key]} |" for key, value in tool.annotations.to_mcp().items()]
    out += ["", "## CLI command", ""]
    man = "swarmctl-" + "-".join(tool.cli)
    out += [f"`{tool.command}` (`man {man}`) runs the same operation and prints the same envelope." if tool.mcp
            else f"`{tool.command}` (`man {man}`). It is not served over MCP: {tool.cli_only}; "
                 "`swarmctl call` runs it with JSON arguments."]
    out += [""] + (_cli_table(tool) if tool.fields() else ["No options."])
    out += ["", "## Examples", ""]
    out += _examples(tool, example)
    out += ["", "## Errors", ""]
    out += _errors(tool)
    out += ["", "## See also", ""]
    out += [f"- `man {man}`", "- [Tools](README.md)", "- [Error codes](errors.md)"]
    return "\n".join(out) + "\n"


def _fields_table(schema: dict[str, Any], tool: Tool) -> list[str]:
    import dataclasses

    required = set(schema.get("required", []))
    factories = {f.name: f.default_factory for f in tool.fields() if f.default_factory is not dataclasses.MISSING}  # type: ignore[misc]
    rows = ["| Field | Type | Required | Default | Description |", "| --- | --- | --- | --- | --- |"]
    for name, field in schema.get("properties", {}).items():
        default = f"`{json.dumps(field['default'])}`" if "default" in field else ""
        if name in factories:
            default = f"`{json.dumps(factories[name]())}`"
        rows.append(
            f"| `{name}` | {_cell(type_text(field))} | {'yes' if name in required else 'no'} | {default} | {_cell(field.get('description', ''))} |"
        )
    return rows


def _result_table(schema: dict[str, Any]) -> list[str]:
    rows = ["| Key | Type |", "| --- | --- |"]
    rows += [f"| `{name}` | {_cell(type_text(field))} |" for name, field in schema.get("properties", {}).items()]
    return rows


def _cli_table(tool: Tool) -> list[str]:
    from swarmctl.spec import cli_of, long_flag

    rows = ["| Field | On the command line |", "| --- | --- |"]
    for f in tool.fields():
        cli = cli_of(f)
        if cli.positional:
            form = f"`{cli.metavar or f.name.upper()}` (positional)"
        else:
            shorts = [flag for flag in cli.flags if not flag.startswith("--")]
            form = "`" + ", ".join([*shorts, long_flag(f)]) + (f" {cli.metavar}" if cli.metavar else "") + "`"
            if cli.parse or str(f.type).startswith("list"):
                form += ", repeated"
        rows.append(f"| `{f.name}` | {_cell(form)} |")
    return rows


def _examples(tool: Tool, example: Any) -> list[str]:
    out: list[str] = []
    if example.files:
        out += ["In the working directory, [tmp]:", ""]
        for path, text in example.files.items():
            script = text.startswith("#!")
            language = "toml" if path.endswith(".toml") else "sh" if script else "text"
            out += [f"`{path}`" + (" (executable)" if script else ""), "", f"```{language}", text.rstrip("\n"), "```", ""]
    if example.setup:
        calls = ", then ".join(f"`{name}` `{json.dumps(args, separators=(',', ':'))}`" for name, args in example.setup)
        out += [f"Called first, on the same store: {calls}.", ""]
    if tool.mcp:
        out += ["### MCP", "", "```json", json.dumps(example.request, indent=2, sort_keys=True, ensure_ascii=False), "```", ""]
        out += ["```json", json.dumps(example.response, indent=2, sort_keys=True, ensure_ascii=False), "```", ""]
        out += [
            f"The server ran as `swarmctl mcp --repo [tmp]/store --as {ACTOR}` on the store `swarmctl demo` makes "
            "(ops 1 to 6; op 6 is agent/worker-17 moving release/v1), after `initialize`. A name in square brackets, "
            "such as `[tmp]` or `[c1]`, stands for what differs from run to run: the temporary directory, an id, a time, "
            "the version.",
            "",
        ]
    out += ["### CLI", "", "```console", f"$ {example.command}", example.text, "```"]
    return out


def _errors(tool: Tool) -> list[str]:
    codes: dict[str, str] = {"E_INVALID_ARG": f"arguments that do not fit `{tool.request.__name__}` (a field named twice among them included), or a value the tool refuses."}
    if tool.needs_identity:
        codes["E_IDENTITY_REQUIRED"] = "no identity: `--as` / `SWARMCTL_AS` (for MCP, the server's `--as`)."
    if tool.needs_store:
        codes["E_NOT_A_REPO"] = "the store is not there" + ("; the MCP server serves on." if tool.mcp else ".")
    if _names_things(tool):
        codes["E_NOT_FOUND"] = "something it names (an op, a ref, a changeset, a type) does not exist."
    named = re.findall(r"\bE_[A-Z_]+\b", tool.description)
    for code in named:
        codes.setdefault(code, _when(code))
    if tool.needs_store:
        if tool.mutates:
            codes.setdefault("E_BUSY", _when("E_BUSY"))
        codes.setdefault("E_STORE_CORRUPT", _when("E_STORE_CORRUPT"))
        codes.setdefault("E_STORE_VERSION", _when("E_STORE_VERSION"))
    codes["E_INTERNAL"] = "a bug; the message carries a correlation id."
    out = [
        "A failed call is an envelope with `ok: false` (over MCP, a tool result with `isError: true`; "
        "on the command line, the code's exit status). Its `error.code` is one of:",
        "",
    ]
    out += [f"- [`{code}`](errors.md#{code.lower()}) (exit {ERROR_CODES[code].exit}): {text}" for code, text in codes.items()]
    return out


def _names_things(tool: Tool) -> bool:
    """Whether a field names something the store must have: an op, a changeset, a ref to read
    (a ref filter or a ref to create is not looked up), a workflow, a type."""
    from swarmctl.spec import cli_of

    looked_up = {"ops", "undoable_ops", "changesets", "workflows", "steps", "schema_types"}
    return any(
        cli_of(f).complete in looked_up or (cli_of(f).complete == "refs" and cli_of(f).positional and tool.name != "ref_set")
        for f in tool.fields()
    )


def _when(code: str) -> str:
    return ERROR_CODES[code].when + "."


# --- the index and the errors ----------------------------------------------------------------


def index_page() -> str:
    out = [HEADER, "", "# Tools", "", "Every tool, as the CLI runs it and `swarmctl mcp` serves it over MCP "
           "(`tools/list` gives the same names, descriptions, schemas and annotations).", ""]
    out += ["| Tool | CLI | | Read-only | Destructive | Idempotent |", "| --- | --- | --- | --- | --- | --- |"]
    for t in registry.tools():
        a = t.annotations
        out.append(
            f"| [`{t.name}`]({t.name}.md) | `{t.command}` | {_cell(t.summary)}{'' if t.mcp else ' (CLI only)'} | "
            f"{_yes(a.read_only)} | {_yes(a.destructive)} | {_yes(a.idempotent)} |"
        )
    out += ["", "## The envelope", ""]
    out += [
        "Every tool returns one envelope, the same object on every door: the CLI prints it (compact to a pipe), "
        "`swarmctl call` prints it, and `tools/call` returns it as `structuredContent` and, compact, as the text "
        "of its one `content` block, with `isError` true exactly when `ok` is false.",
        "",
        "```json",
        '{"ok":true,"op":"undo","api":1,"result":{...},"meta":{"repo":"/abs/path/store","elapsed_ms":3,"resolved":{},"auth":"trust"}}',
        '{"ok":false,"op":"undo","api":1,"error":{"code":"E_CAS_MISMATCH","message":"...","details":{...},"hint":"...","next":null},"meta":{...}}',
        "```",
        "",
        "Each tool's `outputSchema` is the JSON Schema of its envelope: `ok`, `op` (the tool's name), `api` (1), "
        "`meta`, and `result` (the tool's result type) when `ok` is true or `error` when it is false. A client that "
        "validates `structuredContent` validates the whole envelope. `error.next`, when not null, is the call that "
        "resolves the error, for MCP (`tool`, `arguments`) and the shell (`argv`).",
        "",
        "An unknown tool is an envelope too: `E_NOT_FOUND`, with `op` null and the served tools in `error.details.tools`.",
        "",
        "See also: [error codes](errors.md), `man swarmctl`, `swarmctl schema`.",
    ]
    return "\n".join(out) + "\n"


def errors_page() -> str:
    out = [HEADER, "", "# Error codes", "", "Codes are stable strings; each maps to one exit status. Scripts branch on them.", ""]
    out += ["| Code | Exit | When |", "| --- | --- | --- |", "| (ok) | 0 | success, including a replay and every preview or dry run |"]
    out += [f"| [`{c.code}`](#{c.code.lower()}) | {c.exit} | {_cell(c.when)} |" for c in ERROR_CODES.values()]
    for c in ERROR_CODES.values():
        users = [t.name for t in registry.tools() if c.code in t.description]
        out += ["", f"## {c.code}", "", f"Exit status {c.exit}: {c.when}."]
        if users:
            out += ["", "Named by: " + ", ".join(f"[`{name}`]({name}.md)" for name in users) + "."]
    return "\n".join(out) + "\n"


# --- text ----------------------------------------------------------------------------------


def type_text(schema: dict[str, Any]) -> str:
    """A field's JSON Schema type in words: `integer ≥ 1 or "@"`, `array of string`, `string or null`."""
    if "anyOf" in schema:
        parts = [type_text(s) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = any(s.get("type") == "null" for s in schema["anyOf"])
        return " or ".join(parts) + (" or null" if nullable else "")
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None and high < 2**62:
            return f"integer {low}–{high}"
        return f"integer ≥ {low}" if low is not None else "integer"
    if kind == "array":
        return "array of " + type_text(schema.get("items", {}))
    if kind == "object":
        if schema.get("title") and "properties" in schema:
            return f"object ({schema['title']})"
        extra = schema.get("additionalProperties")
        return "object of " + type_text(extra) if isinstance(extra, dict) and extra else "object"
    if kind == "string":
        bounds = [f"at least {schema['minLength']}" if "minLength" in schema else "", f"at most {schema['maxLength']}" if "maxLength" in schema else ""]
        said = ", ".join(b for b in bounds if b)
        unit = "character" if said.endswith(" 1") else "characters"
        return f"string ({said} {unit})" if said else "string"
    return kind or "any JSON value"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _yes(value: bool) -> str:
    return "yes" if value else "no"

