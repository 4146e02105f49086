"""The global options, declared once, as data: GLOBAL_OPTIONS.

Everything else reads this table (cli/params.py makes Typer parameters of it; this module
imports no Typer, for the commands that never meet it, cli/fast.py): the root command's options (`swarmctl --repo PATH ...`),
the same options accepted after a command (`swarmctl op log -R PATH`, hidden there, as gh and
kubectl accept theirs), the options `swarmctl mcp` takes itself (`swarmctl mcp --repo PATH
--as ACTOR`, as MCP client configurations write it), the pre-scan of argv that finds the
command word before Typer parses (cli/prescan.py), and `Globals`, where a command finds them.
"""

from typing import Any, Literal, NamedTuple


class GlobalOption(NamedTuple):
    name: str  # its attribute on Globals
    flags: tuple[str, ...]  # the long flag first
    help: str
    default: Any = None
    metavar: str | None = None
    envvar: str | None = None  # read when the option is not given (not shown in the help)
    choices: tuple[str, ...] | None = None  # the words it takes; None: any text (or a flag, below)
    flag: bool = False  # takes no value
    door_help: str | None = None  # `swarmctl mcp` takes it too, shown in its help with this text

    @property
    def kind(self) -> Any:
        """What Typer parses it as."""
        if self.flag:
            return bool
        return Literal[self.choices] if self.choices else str  # type: ignore[valid-type]


GLOBAL_OPTIONS: tuple[GlobalOption, ...] = (
    GlobalOption(
        "repo",
        ("--repo", "-R"),
        "The store. Default: SWARMCTL_REPO, else the nearest enclosing store of the current directory.",
        metavar="PATH",
        envvar="SWARMCTL_REPO",
        door_help="The store, as the global --repo (here for `swarmctl mcp --repo PATH`).",
    ),
    GlobalOption(
        "actor",
        ("--as",),
        "Who is acting, as kind/name (agent/worker-17, human/alice, ci/release). Default: SWARMCTL_AS.",
        metavar="ACTOR",
        envvar="SWARMCTL_AS",
        door_help="Who the server acts as, as the global --as.",
    ),
    GlobalOption(
        "output",
        ("--output", "-o"),
        "json: the envelope (default). table: the same result rendered for people. jsonl: a list "
        "result one record a line (paging keys dropped: use -n), any other result as one line, a "
        "failure as its envelope.",
        default="json",
        envvar="SWARMCTL_OUTPUT",
        choices=("json", "table", "jsonl"),
    ),
    GlobalOption(
        "quiet",
        ("--quiet", "-q"),
        "Print nothing on stdout, for scripts that want only the exit status; a failure's "
        "code and message go to stderr, on one line.",
        default=False,
        flag=True,
    ),
    GlobalOption(
        "color",
        ("--color",),
        "Colour on a terminal: auto (unless NO_COLOR is set or TERM=dumb), always, never.",
        default="auto",
        choices=("auto", "always", "never"),
    ),
)

# Each flag of a global option that takes a value, as its long flag: how the pre-scan of argv
# knows that the word after it is that value, not the command.
VALUE_FLAGS: dict[str, str] = {flag: o.flags[0] for o in GLOBAL_OPTIONS if not o.flag for flag in o.flags}


class Globals:
    """The global options, as the command functions find them on the Typer context: each
    GLOBAL_OPTIONS entry as an attribute (`repo`, `actor`, `output`, `quiet`, `color`)."""

    def __init__(self, args: list[str] | None = None, **given: Any) -> None:
        unknown = set(given) - {o.name for o in GLOBAL_OPTIONS}
        assert not unknown, f"not a global option: {unknown}"
        for option in GLOBAL_OPTIONS:
            setattr(self, option.name, given.get(option.name, option.default))
        self.args = args or []  # the command line as given, for checks Click does not make


LATE = "late_"  # the parameter names of the options given after a command: `late_repo`, ...


def take_late(globals_: Globals, values: dict[str, Any]) -> None:
    """Move the options given after the command from a command's `values` onto `globals_`:
    given there, they win."""
    for o in GLOBAL_OPTIONS:
        if (given := values.pop(LATE + o.name)) is not None:
            setattr(globals_, o.name, given)
