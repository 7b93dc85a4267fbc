"""The **tiered_copy** family (tiered storage): the new replica rebuilds its start from object
storage, then copies from the leader only what is not tiered. The copy physics (copy.py) with
``B`` = the bytes the leader told the new replica to copy at the request
(``copy_bytes_at_request``: from the last tiered offset, KIP-1023, or the leader's local log
start, KIP-405, to its log end; the whole partition when the leader never answered a tiered start
because all of the log was local), so ``t = c + L / (e*T - r)``; the rebuild from object storage
is part of ``c``. A tiered copy, like a handover, lasts seconds with a fixed part (the rebuild,
the election) of the same order as its bytes' part, so its held-out target is the shared
system's, not a long copy's. Its bytes barely grow with the partition, so its size check is
"insufficient" unless the tail itself varies: the throttle (or link) check identifies the rate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from bench.analysis.model.base import FitRefused, MoveModel, fit_linear, register
from bench.analysis.model.copy import THROTTLE_POLICIES, CopyFamily
from bench.units import format_bytes

# A tiered partition at TB scale copies min(partition, what is not in object storage). Assumed,
# with Kafka's defaults where it has one: 1 GiB segments (segment.bytes); closed segments
# uploaded every 30 s (remote.log.manager.task.interval.ms); KIP-1023 (a new replica starts after
# the last tiered offset) copies the active segment and the closed ones awaiting upload, at most
# a segment + ingest x 30 s; KIP-405 (from the leader's local log start) copies the local log, at
# most local retention + a segment, with local.retention.ms = 1 h (Kafka's default -2 keeps
# everything locally; an operator who tiers sets hours).
TIERED_SEGMENT_BYTES = float(1 << 30)
TIERED_UPLOAD_INTERVAL_S = 30.0
TIERED_LOCAL_RETENTION_S = 3600.0
TIERED_STARTS = ((True, "KIP-1023 (after the last tiered offset)"),
                 (False, "KIP-405 (the leader's local log, 1 h local retention)"))



# The measured relation (KIP-1023): a partition's untiered tail, what a new replica starting after
# the last tiered offset copies, sampled through the run (bench/run/observe.py sample_untiered). It
# is what was written since the remote log manager's last task plus the active segment's fill at
# that task, so its mean over time is S x (a + b x rho) with rho = r x I / S, the ingest of one
# upload interval in segments (a ~ 1/2, b ~ 1/2 if uploads took no time). Fitted in segments, the
# relation is the same at any scale that keeps rho: the article's 100 MB/s with 1 GiB segments and
# 30 s tasks is rho 2.8, as a 1 MB/s partition with 10 MiB segments (the 100x scale model).
UNTIERED_MIN_LEVELS = 2  # distinct backlogs a relation is fitted on (a line)


def fit_untiered(rows: Sequence[dict[str, Any]], held_out: float | None = None) -> dict[str, Any]:
    """The untiered tail's relation from :func:`bench.analysis.aggregate.rows.untiered_rows` rows
    (one code version): ``{a, b, n, backlog: [min, max], runs, version}``, each partition's mean
    tail in segments against its backlog. ``held_out``: the backlog the fit is checked at; a row
    at or beyond it, or rows of two code versions, is refused (:class:`FitRefused`). ValueError
    when fewer than two backlogs were measured."""
    versions = {r.get("version") for r in rows}
    if len(versions) > 1:
        raise FitRefused(f"untiered tail: rows of {len(versions)} code versions ({', '.join(sorted(map(str, versions)))}); "
                         "one code version per fit")
    if held_out is not None and any(r["backlog_segments"] >= held_out for r in rows):
        raise FitRefused(f"untiered tail: a training row at or beyond the held-out backlog {held_out:.3g}")
    levels = sorted({round(r["backlog_segments"], 6) for r in rows})
    if len(levels) < UNTIERED_MIN_LEVELS:
        raise ValueError(f"untiered tail: {len(levels)} backlog(s) measured; need {UNTIERED_MIN_LEVELS} to fit a line")
    f = fit_linear([r["backlog_segments"] for r in rows], [r["mean_bytes"] / r["segment_bytes"] for r in rows])
    return {"a": f.intercept, "b": f.slope, "a_se": f.intercept_se, "b_se": f.slope_se, "n": len(rows),
            "backlog": [levels[0], levels[-1]], "runs": sorted({r["run_key"] for r in rows}),
            "version": next(iter(versions)), "max_over_mean": max(r["max_bytes"] / r["mean_bytes"] for r in rows
                                                                  if r["mean_bytes"] > 0)}


def untiered_tail(rel: dict[str, Any], segment_bytes: float, ingest_bytes_per_s: float, interval_s: float) -> float:
    """The mean untiered tail the relation gives (bytes)."""
    rho = ingest_bytes_per_s * interval_s / segment_bytes
    return max(0.0, segment_bytes * (rel["a"] + rel["b"] * rho))


def tiered_copy_bytes(partition_bytes: float, ingest_bytes_per_s: float, last_tiered: bool = True,
                      relation: dict[str, Any] | None = None) -> float:
    """What a new replica of a tiered partition copies at TB scale, with Kafka's defaults: KIP-1023
    by the measured ``relation`` when there is one (its mean), else by the assumptions above."""
    if last_tiered and relation is not None:
        not_tiered = untiered_tail(relation, TIERED_SEGMENT_BYTES, ingest_bytes_per_s, TIERED_UPLOAD_INTERVAL_S)
    elif last_tiered:
        not_tiered = TIERED_SEGMENT_BYTES + ingest_bytes_per_s * TIERED_UPLOAD_INTERVAL_S
    else:
        not_tiered = ingest_bytes_per_s * TIERED_LOCAL_RETENTION_S + TIERED_SEGMENT_BYTES
    return float(min(partition_bytes, not_tiered))


class TieredCopyFamily(CopyFamily):
    name = "tiered_copy"
    target_pct = 30.0
    names_copy_start = True
    required_axes = (("size", "throttle", "link"), ("ingest",))
    more_runs = "run `python -m bench run sweep-tiered`"
    bytes_assumed = ("the bytes a new KIP-1023 replica copies of a partition larger than its local tail (a segment + "
                     "30 s of ingest) are an assumption, not a relation any run measured")
    letter = "L"
    what = ("L = the bytes the leader told the new replica to copy at the request (from the last tiered offset or "
            "its local log start to its log end; the partition's bytes where all of the log was local); the rebuild "
            "of the replica's start from object storage is part of c.")

    def curve(self, m: MoveModel, xs: list[float], moves: list[dict[str, Any]], cap: float
              ) -> tuple[list[float], str]:
        """At the moves' median ingest and the local tail they copied (at most the partition)."""
        copied = [x["copy_bytes_at_request"] for x in moves if x.get("copy_bytes_at_request") is not None]
        tail = statistics.median(copied) if copied else None
        ingest = statistics.median([float(x["ingest_bytes_per_s"] or 0.0) for x in moves])
        ys = [m.predict(min(x, tail) if tail is not None else x, cap, ingest) for x in xs]
        return ys, (f", copies <= {format_bytes(tail)}" if tail is not None else "")

    def policies(self) -> list[tuple[float, str, bool | None]]:
        """Each throttle policy with each place a new replica starts at."""
        return [(s, f"{lbl}, {start}", last) for s, lbl in THROTTLE_POLICIES for last, start in TIERED_STARTS]

    def copy_column(self, F: Any, m: MoveModel) -> Any:
        if m.untiered is not None:  # KIP-1023 by the measured relation: S x (a + b x r x I / S)
            rel = m.untiered
            kip1023 = F.greatest(F.lit(0.0), F.lit(TIERED_SEGMENT_BYTES * rel["a"]) + F.lit(rel["b"])
                                 * F.col("ingest_bytes_per_s") * F.lit(TIERED_UPLOAD_INTERVAL_S))
        else:
            kip1023 = F.lit(TIERED_SEGMENT_BYTES) + F.col("ingest_bytes_per_s") * F.lit(TIERED_UPLOAD_INTERVAL_S)
        keep = F.when(F.col("last_tiered"), kip1023).otherwise(
            F.col("ingest_bytes_per_s") * F.lit(TIERED_LOCAL_RETENTION_S) + F.lit(TIERED_SEGMENT_BYTES))
        return F.least(F.col("partition_bytes"), keep)

    def partition_case(self, m: MoveModel, cap: float, size: float, label: str, ingest: float
                       ) -> tuple[float, float | None, float | None, str, dict[str, float]]:
        """As a copy's, of what is not tiered; with a measured relation, its backlog is an axis."""
        copied = tiered_copy_bytes(size, ingest, relation=m.untiered)
        t, se = m.predict_with_se(copied, cap, ingest)
        moved = m.bytes_moved(copied, t, ingest) if math.isfinite(t) else None
        inputs = {"bytes": copied, "rate": cap, "ingest_share": ingest / cap}
        if m.untiered is not None:
            inputs["untiered"] = ingest * TIERED_UPLOAD_INTERVAL_S / TIERED_SEGMENT_BYTES
        return t, se, moved, self.basis(m, label, copied, ingest, cap), inputs

    def basis(self, m: MoveModel, label: str, copied: float, ingest: float, cap: float) -> str:
        seg, iv = format_bytes(TIERED_SEGMENT_BYTES), f"{TIERED_UPLOAD_INTERVAL_S:g} s"
        if m.untiered is not None:
            rel = m.untiered
            how = (f"L = min({label}, S x ({rel['a']:.3g} + {rel['b']:.3g} x r x I / S)) = {format_bytes(copied)} with S = "
                   f"{seg} segments and I = {iv} upload interval (KIP-1023's mean untiered tail, the relation measured "
                   f"at backlogs {rel['backlog'][0]:.3g}-{rel['backlog'][1]:.3g} segments; at the worst moment up to "
                   f"{rel['max_over_mean']:.2g}x the mean; the uploads' own duration, r x S / the store's "
                   "throughput, is inside the relation only at the measured scale")
            rho = ingest * TIERED_UPLOAD_INTERVAL_S / TIERED_SEGMENT_BYTES
            if rho < rel["backlog"][0]:
                how += (f"; backlog {rho:.2g} lies below the measured ones: its fitted intercept, the active "
                        "segment's mean fill, carries it")
            how += ")"
        else:
            how = (f"L = min({label}, {seg} segment + r x {iv} upload interval) = {format_bytes(copied)} (KIP-1023: the "
                   "new replica starts after the last tiered offset; assumed, not measured at this size)")
        return (f"{m.formula()}; {how}, r = {ingest / 1e6:g} MB/s, T = what the leader's link leaves after its steady "
                f"traffic, no throttle ({cap / 1e6:,.0f} MB/s)")

    def steady_terms(self, ingest: float, rf: int, consumer_groups: int) -> list[tuple[str, float]]:
        """A copy leader's traffic, and it uploads every byte to object storage."""
        return super().steady_terms(ingest, rf, consumer_groups) + [("uploads to object storage", ingest)]

    def sim_move(self, partition_bytes: float, ingest: float, cfg: dict[str, Any]) -> tuple[float, float]:
        """A new replica copies only what is not tiered (KIP-1023)."""
        return tiered_copy_bytes(partition_bytes, ingest, relation=cfg.get("untiered")), 0.0


TIERED_COPY = register(TieredCopyFamily())
