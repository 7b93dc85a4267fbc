"""The TB-scale projection on Spark: validated move models over the grid users care about, and
whole-cluster rebalances simulated the way Cruise Control executes them.

Inputs: the fitted :class:`~bench.analysis.model.MoveModel` of each system and its held-out
validation entries (:func:`bench.analysis.model.validate`, plus the rebalance checks). Outputs:

* ``projection_grid``: every (system, partition size, link, ingest, throttle policy or upload
  threshold) point: move seconds and bytes moved (Spark computes it column-wise; written as a
  Parquet folder by Spark).
* ``rebalance``: one row per simulated cluster (brokers, data, link, concurrency, system): time to
  rebalance, bytes moved, producer-seconds above their latency target
  (:func:`bench.analysis.rebalance.simulate`, run inside Spark tasks).
* ``projection``: the readable subset for summary.md and the report, and ``headline``: the AutoMQ
  article's example (a partition ingesting 100 MB/s, 8.2 TB a day) and one cluster-scale rebalance,
  at 1 and 10 Gbit/s, each with the validation errors it rests on. An entry whose model failed or
  lacks a validation says "not validated" and why, and carries no number.

1 Gbit/s = 125,000,000 bytes/s; sizes are decimal (1 TB = 10^12 bytes).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.analysis import model as mdl
from bench.analysis.model.base import EXTRAPOLATION_BOUNDS
from bench.analysis.model.budget import WIRE_PAYLOAD_SHARE, LinkBudget, mb
from bench.analysis.model.copy import THROTTLE_POLICIES
from bench.analysis.model.handover import UPLOAD_THRESHOLDS
from bench.analysis.model.tiered_copy import TIERED_STARTS, tiered_copy_bytes
from bench.units import format_bytes
from systems.registry import PROFILES

GRID_SIZES = tuple(float(x) for x in np.geomspace(1e9, 1e13, 201))  # 1 GB .. 10 TB
GRID_LINKS_GBIT = (1.0, 10.0, 25.0)
GRID_INGEST = tuple(float(x) for x in np.geomspace(1e6, 1e8, 41))  # 1 .. 100 MB/s

# The headline (the AutoMQ article's example and one cluster rebalance).
HEADLINE_LINKS_GBIT = (1.0, 10.0, 25.0)
ARTICLE_INGEST = 100e6  # 100 MB/s into one partition ...
ARTICLE_BYTES = 8.2e12  # ... is about 8.2 TB after a day (the article's figure)
ARTICLE_CONSUMER_GROUPS = 1  # one consumer group reads it (its steady reads share the sender's link)
# What the article's "hours at 1 Gbps" leaves out, in words (the report and summary.md).
ARTICLE_LEAVES_OUT = (
    "The article's \"hours at 1 Gbps\" divides the partition's bytes by the link. It leaves out that the link "
    "already carries the partition's own traffic: at replication factor 3 its leader sends every byte to two "
    "followers (200 MB/s) and to each consumer group (100 MB/s), a tiered leader uploads it too (100 MB/s), and a "
    "shared-storage owner writes it to its WAL and again as stream objects (200 MB/s) and serves the readers. "
    "At 1 Gbit/s (125 MB/s) none of that fits before any move starts, so no move time exists; and a copy that "
    "gets the link's rest must also outrun the 100 MB/s still being written.")
CLUSTER = {"brokers": 100, "add": 10, "total_bytes": 1e15, "partitions": 10_000,
           "ingest_per_partition": 1e6, "concurrency": 5}
CLUSTER_PARTITION_BYTES = CLUSTER["total_bytes"] / CLUSTER["partitions"]  # 100 GB each
PARTITION_TITLE = "One partition ingesting 100 MB/s: one day is 8.2 TB"
CLUSTER_TITLE = ("Scale-out of a 100-broker cluster holding 1 PB (10,000 partitions, 1 MB/s each) by 10 brokers, "
                 "5 concurrent moves per broker (Cruise Control's default)")
# The simulated clusters: 10 to 500 brokers, up to 1 PB.
SIM_BROKERS = (10, 50, 100, 250, 500)
SIM_TOTAL_BYTES = (1e13, 1e14, 1e15)
SIM_CONCURRENCY = (1, 5)
SIM_MEAN_PARTITION_BYTES = 1e11  # 100 GB partitions: 1 PB = 10,000 partitions
NO_RUNS_VARY = {
    "size": "no measured configuration varies the partition size: `make bench` runs four",
    "throttle": "no measured configuration varies the throttle: run `python -m bench run sweep`",
    "ingest": "no measured configuration varies the ingest rate: run `python -m bench run sweep`",
    "rebalance": "no measured multi-partition drain or scale-out: run `python -m bench run drain`",
    "budget": ("no measured move was capped by what its link leaves after the steady traffic (reassign-one "
               "without a move budget, in `make bench`, is one)"),
}


@dataclass
class Validity:
    """Whether a system's model may project, the largest held-out |error| it rests on, and why not."""

    validated: bool
    error_pct: float | None
    axes: list[str]
    reason: str | None


