"""Broker and controller settings, under Kafka's own names and defaults.

Every process knows a fixed set of keys: the core's `DEFAULTS` below plus its system's own
(`Backend.CONFIG_DEFAULTS` in the broker, the controller extension module's `CONFIG_DEFAULTS`,
`SystemProfile.config_defaults` for the harness). A key outside that set, or a value of the
wrong type, is refused with a `ConfigError` naming it: a misspelt setting must never be a
silent default.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

LONG_MAX = 9223372036854775807  # Kafka's "no limit" for throttle rates

DEFAULTS: dict[str, object] = {
    "broker.session.timeout.ms": 9000,
    "broker.heartbeat.interval.ms": 2000,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "socket.request.max.bytes": 100 * 1024 * 1024,
    "message.max.bytes": 1048588,
    "log.segment.bytes": 128 * 1024 * 1024,  # Kafka's is 1 GiB; smaller segments suit MiB-sized runs
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.wait.max.ms": 500,
    "leader.replication.throttled.rate": None,  # None: unthrottled (Kafka: Long.MAX_VALUE)
    "follower.replication.throttled.rate": None,
    # Consumer groups (systems/core/groups.py), Kafka's names. The offsets topic gets 10
    # partitions (Kafka: 50, too many replicas for a 2-core test machine) and is created on the
    # first FindCoordinator with min(replication factor, live brokers) replicas.
    "offsets.topic.num.partitions": 10,
    "offsets.topic.replication.factor": 3,
    "offsets.commit.timeout.ms": 5000,
    "offset.metadata.max.bytes": 4096,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
}

# What DescribeConfigs shows for a default of None (Kafka's own representation of "no limit").
DESCRIBED_NONE: dict[str, str] = {
    "leader.replication.throttled.rate": str(LONG_MAX),
    "follower.replication.throttled.rate": str(LONG_MAX),
}

# Topic-level settings a client may pass to CreateTopics / alter at runtime.
TOPIC_CONFIGS = {
    "min.insync.replicas", "unclean.leader.election.enable", "retention.ms", "retention.bytes",
    "segment.bytes", "cleanup.policy", "max.message.bytes", "message.timestamp.type",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "compression.type",
    # Tiered storage (KIP-405): known to every Kafka; remote.storage.enable=true is refused unless
    # the cluster runs with remote.log.storage.system.enable (the tiered system).
    "remote.storage.enable", "local.retention.bytes", "local.retention.ms",
}

# A topic config without a value of its own takes its broker synonym's value (Kafka's synonyms),
# or, with no broker synonym, Kafka's topic default.
TOPIC_SYNONYMS: dict[str, str] = {
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "max.message.bytes": "message.max.bytes",
    "segment.bytes": "log.segment.bytes",
}
TOPIC_DEFAULTS: dict[str, str] = {
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "remote.storage.enable": "false",
    "local.retention.bytes": "-2",  # -2: the same as retention.bytes
    "local.retention.ms": "-2",
}

_NUMERIC_SUFFIXES = (".ms", ".bytes", ".rate", ".count", ".per.s", ".concurrency", ".inflight",
                     ".partitions", ".factor", ".replicas")


class ConfigError(ValueError):
    """An unknown setting or a value of the wrong type; the message names the key (one line)."""


def _convert(key: str, value, default=None):
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"setting {key}={value!r}: must be true or false")
        return value.lower() == "true"
    if isinstance(default, int) or (default is None and key.endswith(_NUMERIC_SUFFIXES)):
        try:
            return int(value)
        except ValueError:
            try:
                if key.endswith((".rate", ".per.s")):
                    return float(value)
            except ValueError:
                pass
            raise ConfigError(f"setting {key}={value!r}: must be an integer") from None
    return value


def known(extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """Every key a process knows, with its default: the core's plus a system's own."""
    return {**DEFAULTS, **(extra or {})}


def check(overrides: Mapping[str, object] | Iterable[str] | None, system_defaults=None) -> dict[str, object]:
    """Validate settings before anything starts. `overrides`: {key: value} (values may be strings,
    as from `--config k=v`) or just keys; `system_defaults`: the system's own keys with defaults,
    or a `SystemProfile` (its `config_defaults`). Returns the converted overrides; raises
    ConfigError with one line naming the first bad key (and the known keys for an unknown one)."""
    extra = system_defaults
    if extra is not None and not isinstance(extra, Mapping):
        extra = extra.config_defaults  # a SystemProfile
    keys = known(extra)
    items = overrides.items() if isinstance(overrides, Mapping) else ((k, None) for k in overrides or ())
    out = {}
    for k, v in items:
        if k not in keys:
            near = difflib.get_close_matches(str(k), list(keys), n=1)
            raise ConfigError(f"unknown setting {k!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                              + f"; known settings: {', '.join(sorted(keys))}")
        out[k] = _convert(k, v, keys[k]) if v is not None else v
    return out


def resolve(overrides: dict | None, extra: Mapping[str, object] | None = None) -> dict:
    """All settings of a process: defaults (core + `extra`) with `overrides` applied, checked."""
    return {**known(extra), **check(overrides or {}, extra or {})}


def describe_value(key: str, value) -> str | None:
    """A setting's value as DescribeConfigs shows it (Kafka's spelling)."""
    if value is None:
        return DESCRIBED_NONE.get(key)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def as_bool(value) -> bool:
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)
