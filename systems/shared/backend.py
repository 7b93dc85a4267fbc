"""Shared-storage backend: stateless brokers, data in object storage (AutoMQ-style).

Write path: produce -> log cache -> the broker's WAL in object storage. Appends are gathered
and written as one WAL object every `wal.batch.interval.ms` or `wal.batch.max.bytes`; a produce
is acknowledged (its partition's high watermark advances) only once its WAL object and every
earlier one are durable, and only while the broker holds a valid lease (a heartbeat the
controller accepted less than a session timeout ago), so a broker the controller has fenced
and failed over can never acknowledge, or make visible, a late write.

Upload path: once durable-but-unuploaded bytes pass `wal.upload.threshold.bytes` (or every
`wal.upload.interval.ms`), the cached data of every partition goes into one stream-set object
(data + index + a meta-stream snapshot per partition), committed to the controller's stream
metadata; WAL objects it covers are deleted. Older data is read back with object range GETs.

Moves (the six steps of the seed article): the controller's partition change leaves this broker
(the source) without the partition -> it stops accepting writes, waits for in-flight WAL
writes, persists the meta stream (clean shutdown, producer snapshot, leader-epoch checkpoint,
segment list), force-uploads the partition's unuploaded tail and closes its streams at the
controller, which then elects the target. The target opens the streams with a new epoch,
replays the meta stream (clean path: snapshot; unclean path: scan from the snapshot offset)
and serves. Phase timings go to events.jsonl. With `shared.move.upload.bytes.per.s` the close's
uploads (the meta and the forced tail) are paced to that rate, one budget per broker shared by the
partitions leaving it at once (the operator's move budget; WAL and background uploads are not).
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
import weakref

from systems.core import errors, records
from systems.core.broker import Backend
from systems.core.metadata import PartitionInfo
from systems.core.partition import Partition
from systems.core.producer_state import ProducerStateTable
from systems.core.rpc import RpcError, RpcUnavailable
from systems.shared import formats
from systems.shared.objstore import ObjectStore, ObjectStoreError, TokenBucket, purpose
from systems.shared.settings import DEFAULTS as SETTINGS_DEFAULTS
from systems.shared.settings import SharedSettings, failpoint, s3_config
from systems.shared.store import StreamStore
from systems.shared.streams import OPENED, STREAM_FENCED, STREAM_NOT_CLOSED, STREAM_NOT_FOUND, StreamRegistry

log = logging.getLogger("shared.backend")

IDLE, RECOVERING, READY, CLOSING, CLOSED, FENCED = "idle", "recovering", "ready", "closing", "closed", "fenced"


def _requests_tag(step: str, p) -> str:
    """The purpose a partition's close or open counts its object-store requests under."""
    return f"{step}:{p.topic}-{p.index}"


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 3)


class WalItem:
    __slots__ = ("part", "stream_id", "epoch", "base", "last", "max_ts", "data")

    def __init__(self, part, stream_id, epoch, base, last, max_ts, data):
        self.part, self.stream_id, self.epoch = part, stream_id, epoch
        self.base, self.last, self.max_ts, self.data = base, last, max_ts, data


