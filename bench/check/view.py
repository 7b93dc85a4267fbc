"""A run history decoded once into numpy arrays (:class:`HistoryView`), and the small helpers the
checkers share. Every checker accepts a view in place of the table; :func:`bench.check.check_all`
builds one and shares it, so the columns are decoded once."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.history.names import (
    BROKER_NODE_PREFIX,
    EVENT_ACTION_END,
    EVENT_ACTION_START,
    EVENT_LEADER_CHANGE,
    EVENT_MOVE_COMPLETE,
    EVENT_MOVE_PHASE,
    broker_node,
)
from bench.history.store import SCHEMA
from bench.units import rate_bits

EXAMPLES = 20  # max example ids / records reported per anomaly

OK, FAIL, INFO, OTHER = 0, 1, 2, 3
NEG_INF = -math.inf





def _codes(col: pa.ChunkedArray, values: list[str]) -> np.ndarray:
    """Index of each string in ``values`` (-1 for null / not found), consistent across chunks."""
    if not values or len(col) == 0:
        return np.full(len(col), -1, dtype=np.int64)
    idx = pc.index_in(col, value_set=pa.array(values, pa.string()))
    return np.asarray(pc.fill_null(idx, -1).to_numpy(), dtype=np.int64)


def _digests(rows: pa.Table) -> np.ndarray:
    """The rows' ``digest`` (CRC-32 of the value), -1 where none was taken (or the history
    predates the column)."""
    if "digest" not in rows.column_names:
        return np.full(rows.num_rows, -1, dtype=np.int64)
    return _num(rows.column("digest"), -1, np.int64)


def _num(col: pa.ChunkedArray, fill: Any, dtype: Any) -> np.ndarray:
    return np.asarray(pc.fill_null(col, fill).to_numpy(), dtype=dtype)


def tp_key(topic_code: np.ndarray | int, partition: np.ndarray | int) -> Any:
    # One int64 per (topic, partition); invalid pairs map to -1.
    t = np.asarray(topic_code, dtype=np.int64)
    p = np.asarray(partition, dtype=np.int64)
    key = (t << 32) | (p & 0xFFFFFFFF)
    return np.where((t >= 0) & (p >= 0), key, -1)


def uniq(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based: much faster than np.unique's hash path on ids)."""
    s = np.sort(a, kind="stable")
    if s.size:
        s = s[np.concatenate([[True], s[1:] != s[:-1]])]
    return s


