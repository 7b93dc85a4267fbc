"""Broker side of the replication-copy system (classic Kafka).

Every replica keeps a local segmented log. Followers fetch from the leader
with replica Fetch requests (one fetcher per source broker, as Kafka's fetcher
threads); the leader tracks their log end offsets, advances the high
watermark over the ISR, and proposes ISR shrinks (a follower lagging more than
`replica.lag.time.max.ms`) and expansions (a follower caught up to the HW) to
the controller. A reassignment's new replicas are ordinary followers that
start from the leader's log start offset: the whole partition is copied,
under the replication throttle.

Metrics for the harness: DIR/metrics.json (rewritten every second) and
`bytes_moved` events (increments) in DIR/events.jsonl.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass

from kafka.protocol.consumer import FetchRequest, FetchResponse

from systems.core import errors, records
from systems.core.broker import Backend
from systems.core.client import ConnectionClosed, KafkaConnection
from systems.core.config import LONG_MAX
from systems.core.log import LocalLog
from systems.core.metadata import PartitionInfo
from systems.core.partition import Partition
from systems.core.rpc import RpcError, RpcUnavailable
from systems.replication.throttle import Quota, is_listed

log = logging.getLogger("replication")
FETCH_VERSION = 12  # flexible, topic names, replica_id field


@dataclass
class FollowerState:
    leo: int = -1
    last_caught_up: float = 0.0
    last_fetch_leo: int = -1
    last_fetch_time: float = 0.0


class ReplicaPartition(Partition):
    def __init__(self, backend: "ReplicationBackend", info: PartitionInfo, store: LocalLog):
        super().__init__(backend.broker.id, info, store)
        self.backend = backend
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: list[int] | None = None  # ISR proposal in flight
        self._append_waiters: set[asyncio.Future] = set()
        self.hw = min(self._read_hw_checkpoint(), store.log_end_offset)
        self._follow_epoch = None
        self.bytes_in = 0  # reassignment copy, as the new replica
        self.bytes_out = 0  # reassignment copy, as the leader
        self.leader_hw = -1  # the leader's high watermark in its last fetch response (as a follower)
        self._reported_in = self._reported_out = 0

    # -- HW checkpoint (Kafka's replication-offset-checkpoint) -----------------
    @property
    def _hw_path(self) -> str:
        return os.path.join(self.store.dir, "hw.checkpoint")

    def _read_hw_checkpoint(self) -> int:
        try:
            with open(self._hw_path) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def checkpoint_hw(self) -> None:
        tmp = self._hw_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(self.hw))
        os.replace(tmp, self._hw_path)

    # -- roles ------------------------------------------------------------------
    @property
    def reassigning_in(self) -> bool:
        return self.broker_id in self.info.adding

    def on_metadata(self, info: PartitionInfo) -> None:
        if self.pending_isr is not None and info.partition_epoch != self.info.partition_epoch:
            self.pending_isr = None
        super().on_metadata(info)
        if self.is_leader:
            now = time.monotonic()
            for r in info.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerState(last_caught_up=now, last_fetch_time=now)
            for r in list(self.followers):
                if r not in info.replicas:
                    del self.followers[r]
            self.maybe_advance_hw()

    def become_leader(self) -> None:
        self.backend.unfollow(self)
        now = time.monotonic()
        # Followers get a full lag period to show up before they can be dropped.
        self.followers = {r: FollowerState(last_caught_up=now, last_fetch_time=now)
                          for r in self.info.replicas if r != self.broker_id}
        self.pending_isr = None
        self.maybe_advance_hw()

    def become_follower(self) -> None:
        leader = self.info.leader
        if leader < 0 or leader == self.broker_id:
            self.backend.unfollow(self)
            return
        if self._follow_epoch != self.info.leader_epoch:
            # A new leader: drop what may not be committed, refetch from it
            # (Kafka's truncation to the high watermark).
            if self.log_end_offset > self.hw:
                self.store.truncate_to(self.hw)
                self.producers.truncate(self.hw)
            self._follow_epoch = self.info.leader_epoch
        self.backend.follow(self, leader)

    # -- leader: appends, HW, ISR -----------------------------------------------
    def after_append(self, new_leo: int) -> None:
        for fut in self._append_waiters:
            if not fut.done():
                fut.set_result(None)
        self._append_waiters.clear()
        self.maybe_advance_hw()

    def append_waiter(self) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._append_waiters.add(fut)
        return fut

    def effective_isr(self) -> list[int]:
        """The "maximal" ISR: while an expansion is pending, the new member
        already counts for the HW, so everything acked is on it when the
        controller commits the change (Kafka's pending ISR)."""
        isr = list(self.info.isr)
        for r in self.pending_isr or []:
            if r not in isr:
                isr.append(r)
        return isr

    def maybe_advance_hw(self) -> None:
        if not self.is_leader:
            return
        leos = [self.log_end_offset]
        for r in self.effective_isr():
            if r != self.broker_id:
                st = self.followers.get(r)
                leos.append(st.leo if st is not None else -1)
        new = min(leos)
        if new > self.hw:
            self.advance_hw(new)

    def min_isr(self) -> int:
        return int(self.backend.broker.image.topic_config(self.topic, "min.insync.replicas",
                                                          self.backend.broker.setting("min.insync.replicas")))

    def check_min_isr(self) -> int:
        if len(self.info.isr) < self.min_isr():
            return errors.NOT_ENOUGH_REPLICAS
        return errors.NONE

    def follower_fetched(self, replica: int, fetch_offset: int, now: float) -> None:
        st = self.followers.get(replica)
        if st is None:
            st = self.followers[replica] = FollowerState(last_caught_up=now, last_fetch_time=now)
        leo = self.log_end_offset
        # Kafka's rule: caught up if it reached the LEO as of its previous fetch.
        if fetch_offset >= leo:
            st.last_caught_up = now
        elif fetch_offset >= st.last_fetch_leo >= 0:
            st.last_caught_up = max(st.last_caught_up, st.last_fetch_time)
        st.leo = fetch_offset
        st.last_fetch_leo, st.last_fetch_time = leo, now
        self.maybe_advance_hw()
        if replica not in self.info.isr and fetch_offset >= self.hw and self.pending_isr is None:
            self.backend.propose_isr(self, self.info.isr + [replica])

    def check_lagging(self, now: float, lag_max: float) -> None:
        if not self.is_leader or self.pending_isr is not None:
            return
        lagging = [r for r in self.info.isr if r != self.broker_id and r in self.followers
                   and now - self.followers[r].last_caught_up > lag_max]
        if lagging:
            log.warning("%s-%d: followers %s lag more than %.0fs, shrinking ISR", self.topic, self.index,
                        lagging, lag_max)
            self.backend.propose_isr(self, [r for r in self.info.isr if r not in lagging])

    # -- follower: appends from the leader --------------------------------------
    def append_replicated(self, data: bytes) -> int:
        """Append batches fetched from the leader (already stamped). Returns bytes."""
        n = 0
        expected = self.log_end_offset
        for pos, h in records.iter_batches(data):
            if h.last_offset < expected:
                continue  # the fetch started inside a batch we already have
            self.store.append([memoryview(data)[pos:pos + h.length]], h.base_offset, h.last_offset,
                              h.max_timestamp)
            self.producers.update(h)
            expected = h.last_offset + 1
            n += h.length
        return n


class Fetcher:
    """Replicates every partition this broker follows from one leader broker."""

    def __init__(self, backend: "ReplicationBackend", leader: int):
        self.backend = backend
        self.leader = leader
        self.partitions: dict[tuple[str, int], ReplicaPartition] = {}
        self.wake = asyncio.Event()
        self.conn: KafkaConnection | None = None
        self.task = asyncio.create_task(self.run())

    async def _connect(self) -> bool:
        b = self.backend.broker.image.brokers.get(self.leader)
        if b is None:
            return False
        if self.conn is not None and self.conn.connected and (self.conn.host, self.conn.port) == (b.host, b.port):
            return True
        if self.conn is not None:
            await self.conn.close()
        self.conn = KafkaConnection(b.host, b.port, f"replica-fetcher-{self.backend.broker.id}")
        try:
            await self.conn.connect()
            return True
        except (OSError, asyncio.TimeoutError):
            self.conn = None
            return False

    async def run(self) -> None:
        broker = self.backend.broker
        while True:
            try:
                if not self.partitions:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                if not await self._connect():
                    await asyncio.sleep(0.2)
                    continue
                req, sent = self._request()
                if not sent:
                    await asyncio.sleep(self.backend.follower_quota.delay() or 0.05)
                    continue
                try:
                    resp = await self.conn.request(req, FetchResponse, timeout=30)
                except (ConnectionClosed, asyncio.TimeoutError, OSError):
                    await asyncio.sleep(0.2)
                    continue
                backoff = self._handle(resp, sent)
                if backoff:
                    await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher for leader %d (broker %d) failed; retrying", self.leader, broker.id)
                await asyncio.sleep(0.5)

    def _request(self):
        cfg = self.backend.broker.config
        quota = self.backend.follower_quota
        topics: dict[str, list] = {}
        sent = {}
        for key, p in list(self.partitions.items()):
            if p.closed:
                continue
            if self.backend.follower_throttled(p) and quota.exceeded():
                continue
            topics.setdefault(p.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=p.index, current_leader_epoch=p.leader_epoch, fetch_offset=p.log_end_offset,
                last_fetched_epoch=-1, log_start_offset=p.log_start_offset,
                partition_max_bytes=int(cfg["replica.fetch.max.bytes"])))
            sent[key] = p
        req = FetchRequest[FETCH_VERSION](
            replica_id=self.backend.broker.id, max_wait_ms=int(cfg["replica.fetch.wait.max.ms"]), min_bytes=1,
            max_bytes=int(cfg["replica.fetch.response.max.bytes"]), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="")
        return req, sent

    def _handle(self, resp, sent) -> float:
        backoff = 0.0
        for t in resp.responses:
            for pr in t.partitions:
                p = sent.get((t.topic, pr.partition_index))
                if p is None or p.closed or self.partitions.get(p.key) is not p:
                    continue
                err = pr.error_code
                if err == errors.NONE:
                    data = pr.records or b""
                    if data:
                        n = p.append_replicated(data)
                        if self.backend.follower_throttled(p):
                            self.backend.follower_quota.charge(n)
                        if p.reassigning_in:
                            p.bytes_in += n
                    p.leader_hw = pr.high_watermark
                    p.advance_hw(min(pr.high_watermark, p.log_end_offset))
                elif err == errors.OFFSET_OUT_OF_RANGE:
                    if p.log_end_offset < pr.log_start_offset:
                        p.store.reset_to(pr.log_start_offset)
                        p.producers.truncate(0)
                    else:
                        p.store.truncate_to(max(pr.high_watermark, p.log_start_offset))
                        p.producers.truncate(p.log_end_offset)
                    log.info("%s-%d: out of range at leader %d, now at %d", p.topic, p.index, self.leader,
                             p.log_end_offset)
                else:
                    backoff = 0.1  # not leader / stale epoch: metadata will tell us more
        return backoff

    async def close(self) -> None:
        self.task.cancel()
        if self.conn is not None:
            await self.conn.close()


