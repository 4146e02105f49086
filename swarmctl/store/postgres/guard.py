"""The policy inside the database: verified identities on a store on PostgreSQL.

A policy's `[roles]` maps database roles to the actors they may act as. The database knows who
connected (`session_user`), so swarmctl checks `--as` against it (swarmctl/store/db.py asks
`mapped_actors`), and the triggers below hold every client to the same rules, swarmctl or
`psql`: a session of a mapped role

- appends ops only as an actor its role may act as, and never rewrites or removes one;
- changes a ref only in the transaction that appends the op moving it (the `head` row updated
  by this transaction), and only as `[[protect]]` lets that op's actor;
- changes the policy (table `policies`, meta `policy_rules`) only in an op of an admin.

The rules the triggers read are the policy's globs as regular expressions, kept in meta
(`policy_rules`), written with each version of the policy (`install`). A role that is not in
the map (the store's owner, a superuser) is not held to them: such a role can change the
triggers themselves, so it is trusted as the store's administrator, as with `auth: "trust"`.
"""

from __future__ import annotations

import json
import re

from swarmctl import policy as rules
from swarmctl.store.sql import Conn

RULES_KEY = "policy_rules"


def _regex(glob: str) -> str:
    parts = re.split(r"(\*\*|\*)", glob)
    return "^(" + "".join("[^/]*" if p == "*" else ".*" if p == "**" else re.escape(p) for p in parts) + ")$"


def rules_json(policy: rules.Policy | None) -> str:
    """What the triggers read: the policy's globs as PostgreSQL regular expressions."""
    if policy is None:
        return json.dumps({"roles": {}, "protect": [], "admins": None})
    return json.dumps({
        "roles": {role: [_regex(g) for g in globs] for role, globs in policy.roles.items()},
        "protect": [{"refs": [_regex(g) for g in p.refs], "actors": [_regex(g) for g in p.actors]} for p in policy.protect],
        "admins": None if policy.admins is None else [_regex(g) for g in policy.admins],
    })


def verify(conn: Conn, policy: rules.Policy | None, actor: str) -> bool:
    """Whether `[roles]` maps the session's role (False: it does not, and the actor stays as
    declared); E_FORBIDDEN if it does and none of its roles may act as `actor`."""
    if policy is None or not policy.roles:
        return False
    found = [role for (role,) in conn.execute(_MAPPED, (list(policy.roles),)).fetchall()]
    if not found:
        return False
    globs = tuple(g for role in found for g in policy.roles[role])
    rules.refuse(rules.may_act_as(actor, ", ".join(found), globs))
    return True


# A role is mapped if it is the session's own, or one the session is a member of (a superuser is
# a member of every role, but is the store's administrator: only its own name maps it).
_MAPPED = """
SELECT rolname FROM pg_roles
WHERE rolname = ANY(?) AND (rolname = session_user OR (
    pg_has_role(session_user, oid, 'MEMBER') AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)))
ORDER BY rolname
"""


def install(conn: Conn, policy: rules.Policy | None) -> None:
    """Within the policy change's transaction: write the rules the triggers read, and make the
    triggers at the store's first policy (they are the same for every version of it)."""
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (RULES_KEY, rules_json(policy)),
    )
    made = conn.execute(
        "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE t.tgname = 'swarm_guard_meta' AND c.relnamespace = current_schema()::regnamespace"
    ).fetchone()
    if made is not None:  # made by the first policy (a mapped admin may not own them: not again)
        return
    quoted = '"' + schema.replace('"', '""') + '"'
    for statement in _TRIGGERS.replace("{s}", quoted).split("\n;\n"):
        if statement.strip():
            conn.execute(statement)


