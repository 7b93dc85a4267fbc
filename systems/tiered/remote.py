"""One partition's tiered segments in object storage (KIP-405's remote log).

Each uploaded segment is four objects under `<prefix>/tiered/<topic id>/<partition>/` plus its
manifest, written last (the commit: a segment without a manifest is an unfinished upload):

  <base:020d>-<uid>.log       the local segment file as is (record batches, offsets stamped)
  <base:020d>-<uid>.index     its offset index (systems/core/log.py: 20 bytes a batch)
  <base:020d>-<uid>.snapshot  the producer state after the segment (JSON)
  <base:020d>-<uid>.epochs    the leader-epoch checkpoint up to the segment's end
  <base:020d>-<uid>.json      the manifest: offsets, size, max timestamp, leader epochs, uploader

Kafka keeps this metadata (RemoteLogSegmentMetadata) in its `__remote_log_metadata` topic; here
the manifests are the metadata and a LIST of the directory is the metadata's state, so every
broker, the leader's successor included, reads the same truth from the store the data is in.
Segments uploaded by different leaders may overlap (each cuts segments where its own log rolled);
batches are byte-identical across replicas, so a read takes any segment that holds the offset.

Reads are synchronous, as the broker's fetch path is: a read of a tiered offset starts the GETs
(index, then a block of whole batches) and returns nothing; the partition's data waiters are
woken when the block arrives, so a waiting fetch retries and finds it.
"""
from __future__ import annotations

import asyncio
import bisect
import json
import logging
import struct
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from systems.shared.objstore import ObjectNotFound, ObjectStore
from systems.shared.store import Block

log = logging.getLogger("tiered.remote")
_IDX = struct.Struct(">iiiq")  # systems/core/log.py's index entry: rel base, last delta, position, max ts
SUFFIXES = (".log", ".index", ".snapshot", ".epochs")
# Manifest GETs in flight at once when a broker lists a partition's tiered segments: one after
# another, a 256 MiB partition's 29 took 1.3 s of 30-80 ms GETs (docs/reassign.md); as many as
# the shared controller's WAL recovery reads at once.
MANIFEST_GETS = 8


def _base_of(key: str) -> int | None:
    """A manifest key's segment base offset (``.../<base:020d>-<uid>.json``)."""
    name = key.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True)
class RemoteSegment:
    stem: str  # the key without its suffix
    base: int
    last: int
    size: int
    max_ts: int
    leader_epoch: int  # the uploading leader's epoch
    epochs: tuple[tuple[int, int], ...]  # (epoch, start offset) up to the segment's end

    @property
    def end(self) -> int:
        return self.last + 1


