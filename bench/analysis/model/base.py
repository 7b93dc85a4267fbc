"""The move-model vocabulary every family shares: a measured move (:class:`MovePoint`), a fitted
model (:class:`MoveModel`), the validation axes, and the :class:`MoveFamily` protocol with its
registry. The physics of each family is its own module (copy.py, tiered_copy.py, handover.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from systems.registry import PROFILES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

GBIT_BYTES_PER_S = 125_000_000  # 1 Gbit/s in bytes/s
SIZE_SPAN = 8.0  # the sizes a size check fits on span at least this factor (bytes at the request)
MIN_TRAIN = {"size": 3, "throttle": 2, "link": 2, "ingest": 2, "budget": 1, "tail": 2}  # smaller values to fit on
FLAT_SPREAD = 0.05  # relative spread of a regressor below which its slope is not identifiable

# Validation axes: the run settings (summary.json ``params``) that define each, left out of the
# family key when checking that axis.
AXES: dict[str, tuple[str, ...]] = {
    "size": ("prefill_bytes_per_partition",),
    "throttle": ("replication_throttle_bytes_per_s", "replication_throttle_of_link",
                 "objstore_bandwidth_bytes_per_s"),
    # a throttle or a move budget set as a share of the link moves with it (each system's mechanism);
    # the size is an input of the prediction (moves of every size at the slower links fit it)
    "link": ("link_rate", "replication_throttle_bytes_per_s", "prefill_bytes_per_partition",
             *sorted({p.move_budget for p in PROFILES.values() if p.move_budget} - {"replication_throttle_bytes_per_s"})),
    # the size is an input of the prediction here too: moves of every size at the lower rates fit it
    # (a tiered copy's bytes follow its tail, not its partition: a family of one size would confound
    # the fixed cost with the rate on moves of one copy size)
    "ingest": ("produce_rate_msgs_per_s", "ingest_bytes_per_s", "prefill_bytes_per_partition"),
    # the link budget: moves the link's rest caps (after the steady traffic) predicted from moves
    # their throttle caps, of every size and ingest rate (both inputs of the prediction: the
    # nominal ingest sets the steady traffic, so the rate's moves pool into one median)
    "budget": ("prefill_bytes_per_partition", "produce_rate_msgs_per_s", "ingest_bytes_per_s",
               "replication_throttle_bytes_per_s", "replication_throttle_of_link",
               "objstore_bandwidth_bytes_per_s", "move_budget_of_link",
               *sorted({p.move_budget for p in PROFILES.values() if p.move_budget})),
    # handover: the unuploaded tail at the request, set by what the partition holds (its prefill,
    # below an upload threshold the run never reaches)
    "tail": ("prefill_bytes_per_partition",),
}
# Axes whose value is measured at the request rather than set by the scenario: moves group into
# levels (within LEVEL_GAP of a level's smallest value), each level one held-out value.
MEASURED_AXES = ("tail",)
LEVEL_GAP = 2.0
# The matrix's dotted names of each axis' settings (params carry both, the resolved value under its
# own name): left out with the axis. Every other dotted key (a matrix axis) splits families.
AXES_DOTTED: dict[str, tuple[str, ...]] = {
    "size": ("prefill.bytes_per_partition",),
    "throttle": ("system.replication_throttle_bytes_per_s", "system.replication_throttle_of_link",
                 "system.objstore_bandwidth_bytes_per_s"),
    "link": ("network.link_rate", "system.replication_throttle_bytes_per_s", "system.move_budget_of_link",
             "prefill.bytes_per_partition",
             *sorted(f"system.{p.move_budget}" for p in PROFILES.values() if p.move_budget)),
    "ingest": ("workload.produce_rate_msgs_per_s", "prefill.bytes_per_partition"),
    "budget": ("prefill.bytes_per_partition", "workload.produce_rate_msgs_per_s", "system.replication_throttle_bytes_per_s",
               "system.replication_throttle_of_link", "system.objstore_bandwidth_bytes_per_s",
               "system.move_budget_of_link", *sorted(f"system.{p.move_budget}" for p in PROFILES.values() if p.move_budget)),
    "tail": ("prefill.bytes_per_partition",),
}
# Settings that never define a family: how long the load ran.
NOT_FAMILY = ("duration_s",)
# Where a projection may go beyond the largest held-out value of each axis it rests on (its
# extrapolation factor); beyond it the value reads "not validated: extrapolation".
#  * bytes: a move's time is linear in its bytes at a rate the rate axis checks; what grows with a
#    partition that MiB runs cannot show (reads beyond the page cache, more segments) is not
#    modelled, so a TB figure says how far beyond the largest held-out size it lies.
#  * rate (throttle, link or what the budget leaves): 30x, so that 10-25 Gbit/s rest on moves
#    measured near 1 Gbit/s; the CPU per byte at a higher rate is what it cannot show.
#  * ingest: as a share of the move's rate (r / cap: what the copy's formula depends on).
#  * tail, objects: 10x (the per-object open cost stays within 10x of the opens measured).
#  * untiered: the backlog r x I / S (a tiered partition's ingest per upload interval, in segments)
#    its measured relation rests on, 10x.
EXTRAPOLATION_BOUNDS: dict[str, float] = {"bytes": 1e6, "rate": 30.0, "ingest_share": 10.0, "tail": 10.0,
                                          "objects": 10.0, "untiered": 10.0}



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
    # The code the run measured ("<commit>", "<commit>+dirty"; None: unknown): a fit never pools two.
    version: str | None = None
    # (steady egress + the move's allowance: its throttle, else the link) / the sender's link:
    # above 1, what the steady traffic leaves of the link capped the move (None: no emulated link)
    link_demand: float | None = None
    # request -> the first refusal the load's producers met (the brokers' client lines), else the old
    # owner's first refusal of writes (a handover's close start); None: neither journaled
    refuse_seconds: float | None = None
    # the load's median ack latency on the moved partition before the request (None: not measured)
    ack_before_s: float | None = None
    # the load's producer clients writing to the partition, and one's mean gap between its sends to it
    producers: int = 1
    send_gap_s: float = 0.0

    def setting(self, name: str) -> Any:
        return dict(self.params).get(name)



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
    elif axis == "ingest":  # the move's own partition's (per_move_settings), else the run's rate spread
        rate, size, parts = s.get("produce_rate_msgs_per_s"), s.get("message_bytes"), s.get("partitions") or 1
        v = s.get("ingest_bytes_per_s")
        if v is None:
            v = float(rate) * float(size) / float(parts) if rate and size else None
    elif axis == "budget":
        # to 0.1 away from 1 (the moves of one setting form one held-out value, and none crosses
        # from throttle-capped, <= 1, to capped by the link's rest, > 1)
        d = p.link_demand
        v = None if d is None else (math.ceil(d * 10 - 1e-9) / 10 if d > 1 else math.floor(d * 10 + 1e-9) / 10)
    elif axis == "tail":  # the state the move starts from (what the old owner must upload), not its outcome
        v = p.tail_bytes
    else:
        raise ValueError(f"unknown axis {axis!r}")
    return float(v) if v is not None else None


def levels(points: Iterable[MovePoint], value: Callable[[MovePoint], float]) -> list[list[MovePoint]]:
    """Points sorted by ``value`` and grouped: a point within :data:`LEVEL_GAP` x of its level's
    smallest value joins it, a larger one starts the next (so every level lies wholly above the
    ones before it)."""
    out: list[list[MovePoint]] = []
    for p in sorted(points, key=value):
        if out and value(p) <= LEVEL_GAP * value(out[-1][0]):
            out[-1].append(p)
        else:
            out.append([p])
    return out


def nominal_ingest(p: MovePoint) -> float:
    """The ingest a prediction takes for a move: the scenario's (its nominal rate per partition),
    never the bytes measured during the move (they depend on how long it took); the measured rate
    only for a run whose settings are unknown."""
    v = axis_value(p, "ingest")
    return float(v) if v is not None else float(p.ingest_bytes_per_s or 0.0)


def family_key(p: MovePoint, axis: str) -> tuple:
    """Every effective setting of the move's run (summary.json params: the resolved broker, topic
    and client settings, matrix axes by their dotted names) and its code version, except the
    axis' own and those that never define a family."""
    skip = set(AXES[axis]) | set(AXES_DOTTED[axis]) | set(NOT_FAMILY)
    return (p.system, ("version", p.version)) + tuple((k, v) for k, v in p.params if k not in skip)


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
    """A fitted model of one system (its family's module gives the formula)."""

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
    version: str | None = None  # the code version of every run it rests on
    # What it was fitted on, per domain axis (bytes, rate, ingest_share, tail, objects): [min, max]
    domain: dict[str, list[float]] = field(default_factory=dict)
    # tiered copy: the untiered tail's measured relation (tiered_copy.fit_untiered), None: not measured
    untiered: dict[str, Any] | None = None
    # The client's part where it is fitted (handover: the whole move is the partition's unavailability):
    # the load's client learns of the new leader at its first leader query at or after the change
    # (:func:`leader_query_at`), and its first ack comes ``client_ack_s`` later. None: a median
    # client lag is part of ``fixed_s`` instead.
    client_start_s: float | None = None  # request -> the old owner's first refusal (the queries' origin)
    client_ack_s: float | None = None  # the query that names the new leader -> the first ack
    # the fit's loads' median ack latency before their moves (what client_ack_s holds one of; None:
    # not measured): a load acked slower or faster waits that much longer or shorter (for_client)
    client_ack_ref_s: float | None = None
    # the load a prediction is for: its producer clients writing to the partition (each learns of
    # the new leader on its own schedule; the first to learn acks first) and one's mean gap between
    # sends to it (for_client; the fit's own: one producer, the slowest to learn)
    client_producers: int = 1
    client_send_gap_s: float = 0.0

    def for_client(self, ack_s: float | None, producers: int | None = None, gap_s: float | None = None) -> MoveModel:
        """The model for a load whose median ack latency is ``ack_s`` now (None: the fit's own),
        written by ``producers`` clients, each sending to the partition every ``gap_s`` on average
        (None: one producer): the retried batch after the leader query is acked like any other,
        so the client's part moves with the ack latency one for one, and several producers find
        the new leader at the earliest of their queries. A model without a client part is
        unchanged."""
        if self.client_ack_s is None:
            return self
        out = self
        if ack_s is not None and self.client_ack_ref_s is not None:
            out = replace(out, client_ack_s=max(0.0, self.client_ack_s - self.client_ack_ref_s + float(ack_s)),
                          client_ack_ref_s=float(ack_s))
        if producers is not None and producers > 1:
            out = replace(out, client_producers=int(producers), client_send_gap_s=float(gap_s or 0.0))
        return out

    def client_outcomes(self, cap_bytes_per_s: float, tail_low: float = 0.0, tail_high: float | None = None,
                        objects: float | None = None) -> list[dict[str, float]]:
        """Where the clients learn of the new leader at their query after its election, the move's
        time per query that may be the first after it, over the retry jitter and a tail anywhere in
        [tail_low, tail_high] (a move requested at a random point of the upload cycle; one tail when
        ``tail_high`` is None): :func:`leader_query_outcomes`, the likeliest first; ``query_s``: that
        query's time from the first refusal without jitter. [] without a client part, or for several
        producers (the earliest of their queries)."""
        elect = getattr(self.kind, "elect_seconds", None)
        if self.client_start_s is None or elect is None or self.client_producers > 1:
            return []
        hi = tail_low if tail_high is None else tail_high
        ts = [elect(self, cap_bytes_per_s, v) for v in np.linspace(tail_low, hi, 41 if hi > tail_low else 1)]
        after = (self.client_ack_s or 0.0) + self.open_per_object_s * float(objects or 0)
        return [{"query_s": None if q is None else round(q, 3), "probability": p, "seconds": t + after}
                for q, p, t in leader_query_outcomes(ts, self.client_start_s, 0.02)]

    def predict(self, partition_bytes: float, cap_bytes_per_s: float, ingest_bytes_per_s: float = 0.0,
                tail_bytes: float | None = None, objects: float | None = None) -> float:
        return self.predict_with_se(partition_bytes, cap_bytes_per_s, ingest_bytes_per_s, tail_bytes, objects)[0]

    def predict_with_se(self, partition_bytes: float, cap_bytes_per_s: float, ingest_bytes_per_s: float = 0.0,
                        tail_bytes: float | None = None, objects: float | None = None) -> tuple[float, float | None]:
        """(move_seconds, standard error of the mean prediction or None); inf when a copy never
        catches up with its ingest. Copy families: ``partition_bytes`` is B, the bytes to copy
        (a tiered copy's local tail: its family's ``bytes_of``)."""
        if not cap_bytes_per_s or cap_bytes_per_s <= 0:
            raise ValueError(f"{self.system}: a move's cap (bytes/s) is needed to predict its time")
        t, grad = self.kind.predict(self, partition_bytes, cap_bytes_per_s, ingest_bytes_per_s, tail_bytes, objects)
        if grad is None:
            return t, None
        if self.cov is not None:
            var = float(grad @ np.asarray(self.cov) @ grad)
            return float(t), math.sqrt(max(var, 0.0))
        return float(t), self.fixed_se

    def bytes_moved(self, partition_bytes: float, seconds: float, ingest_bytes_per_s: float = 0.0,
                    tail_bytes: float | None = None) -> float:
        """The bytes the move carries (its family's :meth:`MoveFamily.bytes_moved`)."""
        return self.kind.bytes_moved(self, partition_bytes, seconds, ingest_bytes_per_s, tail_bytes)

    @property
    def kind(self) -> MoveFamily:
        """The family object of :attr:`family`."""
        return family_named(self.family)

    def formula(self) -> str:
        return self.kind.formula(self)

    def to_row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cov")
        d["runs"] = ",".join(self.runs)
        d["assumptions"] = " ".join(self.assumptions)
        d["domain"] = json.dumps(self.domain, sort_keys=True)
        d["untiered"] = json.dumps(self.untiered, sort_keys=True) if self.untiered is not None else None
        d["formula"] = self.formula()
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MoveModel:
        kw = {k: row.get(k) for k in cls.__dataclass_fields__
              if k not in ("runs", "assumptions", "cov", "domain", "untiered")}
        kw["domain"] = json.loads(row["domain"]) if row.get("domain") else {}
        kw["untiered"] = json.loads(row["untiered"]) if row.get("untiered") else None
        kw["runs"] = [r for r in (row.get("runs") or "").split(",") if r]
        kw["assumptions"] = [row["assumptions"]] if row.get("assumptions") else []
        kw["open_per_object_s"] = float(row.get("open_per_object_s") or 0.0)
        kw["efficiency_fitted"] = bool(row.get("efficiency_fitted"))
        kw["client_producers"] = int(row.get("client_producers") or 1)  # a model.json from before them: one
        kw["client_send_gap_s"] = float(row.get("client_send_gap_s") or 0.0)
        return cls(**kw)


