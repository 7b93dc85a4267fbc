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
