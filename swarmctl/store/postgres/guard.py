"""The policy inside the database: verified identities on a store on PostgreSQL.

A policy's `[roles]` maps database roles to the actors they may act as. The database knows who
connected (`session_user`), so swarmctl checks `--as` against it: a session of a mapped role
acts only as those actors (`verify`, in each write; `auth`, for meta.auth on every call). A
role outside the map may write nothing, unless it administers the store (a superuser, or a
member of the role that owns the store's schema): such a role can change the guard itself, so
it is trusted to act as it declares, as with `auth: "trust"`.

The database holds every client to the same rules, swarmctl or `psql`: triggers on every table
of the store's schema (swarmctl/store/postgres/triggers.py says table by table what a mapped
role may write). They read the policy's globs as regular expressions, kept in meta
(`policy_rules`), written with each version of the policy (`install`). What the database
cannot hold a role to, its grants must: README, "Database roles on PostgreSQL", has the SQL.
"""

from __future__ import annotations

import json
import re

from swarmctl import policy as rules
from swarmctl.envelope import SwarmError
from swarmctl.store.postgres.triggers import statements
from swarmctl.store.sql import Conn

RULES_KEY = "policy_rules"
# The setting in which a session of a mapped role declares the actor it writes as.
ACTOR_SETTING = "swarm.actor"


def _regex(glob: str) -> str:
    parts = re.split(r"(\*\*|\*)", glob)
    return "^(" + "".join("[^/]*" if p == "*" else ".*" if p == "**" else re.escape(p) for p in parts) + ")$"


def _regexes(globs: tuple[str, ...] | None) -> list[str] | None:
    return None if globs is None else [_regex(g) for g in globs]


def rules_json(policy: rules.Policy | None) -> str:
    """What the triggers read: the policy's globs as PostgreSQL regular expressions."""
    if policy is None:
        return json.dumps({"roles": {}, "protect": [], "admins": None})
    return json.dumps({
        "roles": {role: _regexes(globs) for role, globs in policy.roles.items()},
        "protect": [{"refs": _regexes(p.refs), "actors": _regexes(p.actors)} for p in policy.protect],
        "admins": _regexes(policy.admins),
        "undo_others": _regexes(policy.undo_others),
        "approve_actors": _regexes(policy.approve_actors),
        "approve_self": policy.approve_self,
        "workflow_others": _regexes(policy.workflow_others),
        "run_actors": _regexes(policy.run_actors),
    })


def _session(conn: Conn, policy: rules.Policy) -> tuple[str, list[str], bool]:
    """The session's role, the roles of the map it is (or is a member of), and whether it
    administers the store."""
    role, found, admin = conn.execute(_SESSION, (list(policy.roles),)).fetchone()
    return role, list(found), bool(admin)


def verify(conn: Conn, policy: rules.Policy | None, actor: str) -> bool:
    """Inside a write: whether `[roles]` maps the session's role (then the actor is declared to
    the database's guard for this transaction); False: the map is empty, or the role
    administers the store, and the actor stays as declared. E_FORBIDDEN if the role may not
    act as `actor`, or is outside the map and does not administer the store."""
    if policy is None or not policy.roles:
        return False
    role, found, admin = _session(conn, policy)
    if not found:
        if admin:
            return False
        rules.refuse(rules.unmapped(role, actor, tuple(policy.roles)))
    globs = tuple(g for r in found for g in policy.roles[r])
    rules.refuse(rules.may_act_as(actor, ", ".join(found), globs))
    conn.execute("SELECT set_config(?, ?, true)", (ACTOR_SETTING, actor))
    return True


def auth(conn: Conn, policy: rules.Policy | None, actor: str | None) -> str | None:
    """What meta.auth says of a call by `actor` (None: no actor) on this session: "database"
    where a mapped role may act as the actor, "none" where it may not or the role is outside
    the map (reads stay open to it; writes are refused), None where the database holds the
    session to nothing (no map; a role that administers the store): as declared."""
    if policy is None or not policy.roles:
        return None
    role, found, admin = _session(conn, policy)
    if not found:
        return None if admin else "none"
    globs = tuple(g for r in found for g in policy.roles[r])
    return "database" if actor and rules.matches(globs, actor) else "none"


# A role is mapped if it is the session's own, or one the session is a member of (a superuser is
# a member of every role, but administers the store: only its own name maps it). A role
# administers the store if it is a superuser or a member of the schema's owner.
_SESSION = """
SELECT session_user::text,
    ARRAY(SELECT rolname::text FROM pg_roles WHERE rolname = ANY(?) AND (rolname = session_user OR (
        pg_has_role(session_user, oid, 'MEMBER') AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)))
        ORDER BY rolname),
    (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
        OR pg_has_role(session_user, (SELECT nspowner FROM pg_namespace WHERE nspname = current_schema()), 'MEMBER')
"""


def refuse_unguardable(conn: Conn, policy: rules.Policy | None) -> None:
    """E_INVALID_ARG if `[roles]` maps a role the guard cannot hold: a superuser, or one that
    owns the store's schema (or is a member of its owner) or may create in it, since it could
    drop or replace the guard."""
    if policy is None or not policy.roles:
        return
    found = conn.execute(_UNGUARDABLE, (list(policy.roles),)).fetchone()
    if found is not None:
        raise SwarmError(
            "E_INVALID_ARG",
            f"the database role {found[0]} in [roles] could switch the store's guard off: it is a superuser, "
            "owns the store's schema or may create in it; nothing was written",
            details={"key": f"roles.{found[0]}", "role": found[0]},
            hint="Map only roles that own nothing in the store's schema and have no CREATE on it "
            "(README: Policy, database roles on PostgreSQL), or leave this role out of [roles].",
        )


_UNGUARDABLE = """
SELECT rolname::text FROM pg_roles WHERE rolname = ANY(?) AND (rolsuper
    OR pg_has_role(oid, (SELECT nspowner FROM pg_namespace WHERE nspname = current_schema()), 'MEMBER')
    OR has_schema_privilege(oid, (SELECT oid FROM pg_namespace WHERE nspname = current_schema()), 'CREATE'))
ORDER BY rolname LIMIT 1
"""


def install(conn: Conn, policy: rules.Policy | None) -> None:
    """Within the policy change's transaction: write the rules the triggers read, and make the
    guard at the store's first policy (it is the same for every version of it)."""
    refuse_unguardable(conn, policy)
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (RULES_KEY, rules_json(policy)),
    )
    made = conn.execute(
        "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE t.tgname = 'swarm_guard' AND c.relname = 'meta' "
        "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
    ).fetchone()
    if made is not None:  # made by the first policy (a mapped admin may not own it: not again)
        return
    quoted = '"' + schema.replace('"', '""') + '"'
    literal = "'" + schema.replace("'", "''") + "'"
    for statement in statements(quoted, literal):
        conn.execute(statement)
