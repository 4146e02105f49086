"""`op revert --actor` against a model, over random interleaved histories: the revert either
refuses exactly when someone else's move lies between the actor's moves of a ref, or puts each
of the actor's refs back to what it named before the actor's first move of it and leaves every
other ref alone; `op undo` of the revert puts everything back; the store stays consistent. And
`op restore OP` leaves the refs as a replay of the op log up to OP leaves them."""

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import AGENT, ALICE, connect, problems, refs

from swarmctl import registry
from swarmctl.calls import call_tool
from swarmctl.context import Context

REFS = ["main", "x", "y"]
ACTION = st.tuples(
    st.sampled_from([AGENT, ALICE]),
    st.sampled_from(["set", "set", "delete", "undo"]),
    st.sampled_from(REFS),
    st.integers(0, 2),
)


def call(store: Path, actor: str, tool: str, arguments: dict) -> dict:
    ctx = Context(repo=str(store), actor=actor, cwd=store.parent, readonly=False)
    return call_tool(tool, arguments, ctx, registry.by_name())


def play(store: Path, ids: list[str], actor: str, action: str, name: str, k: int) -> None:
    """One step of a random history: `set` a ref to changeset `k` (making it where it is not),
    `delete` it (where it is), `undo` the actor's newest op (refused, if it moved since or
    moved nothing: then nothing is written); any other action is the caller's."""
    current = refs(store)
    if action == "set":
        call(store, actor, "ref_set", {"name": name, "target": ids[k], **({} if name in current else {"create": True})})
    elif action == "delete" and name in current:
        call(store, actor, "ref_delete", {"name": name})
    elif action == "undo":
        call(store, actor, "undo", {"op": "@"})


def expected_revert(log: list[dict], actor: str) -> tuple[bool, dict[str, str | None]]:
    """From the op log alone: whether the revert must conflict, and else each of the actor's
    refs as it was before the actor's first move of it."""
    selected = {o["op"] for o in log if o["actor"] == actor}
    scope = set(selected)
    for o in log:  # oldest first: an undo comes after what it undoes
        if o["undoes"] in scope:
            scope.add(o["op"])
    first: dict[str, tuple[int, str | None]] = {}
    for o in log:
        for m in o["ref_moves"]:
            if o["op"] in selected:
                first.setdefault(m["name"], (o["op"], m["old"]))
    outside: dict[str, set[int]] = {}  # each ref: the ops outside the selection that moved it since
    for o in log:
        for m in o["ref_moves"]:
            if m["name"] in first and o["op"] > first[m["name"]][0] and o["op"] not in scope:
                outside.setdefault(m["name"], set()).add(o["op"])
    # An outside op taken back now by another outside op cancels out with it.
    undone_by = {o["op"]: o["undone_by"] for o in log}
    conflict = any(
        ops - {op for op in ops if undone_by[op] in ops} - {undone_by[op] for op in ops if undone_by[op] in ops}
        for ops in outside.values()
    )
    return conflict, {name: before for name, (_, before) in first.items()}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTION, min_size=1, max_size=10))
def test_revert_by_actor_matches_the_model(history):
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        assert call(store.parent, ALICE, "init", {"path": str(store)})["ok"]
        ids = [call(store, ALICE, "changeset_create", {"message": f"c{i}"})["result"]["changeset"]["id"] for i in range(3)]
        for actor, action, name, k in history:
            play(store, ids, actor, action, name, k)
        log = call(store, ALICE, "op_log", {"limit": 1000, "reverse": True})["result"]["ops"]
        conflict, restored = expected_revert(log, AGENT)
        before = refs(store)
        ran = call(store, ALICE, "op_revert", {"actor": AGENT})
        if conflict:
            assert ran["error"]["code"] == "E_CAS_MISMATCH", ran
            assert refs(store) == before
            return
        after = {n: t for n, t in {**before, **restored}.items() if t is not None}
        if after == before:
            assert ran["error"]["code"] == "E_NOTHING_TO_UNDO", ran
            return
        assert ran["ok"], ran
        assert refs(store) == after
        assert problems(store) == []
        assert call(store, ALICE, "undo", {"op": ran["result"]["op"]})["ok"]
        assert refs(store) == before
        assert problems(store) == []


def refs_after(log: list[dict], op: int) -> dict[str, str]:
    """The refs as the op log leaves them right after `op`, by replaying its moves."""
    state: dict[str, str] = {}
    for o in log:
        if o["op"] > op:
            break
        for m in o["ref_moves"]:
            if m["new"] is None:
                state.pop(m["name"], None)
            else:
                state[m["name"]] = m["new"]
    return state


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTION, min_size=1, max_size=10), st.floats(0, 1))
def test_restore_matches_a_replay_of_the_log(history, where):
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        assert call(store.parent, ALICE, "init", {"path": str(store)})["ok"]
        ids = [call(store, ALICE, "changeset_create", {"message": f"c{i}"})["result"]["changeset"]["id"] for i in range(3)]
        for actor, action, name, k in history:
            play(store, ids, actor, action, name, k)
        log = call(store, ALICE, "op_log", {"limit": 1000, "reverse": True})["result"]["ops"]
        head = log[-1]["op"]
        target = 1 + int(where * (head - 1))
        before = refs(store)
        preview = call(store, ALICE, "op_restore", {"op": target})["result"]
        assert preview["head"] == head and refs(store) == before
        ran = call(store, ALICE, "op_restore", {"op": target, "confirm": True, "expect_head": head})
        if refs_after(log, target) == before:
            assert preview["next"] is None and ran["error"]["code"] == "E_NOTHING_TO_UNDO"
            return
        assert ran["ok"], ran
        assert refs(store) == refs_after(log, target)
        assert problems(store) == []
        assert call(store, ALICE, "undo", {"op": ran["result"]["op"]})["ok"]
        assert refs(store) == before


