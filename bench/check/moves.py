"""Measurements of moves and faults: move_seconds, bytes_moved, unavailable_seconds (per move and
per fault, until the fault's recovery), produce latency before / during / after each action."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa

from bench.history.names import (
    COUNTER_INTER_BROKER,
    COUNTER_OBJSTORE,
    EVENT_COPY_START,
    EVENT_COUNTER,
    EVENT_LEADER_CHANGE,
    EVENT_LINK_SAMPLE,
    EVENT_MOVE_COMPLETE,
    EVENT_MOVE_ESTIMATE,
    EVENT_MOVE_PHASE,
    EVENT_MOVE_SUPERSEDED,
    FIELD_BYTES_TO_COPY,
    NODE_OBJSTORE,
    broker_node,
)
from bench.check.view import (
    EXAMPLES, NEG_INF, Action, HistoryView, as_view, hashable, isin_sorted, merge_valid, sorted_runs, tp_key, tp_name,
    tp_of, uniq,
)
from bench.check.windows import fault_window, latency_windows, longest_gap, move_markers, unavailable_windows
from bench.scenario import MOVE_ACTIONS


def _limit(scenario: Any, name: str) -> float | None:
    checks = getattr(scenario, "checks", None)
    return getattr(checks, name, None) if checks is not None else None


def _is_move(a: Action) -> bool:
    return a.kind in MOVE_ACTIONS


def _leader_at(leader_changes: list, tp: tuple[str, int], ts: float | None) -> Any:
    """The partition's leader as the last leader_change before ``ts`` names it (None: unknown)."""
    last = None
    for e in leader_changes:
        if tp_of(e) == tp and ts is not None and e.ts < ts and isinstance(e.detail.get("leader"), int):
            if last is None or e.ts >= last.ts:
                last = e
    return last.detail["leader"] if last is not None else None


# What a move's record carries of the estimate made before it (summary moves, aggregate rows).
ESTIMATE_FIELDS = ("estimate_seconds", "estimate_seconds_low", "estimate_seconds_high", "estimate_feasible",
                   "estimate_action_seconds", "estimate_model", "estimate_model_commit", "estimate_error_pct",
                   "estimate_client_ack_seconds", "estimate_outcomes", "estimate_error")


def _estimates(v: HistoryView) -> dict[tuple[Any, tuple[str, int]], dict[str, Any]]:
    """The estimate made before each move (``move_estimate``), per (action, partition); the
    action's total beside each partition's own, or the reason there is none."""
    out: dict[tuple[Any, tuple[str, int]], dict[str, Any]] = {}
    for e in v.events_named(EVENT_MOVE_ESTIMATE):
        d = e.detail
        aid = hashable(e.action_id)
        if d.get("error"):
            out[(aid, None)] = {"estimate_error": d["error"]}
            continue
        for r in d.get("partitions") or []:
            out[(aid, (r["topic"], int(r["partition"])))] = {
                "estimate_seconds": r.get("seconds"), "estimate_seconds_low": r.get("seconds_low"),
                "estimate_seconds_high": r.get("seconds_high"), "estimate_feasible": r.get("feasible"),
                "estimate_action_seconds": d.get("total_seconds"),
                "estimate_model": (d.get("model") or {}).get("source"),
                "estimate_model_commit": (d.get("model") or {}).get("commit"),
                # the producers' median ack the estimate waited after the leader query (a handover
                # model's client part; None: the model's runs' own, or no client part)
                "estimate_client_ack_seconds": d.get("client_ack_seconds"),
                # a handover: each client query it may land at, with the move's time there and
                # its chance (None: one outcome)
                "estimate_outcomes": r.get("outcomes")}
    return out


def estimate_error_pct(estimated: Any, actual: Any) -> float | None:
    """(estimate - actual) / actual in percent: + the estimate was long, - short; None if either is
    missing."""
    if not isinstance(estimated, (int, float)) or not isinstance(actual, (int, float)) or actual <= 0:
        return None
    return 100.0 * (estimated - actual) / actual


