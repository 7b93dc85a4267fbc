"""Move-time models, held-out validation and the TB-scale projection.

Pure Python + numpy: no Spark, no files. The aggregation (:mod:`bench.analysis.aggregate`) feeds it one
:class:`MovePoint` per measured partition move and writes what it returns as tables.

Models: one fit per system, of the family its profile names (``SystemProfile.move_model``);
ordinary least squares, constants reported with their standard errors. ``bandwidth`` is the run's
value of the profile's ``bandwidth_param`` (the setting that caps a move's bytes/s).

* **copy** family: ``move_seconds = fixed_s + slope * partition_bytes / bandwidth``.
  ``efficiency = 1 / slope`` is the share of the cap the copy achieves; the *effective rate* is
  ``efficiency * bandwidth``. If no run states a bandwidth, the fit is absolute:
  ``move_seconds = fixed_s + partition_bytes / effective_rate`` (slope in s/byte).
* **shared** family: ``move_seconds = fixed_s + slope * unuploaded_bytes / bandwidth`` (absolute in
  bytes if no run states a bandwidth). The unuploaded tail rarely varies enough to identify a slope;
  then (``x`` spread < 5 % of its maximum, or fewer than two distinct ``x``) the model keeps
  ``slope = 1`` (the tail leaves at the full bandwidth; absolute mode: at the projection link's
  speed) and fits only ``fixed_s`` — stated in ``assumptions``.

Held-out check: fit on the points whose ``partition_bytes`` is below the largest measured size,
predict the points at the largest size, report ``error_pct = (predicted - measured) / measured``.

Projection: partitions of 1 GB, 100 GB, 1 TB and 8.2 TB (decimal) on links of 1 and 10 Gbit/s
(1 Gbit/s = 125,000,000 bytes/s), both systems side by side.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.units import format_bytes
from systems.registry import PROFILES, profile

GBIT_BYTES_PER_S = 125_000_000  # 1 Gbit/s in bytes/s
PROJECTION_SIZES: tuple[tuple[str, int], ...] = (
    ("1 GB", 10**9), ("100 GB", 10**11), ("1 TB", 10**12), ("8.2 TB", 82 * 10**11),
)
PROJECTION_LINKS_GBIT: tuple[float, ...] = (1.0, 10.0)
HELD_OUT_TARGET_PCT = 15.0  # issue 6: the copy model must predict the largest size within 15 %
FLAT_X_SPREAD = 0.05  # x spread (relative to max) below which a slope is not identifiable

# Move-model families (a profile's `move_model`): what a move has to carry.
COPY_MODEL = "copy"  # the whole partition, between brokers
HANDOVER_MODEL = "handover"  # only the tail not yet in object storage; then ownership moves
_TRAVEL = {COPY_MODEL: "partition bytes", HANDOVER_MODEL: "unuploaded bytes"}  # x of each family's fit


def family(system: str) -> str | None:
    """The move-model family of a system, None for a system no profile describes."""
    p = PROFILES.get(system)
    return p.move_model if p is not None else None


@dataclass(frozen=True)
class MovePoint:
    """One measured partition move."""

    system: str  # a registered system's name
    run_key: str
    move_seconds: float
    partition_bytes: float  # size of the partition when it moved
    bytes_to_travel: float  # copy family: partition bytes; shared family: unuploaded tail bytes
    bandwidth_bytes_per_s: float | None  # the run's bandwidth_param (throttle, object-store cap)


@dataclass
class LinearFit:
    """``y = intercept + slope * x`` by OLS. Standard errors need n >= 3 (None otherwise)."""

    intercept: float
    slope: float
    intercept_se: float | None
    slope_se: float | None
    cov: list[list[float]] | None  # covariance of (intercept, slope)
    r2: float | None
    rmse: float
    n: int


def fit_linear(x: Any, y: Any) -> LinearFit:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = int(x.size)
    if n < 2 or np.ptp(x) == 0:
        raise ValueError("need at least two distinct x values to fit a line")
    X = np.column_stack([np.ones(n), x])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    sse = float(resid @ resid)
    sst = float(((y - y.mean()) ** 2).sum())
    r2 = None if sst == 0 else 1.0 - sse / sst
    cov = se_a = se_b = None
    if n >= 3:
        s2 = sse / (n - 2)
        c = s2 * np.linalg.inv(X.T @ X)
        cov = c.tolist()
        se_a, se_b = float(math.sqrt(max(c[0, 0], 0.0))), float(math.sqrt(max(c[1, 1], 0.0)))
    return LinearFit(float(beta[0]), float(beta[1]), se_a, se_b, cov, r2, math.sqrt(sse / n), n)


@dataclass
class MoveModel:
    system: str
    mode: str  # "normalised" (x = bytes / bandwidth, slope dimensionless) | "absolute" (x = bytes)
    fixed_s: float
    fixed_se: float | None
    slope: float  # normalised: 1/efficiency; absolute: s per byte (1/effective rate)
    slope_se: float | None
    slope_fitted: bool  # False: slope held at 1 (normalised) / at the link speed (absolute)
    r2: float | None
    rmse_s: float
    n: int
    runs: list[str]
    cov: list[list[float]] | None = None
    unuploaded_bytes: float | None = None  # shared family: typical tail (median of the points)
    assumptions: list[str] = field(default_factory=list)

    @property
    def efficiency(self) -> float | None:
        """Share of the bandwidth cap a move achieves (normalised mode with a fitted slope)."""
        if self.mode == "normalised" and self.slope_fitted and self.slope > 0:
            return 1.0 / self.slope
        return None

    @property
    def effective_rate_bytes_per_s(self) -> float | None:
        """Absolute mode: the fitted transfer rate."""
        if self.mode == "absolute" and self.slope_fitted and self.slope > 0:
            return 1.0 / self.slope
        return None

    def predict(self, travel_bytes: float, bandwidth_bytes_per_s: float | None) -> float:
        return self.predict_with_se(travel_bytes, bandwidth_bytes_per_s)[0]

    def predict_with_se(self, travel_bytes: float, bandwidth_bytes_per_s: float | None) -> tuple[float, float | None]:
        """(move_seconds, standard error of the mean prediction or None)."""
        if self.mode == "normalised":
            if not bandwidth_bytes_per_s:
                raise ValueError(f"{self.system} model is normalised by bandwidth; give one")
            x = travel_bytes / bandwidth_bytes_per_s
            t = self.fixed_s + self.slope * x
        else:
            if not self.slope_fitted:  # tail leaves at the link's speed
                if not bandwidth_bytes_per_s:  # like the measured runs: their mean time
                    return self.fixed_s, self.fixed_se
                x = travel_bytes / bandwidth_bytes_per_s
                return self.fixed_s + x, self.fixed_se
            x = travel_bytes
            rate = 1.0 / self.slope if self.slope > 0 else math.inf
            if bandwidth_bytes_per_s and bandwidth_bytes_per_s < rate:
                # The link is slower than the fitted rate: it cannot go faster than itself.
                return self.fixed_s + travel_bytes / bandwidth_bytes_per_s, self.fixed_se
            t = self.fixed_s + self.slope * x
        se = None
        if self.cov is not None and self.slope_fitted:
            c = np.asarray(self.cov)
            var = c[0, 0] + x * x * c[1, 1] + 2 * x * c[0, 1]
            se = float(math.sqrt(max(var, 0.0)))
        elif self.fixed_se is not None and not self.slope_fitted:
            se = self.fixed_se
        return float(t), se

    def to_row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cov")
        d["runs"] = ",".join(self.runs)
        d["assumptions"] = " ".join(self.assumptions)
        d["efficiency"] = self.efficiency
        d["effective_rate_bytes_per_s"] = self.effective_rate_bytes_per_s
        return d


def _x(points: list[MovePoint], normalised: bool) -> np.ndarray:
    if normalised:
        return np.array([p.bytes_to_travel / p.bandwidth_bytes_per_s for p in points], dtype=float)
    return np.array([p.bytes_to_travel for p in points], dtype=float)


def fit_model(points: list[MovePoint], system: str) -> MoveModel:
    """Fit one system's model. Points of other systems and without move_seconds are ignored."""
    prof = profile(system)
    if prof.move_model not in _TRAVEL:
        raise ValueError(f"no move-time model for the {prof.move_model!r} family")
    pts = [p for p in points if p.system == system and p.move_seconds is not None
           and math.isfinite(p.move_seconds) and p.bytes_to_travel is not None]
    if not pts:
        raise ValueError(f"no measured moves for system {system!r}")
    with_bw = [p for p in pts if p.bandwidth_bytes_per_s]
    normalised = bool(with_bw)
    if normalised:
        pts = with_bw
    x, y = _x(pts, normalised), np.array([p.move_seconds for p in pts], dtype=float)
    runs = sorted({p.run_key for p in pts})
    what = _TRAVEL[prof.move_model]
    cap = (f"bandwidth cap (the lowest of its {prof.bandwidth_label}, {prof.bandwidth_param}, and the emulated links "
           "a move crosses)" if prof.bandwidth_param else prof.bandwidth_label)
    assumptions = []
    if normalised:
        assumptions.append(f"x = {what} / the run's {cap}; slope = 1/efficiency.")
        if len(with_bw) < len([p for p in points if p.system == system]):
            assumptions.append(f"Moves from runs without a {cap} were left out of the fit.")
    else:
        assumptions.append(f"No run states a {cap}: x = {what}, slope = 1/effective rate.")
    spread_ok = x.size >= 2 and np.ptp(x) > 0 and np.ptp(x) >= FLAT_X_SPREAD * float(np.max(np.abs(x)))
    tail = float(np.median([p.bytes_to_travel for p in pts])) if prof.move_model == HANDOVER_MODEL else None
    if spread_ok:
        f = fit_linear(x, y)
    if spread_ok and f.slope <= 0:
        assumptions.append(f"The fitted slope was not positive ({f.slope:.3g}): more {what} cannot make a move "
                           "faster, so the slope is not used.")
        spread_ok = False
    if spread_ok:
        return MoveModel(system, "normalised" if normalised else "absolute", f.intercept, f.intercept_se,
                         f.slope, f.slope_se, True, f.r2, f.rmse, f.n, runs, f.cov, tail, assumptions)
    # Slope not identifiable: hold it (the bytes leave at full bandwidth) and fit the fixed cost.
    if normalised:
        resid = y - x
        assumptions.append(f"The {what} barely vary across runs, so the slope is held at 1 (bytes "
                           "leave at the full cap) and only the fixed cost is fitted.")
    else:
        resid = y.copy()
        assumptions.append(f"The {what} barely vary and no bandwidth is stated: the fixed cost is the "
                           "mean measured time (it already includes the measured tail upload); projections "
                           "add the tail at the link's speed on top (slightly conservative).")
    fixed = float(resid.mean())
    se = float(resid.std(ddof=1) / math.sqrt(resid.size)) if resid.size >= 2 else None
    rmse = float(math.sqrt(((resid - fixed) ** 2).mean()))
    return MoveModel(system, "normalised" if normalised else "absolute", fixed, se, 1.0, None, False,
                     None, rmse, int(resid.size), runs, None, tail, assumptions)


