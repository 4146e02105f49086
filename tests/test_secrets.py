"""The secret-key rule and the redaction of structures, command lines and text (swarmctl/secrets.py)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swarmctl import secrets
from swarmctl.secrets import MASK, is_secret_key, redact, redact_argv, redact_text, scrub_values

SECRET_KEYS = [
    "DEPLOY_TOKEN", "token", "GITHUB_TOKEN", "githubToken", "password", "DB_PASSWORD", "dbPasswd",
    "passphrase", "client_secret", "AWS_SECRET_ACCESS_KEY", "api_key", "API-KEY", "apiKey", "x-api-key",
    "credential", "GOOGLE_APPLICATION_CREDENTIALS", "private_key", "privateKey", "ACCESS_KEY",
    "ssh-key", "signing_key", "Authorization", "cookie", "refresh-token",
]
PLAIN_KEYS = ["name", "env", "region", "PATH", "HOME", "key", "author", "monkey", "timeout_s", "run", "step", "PWD"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_keys_that_name_secrets(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_do_not(key):
    assert not is_secret_key(key)


def test_redact_masks_secret_values_at_any_depth_and_keeps_the_rest():
    value = {"env": {"DEPLOY_TOKEN": "abc", "REGION": "eu"}, "steps": [{"password": "p", "name": "x"}], "token": None}
    assert redact(value) == {
        "env": {"DEPLOY_TOKEN": MASK, "REGION": "eu"},
        "steps": [{"password": MASK, "name": "x"}],
        "token": None,
    }


def test_redact_argv_masks_flag_values_and_assignments():
    argv = ["./deploy.sh", "--token", "abc", "--password=hunter2", "API_KEY=k1", "--env", "prod", "-secret", "s"]
    assert redact_argv(argv) == [
        "./deploy.sh", "--token", MASK, "--password=***", "API_KEY=***", "--env", "prod", "-secret", MASK,
    ]


def test_redact_text_masks_assignments_in_output():
    assert redact_text("DEPLOY_TOKEN=abc123 region=eu\npassword: hunter2") == "DEPLOY_TOKEN=*** region=eu\npassword: ***"


def test_scrub_values_replaces_every_occurrence_longest_first():
    assert scrub_values("a s3cr3t and s3cr3t-long", ["s3cr3t", "s3cr3t-long"]) == f"a {MASK} and {MASK}"
    assert scrub_values("id 42", ["42"]) == "id 42"  # too short to be a secret: left alone


_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-", min_size=0, max_size=8)
_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=20).map(lambda v: "V" + v)


@given(prefix=_names, marker=st.sampled_from(secrets.SECRET_MARKERS), suffix=_names)
def test_any_key_containing_a_marker_is_secret(prefix, marker, suffix):
    assert is_secret_key(prefix + marker.upper() + suffix)
    assert is_secret_key(prefix + marker + suffix)


# Leaves start with "t", planted secrets with "V": a leaf never equals a secret by chance.
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | _values.map(lambda v: "t" + v[1:]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_names, children, max_size=3),
    max_leaves=10,
)


@given(tree=json_like, marker=st.sampled_from(secrets.SECRET_MARKERS), value=_values, prefix=_names)
def test_a_secret_value_never_survives_redaction(tree, marker, value, prefix):
    """Hide a secret-named key holding `value` anywhere in a structure: the redacted structure
    never contains it, and whatever else was there is unchanged."""
    secret_key = prefix + marker
    planted = {"wrapper": [tree, {secret_key: value}], secret_key: {"nested": value}}
    shown = json.dumps(redact(planted))
    assert value not in shown
    assert redact(planted)["wrapper"][0] == redact(tree)


@given(flag=st.sampled_from(secrets.SECRET_MARKERS), value=_values, args=st.lists(_values.map(str.lower), max_size=4))
def test_a_secret_flag_value_never_survives_argv_redaction(flag, value, args):
    for argv in (["prog", *args, f"--{flag}", value], ["prog", f"--{flag}={value}", *args], ["prog", f"{flag.upper()}={value}"]):
        shown = redact_argv(argv)
        assert value not in " ".join(shown)
        assert len(shown) == len(argv)
