"""The rules for names a user types: refs, actors, changeset id prefixes, times, durations and
whole numbers. One place each.

The patterns are kept as text and matched through `re`'s own cache, so each is compiled the
first time a command uses it: a command that checks no actor or duration never compiles one
(compiling a pattern costs about as much as defining a dataclass; bench/core.py, start-up).
Each is matched whole (`re.fullmatch`): `$` alone also matches before a final newline, and
would take `agent/x\n` for an actor. (The `^`/`$` stay in the text for the JSON Schemas,
whose patterns are ECMAScript's, where `$` is the end.)
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from swarmctl.envelope import SwarmError

# --- refs: git's check-ref-format rules, plus a length bound and no leading '-' ------------
# (git refuses a leading '-' for branch names, `git check-ref-format --branch`: such a name
# would read as an option on the command line.)

REF_NAME_MAX = 255
# Besides every character up to the space (control characters and the space itself).
_REF_FORBIDDEN_CHARS = frozenset("\x7f~^:?*[\\")


def ref_name_problem(name: str) -> str | None:
    """Why git would reject `name` as a ref name, or None when it is fine."""
    if not name:
        return "it is empty"
    if len(name) > REF_NAME_MAX:
        return f"it is longer than {REF_NAME_MAX} characters"
    if name == "@":
        return "'@' alone is reserved"
    if name.startswith("-"):
        return "it begins with '-'"
    if (bad := next((c for c in name if c <= " " or c in _REF_FORBIDDEN_CHARS), None)) is not None:
        return f"it contains the character {bad!r}"
    if ".." in name:
        return "it contains '..'"
    if "@{" in name:
        return "it contains '@{'"
    if name.startswith("/") or name.endswith("/"):
        return "it begins or ends with '/'"
    if "//" in name:
        return "it contains '//'"
    if name.endswith("."):
        return "it ends with '.'"
    for component in name.split("/"):
        if component.startswith("."):
            return f"the component {component!r} begins with '.'"
        if component.endswith(".lock"):
            return f"the component {component!r} ends with '.lock'"
    return None


def shadows_changeset_id(name: str) -> bool:
    """Whether `name` reads as a changeset id or id prefix: 4 to 64 lowercase hex characters."""
    return MIN_PREFIX_LEN <= len(name) <= ID_HEX_LEN and is_hex(name)


def new_ref_name_problem(name: str) -> str | None:
    """Why `name` may not be given to a ref now (set, created, staged), or None. Stricter than
    `ref_name_problem`, which every read keeps using: a store may hold a ref named before
    this rule, and reading or deleting it must keep working."""
    if problem := ref_name_problem(name):
        return problem
    if shadows_changeset_id(name):
        return (
            f"it is {len(name)} lowercase hex characters, so it reads as a changeset id prefix: "
            "a ref of that name would shadow the changesets whose ids begin with it"
        )
    return None


def check_new_ref_name(name: str) -> str:
    """As `check_ref_name`, for a name a ref is to be given (see `new_ref_name_problem`)."""
    check_ref_name(name)
    if problem := new_ref_name_problem(name):
        raise SwarmError(
            "E_INVALID_ARG",
            f"invalid ref name {name!r}: {problem}",
            details={"name": name, "problem": problem},
            hint="Ref names may not be 4-64 lowercase hex characters; add a word, e.g. 'v-" + name[:8] + "' or 'release/" + name[:8] + "'.",
        )
    return name


def check_ref_name(name: str) -> str:
    if problem := ref_name_problem(name):
        raise SwarmError(
            "E_INVALID_ARG",
            f"invalid ref name {name!r}: {problem}",
            details={"name": name, "problem": problem},
            hint="Ref names follow git's rules, e.g. 'main' or 'release/v1'.",
        )
    return name


# --- actors: kind/name ---------------------------------------------------------------------

_ACTOR_KIND = r"[a-z][a-z0-9-]{0,31}"
_ACTOR_NAME = r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}"
ACTOR_PATTERN = rf"^{_ACTOR_KIND}/{_ACTOR_NAME}$"


def is_actor(text: str) -> bool:
    """Whether `text` is well-formed as kind/name."""
    return re.fullmatch(ACTOR_PATTERN, text) is not None


def check_actor(actor: str) -> str:
    if not is_actor(actor):
        raise SwarmError(
            "E_INVALID_ARG",
            f"invalid actor {actor!r}: {_actor_problem(actor)}",
            details={"actor": actor},
            hint="Name the actor as kind/name, e.g. agent/worker-17, human/alice or ci/release.",
        )
    return actor


def _actor_problem(actor: str) -> str:
    """What is wrong with an actor that is not kind/name (ACTOR_PATTERN), said for the part at fault."""
    kind, slash, name = actor.partition("/")
    if not slash or not kind or not name:
        return "expected kind/name"
    if re.fullmatch(_ACTOR_KIND, kind) is None:
        return (f"its kind {kind!r} is more than 32 characters" if len(kind) > 32
                else f"its kind {kind!r} must be lower case: a letter, then letters, digits or '-'")
    if len(name) > 128:
        return f"its name is {len(name)} characters, more than 128"
    return f"its name {name!r} may hold only ASCII letters, digits, '.', '_', '@', '+' and '-', and must start with a letter or digit"


# --- changeset ids -------------------------------------------------------------------------

ID_HEX_LEN = 64
SHORT_ID_LEN = 12
MIN_PREFIX_LEN = 4
_HEX_PATTERN = r"^[0-9a-f]+$"


def is_hex(text: str) -> bool:
    return re.fullmatch(_HEX_PATTERN, text) is not None


def short_id(changeset_id: str | None) -> str:
    return changeset_id[:SHORT_ID_LEN] if changeset_id else "(none)"


# --- times: RFC 3339 UTC with milliseconds ------------------------------------------------


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds. Fixed width (the year too), so that comparing two of
    these strings compares the times: the store orders and filters ops by this text."""
    m = moment.astimezone(timezone.utc)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}."
        f"{m.microsecond // 1000:03d}Z"
    )


