"""Changesets: immutable, content-addressed, never removed."""

from swarmctl import names
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Annotations, Cli, READ, Tool, arg, request_type, result_type, Example
from swarmctl.store import Conn, Move, queries
from swarmctl.store import changesets as ids
from swarmctl.tools.common import RefMove, resolve_changeset

MESSAGE_MAX = 64 * 1024
FILE_MAX = 16 * 1024 * 1024
META_KEY_MAX = 128
META_VALUE_MAX = 4096


@result_type
class FileEntry:
    path: str
    blob: str
    size: int


@result_type
class ChangesetRecord:
    id: str
    message: str
    parents: list[str]
    actor: str
    at: str
    metadata: dict[str, str]
    files: list[FileEntry]
    op: int


@result_type
class ChangesetCreateResult:
    changeset: ChangesetRecord
    op: int
    ref_moves: list[RefMove]


@request_type
class ChangesetCreateReq:
    """A new changeset, and optionally the ref to move to it in the same op."""

    message: str = arg(
        description="What the changeset is.", min_length=1, max_length=MESSAGE_MAX, cli=Cli(flags=("-m", "--message"))
    )
    parents: list[str] = arg(
        default_factory=list,
        description="Parent changeset ids (unique prefixes resolve). Default: what `ref` names, if it exists.",
        cli=Cli(flags=("--parent",), metavar="ID", complete="changesets"),
    )
    metadata: dict[str, str] = arg(
        default_factory=dict,
        description="A flat string map of metadata (CLI: --meta K=V, repeated).",
        cli=Cli(flags=("--meta",), metavar="K=V", parse="kv"),
    )
    files: dict[str, str] = arg(
        default_factory=dict,
        description="Files as path to UTF-8 text content, each stored once by content (CLI: --file PATH, repeated).",
        cli=Cli(flags=("--file",), metavar="PATH", parse="file"),
    )
    ref: str | None = arg(None, description="Also move this ref to the new changeset, in the same op.", cli=Cli(complete="refs"))


@request_type
class ChangesetShowReq:
    id: str = arg(
        description="The changeset id, any unique prefix of 4 or more hex digits, or a ref name.",
        cli=Cli(positional=True, metavar="ID", complete="changesets"),
    )


def _check_metadata(metadata: dict[str, str]) -> dict[str, str]:
    from swarmctl.secrets import is_secret_key

    for key, value in metadata.items():
        if is_secret_key(key):
            # Changesets are immutable and never removed: a secret put here could never be taken out.
            raise SwarmError(
                "E_INVALID_ARG",
                f"metadata {key!r} names a secret, and changesets are kept forever",
                details={"key": key},
                hint="Keep secrets out of changesets; refer to where the secret is kept instead.",
            )
        if not key or len(key) > META_KEY_MAX or len(value) > META_VALUE_MAX:
            raise SwarmError(
                "E_INVALID_ARG",
                f"metadata {key!r}: keys must be 1-{META_KEY_MAX} characters, values at most {META_VALUE_MAX}",
                details={"key": key},
            )
    return dict(sorted(metadata.items()))


