"""Wire-level behaviour: versions, framing limits, record validation, idempotence.

One single-broker cluster for the module (the tests only open connections of their own and
produce to topics of their own: "raw" for record validation, "seq" for the idempotent sequences);
the test of a non-leader starts its own two brokers."""
from __future__ import annotations

import struct

import pytest
from kafka.admin import NewTopic
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse

from systems.core import errors
from tests.support.clients import create_topics
from tests.support.clusters import FAST, start_cluster
from tests.support.rawclient import RawConn, batch


@pytest.fixture(scope="module")
def one_broker(tmp_path_factory):
    c = start_cluster(tmp_path_factory, "replication", 1, {**FAST, "socket.request.max.bytes": str(1024 * 1024)})
    try:
        create_topics(c.bootstrap, [NewTopic("raw", 1, 1), NewTopic("seq", 1, 1)])
        b = c.brokers[1]
        yield c, (b.host, b.port)
    finally:
        c.stop()


def produce(conn: RawConn, records: bytes, acks: int = -1, version: int = 9, topic: str = "raw"):
    req = ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    resp = conn.request(req, ProduceResponse)
    pr = resp.responses[0].partition_responses[0]
    return pr.error_code, pr.base_offset


def seq(conn: RawConn, records: bytes):
    """produce() to the idempotence test's own topic."""
    return produce(conn, records, topic="seq")


def test_api_versions_lists_what_is_implemented(one_broker):
    _, addr = one_broker
    conn = RawConn(*addr)
    resp = conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                        ApiVersionsResponse)
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert resp.error_code == 0
    assert keys[0][0] == 3  # Produce: record batches v2 only
    assert {0, 1, 2, 3, 18, 19, 20, 22, 60} <= set(keys)
    assert {8, 9, 10, 11, 12, 13, 14, 15, 16, 42} <= set(keys)  # consumer groups (systems/core/groups.py)
    assert 24 not in keys  # AddPartitionsToTxn (transactions) is not implemented


def test_unsupported_versions_and_apis(one_broker):
    _, addr = one_broker
    # ApiVersions newer than the broker's: v0 answer with UNSUPPORTED_VERSION and the ranges.
    conn = RawConn(*addr)
    hdr = struct.pack(">hhih", 18, 99, 42, 1) + b"x"
    conn.send_raw(struct.pack(">i", len(hdr)) + hdr)
    frame = conn.recv_frame()
    assert struct.unpack_from(">i", frame)[0] == 42  # correlation id (response header v0)
    resp = ApiVersionsResponse.decode(frame[4:], version=0)
    assert resp.error_code == errors.UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in resp.api_keys)
    # Any other unsupported API or version: the connection is closed, as Kafka does.
    for key, ver in ((24, 1), (0, 2), (3, 99)):
        c2 = RawConn(*addr)
        hdr = struct.pack(">hhih", key, ver, 1, 1) + b"x" + b"\0" * 8
        c2.send_raw(struct.pack(">i", len(hdr)) + hdr)
        assert c2.closed(), (key, ver)


def test_oversized_frame_closes_only_that_connection(one_broker):
    _, addr = one_broker
    bad = RawConn(*addr)
    good = RawConn(*addr)
    bad.send_raw(struct.pack(">i", 200 * 1024 * 1024))  # over socket.request.max.bytes (1 MiB here)
    assert bad.closed()
    neg = RawConn(*addr)
    neg.send_raw(struct.pack(">i", -5))
    assert neg.closed()
    resp = good.request(ApiVersionsRequest[0](), ApiVersionsResponse)
    assert resp.error_code == 0


def test_record_batch_validation(one_broker):
    _, addr = one_broker
    conn = RawConn(*addr)
    good = batch([b"a", b"b"])
    assert produce(conn, good) == (0, 0)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert produce(conn, bytes(corrupt))[0] == errors.CORRUPT_MESSAGE
    assert produce(conn, good[:40])[0] == errors.CORRUPT_MESSAGE
    assert produce(conn, good + good)[0] == errors.INVALID_RECORD  # one batch per partition
    old_magic = bytearray(good)
    old_magic[16] = 1
    assert produce(conn, bytes(old_magic))[0] == errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert produce(conn, batch([b"c"]))[1] == 2  # nothing bad was appended


def test_idempotent_sequences(one_broker):
    _, addr = one_broker
    conn = RawConn(*addr)
    init = conn.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
    assert init.error_code == 0 and init.producer_id >= 0
    pid, epoch = init.producer_id, init.producer_epoch
    b0 = batch([b"m0", b"m1", b"m2"], pid, epoch, 0)
    assert seq(conn, b0) == (0, 0)
    # The same batch again is a duplicate: answered with its first offset, not appended.
    assert seq(conn, b0) == (0, 0)
    assert seq(conn, batch([b"m3"], pid, epoch, 3)) == (0, 3)
    # A gap in the sequence is out of order.
    assert seq(conn, batch([b"m9"], pid, epoch, 9))[0] == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # An older epoch is fenced.
    bumped = conn.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                   producer_id=pid, producer_epoch=epoch), InitProducerIdResponse)
    assert bumped.producer_epoch == epoch + 1
    assert seq(conn, batch([b"n0"], pid, epoch + 1, 0)) == (0, 4)
    assert seq(conn, batch([b"old"], pid, epoch, 4))[0] == errors.INVALID_PRODUCER_EPOCH
    # A producer the partition never saw must start at sequence 0.
    assert seq(conn, batch([b"x"], pid + 500, 0, 7))[0] == errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_produce_to_non_leader_and_unknown_topic(make_cluster):
    c = make_cluster(brokers=2)
    create_topics(c.bootstrap, [NewTopic("raw", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [2]})])
    conn = RawConn(c.brokers[1].host, c.brokers[1].port)
    assert produce(conn, batch([b"a"]))[0] == errors.NOT_LEADER_OR_FOLLOWER
    req = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="nope", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch([b"a"]))])])
    resp = conn.request(req, ProduceResponse)
    assert resp.responses[0].partition_responses[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
