"""The windows every metric of an action is measured over, defined once for the checkers
(bench/check/) and the Spark aggregation (bench/analysis/aggregate/) alike.

* **Latency windows** (:func:`latency_windows`): per action in start order, ``before`` =
  [max(load start, previous action's end), start), ``during`` = [start, end), ``after`` = [end,
  next action's start or the end of the load] (the only one closed on the right). An action's end
  is :attr:`Action.end`, else the next action's start (or the end of the load).
* **Unavailability windows** (:func:`unavailable_windows`), per action and partition it acts on:
  a move (any action but a fault or a recovery) from ``UNAVAILABLE_PRE_S`` before its start to
  ``UNAVAILABLE_POST_S`` after its end, clipped to the load ([start - pre, min(end + post, load
  end)]; the end of the load when the move's end is unknown); a fault from ``UNAVAILABLE_PRE_S``
  before it to the partition's first ack at or after its recovery (:func:`fault_recoveries`), so
  the window holds the whole outage however long it lasts (the end of the load without one). A
  recovery action has no window: it ends its fault's.
* **Move candidates** (:func:`move_markers`, :func:`move_candidates`): per move action and
  partition, the request, the new leader and the first leader change to it, from which
  ``move_seconds`` is measured.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.check.view import Action, HistoryView, hashable, tp_key, tp_of, uniq
from bench.history.names import EVENT_LEADER_CHANGE, EVENT_MOVE_COMPLETE, SOURCE_CLIENT
from bench.scenario import FAULT_RECOVERY, MOVE_ACTIONS, RECOVERY_ACTIONS

UNAVAILABLE_PRE_S = 1.0  # an unavailability window starts this long before the action
UNAVAILABLE_POST_S = 5.0  # ... and a move's ends this long after the move ends
PHASES = ("before", "during", "after")  # an action's latency windows, in order

Bounds = dict[str, tuple[float, float, bool]]  # phase -> (from, to, to inclusive)


def latency_windows(actions: list[Action], load_start: float, load_end: float) -> list[tuple[Action, Bounds]]:
    """Per action (in start order): its ``before`` / ``during`` / ``after`` windows (module doc)."""
    out = []
    prev_end = load_start
    for i, a in enumerate(actions):
        nxt = actions[i + 1].start if i + 1 < len(actions) else load_end
        end = a.end if a.end is not None else max(nxt, a.start)
        out.append((a, {"before": (max(load_start, prev_end), a.start, False),
                        "during": (a.start, end, False),
                        "after": (end, max(nxt, end), True)}))
        prev_end = end
    return out


def window_start(a: Action, load_start: float) -> float:
    """Where an action's unavailability window starts: UNAVAILABLE_PRE_S before it, not before the load."""
    return max(a.start - UNAVAILABLE_PRE_S, load_start)


def window_end(start: float, end: float, load_end: float) -> float:
    """Where a window from ``start`` around something that ended at ``end`` ends:
    UNAVAILABLE_POST_S later, clipped to the load, never before its start."""
    return max(min(end + UNAVAILABLE_POST_S, load_end), start)


def fault_window_end(start: float, first_ack: float | None, load_end: float) -> float:
    """A fault window's end: its partition's first ack at or after recovery, else the end of the load."""
    return max(first_ack if first_ack is not None else load_end, start)


def first_ack_at_or_after(ack: np.ndarray, ts: float | None) -> float | None:
    """The first of the sorted ``ack`` times at or after ``ts`` (None: no such ack, or no ``ts``)."""
    if ts is None:
        return None
    i = int(np.searchsorted(ack, ts, "left"))
    return float(ack[i]) if i < ack.size else None


@dataclass(frozen=True)
class UnavailableWindow:
    """One action's unavailability window on one partition. A fault's ``end`` is the end of the
    load until :func:`fault_window_end` closes it at the first ack after ``recovery``."""

    action: Action
    topic: str
    partition: int
    start: float
    end: float
    recovery: dict[str, Any] | None = None  # a fault's (fault_recoveries); None for a move

    @property
    def fault(self) -> bool:
        return self.action.kind in FAULT_RECOVERY


