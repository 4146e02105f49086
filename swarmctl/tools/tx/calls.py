"""Where each tx tool is reached: its command and its request type, declared once (the tool's
name is the command's words: spec.address). The registry entries (in __init__) are built on
these addresses; staging.py builds the calls it names as what to do next (`next`) from them,
without importing the package that runs the tools."""

from swarmctl.spec import address
from swarmctl.tools.tx.models import TxCommitReq, TxConfigReq, TxDeleteReq, TxReq, TxSetReq

BEGIN = address("tx begin", TxReq)
SET = address("tx set", TxSetReq)
DELETE = address("tx delete", TxDeleteReq)
STATUS = address("tx status", TxReq)
UNDO = address("tx undo", TxReq)
REDO = address("tx redo", TxReq)
COMMIT = address("tx commit", TxCommitReq)
ROLLBACK = address("tx rollback", TxReq)
CONFIG = address("tx config", TxConfigReq)
