"""Workflow files: what `workflow run` refuses before it creates or runs anything, and
`workflow show-definition` (the definition back as TOML, secrets redacted)."""

import tomllib

import pytest

from wfkit import SECRET, Kit

GOOD_STEP = '[[step]]\nname = "a"\nrun = ["./mark.sh", "a"]\n'

# (file text, the step and key the error must name)
INVALID = {
    "unknown top key": ('name = "w"\ncolour = "red"\n' + GOOD_STEP, None, "colour"),
    "no name": (GOOD_STEP, None, "name"),
    "no steps": ('name = "w"\n', None, "step"),
    "step without name": ('name = "w"\n[[step]]\nrun = ["./mark.sh"]\n', 1, "name"),
    "bad step name": ('name = "w"\n[[step]]\nname = "has space"\nrun = ["./mark.sh"]\n', 1, "name"),
    "reserved step name": ('name = "w"\n[[step]]\nname = "all"\nrun = ["./mark.sh"]\n', "all", "name"),
    "duplicate step names": ('name = "w"\n' + GOOD_STEP + GOOD_STEP, "a", "name"),
    "unknown step key": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nretries = 3\n', "a", "retries"),
    "two kinds": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\napproval = "ok?"\n', "a", "approval"),
    "no kind": ('name = "w"\n[[step]]\nname = "a"\n', "a", None),
    "run is a shell string": ('name = "w"\n[[step]]\nname = "a"\nrun = "./mark.sh a"\n', "a", "run"),
    "run is not all strings": ('name = "w"\n[[step]]\nname = "a"\nrun = ["./mark.sh", 3]\n', "a", "run"),
    "empty run": ('name = "w"\n[[step]]\nname = "a"\nrun = []\n', "a", "run"),
    "rollback not a list": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nrollback = 1\n', "a", "rollback"),
    "timeout zero": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\ntimeout_s = 0\n', "a", "timeout_s"),
    "timeout text": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\ntimeout_s = "5"\n', "a", "timeout_s"),
    "timeout bool": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\ntimeout_s = true\n', "a", "timeout_s"),
    "timeout on a gate": ('name = "w"\n[[step]]\nname = "a"\napproval = "ok?"\ntimeout_s = 5\n', "a", "timeout_s"),
    "ref_set without to": ('name = "w"\n[[step]]\nname = "a"\nref_set = { name = "main" }\n', "a", "ref_set"),
    "ref_set extra key": ('name = "w"\n[[step]]\nname = "a"\nref_set = { name = "m", to = "x", force = true }\n', "a", "ref_set"),
    "invalid ref name": ('name = "w"\n[[step]]\nname = "a"\nref_delete = { name = "bad..name" }\n', "a", "ref_delete.name"),
    "env not a table": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nenv = "A=1"\n', "a", "env"),
    "bad env name": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nenv = { "1A" = "x" }\n', "a", "env.1A"),
    "bad reference": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nenv = { A = "${nope}" }\n', "a", "env.A"),
    "literal secret in env": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nenv = { API_TOKEN = "abc" }\n', "a", "env.API_TOKEN"),
    "literal secret in argv": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x", "--password", "hunter2"]\n', "a", "run[2]"),
    # One grammar (swarmctl/secrets.py) for what the check refuses and what output redaction hides:
    "literal bearer header": ('name = "w"\n[[step]]\nname = "a"\nrun = ["curl", "-H", "Authorization: Bearer sk-live-4f1c"]\n', "a", "run[2]"),
    "literal flag=value": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x", "--api-key=k-77"]\n', "a", "run[1]"),
    "literal password in a URL": ('name = "w"\n[[step]]\nname = "a"\nrun = ["git", "clone", "https://bob:hunter2@git.example/r"]\n', "a", "run[2]"),
    "literal secret in a rollback": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nrollback = ["x", "TOKEN=t-1"]\n', "a", "rollback[1]"),
    "literal secret in an env value": ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nenv = { DB_URL = "postgres://app:pw-9@db/x" }\n', "a", "env.DB_URL"),
}


@pytest.mark.parametrize("case", list(INVALID), ids=list(INVALID))
def test_an_invalid_file_is_refused_naming_step_and_key(sw, case):
    kit = Kit(sw)
    text, step, key = INVALID[case]
    kit.write(text)
    ran = kit("workflow", "run", "flow.toml")
    assert ran.exit == 2, ran.stdout
    error = ran.error
    assert error["code"] == "E_INVALID_ARG"
    assert error["details"]["file"] == str(kit.dir / "flow.toml")
    assert error["details"].get("step") == step
    assert error["details"].get("key") == key
    assert kit("workflow", "list", actor=None).result["workflows"] == []  # nothing was created
    assert kit.marks() == []


def test_a_misspelt_key_names_the_key_it_is_a_near_miss_of(sw):
    """As the JSON doors name a misspelled field (`did_you_mean`): `timout_s` was refused with
    only the list of the keys allowed."""
    kit = Kit(sw)
    for text, step, meant in (
        ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\ntimout_s = 5\n', "a", "timeout_s"),
        ('nme = "w"\n' + GOOD_STEP, None, "name"),
        ('name = "w"\n[[step]]\nname = "a"\nrun = ["x"]\nrollbak = ["y"]\n', "a", "rollback"),
        ('name = "w"\ncolour = "red"\n' + GOOD_STEP, None, None),
    ):
        kit.write(text)
        error = kit("workflow", "run", "flow.toml").error
        assert (error["code"], error["details"].get("step"), error["details"].get("did_you_mean")) == ("E_INVALID_ARG", step, meant)
        assert (f"did you mean {meant!r}?" in error["message"]) == (meant is not None), error["message"]
    assert kit("workflow", "list", actor=None).result["workflows"] == []


