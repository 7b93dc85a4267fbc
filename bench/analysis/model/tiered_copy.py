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

import statistics
from typing import Any

from bench.analysis.model.base import MoveModel, register
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


def tiered_copy_bytes(partition_bytes: float, ingest_bytes_per_s: float, last_tiered: bool = True) -> float:
    """What a new replica of a tiered partition copies at TB scale (the assumptions above)."""
    if last_tiered:
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

    def copy_column(self, F: Any) -> Any:
        keep = F.when(F.col("last_tiered"), F.lit(TIERED_SEGMENT_BYTES)
                      + F.col("ingest_bytes_per_s") * F.lit(TIERED_UPLOAD_INTERVAL_S)).otherwise(
            F.col("ingest_bytes_per_s") * F.lit(TIERED_LOCAL_RETENTION_S) + F.lit(TIERED_SEGMENT_BYTES))
        return F.least(F.col("partition_bytes"), keep)

    def copied(self, size: float, ingest: float) -> float:
        return tiered_copy_bytes(size, ingest)

    def basis(self, m: MoveModel, label: str, copied: float, ingest: float, cap: float) -> str:
        return (f"{m.formula()}; L = min({label}, {format_bytes(TIERED_SEGMENT_BYTES)} segment + r x "
                f"{TIERED_UPLOAD_INTERVAL_S:g} s upload interval) = {format_bytes(copied)} (KIP-1023: the new replica "
                f"starts after the last tiered offset; assumed, not measured at this size), r = {ingest / 1e6:g} MB/s, "
                f"T = what the leader's link leaves after its steady traffic, no throttle ({cap / 1e6:,.0f} MB/s)")

    def steady_terms(self, ingest: float, rf: int, consumer_groups: int) -> list[tuple[str, float]]:
        """A copy leader's traffic, and it uploads every byte to object storage."""
        return super().steady_terms(ingest, rf, consumer_groups) + [("uploads to object storage", ingest)]

    def sim_move(self, partition_bytes: float, ingest: float, cfg: dict[str, Any]) -> tuple[float, float]:
        """A new replica copies only what is not tiered (KIP-1023)."""
        return tiered_copy_bytes(partition_bytes, ingest), 0.0


TIERED_COPY = register(TieredCopyFamily())