def _check_path(path: str) -> str:
    """A file's path as the changeset keeps it: relative, '/' between components. A backslash
    is a character of a name, as on POSIX and in git (it was read as '/', so `x\\y` and `x/y`
    were one path and one file's content was dropped)."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in path:
        raise SwarmError(
            "E_INVALID_ARG",
            f"file path {path!r} must be relative, without '.', '..' or empty components",
            details={"path": path},
            hint="A file's path is its name in the changeset, e.g. docs/NOTES.md; with --file, run from "
            "the directory that holds it and give the path from there.",
        )
    return "/".join(parts)


def changeset_create(ctx: Context, req: ChangesetCreateReq) -> ChangesetCreateResult:
    """Create an immutable changeset (message, parents, metadata, files) and, with `--ref`,
    move that ref to it in the same op. Its id is a BLAKE3-256 content hash; file contents are
    stored once by content. Changesets are never removed, not even by `op undo`, so a metadata
    key that names a secret (token, password, ...) is refused with E_INVALID_ARG. A `--ref` the
    store's policy protects from the caller is E_FORBIDDEN (nothing is created)."""
    actor = ctx.require_actor()
    metadata = _check_metadata(req.metadata)
    files = {_check_path(p): content.encode("utf-8") for p, content in req.files.items()}
    for path, content in files.items():
        if len(content) > FILE_MAX:
            raise SwarmError("E_INVALID_ARG", f"{path} is larger than {FILE_MAX} bytes", details={"path": path})
    ref = names.check_new_ref_name(req.ref) if req.ref is not None else None
    store = ctx.store()
    with store.write(actor) as w:
        # A parent named twice (by id and by a ref, say) is one parent.
        parents = list(dict.fromkeys(resolve_changeset(ctx, w.conn, p) for p in req.parents))
        current = w.ref_target(ref) if ref else None
        if not req.parents and current:
            parents = [current]
        blobs = {path: ids.blob_id(content) for path, content in sorted(files.items())}
        cid = ids.changeset_id(
            message=req.message, parents=parents, actor=actor, at=w.at, metadata=metadata, files=blobs
        )
        moves = [Move(ref, current, cid)] if ref else []
        where = f" on {ref}" if ref else ""
        op = w.append_op("changeset_create", f"create changeset {names.short_id(cid)}{where}: {names.first_line(req.message)}", moves)
        # The same content by the same actor in the same millisecond is the same changeset (its
        # id is a hash of all of that): it exists already, and this op creates nothing new.
        if queries.changeset_row(w.conn, cid) is None:
            for path, content in files.items():
                w.insert_blob(blobs[path], content)
            w.insert_changeset(queries.ChangesetRow(cid, op, req.message, actor, w.at, parents, metadata, blobs))
        record = _record(w.conn, cid)
    return ChangesetCreateResult(changeset=record, op=op, ref_moves=[RefMove(m.name, m.old, m.new) for m in moves])


def _record(conn: Conn, cid: str) -> ChangesetRecord:
    row = queries.changeset_row(conn, cid)
    sizes = queries.blob_sizes(conn, row.files.values())
    files = [FileEntry(path, blob, sizes.get(blob, 0)) for path, blob in row.files.items()]
    return ChangesetRecord(**{**row._asdict(), "files": files})


def changeset_show(ctx: Context, req: ChangesetShowReq) -> ChangesetRecord:
    """Show a changeset: message, parents, actor, time, metadata, its files (path, blob id,
    size) and the op that created it. Accepts a full id, a unique prefix of 4+ hex digits, or a
    ref name."""
    store = ctx.store()
    with store.read() as conn:
        return _record(conn, resolve_changeset(ctx, conn, req.id))


CHANGESET_CREATE = Tool(
    name="changeset_create",
    cli=("changeset", "create"),
    title="Create a changeset",
    summary="Create an immutable changeset, optionally moving a ref to it.",
    request=ChangesetCreateReq,
    result=ChangesetCreateResult,
    run=changeset_create,
    # With `ref` it moves an existing ref: that overwrites what the ref named.
    annotations=Annotations(read_only=False, destructive=True, idempotent=False),
    mutates=True,
    group_commit=True,
)

CHANGESET_SHOW = Tool(
    name="changeset_show",
    cli=("changeset", "show"),
    title="Show a changeset",
    summary="Show one changeset.",
    request=ChangesetShowReq,
    result=ChangesetRecord,
    run=changeset_show,
    annotations=READ,
    mutates=False,
    group_commit=True,
)

TOOLS = [CHANGESET_CREATE, CHANGESET_SHOW]


# Examples (spec.Example): parity cases, the reference page's (the first), --help's and the man page's.
EXAMPLES = {
    "changeset_create": (
        Example(
            ("changeset", "create", "-m", "Hotfix the deploy check", "--ref", "main", "--meta", "ticket=OPS-9", "--file", "NOTES.md"),
            {"message": "Hotfix the deploy check", "ref": "main", "metadata": {"ticket": "OPS-9"}, "files": {"NOTES.md": "v1.0.1\n"}},
            caption="Record NOTES.md as a new changeset with a ticket number, and move main to it.",
            files={"NOTES.md": "v1.0.1\n"},
        ),
    ),
    "changeset_show": (Example(("changeset", "show", "release/v1"), {"id": "release/v1"}, caption="Show the changeset release/v1 names."),),
}
