"""Random, truncated, oversized and mutated frames: no broker goes down."""
from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from systems.core.process import alive as _alive
from tests.support.clients import consume_all, create_topics, idempotent_producer, produce_all
from tests.support.rawclient import batch

MAX_REQUEST = 1024 * 1024
EXAMPLES = 1200


def _valid_frames() -> list[bytes]:
    out = []
    for v in (3, 9, 12):
        req = ProduceRequest[v](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name="fuzz", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch([b"v" * 50] * 3))])])
        req.with_header(correlation_id=1, client_id="fuzz")
        out.append(bytes(req.encode(header=True, framed=True)))
    for v in (1, 9, 12):
        req = MetadataRequest[v](topics=None, allow_auto_topic_creation=False)
        req.with_header(correlation_id=2, client_id="fuzz")
        out.append(bytes(req.encode(header=True, framed=True)))
    return out


VALID = _valid_frames()


@st.composite
def frames(draw):
    kind = draw(st.sampled_from(["random", "mutated", "truncated", "oversized", "header_only", "lying_size"]))
    if kind == "random":
        body = draw(st.binary(min_size=0, max_size=300))
        return struct.pack(">i", len(body)) + body
    base = bytearray(draw(st.sampled_from(VALID)))
    if kind == "mutated":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(4, len(base) - 1))
            base[i] = draw(st.integers(0, 255))
        return bytes(base)
    if kind == "truncated":
        return bytes(base[:draw(st.integers(1, len(base) - 1))])
    if kind == "oversized":
        return struct.pack(">i", draw(st.integers(MAX_REQUEST + 1, 2**31 - 1))) + bytes(base[4:])
    if kind == "header_only":
        key, ver = draw(st.integers(-5, 80)), draw(st.integers(-3, 40))
        return struct.pack(">ihhi", 8, key, ver, 7)
    # a size prefix that claims more or less than what follows
    return struct.pack(">i", draw(st.integers(-10, 4000))) + bytes(base[4:])


def _send(addr, data: bytes) -> None:
    with socket.create_connection(addr, timeout=2) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(0.5)
            while s.recv(65536):
                pass
        except (socket.timeout, ConnectionError):
            pass


@pytest.mark.slow
def test_brokers_survive_fuzzed_frames(make_cluster):
    c = make_cluster(brokers=3, socket_request_max_bytes=MAX_REQUEST)
    create_topics(c.bootstrap, [NewTopic("fuzz", 3, 1)])
    addrs = [(b.host, b.port) for b in c.brokers.values()]
    count = [0]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(frames(), st.integers(0, len(addrs) - 1))
    def run(data, which):
        count[0] += 1
        _send(addrs[which], data)

    run()
    assert count[0] >= 1000
    for b in c.brokers.values():
        assert _alive(b.pid, c.dir), f"broker {b.id} died"
    # A real client still works against every broker.
    p = idempotent_producer(c.bootstrap)
    acked = produce_all(p, [("fuzz", i % 3, None, b"after-%d" % i, None) for i in range(300)])
    # Fuzzed frames that happened to be valid also appended messages: read to the end.
    got = consume_all(c.bootstrap, {("fuzz", i): _end_offset(c, i) for i in range(3)})
    values = {v for msgs in got.values() for _, _, v, _ in msgs}
    assert {m.value() for m in acked} <= values


def _end_offset(c, partition: int) -> int:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "fuzz-check"})
    try:
        lo, hi = cons.get_watermark_offsets(TopicPartition("fuzz", partition), timeout=10)
    finally:
        cons.close()
    assert lo == 0
    return hi
