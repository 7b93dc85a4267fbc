"""The shared system's reassignment rule, on a cluster started directly: a partition has exactly one
owner, so a move names exactly one live broker (moves under load: tests/harness/test_shared_moves.py)."""
from __future__ import annotations

from kafka import TopicPartition as KTP
from kafka.admin import NewTopic

from tests.support.clients import admin, create_topics


def test_reassignment_must_name_exactly_one_broker(make_cluster):
    c = make_cluster("shared", 3)
    create_topics(c.bootstrap, [NewTopic("inv", 1, 1)])
    a = admin(c.bootstrap)
    try:
        for bad in ([1, 2], [1, 2, 3], [99]):
            res = a.alter_partition_reassignments({KTP("inv", 0): bad})
            assert [e.__name__ for e in res.values()] == ["InvalidReplicationAssignmentError"], (bad, res)
    finally:
        a.close()


def test_a_sole_broker_restarted_at_once_opens_its_partitions_again(make_cluster):
    """kill -9 of the only broker and a restart before its session expires: the controller fences the
    old incarnation (the partition goes leader -1, no broker to fail it over to), replays its WAL and
    gives the partition back to the returning broker under a newer leader epoch, on the same replica
    set; every acked record reads back. Whether the restarted broker first sees itself leader from the
    old metadata (and closes that half-open partition at the fence) depends on timing here;
    tests/unit/test_shared_reopen.py drives that path on purpose."""
    from tests.support.clients import consume_all, idempotent_producer, produce_all

    c = make_cluster("shared", 1, broker_session_timeout_ms=15000)  # the restart comes well before it
    create_topics(c.bootstrap, [NewTopic("back", 1, 1)])
    acked = produce_all(idempotent_producer(c.bootstrap), [("back", 0, None, b"m-%d" % i, None) for i in range(500)])
    c.kill_broker(1)
    c.restart_broker(1)
    got = consume_all(c.bootstrap, {("back", 0): len(acked)}, timeout=60)
    assert sorted(v for _, _, v, _ in got[("back", 0)]) == sorted(m.value() for m in acked)


def test_a_partition_moved_away_leaves_nothing_in_its_old_owners_memory(make_cluster):
    """Once its close has ended, a partition moved away gives back its log cache at once (the cache
    budget counts hosted partitions only; before, a moved-away partition's cache stayed until the
    garbage collector found its reference cycles: a 30-minute soak grew the brokers' RSS +39 %)."""
    from systems.core.events import read_events
    from tests.support.clients import idempotent_producer, produce_all, wait_for

    c = make_cluster("shared", 2)
    create_topics(c.bootstrap, [NewTopic("away", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1]})])
    produce_all(idempotent_producer(c.bootstrap), [("away", 0, None, b"x" * 1024, None) for _ in range(2000)])
    a = admin(c.bootstrap)
    try:
        assert a.alter_partition_reassignments({KTP("away", 0): [2]}) == {KTP("away", 0): None}
    finally:
        a.close()

    def after_close():
        ev = [e for e in read_events(c.dir) if e["source"] == 1]
        closed = [e["ts"] for e in ev if e["event"] == "shared_partition_closed"]
        return closed and [e for e in ev if e["event"] == "shared_memory" and e["ts"] >= closed[0]]

    wait_for(after_close, 30, "broker 1's memory report after the partition left")
    m = after_close()[0]
    assert m["partitions_hosted"] == 0 and m["log_cache_bytes"] == 0 and m["block_cache_bytes"] == 0, m


def test_a_shared_broker_takes_writes_as_soon_as_it_has_registered(make_cluster):
    """The lease (writes only under a heartbeat the controller accepted) starts with the broker: its
    first renewal comes right after registration, not one heartbeat interval later. Before, every
    partition of a broker just started refused writes NOT_LEADER for up to an interval, and sarama,
    which re-sends at once, spent its retries there. An interval of 10 s makes that window
    unmissable; one send without retries must be acked."""
    from confluent_kafka import Producer

    from tests.support.clients import produce_all

    c = make_cluster("shared", 1, broker_heartbeat_interval_ms=10000, broker_session_timeout_ms=30000)
    create_topics(c.bootstrap, [NewTopic("first", 1, 1)])
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False,
                  "message.timeout.ms": 5000})
    assert len(produce_all(p, [("first", 0, None, b"m", None)], flush_timeout=10)) == 1
