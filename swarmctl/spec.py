"""How a tool is declared: its entry in the registry and the fields of its request.

Request and result types are standard-library dataclasses. pydantic validates them at the JSON
doors (MCP, `swarmctl call`) and derives their JSON Schema (`swarmctl schema`, `tools/list`,
the reference pages); the CLI reads the very same fields to build its options. Keeping them
plain dataclasses means a read such as `swarmctl op log` never pays for importing pydantic,
which costs more than the rest of the command together.

`arg()` declares one request field: `description`, `min_length`, `max_length` and `examples`
are pydantic `Field` arguments (pydantic reads them from the dataclass field's metadata); `cli`
says how the field appears on the command line. Integer bounds are a `Range` in the field's
annotation, read by pydantic at the JSON doors and by Typer at the CLI. Two more are read only
at the JSON doors (`swarmctl/fields.py`): `json_aliases`, other names the field may be sent as
(`workflow_id` for `workflow`), and `json_bool`, the value a JSON `true`/`false` stands for
(`acknowledge_unknown_effects: true` is `["all"]`). Say both in the field's description.
"""

import dataclasses
from typing import Any, Callable, Literal, NamedTuple

# SQLite integers are signed 64-bit: the largest op number or count we can be asked about.
MAX_INT = 2**63 - 1


class Range:
    """Integer bounds, as `Annotated[int, Range(1, 100)]`.

    pydantic reads it through its `__get_pydantic_core_schema__` protocol (validation and the
    JSON Schema's minimum/maximum); the CLI gives Typer the same bounds. It is ours rather
    than annotated_types' so a command that never meets pydantic does not import either.
    """

    __slots__ = ("ge", "le")

    def __init__(self, ge: int, le: int = MAX_INT) -> None:
        self.ge = ge
        self.le = le

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.int_schema(ge=self.ge, le=self.le, strict=True)

    def __repr__(self) -> str:
        return f"Range({self.ge}, {self.le})"

Complete = Literal["ops", "undoable_ops", "refs", "changesets", "workflows", "steps", "schema_types", "actors"]


# The records below are NamedTuples rather than dataclasses: every command defines them, and a
# NamedTuple costs a sixth of a frozen dataclass to define. (Nor are this module's annotations
# postponed: typing.NamedTuple would compile each one given as text, a third of its cost.)


class Cli(NamedTuple):
    """How a request field appears on the command line."""

    positional: bool = False
    flags: tuple[str, ...] = ()  # e.g. ("-n", "--limit"); default: --field-name
    metavar: str | None = None
    complete: Complete | None = None  # what the shell completes for it
    # How the CLI turns what was typed into the request value:
    #   "kv": repeated K=V into a dict; "file": repeated PATH into {path: text};
    #   "text": one PATH (or - for stdin) into its text; "json": JSON text into its value.
    parse: Literal["kv", "file", "text", "json"] | None = None
    hidden: bool = False


def request_type(cls: type) -> type:
    """Declare a request type: immutable, keyword-only fields declared with `arg()`."""
    return dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)


def result_type(cls: type) -> type:
    """Declare a result type: its fields, in order, are the result's keys in the envelope."""
    return dataclasses.dataclass(eq=False)(cls)


def arg(
    default: Any = dataclasses.MISSING,
    *,
    description: str,
    cli: Cli | None = None,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    **constraints: Any,
) -> Any:
    """A request field: its description and constraints (pydantic `Field` names) and its CLI form.

    Values are checked strictly at the JSON doors (`arguments.read_request`): "6" is not a
    number, 1 is not true. Strictness is the validator's mode, not a per-field constraint:
    pydantic cannot apply `strict` to a union or a literal (an op number or `@`).
    """
    metadata = {"description": description, "cli": cli or Cli(), **constraints}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def cli_of(f: dataclasses.Field) -> Cli:
    return f.metadata.get("cli") or Cli()


WORKFLOW = "{workflow}"  # in an example's words and arguments: the id of the store's newest workflow
EXAMPLE_ACTOR = "agent/worker-17"  # who runs the examples


class Call(NamedTuple):
    """A call an example makes first, to set the store up, and the outcome it must have:
    "ok", or the error code it fails with (how an example reaches a failed workflow); `actor`
    makes it as another actor than the example's (a workflow of someone else's, say)."""

    tool: str
    arguments: dict[str, Any] = {}
    outcome: str = "ok"
    actor: str | None = None


