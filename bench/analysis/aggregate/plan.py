"""The driver-side plan of the Spark passes, per run from its events (bench/check/windows.py, the
checkers' own definitions): move candidates, unavailability windows (a fault's with its
recoveries), latency windows and timeline bins; and the rows that need no pass (bytes moved per
action, move phases, move progress)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.analysis.aggregate.discovery import StoredRun, span_phases
from bench.check.moves import check_bytes_moved
from bench.check.windows import latency_windows, move_candidates, unavailable_windows
from bench.history.names import EVENT_LEADER_CHANGE, EVENT_MOVE_PHASE, EVENT_MOVE_PROGRESS
from bench.scenario import FAULT_RECOVERY, MOVE_ACTIONS

NICE_BINS = (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300)
TIMELINE_BINS = 60  # at most this many bins per run timeline (coarse enough not to alias batched acks)


@dataclass
class Plan:
    moves: list[dict[str, Any]] = field(default_factory=list)  # per move action and partition
    unavailable: list[dict[str, Any]] = field(default_factory=list)  # per action and partition: [w0, w1]
    faults: list[tuple[StoredRun, Any, list[dict[str, Any]]]] = field(default_factory=list)  # with recoveries
    latency: list[dict[str, Any]] = field(default_factory=list)  # per action, phase and scope
    timeline: list[dict[str, Any]] = field(default_factory=list)  # per run: t0, bin_s
    bytes_by_action: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)  # the phases table
    progress: list[dict[str, Any]] = field(default_factory=list)  # the move_progress table


def plan_runs(runs: list[StoredRun]) -> Plan:
    plan = Plan()
    for r in runs:
        v = r.view
        ls, le = float(r.stats["load_start"]), float(r.stats["load_end"])
        acts = v.actions
        for c in move_candidates(v):
            plan.moves.append({"run_idx": r.idx, "action_id": str(c.action.action_id), "action": c.action.kind,
                               "topic": c.topic, "partition": c.partition, "request_ts": c.action.start,
                               "end_ts": c.action.end,
                               "lc_ts": c.leader_change.ts if c.leader_change is not None else None,
                               "new_leader": c.new_leader})
        # A fault's window ends at the first ack at/after its partition's recovery (the partition
        # pass finds that ack; none: the end of the load). The view holds events only: a fault
        # naming no partitions affects those the Spark scan saw a send on.
        windows = unavailable_windows(v, ls, le, v.events_named(EVENT_LEADER_CHANGE),
                                      loaded=r.stats.get("sent_partitions") or ())
        for w in windows:
            plan.unavailable.append({"run_idx": r.idx, "action_id": str(w.action.action_id), "topic": w.topic,
                                     "partition": w.partition, "w0": w.start, "w1": w.end,
                                     "rec_ts": w.recovery["recovery_ts"] if w.fault else None})
        for a in acts:
            if a.kind in FAULT_RECOVERY:
                plan.faults.append((r, a, [w.recovery for w in windows if w.action is a]))
        for a, bounds in latency_windows(acts, ls, le):
            for ph, (lo, hi, inc) in bounds.items():
                base = {"run_idx": r.idx, "action_id": str(a.action_id), "phase": ph, "lo": lo, "hi": hi,
                        "inc": inc}
                plan.latency.append({**base, "scope": "all", "topic": None, "partition": None})
                for tp in sorted(a.partitions):
                    plan.latency.append({**base, "scope": "partitions", "topic": tp[0], "partition": tp[1]})
        for a in check_bytes_moved(v)["actions"]:
            plan.bytes_by_action[(r.idx, str(a["action_id"]))] = a
        # Phases of move actions only: a broker also opens and closes partitions at start-up and
        # shutdown (no action id), which are no move's.
        move_ids = {str(a.action_id) for a in acts if a.kind in MOVE_ACTIONS}
        spans = span_phases(r.system)
        for e in v.events_named(EVENT_MOVE_PHASE):
            if e.action_id is None or str(e.action_id) not in move_ids:
                continue
            phase = str(e.detail.get("phase"))
            plan.phases.append({"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
                                "action_id": str(e.action_id), "phase": phase, "span": phase in spans,
                                "seconds": float(e.detail.get("seconds") or 0.0),
                                "bytes": float(e.detail.get("bytes") or 0.0)})
        starts = {str(a.action_id): a.start for a in acts if a.kind in MOVE_ACTIONS}
        for e in v.events_named(EVENT_MOVE_PROGRESS):
            if e.action_id is None or str(e.action_id) not in starts:
                continue
            plan.progress.append({"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
                                  "action_id": str(e.action_id), "topic": e.topic, "partition": e.partition,
                                  "t_rel_s": e.ts - starts[str(e.action_id)],
                                  **{k: e.detail.get(k) for k in ("to_move_bytes", "done_bytes", "remaining_bytes",
                                                                  "rate_bytes_per_s", "eta_s")}})
        moves_acts = [a for a in acts if a.kind in MOVE_ACTIONS] or acts
        t_ref = moves_acts[0].start if moves_acts else ls
        span = max(le - ls, 1e-3)
        bin_s = next((b for b in NICE_BINS if span / b <= TIMELINE_BINS), NICE_BINS[-1])
        plan.timeline.append({"run_idx": r.idx, "t0": t_ref, "bin_s": float(bin_s)})
        r.stats.update(timeline_t0=t_ref, timeline_bin_s=float(bin_s))
    return plan


__all__ = ["Plan", "plan_runs"]