# --------------------------------------------------------------------------------------------


def usable(points: Iterable[MovePoint], system: str) -> list[MovePoint]:
    """The system's moves a fit may use: a positive, finite move_seconds and a known cap, run in the
    configuration its model describes (its profile's ``model_settings``; a run from before a
    setting existed has none and ran its default)."""
    prof = PROFILES.get(system)
    fixed = prof.model_settings.items() if prof is not None else ()
    return [p for p in points if p.system == system and p.move_seconds is not None and math.isfinite(p.move_seconds)
            and p.move_seconds > 0 and p.cap_bytes_per_s and all(p.setting(k) in (None, v) for k, v in fixed)]


class FitRefused(ValueError):
    """A fit the rules forbid (mixed code versions, a held-out value in its training set)."""


def one_version(pts: Iterable[MovePoint], system: str) -> str | None:
    """The one code version of ``pts``; :class:`FitRefused` when they come from more than one (runs
    of different commits, or of a dirty tree beside a clean one, measure different code)."""
    versions = sorted({p.version or "unknown" for p in pts})
    if len(versions) > 1:
        raise FitRefused(f"{system}: the moves come from {len(versions)} code versions ({', '.join(versions)}); "
                         "a fit rests on one (aggregate the runs of one commit, or pass --pool-versions)")
    return versions[0] if versions else None


