"""The action timeline (Jepsen's nemesis and the operator in one): every action of a scenario at
its ``at_s`` (seconds after the load started), recorded in the history as ``action_start`` /
``action_end`` events. Moves go through the Kafka admin API (AlterPartitionReassignments) as an
operator's tool would; faults act on the cluster's processes by PID (kill -9 and restart of a
broker or the controller, SIGSTOP / SIGCONT of a broker, stop / start of the object store) or on
its emulated network (a broker's link cut and restored; any link's rate changed).

A new action kind = its name in ``bench/scenario.py`` (``ActionKind`` and its fields) and a
handler in :data:`HANDLERS` here; a new fault also gets its recovery action in
``scenario.FAULT_RECOVERY`` and its process operations in ``_DO``.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.history.names import (
    EVENT_ACTION_END,
    EVENT_ACTION_START,
    EVENT_BROKER_STARTED,
    EVENT_BROKER_STARTING,
    EVENT_MOVE_OBSERVED,
    EVENT_REASSIGN_REQUESTED,
)
from bench.run.observe import POLL_INTERVAL_S
from bench.run.planners import drain_plan, partitions_on, rebalance_plan
from bench.scenario import FAULT_ACTIONS, Action

MOVE_GRACE_S = 30.0  # a move still running when the load ends gets this long to finish

log = logging.getLogger("bench.run.timeline")


def run_timeline(run: Any, t_zero: float) -> None:
    """Carry out every action of ``run.sc`` in order, each at ``t_zero + at_s``."""
    for i, a in enumerate(run.sc.actions):
        if not run.sleep_until(t_zero + a.at_s):
            return
        st = run.state.actions[i]
        st.status, st.started = "running", time.time()
        try:
            HANDLERS[a.kind](run, i, a, t_zero)
        except Exception as exc:
            log.exception("action %d (%s) failed", i, a.kind)
            st.status, st.detail, st.ended = "failed", f"{type(exc).__name__}: {exc}", time.time()
            run.event(EVENT_ACTION_END, {"action_id": i, "action": a.kind, "ok": False, "error": st.detail})


def _base(i: int, a: Action) -> dict[str, Any]:
    return {"action_id": i, "action": a.kind, "at_s": a.at_s}


def _done(run: Any, i: int, a: Action, detail: str, **fields: Any) -> None:
    st = run.state.actions[i]
    st.status, st.ended, st.detail = "done", time.time(), detail
    run.event(EVENT_ACTION_END, {**_base(i, a), "ok": True, **fields})


# -- faults ------------------------------------------------------------------------------------
# A fault's action_start names the partitions it affects (the checkers' outage window is per
# affected partition); its recovery action (FAULT_RECOVERY) only names its broker, if any.

_DO: dict[str, Callable[[Any, Action], None]] = {
    "kill_broker": lambda c, a: c.kill_broker(a.broker),
    "restart_broker": lambda c, a: c.restart_broker(a.broker, timeout=60),
    "pause_broker": lambda c, a: c.pause_broker(a.broker),
    "resume_broker": lambda c, a: c.resume_broker(a.broker),
    "kill_controller": lambda c, a: c.kill_controller(),
    "restart_controller": lambda c, a: c.restart_controller(timeout=60),
    "stop_object_store": lambda c, a: c.stop_object_store(),
    "start_object_store": lambda c, a: c.start_object_store(timeout=60),
    "isolate_broker": lambda c, a: c.isolate_broker(a.broker),
    "heal_broker": lambda c, a: c.heal_broker(a.broker),
}


def _tps(tps: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in tps]


def affected_partitions(run: Any, a: Action) -> list[tuple[str, int]]:
    """A broker fault affects the partitions with a replica on (or led by) the broker, as the
    client sees them now, and those a running move takes from it or brings to it (mid-move the
    metadata may show neither the closing source nor the target that does not serve yet); every
    partition depends on the controller and the object store."""
    if a.broker is None:
        return run.sc.partitions()
    moving = {tp for plan in run.state.moving.values() for tp, brokers in plan.items() if a.broker in brokers}
    return sorted(set(partitions_on(run.state.metadata_snapshot(), a.broker)) | moving)


def fault(run: Any, i: int, a: Action, t_zero: float) -> None:
    """A fault or a recovery action: the process operation of ``_DO``, between action_start and
    action_end (a restart's action_end is when it serves again)."""
    who = {"broker": a.broker} if a.broker is not None else {}
    start = dict(_base(i, a), **who)
    if a.kind in FAULT_ACTIONS:
        start["partitions"] = _tps(affected_partitions(run, a))
    run.event(EVENT_ACTION_START, start)
    _DO[a.kind](run.cluster, a)
    _done(run, i, a, a.kind.replace("_", " ") + (f" {a.broker}" if a.broker is not None else ""), **who)


def link_rate(run: Any, i: int, a: Action, t_zero: float) -> None:
    """set_link_rate: one node's link changes rate while traffic flows (the link_sample events
    carry the rate in force at each sample)."""
    node = a.link_node
    old = run.cluster.network.rates.get(node)
    run.event(EVENT_ACTION_START, {**_base(i, a), "node": node, "rate": a.rate, "previous_rate": old})
    run.cluster.set_link_rate(node, a.rate)
    _done(run, i, a, f"{node} link {old} -> {a.rate}", node=node, rate=a.rate)


# -- moves -------------------------------------------------------------------------------------


def move(run: Any, i: int, a: Action, t_zero: float) -> None:
    """reassign, move_set, add_broker_and_rebalance, drain_broker: plan, request, watch."""
    st = run.state.actions[i]
    base = _base(i, a)
    brokers = run.cluster.broker_ids()
    if a.kind == "add_broker_and_rebalance":
        new = run.sc.added_broker_ids()[i]
        t0 = time.time()
        run.event(EVENT_BROKER_STARTING, {**base, "broker": new})
        run.cluster.start_broker(new, timeout=60)
        run.event(EVENT_BROKER_STARTED, {**base, "broker": new, "seconds": time.time() - t0})
        plan = rebalance_plan(run.state.metadata_snapshot(), run.cluster.broker_ids(), new)
    elif a.kind == "drain_broker":
        plan = drain_plan(run.state.metadata_snapshot(), brokers, a.broker, a.to)
    else:
        current: dict[str, dict[int, list[int]]] = {}
        for (t, p), m in run.state.metadata_snapshot().items():
            current.setdefault(t, {})[p] = list(m.get("replicas") or ())
        plan = [(m.topic, m.partition, list(m.to)) for m in a.moves(current)]
    md = run.state.metadata_snapshot()
    entries = [{"topic": t, "partition": p, "to": to, "from": md.get((t, p), {}).get("replicas")}
               for t, p, to in plan]
    start = time.time()
    run.windows.add(i, [(t, p) for t, p, _ in plan], start)
    run.event(EVENT_ACTION_START, {**base, "partitions": entries, **(
        {"topic": plan[0][0], "partition": plan[0][1], "to": plan[0][2]} if a.kind == "reassign" else {})},
        ts=start)
    if not plan:
        st.status, st.ended, st.detail = "done", time.time(), "nothing to move"
        run.event(EVENT_ACTION_END, {**base, "ok": True, "partitions": 0})
        run.windows.end(i, time.time())
        return
    run.state.moving[i] = {(t, p): set(to) | set(md.get((t, p), {}).get("replicas") or ()) for t, p, to in plan}
    sched = MoveScheduler([(t, p, to, list(md.get((t, p), {}).get("replicas") or ())) for t, p, to in plan],
                          a.concurrency)
    errors: dict[str, str] = {}
    accepted: list = []
    while not accepted and not sched.idle():  # a batch wholly rejected frees its slots for the next
        accepted, errs = _submit(run, i, a, sched, start)
        errors.update(errs)
    if not accepted:
        st.status, st.ended, st.detail = "failed", time.time(), f"rejected: {errors}"
        run.state.moving.pop(i, None)
        run.event(EVENT_ACTION_END, {**base, "ok": False, "errors": errors})
        run.windows.end(i, time.time())
        return
    st.detail = f"moving {len(accepted)} partition(s)" + (f", {len(errors)} rejected" if errors else "") + (
        f", {sched.queued()} queued" if sched.queued() else "")
    run.thread(watch_moves, f"watch-{i}", run, i, a, sched, errors, t_zero)


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


def _submit(run: Any, i: int, a: Action, sched: MoveScheduler, start: float,
            ) -> tuple[list[tuple[str, int, list[int]]], dict[str, str]]:
    """One AlterPartitionReassignments for the waiting moves that fit now; records
    reassign_requested (with the partitions it carried, so queued moves' submit times are in the
    history). Rejected moves leave flight at once."""
    batch = sched.take()
    if not batch:
        return [], {}
    from kafka.structs import TopicPartition

    t0 = time.time()
    with _ADMIN_LOCK:  # kafka-python's admin client is not thread-safe; watchers submit too
        res = run.admin().alter_partition_reassignments(
            {TopicPartition(t, p): to for t, p, to in batch}, timeout_ms=30000)
    errors = {f"{tp.topic}-{tp.partition}": (e.__name__ if isinstance(e, type) else str(e))
              for tp, e in res.items() if e is not None}
    accepted = [(t, p, to) for t, p, to in batch if f"{t}-{p}" not in errors]
    for t, p, _ in batch:
        if f"{t}-{p}" in errors:
            sched.finish((t, p))
    run.event(EVENT_REASSIGN_REQUESTED, {**_base(i, a), "accepted": len(accepted), "errors": errors,
                                         "request_seconds": time.time() - t0,
                                         "submitted_after_s": t0 - start,
                                         "partitions": _tps([(t, p) for t, p, _ in batch])}, ts=t0)
    return accepted, errors


_ADMIN_LOCK = threading.Lock()


def watch_moves(run: Any, i: int, a: Action, sched: MoveScheduler, errors: dict, t_zero: float) -> None:
    """A move is done when the client sees the target replica set with a leader in it; with a
    concurrency limit its slots then go to the next waiting moves."""
    st = run.state.actions[i]
    deadline = t_zero + run.sc.workload.duration_s + MOVE_GRACE_S
    start = st.started or time.time()
    total = len(sched.inflight) + sched.queued()
    while not sched.idle() and time.time() < deadline and not run.state.stop.is_set():
        md = run.state.metadata_snapshot()
        for tp, (to, _) in list(sched.inflight.items()):
            m = md.get(tp)
            if m and set(m["replicas"]) == set(to) and m["leader"] in to:
                sched.finish(tp)
                run.event(EVENT_MOVE_OBSERVED, {"action_id": i, "topic": tp[0], "partition": tp[1],
                                                "leader": m["leader"], "replicas": m["replicas"]},
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
                                 "seconds": now - (st.started or now)})


HANDLERS: dict[str, Callable[[Any, int, Action, float], None]] = {
    "reassign": move,
    "move_set": move,
    "add_broker_and_rebalance": move,
    "drain_broker": move,
    **{kind: fault for kind in _DO},
    "set_link_rate": link_rate,
}
