"""Estimates before a move, the run's side: the samples of a live cluster's logs (Kafka protocol
only) that `bench reassign --estimate` and a run's estimates both start from, and
:class:`RunEstimator`, which makes a run record an estimate before each of its moves
(``move_estimate`` events; bench/check/moves.py sets them beside the move's actual time).

Two samples some seconds apart (:func:`sample_logs`: Metadata replicas and leaders, DescribeLogDirs
sizes) give each planned partition's size and ingest; the estimate itself (a stored model, the
brokers' throttles) is bench/analysis/estimate.py's ``cluster_estimate``, handed to the run by the
command that starts it (the analysis layer sits above the run's).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.run import move_progress as mp

TP = tuple[str, int]

# A run samples the logs this long before each move (the ingest window), as an operator runs
# --estimate and then --execute; and waits at most this long past the move's time for the samples
# (a silent broker must not hold a move up): an estimate not ready by then is recorded as missing.
RUN_WINDOW_S = 5.0
RUN_WAIT_S = 2.0
# A second sample older than this at the move's request (the move waited for earlier moves) is
# taken again.
FRESH_S = 1.0

log = logging.getLogger("bench.run.move_estimate")


@dataclass
class LogSample:
    """One look at the planned topics' logs."""

    ts: float
    replicas: dict[TP, list[int]] = field(default_factory=dict)
    leaders: dict[TP, int] = field(default_factory=dict)
    sizes: dict[TP, dict[int, int]] = field(default_factory=dict)  # broker -> partition_size
    offsets: dict[TP, tuple[int, int]] = field(default_factory=dict)  # the leader's (local start, end)
    # the leader's last offset in object storage (ListOffsets LATEST_TIERED, KIP-1005), where it has
    # tiered any: a KIP-1023 replica copies only what follows it
    last_tiered: dict[TP, int] = field(default_factory=dict)
    # the bytes per offset after the last tiered offset, sampled (sample_logs(profile_tails=True))
    tails: dict[TP, TailProfile] = field(default_factory=dict)


# Records of a tail sampled to price its offsets (one Fetch each); a tail's bytes per offset can
# change inside it (the end of a prefill of large records, then small ones), where sampling bisects
# until it finds the offset of the change or the budget is spent.
TAIL_SAMPLES = 24
TAIL_FIRST = 8  # evenly spread first, then bisect where neighbours differ by more than TAIL_STEP
TAIL_STEP = 1.25
# A record's bytes in the log beyond its key, value and headers: its length, attributes,
# timestamp and offset deltas (varints), and its share of the batch header (61 bytes).
RECORD_OVERHEAD = 12
TAIL_TIME_S = 10.0  # a plan's tails are sampled for at most this long; the rest go unsampled


@dataclass
class TailProfile:
    """Bytes per offset over the offsets ``[start, end)`` of a log, from records sampled at
    ``points`` (offset -> bytes of the record found there); between two sampled offsets the first
    half is priced at the lower one's size, the second at the upper one's."""

    start: int
    end: int
    points: dict[int, float]

    def bytes_between(self, lo: int, hi: int) -> float:
        """The bytes of the offsets ``[lo, hi)`` (clipped to the profile)."""
        lo, hi = max(lo, self.start), min(hi, self.end)
        if hi <= lo or not self.points:
            return 0.0
        xs = sorted(self.points)
        total = 0.0
        for i, x in enumerate(xs):  # offset x prices [left, right): halfway to its neighbours
            left = self.start if i == 0 else (xs[i - 1] + x + 1) // 2
            right = self.end if i == len(xs) - 1 else (x + xs[i + 1] + 1) // 2
            total += max(0, min(hi, right) - max(lo, left)) * self.points[x]
        return total


