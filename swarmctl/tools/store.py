"""Making stores: `init`, `demo` (a store with a short, realistic history to try things on), and
`store copy` (a whole store into a new one, local or on a server)."""

from swarmctl.context import Context
from swarmctl.spec import Annotations, Cli, Tool, arg, request_type, result_type
from swarmctl.store import Store, locate
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
    """Create a store in PATH: a directory holding one SQLite database (WAL mode,
    synchronous=FULL). Its first op (op 1, kind `init`) records who made it."""
    actor = ctx.require_actor()
    store = ctx.adopt(Store.create(locate(req.path, ctx.cwd), actor))
    return InitResult(repo=store.repo, op=1, format=FORMAT_VERSION)


DEMO_HUMAN = "human/alice"
DEMO_AGENT = "agent/worker-17"


def demo(ctx: Context, req: DemoReq) -> DemoResult:
    """Create a store in PATH with a short history by two actors (a person and an agent) and
    show its op log. Op 6 is the agent moving release/v1: try `op undo 6` on it."""
    store = ctx.adopt(Store.create(locate(req.path, ctx.cwd), DEMO_HUMAN))
    human = Context(repo=store.repo, actor=DEMO_HUMAN, cwd=ctx.cwd, readonly=False, _store=store)
    agent = Context(repo=store.repo, actor=DEMO_AGENT, cwd=ctx.cwd, readonly=False, _store=store)
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
    log = op_log(ctx, OpLogReq(limit=20))
    where = store.repo
    return DemoResult(
        repo=where,
        ops=log.ops,
        next=[
            f"swarmctl --repo {where} -o table op log",
            f"swarmctl --repo {where} --as {DEMO_AGENT} op undo 6 --dry-run",
            f"swarmctl --repo {where} --as {DEMO_AGENT} op undo 6",
        ],
    )


def store_copy(ctx: Context, req: StoreCopyReq) -> StoreCopyResult:
    """Copy a whole store into a new one, between the two kinds (a local directory, a
    PostgreSQL URL) or within one: ops with their numbers and times, refs, changesets and their
    files, transactions, workflows with their steps. The copy's `op log` is the source's. The
    destination must not hold a store yet; it is written in one transaction, all or nothing.
    With `--fence` the source is read under its write lock and marked as moved: later writes to
    it are refused with E_STATE naming DST, reads keep working. This is how a team moves a store
    to a database server when it outgrows one machine."""
    from swarmctl.store.copy import TABLES, copy_store

    done = {"n": 0}

    def progress(table: str, rows: int) -> None:
        if ctx.progress is not None:
            position = TABLES.index(table) + 1
            ctx.progress({"phase": "copy", "workflow": "store copy", "count": len(TABLES), "index": position,
                          "step": table, "event": "done", "status": f"{rows} rows", "position": position})
        done["n"] = rows

    src, dst, copied = copy_store(
        locate(req.source, ctx.cwd), locate(req.destination, ctx.cwd),
        actor=ctx.actor or "system/store-copy", fence=req.fence, progress=progress,
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


_CREATES = Annotations(read_only=False, destructive=False, idempotent=False)

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
    mcp=False,
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
    mcp=False,
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
    mcp=False,
)

TOOLS = [INIT, DEMO, STORE_COPY]
