"""Local segmented log and the controller's metadata log: append, read, recover."""
from __future__ import annotations

import os

from systems.core import records
from systems.core.log import LocalLog
from systems.core.metalog import MetadataLog
from tests.support.rawclient import batch


def _append(log: LocalLog, values) -> tuple[int, int]:
    b = bytearray(batch(values))
    h = records.validate_produce(b)
    base = log.log_end_offset
    records.assign(b, base, 0)
    log.append([b], base, base + h.last_offset_delta, h.max_timestamp)
    return base, base + h.last_offset_delta


def _offsets(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in records.iter_batches(data)]


def test_append_read_roll_and_reopen(tmp_path):
    log = LocalLog(str(tmp_path), segment_bytes=4096)
    spans = [_append(log, [b"x" * 100] * 5) for _ in range(40)]
    assert log.log_end_offset == 200
    assert len(log.segments) > 5  # rolled
    # Reading from the middle of a batch returns that whole batch first.
    assert _offsets(log.read(12, 1, below=200)) == [(10, 14)]
    data = log.read(12, 10_000, below=200)
    assert _offsets(data)[0] == (10, 14) and len(data) <= 10_000 and len(_offsets(data)) > 1
    # Nothing at or above the high watermark is served.
    assert _offsets(log.read(0, 1 << 20, below=10)) == [(0, 4), (5, 9)]
    log.close()
    again = LocalLog(str(tmp_path), segment_bytes=4096)
    assert again.log_end_offset == 200
    got = []
    off = 0
    while off < 200:
        part = _offsets(again.read(off, 1 << 20, below=200))
        got += part
        off = part[-1][1] + 1
    assert got == spans
    # Memory stays bounded: besides the active segment, at most MAX_LOADED indexes are in memory.
    assert sum(seg.loaded for seg in again.segments[:-1]) <= LocalLog.MAX_LOADED
    assert sum(seg.count for seg in again.segments[:-1]) < 200 // 2


def test_torn_tail_is_truncated_on_recovery(tmp_path):
    log = LocalLog(str(tmp_path))
    for _ in range(10):
        _append(log, [b"y" * 50] * 3)
    size = log.size_bytes
    seg = log.segments[-1].log_path
    log.segments[-1].fd and os.close(log.segments[-1].fd)  # simulate a crash: no index flush
    log.segments[-1].fd = -1
    with open(seg, "ab") as f:
        f.write(batch([b"torn"])[:30])  # half a batch
    for p in os.listdir(tmp_path):
        if p.endswith(".index"):
            os.unlink(tmp_path / p)
    again = LocalLog(str(tmp_path))
    assert again.log_end_offset == 30 and again.size_bytes == size
    assert _append(again, [b"next"]) == (30, 30)


def test_corrupt_batch_cuts_log_there(tmp_path):
    log = LocalLog(str(tmp_path))
    for _ in range(4):
        _append(log, [b"z" * 40])
    pos = log.segments[0].positions[2]
    path = log.segments[0].log_path
    log.close()
    for p in os.listdir(tmp_path):
        if p.endswith(".index"):
            os.unlink(tmp_path / p)
    with open(path, "r+b") as f:
        f.seek(pos + 70)
        f.write(b"\xff")
    again = LocalLog(str(tmp_path))
    assert again.log_end_offset == 2


def test_truncate_to(tmp_path):
    log = LocalLog(str(tmp_path), segment_bytes=2048)
    for _ in range(30):
        _append(log, [b"t" * 100] * 2)
    log.truncate_to(21)  # inside batch 20-21: the whole batch goes
    assert log.log_end_offset == 20
    assert _append(log, [b"u"]) == (20, 20)
    log.close()
    assert LocalLog(str(tmp_path), segment_bytes=2048).log_end_offset == 21


def test_metadata_log_survives_torn_write(tmp_path):
    path = str(tmp_path / "metadata.log")
    m = MetadataLog(path)
    m.append([{"type": "a", "n": 1}, {"type": "b", "n": 2}])
    m.close()
    with open(path, "ab") as f:
        f.write(b"deadbeef\t{\"offset\":2,\"rec")  # kill -9 mid-write
    m2 = MetadataLog(path)
    assert [r["n"] for r in m2.records] == [1, 2]
    m2.append([{"type": "c", "n": 3}])
    m2.close()
    assert [r["n"] for r in MetadataLog(path).records] == [1, 2, 3]


def test_offset_for_timestamp_across_flushed_and_unflushed_entries(tmp_path):
    log = LocalLog(str(tmp_path), segment_bytes=2048, index_flush_batches=3)
    for _ in range(20):
        _append(log, [b"w" * 100])
    # batch() stamps timestamps 1_700_000_000_000 + i within a batch; every batch starts there.
    assert log.offset_for_timestamp(1_700_000_000_000) == (0, 1_700_000_000_000)
    assert log.offset_for_timestamp(1_800_000_000_000) is None
    log.close()
    assert LocalLog(str(tmp_path), segment_bytes=2048).offset_for_timestamp(0) == (0, 1_700_000_000_000)