def refuse_leak(train: Iterable[MovePoint], axis: str, held: float) -> None:
    """:class:`FitRefused` when a training move has the held-out value of ``axis`` or a larger one
    (walk-forward: a check fits only on strictly smaller values)."""
    bad = sorted({p.run_key for p in train if (axis_value(p, axis) or -math.inf) >= held})
    if bad:
        raise FitRefused(f"the training set holds {len(bad)} run(s) at or beyond the held-out {axis} value "
                         f"{held:g}: {', '.join(bad[:3])}")


def domain_of(fam: MoveFamily, pts: list[MovePoint]) -> dict[str, list[float]]:
    """What a fit rests on, per domain axis: [min, max] of the moves' bytes to carry, rate (the
    cap), ingest as a share of the cap, tail and objects (the axes a move has)."""
    vals: dict[str, list[float]] = {
        "bytes": [fam.bytes_of(p) for p in pts],
        "rate": [float(p.cap_bytes_per_s) for p in pts if p.cap_bytes_per_s],
        "ingest_share": [nominal_ingest(p) / float(p.cap_bytes_per_s) for p in pts if p.cap_bytes_per_s],
        "tail": [float(p.tail_bytes) for p in pts if p.tail_bytes is not None],
        "objects": [float(p.objects) for p in pts if p.objects is not None],
    }
    return {k: [min(v), max(v)] for k, v in vals.items() if v}


