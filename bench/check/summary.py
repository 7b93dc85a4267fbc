"""``summary.json`` of a run: a pure function of the run's stored history and resolved scenario.

:func:`build_summary` is what the runner writes and what ``python -m bench analyze RUN_DIR``
recomputes, so ``analyze`` reproduces ``summary.json`` exactly (run facts such as start time
and provenance come from the history's ``run_start`` / ``run_end`` events, not from the
clock). Shape::

    {schema_version (SCHEMA_VERSION; a summary without one is version 1, see upgrade_summary),
     run_id, scenario, system, started_at, finished_at, duration_s, completed, error,
     ended (completed | interrupted: SIGINT | crashed: <exception>, bench.run.ending),
     config_id (the run id without its repetition), repetition (1-based), repetitions,
     provenance: {date, machine: {cpus, mem_gib, kernel, platform, python}, git: {commit, dirty},
                  versions: {reassign-bench, confluent-kafka, librdkafka, kafka-python, locust,
                             pyspark, minio, seaweedfs}, links_emulated},
     configuration: {system, label, brokers, replication_factor, min_insync_replicas, acks,
                     linger_ms, ack_meaning, throttle_bytes_per_s, throttle_rule,
                     move_budget_bytes_per_s, move_budget_rule ("half the link per move" |
                     "a fixed rate" | "none"), move_budget_mechanism, link_rate,
                     client_link_rate, object_store_link_rate, wal_batch_interval_ms,
                     wal_upload_threshold_bytes, <the profile's describe()>,
                     system_settings: <the profile's describe() again, apart>,
                     scale: null (no scale model declared) | {bytes, rate, tolerance,
                            settings: [{setting, dimension (bytes|rate|time), value, production,
                                        source, factor, declared, breaks}], breaks: [setting]}
                            (bench.scenario.scale.scale_check)},
     params: {prefill_bytes_per_partition, replication_throttle_bytes_per_s,
              replication_throttle_of_link, move_budget_of_link, linger_ms,
              objstore_bandwidth_bytes_per_s, message_bytes, produce_rate_msgs_per_s, brokers,
              producers, duration_s, partitions, replication_factor, link_rate,
              object_store_link_rate, client_link_rate, <each system's own setting the scenario
              sets (bench.scenario.OWN_SETTINGS)>, <every matrix key>},
     checks: <bench.checkers.check_all>,
     moves: [{action_id, kind, topic, partition, from, to, new_leader, request_ts,
              link_rate_at_request (the emulated link in force at the request on the move's source
              and target brokers, the slowest; null: loopback), move_seconds,
              bytes_moved_inter_broker, bytes_moved_objstore, bytes_written_during_move (acked on the
              partition from the request to the leader change), bytes_moved_at_request,
              bytes_moved_during_move (bench.check.moves.split_bytes_moved), unavailable_seconds,
              partition_bytes, copy_bytes_at_request (the bytes the leader told the new replica to
              copy, tiered storage; null: it copied the whole log, bench.check.moves.copy_start),
              phases: {phase: seconds},
              links: {from_ts, to_ts, samples, nodes: {node: {role (source|target|objstore),
                      tx|rx: {peak_bytes_per_s, mean_bytes_per_s, peak_utilisation,
                              mean_utilisation}}}} (emulated links only, else null; the samples
                      overlapping [request_ts, request_ts + move_seconds], see
                      bench.check.moves.move_link_fill),
              estimate_seconds, estimate_seconds_low, estimate_seconds_high, estimate_feasible,
              estimate_action_seconds, estimate_model, estimate_model_commit, estimate_error_pct,
              estimate_client_ack_seconds (what the run estimated before the request,
              bench/run/move_estimate.py; absent when it made none, estimate_error: why it could
              not)}],
     producer: {sent, acked, failed, info, rate_msgs_per_s, throughput_mb_per_s,
                target_rate_msgs_per_s, load_seconds, latency_ms: {p50, p99, p999, max},
                load_cpu_s_per_1000_msgs (the load process's CPU s per 1,000 acked messages),
                locust: {...Locust's own request stats}},
     verify: {partitions, complete, read, prefill_read},
     outages: [{action_id, kind, broker, start_ts, partitions, unavailable_seconds (worst affected
                partition, until its first ack after recovery), worst_partition, recovered_ts,
                recovery_seconds, recovered_by (the recovery action's kind or "leader_change",
                then new_leader: the broker it failed over to), first_ack_seconds (fault start to
                the worst partition's first ack after recovery),
                during_moves (move action ids in flight at the fault), run_unavailable_seconds
                (worst gap of those partitions over the whole run)}],
     consumers: null without workload consumers, else {groups: {id: {set, mode, required,
                delivered, missing, missing_backlog, redelivered}}, delivery_valid, end_to_end_ms (tail groups, run),
                catch_up: {id: {backlog_bytes, catch_up_seconds, bytes_per_s, caught_up}},
                actions: [{action_id, action, end_to_end_ms: {before|during|after: {count, p50_ms,
                p99_ms, p999_ms}} (the action's partitions), gap_seconds (longest time a tail
                group got nothing), catch_up_bytes_per_s: {before|during|after}}]}
     cpu: {process: mean %},
     host: {busy_mean_pct, busy_peak_pct, samples, saturated (true | false | null: unknown, fewer
            than 2 host samples), reason (why unknown, else null), samples_over_threshold,
            run_processes_pct (the run's own processes' share of the host), cpu_pressure_mean_pct
            (the share of the time some task waited for a CPU, the kernel's PSI), steal_mean_pct (the
            hypervisor's share: other guests of the machine), from_ts, to_ts (the
            load window), threshold_pct, source (host_sample | cpu_sample._machine | null)}: the
            whole host's CPU over the load window, bench.check.host (each move's the
            same, moves[].host_busy_mean_pct, host_busy_peak_pct, host_saturated),
     links: {node: {tx|rx: {peak_bytes_per_s, mean_bytes_per_s, peak_utilisation,
                            mean_utilisation}}}  (emulated links only; tx = sent by the node)}

Units: seconds, bytes; ``throughput_mb_per_s`` is 10^6 bytes/s of acked message values over the
load window (first send to last ack). ``move_seconds`` is null when unknown (``move_reason`` says
why). NaN/inf never appear (null instead).
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from bench.check import HistoryView, check_all, check_move_seconds
from bench.check.host import run_host
from bench.check.metrics import MOVE_METRICS, MoveRef
from bench.check.moves import ESTIMATE_FIELDS, link_stats, move_link_fill, outage_of, split_bytes_moved
from bench.check.outcome import run_ending_problems, run_problems, run_verdict
from bench.check.safety import verdict_counts
from bench.history.names import (
    COUNTER_INTER_BROKER,
    COUNTER_OBJSTORE,
    COUNTER_OBJSTORE_REQUESTS,
    EVENT_ACTION_START,
    EVENT_COUNTER,
    EVENT_CPU_SAMPLE,
    EVENT_EXTERNAL_CLUSTER,
    EVENT_JOURNAL_TRANSLATED,
    EVENT_LINK_SAMPLE,
    EVENT_LOAD_FINISHED,
    EVENT_MOVE_PHASE,
    EVENT_PREFILL,
    EVENT_RUN_END,
    EVENT_RUN_START,
    EVENT_VERIFY,
)
from bench.check.view import hashable
from bench.check.client_view import client_requests, producer_client_lines, protocol_view
from bench.history.names import OBJSTORE_REQUEST_KINDS
from bench.history.store import read_history
from bench.units import format_bytes as _fmt_bytes
from bench.scenario import FAULT_RECOVERY, OWN_SETTINGS, Scenario, parse_scenario
from bench.scenario.scale import scale_check
from workloads.messages import PRODUCER_ACKS


SCHEMA_VERSION = 6  # what build_summary writes; upgrade_summary reads every older one (6: external_cluster, moves' objstore_requests)


def producer_linger_ms(sc: Scenario) -> int | float | None:
    """The load's producers' linger.ms: the workload's, unless the scenario's client settings
    (``system.client``, applied last to every client) give their own."""
    v = sc.system.client.get("linger.ms")
    if v is None:
        return sc.workload.linger_ms
    try:
        x = float(v)  # an {env: NAME} reference is not known here
    except (TypeError, ValueError):
        return None
    return int(x) if x.is_integer() else x


def params_of(sc: Scenario, matrix: dict[str, Any] | None = None) -> dict[str, Any]:
    wl = sc.workload
    settings = sc.settings()  # shares of the link in bytes/s, each in its system's own setting
    out = {
        "prefill_bytes_per_partition": sc.prefill.bytes_per_partition,
        "prefill_batch_bytes": sc.prefill.batch_bytes,
        "prefill_record_bytes": sc.prefill.record_bytes,
        "move_models": sc.checks.move_models,
        # raw broker configs (system.extra): part of what a move model's family is keyed by
        "system_extra": dict(sorted(sc.system.extra.items())) or None,
        # in bytes/s even when the scenario gave it as a share of the link (the move budget too)
        "replication_throttle_bytes_per_s": settings.get("replication_throttle_bytes_per_s"),
        "replication_throttle_of_link": sc.system.replication_throttle_of_link,
        "move_budget_of_link": sc.system.move_budget_of_link,
        "linger_ms": producer_linger_ms(sc),
        "pace_partitions": wl.pace_partitions,
        "client_library": wl.client_library,  # the producing library (workloads/clients/)
        "objstore_bandwidth_bytes_per_s": sc.system.objstore_bandwidth_bytes_per_s,
        "message_bytes": wl.message_bytes,
        "produce_rate_msgs_per_s": wl.produce_rate_msgs_per_s,
        "brokers": sc.system.brokers,
        "producers": wl.producers,
        "duration_s": wl.duration_s,
        "partitions": sum(t.partitions for t in wl.topics),
        "replication_factor": max(sc.replication_factor(t) for t in wl.topics),
        "shape": wl.shape.kind,
        "key_distribution": wl.key_distribution,
        # the effective rates: the other two links default to link_rate (bench/run/cluster.py)
        "link_rate": sc.network.link_rate,
        "object_store_link_rate": (sc.network.object_store_link_rate or sc.network.link_rate
                                   if sc.profile.object_store is not None else None),
        "client_link_rate": sc.network.client_link_rate or sc.network.link_rate,
    }
    # the systems' own settings where the scenario sets them, a move budget in its system's own
    # (None: the system's default)
    out.update({f: settings[f] for f in OWN_SETTINGS if settings.get(f) is not None})
    for k, v in (matrix or {}).items():
        out[k] = v
    return out


def throttle_rule(sc: Scenario) -> str | None:
    """How the scenario set the replication throttle, in an operator's words."""
    share = sc.system.replication_throttle_of_link
    if share is None and sc.profile.move_budget == "replication_throttle_bytes_per_s":
        share = sc.system.move_budget_of_link  # the move budget is this system's throttle
    if share is not None:
        return (f"{share:.0%} of a broker's {sc.network.link_rate} link per move; the rest stays "
                f"for produce, fetch and in-sync replication")
    if sc.system.replication_throttle_bytes_per_s is not None:
        return "a fixed rate in bytes/s"
    return None