def unavailable_windows(v: HistoryView, load_start: float, load_end: float, leader_changes: list | None = None,
                        loaded: Iterable[tuple[str, int]] | None = None) -> list[UnavailableWindow]:
    """Every action's unavailability windows (module doc), in action order, partitions sorted.
    ``loaded``: the partitions with a send (what a fault naming no partitions affects), when ``v``
    holds no sends (the aggregate's view of events)."""
    if leader_changes is None:
        leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    return [w for a in v.actions for w in windows_of(v, a, load_start, load_end, leader_changes, loaded)]


def windows_of(v: HistoryView, a: Action, load_start: float, load_end: float, leader_changes: list,
               loaded: Iterable[tuple[str, int]] | None = None) -> list[UnavailableWindow]:
    """One action's unavailability windows (see :func:`unavailable_windows`)."""
    if a.kind in RECOVERY_ACTIONS:
        return []  # no window of its own: it ends its fault's
    w0 = window_start(a, load_start)
    if a.kind in FAULT_RECOVERY:
        return [UnavailableWindow(a, rec["topic"], rec["partition"], w0, max(load_end, w0), rec)
                for rec in fault_recoveries(v, a, leader_changes, loaded)]
    w1 = window_end(w0, a.end if a.end is not None else load_end, load_end)
    return [UnavailableWindow(a, tp[0], tp[1], w0, w1) for tp in sorted(a.partitions)]


def first_client_leader_change(leader_changes: list, tp: tuple[str, int], after: float, faulted: int) -> Any:
    """The first leader_change of ``tp`` a client saw (the metadata poller's, not a cluster
    journal's) after ``after`` to a live leader (>= 0) other than the faulted broker, or None."""
    return next((e for e in leader_changes
                 if e.ts > after and tp_of(e) == tp and e.detail.get("source", SOURCE_CLIENT) == SOURCE_CLIENT
                 and isinstance(e.detail.get("leader"), int) and e.detail["leader"] >= 0
                 and e.detail["leader"] != faulted), None)


