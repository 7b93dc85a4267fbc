"""The shared-storage system's profile (AutoMQ-style: a move hands stream ownership over)."""
from __future__ import annotations

from systems.core.profile import (MOVE_BUDGET_OF_LINK, JournalMeaning, Production, ScenarioSetting, Service, Settings,
                                  SystemProfile)
from systems.shared.settings import DEFAULTS as SETTINGS_DEFAULTS
from systems.shared.settings import HANDOFFS

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
        "(wal.upload.threshold.bytes): a move's un-uploaded tail.",
    production=Production(512 << 20, "AutoMQ's partition-reassignment workload (kafka-provider-comparison): "
                                     "s3.wal.upload.threshold=512MiB"))
# The move budget's mechanism here: a move's traffic is the old owner's forced upload of the
# partition's unuploaded tail (and its meta) at the close; the new owner's open reads metadata only.
MOVE_UPLOAD_BYTES = ScenarioSetting(
    "move_upload_bytes_per_s", "bytes_per_s", gt=0, noun="move upload cap",
    doc="Cap on the uploads of a partition's close when it leaves a broker (a move's forced upload of its "
        "unuploaded tail, and its meta), bytes/s per broker (shared.move.upload.bytes.per.s); WAL writes and "
        "the background uploads are not capped by it; unset: uncapped.")
HANDOFF = ScenarioSetting(
    "handoff", "choice", choices=HANDOFFS, default=SETTINGS_DEFAULTS["shared.handoff"],
    doc="How a move hands the partition over (shared.handoff): upload = the seed article's six steps (meta "
        "persisted, the unuploaded tail force-uploaded, the meta read back by the target); snapshot = AutoMQ V6 "
        "(#3495): the tail's WAL objects committed by reference and the final state handed to the target "
        "through the controller, no object-store request between close and open, each byte PUT once.")
SCENARIO_SETTINGS = (OBJSTORE_BANDWIDTH, WAL_BATCH_INTERVAL, WAL_UPLOAD_THRESHOLD, MOVE_UPLOAD_BYTES,
                     MOVE_BUDGET_OF_LINK, HANDOFF)


def broker_settings(s: Settings) -> dict[str, str]:
    # Only what the scenario sets: the rest stays the brokers' own default.
    cfg: dict[str, str] = {}
    if s.get(OBJSTORE_BANDWIDTH.name):
        cfg["s3.bandwidth.bytes.per.s"] = str(s[OBJSTORE_BANDWIDTH.name])
    if s.get(WAL_BATCH_INTERVAL.name) is not None:
        cfg["wal.batch.interval.ms"] = str(int(s[WAL_BATCH_INTERVAL.name]))
    if s.get(WAL_UPLOAD_THRESHOLD.name) is not None:
        cfg["wal.upload.threshold.bytes"] = str(s[WAL_UPLOAD_THRESHOLD.name])
    if s.get(MOVE_UPLOAD_BYTES.name):
        cfg["shared.move.upload.bytes.per.s"] = str(int(s[MOVE_UPLOAD_BYTES.name]))
    if s.get(HANDOFF.name) is not None:
        cfg["shared.handoff"] = s[HANDOFF.name]
    return cfg


def describe(s: Settings) -> dict:
    out = {st.name: st.value(s) for st in (WAL_BATCH_INTERVAL, WAL_UPLOAD_THRESHOLD, HANDOFF)}
    if s.get(MOVE_UPLOAD_BYTES.name):
        out[MOVE_UPLOAD_BYTES.name] = int(s[MOVE_UPLOAD_BYTES.name])
    return out


def check_settings(s: Settings) -> list[tuple[str, str]]:
    if s.get(MOVE_BUDGET_OF_LINK.name) is not None and s.get(MOVE_UPLOAD_BYTES.name) is not None:
        return [(MOVE_BUDGET_OF_LINK.name, f"is the move upload cap on the shared system: give the move's cap once "
                                           f"(system.{MOVE_BUDGET_OF_LINK.name} or system.{MOVE_UPLOAD_BYTES.name})")]
    return []


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
        # The old owner refuses writes (NOT_LEADER) from the start of its close.
        refusal_start=frozenset({"shared_partition_closing"}),
        # The target's open gets every range of the data stream and rebuilds its index from them.
        phase_objects={"open_ms": "data_objects", "replay_ms": "data_objects"},
        background_counters={"shared_upload": "objstore_upload_bytes", "shared_wal": "objstore_wal_bytes"},
    ),
    object_store=OBJECT_STORE,
    config_defaults=SETTINGS_DEFAULTS,
    scenario_settings=SCENARIO_SETTINGS,
    check_settings=check_settings,
    move_budget=MOVE_UPLOAD_BYTES.name,
    # The handover model's tail term is the upload handoff's forced upload: a snapshot handoff's
    # moves carry no tail (shared-tail measures them beside it).
    model_settings={HANDOFF.name: HANDOFF.default},
    move_budget_label="the cap on the move's forced upload of its tail (shared.move.upload.bytes.per.s)",
    move_cap_config="shared.move.upload.bytes.per.s",
)
