"""Leader-epoch based truncation of the replication-copy system (KIP-101, KIP-279).

A follower that truncated to its own high watermark on a leader change (it learns the HW one
fetch after the leader) dropped acked records; elected next, it lost them for good. Now it asks
the leader (OffsetForLeaderEpoch) where their logs diverge and keeps everything the leader has.

Here, on a real cluster: the failure that lost acked records, three times on one cluster (new
leader killed right after a reassignment), every process stopped by PID at the end. The epoch
cache and the truncation between replicas without a network: tests/unit/test_leader_epochs.py.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from bench.run.cluster import Cluster
from systems.core import errors
from tests.support.clients import admin, consume_all, idempotent_producer, produce_all, wait_for
from tests.support.clusters import FAST
from tests.support.rawclient import RawConn

pytestmark = pytest.mark.timeout(120)

CONFIG = {**FAST, "default.replication.factor": "3", "min.insync.replicas": "2"}


def _leader(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "meta", "log_level": 0})
    try:
        md = c.list_topics(topic, timeout=5)
        return md.topics[topic].partitions[0].leader
    finally:
        c.close()


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "log_level": 0})
    try:
        return c.get_watermark_offsets(CTP(topic, 0), timeout=10)
    finally:
        c.close()


@pytest.mark.slow
def test_acked_records_survive_leader_change_and_kill(tmp_path):
    """Topic t on [a, b, c] (a leads), topic u led by b (so c's fetcher to b is long-polling);
    acks=all records, then t is reassigned to [b, c] (b leads, c follows b) and b is killed
    20 ms later, before c refetched: c leads next and must hold every acked record. Three
    rounds, each with a different broker as the new leader, the killed one restarted after."""
    c = Cluster("replication", 3, str(tmp_path / "cluster"), CONFIG)
    try:
        c.start(timeout=60)
        a_client = admin(c.bootstrap)
        prod = idempotent_producer(c.bootstrap, **{"linger.ms": 0, "log_level": 0})
        for rnd, (a, b, f) in enumerate(((3, 1, 2), (1, 2, 3), (2, 3, 1))):
            t, u = f"t{rnd}", f"u{rnd}"
            a_client.create_topics([NewTopic(t, -1, -1, replica_assignments={0: [a, b, f]}),
                                    NewTopic(u, -1, -1, replica_assignments={0: [b, f, a]})])
            wait_for(lambda: _leader(c.bootstrap, t) == a and _leader(c.bootstrap, u) == b, 20, "leaders")
            acked = produce_all(prod, [(t, 0, None, b"warm", None)])
            time.sleep(0.5)  # every replica in sync, no fetch in flight for t
            acked += produce_all(prod, [(t, 0, None, b"v%d" % i, None) for i in range(4)])
            a_client.alter_partition_reassignments({KTP(t, 0): [b, f]})
            time.sleep(0.02)
            c.kill_broker(b)
            wait_for(lambda: _leader(c.bootstrap, t) == f, 20, f"broker {f} leading {t}")
            deadline = time.monotonic() + 10  # the new leader's HW settles once b leaves the ISR
            while (w := _watermarks(c.bootstrap, t))[1] < len(acked) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert w == (0, len(acked)), f"round {rnd}: {len(acked)} acked, watermarks {w} on broker {f}"
            got = consume_all(c.bootstrap, {(t, 0): len(acked)}, timeout=20)[(t, 0)]
            assert [v for _, _, v, _ in got] == [m.value() for m in acked]
            c.restart_broker(b, timeout=60)
            # The next round's reassignment needs b registered and unfenced again.
            wait_for(lambda: _leader(c.bootstrap, u) >= 0 and b in _live(c.bootstrap), 20, f"broker {b} back")
        prod.flush(10)
        a_client.close()
        _check_offset_for_leader_epoch(c, "t2", leader=1, follower=3, leo=5)
    finally:
        c.stop()


def _live(bootstrap: str) -> set[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "meta", "log_level": 0})
    try:
        return set(c.list_topics(timeout=5).brokers)
    finally:
        c.close()


def _check_offset_for_leader_epoch(c: Cluster, topic: str, leader: int, follower: int, leo: int) -> None:
    """Kafka's answers on the wire: the epoch's end offset, fencing by the caller's current
    epoch, and NOT_LEADER_OR_FOLLOWER from a follower."""
    lp, fp = c.brokers[leader], c.brokers[follower]
    conn = RawConn(lp.host, lp.port)
    md = conn.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=topic)],
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                      MetadataResponse)
    epoch = md.topics[0].partitions[0].leader_epoch
    assert epoch >= 2 and md.topics[0].partitions[0].leader_id == leader

    def ask(to: RawConn, current: int, wanted: int):
        Q = OffsetForLeaderEpochRequest
        r = to.request(Q[4](replica_id=-1, topics=[Q.OffsetForLeaderTopic(topic=topic, partitions=[
            Q.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=current,
                                                            leader_epoch=wanted)])]),
                       OffsetForLeaderEpochResponse)
        e = r.topics[0].partitions[0]
        return e.error_code, e.leader_epoch, e.end_offset

    # Every record was written in epoch 0; later epochs started at offset 5 (no records since).
    assert ask(conn, epoch, epoch) == (errors.NONE, epoch, leo)
    assert ask(conn, -1, 0) == (errors.NONE, 0, leo)
    assert ask(conn, epoch, epoch + 5) == (errors.NONE, -1, -1)  # newer than any: UNDEFINED
    assert ask(conn, epoch - 1, 0)[0] == errors.FENCED_LEADER_EPOCH
    assert ask(conn, epoch + 1, 0)[0] == errors.UNKNOWN_LEADER_EPOCH
    other = RawConn(fp.host, fp.port)
    assert ask(other, epoch, 0)[0] == errors.NOT_LEADER_OR_FOLLOWER
    conn.close()
    other.close()