# The load's client (librdkafka 2.x) after a NOT_LEADER error: it queries the partition's leader
# (Metadata) at retry.backoff.ms, then at intervals doubling up to retry.backoff.max.ms (defaults
# 100 ms and 1 s), and sends again when a query names the new leader (its debug log shows the
# doubling: docs/models.md, shared). Each interval's +-20 % jitter is KIP-580's, assumed here.
LEADER_QUERY_BACKOFF_S = 0.1
LEADER_QUERY_BACKOFF_MAX_S = 1.0
LEADER_QUERY_JITTER = 0.2
_QUERY_TABLE_S = 30.0  # beyond it the queries come every 1 s +-20 %: the mean wait is a renewal's
_QUERY_STEP_S = 0.005


_QUERY_STEPS = int(_QUERY_TABLE_S / (LEADER_QUERY_BACKOFF_MAX_S * (1 - LEADER_QUERY_JITTER))) + 16
_QUERY_BASE = np.minimum(LEADER_QUERY_BACKOFF_S * 2.0 ** np.arange(_QUERY_STEPS), LEADER_QUERY_BACKOFF_MAX_S)
_QUERY_GRID = np.arange(0.0, _QUERY_TABLE_S + _QUERY_STEP_S, _QUERY_STEP_S)


def _schedules(rng: np.random.Generator, draws: int) -> np.ndarray:
    """``draws`` jittered query schedules, one per row: each query's time from the first refusal."""
    return np.cumsum(_QUERY_BASE * rng.uniform(1 - LEADER_QUERY_JITTER, 1 + LEADER_QUERY_JITTER,
                                               size=(draws, _QUERY_STEPS)), axis=1)


