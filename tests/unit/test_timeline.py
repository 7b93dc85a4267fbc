"""bench/run/timeline.py: actions at their times, and ``after_moves`` waiting for earlier moves,
on a run handle that records what the actions would do (nothing started)."""
from __future__ import annotations

import threading
import time

import pytest

from bench.run.state import RunState
from bench.run.timeline import run_timeline
from bench.scenario import parse_scenario


class FakeRun:
    """What run_timeline uses of a run; a move stays in ``state.moving`` for ``move_s``."""

    def __init__(self, sc, move_s: float) -> None:
        self.sc, self.state, self.cluster, self.windows = sc, RunState("r", sc), None, None
        self.move_s = move_s
        self.started: list[tuple[str, float]] = []
        self.events: list[tuple[str, dict]] = []

    def event(self, name, detail=None, *, ts=None, topic=None, partition=-1):
        self.events.append((name, detail or {}))

    def sleep_until(self, t: float) -> bool:
        while time.time() < t:
            if self.state.stop.wait(min(0.02, max(0.0, t - time.time()))):
                return False
        return True


def _scenario(duration_s: float):
    return parse_scenario({
        "name": "t", "system": {"kind": "replication", "brokers": 3},
        "workload": {"topics": [{"name": "a", "partitions": 2, "replication_factor": 1}], "message_bytes": "1KiB",
                     "produce_rate_msgs_per_s": 10, "duration_s": duration_s},
        "actions": [{"at_s": 0, "kind": "reassign", "topic": "a", "partition": 0, "to": [2]},
                    {"at_s": 0, "after_moves": True, "kind": "reassign", "topic": "a", "partition": 1, "to": [3]}],
    }, "t.yaml")


@pytest.fixture
def moves_recorded(monkeypatch):
    """Each reassign records its start and is 'moving' for the run's move_s (a timer ends it)."""
    from bench.scenario.actions import SPECS

    def execute(self, ctx, i, a):
        run = ctx.run
        run.started.append((f"{a.topic}-{a.partition}", time.time()))
        run.state.moving[i] = {(a.topic, a.partition): {1, 2}}
        timer = threading.Timer(run.move_s, lambda: run.state.moving.pop(i, None))
        timer.daemon = True
        timer.start()

    monkeypatch.setattr(type(SPECS["reassign"]), "execute", execute)


def test_an_action_after_moves_starts_when_the_earlier_move_has_finished(moves_recorded):
    run = FakeRun(_scenario(30), move_s=0.4)
    t0 = time.time()
    run_timeline(run, t0)
    (first, t1), (second, t2) = run.started
    assert (first, second) == ("a-0", "a-1")
    assert t2 - t1 >= 0.4 - 0.05  # it waited for a-0's move, not its own at_s (0)
    assert [s.status for s in run.state.actions] == ["running", "running"]  # the watcher finishes them


def test_an_action_whose_earlier_moves_outlast_the_load_fails_saying_so(moves_recorded):
    run = FakeRun(_scenario(0.3), move_s=5.0)
    run_timeline(run, time.time())
    assert [m for m, _ in run.started] == ["a-0"]  # never a late move
    st = run.state.actions[1]
    assert st.status == "failed" and "earlier moves still running when the load ended" in st.detail
    assert any(e == "action_end" and d.get("ok") is False for e, d in run.events)
