"""The action timeline (Jepsen's nemesis and the operator in one): every action of a scenario at
its ``at_s`` (seconds after the load started), recorded in the history as ``action_start`` /
``action_end`` events. What an action does is its spec's (``bench/scenario/actions/``): faults act
on the cluster's processes (through the cluster-control interface the launched and the external
cluster implement) or on its emulated network; a move makes a plan, and this module carries it out
through the Kafka admin API (AlterPartitionReassignments) as an operator's tool would
(:class:`MoveScheduler`, :func:`watch_moves`).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from bench.history.names import (
    EVENT_ACTION_END,
    EVENT_ACTION_START,
    EVENT_MOVE_ESTIMATE,
    EVENT_MOVE_OBSERVED,
    EVENT_MOVE_SUPERSEDED,
    EVENT_REASSIGN_REQUESTED,
    POLL_INTERVAL_S,
)
from bench.history.journal import MoveWindows
from bench.run.move_estimate import RUN_WINDOW_S, RunEstimator
from bench.run.state import RunState
from bench.scenario import Action, Scenario
from bench.scenario.actions.context import ClusterControl
from bench.scenario.actions.plans import Metadata, Plan
from bench.scenario.actions.spec import event_base

MOVE_GRACE_S = 30.0  # a move still running when the load ends gets this long to finish
# A request that fails with a retriable error (the controller restarting, a timeout) is sent again
# until this long after the first try, as Kafka's AdminClient does within default.api.timeout.ms.
REQUEST_RETRY_S = 60.0
REQUEST_BACKOFF_S = 1.0

log = logging.getLogger("bench.run.timeline")


class RunHandle(Protocol):
    """What the timeline uses of a run (bench/run/runner.py: Run)."""

    sc: Scenario
    state: RunState
    cluster: ClusterControl
    windows: MoveWindows
    estimator: RunEstimator | None  # the estimates before each move, if the run makes them

    def event(self, name: str, detail: dict[str, Any] | None = None, *, ts: float | None = None,
              topic: str | None = None, partition: int = -1) -> None: ...

    def thread(self, target: Callable, name: str, *args: Any) -> threading.Thread: ...

    def sleep_until(self, t: float) -> bool: ...

    def admin(self) -> Any: ...


def run_timeline(run: RunHandle, t_zero: float) -> None:
    """Carry out every action of ``run.sc`` in order, each at ``t_zero + at_s``."""
    ctx = TimelineContext(run, t_zero)
    end = t_zero + run.sc.workload.duration_s
    estimator = run.estimator
    for i, a in enumerate(run.sc.actions):
        if a.spec.is_move and estimator is not None:  # the estimate's first look, a window before
            if not run.sleep_until(t_zero + a.at_s - RUN_WINDOW_S):
                return
            estimator.prepare(i, t_zero + a.at_s)
        if not run.sleep_until(t_zero + a.at_s):
            return
        st = run.state.actions[i]
        if a.after_moves:
            while run.state.moving and time.time() < end:
                if not run.sleep_until(time.time() + 0.1):
                    return
            if run.state.moving:  # the schedule did not fit the load: say so, never a late move
                st.status, st.detail, st.ended = "failed", "earlier moves still running when the load ended", time.time()
                run.event(EVENT_ACTION_END, {"action_id": i, "action": a.kind, "ok": False, "error": st.detail})
                continue
        st.status, st.started = "running", time.time()
        try:
            a.spec.execute(ctx, i, a)
        except Exception as exc:
            log.exception("action %d (%s) failed", i, a.kind)
            st.status, st.detail, st.ended = "failed", f"{type(exc).__name__}: {exc}", time.time()
            run.event(EVENT_ACTION_END, {"action_id": i, "action": a.kind, "ok": False, "error": st.detail})


class TimelineContext:
    """The run as its actions see it (bench/scenario/actions/context.py: ActionContext)."""

    def __init__(self, run: RunHandle, t_zero: float) -> None:
        self.run = run
        self.t_zero = t_zero
        self.cluster = run.cluster

    def event(self, name: str, detail: dict[str, Any], *, ts: float | None = None) -> None:
        self.run.event(name, detail, ts=ts)

    def finish(self, i: int, a: Action, detail: str, **fields: Any) -> None:
        st = self.run.state.actions[i]
        st.status, st.ended, st.detail = "done", time.time(), detail
        self.run.event(EVENT_ACTION_END, {**event_base(i, a), "ok": True, **fields})

    def metadata(self) -> Metadata:
        return self.run.state.metadata_snapshot()

    def moving(self) -> dict[int, dict[tuple[str, int], set[int]]]:
        return self.run.state.moving

    def partitions(self) -> list[tuple[str, int]]:
        return self.run.sc.partitions()

    def added_broker(self, i: int) -> int:
        return self.run.sc.added_broker_ids()[i]

    def carry_out(self, i: int, a: Action, plan: Plan, start: dict[str, Any]) -> None:
        carry_out(self.run, i, a, plan, start, self.t_zero)


def _tps(tps: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in tps]


# -- moves -------------------------------------------------------------------------------------


def carry_out(run: RunHandle, i: int, a: Action, plan: Plan, fields: dict[str, Any], t_zero: float) -> None:
    """A move's plan: action_start (its partitions, from and to), the first request, then a
    watcher thread until every move is seen done."""
    st = run.state.actions[i]
    base = event_base(i, a)
    estimator = run.estimator
    if plan and estimator is not None:  # before the request, as an operator's --estimate
        run.event(EVENT_MOVE_ESTIMATE, {**base, **estimator.estimate(i, plan, a.concurrency)})
    md = run.state.metadata_snapshot()
    entries = [{"topic": t, "partition": p, "to": to, "from": md.get((t, p), {}).get("replicas")}
               for t, p, to in plan]
    start = time.time()
    run.windows.add(i, [(t, p) for t, p, _ in plan], start)
    run.event(EVENT_ACTION_START, {**base, "partitions": entries, **fields}, ts=start)
    if not plan:
        st.status, st.ended, st.detail = "done", time.time(), "nothing to move"
        run.event(EVENT_ACTION_END, {**base, "ok": True, "partitions": 0})
        run.windows.end(i, time.time())
        return
    run.state.moving[i] = {(t, p): set(to) | set(md.get((t, p), {}).get("replicas") or ()) for t, p, to in plan}
    sched = MoveScheduler([(t, p, to, list(md.get((t, p), {}).get("replicas") or ())) for t, p, to in plan],
                          a.concurrency)
    # Its own thread: a request retried while the controller restarts must not hold up the
    # actions after it (the restart among them).
    run.thread(submit_and_watch, f"watch-{i}", run, i, a, sched, start, t_zero)


def submit_and_watch(run: RunHandle, i: int, a: Action, sched: MoveScheduler, start: float, t_zero: float) -> None:
    """The first request of a move's plan, then :func:`watch_moves` until every move is seen done."""
    st = run.state.actions[i]
    errors: dict[str, str] = {}
    accepted: list = []
    try:
        while not accepted and not sched.idle():  # a batch wholly rejected frees its slots for the next
            accepted, errs = _submit(run, i, a, sched, start)
            errors.update(errs)
    except Exception as exc:  # noqa: BLE001 - the request's own error, after its retries
        log.exception("action %d (%s) failed", i, a.kind)
        errors["request"] = f"{type(exc).__name__}: {exc}"
    if not accepted:
        st.status, st.ended, st.detail = "failed", time.time(), f"rejected: {errors}"
        run.state.moving.pop(i, None)
        run.event(EVENT_ACTION_END, {**event_base(i, a), "ok": False, "errors": errors})
        run.windows.end(i, time.time())
        return
    st.detail = f"moving {len(accepted)} partition(s)" + (f", {len(errors)} rejected" if errors else "") + (
        f", {sched.queued()} queued" if sched.queued() else "")
    watch_moves(run, i, a, sched, errors, t_zero)


