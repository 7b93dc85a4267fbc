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
