"""The workflow tools' examples (spec.Example): parity cases, the reference page's (the first
of each), --help's and the man page's. RELEASE, in the working directory, promotes main to
release/v2, waits for a sign-off, then deploys (a command with a rollback); broken.toml has a
command step that fails. "{workflow}" is the newest workflow's id when the example runs."""

from __future__ import annotations

from swarmctl.spec import WORKFLOW, Call, Example
from swarmctl.tools.common import APPROVERS_POLICY, RUN_ACTORS_POLICY, RUNS_POLICY, SELF_APPROVAL_POLICY, SET_AGENTS, STEER_POLICY

RELEASE = {
    "release.toml": """\
name = "release-v2"
description = "Cut release/v2 from main, get a sign-off, deploy it"

[[step]]
name = "promote"
ref_set = { name = "release/v2", to = "main" }

[[step]]
name = "sign-off"
approval = "the release manager approves"

[[step]]
name = "deploy"
run = ["./deploy.sh", "--env", "prod"]
rollback = ["./undeploy.sh", "--env", "prod"]
timeout_s = 120
""",
    "deploy.sh": """\
#!/bin/sh
# Stands in for a real deployment: says what it deploys where.
echo "deployed release/v2 to $2"
""",
    "undeploy.sh": """\
#!/bin/sh
echo "removed release/v2 from $2"
""",
}

FLOWS = {
    **RELEASE,
    "broken.toml": """\
name = "broken"
[[step]]
name = "promote"
ref_set = { name = "release/v2", to = "main" }
[[step]]
name = "check"
run = ["./check.sh"]
timeout_s = 60
""",
    "check.sh": '#!/bin/sh\necho "check.sh: the target refused" >&2\nexit 3\n',
}
RUN = Call("workflow_run", {"file": "release.toml"})  # stops at the gate
ALICE = "human/alice"
ALICE_RUNS = Call("workflow_run", {"file": "release.toml"}, actor=ALICE)  # a workflow of someone else's
SET_STEER = Call("policy_set", {"policy": STEER_POLICY})
APPROVE = Call("workflow_approve", {"workflow": WORKFLOW})
COMPLETED = (RUN, APPROVE, Call("workflow_resume", {"workflow": WORKFLOW}))
BROKEN = Call("workflow_run", {"file": "broken.toml"}, outcome="E_STEP_FAILED")  # promote ran; check failed
W = {"workflow": WORKFLOW}

