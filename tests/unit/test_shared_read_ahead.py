"""The shared system's cold reads load ahead of the reader: after a block is read, the ranges that
follow (up to READ_AHEAD_RANGES of them, within a read block's bytes) are fetched in parallel, so a
partition of small objects (one producer batch each) is not read one GET round trip per batch.

Runs against a stand-in object store that counts the GETs in flight."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from systems.shared import formats
from systems.shared.store import READ_AHEAD_RANGES, StreamStore

BATCH = 100  # bytes of one batch; each range (object) holds one


class CountingStore:
    """aget_range answers a range's index or data after a short wait, counting GETs in flight."""

    def __init__(self, objects: dict[str, tuple[bytes, bytes]]) -> None:
        self.objects = objects  # key -> (index, data)
        self.in_flight = self.most = self.gets = 0

    async def aget_range(self, key: str, pos: int, length: int) -> bytes:
        self.in_flight += 1
        self.gets += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        idx, data = self.objects[key]
        return idx if pos == len(data) else data[pos:pos + length]


def _store(n: int, block_bytes: int) -> tuple[StreamStore, CountingStore]:
    objects, ranges = {}, []
    for i in range(n):
        data = bytes([i % 256]) * BATCH
        idx = formats._IDX.pack(i, i, 0, 0)  # base, last offset, position, max timestamp
        objects[f"o{i}"] = (idx, data)
        ranges.append({"key": f"o{i}", "start": i, "end": i + 1, "pos": 0, "len": BATCH,
                       "ipos": BATCH, "ilen": len(idx), "max_ts": 0})
    cs = CountingStore(objects)
    st = StreamStore(SimpleNamespace(store=cs, settings=SimpleNamespace(read_block_bytes=block_bytes)),
                     notify=lambda: None)
    st.reset(0, n, ranges)
    return st, cs


def _read_all(st: StreamStore, n: int) -> bytes:
    async def go() -> bytes:
        out, off = [], 0
        for _ in range(100 * n):  # bounded: each pass either reads or waits for a load
            if off >= n:
                break
            d = st.read(off, 1 << 20, n)
            if d:
                out.append(d)
                off += len(d) // BATCH
            else:
                await asyncio.sleep(0.005)
        return b"".join(out)
    return asyncio.run(go())


def test_small_objects_are_read_ahead_in_parallel():
    st, cs = _store(40, block_bytes=1 << 20)
    data = _read_all(st, 40)
    assert data == b"".join(bytes([i]) * BATCH for i in range(40))  # every batch, in order
    assert cs.most >= READ_AHEAD_RANGES, cs.most  # several ranges' GETs at once, not one after another


def test_read_ahead_stays_within_a_read_block():
    """Ranges as large as the read block: one ahead at a time, as before."""
    st, cs = _store(12, block_bytes=BATCH)
    assert _read_all(st, 12) == b"".join(bytes([i]) * BATCH for i in range(12))
    assert cs.most <= 2, cs.most  # the index and data GETs of one range


def test_one_read_answers_every_loaded_block_up_to_max_bytes():
    """A fetch of small objects gets as many of them as are loaded and fit (a whole batch each),
    not one object per round trip."""
    st, _ = _store(40, block_bytes=1 << 20)
    _read_all(st, 40)  # every block loaded
    assert st.read(0, 1 << 20, 40) == b"".join(bytes([i]) * BATCH for i in range(40))
    assert st.read(3, 2 * BATCH + 50, 40) == bytes([3]) * BATCH + bytes([4]) * BATCH
    assert st.read(3, 10, 40) == bytes([3]) * BATCH  # the first batch even when larger than max_bytes
    assert st.read(5, 1 << 20, 9) == b"".join(bytes([i]) * BATCH for i in range(5, 9))  # below the bound



def test_a_block_cut_short_by_max_bytes_ends_the_answer():
    """A block cut short by max_bytes (its next batch too large: a prefill's 1 MB batch) ends the
    answer; joining the next loaded block (small batches: the load's) there would skip the batches
    in between, which a reader then never sees (calibrate lost 32 prefill records of z4-2 this way,
    2026-11-27)."""
    sizes = [[100, 100, 300, 300], [10, 10, 10, 10]]  # two objects, four batches each
    objects, ranges = {}, []
    for k, sz in enumerate(sizes):
        pos = [sum(sz[:b]) for b in range(4)]
        data = b"".join(bytes([4 * k + b]) * sz[b] for b in range(4))
        idx = b"".join(formats._IDX.pack(4 * k + b, 4 * k + b, pos[b], 0) for b in range(4))
        objects[f"o{k}"] = (idx, data)
        ranges.append({"key": f"o{k}", "start": 4 * k, "end": 4 * k + 4, "pos": 0, "len": len(data),
                       "ipos": len(data), "ilen": len(idx), "max_ts": 0})
    cs = CountingStore(objects)
    st = StreamStore(SimpleNamespace(store=cs, settings=SimpleNamespace(read_block_bytes=1 << 20)), notify=lambda: None)
    st.reset(0, 8, ranges)

    async def load_all():
        for k in range(2):
            await st.load_block(4 * k)
    asyncio.run(load_all())
    assert st.read(0, 250, 8) == bytes([0]) * 100 + bytes([1]) * 100  # offsets 2, 3 come next, not 4
    assert st.read(2, 10_000, 8) == b"".join(bytes([o]) * n for o, n in zip(range(2, 8), [300, 300, 10, 10, 10, 10]))
