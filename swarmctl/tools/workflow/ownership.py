"""When the executor (execute.py) no longer holds the workflow it runs: another process took it
over, or this one could not renew its lease on a store that hosts share (hosts.py)."""

from __future__ import annotations

from swarmctl.envelope import SwarmError


class LostOwnership(Exception):
    """Another process took the workflow over: stop at once, and save nothing more.

    Not a SwarmError, so that the handlers that save a step's own failure never catch it; it
    leaves the executor as E_STATE (`as_error`)."""

    def __init__(self, wf_id: str, lease_lapsing: bool = False) -> None:
        super().__init__(wf_id)
        self.wf_id = wf_id
        self.lease_lapsing = lease_lapsing

    def as_error(self) -> SwarmError:
        if self.lease_lapsing:
            return SwarmError(
                "E_UNAVAILABLE",
                f"workflow {self.wf_id}: its lease could not be renewed (the store is out of reach), so its "
                "command was stopped before another host could take the workflow over and run the step again",
                details={"workflow": self.wf_id},
                hint=f"Once the store answers, `swarmctl workflow status {self.wf_id}` shows the step interrupted: "
                "check what it did, then resume it with --retry or roll back.",
            )
        return SwarmError(
            "E_STATE",
            f"workflow {self.wf_id} is no longer held by this process; stopped",
            details={"workflow": self.wf_id},
            hint=f"`swarmctl workflow status {self.wf_id}` shows who holds it now.",
        )
