"""Checkers: pure functions ``check_x(history, scenario_or_None) -> dict`` over a run history.

Jepsen style: each result has ``valid`` (True, False or "unknown") plus details, and can be
re-computed from a stored history without re-running anything (``analyze``). Every checker also
accepts a :class:`HistoryView` in place of the table; :func:`check_all` builds one view and shares
it, so the columns are decoded once.

Everything that scales with the number of messages is vectorised (pyarrow.compute / numpy). Only
``event`` rows (actions, leader changes, phases, counters: a few thousand at most) are handled in
Python.

Conventions the runner must follow (see bench/history.py for the schema):

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

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.history import (
    EVENT_ACTION_END,
    EVENT_ACTION_START,
    EVENT_COUNTER,
    EVENT_LEADER_CHANGE,
    EVENT_MOVE_COMPLETE,
    EVENT_MOVE_PHASE,
    SCHEMA,
)
from bench.scenario import MOVE_ACTIONS

EXAMPLES = 20  # max example ids / records reported per anomaly
UNAVAILABLE_PRE_S = 1.0  # unavailable_seconds window starts this long before the action
UNAVAILABLE_POST_S = 5.0  # ... and ends this long after the move ends
COUNTER_INTER_BROKER = "bytes_moved_inter_broker"  # bytes copied broker -> broker for a move
COUNTER_OBJSTORE = "bytes_moved_objstore"  # bytes uploaded to / read from object storage for a move

_OK, _FAIL, _INFO, _OTHER = 0, 1, 2, 3
_NEG_INF = -math.inf


# --------------------------------------------------------------------------------------------
# Decoded view of a history


def _codes(col: pa.ChunkedArray, values: list[str]) -> np.ndarray:
    """Index of each string in ``values`` (-1 for null / not found), consistent across chunks."""
    if not values or len(col) == 0:
        return np.full(len(col), -1, dtype=np.int64)
    idx = pc.index_in(col, value_set=pa.array(values, pa.string()))
    return np.asarray(pc.fill_null(idx, -1).to_numpy(), dtype=np.int64)


def _num(col: pa.ChunkedArray, fill: Any, dtype: Any) -> np.ndarray:
    return np.asarray(pc.fill_null(col, fill).to_numpy(), dtype=dtype)


def _tp_key(topic_code: np.ndarray | int, partition: np.ndarray | int) -> Any:
    # One int64 per (topic, partition); invalid pairs map to -1.
    t = np.asarray(topic_code, dtype=np.int64)
    p = np.asarray(partition, dtype=np.int64)
    key = (t << 32) | (p & 0xFFFFFFFF)
    return np.where((t >= 0) & (p >= 0), key, -1)


def _uniq(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based: much faster than np.unique's hash path on ids)."""
    s = np.sort(a, kind="stable")
    if s.size:
        s = s[np.concatenate([[True], s[1:] != s[:-1]])]
    return s


