"""A workflow's definition: the TOML file, checked strictly, and written back as TOML.

```toml
name = "release-v1"                                   # required
description = "promote, sign off, deploy"             # optional
[[step]]
name = "promote"                                      # required, unique, not "all"
ref_set = { name = "release/v1", to = "3f9a" }        # a store step (or ref_delete = { name = "..." })
[[step]]
name = "sign-off"
approval = "release manager approves"                 # a gate
[[step]]
name = "deploy"
run = ["./deploy.sh", "--env", "prod"]               # a command: argv, never a shell string
rollback = ["./undeploy.sh", "--env", "prod"]         # optional
env = { DEPLOY_TOKEN = "${env:DEPLOY_TOKEN}" }        # optional; ${env:NAME} read at run time
timeout_s = 600                                       # optional, default 600, for run and rollback
```

Each step has exactly one kind: `ref_set`, `ref_delete`, `run` or `approval`; `rollback`, `env`
and `timeout_s` belong to `run` steps only; any step may have a `description`. Anything else is
E_INVALID_ARG, with `details` naming the step and the key.

`${env:NAME}` may appear in `env` values and in `run`/`rollback` arguments; it is resolved from
swarmctl's environment when the command runs and never stored (`$${` is a literal `${`). An
environment entry or argument that carries a secret must take its value from `${env:...}`: a
literal secret would be written to the store. What carries a secret is swarmctl/secrets.py's
one grammar (`--token V`, `KEY=V`, `Authorization: Bearer V`, `https://user:V@host`, a
secret-named `env` key), the same that masks secrets in what swarmctl prints.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

from swarmctl import limits, names
from swarmctl import secrets
from swarmctl.envelope import SwarmError
from swarmctl.tools.workflow.models import ACKNOWLEDGE_ALL

DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_STEPS = 10_000
STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# ${env:NAME}, or $${ for a literal ${. Any other ${ is an error (a typo, not text).
_REFERENCE = re.compile(r"\$\$\{|\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}|\$\{")

KINDS = ("ref_set", "ref_delete", "run", "approval")
_TOP_KEYS = {"name", "description", "step"}
_STEP_KEYS = {"name", "description", *KINDS, "rollback", "env", "timeout_s"}
_RUN_ONLY = ("rollback", "env", "timeout_s")
RESERVED_STEP_NAMES = {ACKNOWLEDGE_ALL}


def invalid(message: str, *, step: str | int | None = None, key: str | None = None, **more: Any) -> SwarmError:
    details: dict[str, Any] = {}
    if step is not None:
        details["step"] = step
    if key is not None:
        details["key"] = key
    details.update(more)
    return SwarmError(
        "E_INVALID_ARG",
        message,
        details=details,
        hint="Fix the workflow file; nothing was run or written. `swarmctl workflow run --help` (and the README's Workflows section) shows the format.",
    )


def _unknown_key(key: str, allowed: set[str], *, before: str = "", after: str = "", step: str | None = None) -> SwarmError:
    """An unknown key, and the one it is a near miss of (`timout_s`: `timeout_s`), as the JSON
    doors name a misspelled field."""
    from swarmctl.fields import near_miss

    meant = near_miss(key, sorted(allowed))
    return invalid(
        f"{before}unknown key {key!r}{after}" + (f": did you mean {meant!r}?" if meant else ""),
        step=step, key=key, **({"did_you_mean": meant} if meant else {}), allowed=sorted(allowed),
    )


# --- reading a file ------------------------------------------------------------------------


def refuse_stdin(path: Path) -> None:
    """`workflow run -` where there is no file `-`: as `policy set -` and `call TOOL -` read stdin,
    it was meant to, and is told why it does not (before the policy is asked of a file `-`)."""
    if path.name == "-" and not path.exists():
        raise SwarmError(
            "E_INVALID_ARG",
            "workflow run reads a file, not stdin (`-`): the workflow keeps the file's path, its "
            "commands run in the file's directory, and the policy's `[run] definitions` names files",
            details={"file": str(path)},
            hint="Save the definition to a file and run that: `swarmctl workflow run flow.toml`. Nothing was run.",
        )


def resolved(path: Path) -> Path:
    """The definition file `path` names, symlinks followed: what a run checks against the policy,
    reads (`load(..., follow=False)`, so that a symlink swapped in since is not followed) and runs
    the commands of from its directory. A symlink's own directory would let whoever can make one
    run an allowed definition's `./deploy.sh` of their own."""
    return Path(os.path.realpath(path))