def validity(system: str, validation: list[dict[str, Any]], extra_axes: tuple[str, ...] = ()) -> Validity:
    """Every axis group the system's move family requires (its ``required_axes``: copy: size,
    throttle or link, ingest; tiered copy: size, throttle or link, and ingest; handover: size;
    plus ``extra_axes``) must have at least one ``ok`` held-out check and none ``failed``."""
    fam = mdl.family_of(system)
    groups = list(fam.required_axes if fam is not None else (("size",),)) + [(a,) for a in extra_axes]
    errs, axes, missing, failed = [], [], [], []
    for group in groups:
        entries = [v for v in validation if v["system"] == system and v["axis"] in group]
        bad = [v for v in entries if v["status"] == "failed"]
        good = [v for v in entries if v["status"] == "ok"]
        if bad:
            worst = max(bad, key=lambda v: abs(v["error_pct"]) if v["error_pct"] is not None else math.inf)
            failed.append(f"held-out {worst['axis']} {worst.get('label') or ''} error "
                          f"{worst['error_pct']:+.1f} % beyond ±{worst['target_pct']:g} %")
        elif not good:
            why = next((v["reason"] for v in entries if v.get("reason")), None) or NO_RUNS_VARY.get(group[0])
            if fam is not None and fam.more_runs and not any(v["status"] == "insufficient" and v["axis"] != "size"
                                                             for v in entries):
                why = f"{why}; {fam.more_runs}"
            missing.append(f"no passing held-out {' or '.join(group)} check ({why})")
        else:
            axes.extend(sorted({v["axis"] for v in good}))
            errs.extend(abs(v["error_pct"]) for v in good)
    if failed or missing:
        reason = "; ".join(failed + missing)
        return Validity(False, None, axes, reason)
    return Validity(True, max(errs) if errs else None, axes, None)


# --------------------------------------------------------------------------------------------
# The grid