def _first_at_or_after(row: np.ndarray) -> np.ndarray:
    """One schedule's first query at or after each grid point (its queries are increasing: bisection)."""
    return row[np.minimum(np.searchsorted(row, _QUERY_GRID), row.size - 1)]


def _query_draws() -> np.ndarray:
    """One producer's jittered schedules: 8,000 draws of a fixed seed (the same everywhere)."""
    global _QUERY_DRAWS
    if _QUERY_DRAWS is None:
        _QUERY_DRAWS = _schedules(np.random.default_rng(20261128), 8_000)
    return _QUERY_DRAWS


def _query_table() -> tuple[np.ndarray, np.ndarray]:
    """G(x) on a grid: the expected time of the first query at or after x seconds from the first
    refusal, over the jitter (:func:`_query_draws`: its mean within ~1 ms)."""
    global _QUERY_G
    if _QUERY_G is None:
        draws = _query_draws()
        g = np.zeros(_QUERY_GRID.size)
        for row in draws:
            g += _first_at_or_after(row)
        _QUERY_G = (_QUERY_GRID, g / len(draws))
    return _QUERY_G


_QUERY_DRAWS: np.ndarray | None = None
_QUERY_G: tuple[np.ndarray, np.ndarray] | None = None
_QUERY_NOMINAL = np.cumsum(_QUERY_BASE)  # each query's time from the first refusal without jitter


