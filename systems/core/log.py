"""Segmented on-disk partition log with a per-batch offset index.

Layout of one partition directory:
  <base:020d>.log    record batches, as stored by the producer (offsets stamped)
  <base:020d>.index  20-byte entries per batch: relative base offset (i32),
                     last offset delta (i32), position (i32), max timestamp (i64)
The index is written lazily (every `index_flush_batches` appends and on roll and
close). Only the active segment and the two most recently read inactive ones
keep their index in memory, so a broker's memory does not grow with its logs; on open, whatever the index misses is rebuilt by scanning the log tail,
and a torn tail (from kill -9 mid-write) is truncated at the last whole batch with
a good CRC, as Kafka's log recovery does.
"""
from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
from array import array

from . import records

log = logging.getLogger(__name__)
_IDX = struct.Struct(">iiiq")
IDX_SIZE = _IDX.size


class Segment:
    """One segment file and its index. In memory the index keeps, per batch, the base
    and last offsets relative to the segment's base and the file position, as 32-bit
    ints (12 bytes a batch, like Kafka's 4-byte relative offsets); max timestamps stay
    in the .index file (only ListOffsets by time reads them)."""

    def __init__(self, directory: str, base_offset: int):
        self.base = base_offset
        stem = os.path.join(directory, f"{base_offset:020d}")
        self.log_path = stem + ".log"
        self.index_path = stem + ".index"
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._clear()
        self._index_written = 0  # entries already in the .index file
        self._pending_ts: list[int] = []  # max timestamps of the entries not yet written
        self.loaded = True
        self._next = base_offset  # next offset, kept while the index is unloaded
        self._load_index()

    def _clear(self) -> None:
        self.rbases, self.rlasts, self.positions = array("i"), array("i"), array("i")

    @property
    def count(self) -> int:
        return len(self.positions)

    def base_at(self, i: int) -> int:
        return self.base + self.rbases[i]

    def find(self, offset: int) -> int:
        """Index of the first batch whose last offset >= offset (count if none)."""
        return bisect.bisect_left(self.rlasts, offset - self.base)

    # -- recovery ---------------------------------------------------------
    def _read_index_file(self) -> bytes:
        try:
            with open(self.index_path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def _load_entries(self) -> int:
        """Load the .index file into memory; returns its size in bytes."""
        raw = self._read_index_file()
        for i in range(len(raw) // IDX_SIZE):
            rel, lod, pos, _ = _IDX.unpack_from(raw, i * IDX_SIZE)
            self.rbases.append(rel)
            self.rlasts.append(rel + lod)
            self.positions.append(pos)
        return len(raw)

    def _load_index(self) -> None:
        raw_len = self._load_entries()
        # Drop index entries that point past the log (log lost its tail).
        while self.positions and self.positions[-1] >= self.size:
            self._pop()
        if self.positions:
            # The last indexed batch must be whole; re-scan from it.
            start = self.positions[-1]
            self._pop()
        else:
            start = 0
        self._index_written = self.count
        if os.path.exists(self.index_path) and raw_len != self._index_written * IDX_SIZE:
            with open(self.index_path, "r+b") as f:
                f.truncate(self._index_written * IDX_SIZE)
        self._recover_from(start)

    def unload(self) -> None:
        """Drop the in-memory index (it is whole on disk after the flush)."""
        if self.loaded:
            self.flush_index()
            self._next = self.next_offset
            self._clear()
            self.loaded = False

    def ensure(self) -> None:
        if self.loaded:
            return
        self._load_entries()
        self._index_written = self.count
        self.loaded = True

    def _pop(self) -> None:
        self.rbases.pop()
        self.rlasts.pop()
        self.positions.pop()

    def _recover_from(self, start: int) -> None:
        pos = start
        chunk = 8 << 20
        while pos < self.size:
            buf = os.pread(self.fd, min(chunk, self.size - pos), pos)
            if len(buf) < records.HEADER_SIZE:
                break
            advanced = False
            for rel, h in records.iter_batches(buf):
                if not records.check_crc(buf, rel, h):
                    log.warning("%s: CRC mismatch at %d, truncating", self.log_path, pos + rel)
                    self._truncate_file(pos + rel)
                    return
                self._index(h.base_offset, h.last_offset, pos + rel, h.max_timestamp)
                end = rel + h.length
                advanced = True
            if not advanced:
                # A batch bigger than the chunk: read it whole.
                base, blen = struct.unpack_from(">qi", buf, 0)
                total = blen + records.LOG_OVERHEAD
                if blen < 49 or pos + total > self.size:
                    break
                buf = os.pread(self.fd, total, pos)
                h = records.parse_header(buf)
                if not records.check_crc(buf, 0, h):
                    break
                self._index(h.base_offset, h.last_offset, pos, h.max_timestamp)
                pos += total
                continue
            pos += end
        if pos < self.size:
            log.warning("%s: torn tail at %d (size %d), truncating", self.log_path, pos, self.size)
            self._truncate_file(pos)

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    # -- writes -----------------------------------------------------------
    def _index(self, base: int, last: int, pos: int, max_ts: int) -> None:
        self.rbases.append(base - self.base)
        self.rlasts.append(last - self.base)
        self.positions.append(pos)
        self._pending_ts.append(max_ts)

    def append(self, parts: list, base: int, last: int, max_ts: int) -> None:
        pos = self.size
        want = sum(len(p) for p in parts)
        n = os.pwritev(self.fd, parts, pos)
        if n != want:
            # A short write leaves a torn batch; cut it so the log stays whole.
            os.ftruncate(self.fd, pos)
            raise OSError(f"short write to {self.log_path} ({n} of {want} bytes)")
        self.size += n
        self._index(base, last, pos, max_ts)

    def flush_index(self) -> None:
        if not self.loaded:
            return
        n = self.count
        if n == self._index_written:
            return
        out = bytearray((n - self._index_written) * IDX_SIZE)
        for j, i in enumerate(range(self._index_written, n)):
            _IDX.pack_into(out, j * IDX_SIZE, self.rbases[i], self.rlasts[i] - self.rbases[i],
                           self.positions[i], self._pending_ts[j])
        with open(self.index_path, "ab") as f:
            f.write(out)
        self._index_written = n
        self._pending_ts = []

    def max_timestamps(self) -> list[int]:
        """Max timestamp of every batch (from the index file, then the unwritten tail)."""
        raw = self._read_index_file()
        written = [_IDX.unpack_from(raw, i * IDX_SIZE)[3] for i in range(min(len(raw) // IDX_SIZE,
                                                                            self._index_written))]
        return written + self._pending_ts

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= offset (whole batches, as Kafka)."""
        self.ensure()
        i = self.find(offset)
        if i == self.count:
            return
        self._truncate_file(self.positions[i])
        del self.rbases[i:], self.rlasts[i:], self.positions[i:]
        if i < self._index_written:
            with open(self.index_path, "r+b" if os.path.exists(self.index_path) else "wb") as f:
                f.truncate(i * IDX_SIZE)
            self._index_written = i
            self._pending_ts = []
        else:
            del self._pending_ts[i - self._index_written:]

    # -- reads ------------------------------------------------------------
    def batch_end(self, i: int) -> int:
        return self.positions[i + 1] if i + 1 < self.count else self.size

    def read(self, offset: int, max_bytes: int, below: int) -> bytes | None:
        """Whole batches from the one holding `offset`, with base offset < below.

        At least one batch is returned even if larger than max_bytes (KIP-74),
        so a consumer can always make progress.
        """
        self.ensure()
        i = self.find(offset)
        n = self.count
        rel_below = below - self.base
        if i >= n or self.rbases[i] >= rel_below:
            return None
        start = self.positions[i]
        j = i
        end = self.batch_end(i)
        while j + 1 < n and self.rbases[j + 1] < rel_below:
            nxt = self.batch_end(j + 1)
            if nxt - start > max_bytes:
                break
            j += 1
            end = nxt
        return os.pread(self.fd, end - start, start)

    @property
    def next_offset(self) -> int:
        if not self.loaded:
            return self._next
        return self.base + self.rlasts[-1] + 1 if self.rlasts else self.base

    def close(self) -> None:
        if self.fd >= 0:
            self.flush_index()
            os.close(self.fd)
            self.fd = -1

    def delete_files(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


class LocalLog:
    """One partition's log on local disk."""

    MAX_LOADED = 2

    def __init__(self, directory: str, segment_bytes: int = 128 << 20, index_flush_batches: int = 256):
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.index_flush_batches = index_flush_batches
        os.makedirs(directory, exist_ok=True)
        bases = sorted(int(f[:-4]) for f in os.listdir(directory) if f.endswith(".log"))
        self.segments: list[Segment] = [Segment(directory, b) for b in bases] or [Segment(directory, 0)]
        self._seg_bases = [s.base for s in self.segments]
        self._unflushed = 0
        self.log_start_offset = self.segments[0].base_at(0) if self.segments[0].count else self.segments[0].base
        self._recent: list[Segment] = []  # inactive segments with their index loaded, most recent last
        for seg in self.segments[:-1]:
            seg.unload()

    def _touch(self, seg: Segment) -> None:
        """Keep the index of at most MAX_LOADED inactive segments in memory."""
        if seg is self.segments[-1]:
            return
        seg.ensure()
        if seg in self._recent:
            self._recent.remove(seg)
        self._recent.append(seg)
        while len(self._recent) > self.MAX_LOADED:
            self._recent.pop(0).unload()

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def append(self, parts: list, base: int, last: int, max_ts: int) -> None:
        """Append one batch (given as buffers to write back to back) whose offsets
        are already stamped; base must be the log end offset."""
        active = self.segments[-1]
        if active.size > 0 and active.size + sum(len(p) for p in parts) > self.segment_bytes:
            active.unload()
            active = Segment(self.dir, base)
            self.segments.append(active)
            self._seg_bases.append(base)
        active.append(parts, base, last, max_ts)
        self._unflushed += 1
        if self._unflushed >= self.index_flush_batches:
            active.flush_index()
            self._unflushed = 0

    def read(self, offset: int, max_bytes: int, below: int) -> bytes:
        """Record batches starting at `offset`, only those wholly below `below` (the HW)."""
        i = max(0, bisect.bisect_right(self._seg_bases, offset) - 1)
        while i < len(self.segments):
            self._touch(self.segments[i])
            data = self.segments[i].read(offset, max_bytes, below)
            if data is not None:
                return data
            i += 1
        return b""

    def batches(self, start_offset: int = 0):
        """Yield header of each batch from start_offset on (for state rebuilds)."""
        for s in self.segments:
            if s.next_offset <= start_offset:
                continue
            self._touch(s)
            for k in range(s.find(start_offset), s.count):
                yield records.parse_header(os.pread(s.fd, records.HEADER_SIZE, s.positions[k]))

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """First batch whose max timestamp >= ts: (base offset, max timestamp)."""
        for s in self.segments:
            self._touch(s)
            for i, mts in enumerate(s.max_timestamps()):
                if mts >= ts:
                    return s.base_at(i), mts
        return None

    def truncate_to(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            self.reset_to(self.log_start_offset)
            return
        while len(self.segments) > 1 and self.segments[-1].base >= offset:
            gone = self.segments.pop()
            if gone in self._recent:
                self._recent.remove(gone)
            gone.delete_files()
            self._seg_bases.pop()
        if self.segments[-1] in self._recent:
            self._recent.remove(self.segments[-1])
        self.segments[-1].ensure()
        self.segments[-1].truncate_to(offset)

    def reset_to(self, offset: int) -> None:
        """Drop everything and restart the log empty at `offset` (a follower
        whose leader no longer has the offsets it holds)."""
        for seg in self.segments:
            seg.delete_files()
        self.segments = [Segment(self.dir, offset)]
        self._seg_bases = [offset]
        self._recent = []
        self.log_start_offset = offset

    def bytes_from(self, offset: int) -> int:
        """Bytes of the log from the batch holding `offset` to its end."""
        total = 0
        for s in reversed(self.segments):
            if s.next_offset <= offset:
                break
            if s.base >= offset:
                total += s.size
                continue
            self._touch(s)
            i = s.find(offset)
            total += s.size - (s.positions[i] if i < s.count else s.size)
            break
        return total

    def delete_oldest_segment(self) -> int:
        """Drop the oldest segment, never the active one (tiered storage's local retention, once
        it is in object storage); the log then starts at the next segment. Returns its bytes."""
        if len(self.segments) < 2:
            return 0
        seg = self.segments.pop(0)
        self._seg_bases.pop(0)
        if seg in self._recent:
            self._recent.remove(seg)
        size = seg.size
        seg.delete_files()
        self.log_start_offset = self.segments[0].base
        return size

    def flush(self) -> None:
        for s in self.segments:
            s.flush_index()
        self._unflushed = 0

    def close(self) -> None:
        for s in self.segments:
            s.close()

    def delete(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
