"""Fitting a system's move model and its held-out validation.

Held-out validation (:func:`validate`): moves are grouped into *families* (one system, every run
setting equal except the axis being checked) and by the axis' nominal value (the scenario's
setting, so repetitions of one size never straddle the split). For each value with enough smaller
values below it (size: at least 3 sizes spanning at least 8x in bytes at the request; throttle,
link, ingest: at least 2) the model is fitted on the smaller values only and predicts the held-out
moves from their inputs at the request. ``error_pct`` = (predicted - measured) / measured of the
median move; ``status`` ok within the move family's target (its ``target_pct``), failed beyond
it and beyond the noise of the held-out median (:data:`NOISE_SE` standard errors, from the
training moves' spread about the fit), inconclusive beyond the target but within that noise (no
axis rests on it), or insufficient with the reason. The size check's span is that of the bytes each move had to carry
(its family's ``bytes_of``): a tiered copy's bytes barely grow with the partition (only the local
tail moves), so its size check is "insufficient" unless the tail itself varies, and its throttle
check is the one that identifies the bytes' rate. The shared tail (axis ``tail``) is measured at
the request, not set: a family's moves group into levels within ``LEVEL_GAP`` of each other
(:func:`bench.analysis.model.base.levels`), each level one held-out value.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench.analysis.model.base import (
    AXES, LEVEL_GAP, MEASURED_AXES, MIN_TRAIN, SIZE_SPAN, FitRefused, MoveModel, MovePoint, axis_value, domain_of, family_key,
    family_of, fmt_count, levels, nominal_ingest, one_version, refuse_leak, usable,
)
from bench.analysis.model.handover import fit_open
from bench.units import format_bytes
from systems.registry import PROFILES


def fit_model(points: Sequence[MovePoint], system: str, open_points: Sequence[MovePoint] | None = None, *,
              held_out: tuple[str, float] | None = None, pool_versions: bool = False) -> MoveModel:
    """Fit one system's model on its points (others ignored). ``open_points``: the moves whose open
    phases fit the per-object open cost (handover; default: ``points``). ``held_out`` (axis,
    value): the check this fit serves; a training or open move at or beyond it is refused
    (:class:`FitRefused`), as are moves of more than one code version unless ``pool_versions``.
    Raises ValueError when the points cannot identify the model."""
    fam = family_of(system)
    if fam is None:
        p = PROFILES.get(system)
        raise ValueError(f"{system}: no move-time model for the {p.move_model if p is not None else None!r} family")
    pts = usable(points, system)
    opens = usable(open_points if open_points is not None else points, system)
    if held_out is not None:
        refuse_leak(pts + opens, *held_out)
    version = None if pool_versions else one_version(pts + opens, system)
    if len(pts) < 2:
        raise ValueError(f"{system}: {len(pts)} measured move(s) with a known cap; need at least 2")
    m = fam.fit(system, pts, opens)
    m.version = version
    m.domain = domain_of(fam, pts)
    return m



def predict_point(m: MoveModel, p: MovePoint) -> float:
    """A model's prediction of one measured move from its inputs at the request."""
    return m.for_client(p.ack_before_s, p.producers, p.send_gap_s).predict(m.kind.bytes_of(p), p.cap_bytes_per_s, nominal_ingest(p),
                                                p.tail_bytes, p.objects)


def _axis_label(axis: str, v: float) -> str:
    if axis == "size":
        return format_bytes(v)
    if axis == "tail":
        return f"tail >= {format_bytes(v)}"
    if axis == "link":
        return f"{v / 1e6:g} Mbit/s"
    if axis == "budget":
        return f"steady traffic + allowance = {v:.2f} x the link"
    return f"{v / 1e6:.3g} MB/s"


# A held-out tail is one whose upload lasts at least this long at its move's cap.
TAIL_MIN_HELD_S = 1.0
# Standard errors of the held-out median within which a miss beyond the target is "inconclusive"
# rather than "failed" (a sub-second move's client metadata refresh alone varies by 0.1-0.4 s here).
NOISE_SE = 2.0


def validate(points: Sequence[MovePoint], system: str,
             axes: Sequence[str] = ("size", "throttle", "link", "ingest", "budget", "tail"),
             open_points: Sequence[MovePoint] | None = None) -> list[dict[str, Any]]:
    """Held-out checks of one system's model on every axis its moves vary (module docstring).

    One entry per (axis, family, held-out value): ``{system, axis, held_out: {axis: value}, label,
    family, status, reason, error_pct, max_abs_error_pct, target_pct, measured_s, predicted_s,
    train_values, train_runs, test_runs, n_train, n_test, fit}``. A system whose moves support no
    size check gets one ``insufficient`` size entry saying why.
    """
    fam = family_of(system)
    target = fam.target_pct if fam is not None else None
    pts = usable(points, system)
    out: list[dict[str, Any]] = []
    for axis in axes:
        fams: dict[tuple, list[MovePoint]] = defaultdict(list)
        for p in pts:
            if axis_value(p, axis) is not None:
                fams[family_key(p, axis)].append(p)
        for fk, fpts in sorted(fams.items(), key=lambda kv: str(kv[0])):
            by_val = _by_value(fpts, axis)
            values = sorted(by_val)
            if len(values) < 2 or (axis == "budget" and values[0] > 1.0):
                continue  # a budget check fits on moves their throttle capped: none here
            # Every value with enough smaller ones is held out in turn (walk-forward); a family
            # with none says why its largest value could not be checked.
            held_values = [v for v in values[1:] if _holdable(axis, v, by_val[v])]
            checks = [_check(system, axis, fk, by_val, held, target, open_points) for held in held_values]
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