def leader_query_outcomes(t: float | Sequence[float], start: float,
                          min_p: float = 0.0) -> list[tuple[float | None, float, float]]:
    """Which of one producer's leader queries is the first at or after a leader change at ``t``
    (seconds after the request; the queries run from ``start``), over the retry jitter: per query,
    (its time from the first refusal without jitter, its probability, its mean time after the
    request; 0: elected before the first refusal, seen at once; None: beyond the table), the
    likeliest first; those below ``min_p`` left out. An election near a query is
    seen at it or one interval later: a bimodal wait whose mean :func:`leader_query_at` gives.
    Several ``t``: elections equally likely at each (a spread of tails), pooled."""
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    x = ts - start
    chance: dict[float | None, float] = {}
    total: dict[float | None, float] = {}  # each outcome's chance x its mean time, summed over ts

    def add(q: float | None, p: float, m: float) -> None:
        chance[q] = chance.get(q, 0.0) + p / ts.size
        total[q] = total.get(q, 0.0) + p * m / ts.size

    for ti in ts[x <= 0]:  # elected before any refusal: no query needed
        add(0.0, 1.0, float(ti))
    for ti in ts[x > _QUERY_TABLE_S]:
        add(None, 1.0, leader_query_at(float(ti), start))
    xs = x[(x > 0) & (x <= _QUERY_TABLE_S)]
    if xs.size:
        d = _query_draws()
        d = d[:, :int(np.searchsorted(d.min(axis=0), xs.max())) + 1]  # the queries that can be first
        idx = (d[:, :, None] < xs).sum(axis=1)  # per schedule and x: its first query at or after x
        for i in range(int(idx.min()), int(idx.max()) + 1):
            hit = idx == i
            if hit.any():
                add(float(_QUERY_NOMINAL[i]), float(hit.sum()) / d.shape[0],
                    start + float((d[:, i, None] * hit).sum()) / float(hit.sum()))
    out = [(q, p, total[q] / p) for q, p in chance.items() if p >= min_p]
    return sorted(out, key=lambda o: -o[1])


# Beyond the table: E[X^2] / (2 E[X]) for X = the 1 s interval x U(0.8, 1.2)
_QUERY_RESIDUAL_S = LEADER_QUERY_BACKOFF_MAX_S * (1 + LEADER_QUERY_JITTER ** 2 / 3) / 2


