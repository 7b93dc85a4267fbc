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

from kafka.protocol.consumer import (FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
                                     OffsetForLeaderEpochResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

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
EPOCH_VERSION = 3  # OffsetForLeaderEpoch: replica_id field (v3+), topic names
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET
MAX_TRUNCATION_ROUNDS = 16  # KIP-279 rounds before falling back to the high watermark


class LeaderEpochCache:
    """Kafka's leader-epoch-checkpoint (KIP-101): (epoch, start offset) of each leader epoch
    whose batches this replica holds, oldest first, persisted on every change (epochs change
    rarely) so it is on disk before any batch of a new epoch is."""

    def __init__(self, path: str | None):
        self.path = path
        self.entries: list[tuple[int, int]] = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def load(self) -> bool:
        """Read the checkpoint; False if it is missing or unreadable (the caller rebuilds)."""
        try:
            with open(self.path) as f:
                lines = f.read().split("\n")
            if lines[0].strip() != "0":
                return False
            n = int(lines[1])
            self.entries = [(int(a), int(b)) for a, b in (lines[2 + i].split() for i in range(n))]
            return True
        except (OSError, ValueError, IndexError):
            self.entries = []
            return False

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("0\n%d\n" % len(self.entries) + "".join("%d %d\n" % e for e in self.entries))
        os.replace(tmp, self.path)

    def assign(self, epoch: int, start: int, save: bool = True) -> None:
        """A new epoch starts at `start`. Entries that would break monotonicity (an epoch >= it
        or a start >= it) go first, as Kafka's LeaderEpochFileCache.assign."""
        if epoch < 0 or start < 0:
            return
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start:
            return
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()
        self.entries.append((epoch, start))
        if save:
            self._save()

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        """(largest known epoch <= `epoch`, its end offset): the start of the next larger epoch,
        or `leo` for the latest one; (UNDEFINED, UNDEFINED) if `epoch` is undefined or newer than
        every cached epoch. Older than every entry: (epoch, start of the first one)."""
        if epoch < 0 or not self.entries or epoch > self.latest_epoch:
            return UNDEFINED, UNDEFINED
        if epoch == self.latest_epoch:
            return epoch, leo
        i = next(i for i, (e, _) in enumerate(self.entries) if e > epoch)
        if i == 0:
            return epoch, self.entries[0][1]
        return self.entries[i - 1][0], self.entries[i][1]

    def truncate_from_end(self, end: int) -> None:
        """The log was truncated to `end`: entries starting at or after it go."""
        n = len(self.entries)
        while self.entries and self.entries[-1][1] >= end:
            self.entries.pop()
        if len(self.entries) != n:
            self._save()

    def truncate_from_start(self, start: int) -> None:
        """The log now starts at `start`: the last entry before it moves up to it."""
        before = [e for e in self.entries if e[1] <= start]
        keep = [(before[-1][0], start)] if before else []
        new = keep + [e for e in self.entries if e[1] > start]
        if new != self.entries:
            self.entries = new
            self._save()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self._save()


def truncation_step(own: LeaderEpochCache, leo: int, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """The follower's side of KIP-101/KIP-279, given the leader's answer (epoch, end offset) to
    OffsetForLeaderEpoch for this replica's latest epoch: (offset to truncate to, done). When the
    leader's epoch is one this replica does not have, truncate to where this replica's epochs
    below it end and ask again with the (now smaller) latest epoch."""
    own_epoch, own_end = own.end_offset_for(leader_epoch, leo)
    if own_epoch == UNDEFINED or own_end == UNDEFINED:
        return min(leader_end, leo), True  # nothing of ours at or below that epoch
    if own_epoch != leader_epoch:
        return min(own_end, leo), False
    return min(own_end, leader_end, leo), True


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
        self.epochs = LeaderEpochCache(os.path.join(store.dir, "leader-epoch-checkpoint"))
        self._load_epochs()
        # A new leader epoch: the log is checked against the leader (OffsetForLeaderEpoch) by
        # the fetcher before the next fetch of this partition (KIP-101).
        self.pending_truncation = False
        # The leader answered OFFSET_MOVED_TO_TIERED_STORAGE (tiered storage only): the backend
        # rebuilds this replica from object storage first; leader_log_start is the leader's.
        self.pending_rebuild = False
        self.leader_log_start = -1

    # -- leader epoch cache (Kafka's leader-epoch-checkpoint) ---------------------
    def _load_epochs(self) -> None:
        leo, start = self.store.log_end_offset, self.store.log_start_offset
        ok = self.epochs.load()
        if ok and leo > start:
            # A checkpoint older than the log's newest batch (or lost entries): rebuild.
            last = next(self.store.batches(leo - 1), None)
            ok = last is None or last.leader_epoch <= self.epochs.latest_epoch
        if not ok:
            self.epochs.entries = []
            for h in self.store.batches():
                self.epochs.assign(h.leader_epoch, h.base_offset, save=False)
            self.epochs._save()
        # kill -9 may have cut the log's tail after the checkpoint was written.
        self.epochs.truncate_from_end(leo)
        self.epochs.truncate_from_start(start)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch as the leader: (epoch, end offset) per Kafka's semantics."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def append_stamped(self, parts: list, h: records.BatchHeader) -> None:
        # As leader: batches carry this leader epoch (records.assign); become_leader already
        # recorded it, so this only matters if that was missed.
        self.epochs.assign(self.leader_epoch, h.base_offset)
        super().append_stamped(parts, h)

    def truncate_to(self, offset: int) -> None:
        """Drop the log from `offset` (whole batches), with the producer state and epoch cache;
        the high watermark follows if it was above the new end."""
        self.store.truncate_to(max(offset, self.store.log_start_offset))
        leo = self.log_end_offset
        self.producers.truncate(leo)
        self.epochs.truncate_from_end(leo)
        if self.hw > leo:
            self.hw = leo

    def on_epoch_end_offset(self, leader_epoch: int, end_offset: int) -> None:
        """The leader's OffsetForLeaderEpoch answer for this replica's latest epoch (pending
        truncation): truncate where the logs diverge; done unless another round is due (KIP-279)."""
        if leader_epoch == UNDEFINED or end_offset == UNDEFINED:
            self.truncate_to_hw()
            return
        offset, done = truncation_step(self.epochs, self.log_end_offset, leader_epoch, end_offset)
        if offset < self.log_end_offset:
            log.info("%s-%d: truncating from %d to %d (leader %d: epoch %d ends at %d)", self.topic, self.index,
                     self.log_end_offset, offset, self.info.leader, leader_epoch, end_offset)
            self.truncate_to(offset)
        if done:
            self.pending_truncation = False

    def truncate_to_hw(self) -> None:
        """Pre-KIP-101 truncation, for a leader that cannot say where its epochs end."""
        if self.log_end_offset > self.hw:
            log.info("%s-%d: truncating from %d to the high watermark %d (leader %d gave no epoch end)",
                     self.topic, self.index, self.log_end_offset, self.hw, self.info.leader)
            self.truncate_to(self.hw)
        self.pending_truncation = False

    def reset_to(self, offset: int) -> None:
        self.store.reset_to(offset)
        self.producers.truncate(0)
        self.epochs.clear()
        if self.hw > offset:
            self.hw = offset

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
        self.pending_truncation = False
        # KIP-101: this epoch starts at the log end as of now.
        self.epochs.assign(self.leader_epoch, self.log_end_offset)
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
            # A new leader epoch: not truncating to the HW here, which lags the leader's and would
            # drop acked records (lost for good if this replica is elected next). The fetcher
            # asks the leader where this log diverges from its own first (KIP-101).
            self.pending_truncation = self.log_end_offset > self.store.log_start_offset
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

    def replica_fetch_error(self, fetch_offset: int) -> int:
        """Why a follower may not fetch from `fetch_offset` here (NONE if it may)."""
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            return errors.OFFSET_OUT_OF_RANGE
        return errors.NONE

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
            if h.leader_epoch > self.epochs.latest_epoch:
                self.epochs.assign(h.leader_epoch, h.base_offset)  # before the batch is on disk
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
        self.epoch_api = False
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
            # Does the leader answer OffsetForLeaderEpoch (else: truncation to the HW, pre-KIP-101)?
            resp = await self.conn.request(ApiVersionsRequest[0](), ApiVersionsResponse, timeout=5)
            self.epoch_api = any(k.api_key == OffsetForLeaderEpochRequest.API_KEY
                                 and k.min_version <= EPOCH_VERSION <= k.max_version for k in resp.api_keys)
            return True
        except (OSError, asyncio.TimeoutError, ConnectionClosed):
            await self.conn.close()
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
                if any(p.pending_truncation for p in self.partitions.values()):
                    try:
                        await self._truncate()
                    except (ConnectionClosed, asyncio.TimeoutError, OSError):
                        await asyncio.sleep(0.2)
                        continue
                rebuild = [p for p in self.partitions.values() if p.pending_rebuild and not p.closed]
                if rebuild and not await self.backend.rebuild_from_remote(self, rebuild):
                    await asyncio.sleep(0.2)
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
        held_back = False  # a throttled partition left out of this fetch until the quota allows
        for key, p in list(self.partitions.items()):
            if p.closed or p.pending_truncation or p.pending_rebuild:
                continue
            if self.backend.follower_throttled(p) and quota.exceeded():
                held_back = True
                continue
            topics.setdefault(p.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=p.index, current_leader_epoch=p.leader_epoch, fetch_offset=p.log_end_offset,
                last_fetched_epoch=-1, log_start_offset=p.log_start_offset,
                partition_max_bytes=int(cfg["replica.fetch.max.bytes"])))
            sent[key] = (p, p.leader_epoch)
        wait_ms = int(cfg["replica.fetch.wait.max.ms"])
        if held_back:
            # The others' long poll must not keep the held-back partition waiting past the quota's
            # delay: otherwise a throttled catch-up runs at a fraction of its rate (fetch cycles of
            # replica.fetch.wait.max.ms) and may never reach a high watermark that keeps moving.
            wait_ms = min(wait_ms, int(quota.delay() * 1000) + 1)
        req = FetchRequest[FETCH_VERSION](
            replica_id=self.backend.broker.id, max_wait_ms=wait_ms, min_bytes=1,
            max_bytes=int(cfg["replica.fetch.response.max.bytes"]), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="")
        return req, sent

    def _handle(self, resp, sent) -> float:
        backoff = 0.0
        for t in resp.responses:
            for pr in t.partitions:
                p, epoch = sent.get((t.topic, pr.partition_index), (None, None))
                if p is None or p.closed or self.partitions.get(p.key) is not p:
                    continue
                if p.pending_truncation or p.pending_rebuild or p.leader_epoch != epoch:
                    continue  # a new leader epoch since the request: its log is checked first
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
                elif err == errors.OFFSET_MOVED_TO_TIERED_STORAGE:
                    # KIP-405: the leader has these offsets only in object storage; the backend
                    # rebuilds this replica's state from there before it fetches again.
                    p.pending_rebuild = True
                    p.leader_log_start = pr.log_start_offset
                elif err == errors.OFFSET_OUT_OF_RANGE:
                    if p.log_end_offset < pr.log_start_offset:
                        p.reset_to(pr.log_start_offset)
                    else:
                        p.truncate_to(max(pr.high_watermark, p.log_start_offset))
                    log.info("%s-%d: out of range at leader %d, now at %d", p.topic, p.index, self.leader,
                             p.log_end_offset)
                else:
                    backoff = 0.1  # not leader / stale epoch: metadata will tell us more
        return backoff

    async def _truncate(self) -> None:
        """Resolve every partition pending truncation (a new leader epoch) before fetching it
        again: ask the leader for the end offset of this replica's latest epoch and truncate to
        where the logs diverge (KIP-101), repeating while the leader answers an epoch this replica
        does not have (KIP-279). A leader without the API or without the epoch: the HW."""
        rounds = 0
        while True:
            truncating = [p for p in self.partitions.values() if p.pending_truncation and not p.closed]
            if not truncating:
                return
            if not self.epoch_api or rounds >= MAX_TRUNCATION_ROUNDS:
                for p in truncating:
                    p.truncate_to_hw()
                return
            rounds += 1
            asked: dict[tuple[str, int], tuple[ReplicaPartition, int, int]] = {}
            topics: dict[str, list] = {}
            for p in truncating:
                if p.epochs.latest_epoch < 0:
                    p.truncate_to_hw()  # no epoch known here (an empty log)
                    continue
                asked[p.key] = (p, p.leader_epoch, p.epochs.latest_epoch)
                topics.setdefault(p.topic, []).append(
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=p.index, current_leader_epoch=p.leader_epoch,
                        leader_epoch=p.epochs.latest_epoch))
            if not asked:
                return
            req = OffsetForLeaderEpochRequest[EPOCH_VERSION](
                replica_id=self.backend.broker.id,
                topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()])
            resp = await self.conn.request(req, OffsetForLeaderEpochResponse, timeout=10)
            retry_later = False
            for t in resp.topics:
                for r in t.partitions:
                    p, epoch, asked_epoch = asked.pop((t.topic, r.partition), (None, None, None))
                    if p is None or p.closed or self.partitions.get(p.key) is not p or p.leader_epoch != epoch \
                            or not p.pending_truncation or p.epochs.latest_epoch != asked_epoch:
                        continue  # changed meanwhile: asked again next round
                    if r.error_code != errors.NONE:
                        retry_later = True  # not leader / stale epoch: metadata will tell us more
                        continue
                    p.on_epoch_end_offset(r.leader_epoch, r.end_offset)
            if asked or retry_later:
                # Partitions the leader did not answer for, or refused: fetch the others meanwhile.
                await asyncio.sleep(0.1)
                return

    async def close(self) -> None:
        self.task.cancel()
        if self.conn is not None:
            await self.conn.close()


