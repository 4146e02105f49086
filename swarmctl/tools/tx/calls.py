"""Where each tx tool is reached: its name, its command and its request type, declared once.
The registry entries (in __init__) are built on these addresses; staging.py builds the calls it
names as what to do next (`next`) from them, without importing the package that runs the tools."""

from swarmctl.spec import Address
from swarmctl.tools.tx.models import TxCommitReq, TxConfigReq, TxDeleteReq, TxReq, TxSetReq

BEGIN = Address("tx_begin", ("tx", "begin"), TxReq)
SET = Address("tx_set", ("tx", "set"), TxSetReq)
DELETE = Address("tx_delete", ("tx", "delete"), TxDeleteReq)
STATUS = Address("tx_status", ("tx", "status"), TxReq)
UNDO = Address("tx_undo", ("tx", "undo"), TxReq)
REDO = Address("tx_redo", ("tx", "redo"), TxReq)
COMMIT = Address("tx_commit", ("tx", "commit"), TxCommitReq)
ROLLBACK = Address("tx_rollback", ("tx", "rollback"), TxReq)
CONFIG = Address("tx_config", ("tx", "config"), TxConfigReq)
