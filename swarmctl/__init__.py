"""swarmctl: the safe undo button for a swarmops store."""

__version__ = "0.1.0"