def fault_recoveries(v: HistoryView, a: Action, leader_changes: list | None = None,
                     loaded: Iterable[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """Per partition a fault affected: when and how it recovered, as
    :func:`bench.check.moves.check_unavailable_seconds` defines it -> ``[{topic, partition,
    recovery_ts, recovered_by, recovery_action_id | new_leader}]`` (``recovery_ts`` None: no
    recovery). Events only, no acks (the window's end, the first ack at or after ``recovery_ts``,
    is the caller's). A controller / object-store fault naming no partitions affects every
    partition with a send: ``loaded``, else those of ``v``'s sends."""
    if leader_changes is None:
        leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    recovery_kind = FAULT_RECOVERY[a.kind]
    rec = next((r for r in v.actions
                if r.kind == recovery_kind and r.start >= a.start and r.ok is not False
                and (a.broker is None or r.broker == a.broker)), None)
    rec_ts = None if rec is None else (rec.end_event if rec.end_event is not None else rec.start)
    tps = a.partitions
    if not tps and a.broker is None:  # the controller / object store: every partition with load
        if loaded is not None:
            tps = set(loaded)
        else:
            keys = uniq(tp_key(v.s_topic, v.s_part))
            tps = {(v.topics[int(k) >> 32], int(k) & 0xFFFFFFFF) for k in keys[keys >= 0]}
    out = []
    for tp in sorted(tps):
        lc = first_client_leader_change(leader_changes, tp, a.start, a.broker) if a.broker is not None else None
        info: dict[str, Any] = {"topic": tp[0], "partition": tp[1], "recovery_ts": None, "recovered_by": None}
        if rec_ts is not None and (lc is None or rec_ts <= lc.ts):
            info.update(recovery_ts=rec_ts, recovered_by=recovery_kind, recovery_action_id=rec.action_id)
        elif lc is not None:
            info.update(recovery_ts=lc.ts, recovered_by=EVENT_LEADER_CHANGE, new_leader=lc.detail["leader"])
        out.append(info)
    return out


def longest_gap(ts: np.ndarray, w0: float, w1: float) -> tuple[float, float, float]:
    """Longest interval inside [w0, w1] containing none of the sorted times ``ts`` (acks,
    deliveries); the window's edges count as boundaries. -> (gap, start, end)."""
    inside = ts[(ts >= w0) & (ts <= w1)]
    pts = np.concatenate([[w0], inside, [w1]])
    d = np.diff(pts)
    i = int(np.argmax(d))
    return float(d[i]), float(pts[i]), float(pts[i + 1])


def fault_windows(v: HistoryView, a: Action, leader_changes: list) -> list[dict[str, Any]]:
    """The outage windows of one fault action, one per affected partition (:func:`fault_window`)."""
    return [fault_window(v, w) for w in windows_of(v, a, v.load_start, v.load_end, leader_changes)]


def fault_window(v: HistoryView, w: UnavailableWindow) -> dict[str, Any]:
    """A fault's window on one partition closed at the partition's first ack at or after its
    recovery, with the longest ack-free interval inside (summary.json's figures)."""
    a = w.action
    ack, _ = v.acks_of(w.topic, w.partition)
    first_ack = first_ack_at_or_after(ack, w.recovery["recovery_ts"])
    w1 = fault_window_end(w.start, first_ack, v.load_end)
    gap, g0, g1 = longest_gap(ack, w.start, w1)
    return {"action_id": a.action_id, "action": a.kind, "topic": w.topic, "partition": w.partition,
            "broker": a.broker, "window": [w.start, w1], "unavailable_seconds": gap, "gap": [g0, g1],
            **{k: x for k, x in w.recovery.items() if k not in ("topic", "partition")}, "first_ack_ts": first_ack}


def move_markers(a: Action, tp: tuple[str, int], completes: list, leader_changes: list) -> tuple[Any, Any, Any]:
    """For one move action and partition: its move_complete event, the new leader it names,
    and the first leader_change at or after the request to a target (the new owner), or None."""
    mc = next((e for e in completes if hashable(e.action_id) == a.action_id and tp_of(e) == tp), None)
    new_leader = mc.detail.get("new_leader") if mc is not None else None
    targets = [new_leader] if new_leader is not None else a.targets.get(tp)
    lc = next((e for e in leader_changes
               if tp_of(e) == tp and e.ts >= a.start
               and (e.action_id is None or hashable(e.action_id) == a.action_id)
               and isinstance(e.detail.get("leader"), int) and e.detail["leader"] >= 0
               and (not targets or e.detail["leader"] in targets)), None)
    return mc, new_leader, lc


@dataclass(frozen=True)
class MoveCandidate:
    """One partition of a move action: its request, and the leader change to its new owner."""

    action: Action
    topic: str
    partition: int
    complete: Any  # its move_complete event, or None
    new_leader: Any  # the new leader seen (leader change), else the one move_complete names
    leader_change: Any  # the first leader_change to a target at or after the request, or None


def move_candidates(v: HistoryView) -> list[MoveCandidate]:
    """Per move action (in start order) and partition it moves (sorted): :func:`move_markers`."""
    leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    completes = v.events_named(EVENT_MOVE_COMPLETE)
    out = []
    for a in v.actions:
        if a.kind not in MOVE_ACTIONS:
            continue
        for tp in sorted(a.partitions):
            mc, new_leader, lc = move_markers(a, tp, completes, leader_changes)
            out.append(MoveCandidate(a, tp[0], tp[1], mc, lc.detail["leader"] if lc is not None else new_leader, lc))
    return out


__all__ = [
    "PHASES", "UNAVAILABLE_POST_S", "UNAVAILABLE_PRE_S", "MoveCandidate", "UnavailableWindow", "fault_recoveries",
    "fault_window", "fault_window_end", "fault_windows", "first_ack_at_or_after", "latency_windows", "longest_gap", "move_candidates",
    "move_markers", "unavailable_windows", "window_end", "window_start", "windows_of",
]
