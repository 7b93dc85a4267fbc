"""The shared-storage system's profile (AutoMQ-style: a move hands stream ownership over)."""
from __future__ import annotations

from systems.core.profile import JournalMeaning, Service, Settings, SystemProfile
from systems.shared.settings import DEFAULTS as SETTINGS_DEFAULTS


def broker_settings(s: Settings) -> dict[str, str]:
    cfg: dict[str, str] = {}
    if s.get("objstore_bandwidth_bytes_per_s"):
        cfg["s3.bandwidth.bytes.per.s"] = str(s["objstore_bandwidth_bytes_per_s"])
    if s.get("wal_batch_interval_ms") is not None:
        cfg["wal.batch.interval.ms"] = str(int(s["wal_batch_interval_ms"]))
    if s.get("wal_upload_threshold_bytes") is not None:
        cfg["wal.upload.threshold.bytes"] = str(s["wal_upload_threshold_bytes"])
    return cfg


def describe(s: Settings) -> dict:
    interval = s.get("wal_batch_interval_ms")
    threshold = s.get("wal_upload_threshold_bytes")
    return {"wal_batch_interval_ms": interval if interval is not None else SETTINGS_DEFAULTS["wal.batch.interval.ms"],
            "wal_upload_threshold_bytes": threshold if threshold is not None else SETTINGS_DEFAULTS["wal.upload.threshold.bytes"]}


def _start_object_store(ctx):
    from systems.shared.launch import start_object_store  # minio and SeaweedFS only when needed

    return start_object_store(ctx)


# The object store service, also the tiered system's (one store for a three-way comparison).
OBJECT_STORE = Service("object store", _start_object_store)


PROFILE = SystemProfile(
    name="shared",
    label="shared storage (AutoMQ-style)",
    short="shared",
    color="#2471a3",
    backend="systems.shared.backend",
    controller_extension="systems.shared.controller",
    move_model="handover",
    bandwidth_param="objstore_bandwidth_bytes_per_s",
    bandwidth_label="object-store cap",
    single_owner=True,
    ack_meaning="after the PUT of the broker's WAL object to object storage returned",
    replication_factor=1,  # durability from the object store's WAL, not from broker replicas
    min_insync_replicas=1,
    broker_settings=broker_settings,
    topic_configs=lambda s: {},
    describe=describe,
    journal=JournalMeaning(
        move_complete={"shared_move_elected": "to"},
        request_phase={"shared_move_elected": ("since_request_s", "request_to_elect")},
        phase_events={"shared_partition_closed": "close", "shared_partition_opened": "open"},
        phase_bytes={"force_upload_ms": "force_upload_bytes", "replay_ms": "replay_bytes"},
        # The close's forced upload carries the tail not yet in object storage.
        tail_phases=frozenset({"force_upload_ms"}),
        # The target's open gets every range of the data stream and rebuilds its index from them.
        phase_objects={"open_ms": "data_objects", "replay_ms": "data_objects"},
        background_counters={"shared_upload": "objstore_upload_bytes"},
    ),
    object_store=OBJECT_STORE,
    config_defaults=SETTINGS_DEFAULTS,
)
