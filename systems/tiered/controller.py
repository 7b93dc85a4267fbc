"""Controller side of the tiered system: the replication system's ISR changes and KIP-455 moves
(tiering changes where a new replica starts copying, not how the controller runs a move)."""
from __future__ import annotations

from systems.replication.controller import extend_controller  # noqa: F401  (the --extension entry point)
from systems.tiered.settings import DEFAULTS as CONFIG_DEFAULTS  # noqa: F401  (the controller's known keys)
