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


def sample_logs(admin, topics: set[str]) -> LogSample:
    """Replicas and leaders (Metadata), every replica's log size (DescribeLogDirs of the brokers
    holding one) and the leaders' offsets (ListOffsets) of ``topics``; a broker that does not answer
    is left out."""
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
    s.ts = (s.ts + time.time()) / 2
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
                 link_bytes_per_s: float | None, concurrency: int | None) -> dict[str, Any]: ...


class RunEstimator:
    """The estimates a run makes before its moves, with an admin client of its own (a silent
    broker delays only the estimate, never the move's request nor the watchers): ``prepare`` takes
    the first sample ``RUN_WINDOW_S`` before a move and the second at its time, in a thread;
    ``estimate`` turns them into the move's estimate when the move is planned."""

    def __init__(self, estimate_fn: EstimateFn, admin_factory, topics: set[str], system: str | None,
                 link_bytes_per_s: float | None) -> None:
        self._fn = estimate_fn
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
                    got.append(sample_logs(self.admin(), self.topics))
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
                    out["e"] = self._fn(self.admin(), [{"topic": t, "partition": p, "replicas": to} for t, p, to in plan],
                                        got[0], second, system=self.system, link_bytes_per_s=self.link,
                                        concurrency=concurrency)
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
                "size_bytes", "ingest_bytes_per_s", "cap_bytes_per_s")
        return {"partitions": [{k: r.get(k) for k in keep} for r in e["partitions"]],
                "total_seconds": e["total_seconds"], "feasible": e["feasible"], "model": e["model"],
                "sample_seconds": e["sample_seconds"]}

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing only
                pass
