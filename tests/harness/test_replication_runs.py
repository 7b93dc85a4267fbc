"""Replication-copy moves and failovers under produce load: scenarios run by the harness
(``run_scenario``: the Locust load, the timeline, the verifying consumer) and judged by its
checkers (lost, duplicated, reordered acked messages; move_seconds; bytes_moved). Behaviour that
needs no load, on clusters started directly: tests/systems/test_replication.py.
"""
from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from bench.history.names import EVENT_LEADER_CHANGE
from bench.history.store import read_history
from bench.run.load import PREFILL_RECORD_BYTES
from tests.support.clusters import FAST

MiB = 1024 * 1024


def _passed(run_scenario, scenario):
    """One run of ``scenario``: completed; every checker valid (no acked message lost, duplicated or
    reordered, move_seconds known); every partition read back; no send failed or left in doubt
    (the idempotent producer's session survived)."""
    [(run_dir, s)] = run_scenario(scenario)
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    assert s["verify"]["complete"] == s["verify"]["partitions"], (run_dir, s["verify"])
    p = s["producer"]
    assert p["acked"] > 0 and (p["failed"], p["info"]) == (0, 0), (run_dir, p)
    return run_dir, s


def _client_view(run_dir, topic):
    """The last leader_change a client saw for ``topic`` partition 0: {leader, replicas, isr}."""
    t = read_history(run_dir / "history.parquet")
    t = t.filter(pc.fill_null(pc.and_(pc.equal(t["event"], EVENT_LEADER_CHANGE), pc.equal(t["topic"], topic)), False))
    seen = [d for d in map(json.loads, t["detail"].to_pylist()) if d.get("source") == "client"]
    return seen[-1]


def test_moves_under_load(run_scenario):
    """256 MiB partitions moved under an idempotent producer's load: 1 -> 2 (replication factor 1)
    and [2,3] -> [3,1] (factor 2: the leader leaves, one new replica copies the log). The copy is the
    partition, the old replicas are deleted, the moved partitions are in sync on their targets."""
    run_dir, s = _passed(run_scenario, {
        "name": "moves-under-load",
        # Runner placement: one-0 on [1], two-0 on [2, 3].
        "system": {"kind": "replication", "brokers": 3, "extra": FAST},
        "workload": {"topics": [{"name": "one", "partitions": 1, "replication_factor": 1}, {"name": "two", "partitions": 1,
                                                                    "replication_factor": 2}],
                     "message_bytes": "1KiB", "produce_rate_msgs_per_s": 800, "duration_s": 8},
        "prefill": {"bytes_per_partition": "256MiB"},
        "actions": [{"at_s": 2, "kind": "reassign", "topic": "one", "partition": 0, "to": [2]},
                    {"at_s": 2, "kind": "reassign", "topic": "two", "partition": 0, "to": [3, 1]}],
    })
    assert s["verify"]["prefill_read"] == 2 * 256 * MiB // PREFILL_RECORD_BYTES, s["verify"]
    moves = {m["topic"]: m for m in s["moves"]}
    for m in moves.values():
        assert m["move_seconds"] is not None, m
        # What was copied is the partition (log framing and the writes during the move on top).
        assert m["partition_bytes"] >= 256 * MiB, m
        assert m["partition_bytes"] <= m["bytes_moved_inter_broker"] <= 1.1 * m["partition_bytes"], m
    assert moves["one"]["new_leader"] == 2 and moves["two"]["new_leader"] == 3, moves
    one, two = _client_view(run_dir, "one"), _client_view(run_dir, "two")
    assert one["leader"] == 2 and one["replicas"] == [2] and one["isr"] == [2], one
    assert two["leader"] == 3 and two["replicas"] == [3, 1] and sorted(two["isr"]) == [1, 3], two
    # The controller completed the reassignments (KIP-455) and the leaving replicas deleted their logs.
    done = {m["topic"] for m in s["checks"]["move_seconds"]["moves"] if m.get("move_complete_ts")}
    assert done == {"one", "two"}, s["checks"]["move_seconds"]["moves"]
    logs = run_dir / "logs"
    assert "removing replica one-0 (moved away)" in (logs / "broker-1.log").read_text()
    assert "removing replica two-0 (moved away)" in (logs / "broker-2.log").read_text()


@pytest.mark.slow
def test_leader_kill9_rf3_min_isr2_loses_nothing(run_scenario):
    """Kafka's production setting (replication factor 3, min.insync.replicas 2, acks=all): kill -9
    of the leader under load loses no acknowledged message, and an in-sync follower serves the
    partition again within the session timeout (3 s here) plus a client metadata refresh."""
    _, s = _passed(run_scenario, {
        "name": "leader-kill-rf3",
        "system": {"kind": "replication", "brokers": 3, "extra": {**FAST, "min.insync.replicas": 2}},
        "workload": {"topics": [{"name": "safe", "partitions": 1, "replication_factor": 3}],  # leader 1
                     "message_bytes": 512, "produce_rate_msgs_per_s": 1000, "duration_s": 9},
        "actions": [{"at_s": 1, "kind": "kill_broker", "broker": 1}],
    })
    (fault,) = s["outages"]
    assert fault["partitions"] == ["safe-0"], fault
    assert fault["recovered_by"] == "leader_change" and fault["new_leader"] in (2, 3), fault
    # Producers were served again (an ack after the failover), and soon: the outage runs until
    # that first ack.
    (window,) = [w for w in s["checks"]["unavailable_seconds"]["actions"] if w["action_id"] == fault["action_id"]]
    assert window["first_ack_ts"] is not None, window
    assert fault["unavailable_seconds"] < 3 + 5, fault