class Example(NamedTuple):
    """One call of a tool and what it must end in, declared beside the tool, in its area
    module's `EXAMPLES` (`registry.examples(tool)`).

    Every example of an MCP tool is a parity case (tests/test_parity.py: the CLI, `swarmctl
    call` and MCP give the same envelope, and it ends in `outcome`). The first example of each
    tool is run on a demo store and recorded on its reference page (swarmctl/gen/examples.py);
    those with a `caption` end the command's --help and fill its man page's EXAMPLES, in order.
    Each runs on a fresh `swarmctl demo` store (ops 1-6: op 6 is agent/worker-17 moving
    release/v1), as agent/worker-17, in a directory holding `files` (one starting with `#!` is
    written executable, for a workflow step to run), after the `setup` calls. Workflow ids are
    random: "{workflow}" in `cli` and `arguments` is the newest workflow's id when it runs.
    """

    cli: tuple[str, ...]  # the command line after `swarmctl --repo STORE --as agent/worker-17`
    arguments: dict[str, Any]  # the same call's MCP arguments
    outcome: str = "ok"  # "ok", or the error code the call fails with
    caption: str = ""  # what it shows, in a line, for --help and the man page (empty: not shown there)
    setup: tuple[Call, ...] = ()
    files: dict[str, str] = {}
    store: bool = True  # run on a demo store (False: in an empty directory, as `init` and `demo` are)


class Annotations(NamedTuple):
    """MCP tool annotations: hints for a client deciding whether to ask before calling."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False

    def to_mcp(self) -> dict[str, bool]:
        return {
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
            "readOnlyHint": self.read_only,
        }


READ = Annotations(read_only=True, destructive=False, idempotent=True)


class Address(NamedTuple):
    """Where a tool is reached: its name, its command path and its request type. Enough to name a
    call to it (an envelope's `next`) without the function that runs it, so a module that points
    to a tool need not import the module that defines it."""

    name: str
    cli: tuple[str, ...]
    request: type

    def call(self, **arguments: Any) -> dict[str, Any]:
        """This tool called with `arguments`, as an envelope's `error.next`: for MCP and the shell."""
        return {"tool": self.name, "arguments": arguments, "argv": self.argv(**arguments)}

    def argv(self, **arguments: Any) -> list[str]:
        positional, options = [], []
        for f in dataclasses.fields(self.request):
            if f.name not in arguments:
                continue
            value, cli = arguments[f.name], cli_of(f)
            if cli.positional:
                positional.append(str(value))
                continue
            flag = long_flag(f)
            if isinstance(value, bool):
                options += [flag] if value else []
            elif isinstance(value, (list, tuple)):
                for item in value:
                    options += [flag, str(item)]
            elif value is not None:
                options += [flag, str(value)]
        return ["swarmctl", *self.cli, *positional, *options]

    def tool(self, run: Callable[..., Any], annotations: Annotations, title: str, summary: str, **rest: Any) -> "Tool":
        """The registry entry of the tool at this address, run by `run`: its result type is the
        one `run` returns, and it changes the store (`mutates`) unless `annotations` say it only
        reads. `rest`: the entry's other fields, where they differ from Tool's defaults."""
        import typing

        hints = typing.get_type_hints(run)
        if hints.get("req") is not self.request:
            raise TypeError(f"{run.__name__} takes {hints.get('req')}, but {self.name}'s request is {self.request}")
        rest.setdefault("mutates", not annotations.read_only)
        return Tool(self.name, self.cli, title, summary, self.request, hints["return"], run, annotations, **rest)


def address(command: str, request: type) -> Address:
    """The address of `command` (its words as typed, `workflow show-definition`): its tool is
    named by the same words joined by `_` (`workflow_show_definition`)."""
    cli = tuple(command.split())
    return Address("_".join(cli).replace("-", "_"), cli, request)


class Tool(NamedTuple):
    """One tool, defined once: the CLI command, the MCP tool, its schema and its docs follow."""

    name: str  # the MCP tool name, which is also the envelope's `op`
    cli: tuple[str, ...]  # the command path under `swarmctl`, e.g. ("op", "undo")
    title: str
    summary: str  # one line: CLI help listing and the MCP title's companion
    request: type
    result: type
    run: Callable[..., Any]  # run(ctx, request) -> result; its docstring is the description
    annotations: Annotations
    mutates: bool  # needs an identity and a writable store
    needs_store: bool = True
    # Why it is not served over MCP, as the docs say it (None: it is): `init` makes a store, and
    # a server serves one; a token holder must not mint a token.
    cli_only: str | None = None
    records: str | None = None  # the result's list, one record a line with `-o jsonl` (e.g. "ops")
    # `call --lines` may commit it together with the calls beside it (one sync for all of them;
    # each still writes all of itself or nothing): it uses the store only through ctx.store(),
    # within the call, and starts no process.
    group_commit: bool = False
    # The result's field that is shown this once and never again (a token's value): the CLI
    # refuses -q, which would print nothing, before the tool runs.
    shown_once: str | None = None
    since: str = "0.1.0"

    @property
    def description(self) -> str:
        import inspect

        return inspect.cleandoc(self.run.__doc__ or self.summary)

    @property
    def mcp(self) -> bool:
        """Served over MCP."""
        return self.cli_only is None

    @property
    def needs_identity(self) -> bool:
        """A tool that changes the store needs --as; so does one whose description says it needs
        it although it only reads (`tx status` shows the caller's own transaction)."""
        return self.mutates or "E_IDENTITY_REQUIRED" in self.description

    @property
    def command(self) -> str:
        return "swarmctl " + " ".join(self.cli)

    def fields(self) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(self.request)

    @property
    def address(self) -> Address:
        return Address(self.name, self.cli, self.request)

    def call(self, **arguments: Any) -> dict[str, Any]:
        """This tool called with `arguments`, as an envelope's `error.next`: for MCP and the shell."""
        return self.address.call(**arguments)

    def argv(self, **arguments: Any) -> list[str]:
        return self.address.argv(**arguments)


def unoptional(annotation: Any) -> Any:
    """`X | None` as `X` (a union of several without None as their union); any other as it is."""
    import types
    import typing

    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return annotation


def is_op_spec(annotation: Any) -> bool:
    """An op as the CLI takes it: a whole number or `@` (tools/common.py's OpSpec)."""
    import typing

    return any(typing.get_origin(a) is Literal and typing.get_args(a) == ("@",) for a in typing.get_args(annotation))


def long_flag(f: dataclasses.Field) -> str:
    flags = [flag for flag in cli_of(f).flags if flag.startswith("--")]
    return flags[0] if flags else "--" + f.name.replace("_", "-")


def plain(value: Any) -> Any:
    """A result as JSON values: dataclasses become objects with their fields in declared order.

    A page of 10,000 ops is about 140,000 values: the exact types JSON has are answered first,
    and each dataclass's field names are looked up once per class (`_FIELD_NAMES`)."""
    kind = type(value)
    if kind in _JSON_SCALARS or kind is JsonRows or kind is JsonTexts:
        return value
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if kind is dict:
        return {k: plain(v) for k, v in value.items()}
    names = _FIELD_NAMES.get(kind)
    if names is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (bytes, bytearray, memoryview)):
                raise NotJson(value)
            return value
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value))
    return {name: plain(getattr(value, name)) for name in names}


