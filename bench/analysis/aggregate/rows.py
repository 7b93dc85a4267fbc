"""The aggregate's rows per move, fault, run, link and consumer action, assembled on the driver
from the passes' results, the events and each run's summary.json (upgraded to the current shape
by :func:`bench.check.summary.upgrade_summary`)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

from bench.analysis.aggregate.discovery import StoredRun, machine_label, provenance_of
from bench.analysis.aggregate.fits import run_version
from bench.analysis.aggregate.tables import SAFETY_CHECKS, SAFETY_COUNTS
from bench.analysis.model import family_of
from bench.check.metrics import MOVE_METRICS, MoveRef
from bench.check.moves import LINK_WAYS, estimate_error_pct, move_link_fill, outage_of, split_bytes_moved
from bench.check.outcome import run_ending_problems, run_verdict
from bench.check.safety import verdict
from bench.check.windows import PHASES
from bench.history.names import EVENT_LINK_SAMPLE, EVENT_MOVE_PHASE, EVENT_UNTIERED, EVENT_WRITES_REFUSED, OBJSTORE_REQUEST_KINDS
from bench.scenario import RECOVERY_ACTIONS
from systems.registry import PROFILES


def consumer_rows(runs: list[StoredRun]) -> list[dict[str, Any]]:
    """Per run with consumers and per action: summary.json's ``consumers`` figures."""
    rows = []
    for r in runs:
        c = r.summary.get("consumers")
        if not isinstance(c, dict):
            continue
        cu = [g for g in (c.get("catch_up") or {}).values() if isinstance(g, dict)]
        groups = c.get("groups") or {}
        run = {"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
               "scenario": r.summary.get("scenario"),
               "run_e2e_p50_ms": (c.get("end_to_end_ms") or {}).get("p50_ms"),
               "run_e2e_p99_ms": (c.get("end_to_end_ms") or {}).get("p99_ms"),
               "catch_up_bytes_per_s": _med([g.get("bytes_per_s") for g in cu if g.get("bytes_per_s") is not None]),
               "catch_up_seconds": _med([g.get("catch_up_seconds") for g in cu
                                         if g.get("catch_up_seconds") is not None]),
               "backlog_bytes": _med([g.get("backlog_bytes") for g in cu if g.get("backlog_bytes") is not None]),
               "groups": len(groups), "delivery_valid": str(c.get("delivery_valid")).lower(),
               "missing": sum(int(g.get("missing") or 0) + int(g.get("missing_backlog") or 0) for g in groups.values()),
               "redelivered": sum(int(g.get("redelivered") or 0) for g in groups.values())}
        for a in c.get("actions") or []:
            if a.get("action") in RECOVERY_ACTIONS:
                continue  # its effect is the end of its fault's windows
            e2e = a.get("end_to_end_ms") or {}
            rates = a.get("catch_up_bytes_per_s") or {}
            rows.append({**run, "action_id": str(a.get("action_id")), "action": a.get("action"),
                         **{f"e2e_{ph}_{q}_ms": (e2e.get(ph) or {}).get(f"{q}_ms")
                            for ph in PHASES for q in ("p50", "p99", "p999")},
                         "e2e_during_count": (e2e.get("during") or {}).get("count"),
                         "gap_seconds": a.get("gap_seconds"),
                         **{f"catch_up_{ph}_bytes_per_s": rates.get(ph) for ph in PHASES}})
    rows.sort(key=lambda x: (x["run_key"], x["action_id"]))
    return rows



