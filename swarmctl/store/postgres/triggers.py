"""The SQL of the database's own guard (swarmctl/store/postgres/guard.py says what it holds
whom to): functions and a trigger on every table of the store's schema, made with the store's
first policy. `{s}` is the schema as a quoted identifier, `{name}` as a string literal.

Every function runs with `search_path = pg_catalog, pg_temp`, so a session cannot shadow a
catalog table (a temporary `pg_roles`, say) or a function the guard calls. A session the guard
holds (`swarm_mapped()` is not NULL) writes as the actor it declares in the setting
`swarm.actor` (swarmctl sets it in each write), which must be one its role may act as; then
`swarm_refusal` says, table by table, what such a session may write:

- `head` moves by one, once per transaction: that numbers this transaction's op (`swarm_this_op`),
  which the transaction must add (checked at COMMIT: `swarm_head_has_op`);
- `ops`: only this transaction's op, by an actor of the role, dated no later than the server's
  clock (or the op before it); never an `init`, and a policy or token op only by an admin; an
  undo is held to `[undo] others`;
  only its `request` and `hash` may change afterwards, in the same transaction; never removed;
- `changesets`, `ref_moves`, `blobs`, `time_breaks`, `op_reverts`: added with this transaction's
  op, never changed or removed; a ref move is held to `[[protect]]`, a revert to `[undo] others`;
- `refs`: changed only with this transaction's op, as `[[protect]]` lets its actor;
- `tokens`: made and revoked by an admin's op (`token revoke`, or the undo of the op that made it);
- `policies` and meta `policy_rules`/`format`: added by an admin's op, never changed or removed;
- the other meta rows, the store's settings (`moved_to`, `tx.max_revisions`): an admin's only;
- `txs` and their rows: only the transactions of the role's actors; never removed;
- `workflows` and their steps: started by an actor of the role that `[run] actors` lets start
  it (`[run] definitions` is swarmctl's: the database cannot resolve a path's symlinks), steps
  only with their workflow, definitions never changed;
  another actor's workflow is changed only by one `[workflow] others` or `[approve]` lets;
  never removed;
- any other table, and TRUNCATE of any table: never.
"""

from __future__ import annotations

