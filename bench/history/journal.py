"""Cluster event journals -> history events (the one place where backend vocabularies meet the
checkers' vocabulary).

Each process of a cluster writes ``<cluster>/<proc>/events.jsonl`` (``systems/core/events.py``).
:func:`translate` maps one journal record to history event rows. The core's events mean the same
for every system; what a system's own move events mean comes from its profile's
``JournalMeaning`` (``systems/<name>/profile.py``):

========================================  ===========================================================
journal record                            history event(s)
========================================  ===========================================================
``leader_change`` (core controller)       ``leader_change`` {leader, leader_epoch}
``meaning.move_complete`` events          ``move_complete`` {new_leader = the named field (else the
                                          single replica)}; plus a ``move_phase`` if the event is
                                          also in ``meaning.request_phase``
``bytes_moved`` kind inter_broker         ``counter bytes_moved_inter_broker`` (the receiving side);
                                          direction ``reassign_out`` becomes
                                          ``bytes_sent_inter_broker`` so a copy is not counted twice
``bytes_moved`` kind objstore             ``counter bytes_moved_objstore``
``meaning.phase_events``                  ``move_phase`` ``<prefix>.<name>`` per ``<name>_ms`` field
                                          (with ``objects`` from ``meaning.phase_objects``), and
                                          ``counter bytes_moved_objstore`` for the bytes named by
                                          ``meaning.phase_bytes``
``meaning.background_counters``           ``counter <name>`` (not a move's cost)
``move_phase``                            ``move_phase`` (as is)
``meaning.refusal_start`` events          ``writes_refused`` (its fields as they are)
``meaning.copy_start`` events             ``copy_start`` {bytes_to_copy = the named field}: a leader
                                          telling a new replica where its copy starts
any record about an internal topic        ``internal_topic`` (``__consumer_offsets``: the group
                                          coordinator's own log, not the scenario's data)
anything else                             kept as is (same event name, fields in detail)
any record with ``objstore_requests``     also ``counter objstore_<kind>_requests`` per kind it
                                          counted (a move's close or open: its S3 requests)
========================================  ===========================================================

Every row keeps the journal's fields in ``detail`` plus ``journal_event`` (the original name) and
``source`` (``controller`` or the broker id). A row about a partition gets the ``action_id`` of
the move action that was moving that partition at that time (see :class:`MoveWindows`), so the
checkers attribute it exactly; counters of a broker with no partition are left to the checkers'
time-window attribution.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.history.names import (
    COUNTER_INTER_BROKER,
    COUNTER_OBJSTORE,
    COUNTER_OBJSTORE_REQUESTS,
    COUNTER_SENT_INTER_BROKER,
    EVENT_COPY_START,
    EVENT_COUNTER,
    EVENT_INTERNAL_TOPIC,
    EVENT_JOURNAL_MALFORMED,
    EVENT_LEADER_CHANGE,
    EVENT_MOVE_COMPLETE,
    EVENT_MOVE_PHASE,
    EVENT_WRITES_REFUSED,
    FIELD_BYTES_TO_COPY,
    INTERNAL_TOPIC_PREFIX,
)
from bench.history.store import event_row
from systems.core.profile import JournalMeaning


class MoveWindows:
    """Which move action moved which partition when: ``add(action_id, tps, start)``,
    ``end(action_id, ts)``; ``action_for(tp, ts)`` -> the latest-started action whose window
    [start, end + grace] covers ts (end open while running), else one starting up to 1 s after ts."""

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
                # a window that has begun by ts beats one whose start is up to 1 s later (clock
                # skew): a partition moved again right after a move keeps the earlier one's events
                key = (start <= ts, start)
                if best is None or key >= best[1]:
                    best = (aid, key)
        return best[0] if best else None

    def to_list(self) -> list[dict]:
        return [{"action_id": a, "partitions": sorted([list(tp) for tp in t]), "start": s, "end": e}
                for a, t, s, e in self._w]


def _tp(rec: dict) -> tuple[str, int] | None:
    t, p = rec.get("topic"), rec.get("partition")
    if isinstance(t, str) and isinstance(p, int) and p >= 0:
        return (t, p)
    return None


def translate(rec: dict, meaning: JournalMeaning, windows: MoveWindows | None = None) -> list[dict]:
    """One journal record -> history event rows (see the module docstring); ``meaning`` is the
    system profile's reading of its own journal events. Never raises on odd records: a record
    without ``ts`` or ``event`` is kept as ``journal_malformed``. A record's `objstore_requests`
    ({kind: count}, any system's) adds one counter per kind it made requests of."""
    rows = _translate(rec, meaning, windows)
    reqs = rec.get("objstore_requests")
    if rows and isinstance(reqs, dict) and rows[0]["event"] != EVENT_INTERNAL_TOPIC:
        first = rows[0]
        for kind, n in sorted(reqs.items()):
            if isinstance(n, int) and n > 0:
                d = {k: v for k, v in first["detail"].items() if k != "objstore_requests"}
                rows.append(event_row(EVENT_COUNTER, first["ts"],
                                      {**d, "name": COUNTER_OBJSTORE_REQUESTS.format(kind=kind), "value": n,
                                       "broker": rec.get("source")},
                                      topic=first.get("topic"), partition=first.get("partition")))
    return rows


def _translate(rec: dict, meaning: JournalMeaning, windows: MoveWindows | None = None) -> list[dict]:
    ts, name = rec.get("ts"), rec.get("event")
    base = {k: v for k, v in rec.items() if k not in ("ts", "event")}
    if not isinstance(ts, (int, float)) or not isinstance(name, str):
        return [event_row(EVENT_JOURNAL_MALFORMED, float(ts) if isinstance(ts, (int, float)) else 0.0,
                          {"record": rec})]
    tp = _tp(rec)
    if tp is not None and tp[0].startswith(INTERNAL_TOPIC_PREFIX):
        return [event_row(EVENT_INTERNAL_TOPIC, float(ts), {**base, "journal_event": name}, topic=tp[0],
                          partition=tp[1])]
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
    if name in meaning.move_complete:
        leader = rec.get(meaning.move_complete[name])
        if not isinstance(leader, int) or leader < 0:
            replicas = rec.get("replicas") or []
            leader = replicas[0] if len(replicas) == 1 else None
        out = [row(EVENT_MOVE_COMPLETE, new_leader=leader, ts=float(ts))]
        if name in meaning.request_phase:
            field, phase = meaning.request_phase[name]
            if isinstance(rec.get(field), (int, float)):
                out.append(row(EVENT_MOVE_PHASE, phase=phase, seconds=float(rec[field])))
        return out
    if name == "bytes_moved":
        value = rec.get("bytes")
        if rec.get("kind") == "objstore":
            return [counter(COUNTER_OBJSTORE, value)]
        if rec.get("direction") == "reassign_out":
            return [counter(COUNTER_SENT_INTER_BROKER, value)]
        return [counter(COUNTER_INTER_BROKER, value)]
    if name in meaning.phase_events:
        prefix = meaning.phase_events[name]
        out = [row(name)]
        moved = 0
        for k, v in rec.items():
            if k.endswith("_ms") and isinstance(v, (int, float)) and k != "close_total_ms":
                extra: dict[str, Any] = {"phase": f"{prefix}.{k[:-3]}", "seconds": v / 1000.0}
                if k in meaning.phase_bytes:
                    extra["bytes"] = rec.get(meaning.phase_bytes[k]) or 0
                    moved += extra["bytes"] if isinstance(extra["bytes"], (int, float)) else 0
                if k in meaning.phase_objects and isinstance(rec.get(meaning.phase_objects[k]), int):
                    extra["objects"] = rec[meaning.phase_objects[k]]
                out.append(row(EVENT_MOVE_PHASE, **extra))
        if moved > 0:
            out.append(counter(COUNTER_OBJSTORE, moved))
        return out
    if name in meaning.background_counters:
        return [counter(meaning.background_counters[name], rec.get("bytes"))]
    if name == "move_phase":
        return [row(EVENT_MOVE_PHASE)]
    if name in meaning.refusal_start:
        return [row(EVENT_WRITES_REFUSED)]
    if name in meaning.copy_start:
        return [row(EVENT_COPY_START, **{FIELD_BYTES_TO_COPY: rec.get(meaning.copy_start[name])})]
    return [row(name)]


def translate_all(records: Iterable[dict], meaning: JournalMeaning,
                  windows: MoveWindows | None = None) -> list[dict]:
    out: list[dict] = []
    for rec in records:
        out.extend(translate(rec, meaning, windows))
    return out
