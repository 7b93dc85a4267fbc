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
        self.estimator = None
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


class FakeAdmin:
    """alter_partition_reassignments failing as a restarting controller does, then answering."""

    def __init__(self, failures: int, error) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def alter_partition_reassignments(self, wanted, timeout_ms):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return {tp: None for tp in wanted}


def test_a_move_request_is_sent_again_while_the_controller_restarts(monkeypatch):
    """A retriable error (RequestTimedOut: the controller unreachable) is retried, as Kafka's
    AdminClient does, and the move goes on; a non-retriable one fails at once."""
    from kafka.errors import PolicyViolationError, RequestTimedOutError, UnknownBrokerIdError
    from kafka.structs import TopicPartition

    from bench.run import timeline

    monkeypatch.setattr(timeline, "REQUEST_BACKOFF_S", 0.01)
    run = FakeRun(_scenario(30), move_s=0)
    admin = FakeAdmin(3, RequestTimedOutError("controller unreachable"))
    run.admin = lambda: admin
    tp = TopicPartition("a", 0)
    assert timeline._alter_reassignments(run, {tp: [2]}, time.time() + 5) == {tp: None}
    assert admin.calls == 4
    admin = FakeAdmin(2, UnknownBrokerIdError(1))  # the controller it knew is gone: ask Metadata again
    admin._controller_id = 1
    assert timeline._alter_reassignments(run, {tp: [2]}, time.time() + 5) == {tp: None}
    assert admin.calls == 3 and admin._controller_id is None
    from kafka.errors import ReassignmentInProgressError

    class Busy(FakeAdmin):  # a partition still moving on a system that cannot replace its move
        def alter_partition_reassignments(self, wanted, timeout_ms):
            self.calls += 1
            return {tp: (ReassignmentInProgressError if self.calls <= 2 else None) for tp in wanted}

    admin = Busy(0, None)
    assert timeline._alter_reassignments(run, {tp: [2]}, time.time() + 5) == {tp: None} and admin.calls == 3
    admin = FakeAdmin(1, PolicyViolationError("no"))
    with pytest.raises(PolicyViolationError):
        timeline._alter_reassignments(run, {tp: [2]}, time.time() + 5)
    assert admin.calls == 1
    admin = FakeAdmin(100, RequestTimedOutError("controller unreachable"))
    with pytest.raises(RequestTimedOutError):  # until the deadline, then its error
        timeline._alter_reassignments(run, {tp: [2]}, time.time() + 0.1)


def test_a_move_a_later_action_replaced_ends_ok_as_superseded(monkeypatch):
    from bench.run import timeline

    monkeypatch.setattr(timeline, "POLL_INTERVAL_S", 0.01)
    run = FakeRun(_scenario(30), move_s=0)
    run.windows = type("W", (), {"end": lambda self, i, t: None})()
    run.state.metadata = {("a", 0): {"replicas": [1], "leader": 1}}  # never reaches [2]
    run.state.requested_by[("a", 0)] = 1  # a later action asked for another target
    sched = timeline.MoveScheduler([("a", 0, [2], [1])], None)
    sched.take()
    timeline.watch_moves(run, 0, run.sc.actions[0], sched, {}, time.time())
    (end,) = [d for e, d in run.events if e == "action_end"]
    assert end["ok"] is True and end["superseded"] == {"a-0": 1} and end["unfinished"] == []
    assert [d for e, d in run.events if e == "move_superseded"] == [
        {"action_id": 0, "topic": "a", "partition": 0, "by": 1}]


class RecordingEstimator:
    """Records when the timeline asks for samples and for the estimate (bench/run/move_estimate.py's
    RunEstimator on a live cluster)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def prepare(self, i, at):
        self.calls.append(("prepare", i, time.time(), at))

    def estimate(self, i, plan, concurrency):
        self.calls.append(("estimate", i, plan, concurrency))
        return {"partitions": [{"topic": t, "partition": p, "seconds": 2.0} for t, p, _ in plan], "total_seconds": 2.0}


def test_a_move_is_sampled_a_window_before_its_time_and_estimated_before_its_request(monkeypatch, moves_recorded):
    from bench.run import timeline

    monkeypatch.setattr(timeline, "RUN_WINDOW_S", 0.3)
    sc = parse_scenario({
        "name": "t", "system": {"kind": "replication", "brokers": 3},
        "workload": {"topics": [{"name": "a", "partitions": 1, "replication_factor": 1}], "message_bytes": "1KiB",
                     "produce_rate_msgs_per_s": 10, "duration_s": 30},
        "actions": [{"at_s": 0.5, "kind": "reassign", "topic": "a", "partition": 0, "to": [2]}],
    }, "t.yaml")
    run = FakeRun(sc, move_s=0)
    run.estimator = RecordingEstimator()
    t0 = time.time()
    run_timeline(run, t0)
    (prep,) = [c for c in run.estimator.calls if c[0] == "prepare"]
    assert prep[1] == 0 and prep[3] == pytest.approx(t0 + 0.5)
    assert 0.15 <= prep[2] - t0 <= 0.4  # the window before the move's time, not at it

    # carry_out: the estimate's event comes before the action's start (the request's time)
    run.windows = type("W", (), {"add": lambda self, *a: None, "end": lambda self, i, t: None})()
    run.thread = lambda target, name, *args: None  # no request: only what precedes it
    timeline.carry_out(run, 0, sc.actions[0], [("a", 0, [2])], {}, t0)
    names = [e for e, _ in run.events]
    assert names.index("move_estimate") < names.index("action_start")
    (est,) = [d for e, d in run.events if e == "move_estimate"]
    assert est["action_id"] == 0 and est["total_seconds"] == 2.0
    assert ("estimate", 0, [("a", 0, [2])], None) in run.estimator.calls


def test_the_loads_ack_latency_before_a_move_is_the_median_of_its_progress_lines_in_the_window():
    """RunState.ack_between (a run's estimates: the producers' ack latency now): the median of the
    load's progress lines' medians inside the window, in seconds; None without any."""
    st = RunState("r", _scenario(5))
    assert st.ack_between(0, 1e12) is None
    for ts, p50 in ((10.0, 100.0), (10.5, 300.0), (11.0, 200.0), (20.0, 900.0)):
        st.load_acks.append((ts, p50))
    assert st.ack_between(10.0, 11.0) == pytest.approx(0.2)  # the line at 20 s is outside
    assert st.ack_between(12.0, 19.0) is None
