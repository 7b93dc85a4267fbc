"""The tiered-storage system's profile (Kafka with KIP-405 tiered storage and KIP-1023): a move
copies between brokers like the copy system, but only the part of the log not yet in object
storage."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from systems.core.profile import JournalMeaning, Production, ScaledConfig, ScenarioSetting, Settings, SystemProfile
from systems.replication import profile as replication
from systems.shared import profile as shared
from systems.tiered.settings import DEFAULTS

MiB = 1 << 20
UPLOAD_INTERVAL_KEY = "remote.log.manager.task.interval.ms"
MIN_SEGMENT_BYTES = 1 * MiB  # Kafka 4.0's floor for segment.bytes (KIP-1030)
# Kafka's topic configs segment.bytes and local.retention.bytes: closed segments go to object
# storage, the leader keeps local.retention.bytes locally, a new replica copies only the local
# tail. Unless the scenario says otherwise: segments small enough that a MiB-sized run tiers most
# of its log (Kafka's default is 1 GiB), and a local budget (Kafka's default, -2, keeps locally
# what retention keeps).
# Production values (the scale model, docs/scale-model.md): Kafka's default segment, and a local
# retention of one day, the local window tiered-storage guides and Confluent Platform's default
# hotset keep (confluent.tier.local.hotset.ms = 86400000), at the 80 MB/s a hot partition of the
# default runs stands for: 6.9 TB, more than any partition here holds.
PRODUCTION_SEGMENT_BYTES = 1 << 30
PRODUCTION_LOCAL_RETENTION_BYTES = 86_400 * 80_000_000
SEGMENT_BYTES = ScenarioSetting(
    "segment_bytes", "bytes", ge=MIN_SEGMENT_BYTES, default=4 * MiB,
    doc="Size of a log segment (the topic's segment.bytes); closed segments go to object storage.",
    production=Production(PRODUCTION_SEGMENT_BYTES, "Kafka's default segment.bytes (log.segment.bytes = "
                                                    "1073741824; KIP-1030 kept it in 4.0)"))
LOCAL_RETENTION_BYTES = ScenarioSetting(
    "local_retention_bytes", "bytes", gt=0, default=8 * MiB,
    doc="Bytes the leader keeps locally (the topic's local.retention.bytes): what a new replica copies "
        "without KIP-1023.",
    production=Production(PRODUCTION_LOCAL_RETENTION_BYTES,
                          "one day of the 80 MB/s a hot partition stands for: local.retention.ms = 86400000, the "
                          "default local hotset of Confluent Platform's tiered storage (confluent.tier.local.hotset.ms)"
                          "; Kafka's own default (-2) keeps everything locally"))
# KIP-1023 (true: a new replica starts after the last tiered offset) or KIP-405 (false: at the
# leader's local log start).
FOLLOWER_FETCH_LAST_TIERED_OFFSET = ScenarioSetting(
    "follower_fetch_last_tiered_offset", "bool", default=DEFAULTS["follower.fetch.last.tiered.offset.enable"],
    doc="True: a new replica starts after the last tiered offset (KIP-1023); false: at the leader's "
        "local log start (KIP-405).")
SCENARIO_SETTINGS = (*replication.SCENARIO_SETTINGS, shared.OBJSTORE_BANDWIDTH, SEGMENT_BYTES,
                     LOCAL_RETENTION_BYTES, FOLLOWER_FETCH_LAST_TIERED_OFFSET)


def broker_settings(s: Settings) -> dict[str, str]:
    cfg = replication.broker_settings(s)
    if s.get(shared.OBJSTORE_BANDWIDTH.name):
        cfg["s3.bandwidth.bytes.per.s"] = str(s[shared.OBJSTORE_BANDWIDTH.name])
    if s.get(FOLLOWER_FETCH_LAST_TIERED_OFFSET.name) is not None:
        cfg["follower.fetch.last.tiered.offset.enable"] = str(bool(s[FOLLOWER_FETCH_LAST_TIERED_OFFSET.name])).lower()
    return cfg


def topic_configs(s: Settings) -> dict[str, str]:
    return {**replication.topic_configs(s), "remote.storage.enable": "true",
            "segment.bytes": str(int(SEGMENT_BYTES.value(s))),
            "local.retention.bytes": str(int(LOCAL_RETENTION_BYTES.value(s)))}


def describe(s: Settings) -> dict:
    return {"segment_bytes": int(SEGMENT_BYTES.value(s)),
            "local_retention_bytes": int(LOCAL_RETENTION_BYTES.value(s)),
            "new_replica_starts_at": ("last tiered offset + 1 (KIP-1023)" if FOLLOWER_FETCH_LAST_TIERED_OFFSET.value(s)
                                      else "leader's local log start (KIP-405)")}


def tiering(s: Settings, extra: Mapping[str, Any]) -> dict[str, float]:
    """A closed segment waits for the remote log manager's next task to be uploaded: the segment
    size and the task's interval the untiered tail depends on."""
    ms = extra.get(UPLOAD_INTERVAL_KEY, DEFAULTS[UPLOAD_INTERVAL_KEY])
    return {"segment_bytes": float(SEGMENT_BYTES.value(s)), "upload_interval_s": float(ms) / 1000.0}


