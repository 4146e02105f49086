"""The store's policy: `policy show`, `policy set` and `policy check`.

The rules are swarmctl/policy.py's, the versions swarmctl/store/policies.py's. Setting a policy
is an op (kind `policy_set`), so the op log says who changed it and `op undo` takes it back
(tools/undo.py). `policy check` runs the call it is asked about as a rehearsal: the very call,
in a transaction that is rolled back, so its answer is the real call's by construction.
"""

from __future__ import annotations

import json
from typing import Any

from swarmctl import names
from swarmctl import policy as rules
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations, Call, Cli, Example, Tool, arg, request_type, result_type
from swarmctl.store import Store, policies, queries, records
from swarmctl.tools.common import ADMINS_POLICY, PROTECT_POLICY, RELEASE_POLICY, SET_AGENTS, SET_PROTECT


@result_type
class PolicyShowResult:
    policy: str | None  # the TOML text in force; null: the store has no policy
    version: int | None  # the op that made it so (null: never set); `op undo` of it takes it back
    actor: str | None  # who set it
    at: str | None


@result_type
class PolicySetResult:
    version: int | None  # the op that set it; null: it was in force already, nothing written
    previous: int | None  # the version it replaced (null: none)
    op: int | None


@result_type
class PolicyCheckResult:
    allowed: bool
    actor: str
    tool: str
    rule: str | None  # the rule that refuses it (null: none does)
    message: str | None  # the refusal, as the call would say it
    hint: str | None  # who may


@request_type
class PolicyShowReq:
    pass


@request_type
class PolicySetReq:
    policy: str = arg(
        description="The policy as TOML text (CLI: FILE, the file holding it, or - for stdin).",
        cli=Cli(positional=True, metavar="FILE", parse="text"),
    )


@request_type
class PolicyCheckReq:
    actor: str = arg(description="The actor (kind/name) who would make the call.", cli=Cli(complete="actors"))
    tool: str = arg(description="The tool (its MCP name, e.g. ref_set).", cli=Cli(positional=True, metavar="TOOL"))
    arguments: dict[str, Any] = arg(
        default_factory=dict,
        description="The call's arguments, as its JSON object (CLI: JSON text; default {}).",
        cli=Cli(positional=True, metavar="JSON", parse="json"),
    )


def policy_show(ctx: Context, req: PolicyShowReq) -> PolicyShowResult:
    """Show the store's policy in force (its TOML text) and the op that set it. A store without
    a policy shows null: every actor may do everything, as in a store before policies."""
    store = ctx.store()
    with store.read() as conn:
        found = policies.current_version(conn)
        if found is None:
            return PolicyShowResult(policy=None, version=None, actor=None, at=None)
        op = records.op_records(conn, [found.op])[0]
    return PolicyShowResult(policy=found.text, version=found.op, actor=op.actor, at=op.at)


# Every write reads the policy in force and checks its moves against it, holding the store's
# lock: a policy of 200,000 rules (10 MB) made each write take 13 s. 64 KiB is about 1,300
# [[protect]] entries, read and checked in a few tens of milliseconds.
MAX_POLICY_BYTES = 64 * 1024