def _share_text(share: float) -> str:
    return {0.5: "half", 1.0: "all", 0.25: "a quarter"}.get(float(share), f"{share:.0%}")


def move_budget_of(sc: Scenario) -> tuple[int | None, str]:
    """The run's cap on a move's traffic in bytes/s (None: no limit) and the rule in an operator's
    words: "half the link per move", "a fixed rate", "none"."""
    prof = sc.profile
    rate = sc.settings().get(prof.move_budget) if prof.move_budget else None
    if not rate:
        return None, "none"
    share = sc.system.move_budget_of_link
    if share is None and prof.move_budget == "replication_throttle_bytes_per_s":
        share = sc.system.replication_throttle_of_link  # the copy systems' own way of saying it
    return int(rate), (f"{_share_text(share)} the link per move" if share is not None else "a fixed rate")


def configuration_of(sc: Scenario) -> dict[str, Any]:
    """The settings a reader needs to judge whether the systems were compared on equal terms
    (the report's "configurations compared" table)."""
    wl, net, prof = sc.workload, sc.network, sc.profile
    rf = max(sc.replication_factor(t) for t in wl.topics)
    min_isr = max(sc.min_insync_replicas(t) for t in wl.topics)
    has_store = prof.object_store is not None
    throttle = sc.settings()["replication_throttle_bytes_per_s"] if prof.bandwidth_param == \
        "replication_throttle_bytes_per_s" else None
    budget, rule = move_budget_of(sc)
    return {
        "system": sc.system.kind, "label": sc.system.label or prof.label, "brokers": sc.system.brokers,
        "bootstrap": sc.system.bootstrap,  # a cluster the harness did not start, else None
        "client_settings": sorted(sc.system.client),  # names only: values may be secrets
        "replication_factor": rf, "min_insync_replicas": min_isr if rf > 1 else None,
        "acks": PRODUCER_ACKS, "linger_ms": producer_linger_ms(sc), "ack_meaning": prof.ack_meaning,
        "throttle_bytes_per_s": throttle, "throttle_rule": throttle_rule(sc) if throttle else None,
        # the operator's move budget, the same rule for every system, and the system's mechanism for it
        "move_budget_bytes_per_s": budget, "move_budget_rule": rule,
        "move_budget_mechanism": prof.move_budget_label if budget else None,
        "link_rate": net.link_rate, "client_link_rate": net.client_link_rate or net.link_rate,
        "object_store_link_rate": (net.object_store_link_rate or net.link_rate) if has_store else None,
        "wal_batch_interval_ms": None, "wal_upload_threshold_bytes": None,
        **prof.describe(sc.settings()),
        # the same, kept apart: the report's "system settings" column shows each system's own
        "system_settings": prof.describe(sc.settings()),
        # the scale model the scenario declares, checked setting by setting (None: none declared)
        "scale": scale_check(sc),
    }