class SharedPartition(Partition):
    def __init__(self, backend: "SharedBackend", info: PartitionInfo):
        self.backend = backend
        self.state = IDLE
        store = StreamStore(backend, self._notify)
        super().__init__(backend.broker.id, info, store)
        self.store: StreamStore = store
        self.upload_lock = asyncio.Lock()
        self._confirm_waiters: list[tuple[int, asyncio.Future]] = []
        self._open_state()

    def _open_state(self) -> None:
        """What one open of the partition builds, from IDLE (a new object, or one led again)."""
        self.state = IDLE
        self.leading = False
        self.incarnation = -1  # broker epoch under which the streams were opened
        self.data_sid = self.meta_sid = -1
        self.data_epoch = self.meta_epoch = -1
        self.meta_end = 0
        self.durable_producers = ProducerStateTable()
        self.leader_epochs: list[list[int]] = []
        self.pending_bytes = 0  # appended, not yet WAL-durable
        self.unuploaded = 0  # WAL-durable, not yet in stream objects
        # By reference (snapshot handoff): the durable WAL ranges not yet committed to the data
        # stream, in offset order: (key, object size, range).
        self.wal_refs: list[tuple[str, int, dict]] = []
        self.restored = False  # producer state and checkpoints loaded from the meta stream
        self._move = None
        self.recovery_task: asyncio.Task | None = None
        self.close_task: asyncio.Task | None = None
        self.ended_at_epoch: int | None = None  # the leader epoch it was closed or fenced under

    def _notify(self) -> None:
        self.notify_data()

    # -- leadership ---------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.state == READY and not self.closed and self.info.leader == self.broker_id

    @property
    def serving(self) -> bool:
        """Leading, and only under a valid lease: a broker cut off from the controller may have
        been failed over, and its metadata may still name it the owner; serving reads from its
        stale state would hide writes the new owner acknowledged (NOT_LEADER_OR_FOLLOWER sends the
        client to fresh metadata)."""
        return self.is_leader and self.backend.lease_valid()

    def become_leader(self) -> None:  # the core's hook: never advance hw past durable data here
        pass

    def on_metadata(self, info: PartitionInfo) -> None:
        self.info = info
        me = self.broker_id
        if info.leader == me and self.ended() and info.leader_epoch > (self.ended_at_epoch or -1):
            # Led again under a newer epoch on the same replica set (a failover found no other broker,
            # then this one came back): a fresh open, as a new partition object would do.
            self._reset_for_open()
        if info.leader == me and self.state == IDLE and not self.closed:
            self.state = RECOVERING
            self.leading = True
            self.recovery_task = asyncio.get_running_loop().create_task(self.backend.recover(self))
        elif info.leader != me and self.state in (RECOVERING, READY):
            # Still a replica but no longer the leader (only when no broker is left to take it).
            self.leading = False
            self.backend.start_close(self, "leadership lost")

    # -- produce ------------------------------------------------------------------------
    def append(self, batch, max_message_bytes: int):
        if self.state != READY:
            raise errors.KafkaError(errors.NOT_LEADER_OR_FOLLOWER, "partition is moving")
        if self.backend.wal.pending_bytes > self.backend.settings.wal_max_pending_bytes:
            raise errors.KafkaError(errors.KAFKA_STORAGE_ERROR,
                                    "object storage is not keeping up: WAL backlog full, retry later")
        return super().append(batch, max_message_bytes)

    def append_stamped(self, parts: list, h: records.BatchHeader) -> None:
        if h.producer_id >= 0:
            e = self.producers.producers.get(h.producer_id)
            if e is None or e.epoch != h.producer_epoch:
                # A producer this partition has no session for (or a bumped epoch): visible in
                # events so a test can tell a kept idempotent session from a new one.
                self.backend.broker.events.emit("shared_producer_session", topic=self.topic, partition=self.index,
                                                producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                                                base_sequence=h.base_sequence, known=e is not None)
        data = self.store.append(parts, h.base_offset, h.last_offset, h.max_timestamp)
        self.producers.update(h)
        self.pending_bytes += len(data)
        self.backend.wal.add(WalItem(self, self.data_sid, self.data_epoch, h.base_offset, h.last_offset,
                                     h.max_timestamp, data))
        self.backend.on_cache_growth(len(data))

    def after_append(self, new_leo: int) -> None:
        pass

    async def wait_acked(self, last_offset: int, acks: int, timeout: float) -> int:
        # Every acks level that gets a response waits for the WAL object to be durable.
        return await self.wait_hw(last_offset + 1, timeout)

    def on_confirmed(self, item: WalItem) -> None:
        """Its WAL object and all earlier ones are durable."""
        if item.base != self.store.confirmed:
            return  # from an older ownership of this partition
        self.durable_producers.update(records.parse_header(item.data))
        self.store.confirmed = item.last + 1
        self.pending_bytes -= len(item.data)
        self.unuploaded += len(item.data)
        if self.backend.lease_valid():
            self.advance_hw(self.store.confirmed)
        keep = []
        for off, fut in self._confirm_waiters:
            if self.store.confirmed >= off:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((off, fut))
        self._confirm_waiters = keep

    async def wait_confirmed(self, offset: int, timeout: float) -> bool:
        if self.store.confirmed >= offset:
            return True
        fut = asyncio.get_running_loop().create_future()
        self._confirm_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def ended(self) -> bool:
        """Closed or fenced, its open and close both finished: it serves again only after a fresh open."""
        return self.state in (CLOSED, FENCED) and all(t is None or t.done() for t in (self.recovery_task, self.close_task))

    def _reset_for_open(self) -> None:
        log.info("%s-%d led again at leader epoch %d: opening it afresh", self.topic, self.index, self.info.leader_epoch)
        self.closed = False
        self.store = StreamStore(self.backend, self._notify)  # the old one's cache and blocks are stale
        self._open_state()

    def fence(self, why: str) -> None:
        if self.state in (CLOSED, FENCED):
            return
        log.warning("%s-%d fenced: %s", self.topic, self.index, why)
        self.backend.broker.events.emit("shared_partition_fenced", topic=self.topic, partition=self.index,
                                        reason=why, end_offset=self.store.confirmed)
        self.ended_at_epoch = self.info.leader_epoch
        self.state = FENCED
        self.leading = False
        self.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)
        for _, fut in self._confirm_waiters:
            if not fut.done():
                fut.cancel()
        self._confirm_waiters = []

    # -- meta stream ---------------------------------------------------------------------
    def meta_doc(self, clean: bool) -> dict:
        """The meta stream's key-values, consistent with the durable offset `confirmed`."""
        end = self.store.confirmed
        rs = self.store.ranges
        return {
            "partition_meta": {"start_offset": self.store.start, "end_offset": end, "recovery_offset": end,
                               "cleaned_shutdown": clean, "leader_epoch": self.leader_epoch},
            "producer_snapshot": {"offset": end, "producers": self.durable_producers.snapshot()},
            "leader_epoch_checkpoint": self.leader_epochs[-64:],
            "streams": {"data": self.data_sid, "meta": self.meta_sid},
            "segments": {"count": len(rs), "first": rs[0]["start"] if rs else end,
                         "last": [[r["start"], r["end"], r["key"]] for r in rs[-8:]]},
        }


