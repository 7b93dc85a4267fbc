"""The **handover** family (shared storage): the old owner uploads its unuploaded tail, the new one
opens the partition. ``t = c + tail / (u*L) + b*n``: ``tail`` = bytes not yet in object storage
at the request, ``L`` = the run's upload cap (the broker's or the object store's emulated link, or
the object-store cap), ``u`` = the share of ``L`` achieved, ``n`` = stream objects the new owner
opens and ``b`` the measured cost per object (``open.*`` phases against their ``objects``: a
separate least-squares fit over every measured open, :func:`fit_open`). In a projection the tail
is what a partition writes between uploads: ``min(threshold, r * interval)`` (:func:`tail_bytes`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.analysis.model.base import (
    EXTRAPOLATION_BOUNDS, FLAT_SPREAD, LEADER_QUERY_BACKOFF_MAX_S, LEADER_QUERY_BACKOFF_S, LEADER_QUERY_JITTER,
    MoveModel, MovePoint, cluster_part, fit_linear, fmt_count, leader_queries_at, leader_query_at, plus_se, register,
)
from bench.units import format_bytes

MiB = 2**20
UPLOAD_THRESHOLDS = (64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB)
UPLOAD_INTERVAL_S = 10.0  # the shared system's wal.upload.interval.ms default
# Stream objects of a projected shared partition: one per s3.upload.part.bytes uploaded (this
# implementation never merges objects). At TB scale its default 8 MiB gives ~1 M objects for
# 8.2 TB, beyond what one open RPC carries (MAX_FRAME 64 MiB, ~190 bytes a range: ~350,000);
# an operator sets larger parts, so the projection takes 64 MiB. The open cost depends on the
# objects, not their size (docs/measurements/shared-open.md).
OBJECT_BYTES = 64 * MiB
ARTICLE_THRESHOLD = 512 * MiB  # AutoMQ's reassignment template: s3.wal.upload.threshold=512MiB


def fit_open(points: Sequence[MovePoint]) -> tuple[float | None, float, float | None, float | None, int, list[str]]:
    """open(n) = a + b*n from the measured open phases: (a, b, b's se, max n, count, notes)."""
    op = [p for p in points if p.open_seconds is not None and p.objects is not None]
    if not op:
        return None, 0.0, None, None, 0, ["No open phase with an object count was measured: the per-object open "
                                           "cost is taken as 0 (it stays inside the fixed cost)."]
    n = np.array([p.objects for p in op], dtype=float)
    s = np.array([p.open_seconds for p in op], dtype=float)
    if len(op) < 3 or np.ptp(n) < FLAT_SPREAD * max(float(n.max()), 1.0):
        return (float(s.mean()), 0.0, None, float(n.max()), len(op),
                [f"Opens were measured at {fmt_count(n.min())}-{fmt_count(n.max())} objects only: the per-object "
                 "cost is not identified and taken as 0."])
    f = fit_linear(n, s)
    notes = [f"open(n) = {f.intercept * 1000:.3g} ms + {f.slope * 1000:.3g} ms x n, fitted on {len(op)} measured "
             f"opens of {fmt_count(n.min())}-{fmt_count(n.max())} objects."]
    b = f.slope
    if b < 0:
        notes.append("The fitted per-object cost was negative; taken as 0.")
        b = 0.0
    elif f.slope_se is None or b <= 2.0 * f.slope_se:
        notes.append(f"The opens do not identify the per-object cost (its standard error "
                     f"{(f.slope_se or 0) * 1000:.3g} ms is more than half of it): taken as 0.")
        return float(s.mean()), 0.0, f.slope_se, float(n.max()), len(op), notes
    return f.intercept, float(b), f.slope_se, float(n.max()), len(op), notes


def fit_client(move_s: np.ndarray, elect_s: np.ndarray, refuse_s: Sequence[float | None],
               ack_s: Sequence[float | None] = (), producers: Sequence[int] = (), gaps: Sequence[float] = ()
               ) -> tuple[float, float, float | None, float | None, str] | None:
    """The client's part of handovers from their measured leader changes (``move_s``: without the
    new owner's modelled open, which comes after its election), the measured first refusals
    (``refuse_s``: request -> the first refusal the producers met, else the close's start; the
    origin of the client's leader queries: a producer with its request in flight at the close is
    refused only when its next request arrives, after the close acks the one in flight), the load's median ack latency before each move (``ack_s``, where
    measured) and the producer clients writing to each moved partition with one's mean gap between
    sends to it (``producers``, ``gaps``; default one): the clients learn of the new owner at the
    first leader query after the election of any of them
    (:func:`leader_query_at`, librdkafka's documented retry backoff: the partition refuses writes
    for the whole handover, so the queries run from the first refusal), and its retried batch is
    acked one ordinary ack later. -> (origin, ack lag after the query, its se, the loads' median
    ack latency or None, note); None where no refusal was measured (then the copy families' way
    holds: the median lag after the election is part of c).

    Always the schedule, never a constant lag after the election: moves elected inside one query
    interval fit a constant about as well, but a move elected past the next query waits a whole
    interval longer (a 0.4 s election misses the query at ~0.3 s and is seen at ~0.7 s), which
    only the schedule predicts."""
    known = [float(r) for r in refuse_s if r is not None]
    if not known:
        return None
    origin = float(np.median(known))
    starts = np.array([origin if r is None else float(r) for r in refuse_s], dtype=float)
    acks = [float(a) for a in ack_s if a is not None]
    ref = float(np.median(acks)) if acks else None
    own = np.array([ref if a is None else float(a) for a in ack_s], dtype=float) if ref is not None else None
    ks = np.array(list(producers) or [1] * len(starts), dtype=int)
    gs = np.array(list(gaps) or [0.0] * len(starts), dtype=float)
    lag = move_s - leader_queries_at(elect_s, starts, ks, gs)
    extra = lag - own if own is not None else lag  # beyond one ordinary ack of the move's own load
    ack = float(np.median(extra)) + (ref or 0.0)
    se = float(1.2533 * extra.std(ddof=1) / math.sqrt(extra.size)) if extra.size >= 2 else None
    loads = (f", the loads' acks taking {ref:.3g} s (median before the moves, {len(acks)} of {lag.size}); a load "
             "acked slower or faster shifts it one for one" if ref is not None else "")
    note = (f"Fitted on request -> leader change; the client learns of the new owner at its first leader query "
            f"after it, the queries starting at the first refusal (measured per move: median "
            f"{origin:.3g} s after the request, {len(known)} of {lag.size} moves), and its first ack comes "
            f"{ack:.3g} s later (median{loads}; spread {float(extra.std()):.3g} s).")
    return origin, ack, se, ref, note


def client_fields(client: tuple[float, float, float | None, float | None, str] | None) -> dict[str, float | None]:
    return {} if client is None else {"client_start_s": client[0], "client_ack_s": client[1],
                                      "client_ack_ref_s": client[3]}


def tail_bytes(ingest_bytes_per_s: float, upload_threshold_bytes: float, upload_interval_s: float) -> float:
    """The most a partition can hold unuploaded: what it writes until the next upload, which comes
    when the broker's WAL passes the threshold or the interval elapses (one hot partition per
    broker; a move right before an upload meets the whole of it)."""
    return float(min(upload_threshold_bytes, ingest_bytes_per_s * upload_interval_s))


# --------------------------------------------------------------------------------------------
# Held-out validation


class HandoverFamily:
    name = "handover"
    target_pct = 30.0
    copies = False
    names_copy_start = False
    opens_objects = True
    required_axes: tuple[tuple[str, ...], ...] = (("size",),)
    more_runs: str | None = None
    bytes_assumed: str | None = None

    def bytes_of(self, p: MovePoint) -> float:
        """The partition (what its open walks): a handover copies no log."""
        return p.partition_bytes

    def fit(self, system: str, pts: list[MovePoint], open_pts: list[MovePoint]) -> MoveModel:
        pts = [p for p in pts if p.tail_bytes is not None]
        if len(pts) < 2:
            raise ValueError(f"{system}: {len(pts)} move(s) with a measured tail; need at least 2")
        a, b, b_se, nmax, n_open, notes = fit_open(open_pts)
        L = np.array([p.cap_bytes_per_s for p in pts], dtype=float)
        x = np.array([p.tail_bytes for p in pts], dtype=float) / L
        opens = np.array([b * float(p.objects or 0) for p in pts], dtype=float)
        part, lag, lag_se, lag_notes = cluster_part(pts, opens)  # the new owner opens after its election
        y = part if lag_notes else part - opens
        runs = sorted({p.run_key for p in pts})
        assumptions = ["L = the lowest of the run's object-store cap and the emulated links the upload crosses; "
                       "tail = the bytes the old owner uploaded at the close (measured)."] + notes
        # The partition refuses writes for the whole handover: the client's part is its leader
        # query schedule (base.leader_query_at) and one ack. It is the load's client's, whatever
        # the server's settings, so like the open cost it rests on every handover of open_pts
        # (a held-out check's: its training moves; a projection's: every move of its code version).
        cl = [p for p in open_pts if p.elect_seconds is not None and 0 < p.elect_seconds <= p.move_seconds] or pts
        client = (fit_client(np.array([p.move_seconds - b * float(p.objects or 0) for p in cl], dtype=float),
                             np.array([p.elect_seconds for p in cl], dtype=float), [p.refuse_seconds for p in cl],
                             [p.ack_before_s for p in cl], [p.producers for p in cl], [p.send_gap_s for p in cl])
                  if lag_notes else None)
        if client is not None:
            lag, lag_se = 0.0, client[2]
            assumptions.append(client[4])
        else:
            assumptions += lag_notes
        if np.ptp(x) >= FLAT_SPREAD * float(np.max(np.abs(x))) and len(pts) >= 2:
            f = fit_linear(x, y)
            # physical parameters only: u in (0, 1] (no upload beats its cap), c >= 0; and a slope
            # the moves identify (two standard errors from 0: a tail of a few hundred kB at the cap
            # lasts less than the noise of a sub-second handover)
            identified = f.slope_se is not None and f.slope > 2.0 * f.slope_se
            if f.slope >= 1.0 and f.intercept + lag >= 0 and identified:
                u = 1.0 / f.slope
                cov = None
                if f.cov is not None:  # d(u)/d(slope) = -u^2: the covariance of (c, u)
                    c = np.asarray(f.cov)
                    g = np.diag([1.0, -u * u])
                    cov = (g @ c @ g.T).tolist()
                    cov[0][0] += (lag_se or 0.0) ** 2
                return MoveModel(system, self.name, f.intercept + lag, plus_se(f.intercept_se, lag_se), u,
                                 None if f.slope_se is None else f.slope_se * u * u, True, a, b, b_se, nmax, n_open,
                                 f.r2, f.rmse, f.n, runs, cov, assumptions, **client_fields(client))
            why = ("is not physical (u = 1 / slope must lie in (0, 1], c >= 0)" if identified or f.slope_se is None
                   else f"does not identify the slope (its standard error {f.slope_se:.3g} is more than half of it)")
            assumptions.append(f"The least-squares line (slope {f.slope:.3g}, intercept {f.intercept + lag:.3g} s) {why}: "
                               "u is held at 1.")
        else:
            assumptions.append("The tails barely vary across the moves: u is held at 1 (the tail leaves at the full "
                               "cap) and only the fixed cost is fitted.")
        resid = y - x
        c = max(-lag, float(resid.mean()))  # c + lag >= 0
        se = float(resid.std(ddof=1) / math.sqrt(resid.size)) if resid.size >= 2 else None
        return MoveModel(system, self.name, c + lag, plus_se(se, lag_se), 1.0, None, False, a, b, b_se, nmax,
                         n_open, None, float(math.sqrt(((resid - c) ** 2).mean())), int(resid.size), runs, None,
                         assumptions, **client_fields(client))

    def elect_seconds(self, m: MoveModel, cap: float, tail: float | None) -> float:
        """Request -> the new owner's election (the server's part)."""
        return m.fixed_s + float(tail or 0.0) / (m.efficiency * cap)

    def predict(self, m: MoveModel, b: float, cap: float, ingest: float, tail: float | None,
                objects: float | None) -> tuple[float, np.ndarray | None]:
        tail = float(tail or 0.0)
        t = self.elect_seconds(m, cap, tail)
        if m.client_start_s is not None:  # -> the clients' first query that names it, and its first ack
            t = leader_query_at(t, m.client_start_s, m.client_producers, m.client_send_gap_s) + (m.client_ack_s or 0.0)
        t += m.open_per_object_s * float(objects or 0)
        return t, np.array([1.0, -tail / (m.efficiency**2 * cap)])

    def bytes_moved(self, m: MoveModel, b: float, seconds: float, ingest: float, tail: float | None) -> float:
        """The tail."""
        return float(tail or 0.0)

    def formula(self, m: MoveModel) -> str:
        server = f"{m.fixed_s:.3g} s + tail / ({m.efficiency:.3g} x L)"
        opens = f"{m.open_per_object_s * 1000:.3g} ms x objects"
        if m.client_start_s is None:
            return f"t = {server} + {opens}"
        acked = f" (at acks of {m.client_ack_ref_s:.3g} s)" if m.client_ack_ref_s is not None else ""
        return (f"t = Q({server}) + {m.client_ack_s:.3g} s{acked} + {opens}, Q = a producer's first leader query at or "
                f"after the election (one producer; several find it sooner; from {m.client_start_s:.3g} s: {LEADER_QUERY_BACKOFF_S * 1000:.0f} ms doubling "
                f"to {LEADER_QUERY_BACKOFF_MAX_S:g} s, +-{LEADER_QUERY_JITTER:.0%})")

    def curve(self, m: MoveModel, xs: list[float], moves: list[dict[str, Any]], cap: float
              ) -> tuple[list[float], str]:
        """At the moves' median ingest, tail and objects (which do not grow with the size)."""
        def med(k: str) -> float:
            return statistics.median([float(x[k] or 0.0) for x in moves])

        ys = [m.predict(x, cap, med("ingest_bytes_per_s"), med("unuploaded_bytes"), med("objects")) for x in xs]
        return ys, f", tail {format_bytes(med('unuploaded_bytes'))}"

    def grid(self, spark: Any, base: Any, m: MoveModel) -> Any:
        from pyspark.sql import functions as F

        thr = spark.createDataFrame([(float(t), f"upload threshold {format_bytes(t)}") for t in UPLOAD_THRESHOLDS],
                                    "upload_threshold_bytes double, policy string")
        tail = F.least(F.col("upload_threshold_bytes"), F.col("ingest_bytes_per_s") * F.lit(UPLOAD_INTERVAL_S))
        objects = F.ceil(F.col("partition_bytes") / F.lit(float(OBJECT_BYTES))).cast("double")
        df = (base.crossJoin(thr).withColumn("throttle_share", F.lit(None).cast("double"))
              .withColumn("cap_bytes_per_s", F.col("payload_bytes_per_s") - F.col("steady_bytes_per_s"))
              .withColumn("tail_bytes", tail).withColumn("objects", objects)
              .withColumn("copy_bytes", F.lit(None).cast("double"))
              .withColumn("move_seconds", F.lit(m.fixed_s) + F.col("tail_bytes") / (F.lit(m.efficiency)
                                                                                   * F.col("cap_bytes_per_s")))
              .withColumn("bytes_moved", F.col("tail_bytes")))
        if m.client_start_s is not None:  # the client's part, as predict adds it
            start, ack = float(m.client_start_s), float(m.client_ack_s or 0.0)

            @F.udf("double")
            def client_sees(t):
                return None if t is None else leader_query_at(t, start) + ack

            df = df.withColumn("move_seconds", client_sees(F.col("move_seconds")))
        df = df.withColumn("move_seconds", F.col("move_seconds") + F.lit(m.open_per_object_s) * F.col("objects"))
        # beyond the measured opens the open cost is not projected
        return df.withColumn("move_seconds", F.when(F.col("objects") <= F.lit(
            float((m.open_objects_max or 0) * EXTRAPOLATION_BOUNDS["objects"])), F.col("move_seconds")))

    def partition_case(self, m: MoveModel, cap: float, size: float, label: str, ingest: float
                       ) -> tuple[float, float | None, float | None, str, dict[str, float]]:
        tail = tail_bytes(ingest, ARTICLE_THRESHOLD, UPLOAD_INTERVAL_S)
        n = math.ceil(size / OBJECT_BYTES)
        t, se = m.predict_with_se(size, cap, 0.0, tail, n)
        measured = (f"open cost measured up to {fmt_count(m.open_objects_max)} objects"
                    if m.open_objects_max else "open cost per object not measured")
        basis = (f"{m.formula()}; tail = min({format_bytes(ARTICLE_THRESHOLD)} upload threshold, r x "
                 f"{UPLOAD_INTERVAL_S:g} s upload interval) = {format_bytes(tail)}, L = what the owner's link leaves "
                 f"after its steady traffic ({cap / 1e6:,.0f} MB/s), objects = {n:,} of {format_bytes(OBJECT_BYTES)} "
                 f"({measured})")
        return t, se, tail, basis, {"tail": tail, "rate": cap, "objects": float(n)}

    def steady_terms(self, ingest: float, rf: int, consumer_groups: int) -> list[tuple[str, float]]:
        """The owner writes every byte to the object store twice (its WAL, then the stream objects
        it uploads) and serves every consumer group from its cache; no broker replicas."""
        return [("WAL writes to object storage", ingest), ("stream-object uploads", ingest),
                (f"{consumer_groups} consumer group{'s' * (consumer_groups != 1)}'{'' if consumer_groups != 1 else 's'} reads",
                 consumer_groups * ingest)]

    def sim_move(self, partition_bytes: float, ingest: float, cfg: dict[str, Any]) -> tuple[float, float]:
        """The tail the old owner uploads; opening the partition walks its objects (the per-object
        cost by its size)."""
        tail = min(cfg["upload_threshold_bytes"] or 0.0, ingest * UPLOAD_INTERVAL_S)
        return tail, cfg["open_per_object_s"] * math.ceil(partition_bytes / OBJECT_BYTES)

    def cluster_caps(self, link: float) -> dict[str, Any]:
        return {"rf": 1, "throttle_share": None, "upload_threshold_bytes": float(ARTICLE_THRESHOLD), "cap_share": 1.0}


HANDOVER = register(HandoverFamily())
