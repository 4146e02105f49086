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
    time.sleep(3600)
