"""Which host this process runs on, and how long its claim on a workflow lasts elsewhere.

A workflow's owner is a host id, a pid (with its start time) and a lease. On the owner's own
host the pid answers whether it lives (swarmctl/pids.py); on any other host a pid means
nothing, so there the owner counts as alive until its lease runs out. The running swarmctl
renews its lease while it works (every third of SWARMCTL_LEASE_S, and with every change it
saves).

The host id is SWARMCTL_HOST_ID when set. Otherwise it is derived from what makes pids
comparable: the kernel's boot id and the pid namespace, with /etc/machine-id and the host
name. Two containers on one machine share the boot id and the machine id but each has its own
pid namespace, so their ids differ; two processes that can see each other's pids share one.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

from swarmctl import limits, names, pids
from swarmctl.envelope import SwarmError

DEFAULT_LEASE_S = 30.0
MAX_LEASE_S = 86400.0
MIN_LEASE_S = 0.1
MAX_HOST_ID = 128


def host_id() -> str:
    """This process's host id: SWARMCTL_HOST_ID, or derived (see the module docstring)."""
    given = os.environ.get("SWARMCTL_HOST_ID")
    if given is None or given == "":
        return _derived()
    if len(given) > MAX_HOST_ID or not given.isprintable() or given.strip() != given:
        raise SwarmError(
            "E_INVALID_ARG",
            f"SWARMCTL_HOST_ID must be 1 to {MAX_HOST_ID} printable characters, without leading or trailing space",
            details={"variable": "SWARMCTL_HOST_ID"},
            hint="Unset it to let swarmctl derive the host id, or give each machine or container its own name.",
        )
    return given


@functools.lru_cache(maxsize=1)
def _derived() -> str:
    parts = [_read("/etc/machine-id"), _read("/proc/sys/kernel/random/boot_id"), _pid_namespace()]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    name = socket.gethostname() or "host"
    return f"{name}-{digest}"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")  # pid:[4026531836]: one per namespace while it lives
    except OSError:
        return ""


def lease_s() -> float:
    """SWARMCTL_LEASE_S: how long another host takes a workflow's owner for alive after it last
    renewed its lease (seconds, default 30)."""
    return limits.seconds("SWARMCTL_LEASE_S", DEFAULT_LEASE_S, MIN_LEASE_S, MAX_LEASE_S)


# A time in the store's format, as `lease_until` reads it (what strptime's "%Y-%m-%dT%H:%M:%S.%fZ" takes).
_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,6}Z$", re.ASCII)


def lease_until(at: str, seconds: float | None = None) -> str:
    """The end of a lease renewed at `at` (a time in the store's format), `seconds` (default:
    `lease_s()`) after it."""
    try:
        if not _AT.fullmatch(at):
            raise ValueError(at)
        start = datetime.fromisoformat(at[:-1]).replace(tzinfo=timezone.utc)  # strptime costs 10 times more
        return names.format_time(start + timedelta(seconds=lease_s() if seconds is None else seconds))
    except (ValueError, OverflowError):
        return at


class Owner(NamedTuple):
    """Who holds a workflow: a process on a host."""

    host: str
    pid: int
    start: str | None  # the pid's start time (swarmctl/pids.py), None where /proc is not there


def me() -> Owner:
    from_proc = pids.me()
    return Owner(host_id(), from_proc.pid, from_proc.start)
