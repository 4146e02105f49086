"""The transaction tools' examples (spec.Example): parity cases, the reference page's (the
first of each), --help's and the man page's. On the demo store, agent/worker-17 cuts
release/v2 from main and retires release/v1, as one op."""

from __future__ import annotations

from swarmctl.spec import Call, Example

BEGIN = Call("tx_begin")
STAGE_V2 = Call("tx_set", {"name": "release/v2", "target": "main"})
DELETE_V1 = Call("tx_delete", {"name": "release/v1"})
MOVE_V1 = Call("changeset_create", {"message": "Hotfix on v1", "ref": "release/v1"})  # op 7: the store moves under a tx
CONFLICTED = Call("tx_commit", outcome="E_CAS_MISMATCH")  # after MOVE_V1: the transaction is Conflicted
STAGED = (BEGIN, STAGE_V2, DELETE_V1)

EXAMPLES = {
    "tx_begin": (
        Example(("tx", "begin"), {}, caption="Begin a transaction: the tx commands that follow stage ref moves in it."),
        Example(("tx", "begin"), {}, outcome="E_STATE", setup=(BEGIN,)),  # one open transaction per actor
    ),
    "tx_set": (
        Example(
            ("tx", "set", "release/v2", "main"),
            {"name": "release/v2", "target": "main"},
            caption="Stage creating (or moving) release/v2 at main's changeset.",
            setup=(BEGIN,),
        ),
        Example(("tx", "set", "release/v2", "main"), {"name": "release/v2", "target": "main"}, outcome="E_STATE"),  # no open tx
        Example(("tx", "set", "release/v2", "nope"), {"name": "release/v2", "target": "nope"}, outcome="E_NOT_FOUND", setup=(BEGIN,)),
    ),
    "tx_delete": (
        Example(("tx", "delete", "release/v1"), {"name": "release/v1"}, caption="Stage deleting release/v1.", setup=(BEGIN, STAGE_V2)),
        Example(("tx", "delete", "nope"), {"name": "nope"}, outcome="E_NOT_FOUND", setup=(BEGIN,)),
    ),
    "tx_status": (
        # Staged: release/v2 created, release/v1 deleted; then release/v1 moves in the store (op 7),
        # which `moved` shows before a commit would fail on it.
        Example(("tx", "status"), {}, caption="What the open transaction stages, and what moved under it.", setup=(*STAGED, MOVE_V1)),
        Example(("tx", "status"), {}),  # Ready: no open transaction
        # An undone revision can be redone; release/v1 moving does not count while its delete is undone.
        Example(("tx", "status"), {}, setup=(*STAGED, Call("tx_undo"), MOVE_V1)),
        Example(("tx", "status"), {}, setup=(BEGIN, DELETE_V1, MOVE_V1, CONFLICTED)),  # Conflicted
    ),
    "tx_undo": (
        Example(("tx", "undo"), {}, caption="Take back the last staged revision (tx redo re-applies it).", setup=STAGED),
        Example(("tx", "undo"), {}, outcome="E_STATE", setup=(BEGIN,)),  # nothing to undo
    ),
    "tx_redo": (
        Example(("tx", "redo"), {}, caption="Re-apply the revision undone last.", setup=(*STAGED, Call("tx_undo"))),
        Example(("tx", "redo"), {}, outcome="E_STATE", setup=(BEGIN, STAGE_V2)),  # nothing undone
    ),
    "tx_commit": (
        Example(
            ("tx", "commit", "-m", "Cut release/v2; retire release/v1"),
            {"message": "Cut release/v2; retire release/v1"},
            caption="Apply every staged move as one op, by compare-and-swap: all or nothing.",
            setup=STAGED,
        ),
        Example(("tx", "commit"), {}, outcome="E_STATE", setup=(BEGIN,)),  # nothing staged
        Example(("tx", "commit"), {}, outcome="E_CAS_MISMATCH", setup=(*STAGED, MOVE_V1)),  # now Conflicted
    ),
    "tx_rollback": (
        Example(("tx", "rollback"), {}, caption="Discard the open transaction; the store's refs never moved.", setup=STAGED),
        Example(("tx", "rollback"), {}, setup=(BEGIN, DELETE_V1, MOVE_V1, CONFLICTED)),  # OutOfDate, with its hint
        # committed: E_STATE, next op undo 7
        Example(("tx", "rollback"), {}, outcome="E_STATE", setup=(BEGIN, STAGE_V2, Call("tx_commit"))),
    ),
    "tx_config": (
        Example(
            ("tx", "config", "--max-revisions", "50"),
            {"max_revisions": 50},
            caption="Let transactions begun from now on stage up to 50 revisions.",
        ),
        Example(("tx", "config"), {}, caption="Show the store's bound on staged revisions."),
    ),
}