def project_grid(spark, models: dict[str, mdl.MoveModel], out: Path | None = None) -> dict[str, Any]:
    """Evaluate every model over the grid with Spark column expressions. Returns ``{points, seconds,
    by_system}`` and writes ``out/projection_grid`` (Parquet) when ``out`` is given."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    sizes = spark.createDataFrame([(s,) for s in GRID_SIZES], "partition_bytes double")
    links = spark.createDataFrame([(g, g * mdl.GBIT_BYTES_PER_S) for g in GRID_LINKS_GBIT],
                                  "link_gbit_s double, link_bytes_per_s double")
    ingest = spark.createDataFrame([(r,) for r in GRID_INGEST], "ingest_bytes_per_s double")
    frames = []
    for system, m in models.items():
        # the sender's steady egress is linear in the ingest: its terms at 1 byte/s, scaled
        per_byte = article_budget(m, 1.0, ingest=1.0).steady
        base = (sizes.crossJoin(links).crossJoin(ingest).withColumn("system", F.lit(system))
                .withColumn("steady_bytes_per_s", F.col("ingest_bytes_per_s") * F.lit(per_byte))
                .withColumn("payload_bytes_per_s", F.col("link_bytes_per_s") * F.lit(WIRE_PAYLOAD_SHARE)))
        df = m.kind.grid(spark, base, m)  # the family's policies and columns
        infeasible = F.col("steady_bytes_per_s") >= F.col("payload_bytes_per_s")
        df = (df.withColumn("infeasible", infeasible)
              .withColumn("move_seconds", F.when(~infeasible, F.col("move_seconds")))
              .withColumn("bytes_moved", F.when(~infeasible, F.col("bytes_moved"))))
        frames.append(df.select("system", "partition_bytes", "link_gbit_s", "ingest_bytes_per_s", "policy",
                                "throttle_share", "upload_threshold_bytes", "steady_bytes_per_s", "infeasible",
                                "cap_bytes_per_s", "tail_bytes", "objects", "copy_bytes", "move_seconds",
                                "bytes_moved"))
    if not frames:
        return {"points": 0, "seconds": time.perf_counter() - t0, "by_system": {}}
    grid = frames[0]
    for f in frames[1:]:
        grid = grid.unionByName(f)
    # No time: infeasible (the steady traffic fills the link), a copy whose ingest outruns it, or a
    # shared open beyond the measured object counts.
    grid = grid.withColumn("unprojected", F.col("move_seconds").isNull())
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        grid.coalesce(1).write.mode("overwrite").parquet(str(out / "projection_grid"))
        stats = spark.read.parquet(str(out / "projection_grid"))
    else:
        stats = grid
    rows = stats.groupBy("system").agg(F.count(F.lit(1)).alias("points"), F.sum(F.col("unprojected").cast("int")).alias("unprojected"),
                                       F.sum(F.col("infeasible").cast("int")).alias("infeasible"),
                                       F.max("move_seconds").alias("max_s"), F.min("move_seconds").alias("min_s")).collect()
    by_system = {r["system"]: {"points": r["points"], "unprojected": r["unprojected"], "infeasible": r["infeasible"],
                               "min_s": r["min_s"],
                               "max_s": r["max_s"]}
                 for r in rows}
    return {"points": sum(v["points"] for v in by_system.values()), "seconds": time.perf_counter() - t0,
            "by_system": by_system}


# --------------------------------------------------------------------------------------------
# Cluster rebalances


def cluster_configs(models: dict[str, mdl.MoveModel], handover_s: dict[str, float] | None = None
                    ) -> list[dict[str, Any]]:
    """The simulated clusters (one row each): every system x brokers x data x link x concurrency,
    scale-out by 10 % of the brokers, copy throttled to 50 % of the link, shared at a 512 MiB
    upload threshold. Plus the headline cluster. ``handover_s``: each system's measured median
    unavailability of a moved partition (what its producers wait at the switch)."""
    rows = []
    for system, m in models.items():
        for brokers in SIM_BROKERS:
            for total in SIM_TOTAL_BYTES:
                for gbit in GRID_LINKS_GBIT:
                    for conc in SIM_CONCURRENCY:
                        rows.append(_cluster_row(system, m, brokers, max(1, brokers // 10), total,
                                                 max(brokers, int(round(total / SIM_MEAN_PARTITION_BYTES))), gbit, conc))
        for gbit in HEADLINE_LINKS_GBIT:
            c = CLUSTER
            rows.append({**_cluster_row(system, m, c["brokers"], c["add"], c["total_bytes"], c["partitions"], gbit,
                                        c["concurrency"]), "headline": True})
    for r in rows:
        r["handover_s"] = (handover_s or {}).get(r["system"], 0.0)
    return rows


def _cluster_row(system: str, m: mdl.MoveModel, brokers: int, add: int, total: float, partitions: int, gbit: float,
                 conc: int) -> dict[str, Any]:
    link = gbit * mdl.GBIT_BYTES_PER_S
    caps = m.kind.cluster_caps(link)  # replication factor, throttle or upload threshold
    return {"system": system, "family": m.family, "brokers": brokers, "add": add, "total_bytes": total,
            "partitions": partitions, "rf": caps["rf"], "link_gbit_s": gbit,
            "concurrency": conc, "ingest_per_partition": CLUSTER["ingest_per_partition"],
            "throttle_share": caps["throttle_share"], "upload_threshold_bytes": caps["upload_threshold_bytes"],
            "cap_bytes_per_s": m.efficiency * link * caps["cap_share"],
            "fixed_s": m.fixed_s, "open_per_object_s": m.open_per_object_s, "untiered": m.untiered,
            "headline": False}


def simulate_cluster(cfg: dict[str, Any]) -> dict[str, Any]:
    """One cluster row -> its simulated rebalance (runs inside a Spark task)."""
    try:
        from bench.analysis import rebalance as rb
    except ImportError:  # on a cluster's executors, shipped as a single file
        import rebalance as rb  # type: ignore[no-redef]
    from dataclasses import replace

    t0 = time.perf_counter()
    fam = mdl.family_named(cfg["family"])
    copy = fam.copies
    sizes = rb.partition_sizes(cfg["total_bytes"] / cfg["rf"], cfg["partitions"], seed=7)
    ingest = cfg["ingest_per_partition"]
    carry = [fam.sim_move(b, ingest, cfg) for b in sizes]  # (bytes to carry, extra fixed seconds) each
    parts = [(f"p{i}", b, ingest) for i, (b, _) in enumerate(carry)]
    moves = rb.plan_scale_out(cfg["brokers"], cfg["add"], parts, cfg["rf"], seed=7, copies=copy,
                              fixed_s=cfg["fixed_s"])
    if fam.opens_objects:  # opening a partition walks its objects: the per-object cost by its size
        extra = {f"p{i}": x for i, (_, x) in enumerate(carry)}
        moves = [replace(m, fixed_s=cfg["fixed_s"] + extra[m.key]) for m in moves]
    per_broker = cfg["partitions"] / cfg["brokers"]
    brokers = range(1, cfg["brokers"] + 1)
    res = rb.simulate(moves, cfg["cap_bytes_per_s"], cfg["cap_bytes_per_s"] if copy else None, cfg["concurrency"],
                      sharing="fifo",  # a Kafka-style quota serves whoever fetches first (rebalance.py)
                      retention=True,  # a production partition keeps its size: retention deletes its ingest
                      handover_s=cfg.get("handover_s") or 0.0, link=cfg["link_gbit_s"] * mdl.GBIT_BYTES_PER_S,
                      ingest_by_broker={b: per_broker * ingest * cfg["rf"] for b in brokers},
                      leaders_by_broker={b: per_broker for b in brokers})
    return {**cfg, "moves": len(moves), "rebalance_seconds": res.seconds, "bytes_moved": res.bytes_moved,
            "never": len(res.never), "producer_seconds_above_target": res.producer_seconds_above_target,
            "sim_seconds": time.perf_counter() - t0}


def simulate_clusters(spark, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every cluster row simulated in Spark tasks (one row per task slot, spread evenly)."""
    if not configs:
        return []
    sc = spark.sparkContext
    if not sc.master.startswith("local"):  # executors elsewhere need the simulator's one file
        sc.addPyFile(str(Path(__file__).with_name("rebalance.py")))
    n = max(1, min(len(configs), sc.defaultParallelism * 4))
    return sc.parallelize(configs, n).map(simulate_cluster).collect()


