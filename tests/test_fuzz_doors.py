"""A seeded fuzz of the three doors (issue 8, item 4): the CLI, `swarmctl call` and the MCP
server. Whatever comes in, exactly one envelope comes out (over MCP, one JSON-RPC reply to
each request with an id), its exit code is the table's, no traceback reaches stderr, and the
store still passes its check."""

import json
import string

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from core_helpers import AGENT, as_, build_golden_store, problems
from mcp_client import RawServer

from swarmctl import registry
from swarmctl.envelope import exit_code

TOOLS = sorted(name for name, t in registry.by_name().items() if t.name not in ("init", "demo"))
FIELDS = sorted({f.name for t in registry.tools() for f in t.fields()} | {"workflow_id", "dryrun", "expected", "id"})
SETTINGS = dict(
    database=None, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12), st.sampled_from(["@", "main", "release/v1", "6", "wf-", "all", "../x", "-1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), inner, max_size=4)
    ),
    max_leaves=12,
)
arguments = st.dictionaries(st.sampled_from(FIELDS), values, max_size=5)


@st.composite
def json_text(draw) -> str:
    """Argument text: well-formed, a key named twice, nested past the bound, or plain noise."""
    kind = draw(st.sampled_from(["json", "twice", "deep", "noise", "cut"]))
    text = json.dumps(draw(arguments))
    if kind == "twice" and text != "{}":
        key = draw(st.sampled_from(FIELDS))
        return '{"%s":1,"%s":2,%s' % (key, key, text[1:])
    if kind == "deep":
        depth = draw(st.integers(60, 3000))
        return '{"a":' + "[" * depth + "]" * depth * draw(st.sampled_from([1, 0])) + "}"
    if kind == "noise":
        return draw(st.one_of(
            st.text(alphabet=string.printable + "{}[]\":,\\\u2028\x00é", max_size=40),
            st.sampled_from(['{"limit": NaN}', '{"op": Infinity}', '{"op": -1e999}']),  # Python's JSON, not RFC 8259's
        ))
    if kind == "cut":
        return text[: draw(st.integers(0, len(text)))]
    return text


def _one_envelope(ran) -> dict:
    assert "Traceback" not in ran.stderr, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == 1, ran.stdout
    envelope = json.loads(lines[0], parse_constant=lambda name: pytest.fail(f"{name} is not JSON: {lines[0]}"))
    assert ran.exit == (0 if envelope["ok"] else exit_code(envelope["error"]["code"])), envelope
    assert envelope["ok"] or envelope["error"]["code"] != "E_INTERNAL", envelope
    return envelope


@seed(20261201)
@settings(max_examples=800, **SETTINGS)
@given(tool=st.one_of(st.sampled_from(TOOLS), st.text(max_size=8)), text=json_text())
def test_call_gives_one_envelope_for_any_arguments(sw_store, tool, text):
    sw = sw_store
    _one_envelope(sw(*as_(sw, AGENT), "call", tool, text))


WORDS = sorted({w for t in registry.tools() for w in t.cli if t.name not in ("init", "demo")})
FLAGS = sorted(
    {flag for t in registry.tools() for f in t.fields() for flag in (("--" + f.name.replace("_", "-")),)}
    | {"-n", "--repo", "--as", "--color", "-o", "json", "--", "=", "--expect=", "-R"}
)


@seed(20261202)
@settings(max_examples=200, **SETTINGS)
@given(
    argv=st.lists(
        st.one_of(st.sampled_from(WORDS), st.sampled_from(FLAGS), st.text(alphabet=string.printable, max_size=10), json_text()),
        max_size=6,
    )
)
def test_the_cli_gives_one_envelope_for_any_command_line(sw_store, argv):
    sw = sw_store
    # Only these print something other than an envelope, by design (SPEC §1), or serve MCP.
    if any(a in ("-h", "--help", "--version", "mcp", "call", "table") or a.startswith(("--install", "--show")) for a in argv) or not argv:
        argv = ["op", "show", "banana"]
    _one_envelope(sw(*as_(sw, AGENT), *argv))


@st.composite
def rpc_line(draw) -> tuple[str, int | None]:
    """A line for the MCP server, and the id it must answer under (None: any answer, or none)."""
    request_id = draw(st.integers(1000, 10**6))
    kind = draw(st.sampled_from(["call", "call", "twice", "deep", "noise", "id", "method"]))
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": draw(st.one_of(st.sampled_from(TOOLS), st.text(max_size=6))), "arguments": draw(arguments)}}
    if kind == "call":
        return json.dumps(call), request_id
    if kind == "twice":
        key = draw(st.sampled_from(["name", "arguments", "id", "method", "jsonrpc"]))
        text = json.dumps(call)
        return text[:-1] + ',"%s":%s}' % (key, json.dumps(draw(scalars))), None
    if kind == "deep":
        depth = draw(st.integers(60, 5000))
        call["params"]["arguments"] = "@"
        return json.dumps(call).replace('"@"', "[" * depth + "]" * depth), None
    if kind == "id":
        call["id"] = draw(st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))
        return json.dumps(call), None
    if kind == "method":
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": draw(st.text(max_size=10)), "params": draw(values)}), None
    return draw(st.text(alphabet=string.printable.replace("\n", "").replace("\r", "") + "{}[]\"", min_size=1, max_size=40)), None


@seed(20261203)
@settings(max_examples=1000, **SETTINGS)
@given(line=rpc_line())
def test_mcp_answers_any_line_and_serves_on(mcp_server, line):
    server, sentinel = mcp_server
    text, request_id = line
    server.send(text)
    sentinel[0] += 1
    server.send({"jsonrpc": "2.0", "id": f"ping-{sentinel[0]}", "method": "ping"})
    replies = []
    while True:
        reply = server.receive()
        if reply.get("id") == f"ping-{sentinel[0]}":
            break
        replies.append(reply)
    assert len(replies) <= 1, replies
    if request_id is not None:
        assert [r["id"] for r in replies] == [request_id], (text[:300], replies)
        result = replies[0].get("result")
        if result is not None and "structuredContent" in result:
            envelope = result["structuredContent"]
            assert result["isError"] == (not envelope["ok"])
            assert envelope["ok"] or envelope["error"]["code"] != "E_INTERNAL", envelope


import pytest  # noqa: E402


@pytest.fixture
def sw_store(sw):
    build_golden_store(sw)
    yield sw
    assert problems(sw.store) == []


@pytest.fixture
def mcp_server(sw):
    build_golden_store(sw)
    with RawServer(sw.store, AGENT, env=sw.env) as server:
        server.initialize()
        yield server, [0]
        code, _, err = server.close()
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert problems(sw.store) == []
