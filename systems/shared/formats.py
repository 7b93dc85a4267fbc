"""Byte formats of the objects the shared-storage system writes.

WAL object (key `<prefix>/wal/<broker>/<broker_epoch>/<seq:012d>`), one per WAL flush, laid out as
a stream-set object with a table of its sections up front, so its ranges can be committed to the
streams by reference (the bytes are PUT once; `shared.handoff: snapshot`):
    header  "AWAL" | version u8 (2) | broker i32 | broker_epoch i64 | seq i64 | sections i32
    table   sections x ( stream_id i64 | stream_epoch i32 | start i64 | end i64 | pos i64 | len i64 |
                         ipos i64 | ilen i64 | max_ts i64 )   positions absolute in the object
    body    per section: its record batches back to back (offsets stamped), then its index
            section (below); a stream's batches of one flush form one section
    trailer crc32c u32 of everything before it
S3 PUTs are atomic, so an object is either whole or absent; the CRC guards against a wrong
object under a right key.

Stream-set object (key `<prefix>/sso/<writer>/<seq:012d>`), one per upload (or forced upload,
or meta persist). It holds sections, each described by a range in the controller's stream
metadata ({key, pos, len, ...}); nothing in the object itself is needed to find them:
    data section   record batches of one stream, back to back, as a consumer fetches them
    index section  per batch: base i64 | last i64 | rel_pos i64 | max_ts i64 (rel to data pos)
    meta section   one JSON document: the partition's meta stream key-values
"""
from __future__ import annotations

import json
import struct
from bisect import bisect_left
from dataclasses import dataclass

import crc32c

WAL_MAGIC = b"AWAL"
WAL_VERSION = 2
_WAL_HDR = struct.Struct(">4sBiqqi")
_WAL_SEC = struct.Struct(">qiqqqqqqq")
_IDX = struct.Struct(">qqqq")


class FormatError(ValueError):
    pass


@dataclass(slots=True)
class WalEntry:
    stream_id: int
    epoch: int
    base: int
    last: int
    max_ts: int
    data: bytes


def _sections(entries: list) -> list[tuple[int, int, list]]:
    """(stream_id, epoch, batches) per run of contiguous offsets of one stream epoch, in the order
    streams first appear."""
    runs: dict[tuple[int, int], list[list]] = {}
    for e in entries:
        rs = runs.setdefault((e.stream_id, e.epoch), [])
        if not rs or rs[-1][-1][1] + 1 != e.base:
            rs.append([])
        rs[-1].append((e.base, e.last, e.max_ts, e.data))
    return [(sid, ep, batches) for (sid, ep), rs in runs.items() for batches in rs]


def encode_wal(broker: int, broker_epoch: int, seq: int, entries: list) -> tuple[bytes, list[dict]]:
    """entries: objects with stream_id, epoch, base, last, max_ts, data. Returns the object and its
    ranges (as a stream-set object's: stream_id epoch start end pos len ipos ilen max_ts)."""
    sso = SsoBuilder()
    for sid, ep, batches in _sections(entries):
        sso.add_data(sid, ep, batches)
    head = _WAL_HDR.size + _WAL_SEC.size * len(sso.ranges)
    ranges = [dict(r, pos=r["pos"] + head, ipos=r["ipos"] + head) for r in sso.ranges]
    parts = [_WAL_HDR.pack(WAL_MAGIC, WAL_VERSION, broker, broker_epoch, seq, len(ranges))]
    parts += [_WAL_SEC.pack(r["stream_id"], r["epoch"], r["start"], r["end"], r["pos"], r["len"], r["ipos"],
                            r["ilen"], r["max_ts"]) for r in ranges]
    parts.append(sso.build())
    body = b"".join(parts)
    return body + struct.pack(">I", crc32c.crc32c(body)), ranges