def clean(x: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python, tuples -> lists, keys -> str."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _events(v: HistoryView, name: str) -> list:
    return v.events_named(name)


def _first_detail(v: HistoryView, name: str) -> dict[str, Any]:
    evs = _events(v, name)
    return dict(evs[0].detail) if evs else {}


def _acked_bytes_before(table: pa.Table, topic: str, partition: int, ts: float) -> int:
    return _acked_bytes(table, topic, partition, pc.less_equal(table["ack_ts"], ts))


def _acked_bytes_between(table: pa.Table, topic: str, partition: int, lo: float, hi: float) -> int:
    """Bytes of the partition's sends acked in [lo, hi)."""
    return _acked_bytes(table, topic, partition,
                        pc.and_(pc.greater_equal(table["ack_ts"], lo), pc.less(table["ack_ts"], hi)))


def _acked_bytes(table: pa.Table, topic: str, partition: int, when) -> int:
    m = pc.and_(pc.and_(pc.equal(table["kind"], "send"), pc.equal(table["outcome"], "ok")),
                pc.and_(pc.equal(table["topic"], topic), pc.equal(table["partition"], partition)))
    m = pc.and_(m, when)
    sizes = table.filter(pc.fill_null(m, False))["size_bytes"]
    s = pc.sum(sizes).as_py()
    return int(s or 0)


def _moves(table: pa.Table, v: HistoryView, checks: dict[str, Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    every_broker = range(1, int(params.get("brokers") or 0) + 1)
    prefill = {(e.detail.get("topic"), e.detail.get("partition")): int(e.detail.get("bytes") or 0)
               for e in _events(v, EVENT_PREFILL)}
    starts = {e.detail.get("action_id"): e.detail for e in _events(v, EVENT_ACTION_START)}
    # Per (action, partition): counters and phases named by partition.
    ctr: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    phases: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e in _events(v, EVENT_COUNTER):
        aid, tp = e.detail.get("action_id"), (e.detail.get("topic", e.topic), e.detail.get("partition", e.partition))
        if aid is not None and isinstance(e.detail.get("value"), (int, float)):
            ctr[(aid, tp)][str(e.detail.get("name"))] += e.detail["value"]
    for e in _events(v, EVENT_MOVE_PHASE):
        aid, tp = e.detail.get("action_id"), (e.detail.get("topic", e.topic), e.detail.get("partition", e.partition))
        if aid is not None and isinstance(e.detail.get("seconds"), (int, float)):
            phases[(aid, tp)][str(e.detail.get("phase"))] += float(e.detail["seconds"])
    bytes_by_action = {a["action_id"]: a for a in checks["bytes_moved"]["actions"]}
    unavail = {(w["action_id"], w["topic"], w["partition"]): w["unavailable_seconds"]
               for w in checks["unavailable_seconds"]["actions"]}
    acts = {a.action_id: a for a in v.actions}
    journaled = bool(_events(v, EVENT_JOURNAL_TRANSLATED))
    client_lines = producer_client_lines(table, v)
    out = []
    for m in checks["move_seconds"]["moves"]:
        aid, tp = m["action_id"], (m["topic"], m["partition"])
        entry = next((x for x in (starts.get(aid) or {}).get("partitions") or []
                      if (x.get("topic"), x.get("partition")) == tp), {})
        c = ctr.get((aid, tp))
        act = bytes_by_action.get(aid, {})
        if c is not None:
            ib, obj = c.get(COUNTER_INTER_BROKER, 0), c.get(COUNTER_OBJSTORE, 0)
        elif act and sum(1 for x in checks["move_seconds"]["moves"] if x["action_id"] == aid) == 1:
            ib, obj = act.get("inter_broker_bytes", 0), act.get("objstore_bytes", 0)  # one partition: all its bytes
        else:
            ib, obj = 0, 0
        secs = m.get("move_seconds")
        req = m.get("request_ts")
        lc = m.get("leader_change_ts")
        during = _acked_bytes_between(table, tp[0], tp[1], req, lc) if req is not None and lc is not None else None
        ref = MoveRef(aid, tp[0], tp[1], entry.get("from"), entry.get("to"), req, lc,
                      secs if isinstance(secs, (int, float)) else None)
        out.append({
            "action_id": aid, "kind": m.get("action"), "topic": tp[0], "partition": tp[1],
            "from": entry.get("from"), "to": entry.get("to"), "new_leader": m.get("new_leader"),
            "request_ts": req,
            # the models' rule (aggregate rows): the slowest of the move's own brokers' links
            "link_rate_at_request": (v.link_rate_at(req, params.get("link_rate"),
                                                    set(entry.get("from") or ()) | set(entry.get("to") or ())
                                                    or every_broker) if req is not None else params.get("link_rate")),
            "move_seconds": secs if isinstance(secs, (int, float)) else None,
            **({} if isinstance(secs, (int, float)) else {"move_reason": m.get("reason", "unknown")}),
            # request -> the leader change move_seconds waits for (the cluster's part of the move)
            "elect_seconds": round(lc - req, 4) if lc is not None and req is not None else None,
            # Unknown (null), not 0, on a cluster without a journal the harness reads: bytes moved
            # are counted by the brokers; the protocol view has the added replicas' size instead.
            "bytes_moved_inter_broker": int(ib) if journaled else None,
            "bytes_moved_objstore": int(obj) if journaled else None,
            # what the move asked of the object store, by request kind (its close and open)
            "objstore_requests": ({k: int((c or {}).get(COUNTER_OBJSTORE_REQUESTS.format(kind=k), 0))
                                   for k in OBJSTORE_REQUEST_KINDS} if journaled else None),
            "bytes_written_during_move": during,
            **split_bytes_moved(int(ib) + int(obj) if journaled else None, during),
            "unavailable_seconds": unavail.get((aid, tp[0], tp[1])),
            "partition_bytes": prefill.get(tp, 0) + (_acked_bytes_before(table, tp[0], tp[1], req)
                                                     if req is not None else 0),
            **{metric.name: metric.compute(v, ref) for metric in MOVE_METRICS},  # bench/check/metrics.py
            "phases": dict(sorted(phases.get((aid, tp), {}).items())),
            "links": move_link_fill(v, acts[aid], tp, secs if isinstance(secs, (int, float)) else None),
            "protocol": protocol_view(v, aid, tp, req, entry.get("from"), entry.get("to"), m.get("move_complete_ts")),
            **{k: m[k] for k in ESTIMATE_FIELDS if k in m},  # the estimate before the request, if made
            **(client_requests(client_lines, tp, req, secs, lc) if journaled else {}),
        })
    return out


def _sum_known(xs: list[Any]) -> Any:
    """The sum, or None when there is nothing or only unknowns to sum."""
    known = [x for x in xs if x is not None]
    return sum(known) if known else None


def _producer(table: pa.Table, v: HistoryView, sc: Scenario | None) -> dict[str, Any]:
    out_counts = {"ok": 0, "fail": 0, "info": 0}
    sends = table.filter(pc.fill_null(pc.equal(table["kind"], "send"), False))
    for row in pc.value_counts(sends["outcome"]).to_pylist():
        if row["values"] in out_counts:
            out_counts[row["values"]] = row["counts"]
    acked = sends.filter(pc.fill_null(pc.equal(sends["outcome"], "ok"), False))
    if sends.num_rows:
        t0 = pc.min(sends["ts"]).as_py()
        t1 = pc.max(acked["ack_ts"]).as_py() if acked.num_rows else pc.max(sends["ts"]).as_py()
        window = max(1e-9, t1 - t0)
    else:
        window = None
    acked_bytes = int(pc.sum(acked["size_bytes"]).as_py() or 0) if acked.num_rows else 0
    lat = v.by_send_ts["lat_ms"]
    lat = lat[~np.isnan(lat)]
    pct = ({"p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
            "p999": float(np.percentile(lat, 99.9)), "max": float(lat.max())} if lat.size else
           {"p50": None, "p99": None, "p999": None, "max": None})
    fin = _first_detail(v, EVENT_LOAD_FINISHED)
    return {
        "sent": int(sends.num_rows), "acked": out_counts["ok"], "failed": out_counts["fail"],
        "info": out_counts["info"],
        "rate_msgs_per_s": out_counts["ok"] / window if window else None,
        "throughput_mb_per_s": acked_bytes / window / 1e6 if window else None,
        "target_rate_msgs_per_s": sc.workload.produce_rate_msgs_per_s if sc is not None else None,
        "load_seconds": window,
        "acked_bytes": acked_bytes,
        "latency_ms": pct,
        "locust": fin.get("locust"),
        "purged": fin.get("purged"),
        "skipped_behind_schedule": fin.get("skipped"),
        # the Locust workers that ran the producers (load.workers; None: the load process itself)
        "workers": fin.get("workers"),
        # the producing library (workload.client_library) as it ran: version, settings, its own counts
        "client": fin.get("client"),
    }


def _outages(v: HistoryView, checks: dict[str, Any]) -> list[dict[str, Any]]:
    """Per fault action: the partitions it affected, their worst outage (the fault windows of
    ``check_unavailable_seconds``: until the first ack after recovery), when and how the last of
    them recovered, the worst gap of those partitions over the whole run, and the moves it hit
    (requested before the fault, first ack on the new owner after it, or never)."""
    out = []
    run_worst = {(w["topic"], w["partition"]): w["unavailable_seconds"]
                 for w in checks["unavailable_seconds"]["run"]["worst_partitions"]}
    moves = checks["move_seconds"]["moves"]
    for a in v.actions:
        if a.kind not in FAULT_RECOVERY:
            continue
        win = [w for w in checks["unavailable_seconds"]["actions"] if w["action_id"] == a.action_id]
        hit = sorted({m["action_id"] for m in moves if m["request_ts"] <= a.start
                      and not (m.get("first_ack_ts") is not None and m["first_ack_ts"] <= a.start)})
        out.append({
            "action_id": a.action_id, "kind": a.kind, "broker": a.broker, "start_ts": a.start,
            **outage_of(a.start, win),
            "during_moves": hit,
            "run_unavailable_seconds": max((run_worst.get((w["topic"], w["partition"]), 0.0) for w in win),
                                           default=None),
        })
    return out


def _mean_known(xs: list[Any]) -> float | None:
    xs = [float(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _consumers(checks: dict[str, Any]) -> dict[str, Any] | None:
    """The consumer groups' figures (bench/check/consumers.py) per run and per action; None for
    a run without consumers."""
    delivery = checks["delivery"]
    if not delivery["groups"]:
        return None
    e2e, gaps, cu = checks["end_to_end"], checks["consumer_gaps"], checks["catch_up"]
    gap_by = {a["action_id"]: a for a in gaps["actions"]}
    e2e_by = {a["action_id"]: a for a in e2e["actions"]}
    # Every action any of them saw (a run with catch-up groups only has no latency windows).
    seen: dict[Any, str] = {}
    for a in [*e2e["actions"], *gaps["actions"], *(x for g in cu["groups"].values() for x in g["actions"])]:
        seen.setdefault(a["action_id"], a["action"])
    actions = []
    for aid, kind in seen.items():
        a = e2e_by.get(aid) or {}
        rates = [x["bytes_per_s"] for g in cu["groups"].values() for x in g["actions"] if x["action_id"] == aid]
        actions.append({
            "action_id": aid, "action": kind,
            "end_to_end_ms": {ph: {k: w.get(k) for k in ("count", "p50_ms", "p99_ms", "p999_ms")}
                              for ph, w in (a.get("partitions") or {}).items()},
            "gap_seconds": (gap_by.get(aid) or {}).get("max_gap_seconds"),
            # over the catch-up groups (each its own rate; a mean of rates, not of latencies)
            "catch_up_bytes_per_s": {ph: _mean_known([r[ph] for r in rates]) for ph in ("before", "during", "after")}
            if rates else None,
        })
    return {
        "groups": {gid: {k: g[k] for k in ("set", "mode", "required", "delivered", "missing", "missing_backlog",
                                           "redelivered")}
                   for gid, g in delivery["groups"].items()},
        "delivery_valid": delivery["valid"],
        "end_to_end_ms": e2e["run"],
        "catch_up": {gid: {k: g[k] for k in ("backlog_bytes", "catch_up_seconds", "bytes_per_s", "caught_up")}
                     for gid, g in cu["groups"].items()},
        "actions": actions,
    }


def _cpu(v: HistoryView) -> dict[str, Any]:
    """Mean CPU % (100 = one core) per process over the ``cpu_sample`` events of the load;
    ``_machine`` is the whole machine (100 = all cores)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for e in _events(v, EVENT_CPU_SAMPLE):
        for k, x in e.detail.items():
            if isinstance(x, (int, float)):
                acc[k].append(float(x))
    return {k: round(sum(xs) / len(xs), 1) for k, xs in sorted(acc.items()) if xs}


def _links(v: HistoryView) -> dict[str, Any]:
    """Per emulated link (node), over the ``link_sample`` events of the load: peak and mean
    bytes/s the node sent (tx) and received (rx), and those as a fraction of the link's rate."""
    samples = _events(v, EVENT_LINK_SAMPLE)
    return {node: link_stats(samples, node) for node in sorted({n for e in samples for n in e.detail})}


def load_cpu_s_per_1000(cpu: dict[str, Any] | None, producer: dict[str, Any] | None) -> float | None:
    """CPU seconds the load process (the producers) spent per 1,000 acked messages: its mean CPU
    over the load (``cpu.load``, % of one core) divided by the acked rate. What a client that spins
    costs (the report's sensitivity table)."""
    load = (cpu or {}).get("load")
    rate = (producer or {}).get("rate_msgs_per_s")
    if not isinstance(load, (int, float)) or not isinstance(rate, (int, float)) or rate <= 0:
        return None
    return round(load / 100.0 / rate * 1000.0, 6)


def build_summary(table: pa.Table, scenario: Scenario | None) -> dict[str, Any]:
    v = HistoryView(table, scenario)
    checks = check_all(v, scenario)
    start = _first_detail(v, EVENT_RUN_START)
    end = _first_detail(v, EVENT_RUN_END)
    verify = [e.detail for e in _events(v, EVENT_VERIFY)]
    producer, cpu = _producer(table, v, scenario), _cpu(v)
    producer["load_cpu_s_per_1000_msgs"] = load_cpu_s_per_1000(cpu, producer)
    # a run's own record of its configuration and params (run_start), in today's shape
    configuration = start.get("configuration") or (configuration_of(scenario) if scenario else None)
    params = start.get("params") or (params_of(scenario) if scenario else {})
    summary = {
        "schema_version": SCHEMA_VERSION,
        "run_id": start.get("run_id"),
        "scenario": start.get("scenario", scenario.name if scenario else None),
        "system": start.get("system", scenario.system.kind if scenario else None),
        "started_at": start.get("started_at"),
        "finished_at": end.get("finished_at"),
        "duration_s": end.get("duration_s"),
        "completed": end.get("completed"),
        "error": end.get("error"),
        **({"ended": end["ended"]} if "ended" in end else {}),  # bench.run.ending's words
        "config_id": start.get("config_id", start.get("run_id")),
        "repetition": start.get("repetition", 1),
        "repetitions": start.get("repetitions", 1),
        "provenance": start.get("provenance"),
        "configuration": current_configuration(configuration),
        "params": current_params(params, configuration),
        "checks": checks,
        "problems": run_problems(v, scenario),  # how the run ended, beside its checks (bench/check/outcome.py)
        "moves": _moves(table, v, checks, params),
        "producer": producer,
        "verify": {"partitions": len(verify), "complete": sum(1 for d in verify if d.get("complete")),
                   "read": sum(int(d.get("read") or 0) for d in verify),
                   "prefill_read": sum(int(d.get("prefill_read") or 0) for d in verify),
                   "incomplete": [f"{d.get('topic')}-{d.get('partition')}: {d.get('error')}"
                                  for d in verify if not d.get("complete")]},
        "outages": _outages(v, checks),
        "consumers": _consumers(checks),
        "cpu": cpu,
        "host": run_host(v),
        "links": _links(v),
        # a cluster the harness did not start: what it found (its id, brokers, defaults and which
        # system's profile its configs match, `behaves_as`) and what it set; null for its own
        "external_cluster": _first_detail(v, EVENT_EXTERNAL_CLUSTER) or None,
    }
    summary["verdict"] = run_verdict(summary)
    return clean(summary)


WAL_SETTINGS = ("wal_batch_interval_ms", "wal_upload_threshold_bytes")  # flat in a version-1 configuration
_OLD_THROTTLE_RULE = re.compile(r"^(\d+(?:\.\d+)?)% of a broker's")


def current_configuration(conf: Any) -> Any:
    """A run's ``configuration`` (as its run_start recorded it) with what older versions did not
    record filled in (a copy; a current one comes back equal). Version 2 and before: the move
    budget was the copy systems' replication throttle (the shared system's move had no limit)."""
    if not isinstance(conf, dict):
        return conf
    out = dict(conf)
    if "move_budget_bytes_per_s" not in out:
        th = out.get("throttle_bytes_per_s")
        m = _OLD_THROTTLE_RULE.match(out.get("throttle_rule") or "")
        out["move_budget_bytes_per_s"] = th
        out["move_budget_rule"] = ("none" if not th else f"{_share_text(float(m.group(1)) / 100)} the link per move"
                                   if m else out.get("throttle_rule") or "a fixed rate")
        out["move_budget_mechanism"] = "the replication throttle" if th else None
    out.setdefault("scale", None)  # no scale model was declared before there was one
    return out


def current_params(params: Any, conf: Any) -> Any:
    """A run's ``params`` with what older versions did not record: the producers' linger.ms (the
    configuration's, where it has one) and the move budget (none was given as one before)."""
    if not isinstance(params, dict):
        return params
    out = dict(params)
    if "linger_ms" not in out:
        out["linger_ms"] = conf.get("linger_ms") if isinstance(conf, dict) else None
    out.setdefault("move_budget_of_link", None)
    return out


def upgrade_summary(summary: dict[str, Any], view: HistoryView | None = None, *,
                    written_during: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """``summary`` in the current shape (:data:`SCHEMA_VERSION`), whatever wrote it: the one place
    that knows how older summaries differ (a new dict; a current summary comes back equal).

    Any version: a per-move metric of :data:`~bench.check.metrics.MOVE_METRICS` a move lacks (a
    metric declared after the run, e.g. ``copy_bytes_at_request`` in a summary from before it) is
    computed from ``view`` (left out without one), so declaring a metric needs no version step.

    Version 1 (no ``schema_version``) spans several shapes; what a summary lacks is filled in:

    * ``moves[].bytes_written_during_move`` (from before the bytes split): ``written_during(move)``,
      the bytes acked on the partition from the request to the leader change, from the raw rows
      (null without it), and the split of ``bytes_moved`` into ``bytes_moved_at_request`` and
      ``bytes_moved_during_move``;
    * ``configuration.system_settings`` (from before it): the WAL settings the configuration
      carried flat (those set), else none.

    Version 2 and older (:func:`current_configuration`, :func:`current_params`, which
    :func:`build_summary` also applies to the configuration an older run recorded):
    ``configuration.move_budget_*`` (the copy systems' replication throttle; none for the shared
    system, whose move was not limited), ``configuration.scale`` (null), ``params.linger_ms`` (the configuration's) and
    ``params.move_budget_of_link`` (null), ``producer.load_cpu_s_per_1000_msgs`` (from ``cpu.load``
    and the acked rate).

    Version 3 and older: ``host`` (the host's CPU over the load window, bench.check.host) from
    ``view``'s samples (unknown without a view).

    Version 4 and older: ``problems`` (how the run ended, bench/check/outcome.py: from ``view``'s
    events, else from the summary's end fields) and ``verdict``. Checks added since (``corrupted``)
    are not filled in: re-run them (``bench analyze --write``).

    Version 5 and older: ``external_cluster`` (from ``view``'s event, else null) and each move's
    ``objstore_requests`` (null: the brokers did not count them then).
    """
    out = json.loads(json.dumps(summary))  # a deep copy of plain JSON values
    moves = [m for m in out.get("moves") or [] if isinstance(m, dict)]
    if view is not None and any(x.name not in m for m in moves for x in MOVE_METRICS):
        # the moves as the checker finds them in the history (what a metric may need besides the summary)
        seen = {(x["action_id"], x["topic"], x["partition"]): x for x in check_move_seconds(view)["moves"]}
        for m in moves:
            found = seen.get((hashable(m.get("action_id")), m.get("topic"), m.get("partition")), {})
            ref = MoveRef(hashable(m.get("action_id")), m.get("topic"), m.get("partition"), m.get("from"),
                          m.get("to"), m.get("request_ts"), found.get("leader_change_ts"), m.get("move_seconds"))
            for metric in MOVE_METRICS:
                if metric.name not in m:
                    m[metric.name] = metric.compute(view, ref)
    if out.get("schema_version", 1) >= SCHEMA_VERSION:
        return out
    for m in moves:
        if "bytes_written_during_move" not in m:
            during = written_during(m) if written_during is not None else None
            ib, ob = m.get("bytes_moved_inter_broker"), m.get("bytes_moved_objstore")
            moved = None if ib is None and ob is None else float(ib or 0) + float(ob or 0)
            m.update(bytes_written_during_move=during, **split_bytes_moved(moved, during))
    conf = out.get("configuration")
    if isinstance(conf, dict) and conf.get("system_settings") is None:
        conf["system_settings"] = {k: conf[k] for k in WAL_SETTINGS if conf.get(k) is not None}
    # Version 2: no move budget, no linger.ms among the params, no load CPU per message.
    out["configuration"] = current_configuration(conf)
    out["params"] = current_params(out.get("params"), conf)
    prod = out.get("producer")
    if isinstance(prod, dict) and "load_cpu_s_per_1000_msgs" not in prod:
        prod["load_cpu_s_per_1000_msgs"] = load_cpu_s_per_1000(out.get("cpu"), prod)
    # Version 3: no host.
    if "host" not in out:
        out["host"] = run_host(view)  # unknown without the history
    # Version 4: no problems, no verdict.
    if "problems" not in out:
        out["problems"] = run_problems(view, view.scenario) if view is not None else run_ending_problems(out)
    # Version 5: no external_cluster, no request counts.
    if "external_cluster" not in out:
        out["external_cluster"] = (_first_detail(view, EVENT_EXTERNAL_CLUSTER) or None) if view is not None else None
    for m in moves:
        m.setdefault("objstore_requests", None)
    out["verdict"] = run_verdict(out)
    out["schema_version"] = SCHEMA_VERSION
    return out


def load_run(run_dir: Path | str) -> tuple[pa.Table, Scenario]:
    run_dir = Path(run_dir)
    if not (run_dir / "scenario.yaml").is_file():
        raise FileNotFoundError(f"{run_dir}: no scenario.yaml (not a run directory)")
    data = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    sc = parse_scenario(data, str(run_dir / "scenario.yaml"))
    return read_history(run_dir / "history.parquet"), sc


def analyze(run_dir: Path | str) -> dict[str, Any]:
    """Re-run the checkers on a stored run and rebuild its summary (nothing is re-run)."""
    table, sc = load_run(run_dir)
    return build_summary(table, sc)


def dumps(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, sort_keys=False, allow_nan=False) + "\n"


def write_summary(run_dir: Path | str) -> dict[str, Any]:
    """Build the summary from the files just written (exactly as ``analyze`` will) and store it."""
    run_dir = Path(run_dir)
    summary = analyze(run_dir)
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(dumps(summary))
    tmp.replace(run_dir / "summary.json")
    return json.loads(dumps(summary))


# --------------------------------------------------------------------------------------------
# Comparison table


def _fmt_s(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "-"


def comparison_rows(summaries: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for path, s in summaries:
        p = s.get("params", {})
        checks = s.get("checks", {})
        lat_actions = checks.get("latency", {}).get("actions", [])
        during_p99 = max((a["all"]["during"].get("p99_ms") or 0 for a in lat_actions), default=None)
        moves = s.get("moves") or []
        outs = s.get("outages") or []
        rows.append({
            "scenario": s.get("scenario"), "system": s.get("system"),
            "partition_bytes": max((m.get("partition_bytes") or 0 for m in moves), default=None)
            if moves else p.get("prefill_bytes_per_partition"),
            "move_seconds": max((m["move_seconds"] for m in moves if m.get("move_seconds") is not None), default=None),
            "bytes_inter_broker": _sum_known([m.get("bytes_moved_inter_broker") for m in moves]),
            "bytes_objstore": _sum_known([m.get("bytes_moved_objstore") for m in moves]),
            "unavailable_seconds": max([m["unavailable_seconds"] for m in moves if m.get("unavailable_seconds") is not None]
                                       + [o["unavailable_seconds"] for o in outs
                                          if o.get("unavailable_seconds") is not None], default=None),
            "p99_during_ms": during_p99 if lat_actions else None,
            "acked": s.get("producer", {}).get("acked"),
            "rate": s.get("producer", {}).get("rate_msgs_per_s"),
            "valid": checks.get("valid"), "failed": checks.get("failed"), "path": path,
            "verdict": run_verdict(s), "problems": run_ending_problems(s),
        })
    return rows


def print_comparison(summaries: list[tuple[str, dict[str, Any]]], title: str = "comparison", console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    import sys

    console = console or Console(width=None if sys.stdout.isatty() else 200)
    t = Table(title=title)
    for col in ("scenario", "system", "partition bytes", "move s", "inter-broker", "objstore",
                "unavail. s", "p99 during ms", "acked", "msg/s", "checks", "run"):
        t.add_column(col, overflow="fold")
    rows = comparison_rows(summaries)
    for r in rows:
        word = r["verdict"]
        unknown = f"[yellow]unknown{(': ' + r['problems'][0]) if r['problems'] else ''}[/yellow]"
        shown = {"pass": "[green]pass[/green]", "fail": f"[red]fail {r['failed']}[/red]"}.get(word, unknown)
        t.add_row(r["scenario"] or "-", r["system"] or "-", _fmt_bytes(r["partition_bytes"]), _fmt_s(r["move_seconds"]),
                  _fmt_bytes(r["bytes_inter_broker"]), _fmt_bytes(r["bytes_objstore"]),
                  _fmt_s(r["unavailable_seconds"]), _fmt_s(r["p99_during_ms"]), str(r["acked"]),
                  f"{r['rate']:.0f}" if isinstance(r["rate"], (int, float)) else "-", shown, str(r["path"]))
    console.print(t)
    console.print(f"runs: {verdict_counts(r['verdict'] for r in rows)}")