def _holdable(axis: str, v: float, pts: list[MovePoint]) -> bool:
    """Whether a value may be held out: the budget axis checks only moves the link's rest capped
    (demand above the link); a tail only where its upload lasts at least :data:`TAIL_MIN_HELD_S`
    at the move's cap (a shorter one is within a handover's noise: fitted on, never held out)."""
    if axis == "budget":
        return v > 1.0
    if axis == "tail":
        return statistics.median(p.tail_bytes / p.cap_bytes_per_s for p in pts) >= TAIL_MIN_HELD_S
    return True


def _by_value(pts: list[MovePoint], axis: str) -> dict[float, list[MovePoint]]:
    """A family's moves per held-out value: the nominal value, or a measured axis' level (its
    smallest value; :data:`MEASURED_AXES`)."""
    if axis in MEASURED_AXES:
        return {axis_value(lv[0], axis): lv for lv in levels(pts, lambda p: axis_value(p, axis))}
    by_val: dict[float, list[MovePoint]] = defaultdict(list)
    for p in pts:
        by_val[axis_value(p, axis)].append(p)
    return by_val


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
        # what the held-out moves span per domain axis: how far a projection goes beyond them
        "test_domain": domain_of(family_of(system), test) if family_of(system) is not None else {},
    }
    if len(train_vals) < MIN_TRAIN[axis]:
        return {**base, "status": "insufficient",
                "reason": f"{len(train_vals)} smaller {axis} value(s) to fit on; need {MIN_TRAIN[axis]}"}
    if axis == "size":
        # the regressor's span: the bytes each move copied (a copy's whole partition, a tiered
        # copy's local tail, a handover's partition for its open)
        fam = family_of(system)
        size_of = fam.bytes_of if fam is not None else (lambda p: p.partition_bytes)
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
    # Walk-forward for the open cost too: only the training moves' own opens fit it (never a
    # held-out move's, nor one of a larger value elsewhere, nor another move of a training run).
    train_ids = {id(p) for p in train}
    opens = [p for p in (open_points if open_points is not None else train) if id(p) in train_ids]
    try:
        m = fit_model(train, system, opens, held_out=(axis, held))
    except FitRefused:
        raise  # a leak is a bug of the caller's grouping, never a check's result
    except ValueError as exc:
        return {**base, "status": "insufficient", "reason": str(exc)}
    errs, preds = [], []
    for p in test:
        pred = predict_point(m, p)
        preds.append(pred)
        errs.append((pred - p.move_seconds) / p.move_seconds * 100.0)
    measured = statistics.median(p.move_seconds for p in test)
    predicted = statistics.median(preds)
    err = (predicted - measured) / measured * 100.0 if math.isfinite(predicted) else math.inf
    ok = target is not None and abs(err) <= target
    status, reason = ("ok", None) if ok else ("failed", f"|error| {abs(err):.1f} % > {target:g} %")
    if not ok and target is not None and math.isfinite(predicted):
        # a miss is a failure only beyond the noise of the held-out median as well: the training
        # moves' spread about the fit, as the standard error of a median of the held-out count
        resid = [p.move_seconds - predict_point(m, p) for p in train]
        noise = NOISE_SE * 1.2533 * statistics.stdev(resid) / math.sqrt(len(test)) if len(resid) >= 2 else 0.0
        beyond = abs(predicted - measured) - target / 100.0 * measured
        if beyond <= noise:
            status, reason = "inconclusive", (
                f"|error| {abs(err):.1f} % > {target:g} %, but the miss beyond the target ({beyond:.3g} s) lies within "
                f"the noise of the held-out median ({noise:.3g} s: {NOISE_SE:g} standard errors, from the training "
                "moves' spread about the fit): this host does not resolve the axis' effect here")
    return {**base, "status": status, "reason": reason, "error_pct": err, "max_abs_error_pct": max(abs(e) for e in errs),
            "measured_s": measured, "predicted_s": predicted, "fit": m.to_row()}


OPEN_TARGET_PCT = 30.0  # the open cost's held-out check (per object, 10x beyond what it was fitted on)
# Below this many objects an open takes milliseconds, within this host's scheduling noise: such a
# level is fitted on, never held out.
OPEN_MIN_HELD = 1000


