"""The action timeline (Jepsen's nemesis and the operator in one): every action of a scenario at
its ``at_s`` (seconds after the load started), recorded in the history as ``action_start`` /
``action_end`` events. Moves go through the Kafka admin API (AlterPartitionReassignments) as an
operator's tool would; faults act on the cluster's processes by PID.

A new action kind = its name in ``bench/run/scenario.py`` (``ActionKind`` and its fields) and a
handler in :data:`HANDLERS` here.
"""
from __future__ import annotations

import logging
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
from bench.run.scenario import Action

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


def _tps(tps: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in tps]


def kill_broker(run: Any, i: int, a: Action, t_zero: float) -> None:
    tps = partitions_on(run.state.metadata_snapshot(), a.broker)
    run.event(EVENT_ACTION_START, {**_base(i, a), "broker": a.broker, "partitions": _tps(tps)})
    run.cluster.kill_broker(a.broker)
    _done(run, i, a, f"broker {a.broker} killed", broker=a.broker)


def restart_broker(run: Any, i: int, a: Action, t_zero: float) -> None:
    run.event(EVENT_ACTION_START, {**_base(i, a), "broker": a.broker})
    run.cluster.restart_broker(a.broker, timeout=60)
    _done(run, i, a, f"broker {a.broker} serving", broker=a.broker)


# -- moves -------------------------------------------------------------------------------------


def move(run: Any, i: int, a: Action, t_zero: float) -> None:
    """reassign, move_set, add_broker_and_rebalance, drain_broker: plan, request, watch."""
    st = run.state.actions[i]
    base = _base(i, a)
    brokers = sorted(run.cluster.brokers)
    if a.kind == "add_broker_and_rebalance":
        new = run.sc.added_broker_ids()[i]
        t0 = time.time()
        run.event(EVENT_BROKER_STARTING, {**base, "broker": new})
        run.cluster.start_broker(new, timeout=60)
        run.event(EVENT_BROKER_STARTED, {**base, "broker": new, "seconds": time.time() - t0})
        plan = rebalance_plan(run.state.metadata_snapshot(), sorted(run.cluster.brokers), new)
    elif a.kind == "drain_broker":
        plan = drain_plan(run.state.metadata_snapshot(), brokers, a.broker, a.to)
    else:
        plan = [(m.topic, m.partition, list(m.to)) for m in a.moves()]
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
    from kafka.structs import TopicPartition

    res = run.admin().alter_partition_reassignments(
        {TopicPartition(t, p): to for t, p, to in plan}, timeout_ms=30000)
    errors = {f"{tp.topic}-{tp.partition}": (e.__name__ if isinstance(e, type) else str(e))
              for tp, e in res.items() if e is not None}
    accepted = [(t, p, to) for t, p, to in plan if f"{t}-{p}" not in errors]
    run.event(EVENT_REASSIGN_REQUESTED, {**base, "accepted": len(accepted), "errors": errors,
                                         "request_seconds": time.time() - start})
    if not accepted:
        st.status, st.ended, st.detail = "failed", time.time(), f"rejected: {errors}"
        run.event(EVENT_ACTION_END, {**base, "ok": False, "errors": errors})
        run.windows.end(i, time.time())
        return
    st.detail = f"moving {len(accepted)} partition(s)" + (f", {len(errors)} rejected" if errors else "")
    run.thread(watch_moves, f"watch-{i}", run, i, a, accepted, errors, t_zero)


def watch_moves(run: Any, i: int, a: Action, plan: list[tuple[str, int, list[int]]], errors: dict,
                t_zero: float) -> None:
    """A move is done when the client sees the target replica set with a leader in it."""
    st = run.state.actions[i]
    deadline = t_zero + run.sc.workload.duration_s + MOVE_GRACE_S
    pending = {(t, p): to for t, p, to in plan}
    while pending and time.time() < deadline and not run.state.stop.is_set():
        md = run.state.metadata_snapshot()
        for tp, to in list(pending.items()):
            m = md.get(tp)
            if m and set(m["replicas"]) == set(to) and m["leader"] in to:
                del pending[tp]
                run.event(EVENT_MOVE_OBSERVED, {"action_id": i, "topic": tp[0], "partition": tp[1],
                                                "leader": m["leader"], "replicas": m["replicas"]},
                          topic=tp[0], partition=tp[1])
        st.detail = f"{len(plan) - len(pending)}/{len(plan)} moved"
        time.sleep(POLL_INTERVAL_S)
    now = time.time()
    run.windows.end(i, now)
    ok = not pending and not errors
    st.status = "done" if not pending else "timed out"
    st.ended = now
    run.event(EVENT_ACTION_END, {"action_id": i, "action": a.kind, "ok": ok, "completed": not pending,
                                 "unfinished": [f"{t}-{p}" for t, p in pending], "errors": errors,
                                 "seconds": now - (st.started or now)})


HANDLERS: dict[str, Callable[[Any, int, Action, float], None]] = {
    "reassign": move,
    "move_set": move,
    "add_broker_and_rebalance": move,
    "drain_broker": move,
    "kill_broker": kill_broker,
    "restart_broker": restart_broker,
}