# --------------------------------------------------------------------------------------------
# The readable subset and the headline


TABLE_SIZES = (("1 GB", 1e9), ("100 GB", 1e11), ("1 TB", 1e12), ("8.2 TB", ARTICLE_BYTES))
DOMAIN_WORDS = {"bytes": "bytes to move", "rate": "the move's rate", "ingest_share": "ingest / the move's rate",
                "tail": "unuploaded tail", "objects": "objects opened",
                "untiered": "ingest per upload interval (segments)"}


def production_rf(system: str) -> int:
    """The replication factor of the system's production configuration (its profile)."""
    p = PROFILES.get(system)
    return int(p.replication_factor or 1) if p is not None else 1


def article_budget(m: mdl.MoveModel, link: float, ingest: float = ARTICLE_INGEST,
                   groups: int = ARTICLE_CONSUMER_GROUPS) -> LinkBudget:
    """The sending broker's link budget for a partition ingesting ``ingest`` in the system's
    production configuration, ``groups`` consumer groups reading it."""
    return LinkBudget(link, tuple(m.kind.steady_terms(ingest, production_rf(m.system), groups)))


# Axes whose small values rest on a fitted intercept: the untiered relation's a (the active
# segment's mean fill) carries a backlog below the measured ones, so a projection there
# extrapolates too, by the smallest measured value over the projected one.
BELOW_EXTRAPOLATES = ("untiered",)


