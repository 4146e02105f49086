"""The JSON doors' reading of a request's field names: other names a field is also called by,
values a field also takes, and names close enough to a field's that they must be a mistake.

A field the request type does not know is ignored (a newer client may send more) and listed
in `meta.ignored`; but a near miss of a known name (`dryrun` for `dry_run`, `expected` for
`expect`) is E_INVALID_ARG: ignoring it would turn a safe call (a dry run, a compare-and-swap)
into one the caller did not ask for. A near miss is exactly:
- the same name after lower-casing and dropping `-` and `_` (`dryRun`, `dry-run`, `Dry_Run`);
- one edit (insert, delete, replace, swap of two neighbours) from a known name of 4 or more
  characters (`limt`, `dry_rn`);
- a known name with an `s` added or taken away, however short (`refs` for `ref`, `ops` for
  `op`): a list where the field takes one, or one where it takes a list;
- an entry of `SYNONYMS` whose field the type has.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any, NamedTuple

from swarmctl.envelope import SwarmError

# Names callers send for a field of another name (other tools' vocabulary, natural English).
SYNONYMS: dict[str, str] = {
    "expected": "expect",
    "expected_old": "expect",
    "expected_preview": "expect_preview",
    "preview_id": "expect_preview",
    "msg": "message",
    "meta": "metadata",
    "to": "target",
    "dry": "dry_run",
    "acknowledge": "acknowledge_unknown_effects",
    "ack": "acknowledge_unknown_effects",
    "max": "max_revisions",
    "op_id": "op",
    "op_number": "op",
    "parent": "parents",
}

NEAR_MIN_LEN = 4  # the one-edit rule applies to known names this long or longer


class Read(NamedTuple):
    arguments: dict[str, Any]  # as the request type names its fields
    ignored: list[str]  # the names it does not know, in the order given


def read(request: type, arguments: dict[str, Any]) -> Read:
    """`arguments` with aliases renamed and door-only values converted; the unknown names
    listed. Raises E_INVALID_ARG for a near miss, or a field given under two of its names."""
    fields, aliases = _names(request)
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in arguments.items():
        name = aliases.get(key, key)
        if name not in fields:
            meant = near_miss(key, fields)
            if meant is not None:
                raise SwarmError(
                    "E_INVALID_ARG",
                    f"unknown field {key!r}: did you mean {meant!r}? Nothing was done",
                    details={"field": key, "did_you_mean": meant, "type": request.__name__},
                    hint=f"Name it {meant!r}: a misspelled field is refused rather than ignored, since ignoring it "
                    f"would do what you did not ask. `swarmctl schema {request.__name__}` lists the fields.",
                )
            ignored.append(key)
            continue
        if name in out:
            given = [k for k in arguments if aliases.get(k, k) == name]
            raise SwarmError(
                "E_INVALID_ARG",
                f"a field is named twice: {' and '.join(given)} are two names of {name!r}",
                details={"fields": given},
                hint="Name each field once.",
            )
        from_bool = fields[name].metadata.get("json_bool")
        if from_bool is not None and isinstance(value, bool):
            value = list(from_bool[value])
        out[name] = value
    return Read(out, ignored)


@lru_cache(maxsize=None)
def _names(request: type) -> tuple[dict[str, dataclasses.Field], dict[str, str]]:
    """A request type's fields by name, and the other names its fields are also called by."""
    fields = {f.name: f for f in dataclasses.fields(request)}
    return fields, {alias: f.name for f in fields.values() for alias in f.metadata.get("json_aliases", ())}


def near_miss(given: str, known: Any) -> str | None:
    """The known name `given` is a near miss of (see the module's rules), else None."""
    squashed = _squash(given)
    for name in known:
        if _squash(name) == squashed:
            return name
    lowered = given.lower()
    for name in known:
        if len(name) >= NEAR_MIN_LEN and _one_edit(lowered, name):
            return name
    for name in known:
        if squashed in (_squash(name) + "s", _squash(name)[:-1] if name.endswith("s") else None):
            return name
    meant = SYNONYMS.get(lowered) or SYNONYMS.get(squashed)
    return meant if meant in known else None


def _squash(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` is `b` with one character inserted, deleted or replaced, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1 :]
