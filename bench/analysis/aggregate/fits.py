"""The glue between the aggregate's moves and the move models (bench/analysis/model/): which moves
a model rests on, fitting each system's model with its held-out checks, and the rebalance checks
(the cluster simulation against measured multi-partition moves)."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import replace
from collections.abc import Iterable, Sequence
from typing import Any

from bench.analysis import model as mdl
from bench.analysis import rebalance
from bench.analysis.aggregate.discovery import StoredRun
from bench.analysis.model.budget import LinkBudget
from bench.units import rate_bits
from bench.check.host import SATURATED_BUSY_PCT
from systems.registry import PROFILES


FIT_ACTIONS = ("reassign", "move_set")  # the measured moves the models rest on (not drains, scale-outs, faults)


def model_move(m: dict[str, Any]) -> bool:
    """A move the models may rest on: a single-partition reassign / move_set of a run without
    workload consumers (consumers' reads share the links a move crosses, which the models do not
    describe), timed while the host was not saturated (bench/check/host.py: a saturated move
    measured the host; an unknown one is kept, :func:`host_left_out` counts both)."""
    return fit_kind(m) and not m.get("host_saturated")


def fit_kind(m: dict[str, Any]) -> bool:
    """The kind of move the models describe, whatever the host did (:func:`model_move` less the
    host's saturation)."""
    return (m.get("action") in FIT_ACTIONS and (m.get("partitions_in_action") or 1) == 1
            and not m.get("with_consumers"))


def host_left_out(moves: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per system, of the timed moves of the kind the models describe (:func:`fit_kind`):
    ``saturated_left_out`` (the host was saturated: not in the models) and ``host_unknown_kept``
    (too few host samples to tell, or a history from before them: kept)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"saturated_left_out": 0, "host_unknown_kept": 0})
    for m in moves:
        if m.get("move_seconds") is None or m.get("partition_bytes") is None or not fit_kind(m):
            continue
        if m.get("host_saturated"):
            out[m["system"]]["saturated_left_out"] += 1
        elif m.get("host_saturated") is None:
            out[m["system"]]["host_unknown_kept"] += 1
    return dict(out)


def host_note(counts: dict[str, int] | None) -> str:
    """"n saturated moves left out" (and the unknown ones kept), for the model's notes and rows."""
    c = counts or {}
    sat, unk = c.get("saturated_left_out", 0), c.get("host_unknown_kept", 0)
    return (f"{sat} saturated move{'s' * (sat != 1)} left out (host CPU > {SATURATED_BUSY_PCT:g} %)"
            + (f"; {unk} with the host unknown kept" if unk else ""))