def domain(system: str, m: mdl.MoveModel, validation: list[dict[str, Any]], inputs: dict[str, float]
           ) -> dict[str, dict[str, Any]]:
    """Per domain axis of a projected value: its value, the range the model was fitted on, the
    largest held-out value a passing check of the system reached, that check's |error|, the
    extrapolation factor beyond it and the axis' bound (``within``: factor <= bound)."""
    ok = [v for v in validation if v["system"] == system and v["status"] == "ok" and v.get("test_domain")
          and ((v.get("fit") or {}).get("version") == m.version)]
    out = {}
    for axis, value in inputs.items():
        held = [v for v in ok if axis in v["test_domain"]]
        top = max(held, key=lambda v: v["test_domain"][axis][1]) if held else None
        hmax = top["test_domain"][axis][1] if top else None
        measured = m.untiered["backlog"] if axis == "untiered" and m.untiered else m.domain.get(axis)
        factor, below = (value / hmax if hmax else None), False
        if axis in BELOW_EXTRAPOLATES and measured and factor is not None and 0 < value < measured[0]:
            factor, below = measured[0] / value, True
        bound = EXTRAPOLATION_BOUNDS[axis]
        out[axis] = {"projected": value, "measured": measured, "held_out_max": hmax,
                     "error_pct": top["error_pct"] if top else None, "check": top["label"] if top else None,
                     "factor": factor, "below": below, "bound": bound, "within": factor is not None and factor <= bound}
    return out


def extrapolation_reason(dom: dict[str, dict[str, Any]]) -> str | None:
    """"not validated: extrapolation" and why, or None when every axis is within its bound."""
    beyond = []
    for axis, d in dom.items():
        if d["within"]:
            continue
        if d["held_out_max"] is None:
            beyond.append(f"{DOMAIN_WORDS[axis]}: no passing held-out check reaches it")
        elif d.get("below"):
            beyond.append(f"{DOMAIN_WORDS[axis]} {_axis_value(axis, d['projected'])} is {_times(d['factor'])} below the "
                          f"smallest measured {_axis_value(axis, d['measured'][0])} (bound {d['bound']:g}x)")
        else:
            beyond.append(f"{DOMAIN_WORDS[axis]} {_axis_value(axis, d['projected'])} is {_times(d['factor'])} the "
                          f"largest held-out {_axis_value(axis, d['held_out_max'])} (bound {d['bound']:g}x)")
    return ("extrapolation: " + "; ".join(beyond)) if beyond else None


def _times(f: float) -> str:
    """``87.5x``, ``11,109x``."""
    return f"{f:,.0f}x" if f >= 1000 else f"{f:.3g}x"


def _axis_value(axis: str, v: float) -> str:
    if axis in ("bytes", "tail"):
        return format_bytes(v)
    if axis == "rate":
        return mb(v)
    if axis == "objects":
        return mdl.fmt_count(v)
    return f"{v:.3g}"


def validity_text(dom: dict[str, dict[str, Any]]) -> str:
    """``held-out error -1.0 % up to 64 MiB; extrapolated 1.2e+05x`` per axis, joined."""
    parts = []
    for axis, d in dom.items():
        if d["held_out_max"] is None:
            parts.append(f"{DOMAIN_WORDS[axis]}: not checked")
            continue
        err = f"{d['error_pct']:+.1f} %" if d["error_pct"] is not None else "n/a"
        ext = (f"extrapolated {_times(d['factor'])}{' below' if d.get('below') else ''}" if d["factor"] > 1
               else "within")
        parts.append(f"{DOMAIN_WORDS[axis]}: held-out error {err} up to {_axis_value(axis, d['held_out_max'])}; {ext}")
    return "; ".join(parts)