def policy_set(ctx: Context, req: PolicySetReq) -> PolicySetResult:
    """Make the TOML text the store's policy, as one op (kind `policy_set`). Only an admin (the
    policy in force's `admins`; while none is set, anyone) may: else E_FORBIDDEN. A policy that
    does not parse, or has a key this swarmctl does not know, is E_INVALID_ARG (a typo must not
    silently open a door), and so is `admins = []`, which no one could ever take back, and admins
    that no actor (kind/name) can match, a policy over 64 KiB, and an empty one (a comment says
    that no rule is meant: an empty stdin must not open every door). Setting
    the policy in force again writes nothing (`op` null). The store's first policy raises its
    format to 5, so an older swarmctl refuses the store rather than ignore its policy. `op undo`
    of the op restores the policy before it.

    The keys, each optional, most of them globs of actors (`*` within a `/` part, `**` across):
    `admins`; `[[protect]]` `refs` and the `actors` that may move them; `[undo] others` (who may
    take back another's op); `[approve] actors` and `self`; `[workflow] others`; `[run] actors`
    and `definitions` (files); `[roles]` (PostgreSQL roles to the actors each may act as)."""
    actor = ctx.require_actor()
    if not req.policy.strip():  # a closed stdin, a file not yet written, a failed download
        raise SwarmError(
            "E_INVALID_ARG",
            "the policy is empty: it would open every door of the store to everyone, as if it had no policy",
            details={"key": "policy", "size": len(req.policy)},
            hint="Nothing was written. Give the policy's TOML; a policy with no rule on purpose says so in a "
            "comment. `swarmctl op undo` of the store's first policy_set leaves it without one.",
        )
    admins = rules.parse(req.policy).admins  # before anything is opened: a bad file says so first
    size = len(req.policy.encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_BYTES:  # every write reads it, holding the lock (what does not parse says so first)
        raise SwarmError(
            "E_INVALID_ARG",
            f"the policy is {size} bytes; a policy may be at most {MAX_POLICY_BYTES} bytes",
            details={"key": "policy", "size": size, "limit": MAX_POLICY_BYTES},
            hint="A policy holds rules, read by every write: name refs and actors by globs "
            "(`release/*`, `agent/**`) rather than one entry each.",
        )
    if admins is not None and not any(rules.may_match_an_actor(glob) for glob in admins):
        said = "admins = []" if not admins else f"admins = {json.dumps(list(admins))}, which matches no actor (kind/name),"
        raise SwarmError(
            "E_INVALID_ARG",
            f"{said} would let no one change this policy again, nor undo this op, nor make or "
            "revoke a token: a mistake no one could take back",
            details={"key": "admins", "admins": list(admins)},
            hint="Name at least one admin as kind/name or a glob of such (e.g. admins = [\"human/*\"]; "
            "`*` stops at `/`, `**` does not), or leave admins out: anyone may then change the policy.",
        )
    store = ctx.store()
    with store.write(actor) as w:
        rules.refuse(rules.may_admin(w.policy, actor, "change the policy"))
        found = policies.current_version(w.conn)
        previous = found.op if found is not None and found.text is not None else None
        if found is not None and found.text == req.policy:
            return PolicySetResult(version=previous, previous=previous, op=None)
        op = w.append_op("policy_set", _description(found, req.policy))
        policies.record(w, op, req.policy)
    return PolicySetResult(version=op, previous=previous, op=op)


def _description(found: policies.Version | None, text: str) -> str:
    lines = len(text.splitlines())
    what = "set the policy" if found is None or found.text is None else f"replace the policy of op {found.op}"
    return f"{what} ({lines} line{'s' if lines != 1 else ''})"


# Calls `policy check` rehearses: their every effect is inside the store, so running them in a
# transaction that is rolled back is the real call minus its commit.
REHEARSED = frozenset({
    "changeset_create", "ref_set", "ref_delete", "undo", "op_revert", "op_restore", "store_upgrade",
    "tx_begin", "tx_set", "tx_delete", "tx_undo", "tx_redo", "tx_commit", "tx_rollback", "tx_config",
    "policy_set", "token_create", "token_revoke",
})


def policy_check(ctx: Context, req: PolicyCheckReq) -> PolicyCheckResult:
    """Say whether the store's policy lets ACTOR make the call TOOL JSON, and by which rule it
    would refuse, writing nothing. A call that only writes to the store is rehearsed: run as
    ACTOR in a transaction that is rolled back, so the answer is what the call itself would say
    now. A workflow call is asked of the rules that concern it ([run], [approve], [workflow]),
    without running anything. Reads are open to everyone. A call that would fail for another
    reason (a compare-and-swap conflict, a missing ref) is still `allowed`: the policy does not
    forbid it. An unknown tool, or one this cannot predict (`init`, `demo`, `store copy`), is
    E_INVALID_ARG."""
    from swarmctl import arguments
    from swarmctl.tools.workflow import policy_refusal

    actor = names.check_actor(req.actor)
    tool = ctx.tools().get(req.tool) if ctx.tools else None
    # `demo` and `store copy` write no store the policy holds (a new one): no read either.
    if tool is None or tool.name in ("demo", "store_copy") or not (
        not tool.mutates or tool.name in REHEARSED or tool.name.startswith("workflow_")
    ):
        raise SwarmError(
            "E_INVALID_ARG",
            f"policy check cannot predict {req.tool!r}",
            details={"tool": req.tool},
            hint="Name a tool that writes to the store (e.g. ref_set, undo, workflow_run); reads are open to everyone.",
        )
    request = arguments.read_request(tool, req.arguments).request
    ctx.store()  # the store asked about must exist (and meta.repo names it)
    if not tool.mutates:
        refusal = None
    elif tool.name in REHEARSED:
        refusal = _rehearse(ctx, tool, request, actor)
    else:
        refusal = policy_refusal(ctx, tool.name, request, actor)
    return PolicyCheckResult(
        allowed=refusal is None,
        actor=actor,
        tool=tool.name,
        rule=refusal.details["rule"] if refusal else None,
        message=refusal.message if refusal else None,
        hint=refusal.hint if refusal else None,
    )


def _rehearse(ctx: Context, tool: Tool, request: Any, actor: str) -> SwarmError | None:
    """Run the call as `actor` on a store whose transactions roll back instead of committing;
    the refusal of the policy it met, if any."""
    store = Store.open(ctx.target())
    store.rehearsing = True
    trial = Context(repo=ctx.repo, actor=actor, cwd=ctx.cwd, readonly=False, _store=store)
    try:
        tool.run(trial, request)
    except SwarmError as exc:
        if exc.code == "E_FORBIDDEN" and "rule" in exc.details:
            return exc
    finally:
        trial.close()
    return None


_WRITE = Annotations(read_only=False, destructive=True, idempotent=True)

POLICY_SHOW = Tool(
    name="policy_show",
    cli=("policy", "show"),
    title="Show the policy",
    summary="Show the store's policy (who may do what).",
    request=PolicyShowReq,
    result=PolicyShowResult,
    run=policy_show,
    annotations=READ,
    mutates=False,
)
POLICY_SET = Tool(
    name="policy_set",
    cli=("policy", "set"),
    title="Set the policy",
    summary="Make a TOML file the store's policy (admins only).",
    request=PolicySetReq,
    result=PolicySetResult,
    run=policy_set,
    annotations=_WRITE,
    mutates=True,
)
POLICY_CHECK = Tool(
    name="policy_check",
    cli=("policy", "check"),
    title="Check a call against the policy",
    summary="Say whether the policy lets an actor make a call, writing nothing.",
    request=PolicyCheckReq,
    result=PolicyCheckResult,
    run=policy_check,
    annotations=READ,
    mutates=False,
)

TOOLS = [POLICY_SHOW, POLICY_SET, POLICY_CHECK]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
_SET_RELEASE = Call("policy_set", {"policy": RELEASE_POLICY})
EXAMPLES = {
    # RELEASE_POLICY protects release/* for people (made op 7 of the demo store).
    "policy_set": (
        Example(
            ("policy", "set", "policy.toml"),
            {"policy": RELEASE_POLICY},
            caption="Set the store's policy from policy.toml (an op: `op undo` takes it back).",
            files={"policy.toml": RELEASE_POLICY},
        ),
        Example(("policy", "set", "policy.toml"), {"policy": PROTECT_POLICY}, files={"policy.toml": PROTECT_POLICY}),
        Example(  # admins: only people may change it now
            ("policy", "set", "policy.toml"),
            {"policy": PROTECT_POLICY},
            outcome="E_FORBIDDEN",
            setup=(Call("policy_set", {"policy": ADMINS_POLICY}),),
            files={"policy.toml": PROTECT_POLICY},
        ),
        # admins names agents
        Example(("policy", "set", "policy.toml"), {"policy": PROTECT_POLICY}, setup=(SET_AGENTS,), files={"policy.toml": PROTECT_POLICY}),
    ),
    "policy_show": (
        Example(("policy", "show"), {}, caption="Show the store's policy.", setup=(_SET_RELEASE,)),
        Example(("policy", "show"), {}, setup=(SET_PROTECT,)),
    ),
    "policy_check": (
        Example(
            ("policy", "check", "--actor", "agent/worker-17", "ref_set", '{"name": "release/v1", "target": "main"}'),
            {"actor": "agent/worker-17", "tool": "ref_set", "arguments": {"name": "release/v1", "target": "main"}},
            caption="Would the policy let agent/worker-17 move release/v1? (Runs nothing.)",
            setup=(_SET_RELEASE,),
        ),
        Example(  # refused by protect[0]
            ("policy", "check", "--actor", "agent/worker-17", "ref_set", '{"name": "main", "target": "release/v1"}'),
            {"actor": "agent/worker-17", "tool": "ref_set", "arguments": {"name": "main", "target": "release/v1"}},
            setup=(SET_PROTECT,),
        ),
        Example(  # allowed
            ("policy", "check", "--actor", "human/alice", "undo", '{"op": 6}'),
            {"actor": "human/alice", "tool": "undo", "arguments": {"op": 6}},
            setup=(SET_PROTECT,),
        ),
    ),
}
