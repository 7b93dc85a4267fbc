"""Broker side of the tiered-storage system: Kafka's replication (systems/replication) plus
KIP-405 tiered storage and KIP-1023's follower start.

Remote log manager (every `remote.log.manager.task.interval.ms`, per partition of a topic with
`remote.storage.enable=true`):
- the leader uploads each closed segment wholly below the high watermark and above the highest
  tiered offset, with its offset index, producer snapshot and leader-epoch checkpoint
  (systems/tiered/remote.py); a leader that loses leadership mid-upload deletes what it put;
- every replica deletes its oldest local segments once they are tiered and past
  `local.retention.bytes` / `local.retention.ms` (-2: as `retention.*`), never the active one;
- the leader deletes tiered segments past `retention.bytes` / `retention.ms` (the log start moves).

A follower fetching an offset the leader holds only in object storage gets
OFFSET_MOVED_TO_TIERED_STORAGE; with KIP-1023's `follower.fetch.last.tiered.offset.enable` an
empty replica (a move's new one) does not even try. It asks the leader where to start (ListOffsets:
the last tiered offset + 1 with KIP-1023, else the leader's earliest local offset, KIP-405's
default), reads the leader epochs and producer snapshot of the tiered
segment just before that offset from object storage, starts its log there and copies only the
rest from the leader. Reads of tiered offsets by consumers are served by the leader from object
storage.

Journal events: tiered_upload_started, tiered_upload, tiered_local_deleted, tiered_remote_deleted (background),
tiered_copy_from (leader: where a replica starts and how many bytes it has to copy),
tiered_replica_built (follower: the rebuild's time and bytes), tiered_read (leader: a block of
tiered batches read from object storage for a fetch).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from systems.core import errors
from systems.core.client import ConnectionClosed
from systems.core.config import as_bool
from systems.core.metadata import PartitionInfo
from systems.core.producer_state import ProducerStateTable
from systems.replication.backend import Fetcher, ReplicaPartition, ReplicationBackend
from systems.shared.objstore import ObjectStore, ObjectStoreError, purpose
from systems.shared.settings import s3_config
from systems.tiered.remote import RemoteLog
from systems.tiered.settings import DEFAULTS

log = logging.getLogger("tiered")
LIST_OFFSETS_VERSION = {True: 9, False: 8}  # LATEST_TIERED needs v9, EARLIEST_LOCAL v8
SNAPSHOT_FILE = "producer-snapshot.json"  # the producer state at the local log start (a rebuilt replica)



def _requests_tag(step: str, p) -> str:
    """The purpose a new replica's object-store requests count under, one per step (its first
    listing, its tier state): the two can run at once and must not take each other's counts."""
    return f"{step}:{p.topic}-{p.index}"