class MoveScheduler:
    """Which moves of a plan are in flight. ``concurrency`` = Cruise Control's
    ``num.concurrent.partition.movements.per.broker``: at most that many moves in flight per broker,
    counting every broker a move adds or removes a replica on (its sources and targets). Moves start
    in plan order; one that does not fit waits while later ones that fit go (Cruise Control's
    executor does the same). None = the whole plan at once (one request)."""

    def __init__(self, plan: list[tuple[str, int, list[int], list[int]]], concurrency: int | None) -> None:
        self.concurrency = concurrency
        self.waiting = list(plan)  # (topic, partition, to, from)
        self.inflight: dict[tuple[str, int], tuple[list[int], set[int]]] = {}
        self.load: dict[int, int] = {}

    @staticmethod
    def involved(to: list[int], src: list[int]) -> set[int]:
        return set(to) ^ set(src)

    def take(self) -> list[tuple[str, int, list[int]]]:
        """The waiting moves that fit now (marked in flight)."""
        out, keep = [], []
        for t, p, to, src in self.waiting:
            inv = self.involved(to, src)
            if self.concurrency is None or all(self.load.get(b, 0) < self.concurrency for b in inv):
                for b in inv:
                    self.load[b] = self.load.get(b, 0) + 1
                self.inflight[(t, p)] = (to, inv)
                out.append((t, p, to))
            else:
                keep.append((t, p, to, src))
        self.waiting = keep
        return out

    def finish(self, tp: tuple[str, int]) -> None:
        """A move left flight (done or rejected): its brokers' slots are free again."""
        _, inv = self.inflight.pop(tp)
        for b in inv:
            self.load[b] -= 1

    def queued(self) -> int:
        return len(self.waiting)

    def idle(self) -> bool:
        return not self.waiting and not self.inflight


