"""Controller and broker crashes: metadata survives, RF=1 partitions go leader -1."""
from __future__ import annotations

from kafka.admin import NewTopic
from kafka.errors import KafkaError

from tests.support.clients import admin, consume_all, create_topics, idempotent_producer, produce_all, wait_for


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader; {} while the admin client picks a node that just died
    (it is still listed until the controller fences it)."""
    try:
        a = admin(bootstrap)
    except KafkaError:
        return {}
    try:
        t = a.describe_topics([topic])[0]
        return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
    except KafkaError:
        return {}
    finally:
        a.close()


def test_controller_kill9_restart_keeps_metadata_and_producing_resumes(make_cluster):
    c = make_cluster(brokers=3)
    create_topics(c.bootstrap, [NewTopic("t1", 6, 1), NewTopic("t2", 3, 1, topic_configs={"retention.ms": "60000"})])
    before = {t: _leaders(c.bootstrap, t) for t in ("t1", "t2")}
    p = idempotent_producer(c.bootstrap)
    first = produce_all(p, [("t1", i % 6, b"k", b"before-%d" % i, None) for i in range(600)])

    c.kill_controller()
    c.restart_controller()
    c.wait_ready(30)
    # Same topics, same ids, same assignment after replaying the metadata log.
    assert {t: _leaders(c.bootstrap, t) for t in ("t1", "t2")} == before
    d = c.describe()
    assert [b["id"] for b in d["brokers"]] == [1, 2, 3] and not any(b["fenced"] for b in d["brokers"])

    second = produce_all(p, [("t1", i % 6, b"k", b"after-%d" % i, None) for i in range(600)])
    create_topics(c.bootstrap, [NewTopic("t3", 2, 1)])  # the controller takes new work
    got = consume_all(c.bootstrap, {("t1", i): 200 for i in range(6)})
    values = sorted(v for msgs in got.values() for _, _, v, _ in msgs)
    assert values == sorted(m.value() for m in first + second)


def test_fenced_sole_replica_shows_leader_minus_one_until_its_broker_returns(make_cluster):
    c = make_cluster(brokers=3)
    create_topics(c.bootstrap, [NewTopic("rf1", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1], 1: [2], 2: [3]})])
    p = idempotent_producer(c.bootstrap)
    acked = produce_all(p, [("rf1", i % 3, None, b"m-%d" % i, None) for i in range(3000)])

    c.kill_broker(2)
    # kafka-python's admin gives up on a dead bootstrap server: ask a live one.
    live = f"{c.brokers[1].host}:{c.brokers[1].port}"
    # Broker 2 is fenced after its session times out; its partition has no leader.
    wait_for(lambda: _leaders(live, "rf1").get(1) == -1, 15, "leader -1 for rf1-1")
    a = admin(live)
    try:
        part = next(p for p in a.describe_topics(["rf1"])[0]["partitions"] if p["partition_index"] == 1)
    finally:
        a.close()
    assert part["error_code"] == 5  # LEADER_NOT_AVAILABLE, as Kafka reports it
    assert part["replica_nodes"] == [2] and part["offline_replicas"] == [2]
    assert _leaders(live, "rf1")[0] == 1 and _leaders(live, "rf1")[2] == 3
    # A producer to the leaderless partition waits (LEADER_NOT_AVAILABLE is retriable)
    # and fails once its delivery timeout expires, as with Kafka.
    errs = []
    short = idempotent_producer(live, **{"message.timeout.ms": 3000})
    short.produce("rf1", value=b"x", partition=1, on_delivery=lambda e, m: errs.append(e))
    short.flush(10)
    assert len(errs) == 1 and errs[0] is not None and "timed out" in str(errs[0]).lower()

    c.restart_broker(2)
    wait_for(lambda: _leaders(c.bootstrap, "rf1").get(1) == 2, 30, "broker 2 leading rf1-1 again")
    got = consume_all(c.bootstrap, {("rf1", i): 1000 for i in range(3)})
    assert sorted(v for msgs in got.values() for _, _, v, _ in msgs) == sorted(m.value() for m in acked)
