"""Client-side tools to exercise and time shared-storage moves (tests and benchmarks).

- `LoadProducer`: a confluent-kafka idempotent producer in a thread, producing numbered,
  self-describing payloads at a steady rate and recording every ack (offset, time).
- `prefill`: fill a partition fast with large batches (real data, through the real produce path).
- `read_back` / `check_acked`: read a partition with a real consumer and check every acked
  message is there, byte-identical, in order, without duplicates.
- `move_timeline`: join the move's events (controller, source, target) into one phase breakdown.
"""
from __future__ import annotations

import hashlib
import os
import struct
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from systems.core.events import read_events

_HDR = struct.Struct(">8sQ")


def payload(tag: bytes, seq: int, size: int) -> bytes:
    """A deterministic, unique payload: tag, sequence number, then bytes derived from both."""
    head = _HDR.pack(tag.ljust(8, b"_")[:8], seq)
    seed = hashlib.blake2b(head, digest_size=32).digest()
    n = max(0, size - len(head))
    return head + (seed * (n // 32 + 1))[:n]


def parse_payload(v: bytes) -> tuple[bytes, int]:
    tag, seq = _HDR.unpack_from(v, 0)
    return tag, seq


class LoadProducer:
    """Steady idempotent load on one partition (or round-robin over a list of partitions);
    `acks` holds (seq, offset, monotonic ack time)."""

    def __init__(self, bootstrap: str, topic: str, partition, msgs_per_s: float = 500, size: int = 1024,
                 tag: bytes = b"load", **conf):
        self.topic, self.partition, self.rate, self.size, self.tag = topic, partition, msgs_per_s, size, tag
        c = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
             "message.timeout.ms": 120000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200}
        c.update(conf)
        self.producer = Producer(c)
        self.acks: list[tuple[int, int, float]] = []
        self.errors: list[tuple[int, str]] = []
        self.sent = 0
        self.sent_ts: list[float] = []  # monotonic produce() time per sequence number
        self.fatal = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "LoadProducer":
        self._thread.start()
        return self

    def _cb(self, seq):
        def cb(err, msg):
            if err is not None:
                self.errors.append((seq, str(err)))
                if err.fatal():
                    self.fatal = str(err)
            else:
                self.acks.append((seq, msg.offset(), time.monotonic()))
        return cb

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = t0 + self.sent / self.rate
            now = time.monotonic()
            if now < due:
                self.producer.poll(min(due - now, 0.005))
                continue
            try:
                part = (self.partition if isinstance(self.partition, int)
                        else self.partition[self.sent % len(self.partition)])
                self.producer.produce(self.topic, payload(self.tag, self.sent, self.size), partition=part,
                                      on_delivery=self._cb(self.sent))
                self.sent_ts.append(time.monotonic())
                self.sent += 1
            except BufferError:
                self.producer.poll(0.01)
            self.producer.poll(0)

    def stop(self, flush_timeout: float = 60.0) -> int:
        self._stop.set()
        self._thread.join(10)
        left = self.producer.flush(flush_timeout)
        return left

    def ack_latencies(self) -> list[float]:
        """produce() -> delivery report, seconds, per acked message."""
        return [t - self.sent_ts[seq] for seq, _, t in self.acks]


def prefill(bootstrap: str, topic: str, partition: int, total_bytes: int, msg_size: int = 256 * 1024,
            tag: bytes = b"prefill") -> tuple[int, float]:
    """Produce `total_bytes` in large batches; returns (messages, seconds)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 8_000_000,
                  "message.max.bytes": 10_000_000, "queue.buffering.max.kbytes": 512 * 1024,
                  "enable.idempotence": False, "message.timeout.ms": 300000})
    block = os.urandom(4 << 20)
    n = total_bytes // msg_size
    failed = []
    t0 = time.monotonic()
    for i in range(n):
        off = (i * 7919) % (len(block) - msg_size)
        v = _HDR.pack(tag.ljust(8, b"_")[:8], i) + block[off + 16: off + msg_size]
        while True:
            try:
                p.produce(topic, v, partition=partition,
                          on_delivery=lambda err, msg: failed.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(300)
    assert left == 0 and not failed, (left, failed[:3])
    return n, time.monotonic() - t0


def read_back(bootstrap: str, topic: str, partition: int, start: int, end: int, timeout: float = 120.0,
              keep=lambda off, value: True) -> list[tuple[int, bytes]]:
    """Messages with start <= offset < end, as (offset, value) for those `keep` accepts."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.time_ns()}",
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                  "max.partition.fetch.bytes": 16 << 20, "fetch.wait.max.ms": 200})
    out = []
    try:
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        last = start - 1
        while last < end - 1:
            if time.monotonic() > deadline:
                raise AssertionError(f"read back of {topic}-{partition} timed out at offset {last + 1} of {end}")
            for m in c.consume(1000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                if m.offset() >= end:
                    last = end - 1
                    continue
                last = m.offset()
                if keep(m.offset(), m.value()):
                    out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def check_acked(load: LoadProducer, messages: list[tuple[int, bytes]]) -> dict:
    """Every acked message present at its acked offset, byte-identical; load messages in
    sequence order; no sequence number twice. Returns counts; raises AssertionError."""
    by_offset = {}
    seen = {}
    prev_seq = -1
    for off, v in messages:
        tag, seq = parse_payload(v)
        if tag != load.tag.ljust(8, b"_")[:8]:
            continue
        assert seq not in seen, f"duplicate: seq {seq} at offsets {seen[seq]} and {off}"
        seen[seq] = off
        assert seq > prev_seq, f"reordered: seq {seq} at offset {off} after seq {prev_seq}"
        prev_seq = seq
        by_offset[off] = v
    for seq, off, _ in load.acks:
        got = by_offset.get(off)
        assert got is not None, f"lost write: acked seq {seq} at offset {off} not read back"
        assert got == payload(load.tag, seq, load.size), f"acked seq {seq} at offset {off} differs"
    return {"acked": len(load.acks), "read": len(seen)}


def move_timeline(cluster_dir: str, topic: str, partition: int, move_id: int | None = None) -> dict | None:
    """Phase breakdown of one move (the latest if move_id is None), from events.jsonl files."""
    evs = [e for e in read_events(cluster_dir) if e.get("topic") == topic and e.get("partition") == partition
           and e.get("event", "").startswith("shared_")]
    ids = [e["move_id"] for e in evs if e["event"] == "shared_move_requested"]
    if not ids:
        return None
    mid = move_id if move_id is not None else ids[-1]
    mine = {e["event"]: e for e in evs if e.get("move_id") == mid}
    req = mine.get("shared_move_requested")
    if req is None:
        return None
    out = {"move_id": mid, "from": req["from"], "to": req["to"], "cause": req.get("cause"), "request_ts": req["ts"]}
    com = mine.get("shared_move_committed")
    if com:
        out["commit_ms"] = com.get("commit_ms")
    cl = mine.get("shared_partition_closed")
    if cl:
        for k in ("wal_wait_ms", "meta_persist_ms", "force_upload_ms", "force_upload_bytes", "stream_close_ms",
                  "close_total_ms", "end_offset"):
            out[k] = cl.get(k)
    el = mine.get("shared_move_elected")
    if el:
        out["election_s_since_request"] = el.get("since_request_s")
        out["election_how"] = el.get("how")
        out["elected_ts"] = el["ts"]
    op = mine.get("shared_partition_opened")
    if op:
        out.update(open_ms=op["open_ms"], replay_ms=op["replay_ms"], recovery=op["recovery"],
                   replay_bytes=op["replay_bytes"], ready_ts=op["ts"], end_offset=op["end_offset"])
        out["move_seconds"] = round(op["ts"] - req["ts"], 4)
    return out
