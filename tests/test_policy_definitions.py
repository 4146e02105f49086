"""`[run] definitions` at resume and rollback: a workflow's commands run only while they are
what its definition file, one the rule allows, defines now.

The database guard on PostgreSQL lets a mapped role write workflow rows of its own actor; it
cannot read files, so swarmctl checks the stored steps against the file where it would run
them. Here the stored steps are changed in the store's tables directly, as such a role could
change them through psql.
"""

from __future__ import annotations

import json

import pytest

from core_helpers import BOB, tamper
from test_policy import FLOW, _kit_with_policy

pytestmark = pytest.mark.backends("sqlite", "postgres")

EVIL = ["./mark.sh", "evil"]


def _started(sw):
    """A store whose policy runs only flows/*.toml, and its workflow waiting at its gate."""
    kit = _kit_with_policy(sw, f'[run]\ndefinitions = ["{kit_dir(sw)}/*.toml"]\n')
    ran, wf = kit.run(FLOW.replace("release/v1", "staging"))
    assert ran.result["workflow"]["state"] == "awaiting_approval", ran.stdout
    return kit, wf


def kit_dir(sw):
    return (sw.tmp / "flows").resolve()


def _store_steps(sw, wf: str, step: str, **spec_changes) -> None:
    with tamper(sw.store) as db:
        (spec,) = db.execute("SELECT spec FROM workflow_steps WHERE workflow = ? AND name = ?", (wf, step)).fetchone()
        spec = json.loads(spec) if isinstance(spec, str) else spec
        db.execute(
            "UPDATE workflow_steps SET spec = ? WHERE workflow = ? AND name = ?",
            (json.dumps({**spec, **spec_changes}), wf, step),
        )


def _forbidden(ran, wf: str) -> None:
    assert ran.exit == 6 and ran.error["code"] == "E_FORBIDDEN", ran.stdout
    assert ran.error["details"]["rule"] == "run.definitions" and ran.error["details"]["workflow"] == wf, ran.stdout


def test_resume_refuses_steps_that_are_not_the_files_and_runs_nothing(sw, backend):
    kit, wf = _started(sw)
    _store_steps(sw, wf, "deploy", run=EVIL)
    assert kit("workflow", "approve", wf, actor=BOB).exit == 0
    ran = kit("workflow", "resume", wf)
    _forbidden(ran, wf)
    assert "not those" in ran.error["message"] and str(kit_dir(sw) / "flow.toml") in ran.error["message"]
    assert kit.marks() == []  # nothing ran
    status = kit("workflow", "status", wf).result
    assert status["workflow"]["state"] == "awaiting_approval"
    assert [s["status"] for s in status["steps"]] == ["success", "success", "pending"]


def test_rollback_previews_and_refuses_rollback_commands_that_are_not_the_files(sw, backend):
    kit, wf = _started(sw)
    assert kit("workflow", "approve", wf, actor=BOB).exit == 0
    assert kit("workflow", "resume", wf).result["workflow"]["state"] == "completed"
    assert kit.marks() == ["deploy"]
    _store_steps(sw, wf, "deploy", rollback=EVIL)
    preview = kit("workflow", "rollback", wf, "--include-completed").result
    assert [b["rule"] for b in preview["blast_radius"]["blockers"]] == ["run.definitions"], preview
    confirmed = kit("workflow", "rollback", wf, "--include-completed", "--confirm", "--expect-preview", preview["preview_id"])
    _forbidden(confirmed, wf)
    assert kit.marks() == ["deploy"]  # the stored rollback never ran


def test_a_file_changed_since_the_run_is_refused_until_it_defines_the_steps_again(sw, backend):
    kit, wf = _started(sw)
    assert kit("workflow", "approve", wf, actor=BOB).exit == 0
    original = (kit.dir / "flow.toml").read_text()
    (kit.dir / "flow.toml").write_text(original.replace('"deploy"]', '"deploy-v2"]'))
    _forbidden(kit("workflow", "resume", wf), wf)
    (kit.dir / "flow.toml").unlink()
    ran = kit("workflow", "resume", wf)
    _forbidden(ran, wf)
    assert "no workflow file" in ran.error["message"]
    (kit.dir / "flow.toml").write_text(original)
    assert kit("workflow", "resume", wf).result["workflow"]["state"] == "completed"
    assert kit.marks() == ["deploy"]


def test_without_the_rule_resume_runs_what_was_stored(sw, backend):
    """The check is the rule's: a store without `[run] definitions` resumes as before."""
    kit = _kit_with_policy(sw, '[run]\nactors = ["human/*"]\n')
    _, wf = kit.run(FLOW.replace("release/v1", "staging"))
    assert kit("workflow", "approve", wf, actor=BOB).exit == 0
    (kit.dir / "flow.toml").write_text("not toml at all [")
    assert kit("workflow", "resume", wf).result["workflow"]["state"] == "completed"
    assert kit.marks() == ["deploy"]


def test_a_workflow_whose_commands_would_run_elsewhere_is_refused_saying_what_to_do(sw, backend):
    """A workflow an earlier swarmctl started through a symlink kept the symlink's directory as
    `base_dir` (its `./mark.sh` would run there: another's program), or a role that may write
    workflow rows set one. Resume refuses it, and says what to do: cancel, and run the file again."""
    kit, wf = _started(sw)
    elsewhere = sw.tmp / "elsewhere"
    elsewhere.mkdir()
    with tamper(sw.store) as db:
        db.execute("UPDATE workflows SET base_dir = ? WHERE id = ?", (str(elsewhere), wf))
    assert kit("workflow", "approve", wf, actor=BOB).exit == 0
    ran = kit("workflow", "resume", wf)
    _forbidden(ran, wf)
    assert f"runs its commands in {elsewhere}" in ran.error["message"], ran.error["message"]
    assert f"swarmctl workflow cancel {wf}" in ran.error["message"], ran.error["message"]
    assert kit.marks() == []  # nothing ran
    assert kit("workflow", "cancel", wf).exit == 0  # the way out it names
