"""Refs: names that each point at one changeset, moved by compare-and-swap."""

from typing import Any

from swarmctl import names
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Annotations, Cli, READ, Tool, arg, request_type, result_type, Example
from swarmctl.store import Move, Writer, conflicts, queries
from swarmctl.tools.common import REF_NAME_CLI, SET_AGENTS, SET_PROTECT, TARGET_CLI, resolve_changeset


@result_type
class RefEntry:
    name: str
    target: str
    op: int  # the op that last moved it


@result_type
class RefListResult:
    refs: list[RefEntry]


@result_type
class RefShowResult:
    name: str
    target: str
    op: int
    message: str
    actor: str
    at: str


@result_type
class RefSetResult:
    name: str
    old: str | None
    new: str
    op: int | None  # null: the ref already named the target, so nothing was written


@result_type
class RefDeleteResult:
    name: str
    old: str
    op: int


_EXPECT = Cli(metavar="OLD", complete="changesets")


@request_type
class RefSetReq:
    name: str = arg(description="The ref to move or create, e.g. main or release/v1.", cli=REF_NAME_CLI)
    target: str = arg(
        description="The changeset it should name: an id, a unique prefix of 4+ hex digits, or a ref name.",
        cli=TARGET_CLI,
    )
    expect: str | None = arg(
        None,
        description="Compare-and-swap: move only if the ref names this changeset now (else E_CAS_MISMATCH).",
        cli=_EXPECT,
    )
    create: bool = arg(False, description="Compare-and-swap: move only if the ref does not exist yet.")


@request_type
class RefDeleteReq:
    name: str = arg(description="The ref to delete.", cli=REF_NAME_CLI)
    expect: str | None = arg(
        None,
        description="Compare-and-swap: delete only if the ref names this changeset now (else E_CAS_MISMATCH).",
        cli=_EXPECT,
    )


@request_type
class RefListReq:
    prefix: str | None = arg(None, description="Only refs whose names start with this, e.g. release/.")


@request_type
class RefShowReq:
    name: str = arg(description="The ref to show.", cli=REF_NAME_CLI)


def _cas_error(name: str, expected: str | None, actual: str | None, last_op: int | None) -> SwarmError:
    """`last_op`: the op that last moved the ref (its row's `op`; None: the ref is absent)."""
    conflict = [conflicts.Conflict(name, expected, actual, [last_op] if last_op is not None else [])]
    if expected is None:  # --create, of a ref that exists
        return conflicts.cas_mismatch(
            conflict,
            f"ref {name} exists (it names {names.short_id(actual)}): --create makes only a ref that does not; "
            "nothing was written",
            hint=f"Move it without --create (`--expect {names.short_id(actual)}` checks what it names first), or choose another name.",
        )
    found = "does not exist" if actual is None else f"names {names.short_id(actual)}"
    return conflicts.cas_mismatch(
        conflict,
        f"ref {name} {found}, not the expected {names.short_id(expected)}; nothing was written",
        hint=f"Re-read {name} with `swarmctl ref show {name}` and decide again.",
    )


def _not_found(name: str) -> SwarmError:
    return SwarmError(
        "E_NOT_FOUND", f"no ref {name}", details={"ref": name}, hint="`swarmctl ref list` lists the refs."
    )


def _check_expect(name: str, expect: str | None) -> None:
    """`--expect` names what the ref should name now; the ref itself would always match. Empty,
    it names nothing (a script's `--expect "$OLD"` where OLD was never set, or read from a ref
    that did not exist): it was E_NOT_FOUND, which reads as "no such ref"."""
    if expect is not None and not expect.strip():
        raise SwarmError(
            "E_INVALID_ARG",
            "--expect is empty: it must name the changeset the ref names now",
            details={"name": name, "expect": expect},
            hint=f"To move {name} only if it does not exist yet, use --create (ref set); "
            f"`swarmctl ref show {name}` shows what it names now.",
        )
    if expect is not None and expect.strip() == name:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--expect {expect} names the ref being moved, so it could never fail",
            details={"name": name, "expect": expect},
            hint=f"Give the changeset you expect {name} to name now: `swarmctl ref show {name}` shows it.",
        )


# `expected=` of set_in/delete_in when the caller asks for no compare-and-swap.
ANY = object()