class TieredPartition(ReplicaPartition):
    def __init__(self, backend: "TieredBackend", info: PartitionInfo, store):
        self.remote = RemoteLog(backend.store, backend.prefix, info.topic_id, info.partition,
                                int(backend.broker.config["remote.log.read.block.bytes"]),
                                notify=lambda: self.notify_data(),
                                on_read=lambda offset, n: backend.broker.events.emit(
                                    "tiered_read", topic=info.topic, partition=info.partition, offset=offset, bytes=n))
        super().__init__(backend, info, store)
        self._load_producer_snapshot()

    # -- offsets: the log now starts in object storage -------------------------------------
    @property
    def tiered(self) -> bool:
        return as_bool(str(self.backend.broker.image.topic_config(self.topic, "remote.storage.enable", "false")))

    @property
    def log_start_offset(self) -> int:
        if self.tiered and not self.remote.loaded:
            # Not listed yet (the first second after a start): the log may begin anywhere below
            # the local start, so no offset is out of range yet; reads there wait for the list.
            return 0
        start = self.remote.start
        return min(start, self.store.log_start_offset) if start is not None else self.store.log_start_offset

    def replica_fetch_error(self, fetch_offset: int) -> int:
        if self.tiered and 0 <= fetch_offset < self.store.log_start_offset:
            return errors.OFFSET_MOVED_TO_TIERED_STORAGE
        return super().replica_fetch_error(fetch_offset)

    def tier_offset(self, latest_tiered: bool, replica: int = -1) -> tuple[int, int]:
        if not self.tiered:
            return super().tier_offset(latest_tiered, replica)
        if latest_tiered and not self.remote.loaded:
            return -1, errors.OFFSET_NOT_AVAILABLE  # a new leader still listing its tiered segments
        offset = self.remote.highest_offset if latest_tiered else self.store.log_start_offset
        if replica >= 0:
            # Where that replica starts (the follower's rule in TieredBackend._ask_start) and what
            # it has to copy from here: the move's bytes between brokers, known at its start.
            start = offset + 1 if latest_tiered and offset >= 0 else self.store.log_start_offset
            self.backend.broker.events.emit(
                "tiered_copy_from", topic=self.topic, partition=self.index, replica=replica, offset=start,
                start="last_tiered_offset" if latest_tiered else "local_log_start",
                bytes_to_copy=self.store.bytes_from(max(start, self.store.log_start_offset)),
                local_bytes=self.store.size_bytes, tiered_bytes=self.remote.size_bytes,
                log_end_offset=self.log_end_offset)
        return offset, errors.NONE

    def become_follower(self) -> None:
        new_epoch = self._follow_epoch != self.info.leader_epoch
        super().become_follower()
        if new_epoch and self.log_end_offset == 0 and self.tiered and self.backend.from_last_tiered \
                and 0 <= self.info.leader != self.broker_id:
            # KIP-1023: an empty replica does not copy what is already tiered, even where the
            # leader still holds it locally: it starts at the leader's earliest pending upload.
            self.pending_rebuild = True
            self.leader_log_start = -1

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        below = self.hw if upto is None else upto
        if offset < self.store.log_start_offset:
            # Only in object storage: the leader serves it from there (KIP-405).
            return self.remote.read(offset, max_bytes, min(below, self.store.log_start_offset))
        return super().read(offset, max_bytes, upto)

    def offset_for_timestamp(self, ts: int) -> tuple[int, int]:
        for s in self.remote.segments:
            if s.max_ts >= ts and s.base < self.store.log_start_offset:
                return s.base, s.max_ts  # the segment's first offset: its index is not fetched for this
        return super().offset_for_timestamp(ts)

    # -- producer state of a replica that starts after the tiered segments -------------------
    @property
    def _snapshot_path(self) -> str:
        return os.path.join(self.store.dir, SNAPSHOT_FILE)

    def _load_producer_snapshot(self) -> None:
        try:
            with open(self._snapshot_path) as f:
                d = json.load(f)
        except (OSError, ValueError):
            return
        if int(d.get("offset", -1)) != self.store.log_start_offset:
            return
        table = ProducerStateTable.from_snapshot(d["producers"])
        for h in self.store.batches():
            table.update(h)
        self.producers = table

    def start_at(self, offset: int, epochs: list[tuple[int, int]], producers: dict) -> None:
        """Empty this replica and start its log at `offset`, with the leader epochs and producer
        state it had there (read from the tiered segment before it)."""
        self.reset_to(offset)
        self.epochs.entries = [(e, s) for e, s in epochs if s < offset]
        self.epochs._save()
        self.producers = ProducerStateTable.from_snapshot(producers)
        self.producers.truncate(offset)
        tmp = self._snapshot_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"offset": offset, "producers": self.producers.snapshot()}, f)
        os.replace(tmp, self._snapshot_path)

    def close(self) -> None:
        self.remote.close()
        super().close()

    def delete(self) -> None:
        self.remote.close()
        super().delete()