class NotJson(ValueError):
    """Bytes where a result holds JSON values: no tool returns bytes, so they were read from the
    store where text belongs (a BLOB put in a text column of a SQLite file behind swarmctl's
    back): damage, which the runner reports as E_STORE_CORRUPT (store.translated)."""

    def __init__(self, value: bytes | bytearray | memoryview) -> None:
        super().__init__(f"bytes where text belongs ({bytes(value[:16])!r}{'...' if len(value) > 16 else ''})")


class JsonRows(list):
    """Records a store query already built in their JSON form (dicts of JSON values, keys in
    the order of their result type's fields): `plain` returns them as they are, which spares a
    page of 10,000 ops a round trip through dataclasses. tests/test_op_log.py checks that they
    equal what the result type would give."""


class JsonTexts:
    """Records a store query built as JSON text, one compact text each (as envelope.dumps would
    write their JsonRows), for a door that prints the envelope as JSON text (Context.json_text):
    envelope.dumps writes them in as they are, which spares a page of 10,000 ops building its
    values and encoding them again. Read as a sequence, they are their JsonRows (decoded once).
    tests/test_op_log.py checks that they are what envelope.dumps writes of those rows."""

    __slots__ = ("json_texts", "_rows")

    def __init__(self, texts: list[str]) -> None:
        self.json_texts = texts
        self._rows: JsonRows | None = None

    def rows(self) -> JsonRows:
        if self._rows is None:
            import json

            self._rows = JsonRows(json.loads("[" + ",".join(self.json_texts) + "]"))
        return self._rows

    def __len__(self) -> int:
        return len(self.json_texts)

    def __iter__(self) -> Any:
        return iter(self.rows())

    def __getitem__(self, index: Any) -> Any:
        return self.rows()[index]

    def __eq__(self, other: object) -> bool:
        return self.rows() == (other.rows() if isinstance(other, JsonTexts) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JsonTexts({len(self.json_texts)} records)"


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
