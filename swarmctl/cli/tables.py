"""`-o table`: the same result, rendered with Rich for people.

Tables fit the terminal (COLUMNS, at least 40): the columns that matter most stay whole, long
text is cut with `…` (the JSON keeps everything). Times are shown in the local time zone (TZ),
short, and on a terminal the last 24 hours as relative times (`3 min ago`).

Why this module is long: it holds one small renderer per kind of result (ops, refs, changesets,
transactions, workflows, rollbacks, tokens), which share the fitting, escaping and time helpers
at its top; splitting them apart would scatter those helpers' one set of rules.
"""

from __future__ import annotations

import io
import re
import shlex
from datetime import datetime, timedelta, timezone
from typing import Any

MIN_WIDTH = 40


class _Options:
    terminal = False  # relative times only for a person at a terminal, never in a pipe or a file
    now: datetime | None = None  # the clock, for tests


def render(
    envelope: dict[str, Any], *, color: bool, terminal: bool = False, result_type: str | None = None,
    encoding: str = "utf-8",
) -> str:
    """The envelope for people, its result by the renderer of its type (`result_type`, the name
    of the tool's result type: RENDERERS), or as a generic table. Every string from the envelope
    is escaped first, so text that looks like Rich markup (a message "fix [/bold] tag") is shown
    as it is, never interpreted: renderers put data into markup freely, and write literal
    brackets as `\\[`. Control and format characters are escaped too (swarmctl/cli/inert.py):
    a terminal acts on none of them. Where the text goes in an `encoding` other than UTF-8 (a
    legacy locale), Rich draws its boxes in ASCII."""
    import time

    time.tzset()  # TZ as it is now, also when it changed in this process
    _Options.terminal = terminal
    if envelope["ok"] and (plain := PLAIN_WHEN_LONG.get(result_type or "")) and len(envelope["result"][plain[0]]) > PLAIN_ROWS:
        return plain[1](envelope["result"])
    from rich.console import Console

    out = _Text(encoding)
    console = Console(file=out, force_terminal=color, no_color=not color, width=_width(), highlight=False)
    envelope = _escaped(envelope)
    if not envelope["ok"]:
        error = envelope["error"]
        console.print(f"[bold red]{error['code']}[/]: {error['message']}", soft_wrap=True)
        details = error.get("details") or {}
        # Each of `store check`'s problems (not "and 2 more"), and of a rollback's refusals (what
        # to do about each is said there: `--acknowledge-unknown-effects STEP`).
        refusals = [r for r in details.get("refusals") or [] if isinstance(r, dict) and str(r.get("message")) not in error["message"]]
        for problem in [*(details.get("problems") or []), *refusals]:  # a refusal the message says: not twice
            if isinstance(problem, dict):
                console.print(f"  {problem.get('code')}: {problem.get('message')}", soft_wrap=True)
        if error.get("hint"):
            console.print(f"[dim]hint:[/] {error['hint']}", soft_wrap=True)
        return out.getvalue()
    renderer = RENDERERS.get(result_type or "", _generic)
    renderer(console, envelope["result"])
    return out.getvalue()


class _Text(io.StringIO):
    """The table's text, with the encoding of where it goes (Rich reads it to choose its boxes)."""

    def __init__(self, encoding: str) -> None:
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


