"""Move-time models with the physics in them, and their held-out validation.

Pure Python + numpy: no Spark, no files. The aggregation (:mod:`bench.analysis.aggregate`) feeds it
one :class:`MovePoint` per measured single-partition move (``reassign`` / ``move_set`` actions);
:mod:`bench.analysis.projection` evaluates the validated models at TB scale on Spark.

Each system's profile names its family (``SystemProfile.move_model``):

* **copy** (the new replica fetches the whole log from the leader, and what is written meanwhile):
  ``t = c + B / (e*T - r)``. ``B`` = partition bytes at the request, ``r`` = ingest into the
  partition during the move (bytes/s), ``T`` = the run's cap on the copy (its replication throttle,
  or the emulated link when that is lower), ``e`` = the share of ``T`` the copy achieves. The copy
  finishes when ``(e*T) * (t - c) = B + r * (t - c)``, so bytes moved = ``B + r * (t - c)``; with
  ``r >= e*T`` it never catches up. Fitted by least squares over ``(c, e)`` (``e`` by a 1-D search,
  ``c`` in closed form for each ``e``), standard errors from the Gauss-Newton covariance.
* **tiered_copy** (tiered storage: the new replica rebuilds its start from object storage, then
  copies from the leader only what is not tiered): the copy physics with ``B`` = the bytes the
  leader told the new replica to copy at the request (``copy_bytes_at_request``: from the last
  tiered offset, KIP-1023, or the leader's local log start, KIP-405, to its log end; the whole
  partition when the leader never answered a tiered start because all of the log was local), so
  ``t = c + L / (e*T - r)``; the rebuild from object storage is part of ``c``. One implementation
  fits both copy families (:func:`copied_bytes` is the only difference).
* **handover** (shared storage: the old owner uploads its unuploaded tail, the new one opens the
  partition): ``t = c + tail / (u*L) + b*n``. ``tail`` = bytes not yet in object storage at the
  request, ``L`` = the run's upload cap (the broker's or the object store's emulated link, or the
  object-store cap), ``u`` = the share of ``L`` achieved, ``n`` = stream objects the new owner opens
  and ``b`` the measured cost per object (``open.*`` phases against their ``objects``: a separate
  least-squares fit over every measured open). In a projection the tail is what a partition
  writes between uploads: ``min(threshold, r * interval)`` (:func:`tail_bytes`).

Held-out validation (:func:`validate`): moves are grouped into *families* (one system, every run
setting equal except the axis being checked) and by the axis' nominal value (the scenario's
setting, so repetitions of one size never straddle the split). For each value with enough smaller
values below it (size: at least 3 sizes spanning at least 8x in bytes at the request; throttle,
link, ingest: at least 2) the model is fitted on the smaller values only and predicts the held-out
moves from their inputs at the request. ``error_pct`` = (predicted - measured) / measured of the
median move; ``status`` ok / failed against the family's target (copy 15 %, tiered copy and shared
30 %), or insufficient with the reason. The size check's span is that of the bytes each move
copied: a tiered copy's bytes barely grow with the partition (only the local tail moves), so its
size check is "insufficient" unless the tail itself varies, and its throttle check is the one
that identifies the bytes' rate.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.units import format_bytes
from systems.registry import PROFILES

GBIT_BYTES_PER_S = 125_000_000  # 1 Gbit/s in bytes/s

# Move-model families (a profile's `move_model`): what a move has to carry.
COPY_MODEL = "copy"  # the whole partition and its ingest, between brokers
TIERED_COPY_MODEL = "tiered_copy"  # only the local tail after what is in object storage, between brokers
HANDOVER_MODEL = "handover"  # only the tail not yet in object storage; then the new owner opens it
COPY_FAMILIES = (COPY_MODEL, TIERED_COPY_MODEL)  # t = c + bytes copied / (e*T - r)
# Held-out |error| a validation must stay within. A tiered copy, like a handover, lasts seconds
# with a fixed part (the rebuild from object storage, the election) of the same order as its
# bytes' part, so its noise is the shared system's, not a long copy's.
TARGET_PCT = {COPY_MODEL: 15.0, TIERED_COPY_MODEL: 30.0, HANDOVER_MODEL: 30.0}
SIZE_SPAN = 8.0  # the sizes a size check fits on span at least this factor (bytes at the request)
MIN_TRAIN = {"size": 3, "throttle": 2, "link": 2, "ingest": 2}  # distinct smaller values to fit on
FLAT_SPREAD = 0.05  # relative spread of a regressor below which its slope is not identifiable

# Validation axes: the run settings (summary.json ``params``) that define each, left out of the
# family key when checking that axis.
AXES: dict[str, tuple[str, ...]] = {
    "size": ("prefill_bytes_per_partition",),
    "throttle": ("replication_throttle_bytes_per_s", "replication_throttle_of_link",
                 "objstore_bandwidth_bytes_per_s"),
    "link": ("link_rate", "replication_throttle_bytes_per_s"),  # a throttle set as a share of the link moves with it
    "ingest": ("produce_rate_msgs_per_s",),
}
# Settings that never define a family: how long the load ran, and matrix labels (dotted keys,
# whose resolved values are in params under their own names).
NOT_FAMILY = ("duration_s",)


def family(system: str) -> str | None:
    """The move-model family of a system, None for a system no profile describes."""
    p = PROFILES.get(system)
    return p.move_model if p is not None else None


@dataclass(frozen=True)
class MovePoint:
    """One measured single-partition move, with its inputs at the request."""

    system: str
    run_key: str
    move_seconds: float
    partition_bytes: float  # B: bytes in the partition at the request
    cap_bytes_per_s: float | None  # T (copy) / L (handover): the run's cap on the move's bytes/s
    ingest_bytes_per_s: float = 0.0  # r: written into the partition during the move
    tail_bytes: float | None = None  # handover: unuploaded bytes at the request
    objects: float | None = None  # handover: stream objects the new owner opened
    open_seconds: float | None = None  # handover: the measured open phases
    params: tuple[tuple[str, Any], ...] = ()  # the run's settings (summary.json params), sorted
    elect_seconds: float | None = None  # request -> leader change on the new owner (the cluster's part)
    # tiered copy: the bytes the leader told the new replica to copy at the request (None: it
    # copied the whole log, partition_bytes)
    copy_bytes: float | None = None

    def setting(self, name: str) -> Any:
        return dict(self.params).get(name)


def copied_bytes(p: MovePoint) -> float:
    """B of the copy families: the bytes the move had to copy at the request (the whole partition
    unless the leader said the copy starts later)."""
    return float(p.copy_bytes) if p.copy_bytes is not None else float(p.partition_bytes)


def axis_value(p: MovePoint, axis: str) -> float | None:
    """The nominal value of a validation axis for a move (None: the run does not set it)."""
    s = dict(p.params)
    if axis == "size":
        v = s.get("prefill_bytes_per_partition")
    elif axis == "throttle":
        prof = PROFILES.get(p.system)
        v = s.get(prof.bandwidth_param) if prof is not None and prof.bandwidth_param else None
    elif axis == "link":
        from bench.units import rate_bits
        v = rate_bits(s["link_rate"]) if s.get("link_rate") else None
    elif axis == "ingest":
        rate, size, parts = s.get("produce_rate_msgs_per_s"), s.get("message_bytes"), s.get("partitions") or 1
        v = float(rate) * float(size) / float(parts) if rate and size else None
    else:
        raise ValueError(f"unknown axis {axis!r}")
    return float(v) if v is not None else None


def family_key(p: MovePoint, axis: str) -> tuple:
    """Every setting of the move's run except the axis' own and those that never define a family."""
    skip = set(AXES[axis]) | set(NOT_FAMILY)
    return (p.system,) + tuple((k, v) for k, v in p.params if k not in skip and "." not in k)


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
    """A fitted model of one system (see the module docstring for each family's formula)."""

    system: str
    family: str
    fixed_s: float  # c
    fixed_se: float | None
    efficiency: float  # copy families: e, the share of the throttle/link achieved; handover: u, of the upload cap
    efficiency_se: float | None
    efficiency_fitted: bool  # False: held at 1 (the regressor barely varied)
    open_fixed_s: float | None = None  # handover: open(n) = open_fixed_s + open_per_object_s * n
    open_per_object_s: float = 0.0
    open_per_object_se: float | None = None
    open_objects_max: float | None = None  # the most objects an open was measured with
    open_n: int = 0
    r2: float | None = None
    rmse_s: float = 0.0
    n: int = 0
    runs: list[str] = field(default_factory=list)
    cov: list[list[float]] | None = None  # of (fixed_s, efficiency) when fitted
    assumptions: list[str] = field(default_factory=list)

    def predict(self, partition_bytes: float, cap_bytes_per_s: float, ingest_bytes_per_s: float = 0.0,
                tail_bytes: float | None = None, objects: float | None = None) -> float:
        return self.predict_with_se(partition_bytes, cap_bytes_per_s, ingest_bytes_per_s, tail_bytes, objects)[0]

    def predict_with_se(self, partition_bytes: float, cap_bytes_per_s: float, ingest_bytes_per_s: float = 0.0,
                        tail_bytes: float | None = None, objects: float | None = None) -> tuple[float, float | None]:
        """(move_seconds, standard error of the mean prediction or None); inf when a copy never
        catches up with its ingest. Copy families: ``partition_bytes`` is B, the bytes to copy
        (a tiered copy's local tail: :func:`copied_bytes`)."""
        if not cap_bytes_per_s or cap_bytes_per_s <= 0:
            raise ValueError(f"{self.system}: a move's cap (bytes/s) is needed to predict its time")
        if self.family in COPY_FAMILIES:
            net = self.efficiency * cap_bytes_per_s - ingest_bytes_per_s
            if net <= 0:
                return math.inf, None
            t = self.fixed_s + partition_bytes / net
            grad = np.array([1.0, -partition_bytes * cap_bytes_per_s / net**2])
        else:
            tail = float(tail_bytes or 0.0)
            t = self.fixed_s + tail / (self.efficiency * cap_bytes_per_s) + self.open_per_object_s * float(objects or 0)
            grad = np.array([1.0, -tail / (self.efficiency**2 * cap_bytes_per_s)])
        if self.cov is not None:
            var = float(grad @ np.asarray(self.cov) @ grad)
            return float(t), math.sqrt(max(var, 0.0))
        return float(t), self.fixed_se

    def bytes_moved(self, partition_bytes: float, seconds: float, ingest_bytes_per_s: float = 0.0,
                    tail_bytes: float | None = None) -> float:
        """Copy families: the bytes to copy plus what was written while they were copied; handover:
        the tail."""
        if self.family in COPY_FAMILIES:
            return partition_bytes + ingest_bytes_per_s * max(0.0, seconds - self.fixed_s)
        return float(tail_bytes or 0.0)

    def formula(self) -> str:
        if self.family == COPY_MODEL:
            return (f"t = {self.fixed_s:.3g} s + B / ({self.efficiency:.3g} x T - r)")
        if self.family == TIERED_COPY_MODEL:
            return (f"t = {self.fixed_s:.3g} s + L / ({self.efficiency:.3g} x T - r)")
        return (f"t = {self.fixed_s:.3g} s + tail / ({self.efficiency:.3g} x L) + "
                f"{self.open_per_object_s * 1000:.3g} ms x objects")

    def to_row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cov")
        d["runs"] = ",".join(self.runs)
        d["assumptions"] = " ".join(self.assumptions)
        d["formula"] = self.formula()
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MoveModel:
        kw = {k: row.get(k) for k in cls.__dataclass_fields__ if k not in ("runs", "assumptions", "cov")}
        kw["runs"] = [r for r in (row.get("runs") or "").split(",") if r]
        kw["assumptions"] = [row["assumptions"]] if row.get("assumptions") else []
        kw["open_per_object_s"] = float(row.get("open_per_object_s") or 0.0)
        kw["efficiency_fitted"] = bool(row.get("efficiency_fitted"))
        return cls(**kw)


# --------------------------------------------------------------------------------------------
# Fitting


def _usable(points: Iterable[MovePoint], system: str) -> list[MovePoint]:
    return [p for p in points if p.system == system and p.move_seconds is not None and math.isfinite(p.move_seconds)
            and p.move_seconds > 0 and p.cap_bytes_per_s]


def _cluster_part(pts: list[MovePoint], after_elect: np.ndarray | None = None
                  ) -> tuple[np.ndarray, float, float | None, list[str]]:
    """What the fit regresses: the cluster's part of each move (request -> leader change) when
    every move has it, plus the client's ack lag (leader change -> first ack: a metadata refresh
    and maybe a connect, noise the bytes do not explain) as its median, added to the fixed cost.
    ``after_elect``: modelled seconds inside that window (the new owner's open) taken out of the
    lag first. Without leader changes: the whole move_seconds, no lag. -> (y, lag, its se, notes)."""
    t = np.array([p.move_seconds for p in pts], dtype=float)
    if all(p.elect_seconds is not None and 0 < p.elect_seconds <= p.move_seconds for p in pts):
        e = np.array([p.elect_seconds for p in pts], dtype=float)
        lags = t - e - (after_elect if after_elect is not None else 0.0)
        lag = float(np.median(lags))
        se = float(1.2533 * lags.std(ddof=1) / math.sqrt(lags.size)) if lags.size >= 2 else None
        return e, lag, se, [f"Fitted on request -> leader change; the client's ack lag after it (median "
                            f"{lag:.3g} s over {lags.size} moves) is part of c."]
    return t, 0.0, None, []


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None else math.sqrt(a * a + (b or 0.0) ** 2)


def fit_model(points: Sequence[MovePoint], system: str, open_points: Sequence[MovePoint] | None = None) -> MoveModel:
    """Fit one system's model on its points (others ignored). ``open_points``: the moves whose open
    phases fit the per-object open cost (handover; default: ``points``). Raises ValueError when
    the points cannot identify the model."""
    fam = family(system)
    if fam not in (*COPY_FAMILIES, HANDOVER_MODEL):
        raise ValueError(f"{system}: no move-time model for the {fam!r} family")
    pts = _usable(points, system)
    if len(pts) < 2:
        raise ValueError(f"{system}: {len(pts)} measured move(s) with a known cap; need at least 2")
    if fam in COPY_FAMILIES:
        return _fit_copy(system, pts, fam)
    return _fit_handover(system, pts, _usable(open_points if open_points is not None else points, system))


def _fit_copy(system: str, pts: list[MovePoint], fam: str = COPY_MODEL) -> MoveModel:
    B = np.array([copied_bytes(p) for p in pts], dtype=float)
    T = np.array([p.cap_bytes_per_s for p in pts], dtype=float)
    r = np.array([p.ingest_bytes_per_s or 0.0 for p in pts], dtype=float)
    t, lag, lag_se, lag_notes = _cluster_part(pts)
    x1 = B / np.maximum(T - r, 1e-9)
    if np.ptp(x1) < FLAT_SPREAD * float(np.max(np.abs(x1))):
        raise ValueError(f"{system}: bytes to copy / (cap - ingest) barely vary across the moves; the fixed cost and "
                         "the efficiency cannot be told apart (need different bytes to copy, throttles or ingest "
                         "rates)")
    lo = float(np.max(r / T)) * 1.0001 + 1e-6  # e*T must exceed every move's ingest

    def sse_at(e: float) -> tuple[float, float]:
        x = B / (e * T - r)
        c = float(np.mean(t - x))
        res = t - c - x
        return float(res @ res), c

    grid = np.geomspace(max(lo, 1e-3), 4.0, 600)
    vals = [sse_at(e)[0] for e in grid]
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    for _ in range(80):  # golden-section refinement around the grid minimum
        m1, m2 = a + (b - a) * 0.382, a + (b - a) * 0.618
        if sse_at(m1)[0] < sse_at(m2)[0]:
            b = m2
        else:
            a = m1
    e = (a + b) / 2
    sse, c = sse_at(e)
    n = len(pts)
    what = ("B = partition bytes at the request." if fam == COPY_MODEL else
            "L = the bytes the leader told the new replica to copy at the request (from the last tiered offset or "
            "its local log start to its log end; the partition's bytes where all of the log was local); the rebuild "
            "of the replica's start from object storage is part of c.")
    assumptions = [
        "T = the run's replication throttle, or the emulated link when lower; r = bytes written into the "
        "partition during the move / move_seconds (measured); " + what] + lag_notes
    if e >= 3.99:
        raise ValueError(f"{system}: the fit drives the efficiency to its bound ({e:.3g}); the moves do not "
                         "identify it")
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
    return MoveModel(system, fam, c + lag, _plus(fixed_se, lag_se), float(e), e_se, True,
                     r2=None if sst == 0 else 1 - sse / sst, rmse_s=math.sqrt(sse / n), n=n,
                     runs=sorted({p.run_key for p in pts}), cov=cov, assumptions=assumptions)


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
    return f.intercept, float(b), f.slope_se, float(n.max()), len(op), notes


def _fit_handover(system: str, pts: list[MovePoint], open_pts: list[MovePoint]) -> MoveModel:
    pts = [p for p in pts if p.tail_bytes is not None]
    if len(pts) < 2:
        raise ValueError(f"{system}: {len(pts)} move(s) with a measured tail; need at least 2")
    a, b, b_se, nmax, n_open, notes = fit_open(open_pts)
    L = np.array([p.cap_bytes_per_s for p in pts], dtype=float)
    x = np.array([p.tail_bytes for p in pts], dtype=float) / L
    opens = np.array([b * float(p.objects or 0) for p in pts], dtype=float)
    part, lag, lag_se, lag_notes = _cluster_part(pts, opens)  # the new owner opens after its election
    y = part if lag_notes else part - opens
    runs = sorted({p.run_key for p in pts})
    assumptions = ["L = the lowest of the run's object-store cap and the emulated links the upload crosses; "
                   "tail = the bytes the old owner uploaded at the close (measured)."] + notes + lag_notes
    if np.ptp(x) >= FLAT_SPREAD * float(np.max(np.abs(x))) and len(pts) >= 2:
        f = fit_linear(x, y)
        if f.slope > 0:
            u = 1.0 / f.slope
            cov = None
            if f.cov is not None:  # d(u)/d(slope) = -u^2: the covariance of (c, u)
                c = np.asarray(f.cov)
                g = np.diag([1.0, -u * u])
                cov = (g @ c @ g.T).tolist()
                cov[0][0] += (lag_se or 0.0) ** 2
            return MoveModel(system, HANDOVER_MODEL, f.intercept + lag, _plus(f.intercept_se, lag_se), u,
                             None if f.slope_se is None else f.slope_se * u * u, True, a, b, b_se, nmax, n_open,
                             f.r2, f.rmse, f.n, runs, cov, assumptions)
        assumptions.append(f"The fitted upload slope was not positive ({f.slope:.3g}); u is held at 1.")
    else:
        assumptions.append("The tails barely vary across the moves: u is held at 1 (the tail leaves at the full "
                           "cap) and only the fixed cost is fitted.")
    resid = y - x
    c = float(resid.mean())
    se = float(resid.std(ddof=1) / math.sqrt(resid.size)) if resid.size >= 2 else None
    return MoveModel(system, HANDOVER_MODEL, c + lag, _plus(se, lag_se), 1.0, None, False, a, b, b_se, nmax, n_open, None,
                     float(math.sqrt(((resid - c) ** 2).mean())), int(resid.size), runs, None, assumptions)


def tail_bytes(ingest_bytes_per_s: float, upload_threshold_bytes: float, upload_interval_s: float) -> float:
    """The most a partition can hold unuploaded: what it writes until the next upload, which comes
    when the broker's WAL passes the threshold or the interval elapses (one hot partition per
    broker; a move right before an upload meets the whole of it)."""
    return float(min(upload_threshold_bytes, ingest_bytes_per_s * upload_interval_s))


# --------------------------------------------------------------------------------------------
# Held-out validation


def _predict_point(m: MoveModel, p: MovePoint) -> float:
    b = copied_bytes(p) if m.family in COPY_FAMILIES else p.partition_bytes
    return m.predict(b, p.cap_bytes_per_s, p.ingest_bytes_per_s, p.tail_bytes, p.objects)


def _axis_label(axis: str, v: float) -> str:
    if axis == "size":
        return format_bytes(v)
    if axis == "link":
        return f"{v / 1e6:g} Mbit/s"
    return f"{v / 1e6:.3g} MB/s"


def validate(points: Sequence[MovePoint], system: str, axes: Sequence[str] = ("size", "throttle", "link", "ingest"),
             open_points: Sequence[MovePoint] | None = None) -> list[dict[str, Any]]:
    """Held-out checks of one system's model on every axis its moves vary (module docstring).

    One entry per (axis, family, held-out value): ``{system, axis, held_out: {axis: value}, label,
    family, status, reason, error_pct, max_abs_error_pct, target_pct, measured_s, predicted_s,
    train_values, train_runs, test_runs, n_train, n_test, fit}``. A system whose moves support no
    size check gets one ``insufficient`` size entry saying why.
    """
    fam = family(system)
    target = TARGET_PCT.get(fam or "", None)
    pts = _usable(points, system)
    out: list[dict[str, Any]] = []
    for axis in axes:
        fams: dict[tuple, list[MovePoint]] = defaultdict(list)
        for p in pts:
            if axis_value(p, axis) is not None:
                fams[family_key(p, axis)].append(p)
        for fk, fpts in sorted(fams.items(), key=lambda kv: str(kv[0])):
            by_val: dict[float, list[MovePoint]] = defaultdict(list)
            for p in fpts:
                by_val[axis_value(p, axis)].append(p)
            values = sorted(by_val)
            if len(values) < 2:
                continue
            # Every value with enough smaller ones is held out in turn (walk-forward); a family
            # with none says why its largest value could not be checked.
            checks = [_check(system, axis, fk, by_val, held, target, open_points) for held in values[1:]]
            done = [c for c in checks if c["status"] != "insufficient"]
            out.extend(done or checks[-1:])
    if not any(e["axis"] == "size" for e in out):
        sizes = sorted({axis_value(p, "size") for p in pts if axis_value(p, "size") is not None})
        out.append({"system": system, "axis": "size", "held_out": {}, "label": None, "family": None,
                    "status": "insufficient", "target_pct": target, "error_pct": None,
                    "reason": (f"{len(sizes)} partition size(s) measured in one configuration; a size check needs "
                               f"{MIN_TRAIN['size'] + 1}: {MIN_TRAIN['size']} to fit on (spanning {SIZE_SPAN:g}x) "
                               "and a larger one to predict")})
    return out


def _check(system: str, axis: str, fk: tuple, by_val: dict[float, list[MovePoint]], held: float,
           target: float | None, open_points: Sequence[MovePoint] | None) -> dict[str, Any]:
    train_vals = [v for v in sorted(by_val) if v < held]
    train = [p for v in train_vals for p in by_val[v]]
    test = by_val[held]
    base: dict[str, Any] = {
        "system": system, "axis": axis, "held_out": {axis: held}, "label": _axis_label(axis, held) + _context(test[0], axis),
        "family": _family_label(fk), "target_pct": target, "train_values": train_vals,
        "train_runs": sorted({p.run_key for p in train}), "test_runs": sorted({p.run_key for p in test}),
        "n_train": len(train), "n_test": len(test), "error_pct": None, "max_abs_error_pct": None,
        "measured_s": None, "predicted_s": None, "fit": None,
    }
    if len(train_vals) < MIN_TRAIN[axis]:
        return {**base, "status": "insufficient",
                "reason": f"{len(train_vals)} smaller {axis} value(s) to fit on; need {MIN_TRAIN[axis]}"}
    if axis == "size":
        # the regressor's span: the bytes each move copied (a copy's whole partition, a tiered
        # copy's local tail, a handover's partition for its open)
        fam = family(system)
        size_of = copied_bytes if fam in COPY_FAMILIES else (lambda p: p.partition_bytes)
        meds = [statistics.median(size_of(p) for p in by_val[v]) for v in train_vals]
        span = max(meds) / min(meds) if min(meds) > 0 else math.inf
        base["train_span"] = span
        if span < SIZE_SPAN:
            tail = ""
            parts = [statistics.median(p.partition_bytes for p in by_val[v]) for v in train_vals]
            if any(abs(m - q) > 0.01 * q for m, q in zip(meds, parts)):
                tail = (f" (the moves copied {format_bytes(min(meds))}-{format_bytes(max(meds))} of partitions of "
                        f"{format_bytes(min(parts))}-{format_bytes(max(parts))}: only the part not in object "
                        "storage is copied, so the partition size does not set the copy; the throttle axis can)")
            return {**base, "status": "insufficient",
                    "reason": f"the smaller sizes span {span:.1f}x in bytes to copy at the request; need "
                              f"{SIZE_SPAN:g}x{tail}"}
    test_runs = {p.run_key for p in test}  # the held-out moves' own opens never enter the open-cost fit
    opens = [p for p in (open_points if open_points is not None else train) if p.run_key not in test_runs]
    try:
        m = fit_model(train, system, opens)
    except ValueError as exc:
        return {**base, "status": "insufficient", "reason": str(exc)}
    errs, preds = [], []
    for p in test:
        pred = _predict_point(m, p)
        preds.append(pred)
        errs.append((pred - p.move_seconds) / p.move_seconds * 100.0)
    measured = statistics.median(p.move_seconds for p in test)
    predicted = statistics.median(preds)
    err = (predicted - measured) / measured * 100.0 if math.isfinite(predicted) else math.inf
    ok = target is not None and abs(err) <= target
    return {**base, "status": "ok" if ok else "failed",
            "reason": None if ok else f"|error| {abs(err):.1f} % > {target:g} %",
            "error_pct": err, "max_abs_error_pct": max(abs(e) for e in errs),
            "measured_s": measured, "predicted_s": predicted, "fit": m.to_row()}


def _context(p: MovePoint, axis: str) -> str:
    """The family's other throttle / ingest setting, to tell checks of one axis apart."""
    other = [(a, axis_value(p, a)) for a in ("throttle", "ingest") if a != axis]
    shown = [f"{a} {_axis_label(a, v)}" for a, v in other if v is not None]
    return f" (at {', '.join(shown)})" if shown and axis != "size" else ""


def _family_label(fk: tuple) -> str:
    s = dict(fk[1:])
    keep = ("brokers", "replication_factor", "link_rate", "replication_throttle_bytes_per_s", "produce_rate_msgs_per_s",
            "prefill_bytes_per_partition", "wal_upload_threshold_bytes", "segment_bytes", "local_retention_bytes",
            "follower_fetch_last_tiered_offset")
    return ", ".join(f"{k}={s[k]}" for k in keep if s.get(k) is not None)


def fmt_count(x: float) -> str:
    return f"{x:,.0f}"


def human_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "never" if s == math.inf else "n/a"
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
    "AXES", "COPY_FAMILIES", "COPY_MODEL", "GBIT_BYTES_PER_S", "HANDOVER_MODEL", "LinearFit", "MoveModel", "MovePoint",
    "SIZE_SPAN", "TARGET_PCT", "TIERED_COPY_MODEL", "axis_value", "copied_bytes", "family", "family_key", "fit_linear",
    "fit_model", "fit_open", "human_seconds", "tail_bytes", "validate",
]
