"""Live state of one run, shared by the runner's threads (timeline, observers) and the live
display (live_display.py)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from bench.scenario import Scenario


@dataclass
class ActionState:
    action_id: int
    kind: str
    at_s: float
    status: str = "pending"  # pending | running | done | failed | timed out
    detail: str = ""
    started: float | None = None
    ended: float | None = None


class RunState:
    def __init__(self, run_id: str, sc: Scenario) -> None:
        self.run_id = run_id
        self.sc = sc
        self.phase = "starting"
        self.lock = threading.Lock()
        self.metadata: dict[tuple[str, int], dict[str, Any]] = {}
        self.metadata_ts = 0.0
        self.load: dict[str, Any] = {}
        self.load_started: float | None = None
        self.load_finished: dict[str, Any] | None = None
        self.load_error: str | None = None  # what the load process said before it exited (its "error" line)
        self.actions = [ActionState(i, a.kind, a.at_s) for i, a in enumerate(sc.actions)]
        self.verify: dict[str, Any] = {}
        # Moves still running: action_id -> {partition: its source and target brokers}.
        self.moving: dict[int, dict[tuple[str, int], set[int]]] = {}
        # The action whose reassignment of a partition the cluster accepted last: an earlier
        # action's move of it is superseded (KIP-455: a new reassignment replaces the ongoing one).
        self.requested_by: dict[tuple[str, int], int] = {}
        self.stop = threading.Event()  # set on failure / Ctrl-C: every thread winds down
        self.load_over = threading.Event()  # the load finished (or its process ended): the samplers stop


    def metadata_snapshot(self) -> dict[tuple[str, int], dict[str, Any]]:
        with self.lock:
            return dict(self.metadata)
