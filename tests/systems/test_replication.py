"""Replication-copy backend on clusters started directly, with plain clients: throttles, ISR,
failures, bad plans. Moves and failovers under produce load (scenarios run by the harness):
tests/harness/test_replication_runs.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from bench.run.load import prefill
from systems.core import errors
from tests.support.clients import admin, create_topics, idempotent_producer, produce_all, wait_for
from tests.support.rawclient import RawConn, batch

MiB = 1024 * 1024


def _partition(bootstrap, topic, index):
    try:
        a = admin(bootstrap)
    except KafkaError:
        return None
    try:
        t = a.describe_topics([topic])[0]
        return next(p for p in t["partitions"] if p["partition_index"] == index)
    except KafkaError:
        return None
    finally:
        a.close()


def _reassign(c, plan, *extra):
    path = f"{c.dir}/plan-{time.monotonic_ns()}.json"
    with open(path, "w") as f:
        json.dump({"version": 1, "partitions": plan}, f)
    return subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                           "--reassignment-json-file", path, *extra], capture_output=True, text=True, timeout=60)


def test_throttle_caps_only_the_move(make_cluster):
    c = make_cluster(brokers=3)
    create_topics(c.bootstrap, [
        NewTopic("big", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1]}),
        NewTopic("isr", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1, 2]}),
    ])
    b = 6 * MiB
    prefill(c.bootstrap, [("big", 0)], b)
    rate = 2_000_000  # slow enough that throttled ISR traffic could not go unnoticed
    t0 = time.monotonic()
    r = _reassign(c, [{"topic": "big", "partition": 0, "replicas": [3]}], "--execute", "--throttle", str(rate))
    assert r.returncode == 0 and "throttle limit was set" in r.stdout, r.stdout + r.stderr
    # While the move is throttled, ordinary ISR replication of another partition is not:
    # 16 MiB with acks=all (waits for the follower) finishes long before 16 MiB / rate.
    t1 = time.monotonic()
    produce_all(idempotent_producer(c.bootstrap, **{"linger.ms": 20, "batch.size": 1_000_000}),
                [("isr", 0, None, bytes(64 * 1024), None)] * 256)
    isr_seconds = time.monotonic() - t1
    wait_for(lambda: (p := _partition(c.bootstrap, "big", 0)) and p["replica_nodes"] == [3], 60, "throttled move")
    seconds = time.monotonic() - t0
    # The cap holds: never faster than 0.9 x bytes / rate (the fidelity bound; the
    # upper bound is measured in the benchmark, where timing noise is handled).
    assert seconds >= 0.9 * b / rate, f"{seconds:.2f}s for {b} bytes at {rate} B/s"
    assert isr_seconds < 0.5 * (16 * MiB) / rate, f"ISR replication was throttled ({isr_seconds:.2f}s)"
    r = _reassign(c, [{"topic": "big", "partition": 0, "replicas": [3]}], "--verify")
    assert "Clearing broker-level throttles" in r.stdout, r.stdout
    a = admin(c.bootstrap)
    try:
        from kafka.admin import ConfigResource, ConfigResourceType
        res = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
        text = str(res)
        assert "leader.replication.throttled.rate" not in text or "'value': None" in text
    finally:
        a.close()


def test_min_insync_replicas_refuses_acks_all(make_cluster):
    c = make_cluster(brokers=2)
    create_topics(c.bootstrap, [NewTopic("strict", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1, 2]},
                                         topic_configs={"min.insync.replicas": "2"})])
    conn = RawConn(c.brokers[1].host, c.brokers[1].port)
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    def produce(acks):
        req = ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="strict", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch([b"v"]))])])
        return conn.request(req, ProduceResponse).responses[0].partition_responses[0].error_code

    assert produce(-1) == 0
    c.kill_broker(2)
    wait_for(lambda: (p := _partition(f"{c.brokers[1].host}:{c.brokers[1].port}", "strict", 0)) and
          p["isr_nodes"] == [1], 15, "ISR shrink")
    assert produce(-1) == errors.NOT_ENOUGH_REPLICAS
    assert produce(1) == 0  # acks=1 is still accepted, as in Kafka


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_leader_election(make_cluster, unclean):
    c = make_cluster(brokers=2)
    create_topics(c.bootstrap, [NewTopic("u", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1, 2]},
                                         topic_configs={"unclean.leader.election.enable": str(unclean).lower()})])
    live1 = f"{c.brokers[1].host}:{c.brokers[1].port}"
    live2 = f"{c.brokers[2].host}:{c.brokers[2].port}"
    c.kill_broker(2)
    wait_for(lambda: (p := _partition(live1, "u", 0)) and p["isr_nodes"] == [1], 15, "ISR shrink to [1]")
    c.kill_broker(1)
    c.restart_broker(2)
    if unclean:
        wait_for(lambda: (p := _partition(live2, "u", 0)) and p["leader_id"] == 2, 15, "unclean election of 2")
    else:
        # Broker 1 is fenced (it is no longer listed), yet 2 - out of the ISR - is not elected.
        wait_for(lambda: (d := c.describe()) and any(b["id"] == 1 and b["fenced"] for b in d["brokers"]), 15,
              "broker 1 fenced")
        time.sleep(1)
        p = wait_for(lambda: _partition(live2, "u", 0), 15, "metadata")
        assert p["leader_id"] == -1 and p["isr_nodes"] == [1]


def test_bad_plans_change_nothing(make_cluster, tmp_path):
    c = make_cluster(brokers=3)
    create_topics(c.bootstrap, [NewTopic("t", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1], 1: [2]})])
    a = admin(c.bootstrap)
    try:
        res = a.alter_partition_reassignments({
            TopicPartition("t", 0): [9],          # unknown broker
            TopicPartition("t", 1): [2, 2],       # duplicate replicas
            TopicPartition("nope", 0): [1],       # unknown topic
            TopicPartition("t", 7): [1],          # unknown partition
        })
        codes = {(tp.topic, tp.partition): (err.errno if err else 0) for tp, err in res.items()}
        assert codes == {("t", 0): errors.INVALID_REPLICA_ASSIGNMENT, ("t", 1): errors.INVALID_REPLICA_ASSIGNMENT,
                         ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION, ("t", 7): errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert a.list_partition_reassignments() == {}
        cancel = a.alter_partition_reassignments({TopicPartition("t", 0): None})
        assert cancel[TopicPartition("t", 0)].errno == errors.NO_REASSIGNMENT_IN_PROGRESS
    finally:
        a.close()
    # An empty replica list, sent on the wire (kafka-python refuses to send one).
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
    R = AlterPartitionReassignmentsRequest
    conn = RawConn(c.brokers[1].host, c.brokers[1].port)
    resp = conn.request(R[0](timeout_ms=10000, topics=[R.ReassignableTopic(name="t", partitions=[
        R.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[])])]),
        AlterPartitionReassignmentsResponse)
    assert resp.responses[0].partitions[0].error_code == errors.INVALID_REPLICA_ASSIGNMENT
    assert _partition(c.bootstrap, "t", 0)["replica_nodes"] == [1]
    assert _partition(c.bootstrap, "t", 1)["replica_nodes"] == [2]
    # The CLI: malformed JSON and invalid plans get a clear message and exit 1.
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"t",')
    r = subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                        "--reassignment-json-file", str(bad), "--execute"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "not valid JSON" in r.stderr, r.stderr
    r = _reassign(c, [{"topic": "t", "partition": 0, "replicas": []}], "--execute")
    assert r.returncode == 1 and "must not be empty" in r.stderr
    r = _reassign(c, [{"topic": "t", "partition": 0, "replicas": [9]}], "--execute")
    assert r.returncode == 1 and "Unknown broker id 9 (in the replicas [9] of t-0)" in r.stdout, r.stdout
    assert _partition(c.bootstrap, "t", 0)["replica_nodes"] == [1]


def test_replica_removed_while_down_is_deleted_on_restart(make_cluster):
    c = make_cluster(brokers=3)
    create_topics(c.bootstrap, [NewTopic("gone", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1, 2]})])
    prefill(c.bootstrap, [("gone", 0)], 1 * MiB)
    stray = os.path.join(c.dir, "broker-2", "data", "gone-0")
    wait_for(lambda: os.path.isdir(stray) and os.listdir(stray), 15, "replica on broker 2")
    c.kill_broker(2)
    live = f"{c.brokers[1].host}:{c.brokers[1].port}"
    wait_for(lambda: (p := _partition(live, "gone", 0)) and p["isr_nodes"] == [1], 15, "broker 2 out of the ISR")
    r = _reassign(c, [{"topic": "gone", "partition": 0, "replicas": [1, 3]}], "--execute")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: (p := _partition(live, "gone", 0)) and p["replica_nodes"] == [1, 3], 60, "move to [1,3]")
    assert os.path.isdir(stray)
    c.restart_broker(2)
    wait_for(lambda: not os.path.exists(stray), 15, "stray replica deleted")
