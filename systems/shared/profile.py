"""The shared-storage system's profile (AutoMQ-style: a move hands stream ownership over)."""
from __future__ import annotations

from systems.core.profile import JournalMeaning, ScenarioSetting, Service, Settings, SystemProfile
from systems.shared.settings import DEFAULTS as SETTINGS_DEFAULTS

# Also the tiered system's (its object store is this one).
OBJSTORE_BANDWIDTH = ScenarioSetting(
    "objstore_bandwidth_bytes_per_s", "bytes_per_s", gt=0,
    doc="Cap on each broker's object-storage bandwidth, bytes/s (s3.bandwidth.bytes.per.s); unset: unthrottled.")
WAL_BATCH_INTERVAL = ScenarioSetting(
    "wal_batch_interval_ms", "milliseconds", gt=0, default=SETTINGS_DEFAULTS["wal.batch.interval.ms"],
    doc="How long a broker gathers appends into one WAL object before its PUT (wal.batch.interval.ms).")
WAL_UPLOAD_THRESHOLD = ScenarioSetting(
    "wal_upload_threshold_bytes", "bytes", gt=0, default=SETTINGS_DEFAULTS["wal.upload.threshold.bytes"],
    doc="Durable WAL bytes a broker gathers before uploading them into stream objects "
        "(wal.upload.threshold.bytes): a move's un-uploaded tail.")
SCENARIO_SETTINGS = (OBJSTORE_BANDWIDTH, WAL_BATCH_INTERVAL, WAL_UPLOAD_THRESHOLD)


def broker_settings(s: Settings) -> dict[str, str]:
    # Only what the scenario sets: the rest stays the brokers' own default.
    cfg: dict[str, str] = {}
    if s.get(OBJSTORE_BANDWIDTH.name):
        cfg["s3.bandwidth.bytes.per.s"] = str(s[OBJSTORE_BANDWIDTH.name])
    if s.get(WAL_BATCH_INTERVAL.name) is not None:
        cfg["wal.batch.interval.ms"] = str(int(s[WAL_BATCH_INTERVAL.name]))
    if s.get(WAL_UPLOAD_THRESHOLD.name) is not None:
        cfg["wal.upload.threshold.bytes"] = str(s[WAL_UPLOAD_THRESHOLD.name])
    return cfg


def describe(s: Settings) -> dict:
    return {st.name: st.value(s) for st in (WAL_BATCH_INTERVAL, WAL_UPLOAD_THRESHOLD)}


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
    copies_on_move=False,
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
    scenario_settings=SCENARIO_SETTINGS,
)
