"""The typed rows the reads of queries.py return (txs.py and workflows.py declare their own):
NamedTuples, so a caller names each field, and a row unpacks as the tuple it was.

No `from __future__ import annotations` here: typing.NamedTuple compiles each field's
annotation given as text, which makes defining these rows, at every start, a third dearer."""

from typing import Any, NamedTuple


class MoveRow(NamedTuple):
    """One ref move of an op: `old` None, the op created the ref; `new` None, it deleted it."""

    name: str
    old: str | None
    new: str | None


class OpHead(NamedTuple):
    """The columns of an op's own row (what its hash covers, with its moves and changesets)."""

    op: int
    kind: str
    actor: str
    at: str
    description: str
    undoes: int | None


class OpRow(NamedTuple):
    """A whole op record: the fields of tools/op.OpRecord, in the order `op log` prints them."""

    op: int
    kind: str
    actor: str
    at: str
    description: str
    ref_moves: list[MoveRow]
    changesets: list[str]  # the ids of the changesets it created
    undoes: int | None
    undone_by: int | None  # the undo (or revert) that takes it back now
    hash: str | None  # its link in the hash chain (None in a store of format 1)

    def json(self) -> dict[str, Any]:
        """The record in its JSON form (an OpRecord's, as `op log` prints it)."""
        # Spelled out: NamedTuple._asdict costs a page of 10,000 records three times as much.
        op, kind, actor, at, description, moves, changesets, undoes, undone_by, digest = self
        return {
            "op": op, "kind": kind, "actor": actor, "at": at, "description": description,
            "ref_moves": [{"name": name, "old": old, "new": new} for name, old, new in moves],
            "changesets": changesets, "undoes": undoes, "undone_by": undone_by, "hash": digest,
        }


class RefRow(NamedTuple):
    name: str
    target: str  # the changeset it names
    op: int  # the op that last moved it


class ChangesetRow(NamedTuple):
    id: str
    op: int
    message: str
    actor: str
    at: str
    parents: list[str]
    metadata: dict[str, Any]
    files: dict[str, str]  # path -> blob id


class OpBrief(NamedTuple):
    """An op as shell completion shows it."""

    op: int
    actor: str
    description: str


class ChangesetBrief(NamedTuple):
    """A changeset as shell completion shows it."""

    id: str
    message: str


class ActorRow(NamedTuple):
    actor: str
    newest_op: int


def strings(value: object, shape: type) -> bool:
    """`value` is a list of strings (`shape` list), or a dict of strings to strings (dict): a
    changeset's parents, and its metadata and files, as every swarmctl writes them."""
    if shape is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
