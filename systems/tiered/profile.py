"""The tiered-storage system's profile (Kafka with KIP-405 tiered storage and KIP-1023): a move
copies between brokers like the copy system, but only the part of the log not yet in object
storage."""
from __future__ import annotations

from systems.core.profile import JournalMeaning, Settings, SystemProfile
from systems.replication import profile as replication
from systems.shared import profile as shared
from systems.tiered.settings import DEFAULTS

MiB = 1 << 20
# What a tiered topic gets unless the scenario says otherwise: segments small enough that a
# MiB-sized run tiers most of its log (Kafka's default is 1 GiB), and Kafka's own
# local.retention default (-2: keep locally what retention keeps; here: only until uploaded
# is not enough, so a local budget is set).
SEGMENT_BYTES = 4 * MiB
LOCAL_RETENTION_BYTES = 8 * MiB


def broker_settings(s: Settings) -> dict[str, str]:
    cfg = replication.broker_settings(s)
    if s.get("objstore_bandwidth_bytes_per_s"):
        cfg["s3.bandwidth.bytes.per.s"] = str(s["objstore_bandwidth_bytes_per_s"])
    if s.get("follower_fetch_last_tiered_offset") is not None:
        cfg["follower.fetch.last.tiered.offset.enable"] = str(bool(s["follower_fetch_last_tiered_offset"])).lower()
    return cfg


def topic_configs(s: Settings) -> dict[str, str]:
    return {**replication.topic_configs(s), "remote.storage.enable": "true",
            "segment.bytes": str(int(s.get("segment_bytes") or SEGMENT_BYTES)),
            "local.retention.bytes": str(int(s.get("local_retention_bytes") or LOCAL_RETENTION_BYTES))}


def describe(s: Settings) -> dict:
    flag = s.get("follower_fetch_last_tiered_offset")
    return {"segment_bytes": int(s.get("segment_bytes") or SEGMENT_BYTES),
            "local_retention_bytes": int(s.get("local_retention_bytes") or LOCAL_RETENTION_BYTES),
            "new_replica_starts_at": ("last tiered offset + 1 (KIP-1023)"
                                      if (DEFAULTS["follower.fetch.last.tiered.offset.enable"] if flag is None else flag)
                                      else "leader's local log start (KIP-405)")}


PROFILE = SystemProfile(
    name="tiered",
    label="tiered storage (Kafka KIP-405)",
    short="tiered",
    color="#229954",
    backend="systems.tiered.backend",
    controller_extension="systems.tiered.controller",
    move_model="tiered_copy",  # bench/analysis/model.py: the copy physics over the local tail
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
)