def table_rows(models: dict[str, mdl.MoveModel], valid: dict[str, Validity],
               validation: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The projection table of summary.md and the report: the article's partition (100 MB/s ingest,
    production replication factor, one consumer group) at every table size and headline link; a
    copy with what the link leaves, shared at 512 MiB uploads."""
    rows = []
    for system, m in models.items():
        v = valid[system]
        for gbit in HEADLINE_LINKS_GBIT:
            for label, size in TABLE_SIZES:
                rows.append(partition_case(system, m, v, gbit, size, label, validation or []))
    return rows


def partition_case(system: str, m: mdl.MoveModel, v: Validity, gbit: float, size: float, label: str,
                   validation: list[dict[str, Any]] | None = None, *, ingest: float = ARTICLE_INGEST,
                   budget: LinkBudget | None = None) -> dict[str, Any]:
    """One partition of ``size`` ingesting ``ingest`` in the system's production configuration,
    moved over a ``gbit`` link, as its model's family projects it (an entry of the projection
    table and the headline; the headline cluster's moves with the cluster's ``budget`` and ``v``
    its validity, rebalance checks included): ``status`` infeasible (the steady traffic
    fills the link: the arithmetic), not validated (a missing or failed check, or an axis beyond its
    extrapolation bound: the reason) or validated (the value)."""
    link = gbit * mdl.GBIT_BYTES_PER_S
    budget = budget or article_budget(m, link, ingest)
    base = {"system": system, "link_gbit_s": gbit, "link_bytes_per_s": link, "size_label": label,
            "partition_bytes": size, "ingest_bytes_per_s": ingest, "replication_factor": production_rf(system),
            "consumer_groups": ARTICLE_CONSUMER_GROUPS, "budget": budget.arithmetic(),
            "steady_bytes_per_s": budget.steady, "based_on_runs": ",".join(m.runs), "version": m.version}
    if budget.infeasible:
        return {**base, "status": "infeasible", "move_seconds": None, "move_seconds_se": None,
                "move_time": "infeasible", "never": False, "bytes_moved": None, "validated": False,
                "error_pct": None, "reason": budget.arithmetic(), "basis": budget.arithmetic(),
                "validity": {}, "cap_bytes_per_s": None}
    cap = budget.cap(None)
    t, se, moved, basis, inputs = m.kind.partition_case(m, cap, size, label, ingest)
    if budget.binds(None) and v.validated:  # what the link leaves caps the move: the budget term must be checked too
        b = validity(system, validation or [], ("budget",))
        errs = [e for e in (v.error_pct, b.error_pct) if e is not None]
        v = b if not b.validated else Validity(True, max(errs) if errs else None, sorted(set(v.axes) | set(b.axes)), None)
    dom = domain(system, m, validation or [], inputs)
    reason = v.reason if not v.validated else extrapolation_reason(dom)
    assumed = m.kind.bytes_assumed if m.untiered is None else None  # a measured relation replaces the assumption
    if reason is None and assumed and inputs.get("bytes", size) < size:
        reason = assumed
    ok = reason is None
    return {**base, "status": "validated" if ok else "not validated", "cap_bytes_per_s": cap,
            "move_seconds": t if ok and math.isfinite(t) else None, "move_seconds_se": se if ok else None,
            "move_time": mdl.human_seconds(t) if ok else "not validated", "never": ok and not math.isfinite(t),
            "bytes_moved": moved if ok else None, "validated": ok, "error_pct": v.error_pct if ok else None,
            "reason": reason, "basis": f"{basis}; {budget.arithmetic()}", "validity": dom,
            "validity_text": validity_text(dom)}


def cluster_budget(m: mdl.MoveModel, gbit: float) -> LinkBudget:
    """A broker's budget in the headline cluster: its share of the leaders, each ingesting
    ``ingest_per_partition``, in the system's production configuration, one consumer group."""
    c = CLUSTER
    per_broker = c["partitions"] / c["brokers"] * c["ingest_per_partition"]
    return article_budget(m, gbit * mdl.GBIT_BYTES_PER_S, per_broker)


