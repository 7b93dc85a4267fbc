"""The Spark passes over every history at once, each a named function (bench/analysis/aggregate/job.py
runs them in order): per-run counts and load window (:func:`run_stats`), the event rows to the
driver (:func:`scan_events`), one sort of every partition's acks for the unavailability windows and
move_seconds (:func:`partition_pass`), latency quantiles per window (:func:`latency`), the produce
and consumer timelines (:func:`timeline`, :func:`consumer_timeline`) and error counts
(:func:`error_counts`). Only aggregates and event rows come back to the driver."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from bench.analysis.aggregate.discovery import StoredRun
from bench.analysis.aggregate.spark import quantiles
from bench.check.view import HistoryView
from bench.history.names import EVENT_CONSUMERS_READY
from bench.history.store import SCHEMA

EVENT_COLS = ("kind", "ts", "msg_id", "topic", "partition", "event", "detail")
TIMELINE_ACCURACY = 1_000  # per-bin latency quantiles for the figure only (rank error <= n / 1000)


def send_rows(hist):
    """The send rows with their latency (ms; null unless acked)."""
    from pyspark.sql import functions as F

    return (hist.filter(F.col("kind") == "send")
            .select("run_idx", "ts", "ack_ts", "outcome", "topic", "partition", "size_bytes")
            .withColumn("lat_ms", F.when((F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                                         (F.col("ack_ts") - F.col("ts")) * 1000.0)))


def run_stats(hist, runs: list[StoredRun], qmode: str, accuracy: int) -> None:
    """Per run (``run.stats``): counts, load window, latency over the whole run (raw samples), and
    the partitions with a send (what a fault naming no partitions affects)."""
    from pyspark.sql import functions as F

    by_idx = {r.idx: r for r in runs}
    # 1. Per run: counts, load window, latency over the whole run (raw samples).
    is_send = F.col("kind") == "send"
    stats_rows = (hist.groupBy("run_idx").agg(
        F.count(F.lit(1)).alias("history_rows"),
        F.sum(is_send.cast("long")).alias("sends"),
        F.sum((is_send & (F.col("outcome") == "ok")).cast("long")).alias("send_ok"),
        F.sum((is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull()).cast("long")).alias("acked"),
        F.sum((is_send & (F.col("outcome") == "fail")).cast("long")).alias("send_fail"),
        F.sum((is_send & (F.col("outcome") == "info")).cast("long")).alias("send_info"),
        F.sum((F.col("kind") == "read").cast("long")).alias("reads"),
        F.sum((F.col("kind") == "event").cast("long")).alias("events"),
        F.min(F.when(is_send, F.col("ts"))).alias("load_start"),
        F.max(F.when(is_send, F.col("ts"))).alias("load_end"),
        F.min("ts").alias("first_ts"),
        # What a fault naming no partitions affects (every partition with a send; see below).
        F.collect_set(F.when(is_send & F.col("topic").isNotNull() & (F.col("partition") >= 0),
                             F.struct("topic", "partition"))).alias("sent_partitions"),
        F.count(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(), 1)).alias("latency_count"),
        quantiles(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                  (F.col("ack_ts") - F.col("ts")) * 1000.0), qmode, accuracy).alias("lat_q"),
        F.max(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                     (F.col("ack_ts") - F.col("ts")) * 1000.0)).alias("latency_max_ms"),
    ).collect())
    for row in stats_rows:
        st = row.asDict()
        q = st.pop("lat_q") or [None] * 3
        st.update(latency_p50_ms=q[0], latency_p99_ms=q[1], latency_p999_ms=q[2],
                  sent_partitions={(x["topic"], x["partition"]) for x in st["sent_partitions"]})
        if st["load_start"] is None:  # no sends: checkers fall back to the first ts
            st["load_start"] = st["load_end"] = st["first_ts"] or 0.0
        by_idx[row["run_idx"]].stats = st
    for r in runs:
        r.stats = r.stats or {"history_rows": 0, "sends": 0, "load_start": 0.0, "load_end": 0.0}


def scan_events(hist, runs: list[StoredRun]) -> None:
    """The event rows (a few thousand per run; Parquet pushdown skips the rest) to the driver, as
    each run's ``view``: actions rebuilt from them exactly as the checkers do."""
    from pyspark.sql import functions as F

    per_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in hist.filter(F.col("kind") == "event").select("run_idx", *EVENT_COLS).collect():
        d = row.asDict()
        per_run[d.pop("run_idx")].append(d)
    for r in runs:
        cols = {f: [e.get(f) for e in per_run.get(r.idx, [])] for f in SCHEMA.names}
        r.view = HistoryView(pa.Table.from_pydict(cols, schema=SCHEMA), r.scenario)
        _ = r.view.events  # parse once (counts malformed events)