def sorted_runs(sorted_a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For an already sorted array: (distinct values, start index, count) of each run."""
    n = sorted_a.size
    if n == 0:
        return sorted_a, np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.flatnonzero(np.concatenate([[True], sorted_a[1:] != sorted_a[:-1]]))
    counts = np.diff(np.concatenate([starts, [n]]))
    return sorted_a[starts], starts, counts


def isin_sorted(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """Boolean mask: which elements of ``a`` occur in the sorted array ``sorted_b``."""
    if sorted_b.size == 0:
        return np.zeros(a.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_b, a), sorted_b.size - 1)
    return sorted_b[pos] == a


@dataclass
class Event:
    event: str
    ts: float
    topic: str | None
    partition: int | None
    detail: dict[str, Any]

    @property
    def action_id(self) -> Any:
        return self.detail.get("action_id")


@dataclass
class Action:
    action_id: Any
    kind: str | None = None
    start: float | None = None
    broker: int | None = None  # the broker a broker action names (action_start)
    end_event: float | None = None  # latest action_end
    ok: bool | None = None  # its action_end's verdict (False: the action failed)
    last_move_event: float | None = None  # latest move_complete / leader_change
    logged: set[tuple[str, int]] = field(default_factory=set)  # named by action_start
    seen: set[tuple[str, int]] = field(default_factory=set)  # in its other events
    planned: set[tuple[str, int]] = field(default_factory=set)  # from the scenario
    targets: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    sources: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # replicas before a move

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


def tp_of(ev: Event, d: dict[str, Any] | None = None) -> tuple[str, int] | None:
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
        self.s_out[self.s_out < 0] = OTHER
        self.s_topic = _codes(sends.column("topic"), self.topics)
        self.s_part = _num(sends.column("partition"), -1, np.int64)
        self.s_prod = _codes(sends.column("producer"), self.producers)
        self.s_off = _num(sends.column("offset"), -1, np.int64)
        self.s_digest = _digests(sends)

        r_id = _num(reads.column("msg_id"), -1, np.int64)
        keep = r_id >= 0  # negative ids are not harness messages (e.g. prefill)
        self.r_ignored = int((~keep).sum())
        self.r_id = r_id[keep]
        self.r_ts = _num(reads.column("ts"), math.nan, np.float64)[keep]
        self.r_topic = _codes(reads.column("topic"), self.topics)[keep]
        self.r_part = _num(reads.column("partition"), -1, np.int64)[keep]
        self.r_off = _num(reads.column("offset"), -1, np.int64)[keep]
        self.r_prod = _codes(reads.column("producer"), self.producers)[keep]
        self.r_digest = _digests(reads)[keep]

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
        return uniq(self.r_id)

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
        m = (self.s_out == OK) & ~np.isnan(self.s_ack)
        key = tp_key(self.s_topic[m], self.s_part[m])
        ack, ts = self.s_ack[m], self.s_ts[m]
        order = np.lexsort((ack, key))
        return {"key": key[order], "ack": ack[order], "ts": ts[order]}

    def acks_of(self, topic: str, partition: int) -> tuple[np.ndarray, np.ndarray]:
        """(ack_ts sorted ascending, send ts) of acked sends on one partition."""
        code = self.topic_code.get(topic, -1)
        a = self.acked
        if code < 0 or a["key"].size == 0:
            return np.empty(0), np.empty(0)
        k = int(tp_key(code, partition))
        lo, hi = np.searchsorted(a["key"], k, "left"), np.searchsorted(a["key"], k, "right")
        return a["ack"][lo:hi], a["ts"][lo:hi]

    @cached_property
    def by_send_ts(self) -> dict[str, np.ndarray]:
        """All sends sorted by invocation ts, with latency (ms, NaN unless acked) and outcome."""
        order = np.argsort(self.s_ts, kind="stable")
        ok = (self.s_out == OK) & ~np.isnan(self.s_ack)
        lat = np.where(ok, (self.s_ack - self.s_ts) * 1000.0, np.nan)
        return {
            "ts": self.s_ts[order],
            "lat_ms": lat[order],
            "key": tp_key(self.s_topic, self.s_part)[order],
            "info_cum": np.concatenate([[0], np.cumsum(self.s_out[order] == INFO)]),
            "fail_cum": np.concatenate([[0], np.cumsum(self.s_out[order] == FAIL)]),
        }

    @cached_property
    def deliveries(self) -> dict[str, Any]:
        """The workload consumers' ``deliver`` rows sorted by ts: ts, msg id (-1: prefill),
        topic code, partition, offset, value bytes, group code (into ``groups``), and for each the
        index of its send row (-1 if none, e.g. prefill)."""
        kind = self.table.column("kind")
        d = self.table.filter(pc.fill_null(pc.equal(kind, "deliver"), False))
        groups = sorted(pc.unique(d.column("group")).drop_null().to_pylist())
        ts = _num(d.column("ts"), math.nan, np.float64)
        order = np.argsort(ts, kind="stable")
        ids = _num(d.column("msg_id"), -1, np.int64)[order]
        send = np.full(ids.size, -1, dtype=np.int64)
        if self.s_id.size and ids.size:
            s_order = np.lexsort((self.s_out, self.s_id))  # per msg_id an ok send first
            sorted_ids = self.s_id[s_order]
            pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
            send = np.where((ids >= 0) & (sorted_ids[pos] == ids), s_order[pos], -1)
        return {"ts": ts[order], "id": ids, "topic": _codes(d.column("topic"), self.topics)[order],
                "part": _num(d.column("partition"), -1, np.int64)[order],
                "off": _num(d.column("offset"), -1, np.int64)[order],
                "size": _num(d.column("size_bytes"), 0, np.int64)[order],
                "group": _codes(d.column("group"), groups)[order], "groups": groups, "send": send}

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
    def events(self) -> list[Event]:
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
            out.append(Event(ev or "", float(ts), topic, part if part is not None and part >= 0 else None, d))
        out.sort(key=lambda e: e.ts)
        return out

    def events_named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.event == name]

    def link_rate_at(self, ts: float, base: Any, brokers: Any) -> Any:
        """The emulated link rate of ``brokers`` in force at ``ts``: ``base`` (the run's
        ``link_rate``), changed by the ``set_link_rate`` actions started by ``ts``; the lowest of
        them (None: no emulated link). A move's nominal link, for the models and the figures."""
        if base is None:
            return None
        rates: dict[str, Any] = {}
        for e in self.events_named(EVENT_ACTION_START):  # sorted by ts
            if e.ts <= ts and e.detail.get("action") == "set_link_rate" and str(e.detail.get("node", "")).startswith(
                    BROKER_NODE_PREFIX):
                rates[str(e.detail["node"])] = e.detail.get("rate")
        nodes = {broker_node(b) for b in brokers} or set(rates) | {None}
        return min((rates.get(n, base) for n in nodes), key=rate_bits)

    @cached_property
    def actions(self) -> list[Action]:
        """Actions reconstructed from events (plus the scenario for kinds/partitions not logged),
        ordered by start time."""
        acts: dict[Any, Action] = {}
        for e in self.events:
            aid = e.action_id
            if aid is None:
                continue
            a = acts.setdefault(hashable(aid), Action(hashable(aid)))
            if e.event == EVENT_ACTION_START:
                a.start = e.ts if a.start is None else min(a.start, e.ts)
                a.kind = e.detail.get("action") or e.detail.get("kind") or a.kind
                if isinstance(e.detail.get("broker"), int):
                    a.broker = e.detail["broker"]
                self._collect_moves(a, e)
            elif e.event == EVENT_ACTION_END:
                a.end_event = e.ts if a.end_event is None else max(a.end_event, e.ts)
                if isinstance(e.detail.get("ok"), bool):
                    a.ok = e.detail["ok"]
            elif e.event in (EVENT_LEADER_CHANGE, EVENT_MOVE_COMPLETE, EVENT_MOVE_PHASE):
                tp = tp_of(e)
                if tp is not None:
                    a.seen.add(tp)
                if e.event != EVENT_MOVE_PHASE:
                    ts = float(e.detail.get("ts", e.ts)) if e.event == EVENT_MOVE_COMPLETE else e.ts
                    a.last_move_event = ts if a.last_move_event is None else max(a.last_move_event, ts)
        sc = self.scenario
        placement = sc.placement() if sc is not None else {}
        for a in acts.values():
            sa = None
            if sc is not None and isinstance(a.action_id, int) and 0 <= a.action_id < len(sc.actions):
                sa = sc.actions[a.action_id]
            if a.kind is None and sa is not None:
                a.kind = sa.kind
            if a.broker is None and sa is not None:
                a.broker = sa.broker
            if sa is not None:
                for m in sa.moves(placement):
                    a.planned.add((m.topic, m.partition))
                    a.targets.setdefault((m.topic, m.partition), list(m.to))
        return sorted((a for a in acts.values() if a.start is not None), key=lambda a: a.start)

    @staticmethod
    def _collect_moves(a: Action, e: Event) -> None:
        d = e.detail
        entries = d.get("partitions")
        if isinstance(entries, list):
            for item in entries:
                if isinstance(item, dict):
                    tp = tp_of(e, {"topic": item.get("topic"), "partition": item.get("partition")})
                    if tp is not None:
                        a.logged.add(tp)
                        to = item.get("to", item.get("replicas"))
                        if isinstance(to, list):
                            a.targets[tp] = list(to)
                        if isinstance(item.get("from"), list):
                            a.sources[tp] = [b for b in item["from"] if isinstance(b, int)]
        if "topic" in d and "partition" in d:
            tp = tp_of(e)
            if tp is not None:
                a.logged.add(tp)
                if isinstance(d.get("to"), list):
                    a.targets[tp] = list(d["to"])


def hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def as_view(history: pa.Table | HistoryView, scenario: Any = None) -> HistoryView:
    if isinstance(history, HistoryView):
        if history.scenario is None and scenario is not None:
            history.scenario = scenario
        return history
    return HistoryView(history, scenario)



def tp_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"  # Kafka's TopicPartition spelling


def merge_valid(values: list[Any]) -> Any:
    """Jepsen merge: False dominates, then "unknown", else True."""
    if any(v is False for v in values):
        return False
    if any(v == "unknown" for v in values):
        return "unknown"
    return True