def now() -> str:
    try:
        return format_time(datetime.now(timezone.utc))
    except (OverflowError, ValueError, OSError):  # a clock set past what datetime holds
        return _LATEST


def seconds_between(earlier: str, later: str) -> float:
    """`later` minus `earlier`, two times in the store's format, in seconds."""
    def parse(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)

    try:
        return (parse(later) - parse(earlier)).total_seconds()
    except (ValueError, OverflowError):
        return float("inf") if later > earlier else float("-inf")


# Times beyond what datetime can hold in UTC (year 1 in UTC+1, year 9999 in UTC-1) are before
# or after every op; they compare as these.
_EARLIEST = "0001-01-01T00:00:00.000Z"
_LATEST = "9999-12-31T23:59:59.999Z"


_DURATION_PATTERN = r"^([0-9]+)([smhd])$"
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# More seconds than there are between year 1 and year 9999: any duration above is as long.
_LONGEST_S = 10**12


def duration_seconds(text: str) -> int | None:
    """`text` read as a duration (`90s`, `15m`, `2h`, `7d`): how many seconds, or None when it
    is not one. One too long for any calendar reads as `_LONGEST_S`, which no time can be
    moved by (OverflowError): never an error of its own, and never a conversion of a number
    thousands of digits long."""
    duration = re.fullmatch(_DURATION_PATTERN, text.strip())
    if duration is None:
        return None
    digits = duration.group(1).lstrip("0") or "0"
    if len(digits) > len(str(_LONGEST_S)):
        return _LONGEST_S
    return min(int(digits) * _UNIT_SECONDS[duration.group(2)], _LONGEST_S)


# --- numbers: as git and kubectl read them (strtol, strconv.Atoi) -------------------------
# Python's int() takes more: other scripts' digits (`５`, `٣`) and `1_000`. It also reads at
# most sys.get_int_max_str_digits() digits (4300 by default), CPython's guard against a
# conversion that takes quadratic time, and raises ValueError past that.

_WHOLE_PATTERN = r"^[+-]?[0-9]+$"


def whole_number(text: str) -> int | None:
    """`text` (space around it aside) as a whole number of ASCII digits, maybe signed; None
    when it is not one, or has more digits than Python converts (`too_long_number`)."""
    text = text.strip()
    if re.fullmatch(_WHOLE_PATTERN, text) is None or too_long_number(text):
        return None
    return int(text)


def max_digits() -> int:
    """How many digits Python converts to or from a whole number (0: no bound)."""
    import sys

    return sys.get_int_max_str_digits()


def one_line(message: str) -> str:
    """A message as an op's one-line description holds it whole: its lines joined by a space."""
    return " ".join(line.strip() for line in message.strip().splitlines() if line.strip())


def first_line(message: str, width: int = 60) -> str:
    """A message as an op's one-line description holds it: its first line, cut to `width`."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def digits(text: object) -> bool:
    """Whether `text` is a string of ASCII digits 0-9 only. `str.isdigit` alone also takes `²`
    (which int() refuses) and `٤` (which int() reads as 4)."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def too_long_number(text: str) -> bool:
    """Whether `text` is written as a whole number (`whole_number`'s form) of more digits than
    Python converts."""
    limit, text = max_digits(), text.strip()
    return 0 < limit < len(text.lstrip("+-")) and re.fullmatch(_WHOLE_PATTERN, text) is not None


# What parse_time reads: an RFC 3339 date-time (seconds and their fraction optional, `T` or a
# space between date and time; no offset means UTC) or a plain date. Python's fromisoformat reads
# more (week dates, digits with no dashes, `+02`, a decimal comma): a typo it took for a time
# became a filter, or a revert's selection, without a word.
_TIME_SHAPE = re.compile(r"\d{4}-\d\d-\d\d(?:[Tt ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[Zz]|[+-]\d\d:\d\d)?)?", re.ASCII)


def parse_time(text: str, *, field: str, round_up: bool = False) -> str:
    """An RFC 3339 time (or a plain date; no offset means UTC), or a duration (`90s`, `15m`,
    `2h`, `7d`: that long before now), in the store's own format, for comparisons. Below a
    millisecond it is cut, or with `round_up` rounded up: a lower bound ("at or after") then
    never takes in an op from before it."""
    if (seconds := duration_seconds(text)) is not None:
        moment = datetime.fromisoformat(now().replace("Z", "+00:00"))
        try:
            return format_time(moment - timedelta(seconds=seconds))
        except OverflowError:
            return _EARLIEST
    try:
        if _TIME_SHAPE.fullmatch(text.strip()) is None:  # Python reads more than RFC 3339 (2026-W49, 20261203)
            raise ValueError(text)
        moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise SwarmError(
            "E_INVALID_ARG",
            f"{field}: {text!r} is neither an RFC 3339 time nor a duration",
            details={"field": field, "value": text},
            hint="Give a time such as 2026-11-30T03:20:56Z, a date such as 2026-11-30, "
            "or a duration before now such as 90s, 15m, 2h or 7d.",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        if round_up and moment.microsecond % 1000:
            moment += timedelta(microseconds=1000 - moment.microsecond % 1000)
        return format_time(moment)
    except OverflowError:
        return _EARLIEST if moment.year == 1 else _LATEST
