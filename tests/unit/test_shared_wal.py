"""The shared system's WAL writer: several WAL objects in flight at once (concurrent PUTs, at most
`wal.max.inflight`), confirmed to producers strictly in order - a WAL object's entries are
confirmed only when it and every earlier one are durable - and nothing confirmed for an object
whose PUT never succeeded.

The writer runs against a stand-in backend whose object store holds every PUT until the test
releases it, so the order of completion is the test's choice.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from systems.shared import formats
from systems.shared.backend import READY, WalItem, WalWriter
from systems.shared.objstore import ObjectStoreUnavailable
from systems.shared.settings import SharedSettings

EPOCH = 7


class HeldStore:
    """aput waits until the test releases that key (or fails it)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, asyncio.Future] = {}
        self.bodies: dict[str, bytes] = {}
        self.active = self.max_active = 0

    async def aput(self, key: str, body: bytes) -> None:
        self.started.append(key)
        gate = self.gates.setdefault(key, asyncio.get_running_loop().create_future())
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await gate
        finally:
            self.active -= 1
            self.gates.pop(key, None)
        self.bodies[key] = body

    def release(self, i: int) -> None:
        self.gates[self.started[i]].set_result(None)

    def fail(self, i: int) -> None:
        self.gates[self.started[i]].set_exception(ObjectStoreUnavailable("down"))