def held_out(points: list[MovePoint], system: str) -> dict[str, Any]:
    """Fit on the sizes below the largest measured partition size, predict the largest.

    Returns ``{"status": "ok"|"insufficient", "reason"?, "train_sizes", "test_size", "train_runs",
    "rows": [{run_key, partition_bytes, measured_s, predicted_s, error_pct}], "max_abs_error_pct",
    "mean_abs_error_pct", "target_pct", "within_target"}``.
    """
    pts = [p for p in points if p.system == system and p.move_seconds is not None
           and math.isfinite(p.move_seconds)]
    sizes = sorted({p.partition_bytes for p in pts})
    copy = family(system) == COPY_MODEL
    out: dict[str, Any] = {"system": system, "target_pct": HELD_OUT_TARGET_PCT if copy else None,
                           "train_sizes": sizes[:-1], "test_size": sizes[-1] if sizes else None,
                           "rows": [], "train_runs": []}
    if len(sizes) < 2:
        return {**out, "status": "insufficient",
                "reason": f"{len(sizes)} distinct partition size(s); need a smaller one to fit on and a larger to predict"}
    largest = sizes[-1]
    train = [p for p in pts if p.partition_bytes < largest]
    test = [p for p in pts if p.partition_bytes == largest]
    try:
        model = fit_model(train, system)
    except ValueError as exc:
        return {**out, "status": "insufficient", "reason": str(exc)}
    if copy and not model.slope_fitted:
        return {**out, "status": "insufficient",
                "reason": "the smaller sizes do not span enough bytes/bandwidth to fit a slope"}
    rows = []
    for p in sorted(test, key=lambda p: p.run_key):
        try:
            pred = model.predict(p.bytes_to_travel, p.bandwidth_bytes_per_s)
        except ValueError as exc:
            return {**out, "status": "insufficient", "reason": str(exc)}
        rows.append({"run_key": p.run_key, "partition_bytes": p.partition_bytes,
                     "bandwidth_bytes_per_s": p.bandwidth_bytes_per_s, "measured_s": p.move_seconds,
                     "predicted_s": pred, "error_pct": (pred - p.move_seconds) / p.move_seconds * 100.0
                     if p.move_seconds else None})
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    mx = max(errs) if errs else None
    return {**out, "status": "ok", "train_runs": model.runs, "model": model.to_row(), "rows": rows,
            "max_abs_error_pct": mx, "mean_abs_error_pct": float(np.mean(errs)) if errs else None,
            "within_target": None if (mx is None or out["target_pct"] is None) else mx <= out["target_pct"]}