def validate_open(points: Sequence[MovePoint], system: str, version: str | None) -> list[dict[str, Any]]:
    """The per-object open cost's held-out check (axis ``objects``), per object-store latency (the
    one setting on an open's path: its replay GETs a snapshot): the opens of one code version
    grouped into levels of their object count; the highest level (at least :data:`OPEN_MIN_HELD`
    objects) predicted by ``open(n) = a + b x n`` fitted on the lower levels only (at least two),
    the median open against the median prediction within :data:`OPEN_TARGET_PCT`. Other settings'
    opens are pooled, as the projection's fit pools them (the cost depends on the objects' count,
    not their size). One ``insufficient`` entry when no group supports a check; none without opens."""
    ops = sorted((p for p in points if p.system == system and p.version == version
                  and p.open_seconds is not None and p.objects), key=lambda p: p.objects)
    if not ops:
        return []
    groups: dict[str, list[MovePoint]] = defaultdict(list)
    for p in ops:
        groups[str(p.setting("object_store_latency"))].append(p)
    checks = [c for g in sorted(groups) if (c := _open_check(groups[g], system, version)) is not None]
    if checks:
        return checks
    lo, hi = fmt_count(ops[0].objects), fmt_count(ops[-1].objects)
    return [_open_row(system, version, label=f"opens of {lo}-{hi} objects", status="insufficient",
                      reason=(f"opens measured at {lo}-{hi} objects; the check needs, at one object-store latency, two "
                              f"levels of object counts to fit on (opens within {LEVEL_GAP:g}x of each other are "
                              f"one level) and a higher one of at least {fmt_count(OPEN_MIN_HELD)} objects: run "
                              "`python -m bench suite open`"))]


def _open_row(system: str, version: str | None, **fields: Any) -> dict[str, Any]:
    """An open-cost check entry: the validation row's keys (as :func:`_check` gives them), ``fields`` over them."""
    return {"system": system, "axis": "objects", "held_out": {}, "family": "open cost", "label": None,
            "status": "insufficient", "reason": None, "target_pct": OPEN_TARGET_PCT, "train_values": [],
            "train_runs": [], "test_runs": [], "n_train": 0, "n_test": 0, "error_pct": None, "max_abs_error_pct": None,
            "measured_s": None, "predicted_s": None, "fit": {"version": version}, "test_domain": {}, **fields}


def _open_check(ops: list[MovePoint], system: str, version: str | None) -> dict[str, Any] | None:
    """One group's check (:func:`validate_open`), or None when its opens do not support one."""
    lvs = levels(ops, lambda p: p.objects)
    test, train = lvs[-1], [p for lv in lvs[:-1] for p in lv]
    if len(lvs) < 3 or test[0].objects < OPEN_MIN_HELD:
        return None
    a, b, _, _, _, _ = fit_open(train)
    preds = [(a or 0.0) + b * p.objects for p in test]
    measured, predicted = statistics.median(p.open_seconds for p in test), statistics.median(preds)
    err = (predicted - measured) / measured * 100.0
    ok = abs(err) <= OPEN_TARGET_PCT
    latency = ops[0].setting("object_store_latency")
    return _open_row(
        system, version, held_out={"objects": test[0].objects},
        label=(f"open of {fmt_count(test[0].objects)}-{fmt_count(test[-1].objects)} objects (fitted on "
               f"{fmt_count(train[0].objects)}-{fmt_count(train[-1].objects)}; object-store latency "
               f"{latency or 'none added'})"),
        train_values=[float(lv[0].objects) for lv in lvs[:-1]],
        train_runs=sorted({p.run_key for p in train}), test_runs=sorted({p.run_key for p in test}),
        n_train=len(train), n_test=len(test), test_domain={"objects": [float(test[0].objects), float(test[-1].objects)]},
        status="ok" if ok else "failed", reason=None if ok else f"|error| {abs(err):.1f} % > {OPEN_TARGET_PCT:g} %",
        error_pct=err, measured_s=measured, predicted_s=predicted,
        max_abs_error_pct=max(abs(q - p.open_seconds) / p.open_seconds * 100.0 for q, p in zip(preds, test)))


def _context(p: MovePoint, axis: str) -> str:
    """The family's throttle / ingest setting where the axis does not pool it, to tell checks of
    one axis apart."""
    setting = {"throttle": "replication_throttle_bytes_per_s", "ingest": "produce_rate_msgs_per_s"}
    other = [(a, axis_value(p, a)) for a, k in setting.items() if a != axis and k not in AXES[axis]]
    shown = [f"{a} {_axis_label(a, v)}" for a, v in other if v is not None]
    return f" (at {', '.join(shown)})" if shown and axis != "size" else ""


def _family_label(fk: tuple) -> str:
    s = dict(fk[1:])
    keep = ("brokers", "replication_factor", "link_rate", "replication_throttle_bytes_per_s", "produce_rate_msgs_per_s",
            "prefill_bytes_per_partition", "wal_upload_threshold_bytes", "segment_bytes", "local_retention_bytes",
            "follower_fetch_last_tiered_offset")
    return ", ".join(f"{k}={s[k]}" for k in keep if s.get(k) is not None)

