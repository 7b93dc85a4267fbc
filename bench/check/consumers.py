"""What the workload's consumer groups felt (scenario section ``consumers``): at-least-once
delivery per group, end-to-end latency around each action, the longest time a group went
without a delivery, and catch-up read throughput.

The groups, their mode, topics and start offsets come from the ``consumers_ready`` event
(bench/run/consumers.py); deliveries are the ``deliver`` rows, joined to ``send`` rows by msg id.
A run without consumers gives ``{"valid": True, "groups": {}}`` from every checker here: there
is nothing to hold against it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from bench.check.moves import action_windows, percentiles
from bench.check.view import EXAMPLES, OK, HistoryView, as_view, isin_sorted, tp_key, uniq
from bench.check.windows import fault_windows, longest_gap, window_end, window_start
from bench.history.names import EVENT_CONSUMERS_FINISHED, EVENT_CONSUMERS_READY, EVENT_LEADER_CHANGE
from bench.scenario import FAULT_RECOVERY, RECOVERY_ACTIONS

CATCH_UP_MIN_WINDOW_S = 0.2  # a window overlapping the catch-up for less than this gets no rate


def consumer_groups(v: HistoryView) -> dict[str, dict[str, Any]]:
    """{group id: {set, mode, assignment, members, topics, start: {"t-p": offset}, backlog:
    {"t-p": records}, ready_ts}} from the run's ``consumers_ready`` event ({} if none)."""
    ev = v.events_named(EVENT_CONSUMERS_READY)
    if not ev:
        return {}
    return {g: {**d, "ready_ts": ev[0].ts} for g, d in (ev[0].detail.get("groups") or {}).items()}


def _tp(name: str) -> tuple[str, int]:
    t, p = name.rsplit("-", 1)
    return t, int(p)


def _group_rows(v: HistoryView, gid: str) -> np.ndarray:
    d = v.deliveries
    code = d["groups"].index(gid) if gid in d["groups"] else -2
    return np.flatnonzero(d["group"] == code)


def _first_deliveries(v: HistoryView, rows: np.ndarray) -> np.ndarray:
    """Of the delivery rows (ts order), the first delivery of each harness message."""
    d = v.deliveries
    rows = rows[d["id"][rows] >= 0]
    if rows.size == 0:
        return rows
    _, first = np.unique(d["id"][rows], return_index=True)  # the first index of each id: the earliest
    return np.sort(rows[first])


