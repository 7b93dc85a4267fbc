"""The per-configuration table: a configuration's repetitions together, each figure's median, min
and max over its moves, faults or runs; latency quantiles pooled from its runs' raw samples."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from bench.analysis.aggregate.discovery import StoredRun
from bench.analysis.aggregate.tables import CONSUMER_FIGURES, PROTOCOL_FIGURES
from bench.check.metrics import MOVE_METRIC_NAMES
from bench.check.safety import VERDICTS
from bench.scenario import MOVE_ACTIONS


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _spread_cols(name: str, xs: Iterable[Any]) -> dict[str, float | None]:
    known = [float(x) for x in xs if x is not None]
    return {f"{name}_median": _med(known), f"{name}_min": min(known, default=None),
            f"{name}_max": max(known, default=None)}


def _sum_known(xs: Iterable[Any]) -> int | None:
    known = [int(x) for x in xs if x is not None]
    return sum(known) if known else None


def config_table(runs: list[StoredRun], tables: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per configuration (its repetitions together): the median, min and max of each figure over
    its moves, faults or runs; latency quantiles pooled from its runs' raw samples."""
    by_cfg: dict[str, list[StoredRun]] = defaultdict(list)
    for r in runs:
        by_cfg[r.config_key].append(r)
    lat = {(x["key"], x["scope"], x["phase"]): x for x in tables["latency"]
           if x["level"] == "config" and x["scope"] == "partitions"}
    out = []
    for ck, rs in sorted(by_cfg.items()):
        keys = {r.run_key for r in rs}
        mv = [m for m in tables["moves"] if m["run_key"] in keys]
        outages = [o for o in tables["outages"] if o["run_key"] in keys]
        run_rows = [x for x in tables["runs"] if x["run_key"] in keys]
        secs = [m["move_seconds"] for m in mv if m["move_seconds"] is not None]
        r0 = rs[0]
        # First move's windows, else the first fault's, whose "during" is from the fault to the next
        # action (its recovery): pooled raw samples over the configuration's runs.
        acts = [(m["action_id"], "during") for m in mv] or [(o["action_id"], "after") for o in outages]
        first_aid, while_ = min(acts, default=(None, "during"), key=lambda a: (len(a[0]), a[0]))
        during = next((x for (k, s, p), x in lat.items() if k == ck and p == while_ and x["action_id"] == first_aid), None)
        before = next((x for (k, s, p), x in lat.items() if k == ck and p == "before" and x["action_id"] == first_aid), None)
        planned = [r.summary.get("repetitions") for r in rs if isinstance(r.summary.get("repetitions"), int)]
        row = {
            "config_key": ck, "config_label": r0.config_label, "scenario": r0.summary.get("scenario"),
            "system": r0.system, "configuration": _json_or_none(r0.summary.get("configuration")),
            "params": _json_or_none(r0.summary.get("params")),
            "prefill_bytes_per_partition": r0.param("prefill_bytes_per_partition"),
            "replication_throttle_bytes_per_s": r0.param("replication_throttle_bytes_per_s"),
            "objstore_bandwidth_bytes_per_s": r0.param("objstore_bandwidth_bytes_per_s"),
            "bandwidth_bytes_per_s": r0.bandwidth, "linger_ms": r0.param("linger_ms"), "runs": len(rs), "repetitions": max(planned, default=None),
            "run_keys": ",".join(sorted(keys)), "moves": len(mv), "faults": len(outages),
            "move_seconds_stdev": statistics.stdev(secs) if len(secs) >= 2 else None,
            "during_p99_ms": during["p99_ms"] if during else None,
            "before_p99_ms": before["p99_ms"] if before else None,
            "lost_count": _sum_known(x["lost_count"] for x in run_rows),
            "duplicated_count": _sum_known(x["duplicated_count"] for x in run_rows),
            **{f"valid_{v}": sum(1 for x in run_rows if x["valid"] == v) for v in VERDICTS},
        }
        for name in ("move_seconds", "unavailable_seconds", "partition_bytes", *MOVE_METRIC_NAMES, "bytes_moved",
                     "bytes_moved_at_request", "bytes_moved_during_move", *PROTOCOL_FIGURES):
            row.update(_spread_cols(name, (m[name] for m in mv)))
        row.update(_spread_cols("outage_seconds", (o["unavailable_seconds"] for o in outages)))
        row.update(_spread_cols("recovery_seconds", (o["recovery_seconds"] for o in outages)))
        row.update(_spread_cols("producer_unavailable_seconds", (x["run_max_unavailable_seconds"] for x in run_rows)))
        row.update(_spread_cols("load_cpu_s_per_1000_msgs", (x["load_cpu_s_per_1000_msgs"] for x in run_rows)))
        # Consumers: over the configuration's moves (a fault's figures are in the consumers table).
        cons = [x for x in tables.get("consumers", []) if x["run_key"] in keys and x["action"] in MOVE_ACTIONS]
        for name in CONSUMER_FIGURES:
            row.update(_spread_cols(name, (x[name] for x in cons)))
        row.update(host_counts(run_rows, mv))
        out.append(row)
    return out



def host_counts(run_rows: list[dict[str, Any]], moves: list[dict[str, Any]]) -> dict[str, int]:
    """bench/check/host.py per configuration: its runs whose load window saturated the host, its
    moves whose window did, its moves it could not tell (null), the host's mean busy share over
    its runs' load windows and the runs' own processes' share of it (median, min, max over the
    runs)."""
    return {"runs_host_saturated": sum(1 for x in run_rows if x.get("host_saturated")),
            "moves_host_saturated": sum(1 for m in moves if m.get("host_saturated")),
            "moves_host_unknown": sum(1 for m in moves if m.get("host_saturated") is None),
            **_spread_cols("load_host_busy_mean_pct", (x.get("host_busy_mean_pct") for x in run_rows)),
            **_spread_cols("load_run_processes_pct", (x.get("host_run_processes_pct") for x in run_rows)),
            **_spread_cols("load_steal_pct", (x.get("host_steal_pct") for x in run_rows))}


def _json_or_none(x: Any) -> str | None:
    return json.dumps(x, sort_keys=True) if isinstance(x, dict) and x else None


__all__ = ["config_table"]
