"""A partition's data as the broker sees it: a log cache in memory plus stream objects.

The cache holds the tail: every batch appended since the last upload (WAL-durable or not yet)
and recently uploaded batches until the broker's cache budget evicts them. Older offsets live in
committed stream-object ranges and are read with object range GETs into a small block cache.
`read()` is synchronous (the broker's fetch path is): for a cold offset it starts the GET and
returns nothing; the partition's data waiters are woken when the block arrives, so a waiting
fetch retries and finds it.
"""
from __future__ import annotations

import asyncio
import bisect
import logging
from collections import OrderedDict

from systems.core import records
from systems.shared import formats

log = logging.getLogger("shared.store")

# Ranges a cold read loads ahead of the reader at once (within a read block's bytes): the object
# store client's default concurrency (s3.max.concurrency).
READ_AHEAD_RANGES = 8


class Block:
    """Whole batches read from one stream-object range."""

    __slots__ = ("data", "bases", "lasts", "rels", "start", "end")

    def __init__(self, data: bytes, bases: list, lasts: list, rels: list):
        self.data, self.bases, self.lasts, self.rels = data, bases, lasts, rels
        self.start, self.end = bases[0], lasts[-1] + 1

    def take(self, offset: int, max_bytes: int, below: int) -> tuple[bytes, int]:
        """Whole batches from the one holding ``offset``, about ``max_bytes`` (at least one), below
        ``below``; and the offset after the last one returned (``offset`` if none)."""
        i = bisect.bisect_left(self.lasts, offset)
        if i >= len(self.bases) or self.bases[i] >= below:
            return b"", offset
        j = i + 1
        start = self.rels[i]
        while j < len(self.bases) and self.bases[j] < below and self._end(j) - start <= max_bytes:
            j += 1
        return self.data[start:self._end(j - 1)], self.lasts[j - 1] + 1

    def _end(self, i: int) -> int:
        return self.rels[i + 1] if i + 1 < len(self.rels) else len(self.data)