def set_in(
    w: Writer, name: str, target_id: str, *, expected: Any = ANY, kind: str = "ref_set", context: str | None = None
) -> RefSetResult:
    """Point ref `name` at changeset `target_id` (a full id), inside the caller's write
    transaction, as one op of `kind`, or none when it already names it. With `expected` (a
    changeset id, or None for "must not exist") it is a compare-and-swap: E_CAS_MISMATCH if the
    ref is not so. `context` leads the op's description (`workflow wf-... step promote: ...`)."""
    w.refuse_forbidden_moves([name])  # before the compare-and-swap: forbidden wins over a conflict
    row = queries.ref_row(w.conn, name)
    current = row.target if row else None
    if expected is not ANY and current != expected:
        raise _cas_error(name, expected, current, row.op if row else None)
    if current == target_id:
        return RefSetResult(name=name, old=current, new=target_id, op=None)
    what = f"set {name} to" if current else f"create {name} at"
    op = w.append_op(kind, _described(context, f"{what} {names.short_id(target_id)}"), [Move(name, current, target_id)])
    return RefSetResult(name=name, old=current, new=target_id, op=op)


def delete_in(
    w: Writer, name: str, *, expected: Any = ANY, kind: str = "ref_delete", context: str | None = None
) -> RefDeleteResult:
    """Delete ref `name` inside the caller's write transaction, as one op of `kind`: E_NOT_FOUND
    if there is no such ref; with `expected`, E_CAS_MISMATCH unless it names that changeset.
    `context` leads the op's description, as for `set_in`."""
    w.refuse_forbidden_moves([name])
    row = queries.ref_row(w.conn, name)
    if row is None:
        raise _not_found(name)
    if expected is not ANY and row.target != expected:
        raise _cas_error(name, expected, row.target, row.op)
    description = _described(context, f"delete {name} (was {names.short_id(row.target)})")
    op = w.append_op(kind, description, [Move(name, row.target, None)])
    return RefDeleteResult(name=name, old=row.target, op=op)


def _described(context: str | None, what: str) -> str:
    return f"{context}: {what}" if context else what


def ref_set(ctx: Context, req: RefSetReq) -> RefSetResult:
    """Point a ref at a changeset, creating the ref if needed, as one op. With `--expect OLD` or
    `--create` it is a compare-and-swap: if the ref is not as expected, E_CAS_MISMATCH and
    nothing is written. Setting a ref to what it already names writes nothing (`op` is null).
    A name that reads as a changeset id (4 to 64 lowercase hex characters) is E_INVALID_ARG:
    a ref never shadows a changeset; where a TARGET reads both ways, the changeset id wins.
    A ref the store's policy protects from the caller is E_FORBIDDEN, before anything else."""
    actor = ctx.require_actor()
    name = names.check_new_ref_name(req.name)
    _check_expect(name, req.expect)
    if req.create and req.expect is not None:
        raise SwarmError("E_INVALID_ARG", "--expect and --create exclude each other", details={"fields": ["expect", "create"]})
    store = ctx.store()
    with store.write(actor) as w:
        w.refuse_forbidden_moves([name])  # first: forbidden wins over anything else wrong
        new = resolve_changeset(ctx, w.conn, req.target)
        expected: Any = ANY
        if req.create:
            expected = None
        elif req.expect is not None:
            expected = resolve_changeset(ctx, w.conn, req.expect)
        return set_in(w, name, new, expected=expected)


def ref_delete(ctx: Context, req: RefDeleteReq) -> RefDeleteResult:
    """Delete a ref, as one op; the changeset it named stays. With `--expect OLD` it is a
    compare-and-swap. `op undo` of the op recreates the ref. A ref the store's policy protects
    from the caller is E_FORBIDDEN, before anything else."""
    actor = ctx.require_actor()
    name = names.check_ref_name(req.name)
    _check_expect(name, req.expect)
    store = ctx.store()
    with store.write(actor) as w:
        w.refuse_forbidden_moves([name])
        if queries.ref_row(w.conn, name) is None:
            raise _not_found(name)  # before resolving --expect: a missing ref is the first thing to say
        expected = resolve_changeset(ctx, w.conn, req.expect) if req.expect is not None else ANY
        return delete_in(w, name, expected=expected)


def ref_list(ctx: Context, req: RefListReq) -> RefListResult:
    """List refs by name, each with the changeset it names and the op that last moved it."""
    store = ctx.store()
    with store.read() as conn:
        return RefListResult(refs=[RefEntry(r.name, r.target, r.op) for r in queries.list_refs(conn, req.prefix)])