_PRODUCERS_DRAWS = 2_000
_PRODUCERS_MAX = 64  # a bound on the table's cost: more producers are taken as this many
_QUERY_K: dict[tuple[int, float], np.ndarray] = {}


def _query_table_of(producers: int, gap_s: float) -> tuple[np.ndarray, np.ndarray]:
    """G(x) for ``producers`` clients writing to the partition, each on its own schedule: the first
    is refused at the origin, each other at its next send, uniform over ``gap_s`` (one producer's
    mean gap between sends to the partition) after it; the expected time of the earliest query of
    any of them at or after x (fixed seeds: the same table everywhere)."""
    k = max(1, min(int(producers), _PRODUCERS_MAX))
    gap = round(max(0.0, float(gap_s)), 3)
    if k == 1:
        return _query_table()
    if (k, gap) not in _QUERY_K:
        rng = np.random.default_rng(20261129 + 1000 * k + int(gap * 1000))
        best = np.full((_PRODUCERS_DRAWS, _QUERY_GRID.size), np.inf)
        for j in range(k):
            offset = np.zeros(_PRODUCERS_DRAWS) if j == 0 else rng.uniform(0.0, gap, _PRODUCERS_DRAWS)
            for i, row in enumerate(offset[:, None] + _schedules(rng, _PRODUCERS_DRAWS)):
                np.minimum(best[i], _first_at_or_after(row), out=best[i])
        _QUERY_K[(k, gap)] = best.mean(axis=0)
    return _QUERY_GRID, _QUERY_K[(k, gap)]


def leader_queries_at(t: np.ndarray, start: float | np.ndarray, producers: int | np.ndarray = 1,
                      gap_s: float | np.ndarray = 0.0) -> np.ndarray:
    """:func:`leader_query_at` over an array (``start``, ``producers``, ``gap_s``: one value, or one
    per ``t``)."""
    t = np.asarray(t, dtype=float)
    x = t - start
    ks = np.broadcast_to(np.asarray(producers, dtype=int), t.shape)
    gaps = np.round(np.broadcast_to(np.asarray(gap_s, dtype=float), t.shape), 3)
    # past the table every producer queries once a second: the wait beyond its end is kept (one
    # producer's is its renewal mean, below)
    past = np.maximum(x - _QUERY_TABLE_S, 0.0)
    q = np.empty(t.shape)
    for k, gap in set(zip(ks.ravel().tolist(), gaps.ravel().tolist())):
        grid, g = _query_table_of(k, gap)
        sel = (ks == k) & (gaps == gap)
        q[sel] = np.interp(np.minimum(x[sel], _QUERY_TABLE_S), grid, g) + past[sel]
    out = np.where(x <= 0, t, start + q)
    return np.where((x > _QUERY_TABLE_S) & (ks == 1), t + _QUERY_RESIDUAL_S, out)


def leader_query_at(t: float, start: float, producers: int = 1, gap_s: float = 0.0) -> float:
    """When the load's clients learn that the partition has a new leader at ``t`` seconds after the
    request: the expected time of the first leader query at or after ``t`` of any of the
    ``producers`` writing to it, the queries starting at ``start`` (the old owner's first refusal)
    for the first of them and, for each other, at its next send to the partition (``gap_s`` apart
    on average, :func:`_query_table_of`). ``t`` itself where the leader changed before any refusal."""
    return float(leader_queries_at(np.array([t]), start, producers, gap_s)[0])


