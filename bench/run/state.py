"""Live state of one run, shared by the runner's threads (timeline, observers) and the live
display (live_display.py)."""
from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from bench.scenario import Scenario

LOAD_ACKS_KEPT = 240  # the last 2 min of the load's progress lines (one per 0.5 s)


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
        # the load's progress lines' (ts, median ack ms over their 0.5 s): the estimates' client latency
        self.load_acks: deque[tuple[float, float]] = deque(maxlen=LOAD_ACKS_KEPT)
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


    def ack_between(self, t0: float, t1: float) -> float | None:
        """The load's median ack latency (s) from ``t0`` to ``t1``: the median of its progress lines'
        medians (one per 0.5 s at a steady rate); None when no line in the window had an ack."""
        with self.lock:
            xs = [p50 for ts, p50 in self.load_acks if t0 <= ts <= t1]
        return statistics.median(xs) / 1000.0 if xs else None

    def metadata_snapshot(self) -> dict[tuple[str, int], dict[str, Any]]:
        with self.lock:
            return dict(self.metadata)