class StreamStore:
    def __init__(self, backend, notify):
        self.backend = backend
        self.notify = notify  # wakes waiting fetches of the partition
        # log cache: parallel lists; entries before `head` are evicted
        self.c_base: list[int] = []
        self.c_last: list[int] = []
        self.c_ts: list[int] = []
        self.c_data: list[bytes] = []
        self.head = 0
        self.cache_bytes = 0
        self.start = 0  # log start offset
        self.leo = 0
        self.confirmed = 0  # WAL-durable end
        self.uploaded = 0  # end of the committed stream ranges
        self.uploaded_bytes = 0
        self.ranges: list[dict] = []
        self._range_starts: list[int] = []
        self._indexes: OrderedDict = OrderedDict()
        self._blocks: list[Block] = []
        self._block_starts: list[int] = []
        self._block_bytes = 0
        self._loading: dict[tuple, asyncio.Task] = {}

    # -- state --------------------------------------------------------------------
    def reset(self, start: int, end: int, ranges: list[dict]) -> None:
        self.start, self.leo, self.confirmed, self.uploaded = start, end, end, end
        self.ranges = []
        self._range_starts = []
        self.uploaded_bytes = 0
        for r in ranges:
            self.add_range(r)
        self.c_base, self.c_last, self.c_ts, self.c_data, self.head = [], [], [], [], 0
        self.cache_bytes = 0

    def add_range(self, r: dict) -> None:
        self.ranges.append(r)
        self._range_starts.append(r["start"])
        self.uploaded_bytes += r["len"]

    # -- Partition store interface ---------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.leo

    @property
    def size_bytes(self) -> int:
        return self.uploaded_bytes + self.unuploaded_bytes()

    def unuploaded_bytes(self) -> int:
        i = self._cache_index(self.uploaded)
        return sum(len(d) for d in self.c_data[i:])

    def append(self, parts: list, base: int, last: int, max_ts: int) -> bytes:
        data = b"".join(bytes(p) if not isinstance(p, bytes) else p for p in parts)
        self.c_base.append(base)
        self.c_last.append(last)
        self.c_ts.append(max_ts)
        self.c_data.append(data)
        self.cache_bytes += len(data)
        self.leo = last + 1
        return data

    def batches(self, start_offset: int = 0):
        for i in range(max(self.head, self._cache_index(start_offset)), len(self.c_base)):
            yield records.parse_header(self.c_data[i])

    @property
    def cache_start(self) -> int:
        return self.c_base[self.head] if self.head < len(self.c_base) else self.leo

    def _cache_index(self, offset: int) -> int:
        return max(self.head, bisect.bisect_left(self.c_last, offset, self.head))

    def cached(self, lo: int, hi: int) -> list[tuple]:
        """(base, last, max_ts, data) of cached batches with lo <= base < hi."""
        i = self._cache_index(lo)
        out = []
        while i < len(self.c_base) and self.c_base[i] < hi:
            out.append((self.c_base[i], self.c_last[i], self.c_ts[i], self.c_data[i]))
            i += 1
        return out

    def evict(self, want: int) -> int:
        """Drop up to `want` bytes of uploaded batches from the front; returns bytes freed."""
        freed = 0
        while freed < want and self.head < len(self.c_base) and self.c_last[self.head] < self.uploaded:
            freed += len(self.c_data[self.head])
            self.c_data[self.head] = b""
            self.head += 1
        self.cache_bytes -= freed
        if self.head > 4096 and self.head * 2 > len(self.c_base):
            for lst in (self.c_base, self.c_last, self.c_ts, self.c_data):
                del lst[:self.head]
            self.head = 0
        return freed

    def read(self, offset: int, max_bytes: int, below: int) -> bytes:
        if offset >= below:
            return b""
        if offset >= self.cache_start:
            i = self._cache_index(offset)
            out, n = [], 0
            while i < len(self.c_base) and self.c_base[i] < below:
                d = self.c_data[i]
                if out and n + len(d) > max_bytes:
                    break
                out.append(d)
                n += len(d)
                i += 1
            return b"".join(out)
        blk = self._block_for(offset)
        if blk is None:
            self._start_load(offset)
            return b""
        data, upto = blk.take(offset, max_bytes, below)
        parts, n = [data], len(data)
        # the loaded blocks that follow, up to max_bytes: one fetch answers many small objects;
        # only once a block was taken to its end (a block cut short by max_bytes ends the answer:
        # joining the next one there would skip the batches in between)
        while upto == blk.end < below and n < max_bytes and (nxt := self._block_for(blk.end)) is not None:
            more, end = nxt.take(blk.end, max_bytes - n, below)
            if not more or len(more) > max_bytes - n:  # only a response's first batch may exceed it
                break
            parts.append(more)
            n += len(more)
            blk, upto = nxt, end
        if blk.end < below and blk.end < self.cache_start and len(parts[-1]) >= len(blk.data) // 2:
            self._read_ahead(blk.end, below)
        return data if len(parts) == 1 else b"".join(parts)

    def _read_ahead(self, offset: int, below: int) -> None:
        """Start loading what follows ``offset``: the ranges up to about a read block's bytes, at
        most READ_AHEAD_RANGES of them, in parallel. One block ahead serves large objects; small
        ones (an object per producer batch) would otherwise cost a GET round trip per batch."""
        budget = self.backend.settings.read_block_bytes
        i = bisect.bisect_right(self._range_starts, offset) - 1
        for r in self.ranges[max(i, 0):max(i, 0) + READ_AHEAD_RANGES]:
            start = max(offset, r["start"])
            if budget <= 0 or start >= min(below, self.cache_start, r["end"]):
                break
            if self._block_for(start) is None:
                self._start_load(start)
            budget -= r["len"]

    def offset_for_timestamp(self, ts: int):
        for r in self.ranges:
            if r["max_ts"] >= ts:
                idx = self._indexes.get((r["key"], r["ipos"]))
                if idx is None:
                    self._start_index_load(r)
                    return r["start"], r["max_ts"]
                for i, t in enumerate(idx.max_ts):
                    if t >= ts:
                        return idx.bases[i], t
        for i in range(self.head, len(self.c_base)):
            if self.c_ts[i] >= ts:
                return self.c_base[i], self.c_ts[i]
        return None

    def close(self) -> None:
        for t in self._loading.values():
            t.cancel()

    def delete(self) -> None:
        """Drop all the partition holds in memory (it left this broker, or its topic is gone): its
        cache, read blocks, indexes and stream ranges. What it served is in object storage."""
        self.close()
        self.c_base, self.c_last, self.c_ts, self.c_data, self.head = [], [], [], [], 0
        self.cache_bytes = 0
        self._blocks, self._block_starts, self._block_bytes = [], [], 0
        self._indexes.clear()
        self.ranges, self._range_starts = [], []

    # -- cold reads -------------------------------------------------------------------
    def _range_for(self, offset: int) -> dict | None:
        i = bisect.bisect_right(self._range_starts, offset) - 1
        if i < 0:
            return None
        r = self.ranges[i]
        return r if r["start"] <= offset < r["end"] else None

    def _block_for(self, offset: int) -> Block | None:
        i = bisect.bisect_right(self._block_starts, offset) - 1
        if i >= 0 and self._blocks[i].start <= offset < self._blocks[i].end:
            return self._blocks[i]
        return None

    def _start_index_load(self, r: dict) -> None:
        k = ("idx", r["key"], r["ipos"])
        if k not in self._loading:
            t = asyncio.get_running_loop().create_task(self._index(r))
            self._loading[k] = t
            t.add_done_callback(lambda _t: self._loading.pop(k, None))

    def _start_load(self, offset: int) -> None:
        r = self._range_for(offset)
        if r is None:
            return
        k = ("blk", r["key"], r["pos"], offset)
        if any(key[0] == "blk" and key[1] == r["key"] and key[2] == r["pos"] for key in self._loading):
            return
        t = asyncio.get_running_loop().create_task(self._load_safe(offset))
        self._loading[k] = t
        t.add_done_callback(lambda _t: self._loading.pop(k, None))

    async def _load_safe(self, offset: int) -> None:
        try:
            await self.load_block(offset)
        except Exception as e:  # object store down: the fetch just sees no data yet
            log.warning("cold read at offset %d failed: %s", offset, e)
            await asyncio.sleep(0.5)
        finally:
            self.notify()

    async def _index(self, r: dict) -> formats.Index:
        k = (r["key"], r["ipos"])
        idx = self._indexes.get(k)
        if idx is None:
            buf = await self.backend.store.aget_range(r["key"], r["ipos"], r["ilen"])
            idx = formats.Index(buf)
            self._indexes[k] = idx
            while len(self._indexes) > 256:
                self._indexes.popitem(last=False)
        return idx

    async def load_block(self, offset: int, max_bytes: int | None = None) -> Block | None:
        r = self._range_for(offset)
        if r is None:
            return None
        idx = await self._index(r)
        i = idx.find(offset)
        if i >= len(idx.bases):
            return None
        i, j = idx.span(i, max_bytes or self.backend.settings.read_block_bytes, r["len"])
        lo, hi = idx.pos[i], idx.end_pos(j, r["len"])
        data = await self.backend.store.aget_range(r["key"], r["pos"] + lo, hi - lo)
        blk = Block(data, idx.bases[i:j], idx.lasts[i:j], [p - lo for p in idx.pos[i:j]])
        self._insert_block(blk)
        return blk

    def _insert_block(self, blk: Block) -> None:
        if self._block_for(blk.start) is not None:
            return
        k = bisect.bisect_left(self._block_starts, blk.start)
        self._blocks.insert(k, blk)
        self._block_starts.insert(k, blk.start)
        self._block_bytes += len(blk.data)
        limit = max(4 * self.backend.settings.read_block_bytes, 32 << 20)
        while self._block_bytes > limit and len(self._blocks) > 1:
            # evict the block farthest from the one just read
            far = 0 if k > len(self._blocks) // 2 else len(self._blocks) - 1
            old = self._blocks.pop(far)
            self._block_starts.pop(far)
            self._block_bytes -= len(old.data)
            if far < k:
                k -= 1

    async def headers(self, lo: int, hi: int):
        """Batch headers of [lo, hi) from objects and cache (for unclean recovery)."""
        off = lo
        while off < hi and off < self.cache_start:
            blk = self._block_for(off) or await self.load_block(off, 32 << 20)
            if blk is None:
                break
            for k in range(bisect.bisect_left(blk.lasts, off), len(blk.bases)):
                if blk.bases[k] >= hi:
                    return
                yield records.parse_header(blk.data, blk.rels[k])
            off = blk.end
        for h in self.batches(off):
            if h.base_offset >= hi:
                return
            yield h
