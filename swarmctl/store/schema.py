"""The store's SQLite schema. The format version is bumped whenever a reader of the old format
could misread the new one; a store of a newer format than this code knows is refused. SCHEMA is
what a new store is made with; an older store is brought to it by the steps of
swarmctl/store/migrate.py (the one path for every format change)."""

from __future__ import annotations

FORMAT_VERSION = 4
DB_FILE = "swarmops.db"

# What an op may be (`ops.kind`): Writer.append_op refuses any other, and `op log --kind`
# offers these (tools/op.py OpKind). Not a CHECK in the DDL: a new kind needs no new format.
OP_KINDS = (
    "init",
    "changeset_create",
    "ref_set",
    "ref_delete",
    "tx_commit",
    "undo",
    "workflow_step",
    "revert",
    "restore",
    "store_upgrade",
    "token_create",
    "token_revoke",
    "policy_set",
)

# Ops are numbered by SQLite's rowid: max + 1 inside a BEGIN IMMEDIATE transaction, and never
# deleted, so numbers are gapless and in commit order. `at` is kept non-decreasing with `op`
# (see store.db.op_time) except after a clock that ran ahead: the op that then takes its
# writer's own, earlier time is listed in time_breaks (format 2). Between breaks times are in
# op order, which lets --since/--until find op bounds by bisection. `hash` is the op's link in
# the op log's hash chain (swarmctl/store/chain.py; format 2).
TIME_BREAKS = """
CREATE TABLE time_breaks (
    op INTEGER PRIMARY KEY REFERENCES ops(op)
)"""

SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE ops (
    op          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    at          TEXT NOT NULL,
    description TEXT NOT NULL,
    undoes      INTEGER REFERENCES ops(op),
    hash        TEXT
);
CREATE INDEX ops_actor ON ops(actor, op);
CREATE INDEX ops_kind ON ops(kind, op);
CREATE INDEX ops_actor_kind ON ops(actor, kind, op);
CREATE INDEX ops_at ON ops(at, op);
CREATE INDEX ops_undoes ON ops(undoes, op) WHERE undoes IS NOT NULL;

CREATE TABLE ref_moves (
    op    INTEGER NOT NULL REFERENCES ops(op),
    seq   INTEGER NOT NULL,
    name  TEXT NOT NULL,
    old   TEXT REFERENCES changesets(id) DEFERRABLE INITIALLY DEFERRED,
    new   TEXT REFERENCES changesets(id) DEFERRABLE INITIALLY DEFERRED,
    actor TEXT,  -- the op's actor and kind, beside each of its moves (format 3)
    kind  TEXT,
    PRIMARY KEY (op, seq),
    UNIQUE (name, op)
) WITHOUT ROWID;

CREATE TABLE changesets (
    id       TEXT PRIMARY KEY,
    op       INTEGER NOT NULL REFERENCES ops(op),
    message  TEXT NOT NULL,
    actor    TEXT NOT NULL,
    at       TEXT NOT NULL,
    parents  TEXT NOT NULL,   -- JSON array of ids
    metadata TEXT NOT NULL,   -- JSON object, string to string
    files    TEXT NOT NULL    -- JSON object, path to blob id
) WITHOUT ROWID;
CREATE INDEX changesets_op ON changesets(op);

