"""Stores as a whole: copy one into a new one, local or on a database server; check it; upgrade its format.

This module makes stores, `init` and `demo` (a store with a short, realistic history to try
things on), and `store copy` (a whole store into a new one, local or on a server); and looks
after one: `store check` (the store's full check, read-only) and `store upgrade` (bring a store
made by an older swarmctl to this one's format). The first paragraph here is `swarmctl store
--help`'s.

Why this module is long: it holds five tools of one lifecycle (`init`, `demo`, `store copy`,
`store check`, `store upgrade`), each with its request, result and registry entry, in the order
the registry lists them; split, that order would live in two places.
"""

import shlex
import typing

from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import READ, Annotations, Cli, Tool, arg, request_type, result_type, Example
from swarmctl.store import Store, Writer
from swarmctl.store.schema import FORMAT_VERSION
from swarmctl.tools.changeset import ChangesetCreateReq, changeset_create
from swarmctl.tools.op import OpLogReq, OpRecord, op_log
from swarmctl.tools.ref import RefSetReq, ref_set


@result_type
class InitResult:
    repo: str
    op: int
    format: int


@result_type
class DemoResult:
    repo: str
    ops: list[OpRecord]
    next: list[str]


@result_type
class StoreCopyResult:
    source: str
    destination: str
    ops: int
    refs: int
    changesets: int
    blobs: int
    txs: int
    workflows: int
    fenced: bool


@request_type
class StoreCopyReq:
    source: str = arg(
        description="The store to copy: a path, or a postgresql:// URL.",
        min_length=1,
        cli=Cli(positional=True, metavar="SRC"),
    )
    destination: str = arg(
        description="Where to make the copy (no store may be there yet): a path, or a postgresql:// URL.",
        min_length=1,
        cli=Cli(positional=True, metavar="DST"),
    )
    fence: bool = arg(
        False,
        description="Also mark the source as moved: later writes to it are refused (E_STATE, naming DST); reads go on.",
    )


@request_type
class InitReq:
    path: str = arg(
        description="The directory to make a store in (created if missing).",
        min_length=1,
        cli=Cli(positional=True, metavar="PATH"),
    )


@request_type
class DemoReq:
    path: str = arg(
        "demo-store",
        description="The directory for the demo store (created; must not be a store yet).",
        min_length=1,
        cli=Cli(positional=True, metavar="PATH"),
    )


def init(ctx: Context, req: InitReq) -> InitResult:
    """Create a store in PATH: a directory holding one SQLite database (WAL mode, each commit
    synced to the disk before it is reported). Its first op (op 1, kind `init`) records who
    made it."""
    actor = ctx.require_actor()
    store = ctx.adopt(Store.create(ctx.locate(req.path), actor))
    return InitResult(repo=store.repo, op=1, format=FORMAT_VERSION)


DEMO_HUMAN = "human/alice"
DEMO_AGENT = "agent/worker-17"


def demo(ctx: Context, req: DemoReq) -> DemoResult:
    """Create a store in PATH with a short history by two actors (a person and an agent) and
    show its op log. Op 6 is the agent moving release/v1: try `op undo 6` on it."""
    store = ctx.adopt(Store.create(ctx.locate(req.path), DEMO_HUMAN))
    try:
        _demo_history(Context(repo=store.repo, actor=DEMO_HUMAN, cwd=ctx.cwd, readonly=False, _store=store),
                      Context(repo=store.repo, actor=DEMO_AGENT, cwd=ctx.cwd, readonly=False, _store=store))
    except SwarmError as exc:  # each op is its own write: the store is there, with the ops before this one
        exc.hint = (f"The demo store at {store.repo} was made, but its history stopped short: "
                    "remove it, then run `swarmctl demo` again once the cause is gone.")
        exc.details.setdefault("repo", store.repo)
        raise
    log = op_log(ctx, OpLogReq(limit=20))
    where = store.repo
    return DemoResult(
        repo=where,
        ops=log.ops,
        next=[shlex.join(["swarmctl", "--repo", where, *words]) for words in (  # the path quoted as a shell needs it
            ["-o", "table", "op", "log"], ["--as", DEMO_AGENT, "op", "undo", "6", "--dry-run"], ["--as", DEMO_AGENT, "op", "undo", "6"])],
    )


def _demo_history(human: Context, agent: Context) -> None:
    """Ops 2-6 of the demo: a person's and an agent's changesets and ref moves."""
    base = changeset_create(
        human,
        ChangesetCreateReq(message="Initial import", files={"README.md": "# demo\n"}, metadata={"ticket": "OPS-1"}, ref="main"),
    ).changeset.id
    changeset_create(
        agent,
        ChangesetCreateReq(message="Add release notes", files={"NOTES.md": "v1: first release\n"}, ref="main"),
    )
    ref_set(human, RefSetReq(name="release/v1", target=base, create=True))
    fix = changeset_create(
        agent,
        ChangesetCreateReq(message="Fix flaky deploy check", metadata={"ticket": "OPS-7"}, ref="main"),
    ).changeset.id
    ref_set(agent, RefSetReq(name="release/v1", target=fix, expect=base))