def project(models: dict[str, MoveModel], copy_replicas_added: int = 1) -> list[dict[str, Any]]:
    """Move time and bytes moved for the projection sizes and links, every fitted system."""
    rows = []
    for system, m in models.items():
        copy = family(system) == COPY_MODEL
        for gbit in PROJECTION_LINKS_GBIT:
            bw = gbit * GBIT_BYTES_PER_S
            for label, size in PROJECTION_SIZES:
                if copy:
                    travel = float(size)
                    moved = float(size) * copy_replicas_added
                    note = f"copies the whole partition to {copy_replicas_added} new replica(s) at {gbit:g} Gbit/s x efficiency"
                else:
                    travel = float(m.unuploaded_bytes or 0.0)
                    moved = travel
                    note = (f"uploads the unuploaded tail ({format_bytes(travel)}, the median measured) at "
                            f"{gbit:g} Gbit/s; independent of partition size")
                t, se = m.predict_with_se(travel, bw)
                rows.append({"system": system, "link_gbit_s": gbit, "link_bytes_per_s": bw,
                             "size_label": label, "partition_bytes": float(size), "move_seconds": t,
                             "move_seconds_se": se, "move_time": human_seconds(t),
                             "bytes_moved": moved, "basis": note, "based_on_runs": ",".join(m.runs)})
    return rows


def human_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "n/a"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


__all__ = [
    "COPY_MODEL", "GBIT_BYTES_PER_S", "HELD_OUT_TARGET_PCT", "PROJECTION_LINKS_GBIT", "PROJECTION_SIZES",
    "HANDOVER_MODEL", "LinearFit", "MoveModel", "MovePoint", "family", "fit_linear", "fit_model", "held_out",
    "human_seconds", "project",
]
