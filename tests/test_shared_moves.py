"""Shared-storage moves under an idempotent producer's load (real processes, real clients).

One 3-broker cluster with its embedded SeaweedFS serves the module. Each move: prefill the
partition with real data through the produce path (it ends up in stream objects in object
storage), start a steady confluent-kafka idempotent producer, ask for the move through the
AlterPartitionReassignments API, and check: request -> first ack written by the new owner
<= 2 s; every acked message read back byte-identical, in order, without duplicates; the
producer's idempotent session continues on the new owner (no new producer id or epoch there).
"""
from __future__ import annotations

import time

import pytest
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic

from bench.run.cluster import Cluster
from systems.core.events import read_events
from tests.shared_harness import LoadProducer, move_timeline, parse_payload, prefill, read_back, check_acked
from tests.clients import admin, create_topics, wait_for

MiB = 1 << 20
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster("shared", 3, str(tmp_path_factory.mktemp("shared") / "c"), dict(FAST))
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.stop()


def backlog_drained(c: Cluster, broker: int, threshold: int) -> bool:
    ups = [e for e in read_events(c.dir) if e["event"] == "shared_upload" and e["source"] == broker]
    return bool(ups) and ups[-1].get("backlog_bytes", 0) < threshold


def reassign(bootstrap: str, topic: str, partition: int, replicas: list[int]):
    a = admin(bootstrap)
    try:
        return a.alter_partition_reassignments({KTP(topic, partition): replicas})
    finally:
        a.close()


def move_under_load(c: Cluster, topic: str, size: int) -> dict:
    create_topics(c.bootstrap, [NewTopic(topic, replica_assignments={0: [1]},
                                         topic_configs={"max.message.bytes": str(16 * MiB)})])
    n, secs = prefill(c.bootstrap, topic, 0, size)
    # A stable cluster: uploads have caught up with the prefill (what a move flushes is the tail).
    wait_for(lambda: backlog_drained(c, 1, 32 * MiB), 60, "uploads to catch up")
    load = LoadProducer(c.bootstrap, topic, 0, msgs_per_s=400, size=1000).start()
    try:
        wait_for(lambda: len(load.acks) > 200, 20, "load producer acks")
        t_req = time.monotonic()
        reassign(c.bootstrap, topic, 0, [2])
        tl = wait_for(lambda: (lambda t: t if t and "ready_ts" in t else None)(move_timeline(c.dir, topic, 0)),
                      30, "the target to serve")
        end = tl["end_offset"]  # offsets >= end were written by the new owner
        first_new = wait_for(lambda: min((t for _, off, t in list(load.acks) if off >= end), default=None),
                             20, "an ack from the new owner")
        time.sleep(1.0)
    finally:
        left = load.stop(60)
    assert left == 0 and not load.errors and load.fatal is None, (left, load.errors[:5], load.fatal)
    ack_s = first_new - t_req
    tl["request_to_first_new_ack_s"] = round(ack_s, 3)
    tl["prefill_mib_per_s"] = round(size / MiB / secs, 1)
    print(f"\n{topic}: {size // MiB} MiB, move {tl}")
    assert ack_s <= 2.0, tl

    # Every acked load message, byte-identical, in order, no duplicates (read from the new owner).
    first = min(off for _, off, _ in load.acks)
    last = max(off for _, off, _ in load.acks)
    msgs = read_back(c.bootstrap, topic, 0, first, last + 1, timeout=60)
    counts = check_acked(load, msgs)
    assert counts["acked"] == len(load.acks) > 500
    # The producer's idempotent session was kept: the target knew it from the meta stream.
    sessions = [e for e in read_events(c.dir) if e["event"] == "shared_producer_session" and e["topic"] == topic
                and e["source"] == 2]
    assert sessions == [], sessions
    # Old data is served by the new owner from stream objects (cold range reads), intact.
    head = read_back(c.bootstrap, topic, 0, 0, 64, timeout=30)
    assert [parse_payload(v)[1] for _, v in head] == list(range(64))
    return tl


def test_move_100mib_partition_under_load(cluster):
    tl = move_under_load(cluster, "m100", 100 * MiB)
    assert tl["recovery"] == "clean" and tl["election_how"] == "closed"


def test_move_1gib_partition_under_load(cluster):
    tl = move_under_load(cluster, "m1g", 1024 * MiB)
    assert tl["recovery"] == "clean"


def test_reassignment_must_name_exactly_one_broker(cluster):
    create_topics(cluster.bootstrap, [NewTopic("inv", 1, 1)])
    for bad in ([1, 2], [1, 2, 3], [99]):
        res = reassign(cluster.bootstrap, "inv", 0, bad)
        assert [e.__name__ for e in res.values()] == ["InvalidReplicationAssignmentError"], (bad, res)
