"""Printing an envelope: compact JSON to a pipe, indented (and coloured) JSON to a terminal,
or Rich tables with `-o table`. Nothing else is ever printed on stdout.

The exceptions to one envelope, each asked for by users (SPEC §1): `-q/--quiet` prints nothing
on stdout (a failure's code and message on one stderr line); `-o jsonl` prints a list result
one record a line, any other result as one line, and a failure as its envelope's one line."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from swarmctl.envelope import dumps, line_safe
from swarmctl.spec import JsonTexts


def errors_on_stderr(globals_: Any) -> bool:
    """Whether `emit` says an error on stderr itself (a table's, with its code and hint), so that
    a usage error's `Error:` line would say it twice."""
    return globals_ is not None and globals_.output == "table" and not getattr(globals_, "quiet", False)


def emit(envelope: dict[str, Any], globals_: Any, tool: Any) -> None:
    if getattr(globals_, "quiet", False):
        if not envelope["ok"]:
            print(quiet_line(envelope["error"]), file=sys.stderr)
        return
    if globals_.output == "jsonl":
        records = jsonl_records(envelope, tool)
        if isinstance(records, JsonTexts):  # each record's JSON text already
            write_lines("".join(line_safe(text) + "\n" for text in records.json_texts))
        else:
            write_lines("".join(dumps(record) + "\n" for record in records))
        return
    color = wants_color(globals_.color) and (sys.stdout.isatty() or globals_.color == "always")
    if globals_.output == "table":
        from swarmctl.cli import tables

        # An error is for the person at the terminal: stderr, with stdout left empty (a pipe
        # reading the table gets nothing rather than an error to parse as rows).
        on_stderr = not envelope["ok"]
        if on_stderr:
            color = wants_color(globals_.color) and (_isatty(sys.stderr) or globals_.color == "always")
        try:
            result_type = tool.result.__name__ if tool is not None else None
            encoding = getattr(sys.stderr if on_stderr else sys.stdout, "encoding", None) or "utf-8"
            text = tables.render(envelope, color=color, terminal=sys.stdout.isatty(), result_type=result_type, encoding=encoding)
        except Exception as exc:  # a bug in a renderer must not hide what the command did
            from swarmctl.cli.inert import inert

            print(f"swarmctl: cannot render this result as a table ({inert(str(exc))}); here is the envelope", file=sys.stderr)
            text = dumps(envelope) + "\n"
        if on_stderr:
            sys.stderr.write(text)
            sys.stderr.flush()
        else:
            write(text, human=True)
    elif sys.stdout.isatty() or globals_.color == "always":
        from swarmctl.cli.inert import inert_json  # for people: nothing a terminal acts on (cli/inert.py)

        text = _highlighted(envelope) if color else json.dumps(envelope, indent=2, ensure_ascii=False) + "\n"
        write(inert_json(text))
    else:
        write(dumps(envelope) + "\n")


def wants_color(color: str) -> bool:
    """Whether --color (auto, always, never) allows colour; where it is shown is the caller's."""
    if color == "never":
        return False
    if color == "always":
        return True
    # NO_COLOR (no-color.org) and TERM=dumb (a terminal that cannot show escape codes) both say no.
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def quiet_line(error: dict[str, Any]) -> str:
    """A failure in one line, for -q: its code and message (control characters made inert)."""
    from swarmctl.cli.inert import inert

    return f"{error['code']}: {inert(' '.join(str(error['message']).split()))}"


def jsonl_records(envelope: dict[str, Any], tool: Any) -> list[Any] | JsonTexts:
    """What `-o jsonl` prints, a line each: the records of a list result (the tool names its list),
    the result itself otherwise, or the whole envelope of a failure."""
    if not envelope["ok"]:
        return [envelope]
    result = envelope["result"]
    records = getattr(tool, "records", None)
    # A result that names an op (one it wrote, or the one that did: a replay) is not a list:
    # `op revert` lists its ops one a line only as a dry run; done, `op` is what to keep.
    wrote = isinstance(result, dict) and result.get("op") is not None
    if records and not wrote and isinstance(result, dict) and isinstance(result.get(records), (list, JsonTexts)):
        return result[records]
    return [result]


def prints_json_text(globals_: Any) -> bool:
    """Whether `emit` prints the envelope (or, with `-o jsonl`, its records) as compact JSON
    text with envelope.dumps: then a tool may keep its records as JSON text (Context.json_text)."""
    if globals_.output == "jsonl":
        return True
    return globals_.output == "json" and not (_isatty(sys.stdout) or globals_.color == "always")


def _isatty(stream: Any) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _highlighted(envelope: dict[str, Any]) -> str:
    from rich.console import Console

    console = Console(force_terminal=True, color_system="standard", width=120, record=False, file=_Sink())
    with console.capture() as capture:
        console.print_json(data=envelope, indent=2, ensure_ascii=False)
    return capture.get()


class _Sink:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def write_lines(text: str) -> bool:
    """Write JSON Lines to stdout (`write`); on a terminal, with nothing in them a terminal acts
    on (cli/inert.py: `inert_json`, the same JSON), as the indented envelope is written there."""
    if _isatty(sys.stdout):
        from swarmctl.cli.inert import inert_json

        text = inert_json(text)
    return write(text)


def write(text: str, human: bool = False) -> bool:
    """Write to stdout now; False: a closed pipe (`| head -1`), which ends quietly. What is
    written is always valid UTF-8: a lone surrogate (a byte that was not UTF-8, e.g. in a file
    name) inside a JSON string is written as its JSON escape, `\\udcff`, never as a raw byte.
    JSON is written as UTF-8 whatever the locale (RFC 8259: JSON between systems is UTF-8);
    a `human` text (a table) in stdout's own encoding, what it cannot show replaced by `?`."""
    if not is_utf8(text):
        text = re.sub(_LONE_SURROGATE, lambda m: f"\\u{ord(m.group()):04x}", text)
    out = sys.stdout
    try:
        buffer = getattr(out, "buffer", None)
        if buffer is None:  # a stream without bytes below it (a test's): as it is
            out.write(text)
            out.flush()
            return True
        out.flush()
        data = memoryview(text.encode((out.encoding or "utf-8") if human else "utf-8", "replace"))
        while data:  # a signal whose handler returns (one held back) ends a write part-way: the rest follows
            data = data[buffer.write(data):]
        buffer.flush()
        return True
    except BrokenPipeError:
        # Python would complain again at exit when flushing stdout: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        return False
    except OSError as exc:  # a full disk (`> /dev/full`), an I/O error: said on stderr by cli.run
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # nor again at exit
        except (OSError, ValueError):
            pass
        raise OutputFailed(exc) from exc


class OutputFailed(Exception):
    """stdout could not be written (not a closed pipe, which ends quietly): the command has
    run, and what it wrote to the store is committed, but its envelope is lost."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.cause = cause

    def line(self, ran: bool = True) -> str:
        done = "; the command ran, and any change it made is in the store" if ran else ""
        return f"swarmctl: cannot write to stdout: {self}{done}"


_LONE_SURROGATE = "[\ud800-\udfff]"  # compiled by `re` when first used: rarely


def is_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (an argument made of undecodable bytes holds lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
