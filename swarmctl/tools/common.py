"""What several tool areas share: naming an op or a changeset as a user types it, a ref move,
how a ref name or a changeset is given on the command line, and the words of the store's typed
errors (store/ names no command: its lookups are worded here, and `worded` gives the others
their hints where the runner makes the envelope)."""

import os
from typing import Annotated, Any, Callable, Literal

from swarmctl import names
from swarmctl.context import Context
from swarmctl.envelope import SwarmError
from swarmctl.spec import Call, Cli, Complete, Range, arg, result_type
from swarmctl.store import Ambiguous, CommitUnknown, Conn, NoDatabase, NoSchema, NoStore, NotFound, StoreDamaged, is_file, queries
from swarmctl.store.schema import DB_FILE

OpNumber = Annotated[int, Range(1)]
# An op as a user names it: its number, or "@" for the newest op by the calling actor.
OpSpec = OpNumber | Literal["@"]

# Positional arguments: a ref's name (NAME), and the changeset it is to name (TARGET).
REF_NAME_CLI = Cli(positional=True, metavar="NAME", complete="refs")
TARGET_CLI = Cli(positional=True, metavar="TARGET", complete="changesets")


def op_arg(what: str, complete: Complete = "ops") -> OpSpec:
    """The field of a request that names one op (`op show OP`, `op undo OP`); `complete`: which
    ops the shell offers for it (swarmctl/cli/complete.py)."""
    return arg(
        description=f"{what}: its number in the op log, or `@` for the newest op by the calling actor.",
        cli=Cli(positional=True, metavar="OP", complete=complete),
    )


@result_type
class RefMove:
    name: str
    old: str | None
    new: str | None


def resolve_op(ctx: Context, conn: Conn, spec: int | str) -> int:
    """An op number from what the user gave: a number that exists, or `@`."""
    if spec == "@":
        actor = ctx.require_actor("`@` names the newest op by the calling actor")
        op = queries.newest_op(conn, actor)
        if op is None:
            raise SwarmError(
                "E_NOT_FOUND",
                f"{actor} has no ops in this store, so `@` names nothing",
                details={"op": "@", "actor": actor},
                hint="`swarmctl op log --actor ACTOR` lists an actor's ops.",
            )
        ctx.resolve("@", op)
        return op
    if not queries.op_exists(conn, spec):
        newest = queries.newest_op(conn)
        raise SwarmError(
            "E_NOT_FOUND",
            f"no op {spec} in this store (the newest is {newest})",
            details={"op": spec, "newest": newest},
            hint="`swarmctl op log` lists the ops.",
        )
    return spec


def resolve_changeset(ctx: Context, conn: Conn, given: str) -> str:
    """A full changeset id from a ref name, an id, or a unique prefix of an id.

    A ref name never shadows a changeset id: hex text of 4 or more digits that is a unique id
    prefix names that changeset even where a ref of that name exists (a store made before
    such names were refused may hold one), and `meta.resolved` says it was read as the id
    and what the ref names. Otherwise a ref of that name, else an id prefix.
    """
    text = given.strip()
    target = queries.ref_target(conn, text) if names.ref_name_problem(text) is None else None
    # As written: `CAFE` is a name a ref may have (only lowercase hex reads as an id first), so
    # where a ref of that name exists it is the ref; with no such ref it is an id prefix.
    if target is not None and names.shadows_changeset_id(text):
        try:
            full = changeset_id(conn, text)
        except SwarmError:  # no such changeset, or an ambiguous prefix: it reads only as the ref
            full = target
        else:
            if full != target:
                ctx.resolved[given] = {"chosen": "changeset", "id": full, "ref_target": target}
                return full
    if target is not None:
        full = target
    elif names.is_hex(text.lower()):
        full = changeset_id(conn, text)  # raises: too short, ambiguous, not found
    else:
        raise SwarmError(
            "E_NOT_FOUND",
            f"{given!r} is neither a changeset id prefix nor an existing ref",
            details={"value": given},
            hint="Give a changeset id (or 4+ hex digits of one) or the name of a ref; `swarmctl ref list` lists refs.",
        )
    ctx.resolve(given, full)
    return full


def changeset_id(conn: Conn, prefix: str) -> str:
    """The full id of the one changeset whose id starts with `prefix` (at least 4 hex digits)."""
    text = prefix.strip().lower()
    if not names.is_hex(text) or len(text) > names.ID_HEX_LEN:
        raise SwarmError(
            "E_INVALID_ARG",
            f"{prefix!r} is not a changeset id or id prefix",
            details={"value": prefix},
            hint="A changeset id is 64 hex digits; any unique prefix of 4 or more resolves.",
        )
    if len(text) < names.MIN_PREFIX_LEN:
        raise SwarmError(
            "E_INVALID_ARG",
            f"changeset id prefix {prefix!r} is too short: at least {names.MIN_PREFIX_LEN} hex digits",
            details={"value": prefix, "min_length": names.MIN_PREFIX_LEN},
        )
    try:
        return queries.changeset_by_prefix(conn, text)
    except NotFound:
        raise SwarmError(
            "E_NOT_FOUND",
            f"no changeset {prefix}",
            details={"changeset": prefix},
            hint="`swarmctl op log` lists the changesets each op created.",
        ) from None
    except Ambiguous as exc:
        raise SwarmError(
            "E_INVALID_ARG",
            f"changeset prefix {prefix!r} is ambiguous",
            details={"value": prefix, "candidates": exc.candidates},
            hint="Give more hex digits of the id.",
        ) from None