class SegmentIndex:
    """A downloaded `.index`: per batch its base and last offset and position in the `.log`."""

    def __init__(self, seg: RemoteSegment, raw: bytes):
        self.bases, self.lasts, self.pos = [], [], []
        for i in range(len(raw) // _IDX.size):
            rel, lod, pos, _ = _IDX.unpack_from(raw, i * _IDX.size)
            self.bases.append(seg.base + rel)
            self.lasts.append(seg.base + rel + lod)
            self.pos.append(pos)
        self.size = seg.size

    def span(self, offset: int, max_bytes: int) -> tuple[int, int] | None:
        """Batches [i, j) from the one holding `offset`, whole, at most max_bytes (at least one)."""
        i = bisect.bisect_left(self.lasts, offset)
        if i >= len(self.bases):
            return None
        j = i + 1
        while j < len(self.bases) and self.end_pos(j) - self.pos[i] <= max_bytes:
            j += 1
        return i, j

    def end_pos(self, j: int) -> int:
        """Where batch j-1 ends."""
        return self.pos[j] if j < len(self.pos) else self.size


class RemoteLog:
    """The tiered segments of one partition, as this broker last listed them."""

    def __init__(self, store: ObjectStore, prefix: str, topic_id: str, partition: int, block_bytes: int,
                 notify=lambda: None, on_read=lambda offset, n: None):
        self.store = store
        self.dir = f"{prefix}/tiered/{topic_id}/{partition}/"
        self.block_bytes = block_bytes
        self.notify = notify  # wakes the partition's fetch waiters when a block arrives
        self.on_read = on_read  # (offset, bytes) of each block read for a fetch
        self.segments: list[RemoteSegment] = []  # by base offset
        self.loaded = False  # listed at least once
        self._manifests: dict[str, RemoteSegment] = {}
        self._indexes: OrderedDict[str, SegmentIndex] = OrderedDict()
        self._blocks: OrderedDict[tuple[str, int], Block] = OrderedDict()
        self._block_bytes = 0
        self._loading: dict[tuple, asyncio.Task] = {}
        self.read_bytes = 0  # bytes GET for client reads

    # -- metadata ----------------------------------------------------------------------
    @property
    def start(self) -> int | None:
        return self.segments[0].base if self.segments else None

    @property
    def highest_offset(self) -> int:
        """Kafka's highest offset in remote storage (-1: nothing tiered)."""
        return max((s.last for s in self.segments), default=-1)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    async def refresh(self) -> None:
        """LIST the partition's manifests; GET the ones not seen before."""
        keys = [k for k in await self.store.alist(self.dir) if k.endswith(".json")]
        slots = asyncio.Semaphore(MANIFEST_GETS)

        async def get(k: str) -> RemoteSegment | None:
            async with slots:
                return await self._manifest(k)

        segs = await asyncio.gather(*(get(k) for k in keys))
        found = {k: seg for k, seg in zip(keys, segs) if seg is not None}
        self._manifests = found
        self.segments = sorted(found.values(), key=lambda s: (s.base, s.last))
        self.loaded = True

    async def segment_holding(self, offset: int) -> RemoteSegment | None:
        """The tiered segment holding `offset`, from one LIST and the GET of its manifest only (a
        manifest's key starts with its segment's base offset): what a new replica needs before it
        copies, as Kafka's replica asks its in-memory remote-log metadata for one segment rather
        than reading them all; the full listing follows in the remote log manager's loop."""
        bases = {k: _base_of(k) for k in await self.store.alist(self.dir) if k.endswith(".json")}
        below = sorted((k for k, b in bases.items() if b is not None and b <= offset), key=bases.get, reverse=True)
        for k in below:  # segments of different leaders may overlap: the latest-starting first
            seg = await self._manifest(k)
            if seg is not None and seg.base <= offset <= seg.last:
                self._manifests[k] = seg
                return seg
        return None

    async def _manifest(self, key: str) -> RemoteSegment | None:
        """A manifest, from what this broker read before or a GET (None: deleted since the LIST,
        by retention)."""
        seg = self._manifests.get(key)
        if seg is not None:
            return seg
        try:
            return self._parse(key, await self.store.aget(key))
        except ObjectNotFound:
            return None

    @staticmethod
    def _parse(key: str, body: bytes) -> RemoteSegment:
        d = json.loads(body)
        return RemoteSegment(key[:-len(".json")], int(d["base"]), int(d["last"]), int(d["size"]), int(d["max_ts"]),
                             int(d["leader_epoch"]), tuple((int(e), int(s)) for e, s in d["epochs"]))

    def find(self, offset: int) -> RemoteSegment | None:
        """A segment holding `offset` (the latest-starting one, if segments overlap)."""
        i = bisect.bisect_right([s.base for s in self.segments], offset) - 1
        while i >= 0:
            s = self.segments[i]
            if s.base <= offset <= s.last:
                return s
            i -= 1
        return None

    # -- upload / delete -----------------------------------------------------------------
    async def upload(self, files: dict[str, bytes], base: int, last: int, max_ts: int, leader_epoch: int,
                     epochs: list[tuple[int, int]], still_leader) -> RemoteSegment | None:
        """PUT a segment's four objects, then its manifest, unless `still_leader()` turned false
        meanwhile (a deposed leader's upload is deleted, never committed)."""
        stem = f"{self.dir}{base:020d}-{uuid.uuid4().hex[:12]}"
        await asyncio.gather(*(self.store.aput(stem + sfx, files[sfx]) for sfx in SUFFIXES))
        if not still_leader():
            await self.store.adelete_many([stem + sfx for sfx in SUFFIXES])
            return None
        manifest = {"base": base, "last": last, "size": len(files[".log"]), "max_ts": max_ts,
                    "leader_epoch": leader_epoch, "epochs": [list(e) for e in epochs]}
        await self.store.aput(stem + ".json", json.dumps(manifest).encode())
        seg = RemoteSegment(stem, base, last, len(files[".log"]), max_ts, leader_epoch, tuple(epochs))
        self._manifests[stem + ".json"] = seg
        self.segments = sorted(self._manifests.values(), key=lambda s: (s.base, s.last))
        return seg

    async def delete(self, seg: RemoteSegment) -> None:
        """Manifest first: once it is gone no broker reads the segment."""
        await self.store.adelete(seg.stem + ".json")
        await self.store.adelete_many([seg.stem + sfx for sfx in SUFFIXES])
        self._manifests.pop(seg.stem + ".json", None)
        self.segments = [s for s in self.segments if s.stem != seg.stem]

    async def delete_all(self) -> None:
        keys = await self.store.alist(self.dir)
        await self.store.adelete_many(sorted(keys, key=lambda k: not k.endswith(".json")))

    async def aux_state(self, seg: RemoteSegment) -> tuple[list[tuple[int, int]], dict, int]:
        """The leader epochs and producer snapshot a replica starting after `seg` needs
        (KIP-405's auxiliary state), and the bytes read for them."""
        raw_epochs, raw_snap = await asyncio.gather(self.store.aget(seg.stem + ".epochs"),
                                                    self.store.aget(seg.stem + ".snapshot"))
        epochs = [tuple(e) for e in json.loads(raw_epochs)]
        return epochs, json.loads(raw_snap), len(raw_epochs) + len(raw_snap)

    # -- reads ---------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, below: int) -> bytes:
        for (stem, _), blk in reversed(self._blocks.items()):
            if blk.start <= offset < blk.end:
                self._blocks.move_to_end((stem, blk.start))
                return blk.take(offset, max_bytes, below)[0]
        seg = self.find(offset)
        if seg is not None:
            self._start_load(seg, offset)
        return b""

    def _start_load(self, seg: RemoteSegment, offset: int) -> None:
        k = (seg.stem, offset)
        if any(key[0] == seg.stem for key in self._loading):
            return  # one GET per segment at a time; the waiting fetch retries
        t = asyncio.get_running_loop().create_task(self._load(seg, offset))
        self._loading[k] = t
        t.add_done_callback(lambda _t: self._loading.pop(k, None))

    async def _load(self, seg: RemoteSegment, offset: int) -> None:
        try:
            idx = self._indexes.get(seg.stem)
            if idx is None:
                idx = SegmentIndex(seg, await self.store.aget(seg.stem + ".index"))
                self._indexes[seg.stem] = idx
                while len(self._indexes) > 64:
                    self._indexes.popitem(last=False)
            span = idx.span(offset, self.block_bytes)
            if span is None:
                return
            i, j = span
            lo, hi = idx.pos[i], idx.end_pos(j)
            data = await self.store.aget_range(seg.stem + ".log", lo, hi - lo)
            self.read_bytes += len(data)
            self.on_read(offset, len(data))
            blk = Block(data, idx.bases[i:j], idx.lasts[i:j], [p - lo for p in idx.pos[i:j]])
            self._blocks[(seg.stem, blk.start)] = blk
            self._block_bytes += len(data)
            while self._block_bytes > 4 * self.block_bytes and len(self._blocks) > 1:
                _, old = self._blocks.popitem(last=False)
                self._block_bytes -= len(old.data)
        except Exception as e:  # the store down or the segment deleted: the fetch sees no data yet
            log.warning("tiered read of %s at offset %d failed: %s", seg.stem, offset, e)
            await asyncio.sleep(0.5)
        finally:
            self.notify()

    def close(self) -> None:
        for t in self._loading.values():
            t.cancel()