def _escaped(value: Any) -> Any:
    from swarmctl.cli.inert import as_markup

    if isinstance(value, str):
        return as_markup(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    return value


def _width() -> int:
    """The terminal's width (COLUMNS first, as shutil reads it); 120 when there is none."""
    import shutil

    return max(MIN_WIDTH, shutil.get_terminal_size((120, 24)).columns)


def when(at: str | None, *, now: datetime | None = None, relative: bool | None = None) -> str:
    """An RFC 3339 UTC time for people: local and short (`2026-11-30 22:04:38`), or, on a
    terminal and within the last 24 hours, relative (`3 min ago`)."""
    if not at:
        return "-"
    try:
        moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return at
    relative = _Options.terminal if relative is None else relative
    if relative:
        now = now or _Options.now or datetime.now(timezone.utc)
        age = now - moment
        if timedelta(0) <= age < timedelta(days=1):
            seconds = int(age.total_seconds())
            if seconds < 60:
                return f"{seconds} s ago"
            if seconds < 3600:
                return f"{seconds // 60} min ago"
            return f"{seconds // 3600} h ago"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _cut(text: str, width: int) -> str:
    """Each line of `text` at most `width` cells of the terminal (a CJK character or an emoji
    takes two), cut with `…`."""
    return "\n".join(line if _cells(line) <= width else _first_cells(line, max(0, width - 1)) + "…" for line in text.split("\n"))


def _cut_middle(text: str, width: int) -> str:
    """`text` (one line) in at most `width` cells, cut in the middle with `…`: both ends shown,
    where names that share a long beginning differ (`feature/very-long…-number-17`)."""
    if _cells(text) <= width or width < 3:
        return _cut(text, width)
    head = _first_cells(text, width // 2)
    tail = _first_cells(text[::-1], (width - 1) // 2)[::-1]
    return head + "…" + tail


def _cells(text: str) -> int:
    """How many cells of the terminal `text` takes (a CJK character two). Text of characters
    that take one cell each (ASCII, Latin, the → of a ref move) is answered without Rich's
    measure, which made a plain table of 10,000 ops three times slower (bench/perf.py pages)."""
    if text.isascii() or _ONE_CELL_EACH.fullmatch(text):
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


# Printable ASCII, Latin-1 and Latin Extended (no combining marks: those start at U+0300),
# dashes, quotes and … (not the zero-width and bidi characters after them), arrows.
_ONE_CELL_EACH = re.compile("[\x20-\x7e\xa0-\u02ff\u2010-\u2027\u2190-\u21ff]*")


def _first_cells(text: str, width: int) -> str:
    if text.isascii() or _ONE_CELL_EACH.fullmatch(text):
        return text[:width]
    from rich.cells import set_cell_size

    return set_cell_size(text, width)


class Fit:
    """Column widths that fit `width`: the columns that matter most whole, the others cut.

    `columns` are (name, natural width, how): "keep" columns are always shown whole (op, actor,
    kind), "whole" ones whole or not at all (a time), "cut" ones shortened to fit, to no less
    than MIN_CUT, or left out. `drop` names the order in which columns are left out when there
    is no room. Showing a column matters more than borders: a narrow table goes borderless first.
    """

    MIN_CUT = 8

    def __init__(
        self, width: int, columns: list[tuple[str, int, str]], drop: list[str], least: dict[str, int] | None = None,
        borders: bool = True,
    ) -> None:
        self.width = width
        self.columns = columns
        self.drop = drop
        self.least = least or {}
        self.borders = borders  # False: never bordered (plain text, two spaces between columns)
        self.bordered, self.widths = self._choose()

    @staticmethod
    def overhead(n: int, bordered: bool) -> int:
        return 3 * n + 1 if bordered else 2 * (n - 1)

    def _choose(self) -> tuple[bool, dict[str, int]]:
        for dropped in range(len(self.drop) + 1):
            shown = [c for c in self.columns if c[0] not in self.drop[:dropped]]
            for bordered in (True, False) if self.borders else (False,):
                widths = self._widths(shown, bordered)
                if widths is not None:
                    return bordered, widths
        return False, self._kept_cut()

    def _kept_cut(self) -> dict[str, int]:
        """Not even the "keep" columns fit whole (an actor of 60 characters at 40 columns): the
        first of them (the op) stays whole, the widest of the others is cut, to no less than
        MIN_CUT. (Left to Rich, the first went to nothing.)"""
        widths = {name: natural for name, natural, how in self.columns if how == "keep"}
        first, room = next(iter(widths)), self.width - self.overhead(len(widths), False)
        while sum(widths.values()) > room:
            widest = max((name for name in widths if name != first), key=widths.__getitem__, default=None)
            if widest is None or widths[widest] <= self.MIN_CUT:
                break
            widths[widest] -= 1
        return widths

    def _widths(self, shown: list[tuple[str, int, str]], bordered: bool) -> dict[str, int] | None:
        """Whole columns at their width; the cut ones, in order, each as wide as it can be while
        the ones after it keep their least width."""
        room = self.width - self.overhead(len(shown), bordered)
        widths = {name: natural for name, natural, how in shown if how != "cut"}
        cut = [(name, min(natural, self.least.get(name, self.MIN_CUT)), natural) for name, natural, how in shown if how == "cut"]
        spare = room - sum(widths.values())
        if spare < sum(least for _, least, _ in cut):
            return None
        for i, (name, least, natural) in enumerate(cut):
            widths[name] = min(natural, spare - sum(least for _, least, _ in cut[i + 1 :]))
            spare -= widths[name]
        return {name: widths[name] for name, _, _ in shown}

    def table(self, **options: Any) -> Any:
        from rich.table import Table

        if self.bordered:
            return Table(**options)
        return Table(box=None, pad_edge=False, show_edge=False, **options)


def _short(cid: str | None) -> str:
    from swarmctl.names import SHORT_ID_LEN

    return cid[:SHORT_ID_LEN] if cid else "-"


def _moves(moves: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m['name']}: {_short(m.get('old'))} → {_short(m.get('new'))}" for m in moves)


def _undone_mark(op: dict[str, Any]) -> str:
    """Before the description, which a narrow table cuts at its end: that the op is taken back."""
    return f"(undone by {op['undone_by']}) " if op.get("undone_by") else ""


def _ops_table(console, ops: list[dict[str, Any]], title: str | None = None) -> None:
    rows = [
        {
            "op": str(op["op"]),
            "when": when(op["at"]),
            "actor": op["actor"],
            "kind": op["kind"],
            "description": _undone_mark(op) + op["description"],
            "ref moves": _moves(op["ref_moves"]),
        }
        for op in ops
    ]
    how = {"op": "keep", "when": "whole", "actor": "keep", "kind": "keep", "description": "cut", "ref moves": "cut"}
    # At a narrow terminal the ref moves go first, then the time; op, actor and kind stay whole.
    _fitted(console, rows, how, drop=["ref moves", "when", "description"],
            least={"ref moves": 24}, title=title)  # shorter, a move shows neither of its ids


def _fitted(console, rows: list[dict[str, str]], how: dict[str, str], *, drop: list[str],
            least: dict[str, int] | None = None, right: tuple[str, ...] = (), title: str | None = None,
            middle: tuple[str, ...] = ()) -> None:
    """Rows (column -> text) as a table that fits the terminal (`Fit`: `how` each column is
    kept, and the order `drop` leaves them out), a line a row, cut text ending in `…` (those
    named in `middle` cut in the middle); the columns named in `right` right-aligned."""
    natural = {c: max([len(c), *(_cells(line) for r in rows for line in r[c].split("\n"))]) for c in how}
    fit = Fit(console.width, [(c, natural[c], how[c]) for c in how], drop=drop, least=least)
    table = fit.table(title=title)
    for column, width in fit.widths.items():
        table.add_column(column, width=width, no_wrap=True, overflow="ellipsis", justify="right" if column in right else "left")
    for row in rows:
        table.add_row(*((_cut_middle if c in middle else _cut)(row[c], w) for c, w in fit.widths.items()))
    console.print(table)


# Above this many rows (ops, refs), a table is printed plain (columns of text, one line a row)
# rather than by Rich, which takes seconds and a hundred MiB for 10,000 rows (bench/perf.py).
PLAIN_ROWS = 300


def _plain_ops(result: dict[str, Any]) -> str:
    """The op log as plain columns (`_plain`): op, when (as the Rich table shows it), actor and
    kind padded to their widest, the description to at most 60 cells, then the ref moves."""
    rows = []
    for op in result["ops"]:
        moves = ", ".join(f"{m['name']}: {_short(m.get('old'))} → {_short(m.get('new'))}" for m in op["ref_moves"])
        rows.append((str(op["op"]), when(op["at"]), op["actor"], op["kind"], _undone_mark(op) + op["description"], moves))
    columns = [("op", "keep"), ("when", "whole"), ("actor", "keep"), ("kind", "keep"), ("description", "cut"), ("ref moves", "cut")]
    lines = _plain(columns, rows, drop=["ref moves", "when", "description"], least={"ref moves": 24}, most={"description": 60})
    if result.get("has_more"):
        cursor = result.get("next_before")
        lines.append(f"more: --before {cursor}" if cursor else f"more: --after {result.get('next_after')}")
    return "\n".join(lines) + "\n"


def _plain_refs(result: dict[str, Any]) -> str:
    """The refs as plain columns (`_plain`), as the Rich table shows them: a long name is cut."""
    rows = [(ref["name"], _short(ref["target"]), str(ref["op"])) for ref in result["refs"]]
    columns = [("ref", "cut"), ("changeset", "keep"), ("op", "keep")]
    return "\n".join(_plain(columns, rows, drop=[], middle=("ref",))) + "\n"


def _plain(columns: list[tuple[str, str]], rows: list[tuple[str, ...]], *, drop: list[str],
           least: dict[str, int] | None = None, most: dict[str, int] | None = None, middle: tuple[str, ...] = ()) -> list[str]:
    """Rows as columns of plain text, one line a row, fitted to the terminal as a Rich table is
    (the same `Fit`, borderless; `columns` are (name, how), as Fit takes them; `most` caps a
    column's natural width), each cell measured once, in cells. Control and format characters
    are escaped (inert), line breaks too. Rich takes seconds and a hundred MiB for 10,000 rows."""
    from swarmctl.cli.inert import inert

    names = [name for name, _ in columns]
    measured = [[(text, _cells(text)) for text in (inert(cell, keep="") for cell in row)] for row in rows]
    natural = [max([len(name), *(row[i][1] for row in measured)]) for i, name in enumerate(names)]
    natural = [min(width, (most or {}).get(name, width)) for name, width in zip(names, natural)]
    fit = Fit(_width(), [(name, width, how) for (name, how), width in zip(columns, natural)], drop=drop, least=least,
              borders=False)
    shown = [(names.index(name), width) for name, width in fit.widths.items()]

    def line(cells: list[tuple[str, int]]) -> str:
        out = []
        for i, width in shown:
            text, n = cells[i]
            if n > width:
                text = (_cut_middle if names[i] in middle else _cut)(text, width)
                n = _cells(text)
            out.append(text + " " * (width - n))
        return "  ".join(out).rstrip()

    header = line([(name, len(name)) for name in names])
    return [header, "  ".join("-" * width for _, width in shown), *(line(row) for row in measured)]


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
    """As `_plain_refs` fits them: the changeset's short id and the op (the one that last moved
    it) whole, a long name cut in the middle, where names that share a beginning differ (Rich
    alone cut the ids too; cut at the end, `feature/…-1` and `feature/…-2` read alike)."""
    rows = [{"ref": ref["name"], "changeset": _short(ref["target"]), "op": str(ref["op"])} for ref in result["refs"]]
    _fitted(console, rows, {"ref": "cut", "changeset": "keep", "op": "keep"}, drop=[], middle=("ref",))


def _undo(console, result: dict[str, Any]) -> None:
    if result["already_applied"]:
        console.print(f"op {result['undone']} was already undone by op {result['op']}; nothing written")
    elif result["op"] is None:
        console.print(f"dry run: undoing op {result['undone']} would move:")
    else:
        console.print(f"op {result['op']} undid op {result['undone']}:")
    for move in result["ref_moves"]:
        console.print(f"  {move['name']} → {_short(move['new'])}")


def _ops_listed(ops: list[int]) -> str:
    shown = ", ".join(map(str, ops[:20]))
    return shown + (f", ... ({len(ops)} ops)" if len(ops) > 20 else "")


def _revert(console, result: dict[str, Any]) -> None:
    taken = _ops_listed(result["reverted"])
    if result["already_applied"]:
        console.print(f"already reverted by op {result['op']} (ops {taken}); nothing written", soft_wrap=True)
    elif result["op"] is None:
        console.print(f"dry run: reverting ops {taken} would move:", soft_wrap=True)
    else:
        console.print(f"op {result['op']} reverted ops {taken}:", soft_wrap=True)
    for move in result["ref_moves"]:
        console.print(f"  {move['name']} → {_short(move['new'])}")


def _restore(console, result: dict[str, Any]) -> None:
    if result["op"] is None:
        console.print(f"preview at head {result['head']}: restoring refs to op {result['restored_to']} would move:")
    else:
        console.print(f"op {result['op']} restored refs to op {result['restored_to']}:")
    for move in result["ref_moves"]:
        console.print(f"  {move['name']} → {_short(move['new'])}")
    console.print(result["hint"], style="dim", soft_wrap=True)


def _tx_status(console, result: dict[str, Any]) -> None:
    from rich.table import Table

    if result["tx"] is None:
        console.print(f"no open transaction (the next one may stage {result['max']} revisions)")
        return
    can = [word for word in ("undo", "redo", "commit") if result[f"can_{word}"]]
    console.print(
        f"tx {result['tx']}: [bold]{result['state']}[/], begun at op {result['base_op']}, "
        f"revision {result['revision']} of {result['revisions']} (max {result['max']}); "
        f"can {', '.join(can) if can else 'only roll back'}",
        soft_wrap=True,
    )
    if not result["moves"]:
        console.print("no applied revision changes a ref: nothing to commit")
    moves = Table(title="a commit would move")
    for column in ("ref", "baseline", "staged", "moved in the store by"):
        moves.add_column(column)
    moved = {m["name"]: m for m in result["moved"]}
    for m in result["moves"]:
        by = moved.get(m["name"])
        mark = f"[red]op {', '.join(map(str, by['moved_by']))} (now {_short(by['actual'])})[/]" if by else ""
        moves.add_row(m["name"], _short(m["old"]), _short(m["new"]) if m["new"] else "(deleted)", mark)
    if result["moves"]:
        console.print(moves)
    history = Table(title="staged revisions")
    for column in ("rev", "action", "ref", "target", "applied"):
        history.add_column(column)
    for rev in result["history"]:
        style = None if rev["applied"] else "dim"
        history.add_row(
            str(rev["revision"]), rev["action"], rev["name"], _short(rev["new"]), "yes" if rev["applied"] else "undone",
            style=style,
        )
    console.print(history)


def _tx_stage(console, result: dict[str, Any]) -> None:
    what = f"delete {result['name']}" if result["new"] is None else f"set {result['name']} to {_short(result['new'])}"
    console.print(
        f"tx {result['tx']} revision {result['revision']}/{result['max']}: {what} (baseline {_short(result['old'])})"
    )
    if result["dropped"]:
        console.print(f"[yellow]discarded {result['dropped']} undone revision(s)[/]")


def _tx_undo(console, result: dict[str, Any]) -> None:
    _tx_step(console, result, "undid", result["undone"])


def _tx_redo(console, result: dict[str, Any]) -> None:
    _tx_step(console, result, "redid", result["redone"])


def _tx_step(console, result: dict[str, Any], verb: str, rev: dict[str, Any]) -> None:
    console.print(
        f"tx {result['tx']}: {verb} revision {rev['revision']} ({rev['action']} {rev['name']}); "
        f"now at revision {result['revision']} of {result['revisions']}"
    )
    console.print(_moves(result["moves"]) or "no staged moves apply")


def _tx_commit(console, result: dict[str, Any]) -> None:
    console.print(f"op {result['op']}: {result['description']}", soft_wrap=True)
    console.print(_moves(result["ref_moves"]))
    console.print(f"[dim]take it back with: swarmctl op undo {result['op']}[/]")


def _tx_rollback(console, result: dict[str, Any]) -> None:
    console.print(f"tx {result['tx']} rolled back ({result['discarded']} revision(s) discarded): {result['state']}")
    if result["hint"]:
        console.print(result["hint"], style="yellow", soft_wrap=True)

def _workflows(console, result: dict[str, Any]) -> None:
    """`workflow list`: the id (what a person copies into the next command) and the state stay
    whole; at a narrow terminal when it was made goes first, then who made it, then the rest."""
    rows = [
        {
            "workflow": wf["id"],
            "name": wf["name"],
            "state": wf["state"],
            "steps done": f"{wf['done']}/{wf['steps']}",
            "created by": wf["created_by"],
            "created": when(wf["created_at"]),
            "updated": when(wf["updated_at"]),
        }
        for wf in result["workflows"]
    ]
    # Who made it is shown whole or not at all: an actor cut to `human/a…` names no one.
    how = {"workflow": "keep", "name": "cut", "state": "keep", "steps done": "whole", "created by": "whole",
           "created": "whole", "updated": "whole"}
    _fitted(console, rows, how, drop=["created", "created by", "updated", "steps done", "name"])
    if result.get("has_more"):
        console.print("[dim]more: raise --limit[/]")


def _tokens(console, result: dict[str, Any]) -> None:
    """`token list`: a row a token (never its value). The id (what `token revoke` takes) and
    the actor stay whole; at a narrow terminal who made it goes first, then when."""
    rows = [
        {
            "id": str(token["id"]),
            "actor": token["actor"],
            "access": "read-only" if token["read_only"] else "read-write",
            "expires": when(token["expires_at"]),
            "revoked": when(token["revoked_at"]),
            "created": when(token["created_at"]),
            "created by": token["created_by"],
        }
        for token in result["tokens"]
    ]
    how = {"id": "keep", "actor": "keep", "access": "whole", "expires": "whole", "revoked": "whole",
           "created": "whole", "created by": "whole"}
    _fitted(console, rows, how, drop=["created by", "created", "access", "expires"], right=("id",))


def _step_detail(step: dict[str, Any]) -> str:
    parts = []
    if step.get("op"):
        parts.append(f"op {step['op']}")
    elif step["kind"] in ("ref_set", "ref_delete") and step["status"] not in ("pending", "skipped", "failed"):
        parts.append("no change: the ref already was as the step wants it")
    if step.get("approved_by"):
        parts.append(f"approved by {step['approved_by']}")
    result = step.get("result") or {}
    if result.get("summary"):
        parts.append(result["summary"])
    if isinstance(result.get("error"), dict):
        parts.append(f"{result['error']['code']}: {result['error']['message']}")
    if step["status"] == "failed" and (said := _last_said(result)):
        parts.append(said)
    if step.get("undo_op"):
        parts.append(f"undone by op {step['undo_op']}")
    undo = step.get("undo_result") or {}
    if undo.get("summary") and step["kind"] == "run":
        parts.append(f"rollback {undo['summary']}")
    if isinstance(undo.get("error"), dict):
        parts.append(f"undo {undo['error']['code']}")
    if step["status"] == "rollback_failed" and (said := _last_said(undo)):
        parts.append(said)
    if step.get("interrupted_during"):
        parts.append(f"interrupted during {step['interrupted_during']}: effect unknown")
    return "; ".join(parts)


TAIL_LINES, TAIL_CHARS = 3, 400  # of a failed command's output, in its step's detail


def _last_said(outcome: dict[str, Any]) -> str | None:
    """What a failed command last wrote, for the person reading why it failed: the last lines
    of its stderr's tail (of its stdout's, when it wrote nothing to stderr); the whole tails
    are in the JSON."""
    for stream in ("stderr", "stdout"):
        text = str(outcome.get(f"{stream}_tail") or "").strip()
        if text:
            kept = "\n".join(text.splitlines()[-TAIL_LINES:])
            start = max(0, len(kept) - TAIL_CHARS)
            if start and kept[start - 1] == "\\":  # the text is markup, escaped: `\[` stays whole
                start -= 1
            return f"{stream}: " + ("…" if start else "") + kept[start:]
    return None


def _workflow_status(console, result: dict[str, Any]) -> None:
    from rich.table import Table

    wf = result["workflow"]
    waiting = f" at {wf['waiting_at']}" if wf.get("waiting_at") else ""
    console.print(f"[bold]{wf['id']}[/] {wf['name']}: [bold]{wf['state']}[/]{waiting}", soft_wrap=True)
    # The step's number, kind and status stay whole (the kind left out where even they do not
    # fit beside a little of the rest); its name and the detail (an error, an output's tail:
    # what a person reads the table for) are folded onto more lines, never cut.
    whole = {"#": [str(s["index"]) for s in result["steps"]], "kind": [s["kind"] for s in result["steps"]],
             "status": [s["status"] for s in result["steps"]]}
    widths = {c: max([len(c), *map(_cells, values)]) for c, values in whole.items()}
    folded_least = 20  # the step's name and the detail, 10 cells each at the least
    show_kind = sum(widths.values()) + Fit.overhead(5, bordered=True) + folded_least <= console.width
    table = Table()
    table.add_column("#", no_wrap=True, min_width=widths["#"], justify="right")
    table.add_column("step", overflow="fold", min_width=4)
    if show_kind:
        table.add_column("kind", no_wrap=True, min_width=widths["kind"])
    table.add_column("status", no_wrap=True, min_width=widths["status"])
    table.add_column("detail", overflow="fold", min_width=6)
    for step in result["steps"]:
        kind = (step["kind"],) if show_kind else ()
        table.add_row(str(step["index"]), step["name"], *kind, step["status"], _step_detail(step))
    console.print(table)
    for call in result.get("next") or []:
        console.print(f"next: {shlex.join(call['argv'])}", soft_wrap=True)


def _blast_radius(console, result: dict[str, Any]) -> None:
    radius = result["blast_radius"]
    wf = radius["workflow"]
    title = "rollback preview" if result["action"] == "preview" else f"rolled back: {result['state']}"
    console.print(f"[bold]{title}[/] of {wf['id']} {wf['name']} ({wf['state']} → {radius['state_after']})", soft_wrap=True)
    console.print(f"preview_id: {result['preview_id']}")
    from swarmctl.tools.workflow.models import RADIUS_LISTS

    for group in RADIUS_LISTS:
        entries = radius[group]
        console.print(f"[bold]{group}[/] ({len(entries)})")
        detail = RADIUS_DETAIL.get(group, _step_reason)
        for e in entries:
            console.print(f"  {e['index']}. {e['step']} \\[{e['kind']}, {e['status']}] {detail(e)}", soft_wrap=True)
    for group in ("blockers", "unmeasured"):
        entries = radius[group]
        console.print(f"[bold]{group}[/] ({len(entries)})")
        for e in entries:
            console.print(f"  {e['code']}: {e['message']}", soft_wrap=True)
    for r in result.get("results") or []:
        console.print(f"  {r['step']}: {r['status']}", soft_wrap=True)
    console.print(result["hint"], style="dim", soft_wrap=True)


def _rollback_entry(e: dict[str, Any]) -> str:
    """A RollbackEntry: how its step is undone (a command step by its rollback command, a store
    step by `op undo`), and the predicted outcome."""
    undo = e["undo"]
    how = "run " + shlex.join(undo["command"]) if e["kind"] == "run" else f"undo op {undo['op_undo']}"
    predicted = e["predicted"]
    outcome = predicted["outcome"] + (f" {predicted['code']}" if predicted.get("code") else "")
    return f"{how} → {outcome}" + (" (retry)" if e["retry"] else "")


def _unknown_effect(e: dict[str, Any]) -> str:
    return f"during {e['during']}" + (" (acknowledged)" if e["acknowledged"] else " (not acknowledged)")


def _step_reason(e: dict[str, Any]) -> str:
    """A StepNote's reason (an AlreadyRolledBack has none)."""
    return e.get("reason") or ""


# The detail of an entry of each list of the blast radius, by the list (each holds one type).
RADIUS_DETAIL = {"would_roll_back": _rollback_entry, "unknown_effects": _unknown_effect}


def _workflow_definition(console, result: dict[str, Any]) -> None:
    console.print(result["toml"], highlight=False, soft_wrap=True, end="")


def _generic(console, result: Any) -> None:
    """Any other result: its fields as a two-column table, nested values as indented lines."""
    from rich.table import Table

    if not isinstance(result, dict):
        console.print(_text(result), soft_wrap=True)
        return
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in result.items():
        table.add_row(key, when(value) if _a_time(key, value) else _text(value))
    console.print(table)


def _schema(console, result: Any) -> None:
    """`schema TYPE`: as any other result, but its descriptions read as the prose they are, a
    line break a space (swarmctl's own text, from its docstrings: it was shown `by\\x0acompare`)."""

    def unwrapped(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(value.split("\n"))
        if isinstance(value, list):
            return [unwrapped(v) for v in value]
        if isinstance(value, dict):
            return {k: unwrapped(v) for k, v in value.items()}
        return value

    _generic(console, unwrapped(result))


def _a_time(key: str, value: Any) -> bool:
    """A field that holds a time (`at`, `begun_at`, `expires_at`, ...): shown as `when` shows
    times, in the local zone and short, as the op log shows them."""
    return isinstance(value, str) and (key == "at" or key.endswith("_at"))


def _text(value: Any) -> str:
    """A value for people: scalars as words, nested objects and lists as indented lines. A
    string alone keeps its line breaks (a message of many lines, in a cell of its own); within
    the lines of a nested value each is written `\\x0a`, so that no value can pass for more
    lines of the structure (a file named "a\\n  blob: ..." for a second file)."""
    if isinstance(value, str):
        return value or "-"
    return "\n".join(_lines(value, "")) or "-"


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("\n", "\\x0a")


def _flat(value: Any) -> bool:
    return not isinstance(value, (dict, list)) or (
        isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)
    )


def _lines(value: Any, indent: str) -> list[str]:
    if isinstance(value, list) and _flat(value):
        return [indent + (", ".join(_scalar(v) for v in value) or "-")]
    if isinstance(value, list):
        lines = []
        for item in value:
            inner = _lines(item, indent + "  ")
            lines += [indent + "- " + inner[0].lstrip(), *inner[1:]] if inner else [indent + "-"]
        return lines
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            key = _scalar(key)
            if _a_time(key, item):
                lines.append(f"{indent}{key}: {when(item)}")
            elif key == "argv" and isinstance(item, list) and all(isinstance(a, str) for a in item):
                lines.append(f"{indent}{key}: {_scalar(shlex.join(item))}")  # a command line to copy (`next`)
            elif _flat(item):
                lines.append(f"{indent}{key}: {_lines(item, '')[0]}")
            else:
                lines += [f"{indent}{key}:", *_lines(item, indent + "  ")]
        return lines
    return [indent + _scalar(value)]


def _op_show(console, result: dict[str, Any]) -> None:
    """One op in full, as `git show` shows a commit: a field a line, ids whole (a narrow terminal
    folds them, never cuts them). The op log's one-row table cut the description and the ids,
    and left out the hash."""
    from rich.table import Table

    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    moves = [f"{m['name']}: {m.get('old') or '(none)'} → {m.get('new') or '(deleted)'}" for m in result["ref_moves"]]
    for name, value in (
        ("op", str(result["op"])), ("when", when(result["at"])), ("actor", result["actor"]), ("kind", result["kind"]),
        ("description", result["description"]), ("undoes", _scalar(result.get("undoes"))),
        ("undone by", _scalar(result.get("undone_by"))), ("ref moves", "\n".join(moves) or "-"),
        ("created", "\n".join(result.get("changesets") or []) or "-"), ("hash", _scalar(result.get("hash"))),
    ):
        table.add_row(name, value)
    console.print(table)


# The renderer of each result type, by its name (the tool's `result`); any other: `_generic`.
RENDERERS = {
    "OpLogResult": _op_log,
    "OpRecord": _op_show,
    "DemoResult": _demo,
    "RefListResult": _refs,
    "UndoResult": _undo,
    "RevertResult": _revert,
    "RestoreResult": _restore,
    "TxStatusResult": _tx_status,
    "TxStageResult": _tx_stage,
    "TxUndoResult": _tx_undo,
    "TxRedoResult": _tx_redo,
    "TxCommitResult": _tx_commit,
    "TxRollbackResult": _tx_rollback,
    "WorkflowListResult": _workflows,
    "TokenListResult": _tokens,
    "WorkflowStatus": _workflow_status,
    "WorkflowRollbackResult": _blast_radius,
    "WorkflowDefinitionResult": _workflow_definition,
    "SchemaResult": _schema,
}
# The results printed plain above PLAIN_ROWS rows: the list that holds the rows, the renderer.
PLAIN_WHEN_LONG = {"OpLogResult": ("ops", _plain_ops), "DemoResult": ("ops", _plain_ops), "RefListResult": ("refs", _plain_refs)}