def _backlog_missing(v: HistoryView, rows: np.ndarray, g: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The backlog records (prefill: no msg id) a group never got: (topic, partition, offset)."""
    d = v.deliveries
    out = []
    for name, n in (g.get("backlog") or {}).items():
        if n <= 0:
            continue
        t, p = _tp(name)
        lo = int(g["start"][name])
        r = rows[(d["topic"][rows] == v.topic_code.get(t, -2)) & (d["part"][rows] == p)]
        offs = uniq(d["off"][r])
        want = np.arange(lo, lo + int(n), dtype=np.int64)
        out += [(t, p, int(o)) for o in want[~isin_sorted(want, offs)]]
    return out


def check_delivery(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """At least once, per group: every acked send on the group's topics at or after the group's
    start offset, and every record of a catch-up group's backlog (from its start offset to the end
    of the partition when it started), was delivered to the group (to some member, at least once,
    across rebalances and moves). An acked send whose partition or offset is unknown is required
    too. ``missing`` counts the acked messages never delivered, ``missing_backlog`` the backlog
    records, with examples; ``redelivered`` the deliveries of a message beyond its first (allowed:
    at least once). valid False if any group misses either, or if the scenario has consumers and
    the run has no ``consumers_ready`` event (they never started)."""
    v = as_view(history, scenario)
    groups = consumer_groups(v)
    sc = v.scenario
    if not groups:
        if sc is not None and getattr(sc, "consumers", None):
            return {"valid": False, "groups": {},
                    "reason": "the scenario has consumers, the run no consumers_ready event: they never started"}
        return {"valid": True, "groups": {}}
    d = v.deliveries
    finished = v.events_named(EVENT_CONSUMERS_FINISHED)
    fin = finished[0].detail if finished else {}
    out: dict[str, Any] = {}
    for gid, g in groups.items():
        rows = _group_rows(v, gid)
        ids = d["id"][rows]
        got = uniq(ids[ids >= 0])
        topics = {v.topic_code[t] for t in g["topics"] if t in v.topic_code}
        need = (v.s_out == OK) & np.isin(v.s_topic, list(topics))
        start = np.full(v.s_id.size, -1, dtype=np.int64)  # unknown partition: required
        for name, off in g["start"].items():
            t, p = _tp(name)
            if t in v.topic_code:
                start[(v.s_topic == v.topic_code[t]) & (v.s_part == p)] = off
        need &= (v.s_off < 0) | (v.s_off >= start)
        idx = np.flatnonzero(need)
        missing = idx[~isin_sorted(v.s_id[idx], got)]
        backlog = _backlog_missing(v, rows, g)
        out[gid] = {"set": g["set"], "mode": g["mode"], "required": int(idx.size), "delivered": int(got.size),
                    "deliveries": int(rows.size), "redelivered": int((ids >= 0).sum() - got.size),
                    "missing": int(missing.size),
                    "missing_examples": [{"msg_id": int(v.s_id[i]), "topic": v.topics[v.s_topic[i]],
                                          "partition": int(v.s_part[i]), "offset": int(v.s_off[i])}
                                         for i in missing[:EXAMPLES]],
                    "missing_backlog": len(backlog),
                    "missing_backlog_examples": [{"topic": t, "partition": p, "offset": o}
                                                 for t, p, o in backlog[:EXAMPLES]],
                    "behind_at_end": (fin.get("behind") or {}).get(gid) or {}}
    return {"valid": all(g["missing"] == 0 and g["missing_backlog"] == 0 for g in out.values()), "groups": out,
            "caught_up": fin.get("caught_up"), "early": fin.get("early")}


def check_end_to_end(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """End-to-end latency (ms): a message's first delivery to a ``tail`` group minus its send
    invocation, percentiles p50 / p99 / p999 from raw samples over every tail group. Windows
    by send invocation time, as :func:`bench.check.moves.check_latency` (before / during / after
    each action, for all partitions and for the action's partitions), so the two line up.
    ``catch_up`` groups read a backlog: their latency is the backlog's age, not the system's.
    valid "unknown" if tail groups delivered nothing, else True (a measurement)."""
    v = as_view(history, scenario)
    groups = {g: x for g, x in consumer_groups(v).items() if x["mode"] == "tail"}
    if not groups:
        return {"valid": True, "groups": {}, "run": percentiles(np.empty(0)), "actions": []}
    d = v.deliveries
    firsts = [_first_deliveries(v, _group_rows(v, gid)) for gid in groups]
    rows = np.concatenate(firsts) if firsts else np.empty(0, np.int64)
    rows = rows[d["send"][rows] >= 0]
    send = d["send"][rows]
    sent_ts = v.s_ts[send]
    lat = (d["ts"][rows] - sent_ts) * 1000.0
    key = tp_key(v.s_topic[send], v.s_part[send])
    order = np.argsort(sent_ts, kind="stable")
    sent_ts, lat, key = sent_ts[order], lat[order], key[order]

    def window(lo: float, hi: float, keys: np.ndarray | None, inclusive_hi: bool) -> dict[str, Any]:
        i0 = int(np.searchsorted(sent_ts, lo, "left"))
        i1 = max(i0, int(np.searchsorted(sent_ts, hi, "right" if inclusive_hi else "left")))
        x = lat[i0:i1]
        if keys is not None:
            x = x[isin_sorted(key[i0:i1], keys)]
        return {"from": lo, "to": hi, **percentiles(x)}

    actions = []
    for a, keys, bounds in action_windows(v):
        actions.append({"action_id": a.action_id, "action": a.kind, "end_known": a.end is not None,
                        "all": {ph: window(lo, hi, None, inc) for ph, (lo, hi, inc) in bounds.items()},
                        "partitions": {ph: window(lo, hi, keys, inc) for ph, (lo, hi, inc) in bounds.items()}})
    per_group = {}
    for gid, f in zip(groups, firsts):
        f = f[d["send"][f] >= 0]
        per_group[gid] = percentiles((d["ts"][f] - v.s_ts[d["send"][f]]) * 1000.0)
    run = percentiles(lat)
    return {"valid": "unknown" if run["count"] == 0 else True, "groups": per_group, "run": run,
            "actions": actions}


def check_consumer_gaps(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Consumer-side unavailability: per action and ``tail`` group, the longest interval without
    a delivery to the group on the action's partitions (every partition of the group's topics
    for an action that names none), inside a window from 1 s before the action to 5 s after its
    end (moves) or after the producers' first ack past recovery (faults, see
    :func:`bench.check.moves.check_unavailable_seconds`), clipped to the load. The producers'
    gap on the same partitions bounds it from below: nothing can be delivered that was not
    acked. A measurement: valid True."""
    v = as_view(history, scenario)
    groups = {g: x for g, x in consumer_groups(v).items() if x["mode"] == "tail"}
    if not groups:
        return {"valid": True, "groups": {}, "actions": []}
    d = v.deliveries
    ends = _fault_ends(v)
    actions = []
    for a, _, bounds in action_windows(v):
        if a.kind in RECOVERY_ACTIONS:
            continue
        # the producers' unavailability window, from its start to its end (a move's latency end; a
        # fault's first ack after recovery) plus the post-window: a delivery lags its ack
        w0 = window_start(a, v.load_start)
        end = ends.get(a.action_id, bounds["during"][1]) if a.kind in FAULT_RECOVERY else bounds["during"][1]
        w1 = window_end(w0, end, v.load_end)
        per_group = {}
        for gid, g in groups.items():
            tps = sorted(a.partitions) or [(t, p) for t, p in map(_tp, g["start"])]
            tps = [tp for tp in tps if tp[0] in g["topics"]]
            rows = _group_rows(v, gid)
            worst = None
            for t, p in tps:
                code = v.topic_code.get(t, -1)
                r = rows[(d["topic"][rows] == code) & (d["part"][rows] == p)]
                gap, g0, g1 = longest_gap(d["ts"][r], w0, w1)
                if worst is None or gap > worst["gap_seconds"]:
                    worst = {"topic": t, "partition": p, "gap_seconds": gap, "gap": [g0, g1]}
            if worst is not None:
                per_group[gid] = worst
        gaps = [x["gap_seconds"] for x in per_group.values()]
        actions.append({"action_id": a.action_id, "action": a.kind, "window": [w0, w1], "groups": per_group,
                        "max_gap_seconds": max(gaps) if gaps else None})
    return {"valid": True, "groups": list(groups), "actions": actions}


def _fault_ends(v: HistoryView) -> dict[Any, float]:
    """Per fault action: the end of its producers' outage window (the first ack after recovery)."""
    changes = v.events_named(EVENT_LEADER_CHANGE)
    out: dict[Any, float] = {}
    for a in v.actions:
        if a.kind in FAULT_RECOVERY:
            w = fault_windows(v, a, changes)
            if w:
                out[a.action_id] = max(x["window"][1] for x in w)
    return out


def check_catch_up(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Catch-up reads while the load produces: per ``catch_up`` group, the backlog (records
    behind the end of each partition when the group started), how long the group took to read
    it (from the moment it started reading, when the load started, to the delivery of its last
    backlog record) and the rate
    (backlog value bytes / that time); per action, the backlog bytes delivered per second in its
    before / during / after windows (as :func:`check_end_to_end`, by delivery time), over the part
    of each window inside the catch-up (null under 0.2 s). ``caught_up`` False: some backlog
    was never delivered. A measurement: valid True."""
    v = as_view(history, scenario)
    groups = {g: x for g, x in consumer_groups(v).items() if x["mode"] == "catch_up"}
    if not groups:
        return {"valid": True, "groups": {}}
    d = v.deliveries
    windows = action_windows(v)
    finished = v.events_named(EVENT_CONSUMERS_FINISHED)
    go_ts = finished[0].detail.get("go_ts") if finished else None  # when the catch-up readers started
    out = {}
    for gid, g in groups.items():
        rows = _group_rows(v, gid)
        back = np.zeros(rows.size, dtype=bool)
        expected = 0
        for name, n in g["backlog"].items():
            t, p = _tp(name)
            lo = g["start"][name]
            m = (d["topic"][rows] == v.topic_code.get(t, -1)) & (d["part"][rows] == p) & \
                (d["off"][rows] >= lo) & (d["off"][rows] < lo + n)
            back |= m
            expected += n
        b = rows[back]
        # One delivery per (partition, offset): a re-read after a rebalance is not new backlog.
        _, first = np.unique(np.stack([tp_key(d["topic"][b], d["part"][b]), d["off"][b]]), axis=1,
                             return_index=True)
        b = np.sort(b[first])
        start = go_ts if go_ts is not None else g["ready_ts"]
        end = float(d["ts"][b].max()) if b.size else None
        nbytes = int(d["size"][b].sum())
        seconds = (end - start) if end is not None else None
        per_action = []
        for a, _, bounds in windows:
            rates = {}
            for ph, (lo, hi, _) in bounds.items():
                lo2, hi2 = max(lo, start), min(hi, end if end is not None else lo)
                if hi2 - lo2 < CATCH_UP_MIN_WINDOW_S:
                    rates[ph] = None
                    continue
                ts = d["ts"][b]
                # half-open like every window, except that the catch-up's last record counts
                sel = (ts >= lo2) & ((ts < hi2) | (ts == end))
                rates[ph] = float(d["size"][b][sel].sum() / (hi2 - lo2))
            per_action.append({"action_id": a.action_id, "action": a.kind, "bytes_per_s": rates})
        out[gid] = {"set": g["set"], "backlog_records": expected, "delivered_records": int(b.size),
                    "caught_up": int(b.size) >= expected, "backlog_bytes": nbytes, "start_ts": start,
                    "end_ts": end, "catch_up_seconds": seconds,
                    "bytes_per_s": nbytes / seconds if seconds else None, "actions": per_action}
    return {"valid": True, "groups": out}
