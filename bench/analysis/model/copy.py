"""The **copy** family: the new replica fetches the whole log from the leader, and what is written
meanwhile. ``t = c + B / (e*T - r)``: ``B`` = partition bytes at the request, ``r`` = ingest into
the partition during the move (bytes/s), ``T`` = the run's cap on the copy (its replication
throttle, or the emulated link when that is lower), ``e`` = the share of ``T`` the copy achieves.
The copy finishes when ``(e*T) * (t - c) = B + r * (t - c)``, so bytes moved = ``B + r * (t -
c)``; with ``r >= e*T`` it never catches up. Fitted by least squares over ``(c, e)`` (``e`` by a
1-D search, ``c`` in closed form for each ``e``), standard errors from the Gauss-Newton
covariance. The tiered copy (tiered_copy.py) is this physics over fewer bytes.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from bench.analysis.model.base import (
    FLAT_SPREAD, MoveModel, MovePoint, cluster_part, nominal_ingest, plus_se, register,
)

THROTTLE_POLICIES = ((0.25, "25% of the link"), (0.5, "50% of the link"), (1.0, "the whole link"))
CLUSTER_THROTTLE = 0.5  # a simulated cluster's copies are throttled to this share of each link
CLUSTER_RF = 3  # a simulated cluster's replication factor


class CopyFamily:
    name = "copy"
    target_pct = 15.0
    copies = True
    names_copy_start = False
    opens_objects = False
    required_axes: tuple[tuple[str, ...], ...] = (("size",), ("throttle", "link"), ("ingest",))
    more_runs: str | None = None
    bytes_assumed: str | None = None
    letter = "B"  # the formula's name for the bytes copied
    what = "B = partition bytes at the request."

    def bytes_of(self, p: MovePoint) -> float:
        """B: the bytes the move had to copy at the request (the whole partition unless the leader
        said the copy starts later)."""
        return float(p.copy_bytes) if p.copy_bytes is not None else float(p.partition_bytes)

    def fit(self, system: str, pts: list[MovePoint], open_pts: list[MovePoint]) -> MoveModel:
        B = np.array([self.bytes_of(p) for p in pts], dtype=float)
        T = np.array([p.cap_bytes_per_s for p in pts], dtype=float)
        r = np.array([nominal_ingest(p) for p in pts], dtype=float)
        t, lag, lag_se, lag_notes = cluster_part(pts)
        x1 = B / np.maximum(T - r, 1e-9)
        if np.ptp(x1) < FLAT_SPREAD * float(np.max(np.abs(x1))):
            raise ValueError(f"{system}: bytes to copy / (cap - ingest) barely vary across the moves; the fixed cost and "
                             "the efficiency cannot be told apart (need different bytes to copy, throttles or ingest "
                             "rates)")
        lo = float(np.max(r / T)) * 1.0001 + 1e-6  # e*T must exceed every move's ingest
        if lo >= 1.0:
            raise ValueError(f"{system}: a move's ingest reaches its cap; no efficiency <= 1 lets it finish")

        # Physical parameters only: a fixed cost >= 0 and an efficiency in (0, 1] (a copy never
        # beats its cap); the least squares inside those bounds.
        def sse_at(e: float) -> tuple[float, float]:
            x = B / (e * T - r)
            c = max(0.0, float(np.mean(t - x)))
            res = t - c - x
            return float(res @ res), c

        grid = np.geomspace(max(lo, 1e-3), 1.0, 600)
        vals = [sse_at(e)[0] for e in grid]
        i = int(np.argmin(vals))
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        for _ in range(80):  # golden-section refinement around the grid minimum
            m1, m2 = a + (b - a) * 0.382, a + (b - a) * 0.618
            if sse_at(m1)[0] < sse_at(m2)[0]:
                b = m2
            else:
                a = m1
        e = min(1.0, (a + b) / 2)
        sse, c = sse_at(e)
        n = len(pts)
        assumptions = [
            "T = the run's replication throttle, or what the sender's link leaves after its steady traffic when "
            "lower (bench/analysis/model/budget.py); r = the scenario's ingest into the partition (nominal); "
            + self.what] + lag_notes
        at_bound = [w for w, hit in (("the efficiency at its bound 1", e >= 0.999), ("the fixed cost at its bound 0",
                                                                                     c == 0.0)) if hit]
        if at_bound:
            assumptions.append(f"The least squares put {' and '.join(at_bound)} (physical bounds: c >= 0, 0 < e <= 1).")
        cov = fixed_se = e_se = None
        if n >= 3:
            J = np.column_stack([np.ones(n), -B * T / (e * T - r) ** 2])
            s2 = sse / (n - 2)
            try:
                cm = s2 * np.linalg.inv(J.T @ J)
                cov = cm.tolist()
                fixed_se, e_se = float(math.sqrt(max(cm[0, 0], 0))), float(math.sqrt(max(cm[1, 1], 0)))
            except np.linalg.LinAlgError:
                assumptions.append("Standard errors unavailable (singular design).")
        sst = float(((t - t.mean()) ** 2).sum())
        if cov is not None and lag_se is not None:
            cov[0][0] += lag_se**2
        return MoveModel(system, self.name, c + lag, plus_se(fixed_se, lag_se), float(e), e_se, True,
                         r2=None if sst == 0 else 1 - sse / sst, rmse_s=math.sqrt(sse / n), n=n,
                         runs=sorted({p.run_key for p in pts}), cov=cov, assumptions=assumptions)

    def steady_terms(self, ingest: float, rf: int, consumer_groups: int) -> list[tuple[str, float]]:
        """The leader sends every byte to its other replicas and to every consumer group."""
        return [(f"replication to {rf - 1} follower{'s' * (rf != 2)}", (rf - 1) * ingest),
                (f"{consumer_groups} consumer group{'s' * (consumer_groups != 1)}'{'' if consumer_groups != 1 else 's'} reads",
                 consumer_groups * ingest)]

    def predict(self, m: MoveModel, b: float, cap: float, ingest: float, tail: float | None,
                objects: float | None) -> tuple[float, np.ndarray | None]:
        net = m.efficiency * cap - ingest
        if net <= 0:
            return math.inf, None
        return m.fixed_s + b / net, np.array([1.0, -b * cap / net**2])

    def bytes_moved(self, m: MoveModel, b: float, seconds: float, ingest: float, tail: float | None) -> float:
        """The bytes to copy plus what was written while they were copied."""
        return b + ingest * max(0.0, seconds - m.fixed_s)

    def formula(self, m: MoveModel) -> str:
        return f"t = {m.fixed_s:.3g} s + {self.letter} / ({m.efficiency:.3g} x T - r)"

    def curve(self, m: MoveModel, xs: list[float], moves: list[dict[str, Any]], cap: float
              ) -> tuple[list[float], str]:
        """At the moves' median ingest."""
        return [m.predict(x, cap, _median(moves, "ingest_bytes_per_s")) for x in xs], ""

    def policies(self) -> list[tuple[float, str, bool | None]]:
        """The projection grid's throttle policies: (share of the link, label, where a new replica starts)."""
        return [(s, lbl, None) for s, lbl in THROTTLE_POLICIES]

    def copy_column(self, F: Any, m: MoveModel) -> Any:
        """The bytes a projected move copies (a Spark column of the grid)."""
        return F.col("partition_bytes")

    def grid(self, spark: Any, base: Any, m: MoveModel) -> Any:
        from pyspark.sql import functions as F

        pol = spark.createDataFrame(self.policies(), "throttle_share double, policy string, last_tiered boolean")
        # the throttle's share of the link, or what the steady traffic leaves of it when lower
        df = (base.crossJoin(pol).withColumn("cap_bytes_per_s", F.least(
                  F.col("link_bytes_per_s") * F.col("throttle_share"),
                  F.col("payload_bytes_per_s") - F.col("steady_bytes_per_s")))
              .withColumn("copy_bytes", self.copy_column(F, m)))
        net = F.lit(m.efficiency) * F.col("cap_bytes_per_s") - F.col("ingest_bytes_per_s")
        return (df.withColumn("upload_threshold_bytes", F.lit(None).cast("double"))
                .withColumn("move_seconds", F.when(net > 0, F.lit(m.fixed_s) + F.col("copy_bytes") / net))
                .withColumn("bytes_moved", F.when(net > 0, F.col("copy_bytes") + F.col("ingest_bytes_per_s")
                                                  * (F.col("move_seconds") - F.lit(m.fixed_s))))
                .withColumn("tail_bytes", F.lit(None).cast("double"))
                .withColumn("objects", F.lit(None).cast("double")))

    def copied(self, size: float, ingest: float) -> float:
        """The bytes a projected move of a partition of ``size`` copies."""
        return size

    def basis(self, m: MoveModel, label: str, copied: float, ingest: float, cap: float) -> str:
        return (f"{m.formula()}; B = {label}, r = {ingest / 1e6:g} MB/s, T = what the leader's link leaves after "
                f"its steady traffic, no throttle ({cap / 1e6:,.0f} MB/s)")

    def partition_case(self, m: MoveModel, cap: float, size: float, label: str, ingest: float
                       ) -> tuple[float, float | None, float | None, str, dict[str, float]]:
        copied = self.copied(size, ingest)
        t, se = m.predict_with_se(copied, cap, ingest)
        moved = m.bytes_moved(copied, t, ingest) if math.isfinite(t) else None
        return (t, se, moved, self.basis(m, label, copied, ingest, cap),
                {"bytes": copied, "rate": cap, "ingest_share": ingest / cap})

    def sim_move(self, partition_bytes: float, ingest: float, cfg: dict[str, Any]) -> tuple[float, float]:
        return partition_bytes, 0.0

    def cluster_caps(self, link: float) -> dict[str, Any]:
        return {"rf": CLUSTER_RF, "throttle_share": CLUSTER_THROTTLE, "upload_threshold_bytes": None,
                "cap_share": CLUSTER_THROTTLE}


def _median(moves: list[dict[str, Any]], key: str) -> float:
    return statistics.median([float(x[key] or 0.0) for x in moves])


COPY = register(CopyFamily())