def _runs(sorted_a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For an already sorted array: (distinct values, start index, count) of each run."""
    n = sorted_a.size
    if n == 0:
        return sorted_a, np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.flatnonzero(np.concatenate([[True], sorted_a[1:] != sorted_a[:-1]]))
    counts = np.diff(np.concatenate([starts, [n]]))
    return sorted_a[starts], starts, counts


def _member(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """Boolean mask: which elements of ``a`` occur in the sorted array ``sorted_b``."""
    if sorted_b.size == 0:
        return np.zeros(a.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_b, a), sorted_b.size - 1)
    return sorted_b[pos] == a


@dataclass
class _Event:
    event: str
    ts: float
    topic: str | None
    partition: int | None
    detail: dict[str, Any]

    @property
    def action_id(self) -> Any:
        return self.detail.get("action_id")


@dataclass
class _Action:
    action_id: Any
    kind: str | None = None
    start: float | None = None
    end_event: float | None = None  # latest action_end
    last_move_event: float | None = None  # latest move_complete / leader_change
    logged: set[tuple[str, int]] = field(default_factory=set)  # named by action_start
    seen: set[tuple[str, int]] = field(default_factory=set)  # in its other events
    planned: set[tuple[str, int]] = field(default_factory=set)  # from the scenario
    targets: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    @property
    def partitions(self) -> set[tuple[str, int]]:
        """Partitions the action acts on: as named by its action_start event, else as planned in
        the scenario, else those its leader_change / move_complete / move_phase events mention
        (drain, add-broker and kill actions, whose partitions are only known at run time)."""
        return self.logged or self.planned or self.seen

    @property
    def end(self) -> float | None:
        """When the action's effect ended: the latest of its action_end and its move_complete /
        leader_change events (a kill "ends" at once, but its leader change is seen later)."""
        ends = [t for t in (self.end_event, self.last_move_event) if t is not None]
        return max(ends) if ends else None


def _tp_of(ev: _Event, d: dict[str, Any] | None = None) -> tuple[str, int] | None:
    d = ev.detail if d is None else d
    topic = d.get("topic", ev.topic)
    part = d.get("partition", ev.partition)
    if topic is None or part is None or not isinstance(part, int) or part < 0:
        return None
    return (str(topic), int(part))


class HistoryView:
    """Columns of a history decoded once into numpy arrays (sends ``s_*``, reads ``r_*``)."""

    def __init__(self, table: pa.Table, scenario: Any = None) -> None:
        missing = set(SCHEMA.names) - set(table.column_names)
        if missing:
            raise ValueError(f"history lacks column(s) {sorted(missing)}")
        self.table = table
        self.scenario = scenario
        self.bad_events = 0  # malformed event rows (counted when events are first parsed)
        kind = table.column("kind")
        topic_set = pc.unique(table.column("topic")).drop_null().to_pylist()
        self.topics: list[str] = sorted(topic_set)
        self.topic_code = {t: i for i, t in enumerate(self.topics)}

        sends = table.filter(pc.fill_null(pc.equal(kind, "send"), False))
        reads = table.filter(pc.fill_null(pc.equal(kind, "read"), False))
        self._events_table = table.filter(pc.fill_null(pc.equal(kind, "event"), False))
        producers = set(pc.unique(sends.column("producer")).drop_null().to_pylist())
        producers |= set(pc.unique(reads.column("producer")).drop_null().to_pylist())
        self.producers: list[str] = sorted(producers)

        self.s_id = _num(sends.column("msg_id"), -1, np.int64)
        self.s_ts = _num(sends.column("ts"), math.nan, np.float64)
        self.s_ack = _num(sends.column("ack_ts"), math.nan, np.float64)
        self.s_out = _codes(sends.column("outcome"), ["ok", "fail", "info"])
        self.s_out[self.s_out < 0] = _OTHER
        self.s_topic = _codes(sends.column("topic"), self.topics)
        self.s_part = _num(sends.column("partition"), -1, np.int64)
        self.s_prod = _codes(sends.column("producer"), self.producers)

        r_id = _num(reads.column("msg_id"), -1, np.int64)
        keep = r_id >= 0  # negative ids are not harness messages (e.g. prefill)
        self.r_ignored = int((~keep).sum())
        self.r_id = r_id[keep]
        self.r_ts = _num(reads.column("ts"), math.nan, np.float64)[keep]
        self.r_topic = _codes(reads.column("topic"), self.topics)[keep]
        self.r_part = _num(reads.column("partition"), -1, np.int64)[keep]
        self.r_off = _num(reads.column("offset"), -1, np.int64)[keep]
        self.r_prod = _codes(reads.column("producer"), self.producers)[keep]

        self._fill_send_partitions_from_reads()

        # Load window: first to last send invocation (what producers were doing).
        all_ts = _num(table.column("ts"), math.nan, np.float64)
        if self.s_ts.size:
            self.load_start = float(np.nanmin(self.s_ts))
            self.load_end = float(np.nanmax(self.s_ts))
        elif all_ts.size and not np.all(np.isnan(all_ts)):
            self.load_start = self.load_end = float(np.nanmin(all_ts))
        else:
            self.load_start = self.load_end = 0.0

    def _fill_send_partitions_from_reads(self) -> None:
        need = (self.s_part < 0) | (self.s_topic < 0)
        if not need.any() or self.r_id.size == 0:
            return
        order = np.argsort(self.r_id, kind="stable")
        sorted_ids = self.r_id[order]
        idx = np.flatnonzero(need)
        pos = np.searchsorted(sorted_ids, self.s_id[idx])
        pos_c = np.minimum(pos, sorted_ids.size - 1)
        hit = (pos < sorted_ids.size) & (sorted_ids[pos_c] == self.s_id[idx])
        src = order[pos_c[hit]]
        self.s_part[idx[hit]] = self.r_part[src]
        self.s_topic[idx[hit]] = self.r_topic[src]

    # -- joins -------------------------------------------------------------------------------

    @cached_property
    def read_ids(self) -> np.ndarray:
        """Distinct msg_ids read, sorted."""
        return _uniq(self.r_id)

    @cached_property
    def read_send_index(self) -> np.ndarray:
        """For each read, the index of the send row with the same msg_id (-1 if none).
        If a msg_id has several send rows, an acked one is preferred."""
        if self.s_id.size == 0:
            return np.full(self.r_id.size, -1, dtype=np.int64)
        # Sort so that, per msg_id, an ok send comes first.
        order = np.lexsort((self.s_out, self.s_id))
        sorted_ids = self.s_id[order]
        pos = np.searchsorted(sorted_ids, self.r_id)
        pos_c = np.minimum(pos, sorted_ids.size - 1)
        hit = (pos < sorted_ids.size) & (sorted_ids[pos_c] == self.r_id)
        return np.where(hit, order[pos_c], -1)

    @cached_property
    def acked(self) -> dict[str, np.ndarray]:
        """Acked sends (outcome ok, ack_ts known) sorted by (topic-partition key, ack_ts)."""
        m = (self.s_out == _OK) & ~np.isnan(self.s_ack)
        key = _tp_key(self.s_topic[m], self.s_part[m])
        ack, ts = self.s_ack[m], self.s_ts[m]
        order = np.lexsort((ack, key))
        return {"key": key[order], "ack": ack[order], "ts": ts[order]}

    def acks_of(self, topic: str, partition: int) -> tuple[np.ndarray, np.ndarray]:
        """(ack_ts sorted ascending, send ts) of acked sends on one partition."""
        code = self.topic_code.get(topic, -1)
        a = self.acked
        if code < 0 or a["key"].size == 0:
            return np.empty(0), np.empty(0)
        k = int(_tp_key(code, partition))
        lo, hi = np.searchsorted(a["key"], k, "left"), np.searchsorted(a["key"], k, "right")
        return a["ack"][lo:hi], a["ts"][lo:hi]

    @cached_property
    def by_send_ts(self) -> dict[str, np.ndarray]:
        """All sends sorted by invocation ts, with latency (ms, NaN unless acked) and outcome."""
        order = np.argsort(self.s_ts, kind="stable")
        ok = (self.s_out == _OK) & ~np.isnan(self.s_ack)
        lat = np.where(ok, (self.s_ack - self.s_ts) * 1000.0, np.nan)
        return {
            "ts": self.s_ts[order],
            "lat_ms": lat[order],
            "key": _tp_key(self.s_topic, self.s_part)[order],
            "info_cum": np.concatenate([[0], np.cumsum(self.s_out[order] == _INFO)]),
            "fail_cum": np.concatenate([[0], np.cumsum(self.s_out[order] == _FAIL)]),
        }

    @cached_property
    def read_positions(self) -> dict[str, np.ndarray]:
        """Reads de-duplicated to distinct (msg_id, topic, partition, offset), sorted that way.
        Re-reading the same offset (consumer restart, rebalance) is not a duplicate."""
        order = np.lexsort((self.r_off, self.r_part, self.r_topic, self.r_id))
        cols = {"id": self.r_id[order], "topic": self.r_topic[order], "part": self.r_part[order],
                "off": self.r_off[order], "row": order}
        n = order.size
        if n == 0:
            return cols
        new = np.ones(n, dtype=bool)
        new[1:] = ((cols["id"][1:] != cols["id"][:-1]) | (cols["topic"][1:] != cols["topic"][:-1])
                   | (cols["part"][1:] != cols["part"][:-1]) | (cols["off"][1:] != cols["off"][:-1]))
        return {k: a[new] for k, a in cols.items()}

    # -- events ------------------------------------------------------------------------------

    @cached_property
    def events(self) -> list[_Event]:
        t = self._events_table
        out = []
        cols = [t.column(c).to_pylist() for c in ("event", "ts", "topic", "partition", "detail")]
        for ev, ts, topic, part, detail in zip(*cols):
            d: dict[str, Any] = {}
            if detail:
                try:
                    parsed = json.loads(detail)
                    d = parsed if isinstance(parsed, dict) else {"value": parsed}
                except ValueError:
                    self.bad_events += 1  # reported, never fatal: a checker must not crash
            if ts is None:
                self.bad_events += 1
                continue
            out.append(_Event(ev or "", float(ts), topic, part if part is not None and part >= 0 else None, d))
        out.sort(key=lambda e: e.ts)
        return out

    def events_named(self, name: str) -> list[_Event]:
        return [e for e in self.events if e.event == name]

    @cached_property
    def actions(self) -> list[_Action]:
        """Actions reconstructed from events (plus the scenario for kinds/partitions not logged),
        ordered by start time."""
        acts: dict[Any, _Action] = {}
        for e in self.events:
            aid = e.action_id
            if aid is None:
                continue
            a = acts.setdefault(_hashable(aid), _Action(_hashable(aid)))
            if e.event == EVENT_ACTION_START:
                a.start = e.ts if a.start is None else min(a.start, e.ts)
                a.kind = e.detail.get("action") or e.detail.get("kind") or a.kind
                self._collect_moves(a, e)
            elif e.event == EVENT_ACTION_END:
                a.end_event = e.ts if a.end_event is None else max(a.end_event, e.ts)
            elif e.event in (EVENT_LEADER_CHANGE, EVENT_MOVE_COMPLETE, EVENT_MOVE_PHASE):
                tp = _tp_of(e)
                if tp is not None:
                    a.seen.add(tp)
                if e.event != EVENT_MOVE_PHASE:
                    ts = float(e.detail.get("ts", e.ts)) if e.event == EVENT_MOVE_COMPLETE else e.ts
                    a.last_move_event = ts if a.last_move_event is None else max(a.last_move_event, ts)
        sc = self.scenario
        for a in acts.values():
            sa = None
            if sc is not None and isinstance(a.action_id, int) and 0 <= a.action_id < len(sc.actions):
                sa = sc.actions[a.action_id]
            if a.kind is None and sa is not None:
                a.kind = sa.kind
            if sa is not None:
                for m in sa.moves():
                    a.planned.add((m.topic, m.partition))
                    a.targets.setdefault((m.topic, m.partition), list(m.to))
        return sorted((a for a in acts.values() if a.start is not None), key=lambda a: a.start)

    @staticmethod
    def _collect_moves(a: _Action, e: _Event) -> None:
        d = e.detail
        entries = d.get("partitions")
        if isinstance(entries, list):
            for item in entries:
                if isinstance(item, dict):
                    tp = _tp_of(e, {"topic": item.get("topic"), "partition": item.get("partition")})
                    if tp is not None:
                        a.logged.add(tp)
                        to = item.get("to", item.get("replicas"))
                        if isinstance(to, list):
                            a.targets[tp] = list(to)
        if "topic" in d and "partition" in d:
            tp = _tp_of(e)
            if tp is not None:
                a.logged.add(tp)
                if isinstance(d.get("to"), list):
                    a.targets[tp] = list(d["to"])


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def _view(history: pa.Table | HistoryView, scenario: Any = None) -> HistoryView:
    if isinstance(history, HistoryView):
        if history.scenario is None and scenario is not None:
            history.scenario = scenario
        return history
    return HistoryView(history, scenario)


def _f(x: Any) -> float | None:
    """JSON-safe float (None for NaN / missing)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _tp_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"  # Kafka's TopicPartition spelling


def _merge_valid(values: list[Any]) -> Any:
    """Jepsen merge: False dominates, then "unknown", else True."""
    if any(v is False for v in values):
        return False
    if any(v == "unknown" for v in values):
        return "unknown"
    return True


# --------------------------------------------------------------------------------------------
# Safety checkers


def check_lost_writes(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Lost writes: sends acknowledged as ok whose ``msg_id`` is never read.

    valid False if any; "unknown" if the history has no reads at all (nothing to compare with).
    Reports counts, up to 20 example ids (lowest first) and lost counts per partition.
    """
    v = _view(history, scenario)
    acked = _uniq(v.s_id[v.s_out == _OK])
    read_ids = v.read_ids
    out: dict[str, Any] = {"acked_count": int(acked.size), "read_count": int(read_ids.size)}
    if read_ids.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", **out}
    lost = acked[~_member(acked, read_ids)]
    by_partition: dict[str, int] = {}
    if lost.size:
        rows = np.flatnonzero((v.s_out == _OK) & _member(v.s_id, lost))
        rows = rows[np.argsort(v.s_id[rows], kind="stable")]
        rows = rows[_runs(v.s_id[rows])[1]]  # one row per lost id
        keys, _, counts = _runs(np.sort(_tp_key(v.s_topic[rows], v.s_part[rows])))
        for k, c in sorted(zip(keys.tolist(), counts.tolist()), key=lambda kc: -kc[1])[:50]:
            name = "unknown" if k < 0 else _tp_name(v.topics[k >> 32], k & 0xFFFFFFFF)
            by_partition[name] = c
    return {
        "valid": lost.size == 0,
        **out,
        "lost_count": int(lost.size),
        "lost_examples": lost[:EXAMPLES].tolist(),
        "lost_by_partition": by_partition,
    }


def check_duplicates(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Duplicates: a ``msg_id`` read at more than one distinct (topic, partition, offset).

    valid False if any; "unknown" without reads. Examples list each duplicated id's positions.
    """
    v = _view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "duplicated_count": 0}
    pos = v.read_positions
    ids, starts, counts = _runs(pos["id"])  # positions are sorted by msg_id
    dup = counts > 1
    examples = []
    for i in np.flatnonzero(dup)[:EXAMPLES]:
        s, c = starts[i], counts[i]
        examples.append({
            "msg_id": int(ids[i]),
            "positions": [
                {"topic": v.topics[t] if t >= 0 else None, "partition": int(p), "offset": int(o)}
                for t, p, o in zip(pos["topic"][s:s + c], pos["part"][s:s + c], pos["off"][s:s + c])
            ],
        })
    return {
        "valid": not dup.any(),
        "duplicated_count": int(dup.sum()),
        "extra_copies": int((counts[dup] - 1).sum()),
        "examples": examples,
    }


def check_reordering(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Reordering, per (topic, partition, producer), over acked messages only.

    Rule: take every message whose send was acked (outcome ok) and that was read; place it at the
    lowest offset it was read at in that partition (later copies are duplicates, reported by
    ``duplicates``); order by offset. Its ``msg_id`` must then be strictly increasing, because a
    producer assigns ids in send order and acked sends must appear in the log in that order. Each
    position where an id is lower than the id just before it (same topic, partition, producer) is
    one violation ("descent"). Messages whose producer is unknown are skipped and counted.
    valid False if any violation; "unknown" without reads.
    """
    v = _view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "reordered_count": 0}
    pos = v.read_positions
    # First occurrence (lowest offset) per (msg_id, topic, partition): rows are sorted that way.
    n = pos["id"].size
    first = np.ones(n, dtype=bool)
    first[1:] = ((pos["id"][1:] != pos["id"][:-1]) | (pos["topic"][1:] != pos["topic"][:-1])
                 | (pos["part"][1:] != pos["part"][:-1]))
    sidx = v.read_send_index[pos["row"]]
    has_send = sidx >= 0
    acked = np.zeros(n, dtype=bool)
    acked[has_send] = v.s_out[sidx[has_send]] == _OK
    prod = v.s_prod[sidx] if v.s_prod.size else np.full(n, -1, dtype=np.int64)
    prod = np.where(has_send, prod, -1)
    prod = np.where(prod >= 0, prod, v.r_prod[pos["row"]])
    sel = first & acked
    unknown_producer = int((sel & (prod < 0)).sum())
    sel &= prod >= 0
    t, p, pr = pos["topic"][sel], pos["part"][sel], prod[sel]
    off, ids = pos["off"][sel], pos["id"][sel]
    order = np.lexsort((off, pr, p, t))
    t, p, pr, off, ids = t[order], p[order], pr[order], off[order], ids[order]
    same = np.zeros(ids.size, dtype=bool)
    same[1:] = (t[1:] == t[:-1]) & (p[1:] == p[:-1]) & (pr[1:] == pr[:-1])
    bad = np.zeros(ids.size, dtype=bool)
    bad[1:] = same[1:] & (ids[1:] < ids[:-1])
    examples = [
        {
            "topic": v.topics[t[i]] if t[i] >= 0 else None, "partition": int(p[i]),
            "producer": v.producers[pr[i]], "offset": int(off[i]), "msg_id": int(ids[i]),
            "prev_offset": int(off[i - 1]), "prev_msg_id": int(ids[i - 1]),
        }
        for i in np.flatnonzero(bad)[:EXAMPLES]
    ]
    return {
        "valid": not bad.any(),
        "reordered_count": int(bad.sum()),
        "checked_messages": int(ids.size),
        "skipped_unknown_producer": unknown_producer,
        "examples": examples,
    }


def check_unseen(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Indeterminate sends that were read anyway: sends with outcome info (unknown, e.g. a
    timeout) or fail whose ``msg_id`` was read. Reported, never a failure (valid True): an info
    send may or may not have been written, and clients report some errors (e.g. a message timed
    out in the client) after the broker already appended it. A high ``fail_read`` count still hints
    that the harness should classify that error as info.
    """
    v = _view(history, scenario)
    read_ids = v.read_ids
    out: dict[str, Any] = {"valid": True}
    for name, code in (("info", _INFO), ("fail", _FAIL)):
        ids = _uniq(v.s_id[v.s_out == code])
        seen = ids[_member(ids, read_ids)]
        out[f"{name}_total"] = int(ids.size)
        out[f"{name}_read"] = int(seen.size)
        out[f"{name}_read_examples"] = seen[:EXAMPLES].tolist()
    if read_ids.size == 0:
        out["note"] = "no reads in history"
    return out


def check_unexpected(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Unexpected reads: a harness message (``msg_id >= 0``) read but never sent in this run
    (corruption, or another run's data on a reused cluster). valid False if any; "unknown"
    without reads."""
    v = _view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "unexpected_count": 0}
    ids = _uniq(v.r_id[v.read_send_index < 0])
    return {"valid": ids.size == 0, "unexpected_count": int(ids.size),
            "examples": ids[:EXAMPLES].tolist()}


# --------------------------------------------------------------------------------------------
# Measurements of moves


def _limit(scenario: Any, name: str) -> float | None:
    checks = getattr(scenario, "checks", None)
    return getattr(checks, name, None) if checks is not None else None


def _is_move(a: _Action) -> bool:
    return a.kind in MOVE_ACTIONS


def move_markers(a, tp, completes, leader_changes):
    """For one move action and partition: its move_complete event, the new leader it names,
    and the first leader_change at or after the request to a target (the new owner), or None."""
    mc = next((e for e in completes if _hashable(e.action_id) == a.action_id and _tp_of(e) == tp), None)
    new_leader = mc.detail.get("new_leader") if mc is not None else None
    targets = [new_leader] if new_leader is not None else a.targets.get(tp)
    lc = next((e for e in leader_changes
               if _tp_of(e) == tp and e.ts >= a.start
               and (e.action_id is None or _hashable(e.action_id) == a.action_id)
               and isinstance(e.detail.get("leader"), int) and e.detail["leader"] >= 0
               and (not targets or e.detail["leader"] in targets)), None)
    return mc, new_leader, lc


def check_move_seconds(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """move_seconds: how long until a moved partition is served by its new owner.

    For each move action (reassign, move_set, add_broker_and_rebalance, drain_broker: events
    ``action_start`` with ``action_id``) and each partition it moves:

    * ``request_ts`` = the action_start event's ts;
    * the *new leader* = ``move_complete.new_leader`` for that action/partition if logged, else
      the action's target broker list; ``leader_change_ts`` = ts of the first ``leader_change``
      event for the partition with ``leader`` = the new leader (any live leader if neither is
      known), ``ts >= request_ts`` and the action's ``action_id`` (or none);
    * ``first_ack_ts`` = the earliest ``ack_ts`` of an acked send on that partition whose send was
      invoked at or after ``request_ts`` and acked at or after ``leader_change_ts`` — the first
      write we know the new owner served;
    * ``move_seconds = first_ack_ts - request_ts``.

    "unknown" for a partition without such a leader_change or without such an ack. An action's
    move_seconds is the max over its partitions. valid: False if ``checks.max_move_seconds`` is set
    and exceeded, else "unknown" if any partition is unknown, else True. Per-action ``phases``
    sum the ``move_phase`` events (seconds, bytes) by phase name.
    """
    v = _view(history, scenario)
    limit = _limit(v.scenario, "max_move_seconds")
    leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    completes = v.events_named(EVENT_MOVE_COMPLETE)
    phases_ev = v.events_named(EVENT_MOVE_PHASE)
    moves, actions, valids = [], [], []
    for a in v.actions:
        if not _is_move(a):
            continue
        phases: dict[str, dict[str, float]] = {}
        for e in phases_ev:
            if _hashable(e.action_id) == a.action_id:
                ph = phases.setdefault(str(e.detail.get("phase")), {"seconds": 0.0, "bytes": 0})
                ph["seconds"] += float(e.detail.get("seconds") or 0.0)
                ph["bytes"] += int(e.detail.get("bytes") or 0)
        per_action = []
        for tp in sorted(a.partitions):
            rec: dict[str, Any] = {"action_id": a.action_id, "action": a.kind,
                                   "topic": tp[0], "partition": tp[1], "request_ts": a.start}
            mc, new_leader, lc = move_markers(a, tp, completes, leader_changes)
            if mc is not None:
                rec["move_complete_ts"] = float(mc.detail.get("ts", mc.ts))
            rec["new_leader"] = lc.detail["leader"] if lc is not None else new_leader
            if lc is None:
                rec.update(move_seconds="unknown", reason="no leader_change to the new leader")
            else:
                rec["leader_change_ts"] = lc.ts
                ack, ts = v.acks_of(*tp)
                cond = (ts >= a.start) & (ack >= lc.ts)
                if not cond.any():
                    rec.update(move_seconds="unknown", reason="no ack after the leader change")
                else:
                    first_ack = float(ack[np.argmax(cond)])  # acks are sorted: first hit = earliest
                    rec.update(first_ack_ts=first_ack, move_seconds=first_ack - a.start)
            per_action.append(rec)
        known = [r["move_seconds"] for r in per_action if r["move_seconds"] != "unknown"]
        unknown = len(known) < len(per_action) or not per_action
        secs: Any = "unknown" if unknown else max(known)
        over = limit is not None and any(s > limit for s in known)
        valids.append(False if over else ("unknown" if unknown else True))
        actions.append({"action_id": a.action_id, "action": a.kind, "request_ts": a.start,
                        "partitions": len(per_action), "move_seconds": secs, "phases": phases,
                        **({} if per_action else {"reason": "no moved partitions recorded"})})
        moves.extend(per_action)
    known_all = [m["move_seconds"] for m in moves if m["move_seconds"] != "unknown"]
    return {
        "valid": _merge_valid(valids),
        "limit": limit,
        "max_move_seconds": max(known_all) if known_all else None,
        "actions": actions,
        "moves": moves,
    }


def check_bytes_moved(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """bytes_moved: ``counter`` events summed per action (a measurement; valid True).

    A counter with ``action_id`` in its detail belongs to that action; one without belongs to the
    latest-started action whose window [action_start, action end] contains its ts (action end:
    the latest of its action_end / move_complete / leader_change events; open if none), otherwise
    to ``unattributed``. ``inter_broker_bytes`` / ``objstore_bytes`` are the sums of the counters
    named ``bytes_moved_inter_broker`` / ``bytes_moved_objstore``; ``bytes_moved`` is their sum.
    Every other counter name is summed too (``counters``), plus per broker.
    """
    v = _view(history, scenario)
    acts = v.actions
    by_id = {a.action_id: a for a in acts}
    totals: dict[Any, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_broker: dict[Any, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    run: dict[str, float] = defaultdict(float)
    counters = v.events_named(EVENT_COUNTER)
    for e in counters:
        name, value = e.detail.get("name"), e.detail.get("value")
        if name is None or not isinstance(value, (int, float)):
            continue
        aid = _hashable(e.action_id)
        if aid is None or aid not in by_id:
            owner = [a for a in acts if a.start <= e.ts and (a.end is None or e.ts <= a.end)]
            aid = owner[-1].action_id if owner else "unattributed"
        totals[aid][name] += value
        run[name] += value
        per_broker[aid][name][str(e.detail.get("broker"))] += value

    def summary(c: dict[str, float]) -> dict[str, Any]:
        ib, obj = c.get(COUNTER_INTER_BROKER, 0), c.get(COUNTER_OBJSTORE, 0)
        return {"inter_broker_bytes": _intish(ib), "objstore_bytes": _intish(obj),
                "bytes_moved": _intish(ib + obj)}

    actions = [
        {"action_id": a.action_id, "action": a.kind, **summary(totals.get(a.action_id, {})),
         "counters": {k: _intish(x) for k, x in totals.get(a.action_id, {}).items()},
         "by_broker": {k: {b: _intish(x) for b, x in d.items()}
                       for k, d in per_broker.get(a.action_id, {}).items()}}
        for a in acts
    ]
    return {
        "valid": True,
        "counters_seen": len(counters),
        "actions": actions,
        "unattributed": {k: _intish(x) for k, x in totals.get("unattributed", {}).items()},
        "run": {**summary(run), "counters": {k: _intish(x) for k, x in run.items()}},
    }


def _intish(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _longest_gap(ack: np.ndarray, w0: float, w1: float) -> tuple[float, float, float]:
    """Longest interval inside [w0, w1] containing no ack (acks sorted). -> (gap, start, end)."""
    inside = ack[(ack >= w0) & (ack <= w1)]
    pts = np.concatenate([[w0], inside, [w1]])
    d = np.diff(pts)
    i = int(np.argmax(d))
    return float(d[i]), float(pts[i]), float(pts[i + 1])


def _partition_gaps(v: HistoryView, w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
    """Longest no-ack interval within [w0, w1] for every partition that had a send.
    Vectorised over all partitions. -> (tp keys, gaps)."""
    send_keys = _uniq(_tp_key(v.s_topic, v.s_part))
    send_keys = send_keys[send_keys >= 0]
    a = v.acked
    m = (a["ack"] >= w0) & (a["ack"] <= w1) & (a["key"] >= 0)
    k, ack = a["key"][m], a["ack"][m]
    gaps = np.full(send_keys.size, w1 - w0)  # no ack at all in the window: the whole window
    if k.size:
        uk, start, _ = _runs(k)  # acked sends are sorted by key
        end = np.concatenate([start[1:], [k.size]]) - 1
        d = np.diff(ack)
        if d.size:
            d = np.where(k[1:] == k[:-1], d, _NEG_INF)
        inner = np.maximum.reduceat(np.concatenate([d, [_NEG_INF]]), start)
        g = np.maximum(np.maximum(ack[start] - w0, w1 - ack[end]), inner)
        gaps[np.searchsorted(send_keys, uk)] = g
    return send_keys, gaps


def check_unavailable_seconds(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """unavailable_seconds: the longest time a partition went without any produce ack.

    Per action and partition it acts on (named by action_start, else planned in the scenario, else
    mentioned by its leader_change / move_complete events, e.g. the partitions of a killed broker):
    the longest interval inside the window [action_start - 1 s, move end + 5 s] that contains no
    ``ack_ts`` of an acked send on that partition, counting the window edges as boundaries (so a
    partition with no ack in the window is unavailable for the whole window). Move end: the latest
    of the action's action_end / move_complete / leader_change events; the window is clipped to the
    load window (first to last send invocation) and runs to the end of the load when the move end
    is unknown.
    ``run``: the same measure per partition over the whole load window (this is where an outage
    that outlasts an action — e.g. a killed single-replica broker — shows in full).
    It assumes the producers kept sending to the partition; a partition with no load looks
    unavailable. valid False if ``checks.max_unavailable_seconds`` is set and an action window
    exceeds it, else True.
    """
    v = _view(history, scenario)
    limit = _limit(v.scenario, "max_unavailable_seconds")
    windows = []
    for a in v.actions:
        w0 = max(a.start - UNAVAILABLE_PRE_S, v.load_start)
        end = a.end if a.end is not None else v.load_end
        w1 = max(min(end + UNAVAILABLE_POST_S, v.load_end), w0)
        for tp in sorted(a.partitions):
            ack, _ = v.acks_of(*tp)
            gap, g0, g1 = _longest_gap(ack, w0, w1)
            windows.append({"action_id": a.action_id, "action": a.kind, "topic": tp[0],
                            "partition": tp[1], "window": [w0, w1], "unavailable_seconds": gap,
                            "gap": [g0, g1], "end_known": a.end is not None})
    keys, gaps = _partition_gaps(v, v.load_start, v.load_end)
    order = np.argsort(-gaps, kind="stable")[:EXAMPLES]
    worst = [{"topic": v.topics[int(keys[i]) >> 32], "partition": int(keys[i]) & 0xFFFFFFFF,
              "unavailable_seconds": float(gaps[i])} for i in order]
    max_win = max((w["unavailable_seconds"] for w in windows), default=None)
    return {
        "valid": not (limit is not None and max_win is not None and max_win > limit),
        "limit": limit,
        "max_unavailable_seconds": max_win,
        "actions": windows,
        "run": {"window": [v.load_start, v.load_end],
                "max_unavailable_seconds": float(gaps.max()) if gaps.size else None,
                "worst_partitions": worst},
    }


def _percentiles(lat_ms: np.ndarray) -> dict[str, Any]:
    lat_ms = lat_ms[~np.isnan(lat_ms)]
    if lat_ms.size == 0:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}
    p50, p99, p999 = np.percentile(lat_ms, [50.0, 99.0, 99.9])  # linear interpolation
    return {"count": int(lat_ms.size), "p50_ms": float(p50), "p99_ms": float(p99),
            "p999_ms": float(p999), "max_ms": float(lat_ms.max())}


def check_latency(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Produce latency (``ack_ts - ts``, ms) percentiles p50 / p99 / p999 from raw samples
    (numpy, linear interpolation; never averaged across windows), by send invocation time.

    For action i (in start order) with start S_i and move end E_i (the latest of its action_end /
    move_complete / leader_change events, else the next action's start or the end of the load):
    ``before`` = [max(load start, previous action's end), S_i), ``during`` = [S_i, E_i),
    ``after`` = [E_i, next action's start or the end of the load]. Each window is given for all
    partitions (``all``: what the producers felt) and for the action's partitions only
    (``partitions``), with the count of info / fail sends invoked in it. ``run`` covers every
    acked send. valid "unknown" if nothing was acked, else True (a measurement).
    """
    v = _view(history, scenario)
    b = v.by_send_ts
    acts = v.actions

    def window(lo: float, hi: float, keys: np.ndarray | None, inclusive_hi: bool) -> dict[str, Any]:
        i0 = int(np.searchsorted(b["ts"], lo, "left"))
        i1 = int(np.searchsorted(b["ts"], hi, "right" if inclusive_hi else "left"))
        i1 = max(i1, i0)
        lat = b["lat_ms"][i0:i1]
        if keys is not None:
            lat = lat[_member(b["key"][i0:i1], keys)]
            return {"from": lo, "to": hi, **_percentiles(lat)}
        return {"from": lo, "to": hi, **_percentiles(lat),
                "info_count": int(b["info_cum"][i1] - b["info_cum"][i0]),
                "fail_count": int(b["fail_cum"][i1] - b["fail_cum"][i0])}

    out_actions = []
    prev_end = v.load_start
    for i, a in enumerate(acts):
        nxt = acts[i + 1].start if i + 1 < len(acts) else v.load_end
        end = a.end if a.end is not None else max(nxt, a.start)
        keys = np.array(sorted(int(_tp_key(v.topic_code[t], p)) for t, p in a.partitions
                               if t in v.topic_code), dtype=np.int64)
        bounds = {"before": (max(v.load_start, prev_end), a.start, False),
                  "during": (a.start, end, False),
                  "after": (end, max(nxt, end), True)}
        out_actions.append({
            "action_id": a.action_id, "action": a.kind, "end_known": a.end is not None,
            "all": {ph: window(lo, hi, None, inc) for ph, (lo, hi, inc) in bounds.items()},
            "partitions": {ph: window(lo, hi, keys, inc) for ph, (lo, hi, inc) in bounds.items()},
        })
        prev_end = end
    run = _percentiles(b["lat_ms"])
    return {"valid": "unknown" if run["count"] == 0 else True, "run": run, "actions": out_actions}


# --------------------------------------------------------------------------------------------

CHECKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "lost_writes": check_lost_writes,
    "duplicates": check_duplicates,
    "reordering": check_reordering,
    "unseen": check_unseen,
    "unexpected": check_unexpected,
    "move_seconds": check_move_seconds,
    "bytes_moved": check_bytes_moved,
    "unavailable_seconds": check_unavailable_seconds,
    "latency": check_latency,
}


def check_all(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Run every checker on one shared view. ``valid`` is False if any checker is False, else
    "unknown" if any is unknown, else True; ``failed`` / ``unknown`` name them. The scenario's
    limits (``checks.max_move_seconds``, ``checks.max_unavailable_seconds``) are applied by the
    checkers they concern."""
    v = _view(history, scenario)
    results = {name: fn(v, scenario) for name, fn in CHECKERS.items()}
    return {
        "valid": _merge_valid([r["valid"] for r in results.values()]),
        "failed": [n for n, r in results.items() if r["valid"] is False],
        "unknown": [n for n, r in results.items() if r["valid"] == "unknown"],
        "malformed_events": v.bad_events,
        **results,
    }


__all__ = [
    "CHECKERS", "COUNTER_INTER_BROKER", "COUNTER_OBJSTORE", "HistoryView", "MOVE_ACTIONS",
    "check_all", "check_bytes_moved", "check_duplicates", "check_latency", "check_lost_writes",
    "check_move_seconds", "check_reordering", "check_unavailable_seconds", "check_unexpected",
    "check_unseen",
]