def headline(models: dict[str, mdl.MoveModel], valid: dict[str, Validity], sims: list[dict[str, Any]],
             sim_valid: dict[str, Validity], validation: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The report's headline entries (schema in bench/report/model_text.py)."""
    out = []
    for system, m in models.items():
        label = PROFILES[system].label if system in PROFILES else system
        v = valid[system]
        for gbit in HEADLINE_LINKS_GBIT:
            p = partition_case(system, m, v, gbit, ARTICLE_BYTES, "8.2 TB", validation)
            value, ok = p["move_seconds"], p["validated"]
            out.append({"case": "partition", "title": PARTITION_TITLE,
                        "system": system, "system_label": label, "link_gbit_s": gbit, "status": p["status"],
                        "value_s": value if ok else None,
                        "value_text": (("never (ingest outruns the copy)" if p["never"] else mdl.human_seconds(value))
                                       if ok else None),
                        "bytes_moved": p["bytes_moved"], "moves": 1, "error_pct": p["error_pct"],
                        "validations": v.axes, "reason": p["reason"], "basis": p["basis"],
                        "validity": p["validity"], "validity_text": p.get("validity_text"), "budget": p["budget"],
                        "replication_factor": p["replication_factor"], "version": m.version})
        sv = sim_valid.get(system) or Validity(False, None, [], "no simulated cluster")
        for gbit in HEADLINE_LINKS_GBIT:
            s = next((x for x in sims if x["system"] == system and x.get("headline") and x["link_gbit_s"] == gbit), None)
            budget = cluster_budget(m, gbit)
            # One of its moves, as the partition case judges it: the same extrapolation bounds and
            # assumptions (its partition's bytes, the rate its broker's link leaves).
            mv = partition_case(system, m, sv, gbit, CLUSTER_PARTITION_BYTES, "a partition", validation,
                                ingest=CLUSTER["ingest_per_partition"], budget=budget)
            ok = mv["validated"] and s is not None and not budget.infeasible
            secs = s["rebalance_seconds"] if s else None
            status = "infeasible" if budget.infeasible else ("validated" if ok else "not validated")
            reason = (f"per broker, {budget.arithmetic()}" if budget.infeasible
                      else mv["reason"] if not mv["validated"] else (None if s else "not simulated"))
            out.append({"case": "cluster", "title": CLUSTER_TITLE, "system": system, "system_label": label,
                        "link_gbit_s": gbit, "status": status,
                        "value_s": secs if ok and secs is not None and math.isfinite(secs) else None,
                        "value_text": (mdl.human_seconds(secs) if secs is not None and math.isfinite(secs)
                                       else "never (ingest outruns the copy)") if ok else None,
                        "bytes_moved": s["bytes_moved"] if ok else None, "moves": s["moves"] if s else None,
                        "error_pct": mv["error_pct"] if ok else None, "validations": sv.axes, "reason": reason,
                        "basis": (f"{s['moves']:,} moves simulated; {m.formula()}" if s else m.formula()),
                        "validity": mv["validity"], "validity_text": mv.get("validity_text"),
                        "budget": f"per broker, {budget.arithmetic()}",
                        "replication_factor": production_rf(system), "version": m.version})
    return out


def unmodelled(notes: dict[str, str]) -> list[dict[str, Any]]:
    """Headline entries of the systems whose moves gave no model (``notes``: system -> why): each
    case and link "not validated", with the reason, so a comparison never silently drops a system."""
    out = []
    for system, why in notes.items():
        label = PROFILES[system].label if system in PROFILES else system
        for case, title in (("partition", PARTITION_TITLE), ("cluster", CLUSTER_TITLE)):
            for gbit in HEADLINE_LINKS_GBIT:
                out.append({"case": case, "title": title, "system": system, "system_label": label, "link_gbit_s": gbit,
                            "status": "not validated", "value_s": None, "value_text": None, "bytes_moved": None,
                            "moves": None, "error_pct": None, "validations": [], "reason": f"no move-time model ({why})",
                            "basis": "no model", "validity": {}, "validity_text": None, "budget": None,
                            "replication_factor": production_rf(system), "version": None})
    return out


def run(spark, models: dict[str, mdl.MoveModel], validation: list[dict[str, Any]], out: Path | None = None,
        handover_s: dict[str, float] | None = None) -> dict[str, Any]:
    """The whole projection: -> {grid stats, rebalance rows, projection rows, headline, timings}."""
    t0 = time.perf_counter()
    # a model is validated only by checks of its own code version (a check of another commit
    # validated other code)
    validation = [v for v in validation if v["system"] not in models or not v.get("fit")
                  or v["fit"].get("version") == models[v["system"]].version]
    valid = {s: validity(s, validation) for s in models}
    sim_valid = {s: validity(s, validation, ("rebalance",)) for s in models}
    grid = project_grid(spark, models, out)
    t1 = time.perf_counter()
    sims = simulate_clusters(spark, cluster_configs(models, handover_s))
    t2 = time.perf_counter()
    for r in sims:
        r["validated"] = sim_valid[r["system"]].validated
    return {"grid": grid, "rebalance": sims, "projection": table_rows(models, valid, validation),
            "headline": headline(models, valid, sims, sim_valid, validation), "leaves_out": ARTICLE_LEAVES_OUT,
            "validity": {s: vars(v) for s, v in valid.items()},
            "timings_s": {"grid_s": t1 - t0, "clusters_s": t2 - t1, "total_s": t2 - t0}}


__all__ = ["CLUSTER", "CLUSTER_TITLE", "GRID_INGEST", "GRID_LINKS_GBIT", "GRID_SIZES", "THROTTLE_POLICIES",
           "TIERED_STARTS", "UPLOAD_THRESHOLDS", "Validity", "cluster_configs", "headline", "project_grid", "run",
           "partition_case", "simulate_clusters", "table_rows", "tiered_copy_bytes", "unmodelled", "validity"]