def _params_value(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def run_version(summary: dict[str, Any]) -> str | None:
    """The code a run measured: its commit, ``+dirty`` when the tree had changes (None: unknown)."""
    git = (summary.get("provenance") or {}).get("git") or {}
    if not git.get("commit"):
        return None
    return git["commit"] + ("+dirty" if git.get("dirty") else "")


def move_cap(run: StoredRun | None, fam: mdl.MoveFamily, ingest: float, fallback: float | None,
             link_rate: Any = None) -> tuple[float | None, float | None]:
    """A move's cap on its bytes/s and its link demand (:class:`~bench.analysis.model.MovePoint`):
    the run's own caps (its throttle, object-store cap, move budget) or, when lower, what the
    sending broker's link leaves after its steady traffic (and, for a system with an object store,
    the object store's link after the same). ``link_rate``: the brokers' link at the move (default:
    the run's). Without the run's settings: ``fallback``."""
    if run is None:
        return fallback, None
    prof = PROFILES.get(run.system)
    throttle = run.settings_cap
    params = run.summary.get("params") or {}
    rf = int(params.get("replication_factor") or (prof.replication_factor if prof else None) or 1)
    terms = tuple(fam.steady_terms(ingest, rf, 0))
    links = [rate_bits(x) / 8 for x in (link_rate or params.get("link_rate"), params.get("object_store_link_rate")) if x]
    if not links:
        return throttle or fallback, None
    budgets = [LinkBudget(link, terms) for link in links]
    cap = min(b.cap(throttle) for b in budgets)
    tight = min(budgets, key=lambda b: b.left)
    demand = (tight.steady + min(throttle or math.inf, tight.payload)) / tight.payload
    return (cap if cap > 0 else None), demand


def move_points(moves: Iterable[dict[str, Any]], runs: Sequence[StoredRun] = ()) -> list[mdl.MovePoint]:
    """One model input per measured single-partition move of a reassign / move_set action, with
    its run's settings (summary.json params) for grouping the held-out checks, its code version,
    and its cap from the run's settings and link budget (:func:`move_cap`)."""
    by_key = {r.run_key: r for r in runs}
    params = {r.run_key: tuple(sorted((k, _params_value(v)) for k, v in _effective_settings(r).items()))
              for r in runs}
    pts = []
    for m in moves:
        fam = mdl.family_of(m["system"])
        if m.get("move_seconds") is None or m.get("partition_bytes") is None or not model_move(m) or fam is None:
            continue
        run = by_key.get(m["run_key"])
        bw = m.get("bandwidth_bytes_per_s")
        prm = params.get(m["run_key"], ())
        prm = tuple(sorted({**dict(prm), **per_move_settings(m, dict(prm))}.items()))
        p = mdl.MovePoint(
            m["system"], m["run_key"], float(m["move_seconds"]), float(m["partition_bytes"]),
            float(bw) if bw else None, float(m.get("ingest_bytes_per_s") or 0.0),
            None if m.get("unuploaded_bytes") is None else float(m["unuploaded_bytes"]),
            None if m.get("objects") is None else float(m["objects"]),
            None if m.get("open_seconds") is None else float(m["open_seconds"]), prm,
            None if m.get("leader_change_ts") is None or m.get("request_ts") is None
            else float(m["leader_change_ts"]) - float(m["request_ts"]),
            None if m.get("copy_bytes_at_request") is None else float(m["copy_bytes_at_request"]),
            version=run_version(run.summary) if run is not None else None,
            # the client's schedule starts at the first refusal it met; else the old owner's first
            refuse_seconds=_since_request(m, "client_refused_ts") if m.get("client_refused_ts") is not None
            else _since_request(m, "refused_ts"),
            ack_before_s=None if m.get("ack_p50_before_ms") is None else float(m["ack_p50_before_ms"]) / 1000.0,
            producers=int(m.get("producers_of_partition") or 1),
            send_gap_s=float(m.get("producer_send_gap_s") or 0.0))
        steady = m.get("sender_ingest_bytes_per_s")  # all the sender leads; else the partition's own
        cap, demand = move_cap(run, fam, float(steady) if steady else mdl.nominal_ingest(p), p.cap_bytes_per_s,
                               dict(prm).get("link_rate"))
        pts.append(replace(p, cap_bytes_per_s=cap, link_demand=demand))
    return pts


def _since_request(m: dict[str, Any], ts: str) -> float | None:
    """Seconds from the move's request to its ``ts`` column (None: either unknown, or before it)."""
    if m.get(ts) is None or m.get("request_ts") is None or float(m[ts]) < float(m["request_ts"]):
        return None
    return float(m[ts]) - float(m["request_ts"])


def per_move_settings(m: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The settings that hold for one move rather than its whole run (a run that steps its links,
    holds partitions of several sizes or feeds them at several rates): the link in force at the
    request, the moved partition's prefill and its nominal ingest (``ingest_bytes_per_s``, which
    the ingest axis reads before the run's rate)."""
    out: dict[str, Any] = {}
    if m.get("link_rate_at_request") and params.get("link_rate"):
        out["link_rate"] = m["link_rate_at_request"]
    if m.get("prefill_bytes_of_partition") is not None:
        out["prefill_bytes_per_partition"] = int(m["prefill_bytes_of_partition"])
    if m.get("nominal_ingest_bytes_per_s") is not None:
        out["ingest_bytes_per_s"] = round(float(m["nominal_ingest_bytes_per_s"]), 3)
    return out


def _effective_settings(r: StoredRun) -> dict[str, Any]:
    """Every setting that defines a run's configuration: summary.json params plus what its
    configuration resolved (raw broker configs, client settings, acks, min.insync.replicas, the
    prefill producer's batch) for summaries whose params predate them."""
    out = dict(r.summary.get("params") or {})
    conf = r.summary.get("configuration") or {}
    for k, v in (conf.get("system_settings") or {}).items():  # each under its own name, as params has them
        out.setdefault(k, v)
    for k in ("client_settings", "acks", "min_insync_replicas", "object_store_latency"):
        if k in conf:
            out.setdefault(k, conf[k])
    if r.scenario is not None:
        out.setdefault("prefill_batch_bytes", r.scenario.prefill.batch_bytes)
        out.setdefault("prefill_record_bytes", r.scenario.prefill.record_bytes)
        out.setdefault("move_models", r.scenario.checks.move_models)
    return out


def newest_version(runs: Sequence[StoredRun], system: str, pts: Sequence[mdl.MovePoint]) -> str | None:
    """The code version of the system's latest run with a move the models describe (a results
    folder holding runs of several commits projects with the newest one's)."""
    have = {p.version for p in pts if p.system == system}
    latest = sorted(((str(r.summary.get("started_at") or ""), run_version(r.summary)) for r in runs
                     if r.system == system and run_version(r.summary) in have), reverse=True)
    return latest[0][1] if latest else None


def projection_model(pts: list[mdl.MovePoint], validation: list[dict[str, Any]], system: str,
                     version: str | None = None, opens: Sequence[mdl.MovePoint] | None = None) -> mdl.MoveModel:
    """The model a system projects with: fitted on every move of the family (one configuration
    but for the checked axis) of its best passing held-out check - a size check reaching the
    largest held-out size first, then throttle, link, ingest (a tiered copy's bytes do not grow
    with the size: its throttle check is the one that passes). Without a passing check, on the
    family with the most moves of the first axis whose moves identify a model (then the
    projection says "not validated"). ``version``: only moves of that code version. ``opens``: the moves whose opens fit the
    open cost (default: the model's moves; a run lending only its opens among them)."""
    mine = [p for p in pts if p.system == system]
    if not mine:
        raise ValueError(f"{system}: no measured single-partition moves")
    if version is not None:  # one code version: the newest the runs measured
        mine = [p for p in mine if p.version == version]
    order = list(mdl.AXES)

    def families(axis: str) -> dict[tuple, list[mdl.MovePoint]]:
        fams: dict[tuple, list[mdl.MovePoint]] = defaultdict(list)
        for p in mine:
            fams[mdl.family_key(p, axis)].append(p)
        return fams

    def same_version(fp: list[mdl.MovePoint]) -> list[mdl.MovePoint]:  # the opens of the fit's own code
        return [p for p in (mine if opens is None else opens) if p.system == system and p.version == fp[0].version]

    ok = [v for v in validation if v["system"] == system and v["status"] == "ok" and v["axis"] in order]
    for v in sorted(ok, key=lambda v: (order.index(v["axis"]), -float(v["held_out"].get(v["axis"]) or 0.0))):
        fams = families(v["axis"])
        chosen = next((fk for fk, fp in fams.items() if v["test_runs"][0] in {p.run_key for p in fp}), None)
        if chosen is not None:
            return mdl.fit_model(fams[chosen], system, same_version(fams[chosen]))
    first: ValueError | None = None
    for axis in order:
        fams = families(axis)
        chosen = max(fams, key=lambda fk: (len(fams[fk]), str(fk)))
        try:
            return mdl.fit_model(fams[chosen], system, same_version(fams[chosen]))
        except ValueError as exc:
            first = first or exc
    raise first  # type: ignore[misc]


def fit_models(moves: list[dict[str, Any]], runs: Sequence[StoredRun] = (), pool_versions: bool = False
               ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """-> ({"models", "notes", "validation"}, {"model_fit", "model_validation"} rows). Each fit
    and check rests on the runs of one code version; ``pool_versions`` pools them (the models
    then name every version)."""
    every = move_points(moves, runs)
    if pool_versions:
        pooled = ", ".join(sorted({p.version or "unknown" for p in every}))
        every = [replace(p, version=f"pooled: {pooled}") for p in every]
    # a run whose scenario says checks.move_models: false lends only its opens (the open cost)
    pts = [p for p in every if p.setting("move_models") is not False]
    models: dict[str, mdl.MoveModel] = {}
    notes: dict[str, str] = {}
    validation: list[dict[str, Any]] = []
    left_out = host_left_out(moves)
    for system in PROFILES:
        opens = [p for p in every if p.system == system]
        if not any(p.system == system for p in pts):
            if left_out.get(system, {}).get("saturated_left_out"):  # every move it had was saturated
                notes[system] = f"no move to fit on: {host_note(left_out[system])}"
            elif opens:  # only runs that lend their opens: the open cost's check, no model
                notes[system] = ("no move to fit on: its runs measure one term only (checks.move_models: false); "
                                 "aggregate them with `make bench`'s runs")
                if mdl.family_of(system) is not None and mdl.family_of(system).opens_objects:
                    validation.extend(mdl.validate_open(opens, system, newest_version(runs, system, opens)))
            continue
        mine = [p for p in pts if p.system == system]
        validation.extend(mdl.validate(mine, system, open_points=mine))
        try:
            version = None if pool_versions else newest_version(runs, system, pts)
            models[system] = projection_model(pts, validation, system, version, opens)
            if models[system].kind.opens_objects:  # the per-object open cost, checked on its own
                validation.extend(mdl.validate_open(opens, system, models[system].version))
        except ValueError as exc:
            left = left_out.get(system, {})
            notes[system] = str(exc) + (f" ({host_note(left)})" if any(left.values()) else "")
    fit_rows = [{**m.to_row(), **{"saturated_left_out": 0, "host_unknown_kept": 0, **left_out.get(s, {})},
                 "host_note": host_note(left_out.get(s))} for s, m in models.items()]
    return ({"models": models, "notes": notes, "validation": validation},
            {"model_fit": fit_rows, "model_validation": validation_rows(validation)})


REBALANCE_MIN_MOVES = 2  # an action moving at least this many partitions is a rebalance to simulate
REBALANCE_TARGET_PCT = 20.0


def rebalance_checks(runs: Sequence[StoredRun], moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]
                     ) -> list[dict[str, Any]]:
    """The cluster simulation (bench.analysis.rebalance) against every measured multi-partition move
    action, per configuration: the median predicted vs the median measured time to rebalance
    (first request -> last moved partition's first ack). The models are fitted on single moves only,
    so these runs are held out by construction."""
    by_cfg: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    lags = ack_lags(moves, models)
    for r in runs:
        m = models.get(r.system)
        if m is None or r.scenario is None or (m.version and run_version(r.summary) != m.version
                                               and not m.version.startswith("pooled")):
            continue  # a rebalance of other code is no check of this model
        rows = [x for x in moves if x["run_key"] == r.run_key and (x["partitions_in_action"] or 0) >= REBALANCE_MIN_MOVES]
        for aid in sorted({x["action_id"] for x in rows}):
            rows_of = [x for x in rows if x["action_id"] == aid]
            acts = r.scenario.actions  # action ids are the actions' indexes in the scenario
            conc = getattr(acts[int(aid)], "concurrency", None) if aid.isdigit() and int(aid) < len(acts) else None
            # The client's ack lag (leader change -> first ack) holds no concurrency slot: the
            # simulator adds it once at the end, so it leaves the per-move fixed cost.
            # (A model with the client's part fitted apart has none of it in its fixed cost.)
            lag = lags.get(r.system, 0.0)
            fixed = m.fixed_s if m.client_start_s is not None else max(0.0, m.fixed_s - lag)
            params = {"copies": m.kind.copies, "fixed_s": fixed, "efficiency": m.efficiency,
                      "open_per_object_s": m.open_per_object_s, "ack_lag_s": lag}
            try:
                pred = rebalance.predict_run(rows_of, params, concurrency=conc,
                                             sources=rebalance.sources_from_summary(r.summary))
            except (ValueError, KeyError) as exc:
                pred = {"error": str(exc)}
            by_cfg[(r.config_key, aid)].append({"run": r, "rows": rows_of, "pred": pred, "concurrency": conc})
    out = []
    for (ck, aid), items in sorted(by_cfg.items()):
        r0 = items[0]["run"]
        ok = [i for i in items if i["pred"].get("measured_seconds") and i["pred"].get("predicted_seconds") is not None]
        label = (f"{r0.summary.get('scenario') or r0.config_label}: {len(items[0]['rows'])} moves, concurrency "
                 f"{items[0]['concurrency'] or 'all'}")
        base = {"system": r0.system, "axis": "rebalance", "held_out": {"rebalance": float(len(items[0]["rows"]))},
                "label": label, "family": ck, "target_pct": REBALANCE_TARGET_PCT, "train_values": [],
                "train_runs": models[r0.system].runs, "test_runs": sorted(i["run"].run_key for i in items),
                "n_train": models[r0.system].n, "n_test": len(items), "max_abs_error_pct": None}
        if not ok:
            why = next((i["pred"].get("error") for i in items if i["pred"].get("error")), "no measured time to rebalance")
            out.append({**base, "status": "insufficient", "reason": why, "error_pct": None,
                        "measured_s": None, "predicted_s": None})
            continue
        meas = statistics.median(i["pred"]["measured_seconds"] for i in ok)
        pred = statistics.median(i["pred"]["predicted_seconds"] for i in ok)
        err = (pred - meas) / meas * 100.0 if math.isfinite(pred) else math.inf
        good = abs(err) <= REBALANCE_TARGET_PCT
        out.append({**base, "status": "ok" if good else "failed",
                    "reason": None if good else f"|error| {abs(err):.1f} % > {REBALANCE_TARGET_PCT:g} %",
                    "error_pct": err, "measured_s": meas, "predicted_s": pred,
                    "max_abs_error_pct": max(abs(i["pred"]["error_pct"]) for i in ok
                                             if i["pred"].get("error_pct") is not None)})
    return out


UNTIERED_TARGET_PCT = 30.0  # the tiered copy's own target (bench/analysis/model/tiered_copy.py)
UNTIERED_MIN_INTERVALS = 2.0  # a partition's steady window must hold this many upload intervals
UNTIERED_MIN_ROLLS = 2.0  # ... and this many segment rolls: a mean over time needs whole cycles


def untiered_steady(row: dict[str, Any]) -> bool:
    """Whether a partition's steady window is long enough for a mean over its upload and roll cycles."""
    need = max(UNTIERED_MIN_INTERVALS * row["upload_interval_s"],
               UNTIERED_MIN_ROLLS * row["segment_bytes"] / row["ingest_bytes_per_s"])
    return row["steady_seconds"] >= need


def untiered_relations(rows: list[dict[str, Any]], models: dict[str, mdl.MoveModel]
                       ) -> tuple[dict[str, mdl.MoveModel], list[dict[str, Any]]]:
    """The untiered tail's relation per tiered system (fitted on every long-enough partition of its
    model's code version, attached to the model as ``untiered``) and its held-out check: the
    highest backlog (r x I / S) predicted by the relation fitted on the lower ones only, the median
    of its partitions' mean tails against the prediction, within :data:`UNTIERED_TARGET_PCT`."""
    out_models, checks = dict(models), []
    for system in sorted({r["system"] for r in rows}):
        m = models.get(system)
        if m is None or m.family != mdl.TIERED_COPY.name:
            continue
        mine = [r for r in rows if r["system"] == system and untiered_steady(r)]
        same = [r for r in mine if r["version"] == m.version or (m.version or "").startswith("pooled")]
        levels = sorted({round(r["backlog_segments"], 6) for r in same})
        base = {"system": system, "axis": "untiered", "label": "untiered tail (KIP-1023's copy) by backlog r x I / S",
                "family": "untiered tail", "target_pct": UNTIERED_TARGET_PCT, "measured_s": None, "predicted_s": None,
                "max_abs_error_pct": None, "error_pct": None, "train_values": levels[:-1],
                "train_runs": [], "test_runs": [], "n_train": 0, "n_test": 0,
                "fit": {"version": m.version}}
        if len(levels) < 3:
            why = (f"{len(same)} partition(s) sampled long enough at {len(levels)} backlog(s) of the model's code "
                   f"version ({len(mine) - len(same)} of another); need 3 backlogs (two to fit, the highest held "
                   "out): run `python -m bench run tiered-tail`")
            checks.append({**base, "status": "insufficient", "reason": why})
            continue
        held = levels[-1]
        train = [r for r in same if round(r["backlog_segments"], 6) < held]
        test = [r for r in same if round(r["backlog_segments"], 6) == held]
        rel = mdl.fit_untiered(train, held_out=held)
        preds = [mdl.untiered_tail(rel, r["segment_bytes"], r["ingest_bytes_per_s"], r["upload_interval_s"])
                 for r in test]
        meas, pred = statistics.median(r["mean_bytes"] for r in test), statistics.median(preds)
        err = (pred - meas) / meas * 100.0
        ok = abs(err) <= UNTIERED_TARGET_PCT
        checks.append({**base, "held_out": {"untiered": held}, "label": f"untiered tail at backlog {held:.3g} segments "
                       f"(fitted on {', '.join(f'{x:.3g}' for x in levels[:-1])})",
                       "status": "ok" if ok else "failed",
                       "reason": None if ok else f"|error| {abs(err):.1f} % > {UNTIERED_TARGET_PCT:g} %",
                       "error_pct": err, "max_abs_error_pct": max(abs(p - r["mean_bytes"]) / r["mean_bytes"] * 100.0
                                                                  for p, r in zip(preds, test)),
                       "measured_bytes": meas, "predicted_bytes": pred, "test_domain": {"untiered": [held, held]},
                       "train_runs": sorted({r["run_key"] for r in train}), "test_runs": sorted({r["run_key"] for r in test}),
                       "n_train": len(train), "n_test": len(test)})
        out_models[system] = replace(m, untiered=mdl.fit_untiered(same))
    return out_models, checks


def ack_lags(moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]) -> dict[str, float]:
    """Per system: the median leader change -> first ack over every single-partition move the
    models may fit on (the client's lag: its metadata refresh and, for a target it has no
    connection to, the connect; the same for any partition size)."""
    out = {}
    for system in models:
        xs = [x["first_ack_ts"] - x["leader_change_ts"] for x in moves if x["system"] == system
              and model_move(x) and x["first_ack_ts"] is not None and x["leader_change_ts"] is not None]
        if xs:
            out[system] = max(0.0, statistics.median(xs))
    return out


def handover_seconds(moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]) -> dict[str, float]:
    """Per system: the median unavailability of a moved partition over the moves its model rests on."""
    out = {}
    for system, m in models.items():
        keys = set(m.runs)
        xs = [x["unavailable_seconds"] for x in moves if x["run_key"] in keys and x["unavailable_seconds"] is not None]
        if xs:
            out[system] = statistics.median(xs)
    return out


def validation_rows(validation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for v in validation:
        held = v.get("held_out") or {}
        rows.append({**{k: v.get(k) for k in ("system", "axis", "label", "family", "status", "reason", "error_pct",
                                             "max_abs_error_pct", "target_pct", "measured_s", "predicted_s",
                                             "n_train", "n_test", "measured_bytes", "predicted_bytes")},
                     "held_out_value": next(iter(held.values()), None),
                     "train_values": ",".join(f"{x:g}" for x in v.get("train_values") or []),
                     "train_runs": ",".join(v.get("train_runs") or []), "test_runs": ",".join(v.get("test_runs") or [])})
    return rows


__all__ = ["FIT_ACTIONS", "ack_lags", "fit_kind", "fit_models", "handover_seconds", "host_left_out", "host_note",
           "model_move", "move_cap", "move_points", "newest_version", "projection_model", "rebalance_checks",
           "run_version", "untiered_relations", "untiered_steady", "validation_rows"]
