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
