"""Every environment variable swarmctl reads outside its option parser, declared once.

The global options declare their own variables (cli/options.py: SWARMCTL_REPO, SWARMCTL_AS,
SWARMCTL_OUTPUT). The man pages' ENVIRONMENT section is generated from both (gen/man.py);
README's table of settings must say the same (tests/test_environment.py), and that test fails
when a module of swarmctl/ reads a variable declared in neither place.
"""

from __future__ import annotations

from typing import NamedTuple


class Variable(NamedTuple):
    name: str
    meaning: str  # one or two sentences, plain text: the man page and README show it as written


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "SWARMCTL_LOCK_TIMEOUT",
        "Seconds a write waits for another writer (the store's lock), and a read or a write for the "
        "sync of a change another process just committed, before it gives up with E_BUSY: "
        "0 to 3600, default 10. Ctrl-C ends the wait at once.",
    ),
    Variable(
        "SWARMCTL_CLOCK_SKEW_S",
        "Seconds the newest op may be ahead of a writer's clock before it is taken for the work of a "
        "clock that ran ahead, so a new op is no longer held to its time: default 300.",
    ),
    Variable(
        "SWARMCTL_MAX_JSON_DEPTH",
        "How deep the JSON of one input (JSON arguments, a --file, stdin, an MCP line) may nest: "
        "default 64, at most 256; deeper is E_INVALID_ARG.",
    ),
    Variable(
        "SWARMCTL_MAX_INPUT_BYTES",
        "The most bytes of one input (a --file, stdin, a workflow file, JSON arguments, an MCP line): "
        "default 16777216 (16 MiB); more is E_INVALID_ARG, and nothing past the bound is read.",
    ),
    Variable(
        "SWARMCTL_HOST_ID",
        "This machine's or container's name as the owner of a workflow on a shared store: 1 to 128 "
        "printable characters. Unset, it is the host name and a digest of /etc/machine-id, the boot "
        "id and the pid namespace, so two containers on one machine differ.",
    ),
    Variable(
        "SWARMCTL_LEASE_S",
        "Seconds another host takes a running workflow's owner for alive after it last renewed its "
        "lease (renewed every third of it): 0.1 to 86400, default 30.",
    ),
    Variable(
        "SWARMCTL_HTTP_READ_TIMEOUT",
        "Seconds `swarmctl mcp --http` gives a request to arrive whole (its head and body), from the "
        "connection or the response before it; then the connection is closed: 0.1 to 3600, default 10.",
    ),
    Variable("NO_COLOR", "When set and not empty, nothing is coloured (as --color never)."),
    Variable("TERM", "When dumb, nothing is coloured (as --color never)."),
    Variable("PATH", "Where the program of a workflow step (and of its rollback) is looked up."),
    Variable(
        "PGCONNECT_TIMEOUT",
        "libpq's connect timeout, for a postgresql:// store. Unset, and without connect_timeout in "
        "the URL, swarmctl waits 10 seconds for the server, then E_UNAVAILABLE.",
    ),
    Variable(
        "PGPASSWORD",
        "libpq's password, for a postgresql:// store (libpq reads its other variables as psql does: "
        "PGHOST, PGPORT, PGUSER, PGSERVICE, PGSSLMODE, ...). Not passed to a workflow step's "
        "command unless the step's env names it.",
    ),
    Variable(
        "PGSSLPASSWORD",
        "libpq's password of the client's SSL key. Not passed to a workflow step's command unless "
        "the step's env names it.",
    ),
)

# Read by swarmctl but not a setting for people: fault injection for the crash tests
# (store/faults.py), the grace a swarmctl gives the swarmctl a workflow step runs (process.py), and
# the variables the completion scripts set to call back into swarmctl.
NOT_SETTINGS = ("SWARMCTL_FAULT", "SWARMCTL_KILL_GRACE_S", "_SWARMCTL_COMPLETE", "_TYPER_COMPLETE_FISH_ACTION", "COMP_WORDS", "COMP_CWORD")