def _submit(run: RunHandle, i: int, a: Action, sched: MoveScheduler, start: float,
            ) -> tuple[list[tuple[str, int, list[int]]], dict[str, str]]:
    """One AlterPartitionReassignments for the waiting moves that fit now; records
    reassign_requested (with the partitions it carried, so queued moves' submit times are in the
    history). Rejected moves leave flight at once."""
    batch = sched.take()
    if not batch:
        return [], {}
    from kafka.structs import TopicPartition

    t0 = time.time()
    res = _alter_reassignments(run, {TopicPartition(t, p): to for t, p, to in batch}, t0 + REQUEST_RETRY_S)
    errors = {f"{tp.topic}-{tp.partition}": (e.__name__ if isinstance(e, type) else str(e))
              for tp, e in res.items() if e is not None}
    accepted = [(t, p, to) for t, p, to in batch if f"{t}-{p}" not in errors]
    for t, p, _ in batch:
        if f"{t}-{p}" in errors:
            sched.finish((t, p))
        else:
            run.state.requested_by[(t, p)] = i
    run.event(EVENT_REASSIGN_REQUESTED, {**event_base(i, a), "accepted": len(accepted), "errors": errors,
                                         "request_seconds": time.time() - t0,
                                         "submitted_after_s": t0 - start,
                                         "partitions": _tps([(t, p) for t, p, _ in batch])}, ts=t0)
    return accepted, errors


_ADMIN_LOCK = threading.Lock()


def _retriable(e: Any) -> bool:
    """Worth sending again: Kafka's retriable errors, and REASSIGNMENT_IN_PROGRESS from a system
    whose moves cannot be replaced mid-way (shared storage's six steps): the operator waits for the
    partition's move to end, as Cruise Control's executor never submits a partition still moving."""
    from kafka.errors import ReassignmentInProgressError

    cls = e if isinstance(e, type) else type(e)
    return bool(getattr(e, "retriable", False)) or issubclass(cls, ReassignmentInProgressError)


def _stale_controller(e: Any) -> bool:
    """kafka-python's admin client keeps the controller id Metadata named; once that broker is gone
    (killed, restarted) every request to it fails with UnknownBrokerIdError, which Kafka's own
    AdminClient would answer by asking Metadata again."""
    from kafka.errors import NodeNotReadyError, UnknownBrokerIdError

    return isinstance(e, (UnknownBrokerIdError, NodeNotReadyError))


