"""Where each workflow tool is reached: its name, its command and its request type, declared
once. The registry entries (in __init__) are built on these addresses; the modules that name a
workflow tool as what to call next (`next`: guards.py, views.py, rollback.py) build the call
from them, without importing the package that runs the tools."""

from __future__ import annotations

from swarmctl.spec import Address
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

RUN = Address("workflow_run", ("workflow", "run"), WorkflowRunReq)
STATUS = Address("workflow_status", ("workflow", "status"), WorkflowStatusReq)
LIST = Address("workflow_list", ("workflow", "list"), WorkflowListReq)
APPROVE = Address("workflow_approve", ("workflow", "approve"), WorkflowApproveReq)
RESUME = Address("workflow_resume", ("workflow", "resume"), WorkflowResumeReq)
CANCEL = Address("workflow_cancel", ("workflow", "cancel"), WorkflowCancelReq)
ROLLBACK = Address("workflow_rollback", ("workflow", "rollback"), WorkflowRollbackReq)
SHOW_DEFINITION = Address("workflow_show_definition", ("workflow", "show-definition"), WorkflowShowDefinitionReq)
