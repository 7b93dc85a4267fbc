"""Cluster event journals -> history events (the one place where backend vocabularies meet the
checkers' vocabulary).

Each process of a cluster writes ``<cluster>/<proc>/events.jsonl`` (``systems/core/events.py``).
:func:`translate` maps one journal record to history event rows:

=============================================  ===============================================
journal record (emitted by)                    history event(s)
=============================================  ===============================================
``leader_change`` (core controller)            ``leader_change`` {leader, leader_epoch}
``reassignment_completed`` (replication ctl)   ``move_complete`` {new_leader = leader (else the
                                               single replica), replicas}
``shared_move_elected`` (shared controller)    ``move_complete`` {new_leader = to} and
                                               ``move_phase`` ``request_to_elect``
``bytes_moved`` kind inter_broker (brokers)    ``counter`` ``bytes_moved_inter_broker`` (the
                                               receiving side, direction ``reassign_in`` or none);
                                               direction ``reassign_out`` becomes
                                               ``bytes_sent_inter_broker`` so a copy is not
                                               counted twice
``bytes_moved`` kind objstore                  ``counter`` ``bytes_moved_objstore``
``shared_partition_closed`` (shared broker)    ``move_phase`` per ``*_ms`` field (``close.<name>``)
                                               and ``counter bytes_moved_objstore`` =
                                               force_upload_bytes
``shared_partition_opened`` (shared broker)    ``move_phase`` per ``*_ms`` field (``open.<name>``)
                                               and ``counter bytes_moved_objstore`` = replay_bytes
``shared_upload`` (shared broker)              ``counter objstore_upload_bytes`` (background WAL
                                               upload, not a move's cost)
``move_phase``                                 ``move_phase`` (as is)
anything else                                  kept as is (same event name, fields in detail)
=============================================  ===============================================

Every row keeps the journal's fields in ``detail`` plus ``journal_event`` (the original name) and
``source`` (``controller`` or the broker id). A row about a partition gets the ``action_id`` of
the move action that was moving that partition at that time (see :class:`MoveWindows`), so the
checkers attribute it exactly; counters of a broker with no partition are left to the checkers'
time-window attribution.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.checkers import COUNTER_INTER_BROKER, COUNTER_OBJSTORE
from bench.history import (
    EVENT_COUNTER,
    EVENT_LEADER_CHANGE,
    EVENT_MOVE_COMPLETE,
    EVENT_MOVE_PHASE,
    event_row,
)


class MoveWindows:
    """Which move action moved which partition when: ``add(action_id, tps, start)``,
    ``end(action_id, ts)``; ``action_for(tp, ts)`` -> the latest-started action whose window
    [start, end + grace] covers ts (end open while running)."""

    GRACE_S = 5.0

    def __init__(self) -> None:
        self._w: list[list[Any]] = []  # [action_id, set(tps), start, end]

    def add(self, action_id: int, tps: Iterable[tuple[str, int]], start: float) -> None:
        self._w.append([action_id, set(tps), start, None])

    def end(self, action_id: int, ts: float) -> None:
        for w in self._w:
            if w[0] == action_id:
                w[3] = ts if w[3] is None else max(w[3], ts)

    def action_for(self, tp: tuple[str, int] | None, ts: float) -> int | None:
        if tp is None:
            return None
        best = None
        for aid, tps, start, end in self._w:
            if tp in tps and start - 1.0 <= ts and (end is None or ts <= end + self.GRACE_S):
                if best is None or start >= best[1]:
                    best = (aid, start)
        return best[0] if best else None

    def to_list(self) -> list[dict]:
        return [{"action_id": a, "partitions": sorted([list(tp) for tp in t]), "start": s, "end": e}
                for a, t, s, e in self._w]


def _tp(rec: dict) -> tuple[str, int] | None:
    t, p = rec.get("topic"), rec.get("partition")
    if isinstance(t, str) and isinstance(p, int) and p >= 0:
        return (t, p)
    return None


def translate(rec: dict, windows: MoveWindows | None = None) -> list[dict]:
    """One journal record -> history event rows (see the module docstring). Never raises on odd
    records: a record without ``ts`` or ``event`` is kept as ``journal_malformed``."""
    ts, name = rec.get("ts"), rec.get("event")
    base = {k: v for k, v in rec.items() if k not in ("ts", "event")}
    if not isinstance(ts, (int, float)) or not isinstance(name, str):
        return [event_row("journal_malformed", float(ts) if isinstance(ts, (int, float)) else 0.0,
                          {"record": rec})]
    tp = _tp(rec)
    aid = windows.action_for(tp, ts) if windows is not None else None
    topic, part = (tp if tp else (rec.get("topic") if isinstance(rec.get("topic"), str) else None, -1))

    def row(event: str, **extra: Any) -> dict:
        d = {**base, "journal_event": name, **extra}
        if aid is not None and "action_id" not in d:
            d["action_id"] = aid
        return event_row(event, float(ts), d, topic=topic, partition=part)

    def counter(cname: str, value: Any) -> dict:
        return row(EVENT_COUNTER, name=cname, value=value, broker=rec.get("source"))

    if name == "leader_change":
        return [row(EVENT_LEADER_CHANGE)]
    if name == "reassignment_completed":
        replicas = rec.get("replicas") or []
        leader = rec.get("leader")
        if not isinstance(leader, int) or leader < 0:
            leader = replicas[0] if len(replicas) == 1 else None
        return [row(EVENT_MOVE_COMPLETE, new_leader=leader, ts=float(ts))]
    if name == "shared_move_elected":
        out = [row(EVENT_MOVE_COMPLETE, new_leader=rec.get("to"), ts=float(ts))]
        if isinstance(rec.get("since_request_s"), (int, float)):
            out.append(row(EVENT_MOVE_PHASE, phase="request_to_elect", seconds=float(rec["since_request_s"])))
        return out
    if name == "bytes_moved":
        value = rec.get("bytes")
        if rec.get("kind") == "objstore":
            return [counter(COUNTER_OBJSTORE, value)]
        if rec.get("direction") == "reassign_out":
            return [counter("bytes_sent_inter_broker", value)]
        return [counter(COUNTER_INTER_BROKER, value)]
    if name in ("shared_partition_closed", "shared_partition_opened"):
        prefix = "close" if name == "shared_partition_closed" else "open"
        out = [row(name)]
        for k, v in rec.items():
            if k.endswith("_ms") and isinstance(v, (int, float)) and k != "close_total_ms":
                phase = f"{prefix}.{k[:-3]}"
                extra: dict[str, Any] = {"phase": phase, "seconds": v / 1000.0}
                if k == "force_upload_ms":
                    extra["bytes"] = rec.get("force_upload_bytes") or 0
                if k == "replay_ms":
                    extra["bytes"] = rec.get("replay_bytes") or 0
                out.append(row(EVENT_MOVE_PHASE, **extra))
        moved = rec.get("force_upload_bytes") if prefix == "close" else rec.get("replay_bytes")
        if isinstance(moved, (int, float)) and moved > 0:
            out.append(counter(COUNTER_OBJSTORE, moved))
        return out
    if name == "shared_upload":
        return [counter("objstore_upload_bytes", rec.get("bytes"))]
    if name == "move_phase":
        return [row(EVENT_MOVE_PHASE)]
    return [row(name)]


def translate_all(records: Iterable[dict], windows: MoveWindows | None = None) -> list[dict]:
    out: list[dict] = []
    for rec in records:
        out.extend(translate(rec, windows))
    return out
