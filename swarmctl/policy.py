"""A store's policy: who may do what. Parsed from its TOML once, asked by tools/ and store/.

The policy is data kept in the store (swarmctl/store/policies.py keeps its versions); this
module knows its rules and nothing of where it is kept. Every refusal is one `Refusal`, made
here, so its wording, its `details` (the rule, the actor, the ref or op) and its hint (who may)
are the same whichever path found it. A store without a policy has no `Policy`: every question
here is then never asked, and the store behaves as if policies did not exist.

Globs match an actor's `kind/name` and ref names: `*` matches within one `/`-separated part,
`**` across parts; every other character stands for itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from swarmctl.envelope import SwarmError

# Keys a policy may have, by table ("" is the top level); anything else is refused, so a typo
# never silently opens a door.
KEYS: dict[str, tuple[str, ...]] = {
    "": ("admins", "protect", "undo", "approve", "workflow", "run", "roles"),
    "protect": ("refs", "actors"),
    "undo": ("others",),
    "approve": ("self", "actors"),
    "workflow": ("others",),
    "run": ("actors", "definitions"),
}


@lru_cache(maxsize=8192)  # a policy's every glob (64 KiB holds ~1,300 entries), checked on every write
def _glob_re(glob: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*)", glob)
    text = "".join("[^/]*" if p == "*" else ".*" if p == "**" else re.escape(p) for p in parts)
    return re.compile(text, re.DOTALL)


def may_match_an_actor(glob: str) -> bool:
    """Whether some well-formed actor (kind/name) matches `glob`: its `*` and `**` filled in a few
    ways that suit both parts of an actor. (`*` never crosses a `/`: `*` alone matches no actor.)
    A glob of more than six wildcards is taken to match one."""
    import itertools

    from swarmctl.names import is_actor

    parts = re.split(r"(\*\*|\*)", glob)
    wild = [i for i, p in enumerate(parts) if p in ("*", "**")]
    if len(wild) > 6:
        return True
    fillings = {"*": ("a", "", "a-a"), "**": ("a/a", "a", "")}
    for chosen in itertools.product(*(fillings[parts[i]] for i in wild)):
        filled = list(parts)
        for i, text in zip(wild, chosen):
            filled[i] = text
        if is_actor("".join(filled)):
            return True
    return False


def matches(globs: tuple[str, ...] | None, name: str) -> bool:
    """Whether `name` matches one of `globs` (None: the rule is not set, so anyone matches)."""
    return globs is None or any(_glob_re(g).fullmatch(name) for g in globs)


@dataclass(frozen=True)
class Protect:
    refs: tuple[str, ...]
    actors: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    """One version of a store's policy. A glob list of None is a rule left unset (anyone)."""

    text: str
    version: int  # the op that set it
    admins: tuple[str, ...] | None = None
    protect: tuple[Protect, ...] = ()
    undo_others: tuple[str, ...] | None = None
    approve_self: bool = True
    approve_actors: tuple[str, ...] | None = None
    workflow_others: tuple[str, ...] | None = None
    run_actors: tuple[str, ...] | None = None
    run_definitions: tuple[str, ...] | None = None
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """Why a policy refuses a call: the rule (`protect[0]`, `undo.others`, ...), whom it
    concerns, and who would be allowed."""

    rule: str
    actor: str
    message: str
    allowed: tuple[str, ...]
    subject: dict[str, Any]  # the ref, op, workflow or file the rule was asked about

    def error(self) -> SwarmError:
        who = ", ".join(self.allowed) if self.allowed else "no one"
        return SwarmError(
            "E_FORBIDDEN",
            f"{self.message}; nothing was written",
            details={"rule": self.rule, "actor": self.actor, **self.subject, "allowed": list(self.allowed)},
            hint=f"The store's policy ({self.rule}) lets only {who} do this. `swarmctl policy show` shows it.",
        )


# --- parsing ---------------------------------------------------------------------------------


def parse(text: str, version: int = 0, *, given: bool = True) -> Policy:
    """The policy in `text` (TOML): E_INVALID_ARG naming the key for anything it cannot be.
    `given`: the text is input (`policy set`), held to the bounds on inputs; else the store's."""
    from swarmctl import limits  # here: a store without a policy never parses one, nor imports tomllib

    try:
        data = limits.read_toml(text, "the policy", given=given)
    except limits.Unreadable as exc:
        raise _invalid(str(exc), None) from None
    _known(data, "")
    protect = data.get("protect", [])
    if not isinstance(protect, list) or not all(isinstance(p, dict) for p in protect):
        raise _invalid("protect must be an array of tables ([[protect]])", "protect")
    entries = []
    for i, entry in enumerate(protect):
        _known(entry, "protect", f"protect[{i}]")
        refs, actors = entry.get("refs"), entry.get("actors")
        if refs is None or actors is None:
            raise _invalid(f"protect[{i}] needs both refs and actors", f"protect[{i}]")
        entries.append(Protect(_globs(refs, f"protect[{i}].refs"), _globs(actors, f"protect[{i}].actors")))
    table = {name: _table(data, name) for name in ("undo", "approve", "workflow", "run")}
    approve_self = table["approve"].get("self", True)
    if not isinstance(approve_self, bool):
        raise _invalid("approve.self must be true or false", "approve.self")
    return Policy(
        text=text,
        version=version,
        admins=_optional_globs(data, "admins", "admins"),
        protect=tuple(entries),
        undo_others=_optional_globs(table["undo"], "others", "undo.others"),
        approve_self=approve_self,
        approve_actors=_optional_globs(table["approve"], "actors", "approve.actors"),
        workflow_others=_optional_globs(table["workflow"], "others", "workflow.others"),
        run_actors=_optional_globs(table["run"], "actors", "run.actors"),
        run_definitions=_optional_globs(table["run"], "definitions", "run.definitions"),
        roles=_roles(data.get("roles", {})),
    )