# --- the hints of the store's typed errors that name a command ----------------------------------


def _no_database(error: NoDatabase) -> str:
    name = error.database or "(your user name)"
    return (
        f"Create the database first (`createdb {name}`, or `CREATE DATABASE {name};` in psql), "
        f"then `swarmctl --as ACTOR init {_quoted(error.shown)}`."
    )


def _quoted(url: str) -> str:
    """A store's URL as a shell takes it whole: its `&` and `?` would split or glob the line."""
    import shlex

    return shlex.quote(url)


def _no_store(error: NoStore) -> str:
    path = os.fspath(error.path)
    if os.path.basename(path) == DB_FILE and is_file(path):  # `--repo store/swarmops.db`
        import shlex

        return f"That is a store's database file: --repo takes the store's directory, {shlex.quote(os.path.dirname(path))}."
    return "Create one with `swarmctl --as ACTOR init PATH` (ACTOR as kind/name, e.g. human/alice), or point at one with --repo or SWARMCTL_REPO."


HINTS: dict[type[SwarmError], Callable[[Any], str]] = {
    NoStore: _no_store,
    NoDatabase: _no_database,
    NoSchema: lambda error: (
        f"Run `swarmctl --as ACTOR init {_quoted(error.shown)}` or the `swarmctl store copy` again: it fills the empty tables."
        if error.unfinished else f"Create one with `swarmctl --as ACTOR init {_quoted(error.shown)}`, or name the store's schema with ?schema=NAME."
    ),
    StoreDamaged: lambda error: "Nothing was written. `swarmctl store check` lists every problem; restore the "
    "store from a backup, or repair what it names.",
    CommitUnknown: lambda error: "The write may have committed: look before retrying (`swarmctl op log`, `ref show`). "
    "A retry with --expect (ref set, ref delete) cannot apply twice: it says where the ref is now.",
}


def worded(error: SwarmError) -> SwarmError:
    """`error`, with the hint of its type when it has none of its own."""
    hint = HINTS.get(type(error))
    if hint is not None and error.hint is None:
        error.hint = hint(error)
    return error


# --- policies the examples set (spec.Example; README: Policy) ---------------------------------
# agent/worker-17 may set one while no policy is set. RELEASE_POLICY (the reference pages')
# lets people change the policy and move release/*, and keeps agents from undoing others' ops;
# PROTECT_POLICY protects main and release/* for people, the same undo rule; ADMINS_POLICY lets
# only people change the policy; SELF_APPROVAL_POLICY keeps a workflow's creator from approving
# its own gate; RUNS_POLICY lets no one run a workflow from the working directory;
# RUN_ACTORS_POLICY, APPROVERS_POLICY and STEER_POLICY leave running workflows, approving gates
# and steering another's workflow to people. AGENTS_POLICY names agents in every rule (and
# people where the examples' human/alice acts): each rule in force, each allows agent/worker-17.
RELEASE_POLICY = """\
admins = ["human/*"]

[[protect]]
refs = ["release/*"]
actors = ["human/*", "ci/release"]

[undo]
others = ["human/*"]
"""
PROTECT_POLICY = """\
[[protect]]
refs = ["main", "release/*"]
actors = ["human/*"]

[undo]
others = ["human/*"]
"""
ADMINS_POLICY = 'admins = ["human/*"]\n'
SELF_APPROVAL_POLICY = "[approve]\nself = false\n"
RUNS_POLICY = '[run]\ndefinitions = ["/srv/workflows/**"]\n'
RUN_ACTORS_POLICY = '[run]\nactors = ["human/*"]\n'
APPROVERS_POLICY = '[approve]\nactors = ["human/*"]\n'
STEER_POLICY = '[workflow]\nothers = ["human/*"]\n'
AGENTS_POLICY = """\
admins = ["agent/*"]

[[protect]]
refs = ["main", "release/*"]
actors = ["agent/*", "human/*"]

[undo]
others = ["agent/*"]

[approve]
self = true
actors = ["agent/*"]

[workflow]
others = ["agent/*"]

[run]
actors = ["agent/*", "human/*"]
definitions = ["**"]
"""
SET_PROTECT = Call("policy_set", {"policy": PROTECT_POLICY})
SET_AGENTS = Call("policy_set", {"policy": AGENTS_POLICY})