def ref_show(ctx: Context, req: RefShowReq) -> RefShowResult:
    """Show one ref: the changeset it names (with its message, actor and time) and the op that
    last moved it."""
    name = names.check_ref_name(req.name)
    store = ctx.store()
    with store.read() as conn:
        row = queries.ref_row(conn, name)
        if row is None:
            raise _not_found(name)
        cs = queries.ref_changeset(conn, name, row.target)
    return RefShowResult(name=name, target=row.target, op=row.op, message=cs.message, actor=cs.actor, at=cs.at)


_MOVE = Annotations(read_only=False, destructive=True, idempotent=False)

REF_SET = Tool(
    name="ref_set",
    cli=("ref", "set"),
    title="Set a ref",
    summary="Point a ref at a changeset (compare-and-swap with --expect or --create).",
    request=RefSetReq,
    result=RefSetResult,
    run=ref_set,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    mutates=True,
    group_commit=True,
)
REF_DELETE = Tool(
    name="ref_delete",
    cli=("ref", "delete"),
    title="Delete a ref",
    summary="Delete a ref (compare-and-swap with --expect).",
    request=RefDeleteReq,
    result=RefDeleteResult,
    run=ref_delete,
    annotations=_MOVE,
    mutates=True,
    group_commit=True,
)
REF_LIST = Tool(
    name="ref_list",
    cli=("ref", "list"),
    title="List refs",
    summary="List refs.",
    request=RefListReq,
    result=RefListResult,
    run=ref_list,
    annotations=READ,
    mutates=False,
    records="refs",
    group_commit=True,
)
REF_SHOW = Tool(
    name="ref_show",
    cli=("ref", "show"),
    title="Show a ref",
    summary="Show one ref.",
    request=RefShowReq,
    result=RefShowResult,
    run=ref_show,
    annotations=READ,
    mutates=False,
    group_commit=True,
)

TOOLS = [REF_SET, REF_DELETE, REF_LIST, REF_SHOW]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "ref_set": (
        Example(
            ("ref", "set", "release/v2", "main", "--create"),
            {"name": "release/v2", "target": "main", "create": True},
            caption="Create release/v2 at the changeset main names.",
        ),
        Example(("ref", "set", "hotfix", "main", "--create"), {"name": "hotfix", "target": "main", "create": True}),
        # --create expects no ref of that name, and main exists
        Example(("ref", "set", "main", "release/v1", "--create"), {"name": "main", "target": "release/v1", "create": True}, outcome="E_CAS_MISMATCH"),
        # Under PROTECT_POLICY: hotfix is not protected; release/* is, for people only; forbidden
        # and a compare-and-swap conflict (release/v1 exists): forbidden wins.
        Example(("ref", "set", "hotfix", "main"), {"name": "hotfix", "target": "main"}, setup=(SET_PROTECT,)),
        Example(("ref", "set", "release/v2", "main"), {"name": "release/v2", "target": "main"}, outcome="E_FORBIDDEN", setup=(SET_PROTECT,)),
        Example(
            ("ref", "set", "release/v1", "main", "--create"),
            {"name": "release/v1", "target": "main", "create": True},
            outcome="E_FORBIDDEN",
            setup=(SET_PROTECT,),
        ),
        Example(("ref", "set", "release/v1", "main"), {"name": "release/v1", "target": "main"}, setup=(SET_AGENTS,)),  # protected, for agents
    ),
    "ref_delete": (
        Example(
            ("ref", "delete", "release/v1", "--expect", "main"),
            {"name": "release/v1", "expect": "main"},
            caption="Delete release/v1, only if it still names main's changeset.",
        ),
        Example(("ref", "delete", "release/v1"), {"name": "release/v1"}, outcome="E_FORBIDDEN", setup=(SET_PROTECT,)),  # protected
        Example(("ref", "delete", "release/v1"), {"name": "release/v1"}, setup=(SET_AGENTS,)),  # protected, for agents
    ),
    "ref_list": (Example(("ref", "list", "--prefix", "release/"), {"prefix": "release/"}, caption="List the refs whose names start with release/."),),
    "ref_show": (
        Example(("ref", "show", "release/v1"), {"name": "release/v1"}, caption="Show release/v1: its changeset and the op that last moved it."),
        Example(("ref", "show", "main"), {"name": "main"}),
        Example(("ref", "show", "nope"), {"name": "nope"}, outcome="E_NOT_FOUND"),
    ),
}
