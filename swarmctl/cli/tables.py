"""`-o table`: the same result, rendered with Rich for people."""

from __future__ import annotations

import io
from typing import Any


def render(envelope: dict[str, Any], *, color: bool) -> str:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=color, no_color=not color, width=_width(), highlight=False)
    if not envelope["ok"]:
        error = envelope["error"]
        console.print(f"[bold red]{error['code']}[/]: {error['message']}", soft_wrap=True)
        if error.get("hint"):
            console.print(f"[dim]hint:[/] {error['hint']}", soft_wrap=True)
        return out.getvalue()
    renderer = RENDERERS.get(envelope["op"], _generic)
    renderer(console, envelope["result"])
    return out.getvalue()


def _width() -> int:
    import shutil

    return max(80, shutil.get_terminal_size((120, 24)).columns)


def _short(cid: str | None) -> str:
    return cid[:12] if cid else "-"


def _moves(moves: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m['name']}: {_short(m.get('old'))} → {_short(m.get('new'))}" for m in moves)


def _ops_table(console, ops: list[dict[str, Any]], title: str | None = None) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in ("op", "when", "actor", "kind"):
        table.add_column(column, no_wrap=True)
    for column in ("description", "ref moves"):
        table.add_column(column, overflow="fold")
    for op in ops:
        mark = f" (undone by {op['undone_by']})" if op.get("undone_by") else ""
        table.add_row(str(op["op"]), op["at"], op["actor"], op["kind"], op["description"] + mark, _moves(op["ref_moves"]))
    console.print(table)


def _op_log(console, result: dict[str, Any]) -> None:
    _ops_table(console, result["ops"])
    if result.get("has_more"):
        cursor = result.get("next_before")
        console.print(f"[dim]more: --before {cursor}[/]" if cursor else f"[dim]more: --after {result.get('next_after')}[/]")


def _demo(console, result: dict[str, Any]) -> None:
    _ops_table(console, result["ops"], title=f"demo store at {result['repo']}")
    console.print("Try:")
    for line in result["next"]:
        console.print(f"  {line}", soft_wrap=True)


def _refs(console, result: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table()
    for column in ("ref", "changeset", "last moved by op"):
        table.add_column(column)
    for ref in result["refs"]:
        table.add_row(ref["name"], _short(ref["target"]), str(ref["op"]))
    console.print(table)


def _undo(console, result: dict[str, Any]) -> None:
    if result["already_applied"]:
        console.print(f"op {result['undone']} was already undone by op {result['op']}; nothing written")
    elif result["op"] is None:
        console.print(f"dry run: undoing op {result['undone']} would move:")
    else:
        console.print(f"op {result['op']} undid op {result['undone']}:")
    for move in result["ref_moves"]:
        console.print(f"  {move['name']} → {_short(move['new'])}")


def _generic(console, result: Any) -> None:
    from rich.pretty import Pretty

    console.print(Pretty(result, expand_all=True))


RENDERERS = {
    "op_log": _op_log,
    "demo": _demo,
    "ref_list": _refs,
    "undo": _undo,
}