def _alter_reassignments(run: RunHandle, wanted: dict, deadline: float) -> dict:
    """AlterPartitionReassignments for ``wanted`` ({TopicPartition: replicas}) -> {TopicPartition:
    None or its error}; what fails with a retriable error (the whole request or a partition) is
    sent again after a backoff until ``deadline``, the last error kept after it."""
    out: dict = {}
    while wanted:
        try:
            with _ADMIN_LOCK:  # kafka-python's admin client is not thread-safe; watchers submit too
                res = run.admin().alter_partition_reassignments(wanted, timeout_ms=30000)
        except Exception as e:  # noqa: BLE001 - kafka-python raises the request's own error
            stale = _stale_controller(e)
            if stale:
                run.admin()._controller_id = None  # the next request asks Metadata for the controller
            if not (stale or _retriable(e)) or time.time() + REQUEST_BACKOFF_S >= deadline:
                raise
            log.info("reassignment request: %s; again in %.0f s", e, REQUEST_BACKOFF_S)
            time.sleep(REQUEST_BACKOFF_S)
            continue
        out.update(res)
        again = {tp: wanted[tp] for tp, e in res.items() if e is not None and _retriable(e)}
        if not again or time.time() + REQUEST_BACKOFF_S >= deadline:
            break
        time.sleep(REQUEST_BACKOFF_S)
        wanted = again
    return out


def _serving(run: RunHandle, tp: tuple[str, int]) -> bool:
    """The partition's leader answers ListOffsets: a shared-storage owner is elected before it has
    opened the partition (seconds at 100,000 objects), and a move that follows must not start
    while the one before it has not finished."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    try:
        with _ADMIN_LOCK:
            run.admin().list_partition_offsets({TopicPartition(*tp): OffsetSpec.LATEST}, timeout_ms=1000)
        return True
    except Exception:  # noqa: BLE001 - not serving yet (NOT_LEADER_OR_FOLLOWER, stale metadata): next tick
        return False


def watch_moves(run: RunHandle, i: int, a: Action, sched: MoveScheduler, errors: dict, t_zero: float) -> None:
    """A move is done when the client sees the target replica set with a leader in it and that
    leader serves the partition; with a concurrency limit its slots then go to the next waiting
    moves."""
    st = run.state.actions[i]
    deadline = t_zero + run.sc.workload.duration_s + MOVE_GRACE_S
    start = st.started or time.time()
    total = len(sched.inflight) + sched.queued()
    superseded: dict[str, int] = {}
    while not sched.idle() and time.time() < deadline and not run.state.stop.is_set():
        md = run.state.metadata_snapshot()
        for tp, (to, _) in list(sched.inflight.items()):
            m = md.get(tp)
            if m and set(m["replicas"]) == set(to) and m["leader"] in to and _serving(run, tp):
                sched.finish(tp)
                run.event(EVENT_MOVE_OBSERVED, {"action_id": i, "topic": tp[0], "partition": tp[1],
                                                "leader": m["leader"], "replicas": m["replicas"]},
                          topic=tp[0], partition=tp[1])
            elif (by := run.state.requested_by.get(tp, i)) != i:
                # the cluster now moves it where a later action asked: nothing left to wait for
                sched.finish(tp)
                superseded[f"{tp[0]}-{tp[1]}"] = by
                run.event(EVENT_MOVE_SUPERSEDED, {"action_id": i, "topic": tp[0], "partition": tp[1], "by": by},
                          topic=tp[0], partition=tp[1])
        if sched.queued():
            errors.update(_submit(run, i, a, sched, start)[1])
        pending = len(sched.inflight) + sched.queued()
        st.detail = f"{total - pending}/{total} moved" + (f" ({sched.queued()} queued)" if sched.queued() else "")
        time.sleep(POLL_INTERVAL_S)
    now = time.time()
    run.windows.end(i, now)
    run.state.moving.pop(i, None)
    unfinished = sorted(sched.inflight) + [(t, p) for t, p, _, _ in sched.waiting]
    ok = not unfinished and not errors
    st.status = "done" if not unfinished else "timed out"
    st.ended = now
    run.event(EVENT_ACTION_END, {"action_id": i, "action": a.kind, "ok": ok, "completed": not unfinished,
                                 "unfinished": [f"{t}-{p}" for t, p in unfinished], "errors": errors,
                                 **({"superseded": superseded} if superseded else {}),
                                 "seconds": now - (st.started or now)})