def outage_rows(faults: list[tuple[StoredRun, Any, list[dict[str, Any]]]],
                 per_tp: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fault action, summary.json's ``outages`` figures (bench/check/summary.py) from the fault
    windows: the worst affected partition's outage; when and how the last of them recovered."""
    rows = []
    for r, a, recs in faults:
        aid = str(a.action_id)
        win = [{**x, **per_tp[(r.idx, aid, x["topic"], x["partition"])]} for x in recs]
        fig = outage_of(a.start, [{**w, "first_ack_ts": w["recovered_ack_ts"]} for w in win])
        summ = next((o for o in r.summary.get("outages") or []
                     if isinstance(o, dict) and str(o.get("action_id")) == aid), {})
        rows.append({
            "run_key": r.run_key, "run_id": r.summary.get("run_id"),
            "scenario": r.summary.get("scenario") or (r.scenario.name if r.scenario else None),
            "system": r.system, "config_key": r.config_key, "action_id": aid, "action": a.kind,
            "broker": a.broker, "start_ts": a.start, "partitions": ",".join(fig["partitions"]),
            **{k: fig[k] for k in ("unavailable_seconds", "worst_partition", "recovered_by")},
            "new_leader": fig.get("new_leader"),
            **{k: fig[k] for k in ("recovery_seconds", "first_ack_seconds")},
            "summary_unavailable_seconds": summ.get("unavailable_seconds"),
        })
    rows.sort(key=lambda x: (x["run_key"], x["start_ts"]))
    return rows



def _summary_moves(r: StoredRun) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for m in r.summary.get("moves") or []:
        if isinstance(m, dict) and m.get("topic") is not None and m.get("partition") is not None:
            out[(str(m.get("action_id")), str(m["topic"]), int(m["partition"]))] = m
    return out



def tail_from_phases(system: str, phases: dict[str, dict[str, float]]) -> float | None:
    """The unuploaded tail a move carried: the bytes of the phases its system's journal says carry
    it (``JournalMeaning.tail_phases``), None if none reported any."""
    p = PROFILES.get(system)
    b = [ph["bytes"] for name, ph in phases.items() if p is not None and p.journal.carries_tail(name) and ph["bytes"]]
    return float(sum(b)) if b else None


def _open_of(phases: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """The phases that report the objects they walked are the new owner's open: their objects
    and summed seconds."""
    opens = [ph for ph in phases.values() if "objects" in ph]
    if not opens:
        return {"objects": None, "open_seconds": None}
    return {"objects": max(ph["objects"] for ph in opens), "open_seconds": sum(ph["seconds"] for ph in opens)}


def _protocol_of(p: dict[str, Any] | None) -> dict[str, Any]:
    p = p or {}
    target = p.get("target_bytes")
    return {"protocol_leader_change_seconds": p.get("leader_change_seconds"),
            "protocol_reassignment_seconds": p.get("reassignment_seconds"),
            "journal_complete_seconds": p.get("journal_complete_seconds"),
            "protocol_target_bytes": float(sum(target.values())) if target else None}


def leader_timeline(r: Any, run_moves: list[dict[str, Any]]) -> tuple[dict[tuple[str, int], int], list[tuple]] | None:
    """A run's leaders as its moves change them, built once per run: the scenario's placement and
    its moves' leader changes sorted by time (None: no scenario)."""
    sc = r.scenario
    if sc is None:
        return None
    leaders = {(t, p): reps[0] for t, parts in sc.placement().items() for p, reps in parts.items() if reps}
    changes = sorted((o["lc_ts"], (o["topic"], o["partition"]), o["new_leader"]) for o in run_moves
                     if o["lc_ts"] is not None and o.get("new_leader") is not None)
    return leaders, changes


def sender_ingest(r: Any, m: dict[str, Any], timeline: tuple | None) -> float | None:
    """The nominal ingest of every partition the moved partition's leader leads at the request
    (its own included): what its steady egress (replication, uploads, WAL) carries besides the
    move. Leaders: :func:`leader_timeline` at the request (None: unknown)."""
    if timeline is None or m.get("request_ts") is None:
        return None
    leaders = dict(timeline[0])
    for ts, tp, leader in timeline[1]:
        if ts > m["request_ts"]:
            break
        leaders[tp] = leader
    sender = leaders.get((m["topic"], m["partition"]))
    if sender is None:
        return None
    return float(sum(r.scenario.nominal_ingest_of(t) or 0.0 for (t, _), b in leaders.items() if b == sender))


def move_rows(runs, move_keys, first_acks, gaps, bytes_by_action, latency=()) -> list[dict[str, Any]]:
    # the moved partitions' median ack before each action (the latency table's run rows)
    acks_before = {(x["key"], str(x["action_id"])): x["p50_ms"] for x in latency
                   if x["level"] == "run" and x["scope"] == "partitions" and x["phase"] == "before"}
    by_idx = {r.idx: r for r in runs}
    of_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in move_keys:
        of_run[m["run_idx"]].append(m)
    phases: dict[tuple[int, str], dict[str, dict[str, float]]] = defaultdict(dict)
    for r in runs:
        for e in r.view.events_named(EVENT_MOVE_PHASE):
            ph = phases[(r.idx, str(e.action_id))].setdefault(str(e.detail.get("phase")), {"seconds": 0.0, "bytes": 0.0})
            ph["seconds"] += float(e.detail.get("seconds") or 0.0)
            ph["bytes"] += float(e.detail.get("bytes") or 0.0)
            if isinstance(e.detail.get("objects"), (int, float)):  # an open phase: the objects it walked
                ph["objects"] = max(float(e.detail["objects"]), ph.get("objects", 0.0))
    refused: dict[tuple[int, str, str, int], float] = {}  # the first per move
    for r in runs:
        prof = PROFILES.get(r.system)
        # a history translated before writes_refused existed keeps the journal's own name
        names = {EVENT_WRITES_REFUSED} | set(prof.journal.refusal_start if prof is not None else ())
        for e in (e for e in r.view.events if e.event in names):
            k = (r.idx, str(e.action_id), str(e.topic), int(e.partition if e.partition is not None else -1))
            refused[k] = min(e.ts, refused.get(k, e.ts))
    sm_cache = {r.idx: _summary_moves(r) for r in runs}
    timelines = {r.idx: leader_timeline(r, of_run[r.idx]) for r in runs}
    n_parts: dict[tuple[int, str], int] = defaultdict(int)
    for m in move_keys:
        n_parts[(m["run_idx"], m["action_id"])] += 1
    rows = []
    for m in move_keys:
        r = by_idx[m["run_idx"]]
        k = (m["run_idx"], m["action_id"], m["topic"], m["partition"])
        fa = first_acks.get(k, {})
        first = fa.get("first_ack_ts")
        if m["lc_ts"] is None:
            secs, status = None, "unknown: no leader_change to the new leader"
        elif first is None:
            secs, status = None, "unknown: no ack after the leader change"
        else:
            secs, status = first - m["request_ts"], "ok"
        sm = sm_cache[r.idx].get((m["action_id"], m["topic"], m["partition"]), {})
        produced = fa.get("produced_before")
        prefill = r.param("prefill_bytes_per_partition")
        if sm.get("partition_bytes") is not None:
            pbytes, psrc = float(sm["partition_bytes"]), "summary"
        elif prefill is not None:
            pbytes, psrc = float(prefill) + float(produced or 0), "prefill+produced"
        else:
            pbytes, psrc = None, "unknown"
        single = n_parts[(m["run_idx"], m["action_id"])] == 1
        ba = bytes_by_action.get((m["run_idx"], m["action_id"]), {})
        if sm.get("bytes_moved_inter_broker") is not None or sm.get("bytes_moved_objstore") is not None:
            ib, ob, bsrc = sm.get("bytes_moved_inter_broker"), sm.get("bytes_moved_objstore"), "summary"
        elif ba and single:
            ib, ob, bsrc = ba.get("inter_broker_bytes"), ba.get("objstore_bytes"), "counters"
        else:
            ib = ob = None
            bsrc = "counters (action total, several partitions)" if ba else "none"
        moved = None if ib is None and ob is None else float(ib or 0) + float(ob or 0)
        # The summary's figures (upgrade_summary fills them in an older summary); a move the
        # summary does not list: the same definitions from the raw rows.
        during = sm.get("bytes_written_during_move") if sm else fa.get("produced_during")
        if sm:
            metrics = {x.name: sm.get(x.name) for x in MOVE_METRICS}
        else:
            aid = next((a.action_id for a in r.view.actions if str(a.action_id) == m["action_id"]), m["action_id"])
            ref = MoveRef(aid, m["topic"], m["partition"], None, None, m["request_ts"], m["lc_ts"], secs)
            metrics = {x.name: x.compute(r.view, ref) for x in MOVE_METRICS}
        ph = phases.get((m["run_idx"], m["action_id"]), {})
        unupl = tail_from_phases(r.system, ph) if single else None
        fam = family_of(r.system)
        act = next((a for a in r.view.actions if str(a.action_id) == m["action_id"]), None)
        tp = (m["topic"], m["partition"])
        crossed = set(act.sources.get(tp, ())) | set(act.targets.get(tp, ())) if act is not None else set()
        link = r.link_at(m["request_ts"], crossed) if m["request_ts"] is not None else r.param("link_rate")
        if unupl is None and fam is not None and fam.opens_objects:  # its tail went to object storage
            unupl = float(ob) if ob is not None else None
        rows.append({
            "run_key": r.run_key, "system": r.system, "config_key": r.config_key, "action_id": m["action_id"],
            "action": m["action"], "topic": m["topic"], "partition": m["partition"],
            "new_leader": m["new_leader"], "request_ts": m["request_ts"], "leader_change_ts": m["lc_ts"],
            "first_ack_ts": first, "end_ts": m["end_ts"], "refused_ts": refused.get(k),
            "client_refused_ts": (None if sm.get("client_refused_seconds") is None or m["request_ts"] is None
                                  else float(m["request_ts"]) + float(sm["client_refused_seconds"])),
            "client_library": r.param("client_library") or "librdkafka",  # runs before the axis: librdkafka
            "client_errors_json": None if sm.get("client_errors") is None else json.dumps(sm["client_errors"],
                                                                                          sort_keys=True),
            "client_error_count": None if sm.get("client_errors") is None else sum(sm["client_errors"].values()),
            "client_metadata_requests": sm.get("client_metadata_requests"), "move_seconds": secs, "move_seconds_status": status,
            "summary_move_seconds": sm.get("move_seconds") if isinstance(sm.get("move_seconds"), (int, float)) else None,
            "unavailable_seconds": gaps.get(k),
            "partition_bytes": pbytes, "partition_bytes_source": psrc, "produced_bytes_before_move": produced,
            "bytes_moved_inter_broker": ib, "bytes_moved_objstore": ob, "bytes_moved": moved, "bytes_source": bsrc,
            "bytes_written_during_move": during, **split_bytes_moved(moved, during),
            "unuploaded_bytes": unupl,
            **{k: None if x is None else float(x) for k, x in metrics.items()},
            "replication_throttle_bytes_per_s": r.param("replication_throttle_bytes_per_s"),
            "objstore_bandwidth_bytes_per_s": r.param("objstore_bandwidth_bytes_per_s"),
            "bandwidth_bytes_per_s": r.bandwidth_at(link),
            "link_rate_at_request": link,
            "prefill_bytes_of_partition": float(r.scenario.prefill_bytes_of(m["topic"])) if r.scenario else None,
            "nominal_ingest_bytes_per_s": r.scenario.nominal_ingest_of(m["topic"]) if r.scenario else None,
            **_producers_of(r, m["topic"]),
            "sender_ingest_bytes_per_s": sender_ingest(r, m, timelines[m["run_idx"]]),
            "phases_json": json.dumps(ph, sort_keys=True) if ph else None,
            "ingest_bytes_per_s": float(during) / secs if during is not None and secs else None,
            **(_open_of(ph) if single else {"objects": None, "open_seconds": None}),
            "partitions_in_action": n_parts[(m["run_idx"], m["action_id"])],
            **_protocol_of(sm.get("protocol")),
            "with_consumers": isinstance(r.summary.get("consumers"), dict),
            # The estimate the run made before the request (bench/run/move_estimate.py), against
            # this row's move_seconds.
            "estimate_seconds": sm.get("estimate_seconds"), "estimate_seconds_low": sm.get("estimate_seconds_low"),
            "estimate_seconds_high": sm.get("estimate_seconds_high"),
            "estimate_error_pct": estimate_error_pct(sm.get("estimate_seconds"), secs) if single else None,
            "estimate_model_commit": sm.get("estimate_model_commit"),
            "estimate_outcomes_json": (json.dumps(sm["estimate_outcomes"], sort_keys=True)
                                       if sm.get("estimate_outcomes") else None),
            "ack_p50_before_ms": acks_before.get((r.run_key, m["action_id"])),
            # its object-store requests by kind (null: not journaled; older summaries)
            **{f"objstore_{k}_requests": (sm.get("objstore_requests") or {}).get(k) for k in OBJSTORE_REQUEST_KINDS},
        })
    rows.sort(key=lambda x: (x["run_key"], x["request_ts"] or 0, x["topic"], x["partition"]))
    return rows



def _producers_of(r: StoredRun, topic: str) -> dict[str, Any]:
    """The producer clients writing to the moved partition and one's mean gap between sends to it
    (Scenario.producers_of; None: no scenario, or a run whose producers the harness did not start)."""
    got = r.scenario.producers_of(topic) if r.scenario is not None else None
    return {"producers_of_partition": got[0] if got else None, "producer_send_gap_s": got[1] if got else None}


def link_rows(runs: list[StoredRun]) -> list[dict[str, Any]]:
    """Every link_sample of every run, one row per node; t_rel_s from the run's load start."""
    rows = []
    for r in runs:
        ls = float(r.stats["load_start"])
        for e in sorted(r.view.events_named(EVENT_LINK_SAMPLE), key=lambda e: e.ts):
            for node, d in sorted(e.detail.items()):
                if isinstance(d, dict):
                    rows.append({"run_key": r.run_key, "system": r.system, "ts": e.ts, "t_rel_s": e.ts - ls,
                                 "node": node, "tx_bytes_per_s": d.get("tx_bytes_per_s"),
                                 "rx_bytes_per_s": d.get("rx_bytes_per_s"), "rate_bits": d.get("rate_bits")})
    return rows


def untiered_rows(runs: list[StoredRun]) -> list[dict[str, Any]]:
    """Per partition of a tiered run: its untiered tail (what a new replica would copy, sampled:
    bench/run/observe.py sample_untiered) in steady state, from the load's start (or, where more
    than a segment was untiered then, from the first upload after it) to its end, against
    the segment size, the upload interval and the partition's nominal ingest (the scenario's rate,
    never a measured one), with the backlog r x I / S in segments (the relation's axis)."""
    rows = []
    for r in runs:
        ev = sorted(r.view.events_named(EVENT_UNTIERED), key=lambda e: e.ts) if r.view is not None else []
        if not ev or r.scenario is None:
            continue
        ls, le = float(r.stats["load_start"]), float(r.stats["load_end"])
        seg, interval = ev[0].detail.get("segment_bytes"), ev[0].detail.get("upload_interval_s")
        series: dict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
        for e in ev:
            for key, d in (e.detail.get("partitions") or {}).items():
                series[key].append((e.ts, d))
        for key, pts in sorted(series.items()):
            topic, _, part = key.rpartition("-")
            ingest = r.scenario.nominal_ingest_of(topic)
            # More than a segment untiered at the load's start: closed segments (the prefill's) wait
            # for the first task after it; the tail is steady from that upload on, else at once.
            first = next((d for ts, d in pts if ts >= ls), None)
            since: float | None = ls
            if first is not None and first["untiered_bytes"] > (seg or 0):
                since = next((ts for ts, d in pts if ts >= ls and d["last_tiered"] > first["last_tiered"]), None)
            steady = [d["untiered_bytes"] for ts, d in pts if since is not None and since <= ts <= le]
            if not steady or not seg or not interval or not ingest:
                continue
            rows.append({"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
                         "version": run_version(r.summary), "topic": topic, "partition": int(part),
                         "segment_bytes": float(seg), "upload_interval_s": float(interval),
                         "ingest_bytes_per_s": float(ingest), "backlog_segments": ingest * interval / seg,
                         "samples": len(steady), "steady_seconds": le - since,
                         "mean_bytes": statistics.fmean(steady), "max_bytes": float(max(steady)),
                         "p95_bytes": float(sorted(steady)[min(len(steady) - 1, int(0.95 * len(steady)))])})
    return rows


def move_link_rows(runs: list[StoredRun], moves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per move (a row of the moves table) and node: :func:`move_link_fill` over the move's window."""
    by_key = {r.run_key: r for r in runs}
    acts = {r.run_key: {str(a.action_id): a for a in r.view.actions} for r in runs}
    rows = []
    for m in moves:
        r = by_key[m["run_key"]]
        fill = move_link_fill(r.view, acts[r.run_key][m["action_id"]], (m["topic"], m["partition"]),
                              m["move_seconds"])
        if fill is None:
            continue
        for node, x in fill["nodes"].items():
            rows.append({**{k: m[k] for k in ("run_key", "system", "config_key", "action_id", "topic", "partition",
                                               "partition_bytes", "move_seconds")},
                         "from_ts": fill["from_ts"], "to_ts": fill["to_ts"], "samples": fill["samples"],
                         "node": node, "role": x["role"],
                         **{f"{way}_{k}": x.get(way, {}).get(k) for way in LINK_WAYS
                            for k in ("mean_utilisation", "peak_utilisation", "mean_bytes_per_s", "peak_bytes_per_s")}})
    return rows



def _json_or_none(x: Any) -> str | None:
    return json.dumps(x, sort_keys=True) if isinstance(x, dict) and x else None


def run_rows(runs, moves, gaps, run_gaps) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        st = r.stats
        checks = r.summary.get("checks") or {}
        mine = [m for m in moves if m["run_key"] == r.run_key]
        secs = [m["move_seconds"] for m in mine if m["move_seconds"] is not None]
        ug = [g for (ri, *_), g in gaps.items() if ri == r.idx]
        bm = [m["bytes_moved"] for m in mine if m["bytes_moved"] is not None]
        failed = checks.get("failed")
        prov = provenance_of(r.summary)
        git = prov.get("git") if isinstance(prov.get("git"), dict) else {}
        row = {
            "run_key": r.run_key, "run_id": r.summary.get("run_id"), "run_dir": str(r.run_dir),
            "scenario": r.summary.get("scenario") or (r.scenario.name if r.scenario else None),
            "system": r.system, "config_key": r.config_key, "synthetic": bool(r.summary.get("synthetic")),
            "config_label": r.config_label, "repetition": r.summary.get("repetition"),
            "repetitions": r.summary.get("repetitions"),
            "started_at": r.summary.get("started_at"), "duration_s": r.summary.get("duration_s"),
            "date": prov.get("date"), "git_commit": git.get("commit"), "git_dirty": git.get("dirty"),
            "machine": machine_label(prov.get("machine")), "versions": _json_or_none(prov.get("versions")),
            "links_emulated": prov.get("links_emulated"),
            "configuration": _json_or_none(r.summary.get("configuration")),
            **{p: r.param(p) for p in ("prefill_bytes_per_partition", "replication_throttle_bytes_per_s",
                                       "objstore_bandwidth_bytes_per_s", "message_bytes",
                                       "produce_rate_msgs_per_s", "brokers")},
            "bandwidth_bytes_per_s": r.bandwidth, "linger_ms": r.param("linger_ms"),
            "load_cpu_s_per_1000_msgs": (r.summary.get("producer") or {}).get("load_cpu_s_per_1000_msgs"),
            **{k: st.get(k) for k in ("history_rows", "sends", "acked", "send_fail", "send_info", "reads", "events",
                                      "load_start", "load_end", "latency_count", "latency_p50_ms", "latency_p99_ms",
                                      "latency_p999_ms", "latency_max_ms", "timeline_t0", "timeline_bin_s")},
            "malformed_events": r.view.bad_events if r.view else 0,
            "moves": len(mine), "max_move_seconds": max(secs) if secs else None,
            "max_unavailable_seconds": max(ug) if ug else None,
            "run_max_unavailable_seconds": run_gaps.get(r.idx),
            "bytes_moved": sum(bm) if bm else None,
            "valid": run_verdict(r.summary),  # the run's verdict: its checks and how it ended
            "failed_checks": ",".join(failed) if isinstance(failed, list) else None,
            "problems": "; ".join(run_ending_problems(r.summary)) or None,
            **host_columns(r.summary),
        }
        for name in SAFETY_CHECKS:
            c = checks.get(name)
            row[name] = verdict(c.get("valid") if isinstance(c, dict) else c)
            # a count of an unknown check (no reads) is no count
            row[SAFETY_COUNTS[name]] = (c.get(SAFETY_COUNTS[name]) if isinstance(c, dict) and row[name] != "unknown"
                                        else None)
        rows.append(row)
    rows.sort(key=lambda x: x["run_key"])
    return rows


def host_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """The runs table's host columns from summary.json's ``host`` (bench/check/host.py)."""
    h = summary.get("host") if isinstance(summary.get("host"), dict) else {}
    return {"host_busy_mean_pct": h.get("busy_mean_pct"), "host_busy_peak_pct": h.get("busy_peak_pct"),
            "host_saturated": h.get("saturated"), "host_source": h.get("source"),
            "host_run_processes_pct": h.get("run_processes_pct"), "host_steal_pct": h.get("steal_mean_pct")}


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


__all__ = ["consumer_rows", "host_columns", "link_rows", "move_link_rows", "move_rows", "outage_rows", "run_rows", "tail_from_phases"]
