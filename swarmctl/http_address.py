"""What `swarmctl mcp --http HOST:PORT` is asked to serve: its address and options, what cannot
be served (refused before anything listens) and the socket it listens on. Apart from
swarmctl.mcp_http so that a refusal (`--auth trust` off loopback, a port in use) comes back
at once, without first importing the MCP SDK and the HTTP server, a second's work.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from swarmctl import names
from swarmctl.envelope import SwarmError


@dataclass
class Options:
    host: str
    port: int
    repo: str | None = None
    actor: str | None = None  # --as, with --auth trust
    auth: str = "token"
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    allow_run: bool = False
    read_timeout_s: float = 10.0  # SWARMCTL_HTTP_READ_TIMEOUT: a request must arrive whole within it (http_timely.py)


# --- the address and what may be said to it -------------------------------------------------


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`127.0.0.1:8765`, `[::1]:8765`, `0.0.0.0:0`) as (host, port)."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an IPv6 address is written in brackets
    if not sep or not host or not names.digits(port) or int(port) > 65535:
        raise SwarmError(
            "E_INVALID_ARG",
            f"--http takes HOST:PORT, not {text!r}",
            details={"http": text},
            hint="For example --http 127.0.0.1:8765, --http [::1]:8765 or --http 0.0.0.0:8765 (port 0: any free port).",
        )
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authority(host: str, port: int) -> str:
    """`host:port` as a URL or a Host header writes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def default_hosts(host: str, port: int) -> list[str]:
    """The Host headers that name this server: its address, and on a loopback or wildcard
    address the loopback names. Others (a DNS name, a proxy's) come with --allowed-host."""
    found = [authority(host, port)]
    if is_loopback(host) or host in ("0.0.0.0", "::"):
        found += [authority(h, port) for h in ("127.0.0.1", "localhost", "::1")]
    return list(dict.fromkeys(found))


def check(options: Options) -> None:
    """What cannot be served, refused before listening (E_INVALID_ARG)."""
    if options.auth not in ("token", "trust"):
        raise SwarmError("E_INVALID_ARG", f"--auth is token or trust, not {options.auth!r}", details={"auth": options.auth})
    if options.auth == "token" and options.actor is not None:
        raise SwarmError(
            "E_INVALID_ARG",
            "--as does not go with --auth token: each request's bearer token names its actor",
            details={"auth": "token", "as": options.actor},
            hint="Drop --as (and SWARMCTL_AS); make tokens with `swarmctl token create ACTOR`.",
        )
    if options.auth == "trust" and not is_loopback(options.host):
        raise SwarmError(
            "E_INVALID_ARG",
            f"--auth trust serves only a loopback address (127.0.0.1, [::1]), not {options.host}",
            details={"auth": "trust", "host": options.host},
            hint="Use --auth token (the default) to serve other machines: `swarmctl token create ACTOR` makes their tokens.",
        )
    if options.actor is not None:
        names.check_actor(options.actor)


def listen(host: str, port: int) -> Any:
    """A socket bound to host:port (port 0: a free one), or E_INVALID_ARG saying why not."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        raise SwarmError(
            "E_INVALID_ARG",
            f"cannot listen on {authority(host, port)}: {exc.strerror or exc}",
            details={"http": authority(host, port)},
            hint="Choose another port (0: any free one) or an address of this machine.",
        ) from None
    return sock