def store_copy(ctx: Context, req: StoreCopyReq) -> StoreCopyResult:
    """Copy a whole store into a new one, between the two kinds (a local directory, a
    PostgreSQL URL) or within one: ops with their numbers and times, refs, changesets and their
    files, transactions, workflows with their steps. The copy's `op log` is the source's. The
    destination must not hold a store yet; it is written in one transaction, all or nothing.
    With `--fence` the source is read under its write lock and marked as moved: later writes to
    it are refused with E_STATE naming DST, reads keep working; a fence changes the source, so
    it needs --as, as a write does. This is how a team moves a store to a database server
    when it outgrows one machine."""
    from swarmctl.store.copy import TABLES, copy_store

    # A fence stops every writer of the source: made as someone, never as a name made up here
    # (which a policy's admin glob could match). A plain copy changes no store but the new one.
    actor = ctx.require_actor("a fence (--fence) changes the source store") if req.fence else ctx.actor

    done = {"n": 0}

    def progress(table: str, rows: int) -> None:
        if ctx.progress is not None:
            position = TABLES.index(table) + 1
            ctx.progress({"phase": "copy", "workflow": "store copy", "count": len(TABLES), "index": position,
                          "step": table, "event": "done", "status": f"{rows} rows", "position": position})
        done["n"] = rows

    def may_fence(w: "Writer") -> None:  # a fence stops every writer's writes: under a policy, admins only
        from swarmctl import policy as rules
        rules.refuse(rules.may_admin(w.policy, w.actor, "fence the store (store copy --fence)"))

    src, dst, copied = copy_store(
        ctx.locate(req.source), ctx.locate(req.destination),
        actor=actor or "system/store-copy", fence=req.fence, progress=progress, may_fence=may_fence,
    )
    ctx.adopt(dst)
    src.close()
    rows = copied.rows
    return StoreCopyResult(
        source=src.repo,
        destination=dst.repo,
        ops=rows["ops"],
        refs=rows["refs"],
        changesets=rows["changesets"],
        blobs=rows["blobs"],
        txs=rows["txs"],
        workflows=rows["workflows"],
        fenced=req.fence,
    )


# --- store check, store upgrade ------------------------------------------------------------------


@request_type
class StoreCheckReq:
    """No arguments: the store is the one --repo names (or the one found from here)."""


@request_type
class StoreUpgradeReq:
    """No arguments: the store is the one --repo names (or the one found from here)."""


@result_type
class CheckProblem:
    code: str
    message: str
    op: int | None = None
    ref: str | None = None


@result_type
class StoreHead:
    op: int
    at: str
    hash: str | None


@result_type
class TimeOutOfOrder:
    op: int
    at: str
    previous_at: str
    recorded: bool


@result_type
class StoreCheckResult:
    problems: list[CheckProblem]
    head: StoreHead | None
    format: int
    times_out_of_order: list[TimeOutOfOrder]


@result_type
class StoreUpgradeResult:
    format: int
    upgraded_from: int | None
    op: int | None


def store_check(ctx: Context, req: StoreCheckReq) -> StoreCheckResult:
    """Check the whole store, reading only: SQLite's integrity check, the op log against the
    refs (every ref move replayed as a compare-and-swap), the op log's hash chain, op numbers
    without gaps, each changeset's id against its content and each file's against its bytes,
    the workflow rows, refs named like changeset ids, and op times (those out of order are
    listed; after a clock that ran ahead that is expected, else it is a problem). A sound store
    gives `problems: []` and `head`, the newest op and its hash: record it elsewhere (a CI log,
    a ticket) to catch a rewrite of the history later. Any problem is E_STORE_CORRUPT (exit 9)
    with `details.problems`, each with a `code` and a `message`."""

    try:
        return _check(ctx)
    except SwarmError as exc:  # the store cannot even be opened or read: that is the problem
        if exc.code == "E_STORE_CORRUPT" and "problems" not in exc.details:
            exc.details = {**exc.details, "problems": [{"code": "unreadable", "message": exc.message}]}
        raise


def _check(ctx: Context) -> StoreCheckResult:
    from swarmctl.store import check, errors, queries
    from swarmctl.tools.workflow.models import StepStatus, WorkflowState

    store = ctx.store()
    with store.read() as conn:
        states, statuses = typing.get_args(WorkflowState), typing.get_args(StepStatus)
        problems = check.check_store(conn, integrity=True, workflow_states=states, step_statuses=statuses)
        head = _guarded(lambda: _head(conn, queries), problems)
        late = _guarded(lambda: check.times_out_of_order(conn), problems) or []
        found = _guarded(lambda: queries.stored_format(conn), problems)
    if store.path is not None and (side := errors.blame_files(store.path)) and side.code == "E_STORE_CORRUPT":
        problems.append(errors.Problem("side_files", side.message))  # a -wal or -shm every write would refuse
    result = StoreCheckResult(
        problems=[CheckProblem(**p.to_dict()) for p in problems], head=head, format=found or 0,
        times_out_of_order=[TimeOutOfOrder(**t._asdict()) for t in late],
    )
    if problems:
        from swarmctl.spec import plain

        shown = plain(result)
        raise SwarmError(
            "E_STORE_CORRUPT",
            f"the store fails {len(problems)} of its checks: {problems[0].message}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            details=shown,
            hint="Writes are refused where they depend on what is damaged. Restore the store from a "
            "backup, or repair what each problem names; then run `swarmctl store check` again.",
        )
    return result