def sample_tail(size_at, start: int, end: int, budget: int = TAIL_SAMPLES) -> TailProfile:
    """The profile of ``[start, end)`` from ``size_at(offset)`` (a record's bytes, None: no record
    there), at most ``budget`` calls."""
    pts: dict[int, float] = {}
    if end <= start:
        return TailProfile(start, end, pts)
    n = min(TAIL_FIRST, end - start)
    ask = sorted({start + (end - 1 - start) * i // max(n - 1, 1) for i in range(n)})
    tried: set[int] = set()
    while ask and len(tried) < budget:
        for o in ask[: budget - len(tried)]:
            tried.add(o)
            b = size_at(o)
            if b is not None:
                pts[o] = float(b)
        xs = sorted(pts)
        gaps = [(b - a, (a + b) // 2) for a, b in zip(xs, xs[1:]) if b - a > 1 and (a + b) // 2 not in tried
                and max(pts[a], pts[b]) > TAIL_STEP * max(min(pts[a], pts[b]), 1.0)]
        ask = [max(gaps)[1]] if gaps else []
    return TailProfile(start, end, pts)


def tail_profiles(admin, tps: dict[TP, tuple[int, int]], time_s: float = TAIL_TIME_S) -> dict[TP, TailProfile]:
    """Each partition's profile of ``(first, end)`` offsets, read with a consumer of the admin's
    settings (one Fetch of at most one batch per sample), for at most ``time_s`` in all; a
    partition not sampled is left out (its tail is then priced by its newest records)."""
    if not tps:
        return {}
    from kafka import KafkaConsumer, TopicPartition

    conf = {k: v for k, v in admin.config.items() if k in KafkaConsumer.DEFAULT_CONFIG and k not in (
        "client_id", "group_id", "enable_auto_commit", "max_partition_fetch_bytes", "fetch_max_bytes")}
    deadline = time.monotonic() + time_s
    # auto_offset_reset none: an offset gone meanwhile (retention) is no record, never the log's end
    c = KafkaConsumer(**conf, client_id="bench-estimate-tail", group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=1, fetch_max_bytes=1, auto_offset_reset="none")
    out = {}
    try:
        for (topic, part), (first, end) in tps.items():
            if time.monotonic() > deadline:
                break
            tp = TopicPartition(topic, part)
            c.assign([tp])

            def size_at(o: int, tp=tp) -> float | None:
                if time.monotonic() > deadline:
                    return None
                c.seek(tp, o)
                try:
                    recs = c.poll(timeout_ms=1000, max_records=1).get(tp) or []
                except Exception:  # noqa: BLE001 - out of range now: no record there
                    return None
                if not recs:
                    return None
                r = recs[0]
                return (max(r.serialized_key_size, 0) + max(r.serialized_value_size, 0)
                        + max(r.serialized_header_size, 0) + RECORD_OVERHEAD)

            try:
                out[(topic, part)] = sample_tail(size_at, first, end)
            except Exception as e:  # noqa: BLE001 - this partition's tail stays unsampled
                log.info("sampling %s-%s's tail: %s", topic, part, e)
    finally:
        c.close()
    return out


def sample_logs(admin, topics: set[str], profile_tails: bool = False) -> LogSample:
    """Replicas and leaders (Metadata), every replica's log size (DescribeLogDirs of the brokers
    holding one) and the leaders' offsets (ListOffsets) of ``topics``; a broker that does not answer
    is left out. ``profile_tails``: also sample the bytes per offset after each last tiered offset
    (:func:`tail_profiles`, a few Fetches a partition: the first of two samples takes it, where
    the time before the move allows)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    s = LogSample(time.time())
    for t in admin.describe_topics(sorted(topics)):
        if t.get("error_code"):
            continue
        for p in t.get("partitions", []):
            tp = (t["name"], p["partition_index"])
            s.replicas[tp] = list(p.get("replica_nodes") or [])
            s.leaders[tp] = p.get("leader_id", -1)
    brokers = sorted({b for r in s.replicas.values() for b in r})
    sizes, _ = mp.describe_log_dirs(admin, brokers, topics)
    for key, per in sizes.items():
        topic, _, part = key.rpartition("-")
        s.sizes[(topic, int(part))] = {int(b): v for b, v in per.items()}
    led = [TopicPartition(*tp) for tp, b in s.leaders.items() if b >= 0]
    s.offsets = mp.leader_offsets(admin, led, OffsetSpec, 5000)
    s.last_tiered = last_tiered_offsets(admin, led, OffsetSpec)
    s.ts = (s.ts + time.time()) / 2  # when the sizes were read: the tails' sampling comes after
    if profile_tails:
        s.tails = tail_profiles(admin, {tp: (last + 1, s.offsets[tp][1]) for tp, last in s.last_tiered.items()
                                        if tp in s.offsets and s.offsets[tp][1] > last + 1})
    return s


def last_tiered_offsets(admin, tps: list, OffsetSpec) -> dict[TP, int]:
    """Each leader's last tiered offset, where it has tiered any (none on a cluster without tiered
    storage, or one whose brokers do not know LATEST_TIERED)."""
    if not tps:
        return {}
    try:
        last = admin.list_partition_offsets({tp: OffsetSpec.LATEST_TIERED for tp in tps}, timeout_ms=5000)
    except Exception:  # noqa: BLE001 - no tiered storage, or no ListOffsets v9: the local log stands
        return {}
    return {(tp.topic, tp.partition): o.offset for tp, o in last.items() if o.offset >= 0}


class EstimateFn(Protocol):
    """bench/analysis/estimate.py's RunModels: the estimate of ``plan`` from two samples."""

    def __call__(self, admin, plan: list[dict], first: LogSample, second: LogSample, *, system: str | None,
                 link_bytes_per_s: float | None, concurrency: int | None,
                 client_ack_s: float | None = None, producers: dict[str, int] | None = None) -> dict[str, Any]: ...


class RunEstimator:
    """The estimates a run makes before its moves, with an admin client of its own (a silent
    broker delays only the estimate, never the move's request nor the watchers): ``prepare`` takes
    the first sample ``RUN_WINDOW_S`` before a move and the second at its time, in a thread;
    ``estimate`` turns them into the move's estimate when the move is planned."""

    def __init__(self, estimate_fn: EstimateFn, admin_factory, topics: set[str], system: str | None,
                 link_bytes_per_s: float | None,
                 client_ack: Callable[[float, float], float | None] | None = None,
                 producers: dict[str, int] | None = None) -> None:
        self._fn = estimate_fn
        # the load's median ack latency (s) between two times: what an operator reads off the
        # producers' request latency before --estimate (None: not known)
        self._client_ack = client_ack
        self.producers = producers  # the load's producer clients writing to each partition, per topic
        self._factory = admin_factory
        self._admin = None
        self.topics, self.system, self.link = topics, system, link_bytes_per_s
        self._samples: dict[int, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()

    def admin(self):
        if self._admin is None:
            self._admin = self._factory()
        return self._admin

    def prepare(self, action_id: int, at: float) -> None:
        """Sample now and again at ``at`` (the move's time), in a thread."""
        done, got = threading.Event(), []
        self._samples[action_id] = (done, got)

        def body() -> None:
            try:
                with self._lock:
                    got.append(sample_logs(self.admin(), self.topics, profile_tails=True))
                time.sleep(max(0.0, at - time.time()))
                with self._lock:
                    got.append(sample_logs(self.admin(), self.topics))
            except Exception as e:  # noqa: BLE001 - a broker down or slow: this move has no estimate
                got.append(e)
            finally:
                done.set()

        threading.Thread(target=body, name=f"estimate-{action_id}", daemon=True).start()

    def estimate(self, action_id: int, plan: list[tuple[str, int, list[int]]], concurrency: int | None) -> dict:
        """The ``move_estimate`` event's detail for a planned move: the estimate's partitions and
        total, or ``error`` saying why there is none. Never holds the move up more than
        ``RUN_WAIT_S``: the samples and the estimate's own requests (the brokers' configs) run in a
        thread, and a move that waited for earlier moves (``after_moves``) takes a fresh second
        sample, so its size is the one at its request."""
        deadline = time.monotonic() + RUN_WAIT_S
        slot = self._samples.pop(action_id, None)
        if slot is None:
            return {"error": "no samples taken before the move"}
        done, got = slot
        if not done.wait(RUN_WAIT_S):
            return {"error": f"the cluster's logs were not sampled within {RUN_WAIT_S:g} s of the move"}
        if len(got) < 2:
            return {"error": f"sampling the logs failed: {got[-1] if got else 'no sample'}"}
        out: dict[str, Any] = {}

        def body() -> None:
            try:
                with self._lock:
                    second = got[1]
                    if time.time() - second.ts > FRESH_S:
                        second = sample_logs(self.admin(), self.topics)
                    ack = self._client_ack(got[0].ts, second.ts) if self._client_ack is not None else None
                    out["e"] = self._fn(self.admin(), [{"topic": t, "partition": p, "replicas": to} for t, p, to in plan],
                                        got[0], second, system=self.system, link_bytes_per_s=self.link,
                                        concurrency=concurrency, client_ack_s=ack, producers=self.producers)
            except Exception as exc:  # noqa: BLE001 - no model for the system, no cap: said in the event
                out["error"] = f"{type(exc).__name__}: {exc}"

        t = threading.Thread(target=body, name=f"estimate-{action_id}-plan", daemon=True)
        t.start()
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            return {"error": f"no estimate within {RUN_WAIT_S:g} s (a broker slow to answer): the move went on"}
        if "error" in out:
            return {"error": out["error"]}
        e = out["e"]
        keep = ("topic", "partition", "seconds", "seconds_low", "seconds_high", "bytes", "feasible",
                "size_bytes", "ingest_bytes_per_s", "cap_bytes_per_s", "outcomes")
        return {"partitions": [{k: r.get(k) for k in keep} for r in e["partitions"]],
                "total_seconds": e["total_seconds"], "feasible": e["feasible"], "model": e["model"],
                "sample_seconds": e["sample_seconds"], "client_ack_seconds": e.get("client_ack_seconds")}

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing only
                pass