def check_settings(s: Settings) -> list[tuple[str, str]]:
    both = replication.check_settings(s)
    if both:
        return both
    local, segment = s.get(LOCAL_RETENTION_BYTES.name), s.get(SEGMENT_BYTES.name)
    if local is not None and local < (segment or 0):
        # Kafka accepts it, but then the leader keeps only its active segment: say so rather
        # than measure a configuration nobody meant.
        why = (f"{local} is below system.{SEGMENT_BYTES.name} ({segment}): the leader would keep less than one "
               f"closed segment locally; give at least one segment")
        return [(LOCAL_RETENTION_BYTES.name, why)]
    return []


PROFILE = SystemProfile(
    name="tiered",
    label="tiered storage (Kafka KIP-405)",
    short="tiered",
    color="#229954",
    backend="systems.tiered.backend",
    controller_extension="systems.tiered.controller",
    move_model="tiered_copy",  # bench/analysis/model/tiered_copy.py: the copy physics over the local tail
    copies_on_move=True,
    bandwidth_param="replication_throttle_bytes_per_s",
    bandwidth_label="throttle",
    single_owner=False,
    ack_meaning=("written to the page cache of every in-sync replica, as the copy system; closed segments "
                 "go to object storage later, in the background (an ack never waits for an upload)"),
    replication_factor=3,  # Kafka in production, tiered or not: RF 3, min.insync.replicas 2
    min_insync_replicas=2,
    broker_settings=broker_settings,
    topic_configs=topic_configs,
    describe=describe,
    journal=JournalMeaning(
        move_complete={"reassignment_completed": "leader"},
        # The new replica's start: fetch the leader epochs and producer snapshot of the last
        # tiered segment from object storage (KIP-405's auxiliary state), then copy the tail.
        phase_events={"tiered_replica_built": "tier"},
        phase_bytes={"aux_state_ms": "aux_state_bytes"},
        background_counters={"tiered_upload": "objstore_upload_bytes", "tiered_read": "objstore_read_bytes"},
        copy_start={"tiered_copy_from": "bytes_to_copy"},
    ),
    object_store=shared.OBJECT_STORE,
    config_defaults=DEFAULTS,
    detected_by={"remote.log.storage.system.enable": "true"},  # Kafka with KIP-405 on
    scenario_settings=SCENARIO_SETTINGS,
    check_settings=check_settings,
    # Kafka runs its remote log manager every 30 s; here every 1 s (systems/tiered/settings.py), so
    # that a prefill written seconds before the move is tiered by then, as a long-lived partition's
    # closed segments are: a departure the scale model reports.
    scaled_configs=(ScaledConfig(UPLOAD_INTERVAL_KEY, "time",
                                 Production(30_000, "Kafka's default remote.log.manager.task.interval.ms (30 s)")),),
    move_budget=replication.THROTTLE_BYTES.name,  # as the copy system's: the new replica's fetches
    move_budget_label=replication.MOVE_BUDGET_LABEL,
    tiering=tiering,
)