def load(path: Path, *, follow: bool = True) -> dict[str, Any]:
    """The checked definition in `path` (a TOML file), as plain values."""
    try:
        # at most SWARMCTL_MAX_INPUT_BYTES and one byte more: `workflow run /dev/zero` is refused, not read
        text = limits.read_file(path, f"workflow file {path}", regular=True, follow=follow).decode("utf-8")
    except limits.NotRegularFile as exc:  # a FIFO would hold the read (and a server's thread) until a writer came
        raise invalid(f"workflow file {path} is {exc.args[0]}, not a regular file", file=str(path)) from None
    except FileNotFoundError:
        refuse_stdin(path)
        raise invalid(f"no workflow file {path}", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid(f"cannot read workflow file {path}: {exc}", file=str(path)) from None
    try:
        data = limits.read_toml(text, str(path))
    except limits.Unreadable as exc:
        raise invalid(str(exc), file=str(path), **exc.details) from None
    try:
        return check(data)
    except SwarmError as exc:
        exc.details = {"file": str(path), **exc.details}
        raise


def check(data: Mapping[str, Any]) -> dict[str, Any]:
    """A definition (as parsed from TOML) checked and normalised: steps in order, each with
    its kind's keys only, timeouts as numbers. Raises E_INVALID_ARG naming step and key."""
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _unknown_key(unknown[0], _TOP_KEYS, after=" at the top of the workflow")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise invalid("the workflow needs a `name`: a string of 1 to 200 characters", key="name")
    if "\x00" in name:
        raise invalid("the workflow's `name` contains a NUL character (U+0000)", key="name")
    definition: dict[str, Any] = {"name": name}
    if "description" in data:
        definition["description"] = _text(data["description"], "description", None)
    steps = data.get("step")
    if not isinstance(steps, list) or not steps:
        raise invalid("the workflow needs at least one [[step]]", key="step")
    if len(steps) > MAX_STEPS:
        raise invalid(f"a workflow has at most {MAX_STEPS} steps", key="step", count=len(steps))
    seen: set[str] = set()
    definition["steps"] = []
    for position, raw in enumerate(steps, start=1):
        step = check_step(raw, position)
        if step["name"] in seen:
            raise invalid(f"two steps are named {step['name']!r}", step=step["name"], key="name")
        seen.add(step["name"])
        definition["steps"].append(step)
    return definition


def check_step(raw: Any, position: int) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise invalid(f"step {position} is not a table", step=position)
    name = raw.get("name")
    if not isinstance(name, str) or not STEP_NAME.fullmatch(name):
        raise invalid(
            f"step {position} needs a `name` of 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
            step=position,
            key="name",
        )
    if name in RESERVED_STEP_NAMES:
        raise invalid(f"step {position}: the name {name!r} is reserved", step=name, key="name")
    unknown = sorted(set(raw) - _STEP_KEYS)
    if unknown:
        raise _unknown_key(unknown[0], _STEP_KEYS, before=f"step {name}: ", step=name)
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        what = "has no kind" if not kinds else "has two kinds: " + " and ".join(kinds)
        raise invalid(
            f"step {name} {what}; give exactly one of {', '.join(KINDS)}",
            step=name,
            key=kinds[1] if len(kinds) > 1 else None,
            kinds=kinds,
        )
    kind = kinds[0]
    if kind != "run":
        extra = [k for k in _RUN_ONLY if k in raw]
        if extra:
            raise invalid(f"step {name}: `{extra[0]}` belongs to `run` steps only", step=name, key=extra[0])
    step: dict[str, Any] = {"name": name, "kind": kind}
    if "description" in raw:
        step["description"] = _text(raw["description"], "description", name)
    value = raw[kind]
    if kind == "ref_set":
        step["ref_set"] = _ref_table(value, name, "ref_set", ("name", "to"))
    elif kind == "ref_delete":
        step["ref_delete"] = _ref_table(value, name, "ref_delete", ("name",))
    elif kind == "approval":
        step["approval"] = _text(value, "approval", name)
    else:
        step["run"] = _argv(value, name, "run", raw.get("env"))
        if "rollback" in raw:
            step["rollback"] = _argv(raw["rollback"], name, "rollback", raw.get("env"))
        step["env"] = _env(raw.get("env", {}), name)
        step["timeout_s"] = _timeout(raw.get("timeout_s", DEFAULT_TIMEOUT_S), name)
    return step


def _text(value: Any, key: str, step: str | None) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 4096:
        where = f"step {step}: " if step else ""
        raise invalid(f"{where}`{key}` must be a non-empty string of at most 4096 characters", step=step, key=key)
    if "\x00" in value:  # no store keeps one in text (PostgreSQL cannot)
        where = f"step {step}: " if step else ""
        raise invalid(f"{where}`{key}` contains a NUL character (U+0000)", step=step, key=key)
    return value


def _ref_table(value: Any, step: str, key: str, fields: tuple[str, ...]) -> dict[str, str]:
    shape = "{ " + ", ".join(f'{f} = "..."' for f in fields) + " }"
    if not isinstance(value, dict) or set(value) != set(fields) or not all(isinstance(value[f], str) for f in fields):
        raise invalid(f"step {step}: `{key}` must be {shape}", step=step, key=key)
    problem = (names.new_ref_name_problem if key == "ref_set" else names.ref_name_problem)(value["name"])
    if problem:
        raise invalid(f"step {step}: `{key}.name` {value['name']!r} is not a valid ref name: {problem}", step=step, key=f"{key}.name")
    if "to" in value:
        to = value["to"].strip()
        if not to:
            raise invalid(f"step {step}: `{key}.to` is empty", step=step, key=f"{key}.to")
        if "${" in to:  # as a ref name it could never resolve: found now, not when the step runs
            raise invalid(f"step {step}: `{key}.to` has a `${{`: `${{env:NAME}}` is read only in `run`, `rollback` "
                          "and `env`; a store step names a ref or a changeset id", step=step, key=f"{key}.to")
        if names.ref_name_problem(to) is not None and not names.is_hex(to.lower()):
            raise invalid(f"step {step}: `{key}.to` {value['to']!r} is neither a ref name nor a changeset id prefix",
                          step=step, key=f"{key}.to")
    return {f: value[f] for f in fields}


def _argv(value: Any, step: str, key: str, env: Any = None) -> list[str]:
    if isinstance(value, str):
        raise invalid(
            f"step {step}: `{key}` must be a list of strings (an argv), not a shell string",
            step=step,
            key=key,
            hint_example=f'{key} = ["./script.sh", "--flag", "value"]',
        )
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise invalid(f"step {step}: `{key}` must be a non-empty list of strings", step=step, key=key)
    if not value[0] or any("\x00" in a for a in value):
        raise invalid(f"step {step}: `{key}` has an empty program or a NUL character", step=step, key=key)
    for i, a in enumerate(value):
        _check_references(a, step, f"{key}[{i}]")
    for i, span in secrets.argv_secrets(value):
        given = value[i][span.start : span.end]
        if not only_references(given) and not _read_by_the_shell(value, i, given, env):
            raise invalid(
                f"step {step}: `{key}` passes a literal secret (for {span.key!r}); take it from the environment "
                f"with ${{env:NAME}} so that it is never stored",
                step=step,
                key=f"{key}[{i}]",
            )
    return list(value)


def _env(value: Any, step: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise invalid(f"step {step}: `env` must be a table of NAME = \"value\"", step=step, key="env")
    for k, v in value.items():
        if not ENV_NAME.fullmatch(k):
            raise invalid(f"step {step}: `env.{k}` is not a valid environment variable name", step=step, key=f"env.{k}")
        if not isinstance(v, str):
            raise invalid(f"step {step}: `env.{k}` must be a string", step=step, key=f"env.{k}")
        if "\x00" in v:
            raise invalid(f"step {step}: `env.{k}` contains a NUL character (U+0000)", step=step, key=f"env.{k}")
        _check_references(v, step, f"env.{k}")
        if secrets.is_secret_key(k) and not only_references(v):
            raise invalid(
                f"step {step}: `env.{k}` names a secret, so its value must come from the environment "
                f"(`{k} = \"${{env:{k}}}\"`): a literal secret would be stored",
                step=step,
                key=f"env.{k}",
            )
        for span in secrets.secret_spans(v, whole=True):
            if not only_references(v[span.start : span.end]):
                raise invalid(
                    f"step {step}: `env.{k}` holds a literal secret (for {span.key!r}); take it from the environment "
                    f"with ${{env:NAME}} so that it is never stored",
                    step=step,
                    key=f"env.{k}",
                )
    return dict(value)


def _timeout(value: Any, step: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise invalid(
            f"step {step}: `timeout_s` must be a number of seconds above 0 and at most {int(MAX_TIMEOUT_S)}",
            step=step,
            key="timeout_s",
        )
    return float(value)


# --- ${env:NAME} references ----------------------------------------------------------------


def _check_references(text: str, step: str, key: str) -> None:
    for m in _REFERENCE.finditer(text):
        if m.group() == "${":
            raise invalid(
                f"step {step}: `{key}` has a `${{` that is not `${{env:NAME}}` (write `$${{` for a literal `${{`)",
                step=step,
                key=key,
            )


def references(text: str) -> list[str]:
    """The environment variables `text` refers to, in order."""
    return [m.group(1) for m in _REFERENCE.finditer(text) if m.group(1)]


def _read_by_the_shell(argv: list[str], i: int, value: str, env: Any) -> bool:
    """Whether a secret's `value` in `argv[i]` is a variable a shell's -c script reads from its
    environment as it runs (secrets.shell_variable) and the step's `env` gives no literal value:
    then the definition holds no secret."""
    name = secrets.shell_variable(argv, i, value)
    given = env.get(name) if name is not None and isinstance(env, dict) else None
    return name is not None and (given is None or (isinstance(given, str) and only_references(given)))


def only_references(text: str) -> bool:
    """Whether `text` is made of `${env:...}` references alone (so it holds no literal value)."""
    return bool(references(text)) and _REFERENCE.sub(lambda m: "" if m.group(1) else m.group(), text).strip() == ""


def step_references(step: Mapping[str, Any]) -> list[str]:
    """Every environment variable a `run` step's command, rollback and env refer to."""
    texts = [*step.get("run", []), *(step.get("rollback") or []), *step.get("env", {}).values()]
    found: list[str] = []
    for text in texts:
        for name in references(text):
            if name not in found:
                found.append(name)
    return found


def missing_references(step: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    return [name for name in step_references(step) if name not in environ]


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`text` with each `${env:NAME}` replaced by its value (callers check they are all set)."""
    return _REFERENCE.sub(lambda m: environ[m.group(1)] if m.group(1) else "${", text)


def resolved_values(step: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """What the step's references resolve to: never stored, scrubbed from its output."""
    return [environ[name] for name in step_references(step) if name in environ]


# --- writing it back -----------------------------------------------------------------------


def to_toml(definition: Mapping[str, Any]) -> str:
    """The definition as TOML (tomli-w), secrets redacted: what `workflow show-definition` prints."""
    import tomli_w

    doc: dict[str, Any] = {"name": definition["name"]}
    if definition.get("description"):
        doc["description"] = definition["description"]
    doc["step"] = [public_step(s) for s in definition["steps"]]
    return tomli_w.dumps(doc)


def public_step(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step as its definition says, in TOML's key order, with secrets redacted."""
    out: dict[str, Any] = {"name": step["name"]}
    if step.get("description"):
        out["description"] = step["description"]
    kind = step["kind"]
    if kind == "run":
        out["run"] = secrets.redact_argv(step["run"])
        if step.get("rollback"):
            out["rollback"] = secrets.redact_argv(step["rollback"])
        if step.get("env"):
            out["env"] = {k: secrets.redact_text(v) for k, v in secrets.redact(step["env"]).items()}
        out["timeout_s"] = plain_number(step["timeout_s"])
    else:
        out[kind] = step[kind]
    return out


def plain_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