CREATE TABLE blobs (
    id      TEXT PRIMARY KEY,
    size    INTEGER NOT NULL,
    content BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE refs (
    name   TEXT PRIMARY KEY,
    target TEXT NOT NULL REFERENCES changesets(id) DEFERRABLE INITIALLY DEFERRED,
    op     INTEGER NOT NULL REFERENCES ops(op)
) WITHOUT ROWID;
"""
SCHEMA += TIME_BREAKS + ";\n"

# `op log --ref R` with `--actor`/`--kind` (and `op revert` with them) reads one of these: the
# moves of R by that actor and/or of that kind, in op order, at the cost of the page however
# long R's history (format 3; the same text on both backends, see swarmctl/store/migrate.py).
# `actor` and `kind` are copies of the op's, written with each move and never changed (ops are
# never edited); `store check` holds them to the op's.
REF_MOVES_INDEXES = """
CREATE INDEX ref_moves_actor ON ref_moves(name, actor, op);
CREATE INDEX ref_moves_kind ON ref_moves(name, kind, op);
CREATE INDEX ref_moves_actor_kind ON ref_moves(name, actor, kind, op);
"""
SCHEMA += REF_MOVES_INDEXES

# Which ops a `revert` op took back (swarmctl/store/reverts.py): an undo names its one op in
# `ops.undoes`, a revert names many here. Format 2 (swarmctl/store/migrate.py) makes it in every
# store, with this same text; a format-1 store read as it is has none, and a read then finds no
# reverts. (A format-1 store written by a swarmctl of the time between reverts and format 2 may
# have it already, made by its first revert: hence IF NOT EXISTS.)
OP_REVERTS = """
CREATE TABLE IF NOT EXISTS op_reverts (
    op     INTEGER NOT NULL REFERENCES ops(op),  -- the revert op
    target INTEGER NOT NULL REFERENCES ops(op),  -- an op it took back
    PRIMARY KEY (op, target)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS op_reverts_target ON op_reverts(target, op);
"""
SCHEMA += OP_REVERTS

# Tokens for `swarmctl mcp --http` (swarmctl/store/tokens.py): who a bearer token names. Only the
# token's SHA-256 is kept, never its value. `id` is the op that created it. A store made before
# tokens existed lacks the table until its first write upgrades it to format 3 (which makes it,
# with this same text); until then a read finds no tokens.
def tokens_table(text: str, number: str, boolean: str) -> str:
    """The tokens table in a backend's words for text, op numbers and booleans."""
    return f"""
CREATE TABLE IF NOT EXISTS tokens (
    id         {number} PRIMARY KEY REFERENCES ops(op),  -- the token_create op
    digest     {text} NOT NULL UNIQUE,                   -- SHA-256 of the token, hex
    actor      {text} NOT NULL,
    created_by {text} NOT NULL,
    created_at {text} NOT NULL,
    expires_at {text} NOT NULL,
    read_only  {boolean} NOT NULL,
    revoked_at {text},
    revoked_op {number} REFERENCES ops(op)               -- the revoke (or undo) op
);
"""


TOKENS = tokens_table("TEXT", "INTEGER", "INTEGER")
SCHEMA += TOKENS

# Staged transactions (`swarmctl tx`, swarmctl/store/txs.py). Bookkeeping, not ops: these rows
# change inside Store.write() like everything else, but only `tx commit` appends an op. A
# transaction's row stays after it ends (Committed, with its op; or RolledBack) so a later
# command can say what became of it; its revisions and baselines are deleted when it ends.
# The partial unique index is the rule "one open transaction per actor per store".
SCHEMA += """
CREATE TABLE txs (
    tx            INTEGER PRIMARY KEY,
    actor         TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('Active', 'Conflicted', 'Committed', 'RolledBack')),
    base_op       INTEGER NOT NULL REFERENCES ops(op),  -- the store's newest op at `tx begin`
    revision      INTEGER NOT NULL DEFAULT 0,           -- current revision; 0: nothing applied
    max_revisions INTEGER NOT NULL,                     -- the store's bound when it began
    begun_at      TEXT NOT NULL,
    ended_at      TEXT,
    op            INTEGER REFERENCES ops(op)            -- the tx_commit op, once Committed
);
CREATE UNIQUE INDEX txs_open ON txs(actor) WHERE state IN ('Active', 'Conflicted');
CREATE INDEX txs_actor ON txs(actor, tx);

CREATE TABLE tx_revisions (
    tx       INTEGER NOT NULL REFERENCES txs(tx),
    revision INTEGER NOT NULL,  -- 1, 2, ...
    name     TEXT NOT NULL,
    new      TEXT REFERENCES changesets(id),  -- null: this revision deletes the ref
    at       TEXT NOT NULL,
    PRIMARY KEY (tx, revision)
) WITHOUT ROWID;

CREATE TABLE tx_baselines (
    tx   INTEGER NOT NULL REFERENCES txs(tx),
    name TEXT NOT NULL,
    seq  INTEGER NOT NULL,                     -- order in which refs were first staged
    old  TEXT REFERENCES changesets(id),       -- what the ref named when first staged; null: absent
    op   INTEGER NOT NULL REFERENCES ops(op),  -- the store's newest op at that moment
    PRIMARY KEY (tx, name)
) WITHOUT ROWID;
"""

# Workflows (swarmctl/tools/workflow): bookkeeping, not ops. A store step's op is linked from
# its row (`op`), as is the op that undid it (`undo_op`). `rev` counts the changes to a
# workflow and its steps: a rollback claims the workflow only if nothing changed since it
# checked its safety rules. `owner_*` and a step's `pid`/`pid_start` name the process acting
# on it (pid and its start time from /proc, so a reused pid is not taken for a live one), and
# `command_*` the process group of the command it started, which may outlive it. Those pids
# are of the owner's host, `owner_host`; on any other host the owner counts as alive until
# `owner_lease` (format 4), which the running swarmctl renews.
# `${env:...}` values are never written here: a step's `spec` keeps the reference.
SCHEMA += """
CREATE TABLE workflows (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    description  TEXT,
    state        TEXT NOT NULL,
    source       TEXT NOT NULL,   -- the TOML file it was defined in (absolute)
    base_dir     TEXT NOT NULL,   -- relative command paths resolve here; commands run here
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    cursor       INTEGER,         -- the step in flight, or the gate it waits at
    owner_pid    INTEGER,
    owner_start  TEXT,
    owner_actor  TEXT,
    owner_host   TEXT,            -- the host the owner runs on (swarmctl/hosts.py; format 4)
    owner_lease  TEXT,            -- until when another host takes the owner for alive (format 4)
    rollback_by  TEXT,
    rollback_at  TEXT,
    rev          INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX workflows_created ON workflows(created_at, id);
CREATE INDEX workflows_state ON workflows(state, created_at);

CREATE TABLE workflow_steps (
    workflow           TEXT NOT NULL REFERENCES workflows(id),
    idx                INTEGER NOT NULL,   -- 1, 2, ... in the order of the definition
    name               TEXT NOT NULL,
    kind               TEXT NOT NULL,      -- ref_set, ref_delete, run, approval
    spec               TEXT NOT NULL,      -- JSON: the step as defined (env references, not values)
    status             TEXT NOT NULL,
    pid                INTEGER,
    pid_start          TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    started_at         TEXT,
    finished_at        TEXT,
    op                 INTEGER REFERENCES ops(op),
    result             TEXT,               -- JSON: the outcome of running it
    approved_by        TEXT,
    approved_at        TEXT,
    undo_op            INTEGER REFERENCES ops(op),
    undo_result        TEXT,               -- JSON: the outcome of undoing it
    interrupted_during TEXT,               -- run or rollback
    command_pid        INTEGER,            -- the process group of its command (its leader's pid) ...
    command_start      TEXT,               -- ... and the leader's start time, while it may run
    PRIMARY KEY (workflow, idx),
    UNIQUE (workflow, name)
) WITHOUT ROWID;
CREATE INDEX workflow_steps_op ON workflow_steps(op) WHERE op IS NOT NULL;
"""

# The store's policy (swarmctl/policy.py; kept by swarmctl/store/policies.py): one row per
# version, `op` the op that made it (a policy_set, or the undo that took one back), `text` the
# policy's TOML (null: no policy, after the undo of the first). The newest row is in force.
# Not in SCHEMA: a store gets it when its first policy is set, which raises its format to
# POLICY_FORMAT (swarmctl/store/migrate.py), so that an older swarmctl refuses the store rather
# than ignore its policy. The same text for both backends.
POLICY_FORMAT = FORMAT_VERSION + 1  # always the next one: see migrate.raise_for_policy
POLICIES = """
CREATE TABLE IF NOT EXISTS policies (
    op   BIGINT PRIMARY KEY REFERENCES ops(op),
    text TEXT
)"""



def readable_format(found: int) -> bool:
    """Whether this swarmctl reads a store of format `found`: every format up to FORMAT_VERSION,
    and POLICY_FORMAT (the one above it)."""
    return found <= POLICY_FORMAT