def partition_pass(spark, sends, runs: list[StoredRun], windows: list[dict[str, Any]],
                    move_keys: list[dict[str, Any]]) -> tuple[dict[tuple, dict[str, Any]], dict[int, float]]:
    """One sort of every partition's acks, then one aggregation (two grouping sets) giving:

    * per (run, action, partition) window ``[w0, w1]``: ``unavailable_seconds`` = the longest
      interval in the window without an ack (window edges count), ``first_ack_ts`` = the first ack
      of a send invoked at/after the request and acked at/after the leader change (move_seconds),
      ``produced_before`` = bytes acked before the request, ``produced_during`` = from the request
      to the leader change (summary.json's ``bytes_written_during_move``); a fault's window (``rec_ts``: its
      partition's recovery) ends instead at ``recovered_ack_ts``, the first ack at/after
      ``rec_ts``, if there is one;
    * per run: the longest ack-free interval of any partition with a send over the load window.

    ``d`` = an ack's distance to the previous ack of its partition; a gap lies inside a window
    when both its acks do (``ack_ts - d >= w0``). An ack is at or before the first ack at/after
    ``rec_ts`` when it or its predecessor is before ``rec_ts``, so a fault window needs no second
    pass. -> (per window key, per run_idx).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    tpk = ["run_idx", "topic", "partition"]
    lw = spark.createDataFrame([(r.idx, float(r.stats["load_start"]), float(r.stats["load_end"])) for r in runs],
                               "run_idx int, ls double, le double")
    mk = {(m["run_idx"], m["action_id"], m["topic"], m["partition"]): m for m in move_keys}
    wrows = []
    for x in windows:
        m = mk.get((x["run_idx"], x["action_id"], x["topic"], x["partition"]), {})
        wrows.append((x["run_idx"], x["action_id"], x["topic"], x["partition"], x["w0"], x["w1"],
                      x["rec_ts"], m.get("request_ts"), m.get("lc_ts")))
    w = spark.createDataFrame(wrows or [(-1, "", "", -1, 0.0, 0.0, None, None, None)],
                              "run_idx int, action_id string, topic string, partition int, w0 double, "
                              "w1 double, rec_ts double, request_ts double, lc_ts double")
    acks = F.when(F.col("lat_ms").isNotNull(), F.col("ack_ts"))
    s = (sends.filter(F.col("topic").isNotNull() & (F.col("partition") >= 0))
         .select(*tpk, "ts", "size_bytes", acks.alias("ack"))
         .withColumn("d", F.col("ack") - F.lag("ack").over(Window.partitionBy(*tpk).orderBy("ack")))
         .join(F.broadcast(lw), "run_idx")
         .join(F.broadcast(w), tpk, "left"))
    ack, d, rec = F.col("ack"), F.col("d"), F.col("rec_ts")
    in_load = (ack >= F.col("ls")) & (ack <= F.col("le"))
    in_w = (ack >= F.col("w0")) & (ack <= F.col("w1"))
    in_fault = (ack >= F.col("w0")) & ((ack < rec) | d.isNull() | (ack - d < rec))
    res = (s.groupBy(*tpk, "action_id").agg(
        F.max(F.when(in_load & (ack - d >= F.col("ls")), d)).alias("run_inner"),
        F.min(F.when(in_load, ack)).alias("run_first"), F.max(F.when(in_load, ack)).alias("run_last"),
        F.max(F.when(in_w & (ack - d >= F.col("w0")), d)).alias("inner"),
        F.min(F.when(in_w, ack)).alias("first"), F.max(F.when(in_w, ack)).alias("last"),
        F.min(F.when(ack >= rec, ack)).alias("rec_ack"),
        F.max(F.when(in_fault & (ack - d >= F.col("w0")), d)).alias("rec_inner"),
        F.min(F.when(in_fault, ack)).alias("rec_first"),
        F.min(F.when((F.col("ts") >= F.col("request_ts")) & F.col("lc_ts").isNotNull()
                     & (ack >= F.col("lc_ts")), ack)).alias("first_ack_ts"),
        F.sum(F.when(ack < F.col("request_ts"), F.col("size_bytes"))).alias("produced_before"),
        F.sum(F.when((ack >= F.col("request_ts")) & (ack < F.col("lc_ts")), F.col("size_bytes"))).alias("produced_during"),
    ).collect())
    found = {(x["run_idx"], x["action_id"], x["topic"], x["partition"]): x.asDict() for x in res}
    out = {}
    for x in windows:
        k = (x["run_idx"], x["action_id"], x["topic"], x["partition"])
        g = found.get(k) or {"first": None, "first_ack_ts": None, "produced_before": None, "produced_during": None,
                             "rec_ack": None}
        rec_ack = g["rec_ack"] if x["rec_ts"] is not None else None
        if rec_ack is not None:  # a recovered fault: [w0, its first ack after recovery]
            w1 = max(rec_ack, x["w0"])
            gap = w1 - x["w0"] if g["rec_first"] is None else max(g["rec_first"] - x["w0"], g["rec_inner"] or 0.0)
        elif g["first"] is None:
            gap = x["w1"] - x["w0"]  # no ack at all in the window: the whole window
        else:
            gap = max(g["first"] - x["w0"], x["w1"] - g["last"], g["inner"] or 0.0)
        out[k] = {"unavailable_seconds": gap, "first_ack_ts": g["first_ack_ts"],
                  "produced_before": g["produced_before"], "recovered_ack_ts": rec_ack,
                  # acked from the request to the leader change (none acked: 0; no leader change: unknown)
                  "produced_during": None if mk.get(k, {}).get("lc_ts") is None else (g["produced_during"] or 0)}
    win = {r.idx: (float(r.stats["load_start"]), float(r.stats["load_end"])) for r in runs}
    run_gaps: dict[int, float] = {}
    for x in res:  # rows of one partition (one per window on it) carry the same run_* values
        ls, le = win[x["run_idx"]]
        g = le - ls if x["run_first"] is None else max(x["run_first"] - ls, le - x["run_last"], x["run_inner"] or 0.0)
        run_gaps[x["run_idx"]] = max(run_gaps.get(x["run_idx"], 0.0), g)
    return out, run_gaps


def latency(spark, sends, windows: list[dict[str, Any]], runs: list[StoredRun], qmode: str,
             accuracy: int) -> list[dict[str, Any]]:
    """Latency quantiles per (run, action, scope, phase) and pooled per (configuration, action,
    scope, phase), always from raw samples (a configuration's quantiles are never averaged from
    its runs')."""
    from pyspark.sql import functions as F

    if not windows:
        return []
    by_idx = {r.idx: r for r in runs}
    w = spark.createDataFrame(
        [(x["run_idx"], x["action_id"], x["phase"], x["scope"], x["topic"], x["partition"], x["lo"], x["hi"],
          x["inc"], by_idx[x["run_idx"]].config_key) for x in windows],
        "run_idx int, action_id string, phase string, scope string, wtopic string, wpartition int, "
        "lo double, hi double, inc boolean, config_key string")
    s = sends.select("run_idx", "ts", "lat_ms", "outcome", "topic", "partition")
    cond = ((s["run_idx"] == w["run_idx"]) & (s["ts"] >= w["lo"])
            & ((s["ts"] < w["hi"]) | (w["inc"] & (s["ts"] == w["hi"])))
            & (w["wtopic"].isNull() | ((s["topic"] == w["wtopic"]) & (s["partition"] == w["wpartition"]))))
    j = s.join(F.broadcast(w), cond).select(s["run_idx"], "config_key", "action_id", "scope", "phase",
                                            "lat_ms", "outcome")
    qfn = (quantiles(F.col("lat_ms"), qmode, accuracy)).alias("q")
    aggs = [F.count("lat_ms").alias("n"), qfn, F.max("lat_ms").alias("mx"),
            F.sum((F.col("outcome") == "info").cast("long")).alias("info_count"),
            F.sum((F.col("outcome") == "fail").cast("long")).alias("fail_count")]
    res = [{**x.asDict(), "pooled": 0} for x in
           j.groupBy("config_key", "run_idx", "action_id", "scope", "phase").agg(*aggs).collect()]
    # Pooled per configuration: only where a configuration has several runs (else it is the run).
    n_runs: dict[str, int] = defaultdict(int)
    for r in runs:
        n_runs[r.config_key] += 1
    multi = sorted(r.idx for r in runs if n_runs[r.config_key] > 1)
    if multi:
        res += [{**x.asDict(), "pooled": 1, "run_idx": None} for x in
                j.filter(F.col("run_idx").isin(multi)).groupBy("config_key", "action_id", "scope", "phase")
                .agg(*aggs).collect()]
    got = {(x["pooled"], x["config_key"], x["run_idx"], x["action_id"], x["scope"], x["phase"]): x for x in res}
    out = []
    seen_w = {}
    for x in windows:  # one row per planned window, even if no send fell in it
        seen_w.setdefault((x["run_idx"], x["action_id"], x["scope"], x["phase"]), x)
    for (ri, aid, scope, ph), x in seen_w.items():
        r = by_idx[ri]
        g = got.get((0, r.config_key, ri, aid, scope, ph))
        out.append(latency_row("run", r.run_key, r.system, aid, scope, ph, x["lo"], x["hi"], g, r.run_key))
    cfg_runs: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        cfg_runs[r.config_key].append(r.run_key)
    pooled = sorted({(by_idx[ri].config_key, aid, scope, ph) for (ri, aid, scope, ph) in seen_w})
    for ck, aid, scope, ph in pooled:
        if n_runs[ck] > 1:
            g = got.get((1, ck, None, aid, scope, ph))
        else:  # one run: its figures are the configuration's
            ri = next(r.idx for r in runs if r.config_key == ck)
            g = got.get((0, ck, ri, aid, scope, ph))
        system = next(r.system for r in runs if r.config_key == ck)
        out.append(latency_row("config", ck, system, aid, scope, ph, None, None, g, ",".join(sorted(cfg_runs[ck]))))
    return out


def latency_row(level, key, system, aid, scope, ph, lo, hi, g, runs) -> dict[str, Any]:
    q = (g["q"] if g is not None else None) or [None] * 3
    return {"level": level, "key": key, "system": system, "action_id": aid, "scope": scope, "phase": ph,
            "from_ts": lo, "to_ts": hi, "count": g["n"] if g is not None else 0, "p50_ms": q[0], "p99_ms": q[1],
            "p999_ms": q[2], "max_ms": g["mx"] if g is not None else None,
            "info_count": (g["info_count"] or 0) if g is not None else 0,
            "fail_count": (g["fail_count"] or 0) if g is not None else 0, "runs": runs}


def timeline(spark, sends, params: list[dict[str, Any]], runs: list[StoredRun], qmode: str,
              accuracy: int) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    if not params:
        return []
    p = spark.createDataFrame([(x["run_idx"], x["t0"], x["bin_s"]) for x in params],
                              "run_idx int, t0 double, bin_s double")
    s = sends.join(F.broadcast(p), "run_idx")
    by_send = (s.withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
               .groupBy("run_idx", "bin").agg(
                   F.count(F.lit(1)).alias("sent"),
                   F.sum((F.col("outcome") == "fail").cast("long")).alias("fail"),
                   F.sum((F.col("outcome") == "info").cast("long")).alias("info"),
                   quantiles(F.col("lat_ms"), qmode, min(accuracy, TIMELINE_ACCURACY)).alias("q")).collect())
    by_ack = (s.filter(F.col("lat_ms").isNotNull())
              .withColumn("bin", F.floor((F.col("ack_ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
              .groupBy("run_idx", "bin").count().collect())
    by_idx = {r.idx: r for r in runs}
    binw = {x["run_idx"]: x["bin_s"] for x in params}
    rows: dict[tuple[int, int], dict[str, Any]] = {}

    def row(ri: int, b: int) -> dict[str, Any]:
        k = (ri, b)
        if k not in rows:
            rows[k] = {"run_key": by_idx[ri].run_key, "system": by_idx[ri].system, "bin": b,
                       "t_rel_s": b * binw[ri], "bin_s": binw[ri], "sent": 0, "acked": 0, "fail": 0, "info": 0,
                       "acks_per_s": 0.0, "p50_ms": None, "p99_ms": None}
        return rows[k]

    for x in by_send:
        q = x["q"] or [None] * 3
        row(x["run_idx"], x["bin"]).update(sent=x["sent"], fail=x["fail"], info=x["info"], p50_ms=q[0], p99_ms=q[1])
    for x in by_ack:
        rr = row(x["run_idx"], x["bin"])
        rr.update(acked=x["count"], acks_per_s=x["count"] / binw[x["run_idx"]])
    return [rows[k] for k in sorted(rows, key=lambda k: (by_idx[k[0]].run_key, k[1]))]



def error_counts(hist, runs: list[StoredRun]) -> list[dict[str, Any]]:
    """Sends that were not acked, per run, outcome and error."""
    from pyspark.sql import functions as F

    by_idx = {r.idx: r for r in runs}
    err_rows = (hist.filter((F.col("kind") == "send") & (F.col("outcome") != "ok"))
                .groupBy("run_idx", "outcome", "error").count().collect())
    errors = [{"run_key": by_idx[e["run_idx"]].run_key, "system": by_idx[e["run_idx"]].system,
               "outcome": e["outcome"], "error": e["error"], "count": e["count"]} for e in err_rows]
    errors.sort(key=lambda e: (e["run_key"], -e["count"]))
    return errors


def consumer_modes(runs: list[StoredRun]) -> list[tuple[int, str, str]]:
    """(run_idx, group, mode) of every run's workload consumer groups (its consumers_ready event)."""
    out = []
    for r in runs:
        ev = r.view.events_named(EVENT_CONSUMERS_READY)
        for gid, g in ((ev[0].detail.get("groups") or {}).items() if ev else ()):
            out.append((r.idx, str(gid), str(g.get("mode"))))
    return out


def consumer_timeline(spark, hist, params: list[dict[str, Any]], runs: list[StoredRun], qmode: str,
                       accuracy: int) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    modes = consumer_modes(runs)
    if not modes or not params:
        return []
    m = spark.createDataFrame(modes, "run_idx int, group string, mode string")
    p = spark.createDataFrame([(x["run_idx"], x["t0"], x["bin_s"]) for x in params],
                              "run_idx int, t0 double, bin_s double")
    d = (hist.filter(F.col("kind") == "deliver").select("run_idx", "ts", "msg_id", "group", "size_bytes")
         .join(F.broadcast(m), ["run_idx", "group"]).join(F.broadcast(p), "run_idx"))
    sent = (hist.filter((F.col("kind") == "send") & (F.col("msg_id") >= 0))
            .groupBy("run_idx", "msg_id").agg(F.min("ts").alias("send_ts")))
    first = (d.filter((F.col("mode") == "tail") & (F.col("msg_id") >= 0))
             .groupBy("run_idx", "group", "msg_id").agg(F.min("ts").alias("ts"), F.first("t0").alias("t0"),
                                                         F.first("bin_s").alias("bin_s"))
             .join(sent, ["run_idx", "msg_id"]))
    tail = (first.withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
            .groupBy("run_idx", "bin").agg(
                F.count(F.lit(1)).alias("delivered"),
                quantiles((F.col("ts") - F.col("send_ts")) * 1000.0, qmode, min(accuracy, TIMELINE_ACCURACY)).alias("q"))
            .collect())
    catch = (d.filter(F.col("mode") == "catch_up")
             .withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
             .groupBy("run_idx", "bin").agg(F.sum("size_bytes").alias("bytes")).collect())
    by_idx = {r.idx: r for r in runs}
    binw = {x["run_idx"]: x["bin_s"] for x in params}
    rows: dict[tuple[int, int], dict[str, Any]] = {}

    def row(ri: int, b: int) -> dict[str, Any]:
        if (ri, b) not in rows:
            rows[(ri, b)] = {"run_key": by_idx[ri].run_key, "system": by_idx[ri].system, "bin": b,
                             "t_rel_s": b * binw[ri], "bin_s": binw[ri], "delivered": 0, "e2e_p50_ms": None,
                             "e2e_p99_ms": None, "catch_up_bytes_per_s": None}
        return rows[(ri, b)]

    for x in tail:
        q = x["q"] or [None] * 3
        row(x["run_idx"], x["bin"]).update(delivered=x["delivered"], e2e_p50_ms=q[0], e2e_p99_ms=q[1])
    for x in catch:
        row(x["run_idx"], x["bin"])["catch_up_bytes_per_s"] = float(x["bytes"] or 0) / binw[x["run_idx"]]
    return [rows[k] for k in sorted(rows, key=lambda k: (by_idx[k[0]].run_key, k[1]))]



__all__ = ["consumer_timeline", "error_counts", "latency", "partition_pass", "run_stats", "scan_events", "send_rows",
           "timeline"]
