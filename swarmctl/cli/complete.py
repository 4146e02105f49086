"""Shell completion values read from the store: op numbers with descriptions, ref names,
changeset ids, actors. Any failure completes nothing rather than printing an error into the shell."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import typer

from swarmctl.names import short_id


def _store(ctx: typer.Context):
    from swarmctl.context import Context

    root = ctx.find_root()
    repo = ctx.params.get("late_repo") or (root.params.get("repo") if root is not None else None)
    return Context(repo=repo).store()


def _safely(source: Callable[[typer.Context, str], Iterator[tuple[str, str]]]):
    def complete(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
        try:
            return [(value, _one_line(description)) for value, description in source(ctx, incomplete)]
        except Exception:
            return []

    return complete


def _one_line(description: str) -> str:
    """A description on one line: every shell's protocol is a line per candidate, and fish splits
    a candidate from its description at a tab, so a newline or a tab in a commit message would
    show up as candidates of their own."""
    return " ".join(description.split())


def _ops(ctx: typer.Context, incomplete: str, undoable: bool = False) -> Iterator[tuple[str, str]]:
    """The newest ops whose number starts with what is typed. `undoable` (`op undo`'s): only
    those an undo would take back now (tools/undo.py's `undoable`)."""
    from swarmctl.store import queries

    store = _store(ctx)
    with store.read() as conn:
        rows = queries.ops_numbered(conn, incomplete, limit=200 if undoable else 50)
        if undoable:
            from swarmctl.tools.undo import undoable as undoable_ops

            kept = undoable_ops(conn, [row.op for row in rows])
            rows = [row for row in rows if row.op in kept][:50]
    for op, actor, description in rows:
        yield str(op), f"{actor}: {description}"
    if "@".startswith(incomplete):
        yield "@", "the newest op by you (--as)"


def _refs(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl.store import queries

    store = _store(ctx)
    with store.read() as conn:
        for ref in queries.list_refs(conn, incomplete or None):
            yield ref.name, short_id(ref.target)


def _changesets(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl.store import queries

    store = _store(ctx)
    with store.read() as conn:
        rows = queries.changesets_with_prefix(conn, incomplete, limit=50)
    for cid, message in rows:
        yield short_id(cid), message.splitlines()[0] if message else ""
    yield from _refs(ctx, incomplete)


def _actors(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl.store import queries

    store = _store(ctx)
    with store.read() as conn:
        rows = queries.actors_with_prefix(conn, incomplete, limit=50)
    for actor, newest in rows:
        yield actor, f"newest op {newest}"


def _schema_types(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl import registry

    for name in sorted(registry.types()):
        if name.startswith(incomplete):
            yield name, ""


def _workflows(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl.store import workflows

    store = _store(ctx)
    with store.read() as conn:
        rows = workflows.list_ids(conn, incomplete, 50)
    for wf in rows:
        yield wf.id, f"{wf.name} ({wf.state})"


def _steps(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    """The steps of the workflow named earlier on the command line."""
    # While an option still waits for its value, the parser leaves the positional ID in ctx.args.
    given = ctx.params.get("workflow") or next((a for a in ctx.args if not a.startswith("-")), None)
    if not given:
        return
    from swarmctl.store import workflows
    from swarmctl.tools.workflow import records
    from swarmctl.tools.workflow.models import ACKNOWLEDGE_ALL

    store = _store(ctx)
    with store.read() as conn:
        rows = workflows.step_names(conn, records.resolve_id(conn, given))
    for step in rows:
        if step.name.startswith(incomplete):
            yield step.name, f"{step.kind}, {step.status}"
    if ctx.command.name == "rollback" and ACKNOWLEDGE_ALL.startswith(incomplete):
        yield ACKNOWLEDGE_ALL, "every step with unknown effects (--acknowledge-unknown-effects)"


def _tools(ctx: typer.Context, incomplete: str) -> Iterator[tuple[str, str]]:
    from swarmctl import registry

    for tool in registry.tools():
        if tool.name.startswith(incomplete):
            yield tool.name, tool.summary


SOURCES: dict[str, Any] = {
    "ops": _safely(_ops),
    "undoable_ops": _safely(lambda ctx, incomplete: _ops(ctx, incomplete, undoable=True)),
    "refs": _safely(_refs),
    "actors": _safely(_actors),
    "changesets": _safely(_changesets),
    "schema_types": _safely(_schema_types),
    "workflows": _safely(_workflows),
    "steps": _safely(_steps),
    "tools": _safely(_tools),
}