# --- `op revert` against one `op undo` at a time ------------------------------------------------

REVERTING = st.tuples(  # on two refs, so that a revert often takes back several moves of one
    st.sampled_from([AGENT, ALICE]),
    st.sampled_from(["set", "set", "delete", "undo", "revert", "revert_agent"]),
    st.sampled_from(REFS[:2]),
    st.integers(0, 2),
    st.floats(0, 1),
    st.floats(0, 1),
)


def selection(log: list[dict], actor: str | None, low: float, high: float) -> dict:
    """An actor's ops, or a range of the log (exclusive bounds), from fractions of its length."""
    if actor is not None:
        return {"actor": actor}
    head = log[-1]["op"]
    after = int(low * head)
    return {"after": after, "before": after + 2 + int(high * (head - after))}


def effective(store: Path, chosen: set[int]) -> list[int]:
    """The chosen ops that `op revert` takes back, as the README words it: those that moved a
    ref and are in effect, but not an undo of a chosen op, nor a revert of chosen ops only (each
    such pair cancels out)."""
    log = {o["op"]: o for o in call(store, ALICE, "op_log", {"limit": 1000})["result"]["ops"]}
    conn = connect(store)
    try:
        targets = {op: {r[0] for r in conn.execute("SELECT target FROM op_reverts WHERE op = ?", (op,))} for op in chosen}
    finally:
        conn.close()
    return sorted(
        op for op in chosen
        if op in log and log[op]["ref_moves"] and log[op]["undone_by"] is None and log[op]["undoes"] not in chosen
        and not (log[op]["kind"] == "revert" and targets[op] <= chosen)
    )


def undone_one_at_a_time(store: Path, chosen: set[int]) -> dict[str, str] | None:
    """The refs after taking back the chosen ops one `op undo` at a time, newest first, until
    none is left in effect (an undo of a revert puts the ops it took back in effect again), or
    None if one of those undos is refused."""
    for _ in range(100):
        left = effective(store, chosen)
        if not left:
            return refs(store)
        if not call(store, ALICE, "undo", {"op": left[-1]})["ok"]:
            return None
    raise AssertionError("the undos never ended")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(REVERTING, min_size=1, max_size=10), st.sampled_from([AGENT, None, None]), st.floats(0, 1), st.floats(0, 1))
def test_a_revert_that_succeeds_leaves_the_refs_as_one_undo_at_a_time_would(history, actor, low, high):
    """Over histories with reverts in them (which take back several ops at once, some of which
    may be selected again later): where undoing the selection's ops one at a time works, a
    revert that is not refused leaves the refs exactly as those undos would, and one that finds
    nothing to take back leaves them as they are. A revert that moved refs, made again with the
    same selection, is a replay that moves nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        assert call(store.parent, ALICE, "init", {"path": str(store)})["ok"]
        ids = [call(store, ALICE, "changeset_create", {"message": f"c{i}"})["result"]["changeset"]["id"] for i in range(3)]
        for who, action, name, k, a, b in history:
            play(store, ids, who, action, name, k)
            if action.startswith("revert"):  # may be refused: then nothing is written
                log = call(store, ALICE, "op_log", {"limit": 1000, "reverse": True})["result"]["ops"]
                call(store, who, "op_revert", selection(log, AGENT if action == "revert_agent" else None, a, b))
        log = call(store, ALICE, "op_log", {"limit": 1000, "reverse": True})["result"]["ops"]
        chosen_by = selection(log, actor, low, high)
        found = call(store, ALICE, "op_log", {"limit": 1000, **chosen_by})["result"]["ops"]
        copy = Path(tmp) / "copy"
        shutil.copytree(store, copy)
        oracle = undone_one_at_a_time(copy, {o["op"] for o in found})
        before = refs(store)
        ran = call(store, ALICE, "op_revert", chosen_by)
        assert problems(store) == []
        if ran["ok"] and not ran["result"]["already_applied"]:  # the same selection again: a replay
            after = refs(store)
            again = call(store, ALICE, "op_revert", chosen_by)
            assert again["ok"] and again["result"]["already_applied"] and refs(store) == after, (chosen_by, ran, again)
        if oracle is None or not ran["ok"] and ran["error"]["code"] == "E_CAS_MISMATCH":
            return  # a revert is stricter: a ref moved away and back by someone else stops it
        if oracle == before:
            assert ran["ok"] and ran["result"]["already_applied"] or ran["error"]["code"] == "E_NOTHING_TO_UNDO", ran
            assert refs(store) == before
            return
        assert ran["ok"] and not ran["result"]["already_applied"], ran
        assert refs(store) == oracle, (chosen_by, ran)
