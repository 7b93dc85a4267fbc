"""The aggregation job: discover runs, run the Spark passes in order, assemble the rows, fit and
project the models, write the tables and ``model.json``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.analysis import projection
from bench.analysis.aggregate import passes, rows
from bench.analysis.aggregate.configs import config_table
from bench.analysis.aggregate.discovery import StoredRun, discover_runs
from bench.analysis.aggregate.fits import (fit_models, handover_seconds, rebalance_checks, untiered_relations,
                                           validation_rows)
from bench.analysis.aggregate.plan import plan_runs
from bench.analysis.aggregate.spark import APPROX_ACCURACY, cpu_mark, jvm_cpu_s, read_histories, spark_session
from bench.analysis.aggregate.tables import DEFAULT_OUT, TABLES, write_table
from bench.check.summary import upgrade_summary


class AggregateError(Exception):
    """A user-facing problem (no runs, unreadable input): printed, never a traceback."""


@dataclass
class AggregateResult:
    out_dir: Path
    runs: list[StoredRun]
    tables: dict[str, list[dict[str, Any]]]
    models: dict[str, Any]
    warnings: list[str]
    timings: dict[str, float]


def aggregate(roots: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str] = DEFAULT_OUT, *,
              spark=None, master: str | None = None, quantiles: str = "exact",
              accuracy: int = APPROX_ACCURACY, write: bool = True, project: bool = True,
              pool_versions: bool = False, external_as_profile: bool = False) -> AggregateResult:
    """Discover runs under ``roots``, aggregate them with Spark, fit the models, project them
    (``project``: the grid and cluster simulations, :mod:`bench.analysis.projection`), write the
    tables and model.json (``write``; summary.md is the report's: bench.report.summary).

    ``spark``: an existing session (kept running); otherwise one is started and stopped here.
    ``pool_versions``: let a model rest on runs of more than one code version (never by default).
    ``external_as_profile``: runs on a cluster the harness did not start count as the system its
    configs match (`bench calibrate` fits that cluster's model so).
    Raises :class:`AggregateError` when there is nothing to aggregate.
    """
    if quantiles not in ("approx", "exact"):
        raise ValueError("quantiles must be 'approx' or 'exact'")
    runs, warnings = discover_runs(roots, external_as_profile)
    if not runs:
        where = ", ".join(str(r) for r in roots) or "(no directory given)"
        raise AggregateError(
            f"no runs found under {where}: a run directory holds summary.json and history.parquet. "
            "Produce runs with `python -m bench run <scenario.yaml>` first." + "".join(f"\n  {w}" for w in warnings))
    if spark is None:
        with spark_session(master) as s:
            return aggregate(roots, out_dir, spark=s, quantiles=quantiles, accuracy=accuracy, write=write,
                             project=project, pool_versions=pool_versions, external_as_profile=external_as_profile)
    out = Path(out_dir)
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    tables = compute(spark, runs, quantiles, accuracy, warnings, timings)
    t = time.perf_counter()
    models, model_tables = fit_models(tables["moves"], runs, pool_versions)
    models["validation"].extend(rebalance_checks(runs, tables["moves"], models["models"]))
    models["models"], checks = untiered_relations(tables["untiered"], models["models"])
    models["validation"].extend(checks)
    model_tables["model_validation"] = validation_rows(models["validation"])
    tables.update(model_tables)
    timings["models_s"] = time.perf_counter() - t
    t = time.perf_counter()
    models["projection"] = proj = projection.run(spark, models["models"], models["validation"],
                                                  out if write else None,
                                                  handover_seconds(tables["moves"], models["models"])) if project else {}
    if proj:  # every system with moves is in the headline, a system without a model saying why
        proj["headline"] = proj.get("headline", []) + projection.unmodelled(models["notes"])
    tables["projection"], tables["rebalance"] = proj.get("projection", []), proj.get("rebalance", [])
    for row in tables["model_fit"]:
        v = proj.get("validity", {}).get(row["system"]) or {}
        row.update(validated=v.get("validated"), validation_error_pct=v.get("error_pct"),
                   validation_reason=v.get("reason"), untiered=models["models"][row["system"]].to_row()["untiered"])
    timings["projection_s"] = time.perf_counter() - t
    tables["configs"] = config_table(runs, tables)
    timings["total_s"] = time.perf_counter() - t_all
    for k in ("_cpu_start", "_cpu_last"):
        timings.pop(k, None)
    res = AggregateResult(out, runs, tables, models, warnings, timings)
    if write:
        write_outputs(res)
    return res


def compute(spark, runs: list[StoredRun], qmode: str, accuracy: int, warnings: list[str],
            timings: dict[str, float], cache: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Every table but the models' and the configurations', from the passes in order."""
    t0 = time.perf_counter()
    timings["_cpu_start"] = jvm_cpu_s() or 0.0
    hist = read_histories(spark, runs)
    sends = passes.send_rows(hist)
    if cache:
        from pyspark import StorageLevel

        sends = sends.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # 1. Per run: counts, load window, latency over the whole run (raw samples).
        passes.run_stats(hist, runs, qmode, accuracy)
        # 2. Events to the driver, actions rebuilt from them exactly as the checkers do.
        passes.scan_events(hist, runs)
        timings["scan_s"] = time.perf_counter() - t0
        cpu_mark(timings, "scan")
        # 3. Driver-side plan: move candidates, unavailability and latency windows, timeline bins.
        plan = plan_runs(runs)
        # 4. Per action and partition it acts on, in one pass over its acked sends: the first ack
        # served by the new owner (move_seconds), the longest ack-free interval in the action's
        # window (unavailable_seconds) and the bytes acked before the request.
        t1 = time.perf_counter()
        per_tp, run_gaps = passes.partition_pass(spark, sends, runs, plan.unavailable, plan.moves)
        gaps = {k: v["unavailable_seconds"] for k, v in per_tp.items()}
        timings["moves_unavailable_s"] = time.perf_counter() - t1
        cpu_mark(timings, "moves_unavailable")
        # 5. Latency before/during/after each action, per run and pooled per configuration.
        t2 = time.perf_counter()
        latency_rows = passes.latency(spark, sends, plan.latency, runs, qmode, accuracy)
        timings["latency_s"] = time.perf_counter() - t2
        cpu_mark(timings, "latency")
        # 6. Timeline (sent/acked per bin, latency quantiles per bin) and error counts.
        t3 = time.perf_counter()
        timeline_rows = passes.timeline(spark, sends, plan.timeline, runs, qmode, accuracy)
        errors = passes.error_counts(hist, runs)
        timings["timeline_errors_s"] = time.perf_counter() - t3
        cpu_mark(timings, "timeline_errors")
        # 7. The consumer groups' timeline.
        t4 = time.perf_counter()
        consumer_timeline = passes.consumer_timeline(spark, hist, plan.timeline, runs, qmode, accuracy)
        timings["consumers_s"] = time.perf_counter() - t4
        cpu_mark(timings, "consumers")
    finally:
        if cache:
            sends.unpersist()
    # 8. Rows per move, fault and run, from each summary in the current shape (an older one's
    # missing figures re-derived from the raw rows: the passes' bytes written during a move).
    for r in runs:
        r.summary = upgrade_summary(r.summary, r.view, written_during=lambda m, r=r: per_tp.get(
            (r.idx, str(m.get("action_id")), m.get("topic"), m.get("partition")), {}).get("produced_during"))
    moves = rows.move_rows(runs, plan.moves, per_tp, gaps, plan.bytes_by_action, latency_rows)
    return {"runs": rows.run_rows(runs, moves, gaps, run_gaps), "moves": moves,
            "outages": rows.outage_rows(plan.faults, per_tp), "latency": latency_rows, "errors": errors,
            "phases": plan.phases, "move_progress": plan.progress, "timeline": timeline_rows,
            "links": rows.link_rows(runs), "move_links": rows.move_link_rows(runs, moves),
            "consumers": rows.consumer_rows(runs), "consumer_timeline": consumer_timeline,
            "untiered": rows.untiered_rows(runs)}


def write_outputs(res: AggregateResult) -> None:
    """Every table (Parquet + CSV) and model.json into ``res.out_dir``."""
    out = res.out_dir
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        write_table(name, res.tables.get(name, []), out)
    models = res.models["models"]
    proj = res.models.get("projection") or {}
    (out / "model.json").write_text(json.dumps({
        "models": {k: m.to_row() for k, m in models.items()}, "notes": res.models["notes"],
        "validation": res.models["validation"], "validity": proj.get("validity", {}),
        "headline": proj.get("headline", []), "projection": res.tables["projection"],
        "grid": proj.get("grid", {}), "rebalance": res.tables["rebalance"],
        "timings_s": res.timings, "warnings": res.warnings,
    }, indent=2, default=str), encoding="utf-8")


__all__ = ["AggregateError", "AggregateResult", "aggregate", "compute", "write_outputs"]
