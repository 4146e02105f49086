"""Fault injection for tests: points in the one transaction helper where a test can stop a
writer and kill it, off unless SWARMCTL_FAULT names one."""

from __future__ import annotations

import os
from pathlib import Path


def pause_before_commit() -> None:
    """Fault injection for tests, off unless SWARMCTL_FAULT=pause-before-commit:PATH is set:
    with everything of the transaction written but not committed, write PATH (this process's
    pid) and sleep, so that a test can kill the process at exactly this point."""
    spec = os.environ.get("SWARMCTL_FAULT")
    if not spec:
        return
    action, _, path = spec.partition(":")
    if action != "pause-before-commit" or not path:
        raise RuntimeError(f"SWARMCTL_FAULT must be pause-before-commit:PATH, not {spec!r}")
    import time

    Path(path).write_text(str(os.getpid()))
    # Short sleeps, not one long one: a signal that comes after Python last looked for one but
    # before the sleep began (a test sends it the moment PATH appears) does not end the sleep,
    # and is handled only when the sleep ends. One sleep of an hour hung such a test, seen on
    # a busy machine; here it is handled within 50 ms.
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        time.sleep(0.05)