class SharedBackend(Backend):
    name = "shared"
    CONFIG_DEFAULTS = SETTINGS_DEFAULTS

    def replica_log(self, part) -> tuple[int, int]:
        """DescribeLogDirs on the owner: partition_size is the partition's bytes in its stream,
        wherever they are (uploaded stream objects + the cached, not yet uploaded tail), i.e. the
        log's logical size. Chosen because AutoMQ keeps Kafka's log layer (segments over streams),
        whose size counts stream bytes rather than local disk (not checked against AutoMQ's
        code); and it is the number a move's cost is compared with. The un-uploaded tail alone
        is in the journal (shared_upload backlog). offset_lag is 0: one replica, no follower."""
        return int(part.store.size_bytes), 0

    def __init__(self, broker):
        super().__init__(broker)
        cfg = broker.config
        self.settings = SharedSettings.from_config(cfg)
        self.store = ObjectStore(s3_config(cfg))
        # The move budget: paid by the close path's uploads only (None: uncapped).
        rate = self.settings.move_upload_bytes_per_s
        self.move_bucket = TokenBucket(rate) if rate else None
        self.reg = StreamRegistry()
        self.wal = WalWriter(self)
        self.session_s = int(cfg["broker.session.timeout.ms"]) / 1000
        self.hb_s = int(cfg["broker.heartbeat.interval.ms"]) / 1000
        self.lease_s = self.session_s - max(self.hb_s, 0.2 * self.session_s)
        self._lease = (-1, -1e9)  # (broker epoch, monotonic send time of the last accepted heartbeat)
        self._tasks: list[asyncio.Task] = []
        self._upload_wake = asyncio.Event()
        self._last_upload = time.monotonic()
        self._sso_seq = 0
        self.wal_objects: dict[int, tuple[str, int, dict]] = {}  # seq -> (key, broker epoch, {sid: max last})
        self.covered: dict[int, tuple[int, int]] = {}  # stream id -> (epoch, end) uploaded by us
        self.cache_total = 0
        self.stats = {"uploads": 0, "upload_bytes": 0, "forced_uploads": 0, "forced_upload_bytes": 0, "ref_bytes": 0,
                      "wal_trimmed": 0, "moves_out": 0, "opens": 0}
        self._seen_epoch = -1
        # Every partition object still in memory, hosted or not (a moved-away one lives until its
        # close ends): what the memory report counts.
        self._alive: weakref.WeakSet[SharedPartition] = weakref.WeakSet()
        self._memory_at = 0.0

    @property
    def prefix(self) -> str:
        return self.settings.prefix or self.broker.cluster_id

    @property
    def parts(self) -> list[SharedPartition]:
        return [p for p in self.broker.partitions.values() if isinstance(p, SharedPartition)]

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks += [loop.create_task(self._lease_loop()), loop.create_task(self.wal.run()),
                        loop.create_task(self._upload_loop())]

    async def stop(self) -> None:
        """Graceful stop: close every partition cleanly (meta, forced upload, streams closed) so
        whoever takes them over recovers on the clean path."""
        closing = [self.start_close(p, "shutdown", elect=False) for p in self.parts if p.state in (READY, RECOVERING)]
        closing = [t for t in closing if t is not None]
        if closing:
            await asyncio.wait(closing, timeout=8)
        for t in self._tasks:
            t.cancel()
        self.store.close()

    def open_partition(self, info: PartitionInfo) -> SharedPartition:
        p = SharedPartition(self, info)
        self._alive.add(p)
        return p

    def remove_partition(self, part, deleted: bool) -> None:
        if deleted:
            part.state = CLOSED
            part.delete()
            return
        if self.start_close(part, "moved") is None:  # nothing to close: nothing left to serve
            part.store.delete()

    def on_metadata(self, changed) -> None:
        for _, _, rec in changed:
            self.reg.apply(rec)
        self._check_incarnation()

    def memory(self) -> dict:
        """What the broker holds in memory by purpose, in bytes and counts (the soak compares it
        with the process's RSS): the log cache (the tail, bounded by log.cache.bytes), the read
        blocks of cold reads, the WAL's buffer, and the object counts that grow with history."""
        alive = list(self._alive)
        return {"log_cache_bytes": sum(p.store.cache_bytes for p in alive),
                "block_cache_bytes": sum(p.store._block_bytes for p in alive),
                "wal_buffer_bytes": self.wal.pending_bytes,
                "partitions_hosted": len(self.parts), "partitions_in_memory": len(alive),
                "partition_ranges": sum(len(p.store.ranges) for p in alive),
                "cache_entries": sum(len(p.store.c_data) for p in alive),
                "registry_ranges": sum(len(s.ranges) for s in self.reg.streams.values()),
                "wal_objects": len(self.wal_objects)}

    def report_memory(self, every_s: float = 10.0) -> None:
        now = time.monotonic()
        if now - self._memory_at >= every_s:
            self._memory_at = now
            self.broker.events.emit("shared_memory", **self.memory())

    # -- lease ---------------------------------------------------------------------------
    def lease_valid(self) -> bool:
        epoch, t = self._lease
        return epoch == self.broker.epoch and epoch >= 0 and time.monotonic() - t < self.lease_s

    async def _lease_loop(self) -> None:
        while True:
            epoch = self.broker.epoch
            if epoch >= 0:
                t = time.monotonic()
                try:
                    await self.broker.rpc.call("heartbeat", timeout=max(1.0, self.hb_s * 2), id=self.broker.id,
                                               epoch=epoch, metadata_offset=self.broker.image.offset)
                    was = self.lease_valid()
                    self._lease = (epoch, t)
                    if not was:
                        self._on_lease_renewed()
                except (RpcError, RpcUnavailable):
                    pass
            self._check_incarnation()
            # Until the broker has registered there is nothing to renew; poll for it, or every
            # partition it opens would refuse writes (NOT_LEADER) for a whole interval after start.
            await asyncio.sleep(self.hb_s if epoch >= 0 else 0.05)

    def _on_lease_renewed(self) -> None:
        for p in self.parts:
            if p.state in (READY, CLOSING):
                p.advance_hw(p.store.confirmed)
        self.wal.wake()

    def _check_incarnation(self) -> None:
        """A new broker epoch means the old incarnation was failed over: its streams are gone."""
        e = self.broker.epoch
        if e != self._seen_epoch:
            if self._seen_epoch >= 0:
                log.warning("broker epoch changed %d -> %d: dropping partitions of the old incarnation",
                            self._seen_epoch, e)
                self.broker.events.emit("shared_incarnation_lost", old_epoch=self._seen_epoch, new_epoch=e)
            self._seen_epoch = e
        for p in self.parts:
            if p.incarnation >= 0 and p.incarnation != e and p.state in (RECOVERING, READY, CLOSING):
                p.fence("broker incarnation replaced")

    # -- cache budget ---------------------------------------------------------------------
    def on_cache_growth(self, n: int) -> None:
        self.cache_total += n
        if self.cache_total > self.settings.cache_bytes:
            over = self.cache_total - self.settings.cache_bytes
            for p in sorted(self.parts, key=lambda p: -p.store.cache_bytes):
                over -= p.store.evict(over)
                if over <= 0:
                    break
            self.cache_total = sum(p.store.cache_bytes for p in self.parts)

    # -- recovery: step 6 ---------------------------------------------------------------
    async def recover(self, p: SharedPartition) -> None:
        tag = _requests_tag("open", p)
        try:
            with purpose(tag):
                await self._recover(p, tag)
        finally:
            self.store.take_requests(tag)  # an open that stopped short journals nothing

    async def _recover(self, p: SharedPartition, tag: str) -> None:
        t0 = time.monotonic()
        delay = 0.02
        res = self._opened_for_me(p)  # the election opened the streams for this broker
        preopened = res is not None
        while res is None:
            if p.state != RECOVERING or p.info.leader != self.broker.id:
                return
            try:
                p.incarnation = self.broker.epoch
                res = await self.broker.rpc.call("shared_open_streams", timeout=10, broker=self.broker.id,
                                                 broker_epoch=p.incarnation, topic_id=p.topic_id, partition=p.index)
            except RpcError as e:
                if e.code not in (STREAM_NOT_CLOSED, STREAM_FENCED):
                    log.warning("open of %s-%d failed: %s", p.topic, p.index, e)
                if e.code == STREAM_NOT_FOUND:
                    return
            except RpcUnavailable:
                pass
            if res is None:
                await asyncio.sleep(delay)
                delay = min(0.25, delay * 2)
        t_open = time.monotonic()
        data, meta = res["data"], res["meta"]
        p.data_sid, p.data_epoch = data["id"], data["epoch"]
        p.meta_sid, p.meta_epoch, p.meta_end = meta["id"], meta["epoch"], meta["end"]
        p.store.reset(data["start"], data["end"], data["ranges"])
        doc, replay_bytes, mode = None, 0, "new"
        # The last snapshot close's state, newer than the meta stream's document: the clean path if
        # the stream ends where it did (a move), else the unclean one from its producer snapshot (the
        # owner it went to appended, then died).
        handoff = meta.get("handoff")
        while True:
            try:
                if handoff is not None:
                    doc = handoff
                elif meta["ranges"]:
                    r = meta["ranges"][-1]
                    buf = await self.store.aget_range(r["key"], r["pos"], r["len"])
                    replay_bytes += len(buf)
                    doc = json.loads(buf)
                end = data["end"]
                producers = ProducerStateTable()
                if doc is not None:
                    pm = doc["partition_meta"]
                    snap = doc["producer_snapshot"]
                    producers = ProducerStateTable.from_snapshot(snap["producers"])
                    p.leader_epochs = [list(x) for x in doc.get("leader_epoch_checkpoint", [])]
                    if pm.get("cleaned_shutdown") and pm.get("end_offset") == end:
                        mode = "handoff" if handoff is not None else "clean"
                    else:
                        mode = "unclean"
                        frm = snap["offset"]
                        if frm > end:
                            log.warning("%s-%d: producer snapshot at %d beyond stream end %d; dropping it",
                                        p.topic, p.index, frm, end)
                            producers, frm = ProducerStateTable(), data["start"]
                        async for h in p.store.headers(frm, end):
                            producers.update(h)
                            replay_bytes += h.length
                elif end > data["start"]:
                    mode = "unclean"
                    async for h in p.store.headers(data["start"], end):
                        producers.update(h)
                        replay_bytes += h.length
                break
            except ObjectStoreError as e:
                log.warning("recovery of %s-%d waits for object storage: %s", p.topic, p.index, e)
                await asyncio.sleep(0.5)
                if p.state != RECOVERING:
                    return
        p.producers = producers
        p.durable_producers = ProducerStateTable.from_snapshot(producers.snapshot())
        if not p.leader_epochs or p.leader_epochs[-1][0] != p.leader_epoch:
            p.leader_epochs.append([p.leader_epoch, data["end"]])
        p.restored = True
        if p.state != RECOVERING or p.incarnation != self.broker.epoch:
            return  # closing already: _close() takes it from here
        p.hw = 0
        p.state = READY
        p.advance_hw(data["end"]) if self.lease_valid() else None
        self.covered[p.data_sid] = (p.data_epoch, data["end"])
        self.stats["opens"] += 1
        t1 = time.monotonic()
        move = self._last_move(p)
        self.broker.events.emit("shared_partition_opened", topic=p.topic, partition=p.index,
                                move_id=move.get("move_id"), **{"from": move.get("from")}, to=self.broker.id,
                                open_ms=_ms(t0, t_open), replay_ms=_ms(t_open, t1), recovery=mode,
                                preopened=preopened,
                                replay_bytes=replay_bytes, end_offset=data["end"], leader_epoch=p.leader_epoch,
                                data_objects=len(data["ranges"]),  # every range the open got and indexed
                                stream_epoch=p.data_epoch, producer_ids=sorted(producers.producers),
                                objstore_requests=self.store.take_requests(tag))
        if move.get("to") == self.broker.id and move.get("cause") == "reassign":
            failpoint(self.settings, "target.serving", self.broker.events)

    def _opened_for_me(self, p: SharedPartition) -> dict | None:
        """The partition's streams as this broker's metadata shows them, if they are open for this
        incarnation already; else None (the open request does it)."""
        data, meta = self.reg.partition_streams(p.topic_id, p.index)
        me = (self.broker.id, self.broker.epoch)
        if data is None or meta is None or any(s.state != OPENED or (s.owner, s.owner_epoch) != me
                                               for s in (data, meta)):
            return None
        p.incarnation = self.broker.epoch
        return {"data": data.to_dict(), "meta": meta.to_dict()}

    def _last_move(self, p) -> dict:
        return self.reg.last_move.get((p.topic_id, p.index)) or {}

    # -- close: steps 2-5 ---------------------------------------------------------------
    def start_close(self, p: SharedPartition, why: str, elect: bool = True):
        if p.close_task is not None:
            return p.close_task
        prev = p.state
        p.leading = False
        p.ended_at_epoch = p.info.leader_epoch
        if prev in (IDLE, CLOSED, FENCED):
            p.state = CLOSED
            p.closed = True
            p.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)
            return None
        p.state = CLOSING  # from here it accepts no write
        self.broker.events.emit("shared_partition_closing", topic=p.topic, partition=p.index, reason=why,
                                end_offset=p.store.leo)
        p.close_task = asyncio.get_running_loop().create_task(self._close(p, prev, why, elect))
        p.close_task.add_done_callback(lambda _t: self._after_close(p))
        return p.close_task

    def _after_close(self, p: SharedPartition) -> None:
        """After a close: leadership that came back meanwhile (a newer epoch) opens it afresh; a
        partition this broker no longer hosts gives its memory back now (its cache would otherwise
        live until the garbage collector finds the partition's reference cycles, outside the
        cache budget, which counts hosted partitions only)."""
        if self.broker.partitions.get((p.topic, p.index)) is p:
            p.on_metadata(p.info)
        else:
            p.store.delete()
            self.cache_total = sum(q.store.cache_bytes for q in self.parts)
            self.report_memory(every_s=0)  # what the broker holds once the partition has left

    async def _close(self, p: SharedPartition, prev: str, why: str, elect: bool) -> None:
        tag = _requests_tag("close", p)
        try:
            with purpose(tag):
                await self._close_streams(p, prev, why, elect, tag)
        finally:
            self.store.take_requests(tag)

    async def _close_streams(self, p: SharedPartition, prev: str, why: str, elect: bool, tag: str) -> None:
        t0 = time.monotonic()
        p._move = self._last_move(p) if why == "moved" else {}
        if prev == RECOVERING and p.recovery_task is not None:
            # Let the open finish (it saw CLOSING and stopped short of serving) to close what it opened.
            await asyncio.wait([p.recovery_task], timeout=10)
            if p.data_sid < 0 or p.incarnation != self.broker.epoch:
                p.state = CLOSED
                return
        try:
            if why == "moved":
                failpoint(self.settings, "source.closing", self.broker.events)
            # In-flight appends become durable (and are acknowledged) before anything else.
            self.wal.flush_now()
            while not await p.wait_confirmed(p.store.leo, 1.0):
                if p.state != CLOSING:
                    return
            t_wal = time.monotonic()
            if not p.restored:
                # Opened but never served: nothing to persist or upload, just hand the streams back.
                res = await self._rpc_retry("shared_close_streams", p, topic_id=p.topic_id, partition=p.index,
                                            epochs={str(p.data_sid): p.data_epoch, str(p.meta_sid): p.meta_epoch},
                                            elect=elect)
                p.state = CLOSED
                p.closed = True
                return
            if self.settings.handoff == "snapshot":
                failpoint(self.settings, "source.before_handoff", self.broker.events)
                await self._hand_off(p, why, elect, t0, t_wal, tag)
                return
            async with p.upload_lock:
                # Step 3: persist the meta stream, marked as a clean shutdown.
                doc = p.meta_doc(clean=True)
                sso = formats.SsoBuilder()
                sso.add_meta(p.meta_sid, p.meta_epoch, p.meta_end, doc)
                await self._put_commit([sso], [p], budget=self.move_bucket)
                p.meta_end += 1
                t_meta = time.monotonic()
                # Step 4: force upload of the not-yet-uploaded tail, then close the streams.
                forced = 0
                batches = p.store.cached(p.store.uploaded, p.store.confirmed)
                if batches:
                    ssos = self._pack([(p, batches, None)])
                    forced = sum(s.size for s in ssos)
                    await self._put_commit(ssos, [p], budget=self.move_bucket)
                    self.stats["forced_uploads"] += 1
                    self.stats["forced_upload_bytes"] += forced
                t_up = time.monotonic()
                res = await self._rpc_retry("shared_close_streams", p, topic_id=p.topic_id, partition=p.index,
                                            epochs={str(p.data_sid): p.data_epoch, str(p.meta_sid): p.meta_epoch},
                                            elect=elect)
                t_close = time.monotonic()
            if res.get("rejected"):
                raise _Fenced(f"close rejected: {res['rejected']}")
            p.state = CLOSED
            p.closed = True
            self.stats["moves_out"] += 1
            m = p._move or {}
            self.broker.events.emit("shared_partition_closed", topic=p.topic, partition=p.index, reason=why,
                                    move_id=m.get("move_id"), **{"from": self.broker.id}, to=m.get("to"),
                                    handoff="upload", wal_wait_ms=_ms(t0, t_wal), meta_persist_ms=_ms(t_wal, t_meta),
                                    force_upload_ms=_ms(t_meta, t_up), force_upload_bytes=forced,
                                    stream_close_ms=_ms(t_up, t_close), close_total_ms=_ms(t0, t_close),
                                    data_objects=len(p.store.ranges),  # the close walks none of them
                                    end_offset=p.store.confirmed, elected=res.get("elected"),
                                    **self._move_requests(why, tag))
            self.trim_wal()
        except _Fenced as e:
            p.fence(str(e))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing %s-%d failed", p.topic, p.index)
            p.fence("close failed")
        finally:
            p.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)

    async def _hand_off(self, p: SharedPartition, why: str, elect: bool, t0: float, t_wal: float, tag: str) -> None:
        """The snapshot close (AutoMQ V6): one controller call commits the tail's WAL ranges by
        reference, closes the streams with the final partition state on the meta stream, and
        elects (and opens for) the target, which serves from that state: nothing is PUT or GET
        between the WAL's last write and the target serving."""
        async with p.upload_lock:
            refs = self._ref_objects([p])
            doc = p.meta_doc(clean=True)
            res = await self._rpc_retry("shared_close_streams", p, topic_id=p.topic_id, partition=p.index,
                                        epochs={str(p.data_sid): p.data_epoch, str(p.meta_sid): p.meta_epoch},
                                        elect=elect, objects=refs, handoff=doc)
            t_close = time.monotonic()
        if res.get("rejected"):
            raise _Fenced(f"close rejected: {res['rejected']}")
        failpoint(self.settings, "source.after_handoff", self.broker.events)
        tail = sum(r["len"] for o in refs for r in o["ranges"])
        for o in refs:
            for r in o["ranges"]:
                self._committed(p, o["key"], r)
        p.state = CLOSED
        p.closed = True
        self.stats["moves_out"] += 1
        self.stats["ref_bytes"] += tail
        m = p._move or {}
        self.broker.events.emit("shared_partition_closed", topic=p.topic, partition=p.index, reason=why,
                                move_id=m.get("move_id"), **{"from": self.broker.id}, to=m.get("to"),
                                handoff="snapshot", wal_wait_ms=_ms(t0, t_wal), handoff_ms=_ms(t_wal, t_close),
                                tail_ref_bytes=tail, tail_ref_objects=len(refs),
                                handoff_doc_bytes=len(json.dumps(doc, separators=(",", ":"))),
                                close_total_ms=_ms(t0, t_close), data_objects=len(p.store.ranges),
                                end_offset=p.store.confirmed, elected=res.get("elected"),
                                **self._move_requests(why, tag))

    def _move_requests(self, why: str, tag: str) -> dict:
        """A close's object-store requests, journaled where a move caused it (a shutdown's or a lost
        lease's close is not a move's cost)."""
        requests = self.store.take_requests(tag)
        return {"objstore_requests": requests} if why == "moved" else {}

    async def _rpc_retry(self, method: str, p: SharedPartition, **params) -> dict:
        delay = 0.05
        while True:
            if p.incarnation != self.broker.epoch:
                raise _Fenced("broker incarnation replaced")
            try:
                return await self.broker.rpc.call(method, timeout=10, broker=self.broker.id,
                                                  broker_epoch=p.incarnation, **params)
            except RpcError as e:
                if e.code in (STREAM_FENCED, STREAM_NOT_FOUND):
                    raise _Fenced(str(e)) from None
                log.warning("%s failed: %s", method, e)
            except RpcUnavailable:
                pass
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)

    def _pack(self, items) -> list[formats.SsoBuilder]:
        """items: (partition, batches, meta doc | None) -> stream-set objects of at most about
        s3.upload.part.bytes each, so one upload is several PUTs in parallel."""
        limit = self.settings.upload_part_bytes
        out = [formats.SsoBuilder()]
        for p, batches, doc in items:
            chunk, n = [], 0
            for b in batches:
                if chunk and out[-1].size + n + len(b[3]) > limit:
                    out[-1].add_data(p.data_sid, p.data_epoch, chunk)
                    out.append(formats.SsoBuilder())
                    chunk, n = [], 0
                chunk.append(b)
                n += len(b[3])
            if chunk:
                out[-1].add_data(p.data_sid, p.data_epoch, chunk)
            if doc is not None:
                out[-1].add_meta(p.meta_sid, p.meta_epoch, p.meta_end, doc)
        return [s for s in out if s.ranges]

    async def _put_retry(self, key: str, body: bytes, parts: list[SharedPartition],
                         budget: TokenBucket | None = None) -> None:
        # The budget is paid while the bytes travel, as a shaper paces a transfer: the PUT ends no
        # sooner than its bytes at the cap allow, nor than the links carry them. (Paying first and
        # then sending charged every byte twice: once at the cap, again at the link.) Paid once
        # per object, not per retry.
        paid = asyncio.ensure_future(budget.acquire_async(len(body))) if budget is not None else None
        delay = 0.1
        try:
            while True:
                if any(p.incarnation != self.broker.epoch for p in parts):
                    raise _Fenced("broker incarnation replaced")
                try:
                    await self.store.aput(key, body)
                    break
                except ObjectStoreError as e:
                    log.warning("upload of %s waits for object storage: %s", key, e)
                    await asyncio.sleep(delay)
                    delay = min(1.0, delay * 2)
            if paid is not None:
                await paid
        finally:
            if paid is not None and not paid.done():
                paid.cancel()

    async def _put_commit(self, ssos: list[formats.SsoBuilder], parts: list[SharedPartition],
                          budget: TokenBucket | None = None, refs: list[dict] = ()) -> dict:
        """PUT stream-set objects (in parallel) and commit their ranges, after the WAL ranges
        ``refs`` (committed by reference), in one controller call; retried while object storage is
        down. ``budget``: a rate the PUTs are paced to (the move budget, on the close path)."""
        inc = self.broker.epoch
        objs = []
        for sso in ssos:
            self._sso_seq += 1
            objs.append((f"{self.prefix}/sso/{self.broker.id}-{inc}/{self._sso_seq:012d}", sso.build(), sso))
        await asyncio.gather(*(self._put_retry(k, body, parts, budget) for k, body, _ in objs))
        objects = [*refs, *({"key": k, "size": len(body), "ranges": sso.ranges} for k, body, sso in objs)]
        res = await self._rpc_retry("shared_commit", parts[0], objects=objects)
        rejected = res.get("rejected") or {}
        by_sid = {}
        for p in parts:
            by_sid[p.data_sid] = p
            by_sid[p.meta_sid] = p
        for o in objects:
            for r in o["ranges"]:
                p = by_sid[r["stream_id"]]
                if str(r["stream_id"]) in rejected:
                    if len(parts) == 1:
                        raise _Fenced(f"commit of stream {r['stream_id']} rejected: {rejected}")
                    p.fence(f"commit rejected ({rejected[str(r['stream_id'])]})")
                    continue
                if r["stream_id"] == p.data_sid:
                    self._committed(p, o["key"], r)
        return res

    def _committed(self, p: SharedPartition, key: str, r: dict) -> None:
        """A data range of ``p`` is in its stream now."""
        p.store.add_range(dict(r, key=key))
        p.store.uploaded = r["end"]
        p.unuploaded -= r["len"]
        self.covered[p.data_sid] = (p.data_epoch, r["end"])
        if p.wal_refs and p.wal_refs[0][2]["start"] < r["end"]:
            p.wal_refs = [x for x in p.wal_refs if x[2]["end"] > r["end"]]

    def on_wal_durable(self, key: str, size: int, ranges: list[dict], items: list[WalItem]) -> None:
        """A WAL object and all earlier ones are durable: by reference, its ranges become the
        partitions' next stream ranges (committed with the next upload round or the close)."""
        parts = {(it.stream_id, it.epoch): it.part for it in items}
        for r in ranges:
            p = parts.get((r["stream_id"], r["epoch"]))
            if (p is not None and p.data_sid == r["stream_id"] and p.data_epoch == r["epoch"]
                    and p.incarnation == self.broker.epoch and r["start"] >= p.store.uploaded):
                p.wal_refs.append((key, size, r))

    @staticmethod
    def _ref_objects(parts: list[SharedPartition]) -> list[dict]:
        """The partitions' uncommitted WAL ranges as commit objects, in WAL sequence order."""
        objs: dict[str, dict] = {}
        for p in parts:
            for key, size, r in p.wal_refs:
                objs.setdefault(key, {"key": key, "size": size, "ranges": []})["ranges"].append(r)
        return [objs[k] for k in sorted(objs)]

    # -- upload path ------------------------------------------------------------------------
    def unuploaded_bytes(self) -> int:
        return sum(p.unuploaded for p in self.parts if p.state == READY)

    def maybe_upload(self) -> None:
        self._upload_wake.set()

    async def _upload_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._upload_wake.wait(), 0.5)
            except asyncio.TimeoutError:
                pass
            self._upload_wake.clear()
            self.wal.report()
            self.report_memory()
            try:
                n = self.unuploaded_bytes()
                due = time.monotonic() - self._last_upload >= self.settings.upload_interval_s
                if n >= self.settings.upload_threshold_bytes or (n > 0 and due):
                    await self.upload_round()
                elif n == 0:
                    self._last_upload = time.monotonic()
                self.trim_wal()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("upload round failed")
                await asyncio.sleep(0.5)

    async def upload_round(self) -> None:
        """Durable-but-unuploaded data of every partition -> one stream-set object."""
        parts = [p for p in self.parts if p.state == READY and p.store.confirmed > p.store.uploaded
                 and not p.upload_lock.locked() and p.incarnation == self.broker.epoch]
        if not parts:
            return
        for p in parts:
            await p.upload_lock.acquire()
        t0 = time.monotonic()
        by_ref = self.settings.by_reference
        try:
            items, live = [], []
            for p in parts:
                if p.state != READY:
                    continue
                # By reference only the meta documents are PUT; the data's WAL ranges are committed.
                batches = [] if by_ref else p.store.cached(p.store.uploaded, p.store.confirmed)
                if not (p.wal_refs if by_ref else batches):
                    continue
                items.append((p, batches, p.meta_doc(clean=False)))
                live.append(p)
            if not live:
                return
            ssos = self._pack(items)
            refs = self._ref_objects(live) if by_ref else []
            size = sum(s.size for s in ssos)
            ref_bytes = sum(r["len"] for o in refs for r in o["ranges"])
            try:
                await self._put_commit(ssos, live, refs=refs)
            except _Fenced as e:
                for p in live:
                    p.fence(str(e))
                return
            for p in live:
                if p.state in (READY, CLOSING):
                    p.meta_end += 1
            self.stats["uploads"] += 1
            self.stats["upload_bytes"] += size
            self.stats["ref_bytes"] += ref_bytes
            self._last_upload = time.monotonic()
            self.broker.events.emit("shared_upload", partitions=len(live), bytes=size, objects=len(ssos),
                                    ref_bytes=ref_bytes, ref_objects=len(refs),
                                    backlog_bytes=self.unuploaded_bytes(),
                                    upload_ms=_ms(t0, time.monotonic()))
        finally:
            for p in parts:
                p.upload_lock.release()
        self.on_cache_growth(0)
        self.trim_wal()

    def trim_wal(self) -> None:
        """Delete WAL objects whose every entry is in committed stream objects (ours)."""
        if not self.wal_objects:
            return
        done = []
        for seq, (key, inc, streams) in sorted(self.wal_objects.items()):
            if inc != self.broker.epoch:
                continue  # a lost incarnation's WAL belongs to the controller's failover now
            ok = True
            for sid, (ep, last) in streams.items():
                cov = self.covered.get(sid)
                if cov is None or cov[0] != ep or cov[1] <= last:
                    ok = False
                    break
            if ok:
                done.append(seq)
        if not done:
            return
        keys = [self.wal_objects.pop(s)[0] for s in done]
        self.stats["wal_trimmed"] += len(keys)
        asyncio.get_running_loop().create_task(self._delete(keys))

    async def _delete(self, keys: list[str]) -> None:
        try:
            # a close's trim starts this task: it runs after the close has journaled its requests
            with purpose(None):
                await self.store.adelete_many(keys)
        except ObjectStoreError as e:
            log.warning("WAL trim failed (objects stay until the next trim): %s", e)