def test_secrets_taken_from_the_environment_are_accepted_passed_and_never_shown(sw):
    kit = Kit(sw)
    (kit.dir / "args.sh").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a" >> marks.log; done\n')
    (kit.dir / "args.sh").chmod(0o755)
    ran, wf = kit.run(
        """\
        name = "w"
        [[step]]
        name = "call"
        run = ["./args.sh", "Authorization: Bearer ${env:API_TOKEN}", "https://bob:${env:API_TOKEN}@git.example/r"]
        env = { DB_URL = "postgres://app:${env:API_TOKEN}@db/x" }
        """,
        env={"API_TOKEN": SECRET},
    )
    assert ran.exit == 0, ran.stdout
    assert (kit.dir / "marks.log").read_text().splitlines() == [f"Authorization: Bearer {SECRET}", f"https://bob:{SECRET}@git.example/r"]
    shown = tomllib.loads(kit("workflow", "show-definition", wf, actor=None).result["toml"])["step"][0]
    assert shown["run"] == ["./args.sh", "Authorization: Bearer ***", "https://bob:***@git.example/r"]
    assert shown["env"] == {"DB_URL": "postgres://app:***@db/x"}


def test_a_shell_that_reads_a_secret_from_its_environment_holds_no_literal_secret(sw):
    """`sh -c 'echo token=$API_TOKEN'` with API_TOKEN from the environment was refused as "passes
    a literal secret": the shell reads the value as it runs, and the definition holds none. A
    value with anything beside the variable is still a literal."""
    kit = Kit(sw)
    ran, _ = kit.run(
        """\
        name = "w"
        [[step]]
        name = "call"
        run = ["sh", "-c", "echo token=$API_TOKEN > marks.log; echo \\"Authorization: Bearer $API_TOKEN\\" >> marks.log"]
        env = { API_TOKEN = "${env:MYTOK}" }
        """,
        env={"MYTOK": SECRET},
    )
    assert ran.exit == 0, ran.stdout
    assert (kit.dir / "marks.log").read_text().splitlines() == [f"token={SECRET}", f"Authorization: Bearer {SECRET}"]
    # Still literal: more beside the variable; a variable the step's env gives a literal value;
    # `$NAME` to a program that is no shell (it gets the text `$DB_PASS`); an argument after
    # the script (the shell passes it as $0, never reads it).
    for run, env in [
        ('["sh", "-c", "echo token=abc$X"]', ""),
        ('["sh", "-c", "echo token=$X"]', 'env = { X = "hunter2-literal" }\n'),
        ('["./mark.sh", "--password", "$DB_PASS"]', 'env = { DB_PASS = "${env:MYTOK}" }\n'),
        ('["bash", "-c", "echo", "token=$X"]', ""),
    ]:
        path = kit.write(f'name = "w"\n[[step]]\nname = "a"\nrun = {run}\n{env}')
        refused = kit("workflow", "run", str(path), env={"MYTOK": SECRET})
        assert (refused.exit, refused.error["code"]) == (2, "E_INVALID_ARG"), (run, refused.stdout)
        assert "literal secret" in refused.error["message"], (run, refused.error)


def test_toml_syntax_errors_and_missing_files_are_invalid_arguments(sw):
    kit = Kit(sw)
    kit.write('name = "w"\n[[step]\n')
    assert kit("workflow", "run", "flow.toml").error["code"] == "E_INVALID_ARG"
    missing = kit("workflow", "run", "nope.toml")
    assert missing.exit == 2 and "no workflow file" in missing.error["message"]


def test_an_unset_env_reference_is_refused_before_anything_runs(sw):
    kit = Kit(sw)
    kit.write(
        """\
        name = "w"
        [[step]]
        name = "first"
        run = ["./mark.sh", "first"]
        [[step]]
        name = "deploy"
        run = ["./leak.sh"]
        env = { DEPLOY_TOKEN = "${env:DEPLOY_TOKEN}" }
        """
    )
    ran = kit("workflow", "run", "flow.toml")
    assert ran.exit == 2
    assert ran.error["details"] == {"step": "deploy", "variables": ["DEPLOY_TOKEN"]}
    assert kit.marks() == []


def test_show_definition_gives_the_definition_back_as_toml_with_secrets_redacted(sw, golden):
    kit = Kit(sw)
    _, wf = kit.run(
        """\
        name = "release-v1"
        description = "promote, sign off, deploy"
        [[step]]
        name = "promote"
        ref_set = { name = "release/v1", to = "main" }
        [[step]]
        name = "sign-off"
        approval = "release manager approves"
        [[step]]
        name = "deploy"
        description = "ship it"
        run = ["./mark.sh", "deploy", "--token", "${env:DEPLOY_TOKEN}"]
        rollback = ["./mark.sh", "undeploy"]
        env = { DEPLOY_TOKEN = "${env:DEPLOY_TOKEN}", REGION = "eu-west", LITERAL = "$${not a reference}" }
        timeout_s = 2.5
        """,
        env={"DEPLOY_TOKEN": SECRET},
    )
    ran = kit("workflow", "show-definition", wf, actor=None)
    assert sw.transcript(ran) == golden
    shown = tomllib.loads(ran.result["toml"])
    assert shown["step"][2]["env"] == {"DEPLOY_TOKEN": "***", "REGION": "eu-west", "LITERAL": "$${not a reference}"}
    assert shown["step"][2]["run"] == ["./mark.sh", "deploy", "--token", "***"]
    assert SECRET not in ran.stdout
