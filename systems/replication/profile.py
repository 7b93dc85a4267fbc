"""The replication-copy system's profile (classic Kafka: a move copies the log between brokers)."""
from __future__ import annotations

from systems.core.profile import JournalMeaning, Settings, SystemProfile


def broker_settings(s: Settings) -> dict[str, str]:
    cfg: dict[str, str] = {}
    rate = s.get("replication_throttle_bytes_per_s")
    if rate:
        cfg["leader.replication.throttled.rate"] = str(rate)
        cfg["follower.replication.throttled.rate"] = str(rate)
    return cfg


def topic_configs(s: Settings) -> dict[str, str]:
    if s.get("replication_throttle_bytes_per_s"):
        # Kafka applies the throttle rate only to the replicas these configs name.
        return {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}
    return {}


PROFILE = SystemProfile(
    name="replication",
    label="replication copy (Kafka)",
    short="copy",
    color="#c0392b",
    backend="systems.replication.backend",
    controller_extension="systems.replication.controller",
    move_model="copy",
    bandwidth_param="replication_throttle_bytes_per_s",
    bandwidth_label="throttle",
    single_owner=False,
    ack_meaning="written to the page cache of every in-sync replica (no fsync; durability from replication)",
    replication_factor=3,  # Kafka in production: RF 3, min.insync.replicas 2, acks=all
    min_insync_replicas=2,
    broker_settings=broker_settings,
    topic_configs=topic_configs,
    journal=JournalMeaning(move_complete={"reassignment_completed": "leader"}),
)