_TRIGGERS = r"""
CREATE OR REPLACE FUNCTION {s}.swarm_mapped() RETURNS text[] LANGUAGE plpgsql STABLE AS $f$
DECLARE found jsonb; res text[]; r text;
BEGIN
  SELECT value::jsonb INTO found FROM {s}.meta WHERE key = 'policy_rules';
  IF found IS NULL THEN RETURN NULL; END IF;
  FOR r IN SELECT jsonb_object_keys(found->'roles') LOOP
    IF r = session_user OR (NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
        AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r AND pg_has_role(session_user, oid, 'MEMBER'))) THEN
      res := COALESCE(res, '{}'::text[]) || ARRAY(SELECT jsonb_array_elements_text(found->'roles'->r));
    END IF;
  END LOOP;
  RETURN res;
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_matches(name text, patterns jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $f$
  SELECT patterns IS NULL OR jsonb_typeof(patterns) = 'null'
      OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(patterns) p WHERE name ~ p)
$f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_forbid(what text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'forbidden by the store''s policy: %', what USING ERRCODE = '42501';
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_op_actor() RETURNS text LANGUAGE plpgsql AS $f$
DECLARE head_op bigint;
BEGIN
  -- The op this transaction appends: the head row, updated by this transaction.
  SELECT last_op INTO head_op FROM {s}.head WHERE id = 1 AND xmin::text = (txid_current() % 4294967296)::text;
  IF head_op IS NULL THEN RETURN NULL; END IF;
  RETURN (SELECT actor FROM {s}.ops WHERE op = head_op);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_guard_ops() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE res text[] := {s}.swarm_mapped();
BEGIN
  IF res IS NULL THEN RETURN COALESCE(NEW, OLD); END IF;
  IF TG_OP = 'INSERT' THEN
    IF NOT {s}.swarm_matches(NEW.actor, to_jsonb(res)) THEN
      PERFORM {s}.swarm_forbid(format('role %s may not act as %s', session_user, NEW.actor));
    END IF;
  ELSIF TG_OP = 'UPDATE' THEN
    IF (NEW.op, NEW.kind, NEW.actor, NEW.at, NEW.description, NEW.undoes)
        IS DISTINCT FROM (OLD.op, OLD.kind, OLD.actor, OLD.at, OLD.description, OLD.undoes) THEN
      PERFORM {s}.swarm_forbid(format('role %s may not rewrite op %s', session_user, OLD.op));
    END IF;
  ELSE
    PERFORM {s}.swarm_forbid(format('role %s may not remove op %s', session_user, OLD.op));
  END IF;
  RETURN COALESCE(NEW, OLD);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_guard_refs() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE res text[] := {s}.swarm_mapped(); actor text; ref text := COALESCE(NEW.name, OLD.name);
        found jsonb; entry jsonb;
BEGIN
  IF res IS NULL THEN RETURN COALESCE(NEW, OLD); END IF;
  actor := {s}.swarm_op_actor();
  IF actor IS NULL THEN
    PERFORM {s}.swarm_forbid(format('role %s may change ref %s only by appending an op', session_user, ref));
  END IF;
  SELECT value::jsonb INTO found FROM {s}.meta WHERE key = 'policy_rules';
  FOR entry IN SELECT jsonb_array_elements(found->'protect') LOOP
    IF {s}.swarm_matches(ref, entry->'refs') AND NOT {s}.swarm_matches(actor, entry->'actors') THEN
      PERFORM {s}.swarm_forbid(format('%s may not move ref %s', actor, ref));
    END IF;
  END LOOP;
  RETURN COALESCE(NEW, OLD);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_check_admin(append_only boolean) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE actor text := {s}.swarm_op_actor(); found jsonb;
BEGIN
  SELECT value::jsonb INTO found FROM {s}.meta WHERE key = 'policy_rules';
  IF actor IS NULL OR NOT append_only OR NOT {s}.swarm_matches(actor, found->'admins') THEN
    PERFORM {s}.swarm_forbid(format('role %s may not change the policy', session_user));
  END IF;
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_guard_policy() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF {s}.swarm_mapped() IS NOT NULL THEN
    PERFORM {s}.swarm_check_admin(TG_OP = 'INSERT');  -- a version is added, never changed
  END IF;
  RETURN COALESCE(NEW, OLD);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_guard_meta() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF {s}.swarm_mapped() IS NOT NULL
      AND (CASE WHEN TG_OP = 'DELETE' THEN OLD.key ELSE NEW.key END = 'policy_rules' OR OLD.key = 'policy_rules') THEN
    PERFORM {s}.swarm_check_admin(TG_OP <> 'DELETE');
  END IF;
  RETURN COALESCE(NEW, OLD);
END $f$
;
CREATE OR REPLACE TRIGGER swarm_guard_ops BEFORE INSERT OR UPDATE OR DELETE ON {s}.ops
  FOR EACH ROW EXECUTE FUNCTION {s}.swarm_guard_ops()
;
CREATE OR REPLACE TRIGGER swarm_guard_refs BEFORE INSERT OR UPDATE OR DELETE ON {s}.refs
  FOR EACH ROW EXECUTE FUNCTION {s}.swarm_guard_refs()
;
CREATE OR REPLACE TRIGGER swarm_guard_policies BEFORE INSERT OR UPDATE OR DELETE ON {s}.policies
  FOR EACH ROW EXECUTE FUNCTION {s}.swarm_guard_policy()
;
CREATE OR REPLACE TRIGGER swarm_guard_meta BEFORE INSERT OR UPDATE OR DELETE ON {s}.meta
  FOR EACH ROW EXECUTE FUNCTION {s}.swarm_guard_meta()
"""