class ReplicationBackend(Backend):
    name = "replication"

    def __init__(self, broker):
        super().__init__(broker)
        self.fetchers: dict[int, Fetcher] = {}
        self.leader_quota = Quota(None)
        self.follower_quota = Quota(None)
        self._tasks: list[asyncio.Task] = []
        self._isr_inflight: set[tuple[str, int]] = set()
        self._swept = False

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._housekeeping()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for f in self.fetchers.values():
            await f.close()
        for p in self.broker.partitions.values():
            p.checkpoint_hw()
        self._write_metrics()

    # -- DescribeLogDirs ---------------------------------------------------------
    def log_dir(self) -> str:
        return os.path.abspath(os.path.join(self.broker.dir, "data"))

    def replica_log(self, part: ReplicaPartition) -> tuple[int, int]:
        """Size of the replica's segments here; offset_lag 0 on the leader, and on a follower the
        leader's high watermark (from its last fetch response; a follower never sees the leader's
        log end) minus this replica's log end, so a replica being filled by a move shows what it
        still has to copy."""
        lag = 0 if part.is_leader or part.leader_hw < 0 else max(part.leader_hw - part.log_end_offset, 0)
        return int(part.store.size_bytes), lag

    # -- partitions -------------------------------------------------------------
    def partition_dir(self, info: PartitionInfo) -> str:
        return os.path.join(self.broker.dir, "data", f"{info.topic}-{info.partition}")

    def open_partition(self, info: PartitionInfo) -> ReplicaPartition:
        d = self.partition_dir(info)
        meta = os.path.join(d, "partition.metadata")
        if os.path.exists(meta):
            with open(meta) as f:
                if json.load(f).get("topic_id") != info.topic_id:
                    shutil.rmtree(d)  # left over from a deleted topic of the same name
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(meta):
            with open(meta, "w") as f:
                json.dump({"topic_id": info.topic_id}, f)
        store = LocalLog(d, segment_bytes=int(self.broker.config["log.segment.bytes"]))
        return ReplicaPartition(self, info, store)

    def remove_partition(self, part: ReplicaPartition, deleted: bool) -> None:
        self.unfollow(part)
        self._report_bytes(part)
        log.info("removing replica %s-%d (%s)", part.topic, part.index, "topic deleted" if deleted else "moved away")
        part.delete()

    def follow(self, part: ReplicaPartition, leader: int) -> None:
        for lid, f in self.fetchers.items():
            if lid != leader:
                f.partitions.pop(part.key, None)
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = Fetcher(self, leader)
        f.partitions[part.key] = part
        f.wake.set()

    def unfollow(self, part: ReplicaPartition) -> None:
        for f in self.fetchers.values():
            if f.partitions.get(part.key) is part:
                del f.partitions[part.key]

    def on_metadata(self, changed) -> None:
        self._refresh_quotas()

    # -- throttles ----------------------------------------------------------------
    def _rate(self, key: str):
        img = self.broker.image
        for res in (f"broker:{self.broker.id}", "broker:"):
            v = img.configs.get(res, {}).get(key)
            if v is not None:
                return float(v) if 0 < float(v) < LONG_MAX else None  # Long.MAX_VALUE: Kafka's "none"
        v = self.broker.config.get(key)
        return float(v) if v and float(v) < LONG_MAX else None

    def _refresh_quotas(self) -> None:
        self.leader_quota.set_rate(self._rate("leader.replication.throttled.rate"))
        self.follower_quota.set_rate(self._rate("follower.replication.throttled.rate"))

    def follower_throttled(self, p: ReplicaPartition) -> bool:
        if self.follower_quota.rate is None or self.broker.id in p.info.isr:
            return False
        value = self.broker.image.topic_config(p.topic, "follower.replication.throttled.replicas")
        return is_listed(value, p.index, self.broker.id)

    def leader_throttled(self, p: ReplicaPartition, replica: int) -> bool:
        if self.leader_quota.rate is None or replica in p.info.isr:
            return False
        value = self.broker.image.topic_config(p.topic, "leader.replication.throttled.replicas")
        return is_listed(value, p.index, self.broker.id)

    # -- leader side of replica fetch ---------------------------------------------
    async def replica_fetch(self, req, header):
        v = header.request_api_version
        replica = req.replica_state.replica_id if v >= 15 and req.replica_state is not None else req.replica_id
        deadline = time.monotonic() + req.max_wait_ms / 1000
        first = True
        while True:
            resp, total, parts = self._replica_fetch_once(req, v, replica, update=first)
            first = False
            remaining = deadline - time.monotonic()
            if total > 0 or remaining <= 0 or not parts:
                return resp
            waiters = [p.append_waiter() for p in parts]
            delay = self.leader_quota.delay()
            await asyncio.wait(waiters, timeout=min(remaining, delay) if delay else remaining,
                               return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()

    def _replica_fetch_once(self, req, v, replica: int, update: bool):
        R = FetchResponse
        budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
        now = time.monotonic()
        total = 0
        waitable = []
        topics = []
        for ft in req.topics:
            name = ft.topic if v <= 12 else self.broker.topic_name(None, ft.topic_id)
            presp = []
            for fp in ft.partitions:
                err, hw, records_out, log_start = errors.NONE, -1, b"", -1
                p, err = self.broker.leader_partition(name, fp.partition) if name else (None,
                                                                                         errors.UNKNOWN_TOPIC_ID)
                if p is not None:
                    err = p.check_epoch(fp.current_leader_epoch)
                    if err == errors.NONE and replica not in p.info.replicas:
                        err = errors.NOT_LEADER_OR_FOLLOWER
                if err == errors.NONE:
                    log_start = p.log_start_offset
                    if fp.fetch_offset < log_start or fp.fetch_offset > p.log_end_offset:
                        err = errors.OFFSET_OUT_OF_RANGE
                    else:
                        if update:
                            p.follower_fetched(replica, fp.fetch_offset, now)
                        throttled = self.leader_throttled(p, replica)
                        if fp.fetch_offset < p.log_end_offset and budget > 0 and not (
                                throttled and self.leader_quota.exceeded()):
                            limit = min(fp.partition_max_bytes, budget)
                            records_out = p.read(fp.fetch_offset, limit, upto=p.log_end_offset)
                            total += len(records_out)
                            budget -= len(records_out)
                            if throttled:
                                self.leader_quota.charge(len(records_out))
                            if replica in p.info.adding:
                                p.bytes_out += len(records_out)
                        waitable.append(p)
                    hw = p.hw
                presp.append(R.FetchableTopicResponse.PartitionData(
                    partition_index=fp.partition, error_code=err, high_watermark=hw, last_stable_offset=hw,
                    log_start_offset=log_start, aborted_transactions=[], preferred_read_replica=-1,
                    records=records_out))
            topics.append(R.FetchableTopicResponse(topic=ft.topic, topic_id=ft.topic_id, partitions=presp))
        return R(version=v, throttle_time_ms=0, error_code=0, session_id=0, responses=topics), total, waitable

    # -- ISR proposals -------------------------------------------------------------
    def propose_isr(self, p: ReplicaPartition, isr: list[int]) -> None:
        if p.key in self._isr_inflight:
            return
        self._isr_inflight.add(p.key)
        if any(r not in p.info.isr for r in isr):
            p.pending_isr = isr
        asyncio.create_task(self._alter_partition(p, isr))

    async def _alter_partition(self, p: ReplicaPartition, isr: list[int]) -> None:
        try:
            res = await self.broker.rpc.call(
                "alter_partition", timeout=10, broker_id=self.broker.id, broker_epoch=self.broker.epoch,
                topic_id=p.topic_id, partition=p.index, leader_epoch=p.leader_epoch,
                partition_epoch=p.info.partition_epoch, isr=isr)
            await self.broker.wait_metadata(res["offset"], timeout=10)
        except (RpcError, RpcUnavailable) as e:
            log.info("ISR change %s for %s-%d not applied: %s", isr, p.topic, p.index, e)
            p.pending_isr = None
        finally:
            self._isr_inflight.discard(p.key)

    # -- housekeeping --------------------------------------------------------------
    async def _housekeeping(self) -> None:
        tick = 0
        while True:
            await asyncio.sleep(0.5)
            tick += 1
            now = time.monotonic()
            lag_max = self.broker.config["replica.lag.time.max.ms"] / 1000
            for p in list(self.broker.partitions.values()):
                p.check_lagging(now, lag_max)
                self._report_bytes(p)
            if not self._swept:
                self._sweep_orphans()
            if tick % 2 == 0:
                for p in list(self.broker.partitions.values()):
                    p.checkpoint_hw()
                self._write_metrics()

    def _sweep_orphans(self) -> None:
        """Once caught up with the metadata (unfenced), delete replicas this broker
        no longer hosts: removed or deleted while it was down, as Kafka does."""
        b = self.broker.image.brokers.get(self.broker.id)
        if b is None or b.fenced or b.epoch != self.broker.epoch:
            return
        self._swept = True
        root = os.path.join(self.broker.dir, "data")
        if not os.path.isdir(root):
            return
        hosted = {self.partition_dir(p.info) for p in self.broker.partitions.values()}
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if path not in hosted and os.path.isdir(path):
                log.info("deleting stray replica %s (not assigned to this broker)", name)
                shutil.rmtree(path, ignore_errors=True)

    def _report_bytes(self, p: ReplicaPartition) -> None:
        for attr, kind in (("bytes_in", "reassign_in"), ("bytes_out", "reassign_out")):
            total = getattr(p, attr)
            seen = getattr(p, "_reported_" + attr[6:])
            if total > seen:
                self.broker.events.emit("bytes_moved", kind="inter_broker", direction=kind, topic=p.topic,
                                        partition=p.index, bytes=total - seen, total=total)
                setattr(p, "_reported_" + attr[6:], total)

    def metrics(self) -> dict:
        parts = {}
        for (t, i), p in sorted(self.broker.partitions.items()):
            parts[f"{t}-{i}"] = {"log_size_bytes": p.store.size_bytes, "log_start_offset": p.log_start_offset,
                                 "log_end_offset": p.log_end_offset, "high_watermark": p.hw,
                                 "leader": p.info.leader, "isr": p.info.isr, "replicas": p.info.replicas,
                                 "adding": p.info.adding, "removing": p.info.removing,
                                 "reassign_bytes_in": p.bytes_in, "reassign_bytes_out": p.bytes_out}
        return {"ts": time.time(), "broker": self.broker.id,
                "reassign_bytes_in": sum(p.bytes_in for p in self.broker.partitions.values()),
                "reassign_bytes_out": sum(p.bytes_out for p in self.broker.partitions.values()),
                "partitions_reassigning": sum(1 for p in self.broker.partitions.values() if p.info.reassigning),
                "leader_throttle_bytes_per_s": self.leader_quota.rate,
                "follower_throttle_bytes_per_s": self.follower_quota.rate,
                "partitions": parts}

    def _write_metrics(self) -> None:
        path = os.path.join(self.broker.dir, "metrics.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.metrics(), f, indent=1)
        os.replace(tmp, path)


BACKEND = ReplicationBackend