def cluster_part(pts: list[MovePoint], after_elect: np.ndarray | None = None
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



def plus_se(a: float | None, b: float | None) -> float | None:
    """Two independent standard errors added (None: the first is unknown)."""
    return None if a is None else math.sqrt(a * a + (b or 0.0) ** 2)


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




# --------------------------------------------------------------------------------------------
# Families


class MoveFamily(Protocol):
    """One move physics (a profile's ``move_model`` names it): how such a move is fitted, predicted
    and projected, and how it is described. A new physics is one module implementing this and
    calling :func:`register`."""

    name: str  # the profile's move_model
    target_pct: float  # the held-out |error| a validation must stay within
    copies: bool  # bytes cross between brokers (the new owner fetches them: a throttled copy)
    names_copy_start: bool  # the leader names the bytes a new replica copies (copy_start)
    opens_objects: bool  # the new owner opens stream objects; the move's tail is its object-store bytes
    # The held-out axes a projection needs, one passing check of each group.
    required_axes: tuple[tuple[str, ...], ...]
    more_runs: str | None  # what to run when a required check (other than size) is missing
    # Why a projection whose bytes to carry come from an assumed relation (not measured) is not
    # validated where it relies on it (None: the family's bytes are the partition's or measured).
    bytes_assumed: str | None

    def bytes_of(self, p: MovePoint) -> float:
        """The bytes the move had to carry at the request (what a size check spans)."""

    def fit(self, system: str, pts: list[MovePoint], open_pts: list[MovePoint]) -> MoveModel:
        """A model from the usable points; ValueError when they do not identify it."""

    def predict(self, m: MoveModel, b: float, cap: float, ingest: float, tail: float | None,
                objects: float | None) -> tuple[float, np.ndarray | None]:
        """(move_seconds, its gradient in (fixed_s, efficiency); None: no standard error)."""

    def bytes_moved(self, m: MoveModel, b: float, seconds: float, ingest: float, tail: float | None) -> float:
        """The bytes a move of ``seconds`` carries."""

    def formula(self, m: MoveModel) -> str:
        """The fitted formula in words."""

    def curve(self, m: MoveModel, xs: list[float], moves: list[dict[str, Any]], cap: float
              ) -> tuple[list[float], str]:
        """The model's line over partition sizes ``xs`` at the measured moves' median inputs (the
        report's move-time figure) and what its label adds."""

    def grid(self, spark: Any, base: DataFrame, m: MoveModel) -> DataFrame:
        """The projection grid's rows of this family (bench/analysis/projection.py)."""

    def partition_case(self, m: MoveModel, cap: float, size: float, label: str, ingest: float
                       ) -> tuple[float, float | None, float | None, str, dict[str, float]]:
        """One partition of ``size`` ingesting ``ingest`` moved at most at ``cap`` bytes/s (what
        the link budget leaves): (seconds, se, bytes moved, basis, its inputs per domain axis:
        bytes, rate, ingest_share, tail, objects as the family has them)."""

    def sim_move(self, partition_bytes: float, ingest: float, cfg: dict[str, Any]) -> tuple[float, float]:
        """A simulated cluster's move of a partition: (bytes to carry, extra fixed seconds)."""

    def steady_terms(self, ingest: float, rf: int, consumer_groups: int) -> list[tuple[str, float]]:
        """The sending broker's steady egress for a partition ingesting ``ingest`` bytes/s with
        ``rf`` replicas and ``consumer_groups`` groups reading it: (what, bytes/s) each
        (bench/analysis/model/budget.py)."""

    def cluster_caps(self, link: float) -> dict[str, Any]:
        """A simulated cluster's settings of this family: rf, throttle_share,
        upload_threshold_bytes and the share of the link a move may use."""


FAMILIES: dict[str, MoveFamily] = {}  # name -> family (the family modules register themselves)


def register(f: MoveFamily) -> MoveFamily:
    FAMILIES[f.name] = f
    return f


def family_named(name: str) -> MoveFamily:
    if name not in FAMILIES:
        raise ValueError(f"unknown move-model family {name!r} ({', '.join(FAMILIES)})")
    return FAMILIES[name]


def family_of(system: str) -> MoveFamily | None:
    """The move-model family of a system: None for a system no profile describes, or whose
    profile names no family (an external cluster), or one no module implements."""
    p = PROFILES.get(system)
    return FAMILIES.get(p.move_model) if p is not None and p.move_model else None
