"""Producers per topic (AutoMQ's producersPerTopicList): the scenario field `Topic.producers`,
its validation, and how the Locust load process assigns its users to topics."""
from __future__ import annotations

import pytest

from bench.scenario import ScenarioError, builtin_scenarios, load_scenario, parse_scenario
from workloads.topics import parse_topics, topic_of_user


def _scenario(topics: list[dict], producers: int) -> dict:
    return {"name": "t", "system": {"kind": "shared", "brokers": 1},
            "workload": {"topics": topics, "message_bytes": 100, "produce_rate_msgs_per_s": 10,
                         "producers": producers, "duration_s": 1}}


def test_automq_scenario_has_producers_per_topic():
    sc = load_scenario(builtin_scenarios()["automq-reassign"])
    assert [(t.name, t.partitions, t.producers) for t in sc.workload.topics] == [("hot", 1, 4), ("wide", 4, 1)]
    assert sc.workload.producers == 5 and sc.workload.produce_rate_msgs_per_s == 12800
    assert sc.workload.message_bytes == 4096


@pytest.mark.parametrize("topics, producers, where", [
    ([{"name": "a", "partitions": 1, "producers": 2}, {"name": "b", "partitions": 1}], 2, "topics.1.producers"),
    ([{"name": "a", "partitions": 1, "producers": 2}, {"name": "b", "partitions": 1, "producers": 1}], 2,
     "workload.producers"),
    ([{"name": "a", "partitions": 1, "producers": 0}], 1, "topics.0.producers"),
])
def test_producers_per_topic_validation(topics, producers, where):
    with pytest.raises(ScenarioError, match=where):
        parse_scenario(_scenario(topics, producers), "<test>")


def test_pool_when_no_topic_sets_producers():
    sc = parse_scenario(_scenario([{"name": "a", "partitions": 2}, {"name": "b", "partitions": 1}], 3), "<test>")
    assert [t.producers for t in sc.workload.topics] == [None, None]
    assert topic_of_user(parse_topics("a:2,b:1"), 0) is None  # every user produces to every topic


def test_users_assigned_to_their_topics():
    topics = parse_topics("hot:1:4,wide:4:1")
    assert topics == [("hot", 1, 4), ("wide", 4, 1)]
    assert [topic_of_user(topics, i) for i in range(10)] == [0, 0, 0, 0, 1] * 2
    with pytest.raises(ValueError, match="every topic or none"):
        parse_topics("hot:1:4,wide:4")



def test_the_client_holds_one_request_per_partition_the_load_the_rest():
    """librdkafka's idempotent producer sends one request per partition at a time and busy-polls
    while a ready batch waits: a partition's messages go to the client only when none of its
    earlier ones is unanswered, one request's worth (round_size) at a time; a drain hands over all."""
    from workloads.pacing import PartitionPacer, round_size

    assert round_size({}, 4096) == 1_000_000 // (4096 + 128)  # librdkafka's batch.size default
    assert round_size({"batch.num.messages": 50}, 100) == 50
    client: list = []
    refuse = {"m9"}
    pacer = PartitionPacer(3, lambda item: item not in refuse and (client.append(item) or True))
    for i in range(10):  # a tick's messages, round-robin over partitions 0 and 1
        pacer.hold(i % 2, f"m{i}")
    assert client == [] and pacer.held_count() == 10
    pacer.release_idle()  # end of the tick
    assert client == ["m0", "m2", "m4", "m1", "m3", "m5"]
    pacer.hold(0, "m10")
    pacer.release_idle()  # both partitions wait for answers: nothing more goes to the client
    assert len(client) == 6
    pacer.answered(0)
    pacer.answered(0)
    assert len(client) == 6  # partition 0 answered in part
    pacer.answered(0)  # ... and in full: its next round goes
    assert client[6:] == ["m6", "m8", "m10"] and pacer.unanswered == {0: 3, 1: 3}
    pacer.release_all()  # a drain; a message the client refused is not counted as in it
    assert client[9:] == ["m7"] and pacer.held_count() == 0 and pacer.unanswered[1] == 4
