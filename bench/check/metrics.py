"""Per-move metrics declared once: each :class:`MoveMetric` is computed from a run's history by
its ``compute`` and from there it reaches every place a move's figure is shown, with no other edit:

* ``summary.json`` ``moves[].<name>`` (bench/check/summary.py; an older summary without it gets it
  from its history in :func:`bench.check.summary.upgrade_summary`);
* a column of the aggregate's ``moves`` table and its median / min / max per configuration in the
  ``configs`` table (bench/analysis/aggregate/);
* the report's "More move figures" table, unless ``report_column`` is False because a table of its
  own shows it (bench/report/).

``compute`` reads the history's events (actions, leader changes, phases, counters: the aggregate
gives it a view of the events only); a figure over every send belongs in the Spark job. The
metrics the move models and the Spark job recompute from raw rows (``move_seconds``,
``unavailable_seconds``, bytes moved) are defined in bench/check/moves.py and windows.py; a figure
that needs only the history of one run belongs here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from bench.check.host import SATURATED_BUSY_PCT, move_host
from bench.check.moves import copy_start
from bench.check.view import HistoryView


@dataclass(frozen=True)
class MoveRef:
    """One partition of one move action, as the checkers found it."""

    action_id: Any
    topic: str
    partition: int
    sources: list[int] | None  # the replicas before the move
    targets: list[int] | None  # the replicas it asked for
    request_ts: float | None
    leader_change_ts: float | None  # the new owner's first leadership a client saw
    move_seconds: float | None

    @property
    def added(self) -> set[int] | None:
        """The brokers the move adds a replica on (None: unknown)."""
        added = set(self.targets or ()) - set(self.sources or ())
        return added or None


@dataclass(frozen=True)
class MoveMetric:
    name: str  # summary.json moves[].<name>, the moves table's column
    label: str  # the report's column header
    doc: str  # what it is, with its unit
    compute: Callable[[HistoryView, MoveRef], float | int | None]
    fmt: Literal["number", "bytes"] = "number"
    report_column: bool = True  # False: a table of its own shows it


def _copy_bytes_at_request(v: HistoryView, m: MoveRef) -> int | None:
    start = copy_start(v, m.action_id, (m.topic, m.partition), m.added)
    return start["bytes_to_copy"] if start else None


MOVE_METRICS: tuple[MoveMetric, ...] = (
    MoveMetric("copy_bytes_at_request", "leader's bytes to copy (tiered start)",
               "the bytes the leader told the new replica to copy at the request (tiered storage: the local "
               "tail; null: it copied from the log's start, the whole partition)",
               _copy_bytes_at_request, fmt="bytes", report_column=False),  # the bytes-moved table shows it
)


def _host(field: str) -> Callable[[HistoryView, MoveRef], Any]:
    """A figure of the host over the move's window (bench/check/host.py: request to the first ack
    on the new owner, else to the action's end)."""
    return lambda v, m: move_host(v, m.action_id, m.request_ts, m.move_seconds)[field]


# The host while the move ran (bench/check/host.py); the report's host table shows them, and the
# move models leave the saturated moves out (bench/analysis/aggregate/fits.py model_move).
MOVE_METRICS += (
    MoveMetric("host_busy_mean_pct", "host CPU busy % (mean)",
               "the host's CPU busy share over the move's window, all cores and every process (%; the mean of "
               "the once-a-second host samples, each weighted by its seconds inside; null: no sample)",
               _host("busy_mean_pct"), report_column=False),
    MoveMetric("host_busy_peak_pct", "host CPU busy % (peak)",
               "the busiest once-a-second host sample overlapping the move's window (%)",
               _host("busy_peak_pct"), report_column=False),
    MoveMetric("host_saturated", "host saturated",
               f"true when host_busy_mean_pct > {SATURATED_BUSY_PCT:g} % (the move measured the host, not the "
               "system), false at or below, null (unknown) with fewer than 2 host samples in the window",
               _host("saturated"), report_column=False),
)
MOVE_METRIC_NAMES = tuple(m.name for m in MOVE_METRICS)

__all__ = ["MOVE_METRICS", "MOVE_METRIC_NAMES", "MoveMetric", "MoveRef"]