def decode_wal(buf: bytes) -> tuple[dict, list[WalEntry]]:
    if len(buf) < _WAL_HDR.size + 4:
        raise FormatError("WAL object too short")
    body, (crc,) = memoryview(buf)[:-4], struct.unpack(">I", buf[-4:])
    if crc32c.crc32c(body) != crc:
        raise FormatError("WAL object CRC mismatch")
    magic, ver, broker, bepoch, seq, count = _WAL_HDR.unpack_from(buf, 0)
    if magic != WAL_MAGIC or ver != WAL_VERSION:
        raise FormatError("not a WAL object (or another version of the format)")
    out = []
    for i in range(count):
        sid, ep, _start, _end, pos, n, ipos, ilen, _ts = _WAL_SEC.unpack_from(buf, _WAL_HDR.size + i * _WAL_SEC.size)
        idx = Index(bytes(buf[ipos:ipos + ilen]))
        for j, (base, last) in enumerate(zip(idx.bases, idx.lasts)):
            a, b = pos + idx.pos[j], pos + idx.end_pos(j + 1, n)
            out.append(WalEntry(sid, ep, base, last, idx.max_ts[j], bytes(buf[a:b])))
    return {"broker": broker, "broker_epoch": bepoch, "seq": seq}, out


class SsoBuilder:
    """Assembles one stream-set object; `ranges` are the stream metadata to commit."""

    def __init__(self):
        self._parts: list[bytes] = []
        self.size = 0
        self.ranges: list[dict] = []

    def _add(self, b: bytes) -> int:
        pos = self.size
        self._parts.append(b)
        self.size += len(b)
        return pos

    def add_data(self, stream_id: int, epoch: int, batches: list) -> dict:
        """batches: (base, last, max_ts, bytes) in offset order, contiguous."""
        pos = self.size
        idx = bytearray(_IDX.size * len(batches))
        rel = 0
        max_ts = -1
        for i, (base, last, mts, data) in enumerate(batches):
            _IDX.pack_into(idx, i * _IDX.size, base, last, rel, mts)
            self._add(data)
            rel += len(data)
            max_ts = max(max_ts, mts)
        ipos = self._add(bytes(idx))
        r = {"stream_id": stream_id, "epoch": epoch, "start": batches[0][0], "end": batches[-1][1] + 1,
             "pos": pos, "len": rel, "ipos": ipos, "ilen": len(idx), "max_ts": max_ts}
        self.ranges.append(r)
        return r

    def add_meta(self, stream_id: int, epoch: int, start: int, meta: dict) -> dict:
        blob = json.dumps(meta, separators=(",", ":")).encode()
        pos = self._add(blob)
        r = {"stream_id": stream_id, "epoch": epoch, "start": start, "end": start + 1, "pos": pos,
             "len": len(blob), "ipos": 0, "ilen": 0, "max_ts": -1}
        self.ranges.append(r)
        return r

    def build(self) -> bytes:
        return b"".join(self._parts)


class Index:
    """A data section's batch index: find the batch holding an offset."""

    def __init__(self, buf: bytes):
        n = len(buf) // _IDX.size
        self.bases, self.lasts, self.pos, self.max_ts = [], [], [], []
        for i in range(n):
            b, last, p, t = _IDX.unpack_from(buf, i * _IDX.size)
            self.bases.append(b)
            self.lasts.append(last)
            self.pos.append(p)
            self.max_ts.append(t)
        self.total = 0

    def find(self, offset: int) -> int:
        """Index of the first batch whose last offset >= offset (len if none)."""
        return bisect_left(self.lasts, offset)

    def span(self, i: int, max_bytes: int, data_len: int) -> tuple[int, int]:
        """[i, j) of whole batches from i covering about max_bytes (at least one)."""
        start = self.pos[i]
        j = i + 1
        while j < len(self.pos) and self.pos[j] - start < max_bytes:
            j += 1
        return i, j

    def end_pos(self, j: int, data_len: int) -> int:
        return self.pos[j] if j < len(self.pos) else data_len