EXAMPLES = {
    "workflow_run": (
        Example(("workflow", "run", "release.toml"), {"file": "release.toml"}, caption="Run release.toml: it stops at the sign-off gate.", files=RELEASE),
        Example(("workflow", "run", "broken.toml"), {"file": "broken.toml"}, outcome="E_STEP_FAILED", files=FLOWS),
        Example(("workflow", "run", "missing.toml"), {"file": "missing.toml"}, outcome="E_INVALID_ARG"),  # nothing created
        Example(  # run.definitions
            ("workflow", "run", "release.toml"),
            {"file": "release.toml"},
            outcome="E_FORBIDDEN",
            setup=(Call("policy_set", {"policy": RUNS_POLICY}),),
            files=FLOWS,
        ),
        Example(  # run.actors
            ("workflow", "run", "release.toml"),
            {"file": "release.toml"},
            outcome="E_FORBIDDEN",
            setup=(Call("policy_set", {"policy": RUN_ACTORS_POLICY}),),
            files=FLOWS,
        ),
        # run.actors and run.definitions allow it
        Example(("workflow", "run", "release.toml"), {"file": "release.toml"}, setup=(SET_AGENTS,), files=FLOWS),
    ),
    "workflow_status": (
        # Status after a confirmed rollback: each step's outcome and how it was undone.
        Example(
            ("workflow", "status", WORKFLOW),
            W,
            caption="A workflow's state and each step's outcome.",
            setup=(*COMPLETED, Call("workflow_rollback", {**W, "include_completed": True, "confirm": True})),
            files=RELEASE,
        ),
        Example(("workflow", "status", WORKFLOW), W, setup=COMPLETED, files=FLOWS),
        Example(("workflow", "status", "wf-zzzzzzzz"), {"workflow": "wf-zzzzzzzz"}, outcome="E_NOT_FOUND"),
    ),
    "workflow_list": (
        Example(("workflow", "list", "-n", "10"), {"limit": 10}, caption="The ten newest workflows.", setup=(RUN,), files=RELEASE),
        Example(
            ("workflow", "list", "--state", "failed", "-n", "1"),
            {"state": "failed", "limit": 1},
            caption="The newest failed workflow.",
            setup=(RUN, BROKEN),
            files=FLOWS,
        ),
    ),
    "workflow_approve": (
        Example(
            ("workflow", "approve", WORKFLOW, "--step", "sign-off"),
            {**W, "step": "sign-off"},
            caption="Approve the gate sign-off (then `workflow resume` runs on).",
            setup=(RUN,),
            files=RELEASE,
        ),
        Example(("workflow", "approve", WORKFLOW), W, setup=(RUN, APPROVE), files=FLOWS),  # a replay: already_approved
        Example(("workflow", "approve", WORKFLOW, "--step", "deploy"), {**W, "step": "deploy"}, outcome="E_INVALID_ARG", setup=(RUN,), files=FLOWS),  # not a gate
        Example(  # approve.self: its creator may not approve its gate
            ("workflow", "approve", WORKFLOW),
            W,
            outcome="E_FORBIDDEN",
            setup=(Call("policy_set", {"policy": SELF_APPROVAL_POLICY}), RUN),
            files=FLOWS,
        ),
        Example(  # approve.actors: people only
            ("workflow", "approve", WORKFLOW),
            W,
            outcome="E_FORBIDDEN",
            setup=(Call("policy_set", {"policy": APPROVERS_POLICY}), RUN),
            files=FLOWS,
        ),
        # approve.actors names agents, approve.self allows its creator: human/alice's workflow, and its own
        Example(("workflow", "approve", WORKFLOW), W, setup=(SET_AGENTS, ALICE_RUNS), files=FLOWS),
        Example(("workflow", "approve", WORKFLOW), W, setup=(SET_AGENTS, RUN), files=FLOWS),
    ),
    "workflow_resume": (
        Example(("workflow", "resume", WORKFLOW), W, caption="Run on past an approved gate.", setup=(RUN, APPROVE), files=RELEASE),
        Example(("workflow", "resume", WORKFLOW), W, outcome="E_STATE", setup=(RUN,), files=FLOWS),  # not approved
        Example(  # fails again: attempts 2
            ("workflow", "resume", WORKFLOW, "--retry", "check"),
            {**W, "retry": "check"},
            outcome="E_STEP_FAILED",
            setup=(BROKEN,),
            files=FLOWS,
        ),
        Example(  # workflow.others: human/alice's workflow, approved by her
            ("workflow", "resume", WORKFLOW),
            W,
            outcome="E_FORBIDDEN",
            setup=(SET_STEER, ALICE_RUNS, Call("workflow_approve", {"workflow": WORKFLOW}, actor=ALICE)),
            files=RELEASE,
        ),
        Example(
            ("workflow", "resume", WORKFLOW),
            W,
            setup=(SET_AGENTS, ALICE_RUNS, APPROVE),
            files=RELEASE,
        ),
    ),
    "workflow_cancel": (
        Example(("workflow", "cancel", WORKFLOW), W, caption="Cancel a workflow waiting at a gate.", setup=(RUN,), files=RELEASE),
        Example(("workflow", "cancel", WORKFLOW), W, outcome="E_STATE", setup=COMPLETED, files=FLOWS),
        # workflow.others: human/alice's workflow, which only people may steer; then agents too
        Example(("workflow", "cancel", WORKFLOW), W, outcome="E_FORBIDDEN", setup=(SET_STEER, ALICE_RUNS), files=FLOWS),
        Example(("workflow", "cancel", WORKFLOW), W, setup=(SET_AGENTS, ALICE_RUNS), files=FLOWS),
    ),
    "workflow_rollback": (
        # The preview, with its blast radius: what --confirm would undo, in which order.
        Example(
            ("workflow", "rollback", WORKFLOW, "--include-completed"),
            {**W, "include_completed": True},
            caption="Preview rolling back a completed workflow: its blast radius.",
            setup=COMPLETED,
            files=RELEASE,
        ),
        Example(  # undeploy.sh runs, op 7 is undone
            ("workflow", "rollback", WORKFLOW, "--include-completed", "--confirm"),
            {**W, "include_completed": True, "confirm": True},
            caption="Do it: undo its steps, newest first.",
            setup=COMPLETED,
            files=FLOWS,
        ),
        # completed, without --include-completed
        Example(("workflow", "rollback", WORKFLOW, "--confirm"), {**W, "confirm": True}, outcome="E_REFUSED", setup=COMPLETED, files=FLOWS),
        Example(  # release/v2 moved since (op 8): the undo of promote is predicted to fail with E_CAS_MISMATCH
            ("workflow", "rollback", WORKFLOW),
            W,
            setup=(RUN, Call("changeset_create", {"message": "Hotfix on v2", "ref": "release/v2"})),
            files=FLOWS,
        ),
        # a failed workflow: promote is undone, check is listed as not_reversed
        Example(("workflow", "rollback", WORKFLOW, "--confirm"), {**W, "confirm": True}, setup=(BROKEN,), files=FLOWS),
        # workflow.others: human/alice's workflow; the preview predicts the refusal (a blocker)
        Example(("workflow", "rollback", WORKFLOW, "--confirm"), {**W, "confirm": True}, outcome="E_FORBIDDEN", setup=(SET_STEER, ALICE_RUNS), files=FLOWS),
        Example(("workflow", "rollback", WORKFLOW), W, setup=(SET_STEER, ALICE_RUNS), files=FLOWS),
        Example(("workflow", "rollback", WORKFLOW, "--confirm"), {**W, "confirm": True}, setup=(SET_AGENTS, ALICE_RUNS), files=FLOWS),
    ),
    "workflow_show_definition": (
        Example(("workflow", "show-definition", WORKFLOW), W, caption="The TOML a workflow was started from.", setup=(RUN,), files=RELEASE),
    ),
}
