"""Settings of the tiered-storage system (Kafka KIP-405 with KIP-1023), under Kafka's names.

The object store is the shared system's (same `s3.*` keys, same client, same embedded SeaweedFS),
so a three-way comparison runs both object-storage designs against one store.
"""
from __future__ import annotations

from systems.shared.settings import DEFAULTS as SHARED_DEFAULTS

DEFAULTS: dict[str, object] = {
    **{k: v for k, v in SHARED_DEFAULTS.items() if k.startswith("s3.")},
    # Kafka: remote.log.storage.system.enable (false by default there; this system is the one
    # with it on). Topics still opt in with remote.storage.enable=true.
    "remote.log.storage.system.enable": True,
    # How often the remote log manager uploads closed segments and applies retention. Kafka's
    # default is 30 s; runs here last a minute and segments are MiB, so 1 s.
    "remote.log.manager.task.interval.ms": 1000,
    # KIP-1023: a new replica starts after the last tiered offset (Kafka's default is false, i.e.
    # KIP-405: from the leader's local log start offset). On here because it is what the
    # comparison is about; false gives KIP-405's behaviour to compare.
    "follower.fetch.last.tiered.offset.enable": True,
    # Topic defaults for local.retention.* (-2: the same as retention.*), Kafka's names.
    "log.local.retention.bytes": -2,
    "log.local.retention.ms": -2,
    "remote.log.read.block.bytes": 4 << 20,  # one ranged GET when a fetch reads a tiered segment
}
