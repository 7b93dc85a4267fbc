"""The replication-copy system's profile (classic Kafka: a move copies the log between brokers)."""
from __future__ import annotations

from systems.core.profile import MOVE_BUDGET_OF_LINK, JournalMeaning, ScenarioSetting, Settings, SystemProfile

# An operator's cap on inter-broker replication traffic during a move, in bytes/s or as a share of
# the brokers' link rate (the harness turns the share into bytes/s before the profile sees it).
THROTTLE_BYTES = ScenarioSetting(
    "replication_throttle_bytes_per_s", "bytes_per_s", gt=0, noun="replication throttle",
    doc="Cap on inter-broker replication traffic during a move, bytes/s (Kafka's "
        "leader/follower.replication.throttled.rate); unset: unthrottled.")
THROTTLE_OF_LINK = ScenarioSetting(
    "replication_throttle_of_link", "share_of_link", gt=0, le=1, gives=THROTTLE_BYTES.name, noun="throttle",
    doc="The same cap as a share of the brokers' link rate (needs network.link_rate).")
# The common move budget (systems/core/profile.py) is this throttle: a copy move's traffic is the
# new replica's fetches from the leader.
SCENARIO_SETTINGS = (THROTTLE_BYTES, THROTTLE_OF_LINK, MOVE_BUDGET_OF_LINK)
MOVE_BUDGET_LABEL = "the replication throttle (leader/follower.replication.throttled.rate)"


def check_settings(s: Settings) -> list[tuple[str, str]]:
    given = [n for n in (THROTTLE_BYTES.name, THROTTLE_OF_LINK.name) if s.get(n) is not None]
    if s.get(MOVE_BUDGET_OF_LINK.name) is not None and given:
        return [(MOVE_BUDGET_OF_LINK.name, f"is the replication throttle on this system: give the move's cap once "
                                           f"(system.{MOVE_BUDGET_OF_LINK.name} or system.{given[0]})")]
    return []


def broker_settings(s: Settings) -> dict[str, str]:
    cfg: dict[str, str] = {}
    rate = s.get(THROTTLE_BYTES.name)
    if rate:
        cfg["leader.replication.throttled.rate"] = str(rate)
        cfg["follower.replication.throttled.rate"] = str(rate)
    return cfg


def topic_configs(s: Settings) -> dict[str, str]:
    if s.get(THROTTLE_BYTES.name):
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
    copies_on_move=True,
    bandwidth_param="replication_throttle_bytes_per_s",
    bandwidth_label="throttle",
    single_owner=False,
    ack_meaning="written to the page cache of every in-sync replica (no fsync; durability from replication)",
    replication_factor=3,  # Kafka in production: RF 3, min.insync.replicas 2, acks=all
    min_insync_replicas=2,
    broker_settings=broker_settings,
    topic_configs=topic_configs,
    journal=JournalMeaning(move_complete={"reassignment_completed": "leader"}),
    scenario_settings=SCENARIO_SETTINGS,
    check_settings=check_settings,
    move_budget=THROTTLE_BYTES.name,
    move_budget_label=MOVE_BUDGET_LABEL,
)