class TieredBackend(ReplicationBackend):
    name = "tiered"
    CONFIG_DEFAULTS = DEFAULTS
    partition_class = TieredPartition

    def __init__(self, broker):
        super().__init__(broker)
        cfg = broker.config
        self.store = ObjectStore(s3_config(cfg))
        self.interval_s = int(cfg["remote.log.manager.task.interval.ms"]) / 1000
        self.stats = {"uploads": 0, "upload_bytes": 0, "local_deleted_bytes": 0, "remote_deleted_bytes": 0,
                      "rebuilds": 0, "aux_state_bytes": 0}
        self._led: dict[tuple[str, int], int] = {}  # partition -> leader epoch whose remote list is loaded

    @property
    def from_last_tiered(self) -> bool:
        """KIP-1023 on (dynamic: a cluster may switch it for the next move)."""
        return as_bool(str(self.broker.setting("follower.fetch.last.tiered.offset.enable")))

    @property
    def prefix(self) -> str:
        return self.broker.config.get("s3.prefix") or self.broker.cluster_id

    async def start(self) -> None:
        await super().start()
        self._tasks.append(asyncio.create_task(self._remote_log_manager()))

    async def stop(self) -> None:
        await super().stop()
        self.store.close()

    def remove_partition(self, part, deleted: bool) -> None:
        if deleted and isinstance(part, TieredPartition):
            # Kafka deletes a deleted topic's tiered segments too; every replica tries (idempotent).
            asyncio.get_running_loop().create_task(self._delete_remote(part.remote))
        super().remove_partition(part, deleted)

    async def _delete_remote(self, remote: RemoteLog) -> None:
        try:
            await remote.delete_all()
        except ObjectStoreError as e:
            log.warning("could not delete tiered segments under %s: %s", remote.dir, e)

    # -- the remote log manager ---------------------------------------------------------------
    async def _remote_log_manager(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for p in list(self.broker.partitions.values()):
                if p.closed or not isinstance(p, TieredPartition) or not p.tiered:
                    continue
                try:
                    await self._manage(p)
                except (ObjectStoreError, OSError) as e:
                    log.warning("%s-%d: remote log manager: %s", p.topic, p.index, e)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s-%d: remote log manager failed", p.topic, p.index)

    async def _manage(self, p: TieredPartition) -> None:
        if not p.remote.loaded:
            await self._load_remote(p)
        if p.is_leader:
            if self._led.get(p.key) != p.leader_epoch:
                await p.remote.refresh()  # a new leader takes over what earlier leaders tiered
                self._led[p.key] = p.leader_epoch
            await self._upload(p)
            await self._expire_remote(p)
        else:
            self._led.pop(p.key, None)
            await p.remote.refresh()  # followers learn what the leader tiered from the store
        self._expire_local(p)

    async def _load_remote(self, p: TieredPartition) -> None:
        """A partition's first listing here (a start, or a replica the move added): its requests
        are journaled, a move's cost in object-store requests (the listings after it are the
        steady cost of hosting the partition, the same with or without a move)."""
        tag = _requests_tag("list", p)
        try:
            with purpose(tag):
                await p.remote.refresh()
            self.broker.events.emit("tiered_remote_loaded", topic=p.topic, partition=p.index,
                                    segments=len(p.remote.segments), tiered_bytes=p.remote.size_bytes,
                                    objstore_requests=self.store.take_requests(tag))
        finally:
            self.store.take_requests(tag)

    async def _upload(self, p: TieredPartition) -> None:
        """Closed segments wholly below the high watermark and not yet tiered, oldest first."""
        epoch = p.leader_epoch
        for seg in list(p.store.segments[:-1]):
            last = seg.next_offset - 1
            if last <= p.remote.highest_offset:
                continue
            if last >= p.hw or not p.is_leader or p.leader_epoch != epoch:
                return
            t0 = time.monotonic()
            seg.flush_index()
            try:
                files = await asyncio.to_thread(_read_files, seg.log_path, seg.index_path)
            except FileNotFoundError:
                return  # deleted meanwhile (the replica went away)
            files[".snapshot"] = json.dumps(self._producer_snapshot_at(p, seg)).encode()
            epochs = [e for e in p.epochs.entries if e[1] <= last]
            files[".epochs"] = json.dumps(epochs).encode()
            max_ts = max(seg.max_timestamps(), default=-1)
            # the start too: a leader that dies mid-upload shows in the journal (faults/leader-lost-mid-upload)
            self.broker.events.emit("tiered_upload_started", topic=p.topic, partition=p.index, base_offset=seg.base,
                                    end_offset=last + 1, leader_epoch=epoch)
            done = await p.remote.upload(files, seg.base, last, max_ts, epoch, epochs,
                                         lambda: p.is_leader and p.leader_epoch == epoch and not p.closed)
            if done is None:
                return
            n = sum(len(v) for v in files.values())
            self.stats["uploads"] += 1
            self.stats["upload_bytes"] += n
            self.broker.events.emit("tiered_upload", topic=p.topic, partition=p.index, base_offset=seg.base,
                                    end_offset=last + 1, bytes=n, ms=round((time.monotonic() - t0) * 1000, 3))

    @staticmethod
    def _producer_snapshot_at(p: TieredPartition, seg) -> dict:
        """The producer state after `seg` (Kafka uploads the snapshot taken at its roll): its own
        batches' last five per producer, over what the live table knew of the others before it."""
        table = ProducerStateTable.from_snapshot(p.producers.snapshot())
        table.truncate(seg.base)
        for h in p.store.batches(seg.base):
            if h.base_offset >= seg.next_offset:
                break
            table.update(h)
        return table.snapshot()

    def _retention(self, p: TieredPartition, kind: str) -> tuple[int, int]:
        """(local, total) retention of `kind` (bytes|ms), -1 for none; local -2 means total."""
        img, cfg = self.broker.image, self.broker.config
        total = int(img.topic_config(p.topic, f"retention.{kind}", -1 if kind == "bytes" else 604800000))
        local = int(img.topic_config(p.topic, f"local.retention.{kind}", cfg[f"log.local.retention.{kind}"]))
        return (total if local == -2 else local), total

    def _expire_local(self, p: TieredPartition) -> None:
        """Delete local segments that are tiered and past local retention, oldest first."""
        local_bytes, _ = self._retention(p, "bytes")
        local_ms, _ = self._retention(p, "ms")
        tiered_upto = p.remote.highest_offset
        now_ms = time.time() * 1000
        while len(p.store.segments) > 1:
            seg = p.store.segments[0]
            if seg.next_offset - 1 > tiered_upto:
                return
            by_size = local_bytes >= 0 and p.store.size_bytes - seg.size >= local_bytes
            by_time = local_ms >= 0 and max(seg.max_timestamps(), default=now_ms) < now_ms - local_ms
            if not (by_size or by_time):
                return
            base, end = seg.base, seg.next_offset
            n = p.store.delete_oldest_segment()
            self.stats["local_deleted_bytes"] += n
            self.broker.events.emit("tiered_local_deleted", topic=p.topic, partition=p.index, base_offset=base,
                                    end_offset=end, bytes=n, reason="size" if by_size else "time")

    async def _expire_remote(self, p: TieredPartition) -> None:
        """Delete tiered segments past retention.bytes / retention.ms, oldest first (the leader),
        only those no longer held locally (local retention is at most the total one)."""
        _, total_bytes = self._retention(p, "bytes")
        _, total_ms = self._retention(p, "ms")
        now_ms = time.time() * 1000
        while p.remote.segments and p.is_leader:
            seg = p.remote.segments[0]
            if seg.last >= p.store.log_start_offset:
                return
            size = p.remote.size_bytes + p.store.bytes_from(p.remote.highest_offset + 1)
            by_size = total_bytes >= 0 and size - seg.size >= total_bytes
            by_time = total_ms >= 0 and seg.max_ts < now_ms - total_ms
            if not (by_size or by_time):
                return
            await p.remote.delete(seg)
            self.stats["remote_deleted_bytes"] += seg.size
            self.broker.events.emit("tiered_remote_deleted", topic=p.topic, partition=p.index,
                                    base_offset=seg.base, end_offset=seg.end, bytes=seg.size,
                                    reason="size" if by_size else "time")

    # -- a follower whose leader has the offsets only in object storage ------------------------
    async def rebuild_from_remote(self, fetcher: Fetcher, parts: list) -> bool:
        """KIP-405's tier state machine for each partition: where to start (ListOffsets to the
        leader), the auxiliary state from the tiered segment before it, then an empty log there."""
        try:
            starts = await self._ask_start(fetcher, parts)
        except (ConnectionClosed, asyncio.TimeoutError, OSError) as e:
            log.info("asking leader %d where to start failed: %s", fetcher.leader, e)
            return False
        ok = True
        for p, epoch, start in starts:
            if p.closed or not p.pending_rebuild or p.leader_epoch != epoch:
                continue
            if start is None:
                ok = False  # the leader is not ready (still listing its tiered segments)
                continue
            t0 = time.monotonic()
            tag = _requests_tag("rebuild", p)
            try:
                with purpose(tag):
                    seg = await p.remote.segment_holding(start - 1) if start > 0 else None
                    epochs, producers, aux = await p.remote.aux_state(seg) if seg is not None else ([], {}, 0)
            except ObjectStoreError as e:
                log.warning("%s-%d: reading the tiered state failed: %s", p.topic, p.index, e)
                ok = False
                continue
            requests = self.store.take_requests(tag)
            if p.closed or not p.pending_rebuild or p.leader_epoch != epoch:
                continue
            if start == p.log_end_offset == 0:
                p.pending_rebuild = False  # nothing tiered yet: an empty replica copies from 0
                continue
            p.start_at(start, epochs, producers)
            p.pending_rebuild = False
            self.stats["rebuilds"] += 1
            self.stats["aux_state_bytes"] += aux
            self.broker.events.emit(
                "tiered_replica_built", topic=p.topic, partition=p.index, from_offset=start,
                start="last_tiered_offset" if self.from_last_tiered else "local_log_start",
                segment_base=seg.base if seg is not None else None, aux_state_bytes=aux,
                aux_state_ms=round((time.monotonic() - t0) * 1000, 3), log_start_offset=p.log_start_offset,
                objstore_requests=requests)
            log.info("%s-%d: starting at %d after the tiered segments (%s)", p.topic, p.index, start,
                     "KIP-1023" if self.from_last_tiered else "KIP-405")
        return ok

    async def _ask_start(self, fetcher: Fetcher, parts: list) -> list[tuple[TieredPartition, int, int | None]]:
        """ListOffsets to the leader: last tiered offset + 1 (KIP-1023) or earliest local offset."""
        v = LIST_OFFSETS_VERSION[self.from_last_tiered]
        R = ListOffsetsRequest[v]
        ts = -5 if self.from_last_tiered else -4
        topics: dict[str, list] = {}
        for p in parts:
            topics.setdefault(p.topic, []).append(R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=p.index, current_leader_epoch=p.leader_epoch, timestamp=ts))
        req = R(replica_id=self.broker.id, isolation_level=0, timeout_ms=5000,
                topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
        resp = await fetcher.conn.request(req, ListOffsetsResponse, timeout=10)
        answers = {(t.name, r.partition_index): r for t in resp.topics for r in t.partitions}
        out = []
        for p in parts:
            r = answers.get((p.topic, p.index))
            if r is None or r.error_code != errors.NONE:
                out.append((p, p.leader_epoch, None))
            elif self.from_last_tiered:
                # -1: nothing tiered yet although the leader has moved past offset 0 locally
                # (retention): start at the leader's log start, as KIP-405.
                out.append((p, p.leader_epoch, r.offset + 1 if r.offset >= 0 else max(p.leader_log_start, 0)))
            else:
                out.append((p, p.leader_epoch, r.offset))
        return out

    # -- metrics ------------------------------------------------------------------------------
    def metrics(self) -> dict:
        out = super().metrics()
        for (t, i), p in sorted(self.broker.partitions.items()):
            if isinstance(p, TieredPartition) and f"{t}-{i}" in out["partitions"]:
                out["partitions"][f"{t}-{i}"].update(
                    local_log_start_offset=p.store.log_start_offset, highest_tiered_offset=p.remote.highest_offset,
                    tiered_bytes=p.remote.size_bytes, tiered_segments=len(p.remote.segments),
                    tiered_read_bytes=p.remote.read_bytes)
        out["tiered"] = {**self.stats, "objstore": self.store.stats()}
        return out


def _read_files(log_path: str, index_path: str) -> dict[str, bytes]:
    with open(log_path, "rb") as f:
        data = f.read()
    try:
        with open(index_path, "rb") as f:
            index = f.read()
    except FileNotFoundError:
        index = b""
    return {".log": data, ".index": index}


BACKEND = TieredBackend
