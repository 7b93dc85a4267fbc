"""Deterministic payloads and a background idempotent producer for move tests."""
from __future__ import annotations

import struct
import threading
import time

from confluent_kafka import Producer

_SEQ = struct.Struct(">QI")


def payload(producer_tag: int, seq: int, size: int) -> bytes:
    """seq and tag first, then bytes derived from them: any corruption shows."""
    head = _SEQ.pack(seq, producer_tag)
    body = (head * (size // len(head) + 1))[: size - len(head)]
    return head + body


def parse(value: bytes) -> tuple[int, int]:
    seq, tag = _SEQ.unpack_from(value)
    return tag, seq


def prefill(bootstrap: str, topic: str, partition: int, total_bytes: int, size: int = 4096, tag: int = 0) -> int:
    """Write total_bytes fast (large batches, idempotent, acks=all). Returns messages acked."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                  "batch.size": 1_000_000, "queue.buffering.max.kbytes": 262144})
    n = total_bytes // size
    errors = []
    for seq in range(n):
        while True:
            try:
                p.produce(topic, value=payload(tag, seq, size), partition=partition,
                          on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0 and not errors, errors[:3]
    return n


class BackgroundProducer:
    """An idempotent acks=all producer sending at a steady rate until stopped,
    remembering every acknowledged (partition, offset, seq)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, rate: int = 1000, size: int = 1024,
                 tag: int = 1, **conf):
        self.topic, self.partition, self.rate, self.size, self.tag = topic, partition, rate, size, tag
        cfg = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
               "message.timeout.ms": 120000}
        cfg.update(conf)
        self.p = Producer(cfg)
        self.acked: list[tuple[int, int, float]] = []  # (offset, seq, ack time)
        self.errors: list = []
        self.sent = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), parse(msg.value())[1], time.time()))

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.sent < due:
                try:
                    self.p.produce(self.topic, value=payload(self.tag, self.sent, self.size),
                                   partition=self.partition, on_delivery=self._cb)
                    self.sent += 1
                except BufferError:
                    break
            self.p.poll(0.005)

    def start(self) -> "BackgroundProducer":
        self._t.start()
        return self

    def stop(self, flush_timeout: float = 120) -> None:
        self._stop.set()
        self._t.join(10)
        assert self.p.flush(flush_timeout) == 0


def verify_partition(bootstrap: str, topic: str, partition: int, expected: dict[int, int], sizes: dict[int, int],
                     timeout: float = 120) -> dict[int, list[int]]:
    """Read the partition end to end; check every message is intact, each acked
    (tag, seq) appears exactly once, and seqs of each tag are in order.
    expected: tag -> number of acked messages that must be there (prefill: all
    0..n-1); returns tag -> seqs read in offset order."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800})
    seen: dict[int, list[int]] = {}
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
        c.assign([TopicPartition(topic, partition, lo)])
        deadline = time.monotonic() + timeout
        last = lo - 1
        while last < hi - 1:
            assert time.monotonic() < deadline, f"read back timed out at offset {last} of {hi}"
            for m in c.consume(10000, 0.5):
                assert not m.error(), m.error()
                assert m.offset() == last + 1, f"offset gap: {last} -> {m.offset()}"
                last = m.offset()
                tag, seq = parse(m.value())
                assert m.value() == payload(tag, seq, sizes[tag]), f"corrupt message at offset {m.offset()}"
                seen.setdefault(tag, []).append(seq)
    finally:
        c.close()
    for tag, seqs in seen.items():
        assert len(seqs) == len(set(seqs)), f"tag {tag}: duplicates"
        assert seqs == sorted(seqs), f"tag {tag}: reordered"
    return seen