def estimate_summary(moves: list[dict[str, Any]]) -> dict[str, Any]:
    """How the estimates before the moves compared with the moves' times: n, the median and the
    largest absolute error, and how many fell inside the estimate's own band."""
    errs = [m["estimate_error_pct"] for m in moves if m.get("estimate_error_pct") is not None]
    inside = [m for m in moves if m.get("estimate_error_pct") is not None
              and m.get("estimate_seconds_low") is not None
              and m["estimate_seconds_low"] <= m["move_seconds"] <= m["estimate_seconds_high"]]
    missing = sorted({m["estimate_error"] for m in moves if m.get("estimate_error")})
    out: dict[str, Any] = {"n": len(errs), "within_band": len(inside)}
    if errs:
        out.update(median_error_pct=float(np.median(errs)), median_abs_error_pct=float(np.median(np.abs(errs))),
                   max_abs_error_pct=float(np.max(np.abs(errs))))
    if missing:
        out["missing"] = missing
    return out


def check_move_seconds(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """move_seconds: how long until a moved partition is served by its new owner.

    For each move action (reassign, move_set, add_broker_and_rebalance, drain_broker: events
    ``action_start`` with ``action_id``) and each partition it moves:

    * ``request_ts`` = the action_start event's ts;
    * the *new leader* = ``move_complete.new_leader`` for that action/partition if logged, else
      the action's target broker list; ``leader_change_ts`` = ts of the first ``leader_change``
      event for the partition with ``leader`` = the new leader (any live leader if neither is
      known), ``ts >= request_ts`` and the action's ``action_id`` (or none);
    * ``first_ack_ts`` = the earliest ``ack_ts`` of an acked send on that partition whose send was
      invoked at or after ``request_ts`` and acked at or after ``leader_change_ts`` — the first
      write we know the new owner served;
    * ``move_seconds = first_ack_ts - request_ts``.

    A move that keeps its leader (``move_complete.new_leader`` is the leader before the request)
    has no leader change: its ``move_complete`` stands in for it (``leader_kept``).
    "unknown" for a partition without such a leader_change or without such an ack; a partition
    whose move a later action replaced (``move_superseded``), or whose target is the replicas it
    already has, in any order (``no_op``), has no time of its own and does not make its action unknown. An action's
    move_seconds is the max over its partitions. valid: False if ``checks.max_move_seconds`` is set
    and exceeded, else "unknown" if any partition is unknown, else True. Per-action ``phases``
    sum the ``move_phase`` events (seconds, bytes) by phase name.

    Where the run estimated the move before its request (``move_estimate``), each partition's
    record carries the estimate, and ``estimate_error_pct`` against its move_seconds where it moved
    alone (the action's own record: its total estimate against its move_seconds); ``estimates``
    sums them up (:func:`estimate_summary`); they never change ``valid``.
    """
    v = as_view(history, scenario)
    limit = _limit(v.scenario, "max_move_seconds")
    leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    completes = v.events_named(EVENT_MOVE_COMPLETE)
    phases_ev = v.events_named(EVENT_MOVE_PHASE)
    superseded = {(hashable(e.action_id), tp_of(e)): e.detail.get("by") for e in v.events_named(EVENT_MOVE_SUPERSEDED)}
    estimates = _estimates(v)
    moves, actions, valids = [], [], []
    for a in v.actions:
        if not _is_move(a):
            continue
        phases: dict[str, dict[str, float]] = {}
        for e in phases_ev:
            if hashable(e.action_id) == a.action_id:
                ph = phases.setdefault(str(e.detail.get("phase")), {"seconds": 0.0, "bytes": 0})
                ph["seconds"] += float(e.detail.get("seconds") or 0.0)
                ph["bytes"] += int(e.detail.get("bytes") or 0)
        per_action = []
        for tp in sorted(a.partitions):
            rec: dict[str, Any] = {"action_id": a.action_id, "action": a.kind,
                                   "topic": tp[0], "partition": tp[1], "request_ts": a.start}
            if (a.action_id, tp) in superseded:  # a later action's move replaced it: not this move's time
                rec.update(move_seconds="unknown", superseded_by=superseded[(a.action_id, tp)],
                           reason=f"superseded by action {superseded[(a.action_id, tp)]}")
                per_action.append(rec)
                continue
            if a.sources.get(tp) and sorted(a.sources[tp]) == sorted(a.targets.get(tp) or []):
                # asked for the replicas it already had (in any order: only the preferred leader changes)
                rec.update(move_seconds="unknown", no_op=True, reason="nothing to move: the target holds its replicas")
                per_action.append(rec)
                continue
            mc, new_leader, lc = move_markers(a, tp, completes, leader_changes)
            if mc is not None:
                rec["move_complete_ts"] = float(mc.detail.get("ts", mc.ts))
            rec["new_leader"] = lc.detail["leader"] if lc is not None else new_leader
            served_ts = lc.ts if lc is not None else None
            if (mc is not None and new_leader is not None and new_leader == _leader_at(leader_changes, tp, a.start)
                    and (lc is None or lc.ts > rec["move_complete_ts"])):
                # The move kept its leader (replicas added and removed behind it): its completion is
                # when the new placement serves, as a leader change is for a move that changes it (a
                # leader change after the completion is another action's, not this move's).
                served_ts = rec["move_complete_ts"]
                rec["leader_kept"] = True
                rec["new_leader"] = new_leader
            if served_ts is None:
                rec.update(move_seconds="unknown", reason="no leader_change to the new leader")
            else:
                rec["leader_change_ts"] = served_ts
                ack, ts = v.acks_of(*tp)
                cond = (ts >= a.start) & (ack >= served_ts)
                if not cond.any():
                    rec.update(move_seconds="unknown", reason="no ack after the leader change")
                else:
                    first_ack = float(ack[np.argmax(cond)])  # acks are sorted: first hit = earliest
                    rec.update(first_ack_ts=first_ack, move_seconds=first_ack - a.start)
            est = estimates.get((a.action_id, tp)) or estimates.get((a.action_id, None))
            if est:
                rec.update(est)
                # A partition's estimate is its move alone; in an action of several moves its
                # time counts from the action's request, queue and shared caps included: compared
                # only where it moved alone (the action's total estimate is beside the action).
                err = estimate_error_pct(rec.get("estimate_seconds"), rec["move_seconds"]) \
                    if len(a.partitions) == 1 else None
                if err is not None:
                    rec["estimate_error_pct"] = err
            per_action.append(rec)
        measured = [r for r in per_action if "superseded_by" not in r and not r.get("no_op")]
        known = [r["move_seconds"] for r in measured if r["move_seconds"] != "unknown"]
        unknown = len(known) < len(measured) or not per_action
        secs: Any = "unknown" if unknown else (max(known) if known else None)
        over = limit is not None and any(s > limit for s in known)
        valids.append(False if over else ("unknown" if unknown else True))
        total = next((r.get("estimate_action_seconds") for r in per_action if "estimate_action_seconds" in r), None)
        actions.append({"action_id": a.action_id, "action": a.kind, "request_ts": a.start,
                        "partitions": len(per_action), "move_seconds": secs, "phases": phases,
                        **({"estimate_seconds": total,
                            "estimate_error_pct": estimate_error_pct(total, secs)} if total is not None else {}),
                        **({} if per_action else {"reason": "no moved partitions recorded"})})
        moves.extend(per_action)
    known_all = [m["move_seconds"] for m in moves if m["move_seconds"] != "unknown"]
    return {
        "valid": merge_valid(valids),
        "limit": limit,
        "max_move_seconds": max(known_all) if known_all else None,
        "actions": actions,
        "moves": moves,
        **({"estimates": estimate_summary(moves)} if estimates else {}),
    }


def copy_start(v: HistoryView, action_id: Any, tp: tuple[str, int], added: Any = None) -> dict[str, Any] | None:
    """Where the leader told the move's new replica to start copying (``copy_start``, a system
    whose new replicas copy only part of the log): the first such event of the action and
    partition from an added broker (``added``: the brokers the move adds; None: any replica).
    -> ``{ts, replica, offset, bytes_to_copy}`` or None (the new replica copied from the log's
    start: the whole partition)."""
    for e in sorted(v.events_named(EVENT_COPY_START), key=lambda e: e.ts):
        if hashable(e.action_id) != action_id or tp_of(e) != tp:
            continue
        if added and e.detail.get("replica") not in added:
            continue
        b = e.detail.get(FIELD_BYTES_TO_COPY)
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            return {"ts": e.ts, "replica": e.detail.get("replica"), "offset": e.detail.get("offset"),
                    "bytes_to_copy": _intish(float(b))}
    return None


def check_bytes_moved(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """bytes_moved: ``counter`` events summed per action (a measurement; valid True).

    A counter with ``action_id`` in its detail belongs to that action; one without belongs to the
    latest-started action whose window [action_start, action end] contains its ts (action end:
    the latest of its action_end / move_complete / leader_change events; open if none), otherwise
    to ``unattributed``. ``inter_broker_bytes`` / ``objstore_bytes`` are the sums of the counters
    named ``bytes_moved_inter_broker`` / ``bytes_moved_objstore``; ``bytes_moved`` is their sum.
    Every other counter name is summed too (``counters``), plus per broker.
    """
    v = as_view(history, scenario)
    acts = v.actions
    by_id = {a.action_id: a for a in acts}
    totals: dict[Any, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_broker: dict[Any, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    run: dict[str, float] = defaultdict(float)
    counters = v.events_named(EVENT_COUNTER)
    for e in counters:
        name, value = e.detail.get("name"), e.detail.get("value")
        if name is None or not isinstance(value, (int, float)):
            continue
        aid = hashable(e.action_id)
        if aid is None or aid not in by_id:
            owner = [a for a in acts if a.start <= e.ts and (a.end is None or e.ts <= a.end)]
            aid = owner[-1].action_id if owner else "unattributed"
        totals[aid][name] += value
        run[name] += value
        per_broker[aid][name][str(e.detail.get("broker"))] += value

    def summary(c: dict[str, float]) -> dict[str, Any]:
        ib, obj = c.get(COUNTER_INTER_BROKER, 0), c.get(COUNTER_OBJSTORE, 0)
        return {"inter_broker_bytes": _intish(ib), "objstore_bytes": _intish(obj),
                "bytes_moved": _intish(ib + obj)}

    actions = [
        {"action_id": a.action_id, "action": a.kind, **summary(totals.get(a.action_id, {})),
         "counters": {k: _intish(x) for k, x in totals.get(a.action_id, {}).items()},
         "by_broker": {k: {b: _intish(x) for b, x in d.items()}
                       for k, d in per_broker.get(a.action_id, {}).items()}}
        for a in acts
    ]
    return {
        "valid": True,
        "counters_seen": len(counters),
        "actions": actions,
        "unattributed": {k: _intish(x) for k, x in totals.get("unattributed", {}).items()},
        "run": {**summary(run), "counters": {k: _intish(x) for k, x in run.items()}},
    }


BYTES_SPLIT_NOTE = (
    "Bytes moved = bytes a move sent between brokers or to/from object storage, in two parts: "
    "**written during the move** = bytes producers wrote to the partition from the request to the "
    "leader change to the new owner (the old owner accepted them, so the move carried them too; at most "
    "bytes moved), and **partition at the request** = the rest (the log as it stood at the request for "
    "a copy; the not-yet-uploaded tail for a handover).")


def split_bytes_moved(bytes_moved: float | None, written_during: float | None) -> dict[str, float | None]:
    """One move's bytes_moved in the two parts :data:`BYTES_SPLIT_NOTE` defines
    (``bytes_moved_at_request``, ``bytes_moved_during_move``); None where either input is."""
    if bytes_moved is None or written_during is None:
        return {"bytes_moved_at_request": None, "bytes_moved_during_move": None}
    during = min(float(bytes_moved), float(written_during))
    return {"bytes_moved_at_request": _intish(float(bytes_moved) - during), "bytes_moved_during_move": _intish(during)}


def _intish(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _partition_gaps(v: HistoryView, w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
    """Longest no-ack interval within [w0, w1] for every partition that had a send.
    Vectorised over all partitions. -> (tp keys, gaps)."""
    send_keys = uniq(tp_key(v.s_topic, v.s_part))
    send_keys = send_keys[send_keys >= 0]
    a = v.acked
    m = (a["ack"] >= w0) & (a["ack"] <= w1) & (a["key"] >= 0)
    k, ack = a["key"][m], a["ack"][m]
    gaps = np.full(send_keys.size, w1 - w0)  # no ack at all in the window: the whole window
    if k.size:
        uk, start, _ = sorted_runs(k)  # acked sends are sorted by key
        end = np.concatenate([start[1:], [k.size]]) - 1
        d = np.diff(ack)
        if d.size:
            d = np.where(k[1:] == k[:-1], d, NEG_INF)
        inner = np.maximum.reduceat(np.concatenate([d, [NEG_INF]]), start)
        g = np.maximum(np.maximum(ack[start] - w0, w1 - ack[end]), inner)
        gaps[np.searchsorted(send_keys, uk)] = g
    return send_keys, gaps


def outage_of(start: float, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """One fault's figures from its per-partition windows (``{topic, partition,
    unavailable_seconds, recovery_ts, recovered_by, [new_leader], first_ack_ts}``): the worst
    affected partition's outage and when it was served again, and when and how the last of them
    recovered (none if any did not). summary.json's ``outages`` and the aggregate's share it."""
    worst = max(windows, key=lambda w: w["unavailable_seconds"], default=None)
    last = (None if any(w["recovery_ts"] is None for w in windows)
            else max(windows, key=lambda w: w["recovery_ts"], default=None))
    return {
        "partitions": [tp_name(w["topic"], w["partition"]) for w in windows],
        "unavailable_seconds": worst["unavailable_seconds"] if worst else None,
        "worst_partition": tp_name(worst["topic"], worst["partition"]) if worst else None,
        "recovered_ts": last["recovery_ts"] if last else None,
        "recovery_seconds": last["recovery_ts"] - start if last else None,
        # When the worst partition was served again: its first ack at or after recovery.
        "first_ack_seconds": worst["first_ack_ts"] - start if worst and worst["first_ack_ts"] is not None else None,
        "recovered_by": last["recovered_by"] if last else None,
        **({"new_leader": last["new_leader"]} if last and "new_leader" in last else {}),
    }


LINK_WAYS = ("tx", "rx")  # tx: what the node sent, rx: what it received


def link_stats(samples: list, node: str, weights: list[float] | None = None) -> dict[str, Any]:
    """One link over ``link_sample`` events: per direction, the peak and mean bytes/s and those as
    a fraction of the link's rate at each sample (a rate changed mid-run counts as it was). Means
    are weighted by ``weights`` (seconds of each sample inside a window; default equal). Samples
    without the node (it had no link then) are left out; {} if none has it."""
    weights = [1.0] * len(samples) if weights is None else weights
    rows = [(e.detail[node], w) for e, w in zip(samples, weights) if isinstance(e.detail.get(node), dict)]
    if not rows:
        return {}
    total = sum(w for _, w in rows) or None  # all zero (an empty window): equal weights

    def mean(xs: list[float]) -> float:
        return (sum(x * w for x, (_, w) in zip(xs, rows)) / total) if total else sum(xs) / len(xs)

    out = {}
    for way in LINK_WAYS:
        bps = [float(d[f"{way}_bytes_per_s"]) for d, _ in rows]
        util = [b * 8 / float(d["rate_bits"]) for b, (d, _) in zip(bps, rows)]
        out[way] = {"peak_bytes_per_s": round(max(bps), 1), "mean_bytes_per_s": round(mean(bps), 1),
                    "peak_utilisation": round(max(util), 4), "mean_utilisation": round(mean(util), 4)}
    return out


def samples_overlapping(samples: list, lo: float, hi: float) -> tuple[list, list[float]]:
    """The ``link_sample`` events (sorted by ts) whose interval overlaps [lo, hi], and how many
    seconds of each interval lie inside it. A sample at ts counts the bytes since the previous
    sample, so it belongs to a window when ts > lo and the previous sample's ts < hi; a window
    shorter than the sampling interval still gets the sample that covers it. The first sample's
    interval starts with the load, before any move."""
    out, weights, prev = [], [], -math.inf
    for e in samples:
        if e.ts > lo and prev < hi:
            out.append(e)
            weights.append(min(e.ts, hi) - max(prev, lo))
        prev = e.ts
    return out, weights


def move_link_fill(v: HistoryView, a: Action, tp: tuple[str, int], move_seconds: float | None) -> dict[str, Any] | None:
    """How full the links were while one partition moved: the ``links`` of a summary.json move,
    also the aggregate's ``move_links``. Window: [request, request + move_seconds], else until the
    action's end, else until the last sample. Nodes: the brokers holding the partition before
    the move (role ``source``; from its action_start), the brokers it gains (``target``) and the
    object store when the run has its link (``objstore``); each with :func:`link_stats` over
    :func:`samples_overlapping` the window (means weighted by each sample's seconds inside it).
    None when the run has no emulated links.
    -> ``{from_ts, to_ts, samples, nodes: {node: {role, tx, rx}}}``."""
    samples = sorted(v.events_named(EVENT_LINK_SAMPLE), key=lambda e: e.ts)
    if not samples:
        return None
    lo = a.start
    if move_seconds is not None:
        hi = lo + move_seconds
    else:
        hi = a.end if a.end is not None else samples[-1].ts
    before = a.sources.get(tp) or []
    roles = {broker_node(b): "source" for b in before}
    roles.update({broker_node(b): "target" for b in a.targets.get(tp) or [] if b not in before})
    if any(NODE_OBJSTORE in e.detail for e in samples):
        roles[NODE_OBJSTORE] = "objstore"
    inside, weights = samples_overlapping(samples, lo, hi)
    return {"from_ts": lo, "to_ts": hi, "samples": len(inside),
            "nodes": {n: {"role": role, **link_stats(inside, n, weights)} for n, role in roles.items()}}


def check_unavailable_seconds(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """unavailable_seconds: the longest time a partition went without any produce ack.

    Per action and partition it acts on, the longest interval inside the action's window that
    contains no ``ack_ts`` of an acked send on that partition, counting the window edges as
    boundaries (so a partition with no ack in the window is unavailable for the whole window).
    The window starts 1 s before the action_start (not before the load) and ends:

    * **moves** (partitions named by action_start, else planned in the scenario, else mentioned by
      the action's leader_change / move_complete events): 5 s after the move end (the latest of
      the action's action_end / move_complete / leader_change events), clipped to the load window
      (first to last send invocation); at the end of the load when the move end is unknown.
    * **faults** (kill_broker, pause_broker, kill_controller, stop_object_store): at the first ack
      on the partition at or after its *recovery*, so the window holds the whole outage however
      long it lasts. Affected partitions: those the fault's action_start names (the timeline
      names, for a broker fault, the partitions on the broker and those a running move takes
      from or brings to it; for the controller and the object store, every partition); a
      controller or object-store fault that names none affects every partition with a send. Recovery of a partition = the earliest of
      (a) the action_end of the fault's paired recovery action (restart_broker of the same broker,
      resume_broker of the same broker, restart_controller, start_object_store: the first one
      started at or after the fault that did not fail) and, for a broker fault only,
      (b) the first ``leader_change`` of the partition seen by a client (``source`` "client" or
      none) after the fault start, to a leader >= 0 other than the faulted broker (a failover).
      No recovery, or no ack at or after it: the window ends at the end of the load. Each fault
      window gives ``recovery_ts``, ``recovered_by`` (the recovery action's kind or
      "leader_change"; None if none), ``first_ack_ts`` (the window end, if an ack) and the
      recovery action's id or the new leader.
    * recovery actions (restart_broker, resume_broker, restart_controller, start_object_store)
      have no window of their own: their effect is the end of their fault's window.

    ``run``: the same measure per partition over the whole load window.
    It assumes the producers kept sending to the partition; a partition with no load looks
    unavailable. valid False if ``checks.max_unavailable_seconds`` is set and an action window
    exceeds it, else True.
    """
    v = as_view(history, scenario)
    limit = _limit(v.scenario, "max_unavailable_seconds")
    leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    windows = []
    for w in unavailable_windows(v, v.load_start, v.load_end, leader_changes):
        if w.fault:
            windows.append(fault_window(v, w))
            continue
        ack, _ = v.acks_of(w.topic, w.partition)
        gap, g0, g1 = longest_gap(ack, w.start, w.end)
        windows.append({"action_id": w.action.action_id, "action": w.action.kind, "topic": w.topic,
                        "partition": w.partition, "window": [w.start, w.end], "unavailable_seconds": gap,
                        "gap": [g0, g1], "end_known": w.action.end is not None})
    keys, gaps = _partition_gaps(v, v.load_start, v.load_end)
    order = np.argsort(-gaps, kind="stable")[:EXAMPLES]
    worst = [{"topic": v.topics[int(keys[i]) >> 32], "partition": int(keys[i]) & 0xFFFFFFFF,
              "unavailable_seconds": float(gaps[i])} for i in order]
    max_win = max((w["unavailable_seconds"] for w in windows), default=None)
    return {
        "valid": not (limit is not None and max_win is not None and max_win > limit),
        "limit": limit,
        "max_unavailable_seconds": max_win,
        "actions": windows,
        "run": {"window": [v.load_start, v.load_end],
                "max_unavailable_seconds": float(gaps.max()) if gaps.size else None,
                "worst_partitions": worst},
    }


def percentiles(lat_ms: np.ndarray) -> dict[str, Any]:
    lat_ms = lat_ms[~np.isnan(lat_ms)]
    if lat_ms.size == 0:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}
    p50, p99, p999 = np.percentile(lat_ms, [50.0, 99.0, 99.9])  # linear interpolation
    return {"count": int(lat_ms.size), "p50_ms": float(p50), "p99_ms": float(p99),
            "p999_ms": float(p999), "max_ms": float(lat_ms.max())}


def action_windows(v: HistoryView) -> list[tuple[Any, np.ndarray, dict[str, tuple[float, float, bool]]]]:
    """Per action (in start order): the action, its partitions' keys (sorted) and its latency
    windows (:func:`bench.check.windows.latency_windows`)."""
    out = []
    for a, bounds in latency_windows(v.actions, v.load_start, v.load_end):
        keys = np.array(sorted(int(tp_key(v.topic_code[t], p)) for t, p in a.partitions
                               if t in v.topic_code), dtype=np.int64)
        out.append((a, keys, bounds))
    return out


def check_latency(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Produce latency (``ack_ts - ts``, ms) percentiles p50 / p99 / p999 from raw samples
    (numpy, linear interpolation; never averaged across windows), by send invocation time.

    For action i (in start order) with start S_i and move end E_i (the latest of its action_end /
    move_complete / leader_change events, else the next action's start or the end of the load):
    ``before`` = [max(load start, previous action's end), S_i), ``during`` = [S_i, E_i),
    ``after`` = [E_i, next action's start or the end of the load]. Each window is given for all
    partitions (``all``: what the producers felt) and for the action's partitions only
    (``partitions``), with the count of info / fail sends invoked in it. ``run`` covers every
    acked send. valid "unknown" if nothing was acked, else True (a measurement).
    """
    v = as_view(history, scenario)
    b = v.by_send_ts

    def window(lo: float, hi: float, keys: np.ndarray | None, inclusive_hi: bool) -> dict[str, Any]:
        i0 = int(np.searchsorted(b["ts"], lo, "left"))
        i1 = int(np.searchsorted(b["ts"], hi, "right" if inclusive_hi else "left"))
        i1 = max(i1, i0)
        lat = b["lat_ms"][i0:i1]
        if keys is not None:
            lat = lat[isin_sorted(b["key"][i0:i1], keys)]
            return {"from": lo, "to": hi, **percentiles(lat)}
        return {"from": lo, "to": hi, **percentiles(lat),
                "info_count": int(b["info_cum"][i1] - b["info_cum"][i0]),
                "fail_count": int(b["fail_cum"][i1] - b["fail_cum"][i0])}

    out_actions = []
    for a, keys, bounds in action_windows(v):
        out_actions.append({
            "action_id": a.action_id, "action": a.kind, "end_known": a.end is not None,
            "all": {ph: window(lo, hi, None, inc) for ph, (lo, hi, inc) in bounds.items()},
            "partitions": {ph: window(lo, hi, keys, inc) for ph, (lo, hi, inc) in bounds.items()},
        })
    run = percentiles(b["lat_ms"])
    return {"valid": "unknown" if run["count"] == 0 else True, "run": run, "actions": out_actions}