class Part:
    """A partition as the WAL writer sees it; records confirmations in order and, like
    SharedPartition.on_confirmed, takes only the item that starts at its durable end."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log
        self.incarnation, self.state = EPOCH, READY
        self.confirmed = 0

    def on_confirmed(self, item: WalItem) -> None:
        if item.base == self.confirmed:
            self.confirmed = item.last + 1
            self.log.append((self.name, item.base))


def backend(store: HeldStore, max_inflight: int) -> SimpleNamespace:
    settings = SharedSettings.from_config({"wal.batch.interval.ms": 1, "wal.max.inflight": max_inflight})
    return SimpleNamespace(
        settings=settings, store=store, prefix="t", wal_objects={},
        broker=SimpleNamespace(id=1, epoch=EPOCH),
        lease_valid=lambda: True, unuploaded_bytes=lambda: 0, maybe_upload=lambda: None)


async def until(cond, timeout: float = 5.0) -> None:
    end = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < end, "condition not reached in time"
        await asyncio.sleep(0.005)


def item(part: Part, base: int) -> WalItem:
    return WalItem(part, 11, 0, base, base, 0, b"x" * 100)


async def _writer(max_inflight: int):
    store = HeldStore()
    b = backend(store, max_inflight)
    w = WalWriter(b)
    task = asyncio.get_running_loop().create_task(w.run())
    return store, b, w, task


def test_slow_first_put_holds_back_the_acks_of_later_ones():
    async def main():
        store, b, w, task = await _writer(4)
        log: list = []
        a, c = Part("a", log), Part("c", log)
        try:
            w.add(item(a, 0))
            await until(lambda: len(store.started) == 1)
            w.add(item(c, 0))
            w.add(item(a, 1))
            await until(lambda: len(store.started) == 2)  # second PUT starts while the first is held
            assert store.max_active == 2
            store.release(1)
            await until(lambda: 2 in b.wal_objects)  # the second object is durable ...
            await asyncio.sleep(0.05)
            assert log == [] and w.pending_bytes == 300  # ... but nothing is confirmed before the first
            store.release(0)
            await until(lambda: len(log) == 3)
            assert log == [("a", 0), ("c", 0), ("a", 1)]
            assert w.pending_bytes == 0
            # The objects carry their sequence numbers, so recovery replays them in this order.
            seqs = [formats.decode_wal(store.bodies[k])[0]["seq"] for k in sorted(store.bodies)]
            assert seqs == [1, 2]
        finally:
            task.cancel()

    asyncio.run(main())


def test_in_flight_objects_are_bounded():
    async def main():
        store, b, w, task = await _writer(2)
        log: list = []
        p = Part("p", log)
        try:
            for base in range(4):
                w.add(item(p, base))
                await asyncio.sleep(0.02)  # one WAL object per add (the interval is 1 ms)
            await until(lambda: len(store.started) == 2)
            await asyncio.sleep(0.1)
            assert len(store.started) == 2 and store.max_active == 2  # the rest waits for a slot
            store.release(0)
            await until(lambda: len(store.started) == 3)
            assert log == [("p", 0)]
            # What waited for a slot went out as one object.
            store.release(1)
            store.release(2)
            await until(lambda: len(log) == 4)
            assert [base for _, base in log] == [0, 1, 2, 3]
            assert len(store.started) == 3 and store.max_active == 2
        finally:
            task.cancel()

    asyncio.run(main())


def test_nothing_acknowledged_from_a_put_that_never_succeeded():
    """A crash with objects in flight: the broker's incarnation ends while the first PUT fails
    (retrying); the second object, durable, must not confirm anything past the first."""

    async def main():
        store, b, w, task = await _writer(4)
        log: list = []
        p = Part("p", log)
        try:
            w.add(item(p, 0))
            await until(lambda: len(store.started) == 1)
            w.add(item(p, 1))
            await until(lambda: len(store.started) == 2)
            store.release(1)
            await until(lambda: 2 in b.wal_objects)
            b.broker.epoch += 1  # fenced / restarted: the first object's retries stop
            store.fail(0)
            await until(lambda: w.next_confirm == 3)
            # The first object's entries are dropped, never confirmed, and the second's cannot
            # be: the partition's durable end is still 0.
            assert 1 not in b.wal_objects and w.pending_bytes == 0
            assert log == [] and p.confirmed == 0
        finally:
            task.cancel()

    asyncio.run(main())


@pytest.mark.parametrize("value, expected", [(None, 4), ("8", 8), ("0", 1)])
def test_max_inflight_setting(value, expected):
    cfg = {} if value is None else {"wal.max.inflight": value}
    assert SharedSettings.from_config(cfg).wal_max_inflight == expected


def test_a_wal_object_is_a_stream_set_object_its_ranges_read_back():
    """WAL format 2: each stream's batches form one section (data + index) the ranges locate, so a
    range can be committed to its stream as it is; decoding gives every batch back."""
    e = lambda sid, base, n: WalItem(None, sid, 3, base, base + n - 1, 1000 + base, bytes([sid]) * (10 * n))
    entries = [e(5, 0, 2), e(6, 10, 1), e(5, 2, 3), e(6, 11, 4)]  # interleaved, as appends arrive
    body, ranges = formats.encode_wal(1, EPOCH, 9, entries)
    assert [(r["stream_id"], r["start"], r["end"]) for r in ranges] == [(5, 0, 5), (6, 10, 15)]
    for r in ranges:
        assert body[r["pos"]:r["pos"] + r["len"]] == bytes([r["stream_id"]]) * (10 * (r["end"] - r["start"]))
        idx = formats.Index(body[r["ipos"]:r["ipos"] + r["ilen"]])
        assert idx.bases == [x.base for x in entries if x.stream_id == r["stream_id"]]
    head, got = formats.decode_wal(body)
    assert head == {"broker": 1, "broker_epoch": EPOCH, "seq": 9}
    assert [(x.stream_id, x.base, x.last, x.max_ts, x.data) for x in got] == \
        [(x.stream_id, x.base, x.last, x.max_ts, x.data) for x in sorted(entries, key=lambda x: x.stream_id)]
    with pytest.raises(formats.FormatError):
        formats.decode_wal(body[:-1] + bytes([body[-1] ^ 1]))


def test_by_reference_a_durable_wal_object_hands_its_ranges_over_in_order():
    """shared.handoff=snapshot: once a WAL object and every earlier one are durable its ranges go
    to the backend (the partitions' next stream ranges); the broker does not keep it for trimming."""
    async def main():
        store = HeldStore()
        b = backend(store, 4)
        b.settings = SharedSettings.from_config({"wal.batch.interval.ms": 1, "shared.handoff": "snapshot"})
        durable = []
        b.on_wal_durable = lambda key, size, ranges, items: durable.append((key, [r["start"] for r in ranges]))
        w = WalWriter(b)
        task = asyncio.get_running_loop().create_task(w.run())
        a = Part("a", [])
        try:
            w.add(item(a, 0))
            await until(lambda: len(store.started) == 1)
            w.add(item(a, 1))
            await until(lambda: len(store.started) == 2)
            store.release(1)
            await asyncio.sleep(0.05)
            assert durable == []  # the second is durable, the first not yet
            store.release(0)
            await until(lambda: len(durable) == 2)
            assert [starts for _, starts in durable] == [[0], [1]] and b.wal_objects == {}
        finally:
            task.cancel()

    asyncio.run(main())


def test_handoff_and_failpoint_settings_refuse_unknown_values():
    assert SharedSettings.from_config({"shared.handoff": "snapshot"}).by_reference
    with pytest.raises(ValueError, match="shared.handoff must be one of upload, snapshot"):
        SharedSettings.from_config({"shared.handoff": "copy"})
    with pytest.raises(ValueError, match="shared.failpoint must be one of"):
        SharedSettings.from_config({"shared.failpoint": "source.somewhere"})
