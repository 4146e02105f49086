"""Where each workflow tool is reached: its command and its request type, declared once (the
tool's name is the command's words: spec.address). The registry entries (in __init__) are built on these addresses; the modules that name a
workflow tool as what to call next (`next`: guards.py, views.py, rollback.py) build the call
from them, without importing the package that runs the tools."""

from __future__ import annotations

from swarmctl.spec import address
from swarmctl.tools.workflow.models import (
    WorkflowApproveReq,
    WorkflowCancelReq,
    WorkflowListReq,
    WorkflowResumeReq,
    WorkflowRollbackReq,
    WorkflowRunReq,
    WorkflowShowDefinitionReq,
    WorkflowStatusReq,
)

RUN = address("workflow run", WorkflowRunReq)
STATUS = address("workflow status", WorkflowStatusReq)
LIST = address("workflow list", WorkflowListReq)
APPROVE = address("workflow approve", WorkflowApproveReq)
RESUME = address("workflow resume", WorkflowResumeReq)
CANCEL = address("workflow cancel", WorkflowCancelReq)
ROLLBACK = address("workflow rollback", WorkflowRollbackReq)
SHOW_DEFINITION = address("workflow show-definition", WorkflowShowDefinitionReq)