class ReplicationBackend(Backend):
    name = "replication"
    leader_epoch_cache = True  # partitions answer OffsetForLeaderEpoch (systems/core/broker.py)

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
        return self.partition_class(self, info, LocalLog(d, segment_bytes=self.segment_bytes(info.topic)))

    partition_class = ReplicaPartition

    def segment_bytes(self, topic: str) -> int:
        return int(self.broker.image.topic_config(topic, "segment.bytes", self.broker.config["log.segment.bytes"]))

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

    async def rebuild_from_remote(self, fetcher: "Fetcher", parts: list[ReplicaPartition]) -> bool:
        """Offsets the leader has only in object storage: nothing to rebuild from without tiered
        storage, so start at the leader's log start (as after OFFSET_OUT_OF_RANGE)."""
        for p in parts:
            p.reset_to(max(p.leader_log_start, 0))
            p.pending_rebuild = False
        return True

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
                    err = p.replica_fetch_error(fp.fetch_offset)
                    if err == errors.NONE:
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
            if self.broker.image.offset >= res["offset"] and p.pending_isr == isr:
                # Answered, and what the controller committed is in the image now. Cleared here
                # too, not only on a new partition epoch: a proposal the controller found already
                # applied commits nothing, and a pending ISR left set would block every later one.
                p.pending_isr = None
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
                                 "reassign_bytes_in": p.bytes_in, "reassign_bytes_out": p.bytes_out,
                                 "pending_isr": p.pending_isr,
                                 "follower_offsets": {str(r): st.leo for r, st in p.followers.items()}}
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