def _guarded(read: typing.Callable[[], typing.Any], problems: list) -> typing.Any:
    from swarmctl.store.check import Problem

    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - a damaged store gets a problem, not a traceback (StoreDamaged: its own)
        problems += [p for p in getattr(exc, "problems", [Problem("unreadable", f"{type(exc).__name__}: {exc}")]) if p not in problems]
        return None


def _head(conn, queries) -> StoreHead | None:
    newest = queries.newest_op(conn)
    if newest is None:
        return None
    from swarmctl.store import records

    record = records.op_records(conn, [newest])[0]
    return StoreHead(op=newest, at=record.at, hash=record.hash)


def store_upgrade(ctx: Context, req: StoreUpgradeReq) -> StoreUpgradeResult:
    """Bring a store made by an older swarmctl to this one's format, in one transaction, as one
    op (kind `store_upgrade`). An older store is read as it is and upgraded by its first write
    anyway; this does it now, on purpose. A store already of this format: nothing is written
    (`upgraded_from` and `op` are null). A store whose tables are not those of the format it
    records is E_STORE_CORRUPT, and not touched."""
    from swarmctl.store import migrate

    actor, store = ctx.require_actor(), ctx.store()
    if store.format >= FORMAT_VERSION:
        with store.read() as conn:  # its tables checked as an upgrade checks them: a store of none was "current"
            migrate.require_tables(conn)
        return StoreUpgradeResult(format=store.format, upgraded_from=None, op=None)
    with store.write(actor) as w:  # the format as found under the write lock: another may have upgraded it
        op = None if (found := w.upgraded_from) is None else w.append_op("store_upgrade", f"upgrade the store from format {found} to {FORMAT_VERSION}")
    return StoreUpgradeResult(format=FORMAT_VERSION, upgraded_from=found, op=op)


STORE_CHECK = Tool(
    name="store_check",
    cli=("store", "check"),
    title="Check a store",
    summary="Check the whole store (read-only): refs against the op log, the hash chain, ids, workflows.",
    request=StoreCheckReq,
    result=StoreCheckResult,
    run=store_check,
    annotations=READ,
    mutates=False,
)

STORE_UPGRADE = Tool(
    name="store_upgrade",
    cli=("store", "upgrade"),
    title="Upgrade a store",
    summary="Bring a store made by an older swarmctl to this one's format.",
    request=StoreUpgradeReq,
    result=StoreUpgradeResult,
    run=store_upgrade,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    mutates=True,
)


_CREATES = Annotations(read_only=False, destructive=False, idempotent=False)
_MAKES_A_STORE = "it makes a store, and a server serves one store"  # why these are not MCP tools (Tool.cli_only)

INIT = Tool(
    name="init",
    cli=("init",),
    title="Create a store",
    summary="Create a store in a directory.",
    request=InitReq,
    result=InitResult,
    run=init,
    annotations=_CREATES,
    mutates=True,
    needs_store=False,
    cli_only=_MAKES_A_STORE,
)

DEMO = Tool(
    name="demo",
    cli=("demo",),
    title="Create a demo store",
    summary="Create a store with a short history and show its op log.",
    request=DemoReq,
    result=DemoResult,
    run=demo,
    annotations=_CREATES,
    mutates=False,  # it acts as the demo's own actors, so it needs no --as
    needs_store=False,
    cli_only=_MAKES_A_STORE,
)

STORE_COPY = Tool(
    name="store_copy",
    cli=("store", "copy"),
    title="Copy a store",
    summary="Copy a whole store into a new one (local or PostgreSQL).",
    request=StoreCopyReq,
    result=StoreCopyResult,
    run=store_copy,
    annotations=_CREATES,
    mutates=False,  # it appends no op; --fence marks the source without one
    needs_store=False,
    cli_only=_MAKES_A_STORE,
)

TOOLS = [INIT, DEMO, STORE_COPY, STORE_CHECK, STORE_UPGRADE]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "init": (Example(("init", "store"), {"path": "store"}, caption="Make an empty store in ./store.", store=False),),
    "demo": (
        Example(("demo", "demo-store"), {"path": "demo-store"}, caption="Make a store with a short history to try things on.", store=False),
    ),
    "store_copy": (
        Example(
            ("store", "copy", "store", "store-copy"),
            {"source": "store", "destination": "store-copy"},
            caption="Copy the store in ./store into a new one in ./store-copy.",
        ),
    ),
    "store_check": (Example(("store", "check"), {}, caption="Check the whole store (read-only): no problems, exit 0."),),
    # A demo store is of this format already: nothing to do.
    "store_upgrade": (Example(("store", "upgrade"), {}, caption="Bring a store made by an older swarmctl to this one's format."),),
}
