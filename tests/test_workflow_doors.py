"""The CLI door's extras for workflows: `-o table` rendering and shell completion."""

from wfkit import Kit

FLOW = """\
    name = "release"
    [[step]]
    name = "promote"
    ref_set = { name = "release/v1", to = "main" }
    [[step]]
    name = "deploy"
    run = ["./mark.sh", "deploy"]
    rollback = ["./mark.sh", "undeploy"]
    [[step]]
    name = "verify"
    run = ["./fail.sh"]
    """


def test_tables_for_people(sw):
    kit = Kit(sw)
    _, wf = kit.run(FLOW)
    listed = sw("--repo", kit.repo, "-o", "table", "workflow", "list")
    assert wf in listed.stdout and "1/3" not in listed.stdout and "2/3" in listed.stdout
    status = sw("--repo", kit.repo, "-o", "table", "workflow", "status", wf)
    assert f"{wf} release: failed" in status.stdout
    assert "exited with status 3" in status.stdout and f"next: swarmctl --repo {kit.repo} workflow rollback" in status.stdout
    preview = sw("--repo", kit.repo, "-o", "table", "workflow", "rollback", wf)
    text = preview.stdout
    assert "would_roll_back (2)" in text and "not_reversed (1)" in text and "blockers (0)" in text
    assert text.index("2. deploy") < text.index("1. promote")  # last first
    assert "undo op 4 → ok" in text and "run ./mark.sh undeploy → not_predicted" in text
    definition = sw("--repo", kit.repo, "-o", "table", "workflow", "show-definition", wf)
    assert definition.stdout.startswith('name = "release"\n')


def _complete(sw, kit, line: str) -> str:
    ran = sw.process(env={"_SWARMCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line})
    assert ran.exit == 0, ran.stderr
    return ran.stdout


def test_completion_offers_workflow_ids_and_their_steps(sw):
    kit = Kit(sw)
    _, wf = kit.run(FLOW)
    ids = _complete(sw, kit, f"swarmctl --repo {kit.repo} workflow status ")
    assert f"{wf}\trelease (failed)" in ids.splitlines()
    steps = _complete(sw, kit, f"swarmctl --repo {kit.repo} workflow rollback {wf} --acknowledge-unknown-effects ")
    offered = [line.split("\t")[0] for line in steps.splitlines()]
    for name in ("promote", "deploy", "verify", "all"):
        assert name in offered
    retry = _complete(sw, kit, f"swarmctl --repo {kit.repo} workflow resume {wf} --retry v")
    assert "verify\trun, failed" in retry.splitlines() and "all" not in [line.split("\t")[0] for line in retry.splitlines()]