class _Fenced(Exception):
    pass


class WalWriter:
    """The broker's write-ahead log in object storage: one object per flush, in sequence."""

    def __init__(self, backend: SharedBackend):
        self.backend = backend
        self.buf: collections.deque[WalItem] = collections.deque()
        self.buf_bytes = 0
        self.first_ts = 0.0
        self.pending_bytes = 0
        self.seq = 0
        # seq -> (items, key, size, ranges) once written (items [] if the write was given up)
        self.done: dict[int, tuple] = {}
        self.next_confirm = 1
        self.inflight = 0
        self._wake = asyncio.Event()
        self.written = [0, 0]  # bytes, objects PUT since the last report

    def wake(self) -> None:
        self._wake.set()

    def report(self) -> None:
        """The WAL's PUT bytes since the last report, as a journal counter (with the uploads':
        what object storage was sent per acknowledged byte)."""
        if self.written[1]:
            self.backend.broker.events.emit("shared_wal", bytes=self.written[0], objects=self.written[1])
            self.written = [0, 0]

    def flush_now(self) -> None:
        """Write what is buffered without waiting for the batch interval (a partition is closing)."""
        if self.buf:
            self.first_ts = min(self.first_ts, time.monotonic() - self.backend.settings.wal_batch_interval_s)
            self._wake.set()

    def add(self, item: WalItem) -> None:
        if not self.buf:
            self.first_ts = time.monotonic()
            self._wake.set()
        self.buf.append(item)
        self.buf_bytes += len(item.data)
        self.pending_bytes += len(item.data)
        if self.buf_bytes >= self.backend.settings.wal_batch_max_bytes:
            self._wake.set()

    async def run(self) -> None:
        s = self.backend.settings
        while True:
            if not self.buf:
                self._wake.clear()
                await self._wake.wait()
                continue
            now = time.monotonic()
            due = self.first_ts + s.wal_batch_interval_s
            full = self.buf_bytes >= s.wal_batch_max_bytes
            if not full and now < due:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), due - now)
                except asyncio.TimeoutError:
                    pass
                continue
            if (self.inflight >= s.wal_max_inflight or not self.backend.lease_valid()
                    or self.backend.unuploaded_bytes() > s.upload_max_backlog_bytes):
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
                continue
            self._seal()

    def _seal(self) -> None:
        limit = self.backend.settings.wal_batch_max_bytes
        items, n = [], 0
        while self.buf and (not items or n + len(self.buf[0].data) <= limit):
            it = self.buf.popleft()
            items.append(it)
            n += len(it.data)
        self.buf_bytes -= n
        if self.buf:
            self.first_ts = time.monotonic() - self.backend.settings.wal_batch_interval_s  # flush rest soon
        self.seq += 1
        self.inflight += 1
        asyncio.get_running_loop().create_task(self._write(self.seq, items))

    async def _write(self, seq: int, items: list[WalItem]) -> None:
        b = self.backend
        inc = b.broker.epoch
        key = f"{b.prefix}/wal/{b.broker.id}/{inc}/{seq:012d}"
        ok, body, ranges = False, b"", []
        try:
            live = [it for it in items if it.part.incarnation == inc and it.part.state in (READY, CLOSING)]
            body, ranges = formats.encode_wal(b.broker.id, inc, seq, live)
            delay = 0.05
            while live:
                if b.broker.epoch != inc:
                    break
                if not b.lease_valid():
                    # A broker without a lease must not write: it may be fenced and failed over.
                    await asyncio.sleep(0.05)
                    continue
                try:
                    await b.store.aput(key, body)
                    ok = True
                    self.written[0] += len(body)
                    self.written[1] += 1
                    break
                except ObjectStoreError as e:
                    log.warning("WAL write %s failed, retrying: %s", key, e)
                    await asyncio.sleep(delay)
                    delay = min(1.0, delay * 2)
            if ok and not b.settings.by_reference:  # by reference, streams own WAL objects
                streams: dict[int, tuple[int, int]] = {}
                for it in live:
                    streams[it.stream_id] = (it.epoch, it.last)
                b.wal_objects[seq] = (key, inc, streams)
        finally:
            self.inflight -= 1
            self.done[seq] = (items, key, len(body), ranges) if ok else ([], key, 0, [])
            while self.next_confirm in self.done:
                done, dkey, size, ranges = self.done.pop(self.next_confirm)
                for it in done:
                    self.pending_bytes -= len(it.data)
                    it.part.on_confirmed(it)
                if ranges and b.settings.by_reference:
                    b.on_wal_durable(dkey, size, ranges, done)
                self.next_confirm += 1
            if not ok:
                for it in items:
                    self.pending_bytes -= len(it.data)
            self._wake.set()
            b.maybe_upload()


BACKEND = SharedBackend
