"""Checkers: pure functions ``check_x(history, scenario_or_None) -> dict`` over a run history.

Jepsen style: each result has ``valid`` (True, False or "unknown") plus details, and can be
re-computed from a stored history without re-running anything (``analyze``). Every checker also
accepts a :class:`HistoryView` in place of the table; :func:`check_all` builds one view and shares
it, so the columns are decoded once.

Everything that scales with the number of messages is vectorised (pyarrow.compute / numpy). Only
``event`` rows (actions, leader changes, phases, counters: a few thousand at most) are handled in
Python.

Conventions the runner must follow (see bench/history/store.py for the schema):

* ``msg_id`` increases with send order per producer and is unique within a run. Reads with
  ``msg_id < 0`` are not harness messages (e.g. prefill records) and are ignored.
* Send rows carry the partition the message was acked on (from the delivery report); if it is -1
  the partition is taken from a read of the same message.
* ``action_start`` / ``action_end`` events carry ``action_id`` (index in ``scenario.actions``),
  ``action`` (its kind) and, for moves, ``topic``/``partition``/``to`` or
  ``partitions: [{topic, partition, to}]``. ``leader_change`` carries
  ``{topic, partition, leader, action_id}``, ``move_complete`` ``{action_id, topic, partition,
  new_leader, ts}``, ``move_phase`` ``{phase, seconds, bytes, action_id}`` and ``counter``
  ``{name, value, broker[, action_id]}`` where ``value`` is an increment (summed).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from bench.check.consumers import check_catch_up, check_consumer_gaps, check_delivery, check_end_to_end
from bench.check.moves import check_bytes_moved, check_latency, check_move_seconds, check_unavailable_seconds
from bench.check.safety import (
    check_corrupted,
    check_duplicates,
    check_lost_prefill,
    check_lost_writes,
    check_reordering,
    check_unexpected,
    check_unseen,
)
from bench.check.view import HistoryView, merge_valid, as_view


CHECKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "lost_writes": check_lost_writes,
    "duplicates": check_duplicates,
    "corrupted": check_corrupted,
    "reordering": check_reordering,
    "unseen": check_unseen,
    "unexpected": check_unexpected,
    "lost_prefill": check_lost_prefill,
    "move_seconds": check_move_seconds,
    "bytes_moved": check_bytes_moved,
    "unavailable_seconds": check_unavailable_seconds,
    "latency": check_latency,
    # The workload's consumer groups (bench/check/consumers.py; valid True without consumers)
    "delivery": check_delivery,
    "end_to_end": check_end_to_end,
    "consumer_gaps": check_consumer_gaps,
    "catch_up": check_catch_up,
}


def check_all(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Run every checker on one shared view. ``valid`` is False if any checker is False, else
    "unknown" if any is unknown, else True; ``failed`` / ``unknown`` name them. The scenario's
    limits (``checks.max_move_seconds``, ``checks.max_unavailable_seconds``) are applied by the
    checkers they concern."""
    v = as_view(history, scenario)
    results = {name: fn(v, scenario) for name, fn in CHECKERS.items()}
    return {
        "valid": merge_valid([r["valid"] for r in results.values()]),
        "failed": [n for n, r in results.items() if r["valid"] is False],
        "unknown": [n for n, r in results.items() if r["valid"] == "unknown"],
        "malformed_events": v.bad_events,
        **results,
    }




__all__ = [
    "CHECKERS", "HistoryView", "check_all", "check_bytes_moved", "check_catch_up", "check_consumer_gaps", "check_corrupted",
    "check_delivery", "check_duplicates", "check_end_to_end", "check_latency", "check_lost_prefill",
    "check_lost_writes", "check_move_seconds", "check_reordering", "check_unavailable_seconds",
    "check_unexpected", "check_unseen",
]
