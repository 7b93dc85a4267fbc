"""Broker and controller settings, under Kafka's own names and defaults."""
from __future__ import annotations

DEFAULTS: dict[str, object] = {
    "broker.session.timeout.ms": 9000,
    "broker.heartbeat.interval.ms": 2000,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "socket.request.max.bytes": 100 * 1024 * 1024,
    "message.max.bytes": 1048588,
    "log.segment.bytes": 128 * 1024 * 1024,
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.wait.max.ms": 500,
    "leader.replication.throttled.rate": None,
    "follower.replication.throttled.rate": None,
}

# Topic-level settings a client may pass to CreateTopics / alter at runtime.
TOPIC_CONFIGS = {
    "min.insync.replicas", "unclean.leader.election.enable", "retention.ms", "retention.bytes",
    "segment.bytes", "cleanup.policy", "max.message.bytes", "message.timestamp.type",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "compression.type",
}


def _convert(key: str, value):
    default = DEFAULTS.get(key)
    if isinstance(value, str):
        if isinstance(default, bool):
            if value.lower() not in ("true", "false"):
                raise ValueError(f"{key} must be true or false, got {value!r}")
            return value.lower() == "true"
        if isinstance(default, int) or key.endswith((".ms", ".bytes", ".rate", ".replicas.count")):
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"{key} must be an integer, got {value!r}") from None
    return value


def resolve(overrides: dict | None) -> dict:
    cfg = dict(DEFAULTS)
    for k, v in (overrides or {}).items():
        cfg[k] = _convert(k, v)
    return cfg


def as_bool(value) -> bool:
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)
