"""Any Kafka-compatible cluster the harness does not run (Apache Kafka, AutoMQ, Redpanda, a managed
service), reached at the scenario's `system.bootstrap` and measured through the Kafka protocol only
(bench/run/external.py). The harness creates and deletes only its own prefixed topics there, and
changes no setting but the replication throttle, which it restores."""
from __future__ import annotations

from systems.core.profile import SystemProfile
from systems.replication.profile import THROTTLE_BYTES
# Kafka's throttle applies only to the replicas the topic's *.replication.throttled.replicas name.
from systems.replication.profile import topic_configs


PROFILE = SystemProfile(
    name="external",
    label="external cluster (Kafka protocol)",
    short="external",
    color="#7d3c98",
    backend="",
    controller_extension=None,
    move_model=None,  # how it moves a partition is what the run finds out
    copies_on_move=True,  # Kafka's way unless its brokers say otherwise (bench/run/move_progress.py)
    bandwidth_param="replication_throttle_bytes_per_s",
    bandwidth_label="throttle",
    single_owner=False,
    ack_meaning="acks=all as the cluster under test defines it (its replication factor and "
                "min.insync.replicas, read from the cluster at the start of the run)",
    replication_factor=None,
    min_insync_replicas=None,
    broker_settings=lambda s: {},
    topic_configs=topic_configs,
    launched=False,
    # The harness sets the throttle with IncrementalAlterConfigs (bench/run/external.py) and
    # nothing else: the cluster's own settings are its operator's.
    scenario_settings=(THROTTLE_BYTES,),
    only_own_settings=True,
)