TRIGGERS = r"""
CREATE OR REPLACE FUNCTION {s}.swarm_rules() RETURNS jsonb LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RETURN (SELECT value::jsonb FROM {s}.meta WHERE key = 'policy_rules');
END $f$
;
-- The actor globs (regular expressions) the session's role may act as; NULL: the guard holds it
-- to nothing (no [roles] map; or a role outside it that administers the store: a superuser, or
-- a member of the schema's owner); empty: a role outside the map, which may write nothing.
CREATE OR REPLACE FUNCTION {s}.swarm_mapped() RETURNS text[] LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE found jsonb; super boolean; res text[]; r text;
BEGIN
  SELECT value::jsonb->'roles' INTO found FROM {s}.meta WHERE key = 'policy_rules';
  IF found IS NULL OR found = '{}'::jsonb THEN RETURN NULL; END IF;
  SELECT rolsuper INTO super FROM pg_roles WHERE rolname = session_user;
  FOR r IN SELECT jsonb_object_keys(found) LOOP
    IF r = session_user OR (NOT super
        AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r AND pg_has_role(session_user, oid, 'MEMBER'))) THEN
      res := COALESCE(res, '{}'::text[]) || ARRAY(SELECT jsonb_array_elements_text(found->r));
    END IF;
  END LOOP;
  IF res IS NOT NULL THEN RETURN res; END IF;
  IF super OR pg_has_role(session_user, (SELECT nspowner FROM pg_namespace WHERE nspname = {name}), 'MEMBER') THEN
    RETURN NULL;
  END IF;
  RETURN '{}'::text[];
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_matches(name text, patterns jsonb) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RETURN patterns IS NULL OR jsonb_typeof(patterns) = 'null'
      OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(patterns) p WHERE name ~ p);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_forbid(what text) RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RAISE EXCEPTION 'forbidden by the store''s policy: %', what USING ERRCODE = '42501';
END $f$
;
-- The actor the session declared (swarm.actor), which its role must be able to act as.
CREATE OR REPLACE FUNCTION {s}.swarm_actor(res text[]) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE a text := NULLIF(current_setting('swarm.actor', true), '');
BEGIN
  IF a IS NULL THEN
    PERFORM {s}.swarm_forbid(format('role %s writes only as the actor it declares in swarm.actor', session_user));
  END IF;
  IF NOT {s}.swarm_matches(a, to_jsonb(res)) THEN
    PERFORM {s}.swarm_forbid(format('role %s may not act as %s', session_user, a));
  END IF;
  RETURN a;
END $f$
;
-- The op this transaction appends: the head row, if this transaction moved it.
CREATE OR REPLACE FUNCTION {s}.swarm_this_op() RETURNS bigint LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RETURN (SELECT last_op FROM {s}.head WHERE id = 1 AND xmin::text = (txid_current() % 4294967296)::text);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_protected(a text, ref text) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE entry jsonb;
BEGIN
  IF ref IS NULL THEN RETURN NULL; END IF;
  FOR entry IN SELECT jsonb_array_elements({s}.swarm_rules()->'protect') LOOP
    IF {s}.swarm_matches(ref, entry->'refs') AND NOT {s}.swarm_matches(a, entry->'actors') THEN
      RETURN format('%s may not move ref %s', a, ref);
    END IF;
  END LOOP;
  RETURN NULL;
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_undo_refused(a text, target bigint) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE made_by text := (SELECT actor FROM {s}.ops WHERE op = target);
BEGIN
  IF made_by IS NULL OR made_by = a OR {s}.swarm_matches(a, {s}.swarm_rules()->'undo_others') THEN RETURN NULL; END IF;
  RETURN format('%s may not undo op %s, made by %s', a, target, made_by);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_admin(a text, this_op bigint) RETURNS boolean LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  RETURN this_op IS NOT NULL AND {s}.swarm_matches(a, {s}.swarm_rules()->'admins');
END $f$
;
-- What a transaction of a held role may not write: NULL, it may.
CREATE OR REPLACE FUNCTION {s}.swarm_refusal(tbl text, verb text, a text, res text[], this_op bigint, o jsonb, n jsonb)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $f$
DECLARE mine jsonb := to_jsonb(res); row_op bigint := (n->>'op')::bigint;
BEGIN
  IF tbl = 'head' THEN
    IF verb = 'UPDATE' AND this_op IS NULL AND (n->>'last_op')::bigint = (o->>'last_op')::bigint + 1 THEN RETURN NULL; END IF;
    RETURN 'the head row moves by one op per transaction';
  ELSIF tbl = 'ops' THEN
    IF verb = 'INSERT' THEN
      IF row_op IS DISTINCT FROM this_op THEN RETURN format('op %s is not the op this transaction numbered', row_op); END IF;
      IF NOT {s}.swarm_matches(n->>'actor', mine) THEN RETURN format('op %s names actor %s', row_op, n->>'actor'); END IF;
      IF n->>'kind' = 'init' OR (n->>'kind' IN ('policy_set', 'token_create', 'token_revoke') AND NOT {s}.swarm_admin(a, this_op)) THEN
        RETURN format('an op of kind %s is not %s''s to add', n->>'kind', a);
      END IF;
      -- Its time is the server's (never earlier than the op before it): a later one would drag
      -- the time of every op after it forward.
      IF n->>'at' > GREATEST(to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                             (SELECT p.at FROM {s}.ops p WHERE p.op = row_op - 1)) THEN
        RETURN format('op %s is dated %s, ahead of the server''s clock', row_op, n->>'at');
      END IF;
      RETURN {s}.swarm_undo_refused(a, (n->>'undoes')::bigint);
    ELSIF verb = 'UPDATE' AND (o->>'op')::bigint = this_op AND (o - 'request' - 'hash') = (n - 'request' - 'hash') THEN
      RETURN NULL;
    END IF;
    RETURN format('op %s may not be rewritten or removed', o->>'op');
  ELSIF tbl IN ('changesets', 'ref_moves', 'blobs', 'time_breaks', 'op_reverts') THEN
    IF verb <> 'INSERT' THEN RETURN format('rows of %s are never changed or removed', tbl); END IF;
    IF this_op IS NULL OR (n ? 'op' AND row_op IS DISTINCT FROM this_op) THEN
      RETURN format('rows of %s are added only with the op of their transaction', tbl);
    END IF;
    IF n ? 'actor' AND NOT {s}.swarm_matches(n->>'actor', mine) THEN RETURN format('a row of %s names actor %s', tbl, n->>'actor'); END IF;
    IF tbl = 'op_reverts' THEN RETURN {s}.swarm_undo_refused(a, (n->>'target')::bigint); END IF;
    RETURN {s}.swarm_protected(a, n->>'name');
  ELSIF tbl = 'refs' THEN
    IF this_op IS NULL OR (verb <> 'DELETE' AND row_op IS DISTINCT FROM this_op) THEN
      RETURN format('ref %s changes only with the op of its transaction', COALESCE(n->>'name', o->>'name'));
    END IF;
    RETURN COALESCE({s}.swarm_protected(a, o->>'name'), {s}.swarm_protected(a, n->>'name'));
  ELSIF tbl = 'tokens' THEN
    IF verb = 'INSERT' AND (n->>'id')::bigint = this_op AND {s}.swarm_admin(a, this_op) THEN RETURN NULL; END IF;
    IF verb = 'UPDATE' AND o->>'revoked_at' IS NULL AND (n->>'revoked_op')::bigint = this_op
        AND (o - 'revoked_at' - 'revoked_op') = (n - 'revoked_at' - 'revoked_op')
        AND {s}.swarm_admin(a, this_op) THEN  -- by `token revoke`, or the undo of its create: an admin's, as swarmctl holds both
      RETURN NULL;
    END IF;
    RETURN 'only an admin makes or revokes tokens, by an op';
  ELSIF tbl = 'policies' OR (tbl = 'meta' AND (COALESCE(n->>'key', o->>'key') IN ('policy_rules', 'format') OR o->>'key' IN ('policy_rules', 'format'))) THEN
    IF verb <> 'DELETE' AND (tbl = 'meta' OR row_op = this_op) AND (verb = 'INSERT' OR tbl = 'meta') AND {s}.swarm_admin(a, this_op) THEN
      RETURN NULL;
    END IF;
    RETURN 'only an admin changes the policy or the store''s format, by an op';
  ELSIF tbl = 'meta' THEN
    -- The store's settings (a fence's `moved_to`, `tx config`'s bound): set by admins only, as
    -- the commands that set them are; they write no op, so the declared actor is what is asked.
    IF {s}.swarm_matches(a, {s}.swarm_rules()->'admins') THEN RETURN NULL; END IF;
    RETURN format('only an admin changes the store''s settings (meta %s)', COALESCE(n->>'key', o->>'key'));
  ELSIF tbl IN ('txs', 'tx_revisions', 'tx_baselines') THEN
    RETURN {s}.swarm_tx_refusal(tbl, verb, mine, this_op, o, n);
  ELSIF tbl IN ('workflows', 'workflow_steps') THEN
    RETURN {s}.swarm_workflow_refusal(tbl, verb, a, mine, o, n);
  END IF;
  RETURN format('table %s is not written by a role of the [roles] map', tbl);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_tx_refusal(tbl text, verb text, mine jsonb, this_op bigint, o jsonb, n jsonb)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
DECLARE owner text;
BEGIN
  IF tbl = 'txs' THEN
    IF verb = 'DELETE' THEN RETURN 'transactions are never removed'; END IF;
    IF NOT {s}.swarm_matches(n->>'actor', mine) OR (verb = 'UPDATE' AND NOT {s}.swarm_matches(o->>'actor', mine)) THEN
      RETURN format('transaction %s is %s''s', COALESCE(o->>'tx', n->>'tx'), COALESCE(o->>'actor', n->>'actor'));
    END IF;
    IF n->>'state' = 'Committed' AND COALESCE(o->>'state', '') <> 'Committed' AND (n->>'op')::bigint IS DISTINCT FROM this_op THEN
      RETURN 'a transaction is committed only by its op';
    END IF;
    RETURN NULL;
  END IF;
  FOR owner IN SELECT actor FROM {s}.txs WHERE tx IN ((o->>'tx')::bigint, (n->>'tx')::bigint) LOOP
    IF NOT {s}.swarm_matches(owner, mine) THEN RETURN format('a transaction of %s', owner); END IF;
  END LOOP;
  RETURN NULL;
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_workflow_refusal(tbl text, verb text, a text, mine jsonb, o jsonb, n jsonb)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $f$
DECLARE r jsonb := {s}.swarm_rules(); wid text; creator text; fresh boolean; col text; approval boolean;
BEGIN
  IF verb = 'DELETE' THEN RETURN 'workflows are never removed'; END IF;
  IF tbl = 'workflows' AND verb = 'INSERT' THEN
    IF NOT ({s}.swarm_matches(n->>'created_by', mine) AND {s}.swarm_matches(n->>'owner_actor', mine)) THEN
      RETURN format('a workflow started by %s', n->>'created_by');
    ELSIF NOT {s}.swarm_matches(a, r->'run_actors') THEN RETURN format('%s may not run workflows', a);
    END IF;  -- [run] definitions is swarmctl's to check: it names files after resolving symlinks
    RETURN NULL;
  END IF;
  wid := CASE WHEN tbl = 'workflows' THEN COALESCE(o->>'id', n->>'id') ELSE COALESCE(o->>'workflow', n->>'workflow') END;
  SELECT created_by, xmin::text = (txid_current() % 4294967296)::text INTO creator, fresh FROM {s}.workflows WHERE id = wid;
  IF verb = 'INSERT' THEN  -- a step
    IF fresh AND {s}.swarm_matches(creator, mine) THEN RETURN NULL; END IF;
    RETURN 'steps are added only with their workflow';
  END IF;
  FOREACH col IN ARRAY ARRAY['id', 'workflow', 'idx', 'name', 'kind', 'spec', 'source', 'base_dir', 'created_by', 'created_at'] LOOP
    IF o->col IS DISTINCT FROM n->col THEN RETURN format('%s of workflow %s never changes', col, wid); END IF;
  END LOOP;
  FOREACH col IN ARRAY ARRAY['owner_actor', 'rollback_by', 'approved_by'] LOOP
    IF n->>col IS NOT NULL AND o->col IS DISTINCT FROM n->col AND NOT {s}.swarm_matches(n->>col, mine) THEN
      RETURN format('%s of workflow %s names %s', col, wid, n->>col);
    END IF;
  END LOOP;
  -- An approval sets a gate's approver, status and times (and moves its workflow's rev).
  approval := (tbl = 'workflow_steps' AND o->>'approved_by' IS NULL AND n->>'approved_by' IS NOT NULL
    AND (o - 'status' - 'approved_by' - 'approved_at' - 'finished_at') = (n - 'status' - 'approved_by' - 'approved_at' - 'finished_at'))
    OR (tbl = 'workflows' AND (o - 'updated_at' - 'rev') = (n - 'updated_at' - 'rev'));
  IF n->>'approved_by' IS NOT NULL AND o->'approved_by' IS DISTINCT FROM n->'approved_by' AND (NOT approval OR NOT {s}.swarm_matches(a, r->'approve_actors')
      OR (a = creator AND r->'approve_self' = 'false'::jsonb)) THEN
    RETURN format('%s may not approve a gate of workflow %s', a, wid);
  END IF;
  IF a = creator OR {s}.swarm_matches(a, r->'workflow_others') OR (approval AND {s}.swarm_matches(a, r->'approve_actors')) THEN
    RETURN NULL;
  END IF;
  RETURN format('%s may not change workflow %s, started by %s', a, wid, creator);
END $f$
;
CREATE OR REPLACE FUNCTION {s}.swarm_guard() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE res text[] := {s}.swarm_mapped(); a text; o jsonb; n jsonb; what text;
BEGIN
  IF res IS NULL THEN RETURN COALESCE(NEW, OLD); END IF;
  IF TG_OP = 'TRUNCATE' THEN
    PERFORM {s}.swarm_forbid(format('role %s may not truncate %s', session_user, TG_TABLE_NAME));
  END IF;
  a := {s}.swarm_actor(res);
  IF TG_OP <> 'INSERT' THEN o := to_jsonb(OLD); END IF;
  IF TG_OP <> 'DELETE' THEN n := to_jsonb(NEW); END IF;
  what := {s}.swarm_refusal(TG_TABLE_NAME, TG_OP, a, res, {s}.swarm_this_op(), o, n);
  IF what IS NOT NULL THEN
    PERFORM {s}.swarm_forbid(format('%s (role %s, as %s)', what, session_user, a));
  END IF;
  RETURN COALESCE(NEW, OLD);
END $f$
;
-- At COMMIT: a held session that moved the head added the op it numbered. (The head moving by
-- one is all `swarm_refusal` can ask of the statement itself; without its op, every later
-- write would find a gap in the log and refuse.)
CREATE OR REPLACE FUNCTION {s}.swarm_head_has_op() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  IF {s}.swarm_mapped() IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {s}.ops WHERE op = NEW.last_op) THEN
    PERFORM {s}.swarm_forbid(format('the head row names op %s, but no op %s was added (role %s)', NEW.last_op, NEW.last_op, session_user));
  END IF;
  RETURN NULL;
END $f$
;
CREATE CONSTRAINT TRIGGER swarm_head_has_op AFTER UPDATE ON {s}.head DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION {s}.swarm_head_has_op()
;
DO $d$
DECLARE t text;
BEGIN
  FOR t IN SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')
      AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = {name}) LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER swarm_guard BEFORE INSERT OR UPDATE OR DELETE ON %I.%I '
                   'FOR EACH ROW EXECUTE FUNCTION %I.swarm_guard()', {name}, t, {name});
    EXECUTE format('CREATE OR REPLACE TRIGGER swarm_guard_truncate BEFORE TRUNCATE ON %I.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I.swarm_guard()', {name}, t, {name});
  END LOOP;
END $d$
"""


def statements(quoted: str, literal: str) -> list[str]:
    """The statements that make the guard in the schema named by `quoted` (an identifier) and
    `literal` (a string literal)."""
    text = TRIGGERS.replace("{s}", quoted).replace("{name}", literal)
    return [s for s in text.split("\n;\n") if s.strip()]