def _invalid(message: str, key: str | None) -> SwarmError:
    return SwarmError(
        "E_INVALID_ARG",
        message,
        details={"key": key} if key else {},
        hint="Fix the policy file and set it again; nothing was written. README: Policy.",
    )


def _known(data: dict, table: str, where: str | None = None) -> None:
    unknown = sorted(set(data) - set(KEYS[table]))
    if unknown:
        place = where or table or "the top level"
        raise _invalid(
            f"unknown key {unknown[0]!r} in {place} of the policy (known: {', '.join(KEYS[table])})",
            f"{where or table}.{unknown[0]}".lstrip("."),
        )


def _table(data: dict, name: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be a table ([{name}])", name)
    _known(value, name)
    return value


def _globs(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _invalid(f"{key} must be a list of non-empty strings (globs)", key)
    return tuple(value)


def _optional_globs(table: dict, name: str, key: str) -> tuple[str, ...] | None:
    return _globs(table[name], key) if name in table else None


def _roles(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise _invalid("roles must be a table mapping database roles to actor globs", "roles")
    return {role: _globs(globs, f"roles.{role}") for role, globs in value.items()}


# --- the questions ---------------------------------------------------------------------------


def may_move(policy: Policy | None, actor: str, ref: str) -> Refusal | None:
    """Whether `actor` may create, move or delete `ref`: every [[protect]] entry whose refs
    match must name the actor."""
    if policy is None:
        return None
    for i, entry in enumerate(policy.protect):
        if matches(entry.refs, ref) and not matches(entry.actors, actor):
            return Refusal(
                f"protect[{i}]", actor, f"{actor} may not move ref {ref} (protected: {', '.join(entry.refs)})",
                entry.actors, {"ref": ref},
            )
    return None


def may_admin(policy: Policy | None, actor: str, what: str) -> Refusal | None:
    """Whether `actor` may change the policy (or manage tokens): while none is set, anyone."""
    if policy is None or matches(policy.admins, actor):
        return None
    return Refusal("admins", actor, f"{actor} may not {what}: only admins may", policy.admins or (), {})


def may_undo(policy: Policy | None, actor: str, op: int, op_actor: str) -> Refusal | None:
    """Whether `actor` may take back op `op`, made by `op_actor`."""
    if policy is None or op_actor == actor or matches(policy.undo_others, actor):
        return None
    return Refusal(
        "undo.others", actor, f"{actor} may not undo op {op}, made by {op_actor}",
        policy.undo_others or (), {"op": op, "op_actor": op_actor},
    )


def may_approve(policy: Policy | None, actor: str, workflow: str, creator: str) -> Refusal | None:
    """Whether `actor` may approve a gate of `workflow`, which `creator` started."""
    if policy is None:
        return None
    if not matches(policy.approve_actors, actor):
        return Refusal(
            "approve.actors", actor, f"{actor} may not approve gates", policy.approve_actors or (), {"workflow": workflow}
        )
    if actor == creator and not policy.approve_self:
        others = tuple(policy.approve_actors or ("*/*",))
        return Refusal(
            "approve.self", actor, f"{actor} started workflow {workflow}, so may not approve its own gate",
            tuple(f"{g} (not {actor})" for g in others), {"workflow": workflow},
        )
    return None


def may_steer(policy: Policy | None, actor: str, workflow: str, creator: str, what: str) -> Refusal | None:
    """Whether `actor` may resume, cancel or roll back `workflow`, which `creator` started."""
    if policy is None or actor == creator or matches(policy.workflow_others, actor):
        return None
    return Refusal(
        "workflow.others", actor, f"{actor} may not {what} workflow {workflow}, started by {creator}",
        policy.workflow_others or (), {"workflow": workflow, "created_by": creator},
    )


def may_run(policy: Policy | None, actor: str, definition: str) -> Refusal | None:
    """Whether `actor` may start a workflow from `definition` (a resolved absolute path)."""
    if policy is None:
        return None
    if not matches(policy.run_actors, actor):
        return Refusal("run.actors", actor, f"{actor} may not run workflows", policy.run_actors or (), {"file": definition})
    if not matches(policy.run_definitions, definition):
        return Refusal(
            "run.definitions", actor, f"{definition} is not a workflow definition this store runs",
            policy.run_definitions or (), {"file": definition},
        )
    return None


def may_act_as(actor: str, role: str, globs: tuple[str, ...]) -> Refusal | None:
    """Whether a session of database role `role`, which `[roles]` maps to `globs`, may act as `actor`."""
    if matches(globs, actor):
        return None
    return Refusal("roles", actor, f"the database role {role} may not act as {actor}", globs, {"role": role})


def unmapped(role: str, actor: str, roles: tuple[str, ...]) -> Refusal:
    """A session of database role `role`, in none of the `[roles]` map's `roles`, writing."""
    return Refusal(
        "roles", actor, f"the database role {role} is not in the store's [roles] map, so it may not write",
        tuple(f"role {r}" for r in roles), {"role": role},
    )


def refuse(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise refusal.error()
