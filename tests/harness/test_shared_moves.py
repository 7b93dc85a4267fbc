"""Shared-storage moves under an idempotent producer's load, run by the harness.

Each move is a scenario run (``run_scenario``: a 3-broker cluster with its embedded SeaweedFS,
the prefill written through the produce path into object storage, the Locust load, a reassign
action, the verifying consumer) judged by the checkers: request -> first ack on the new owner
<= 2 s (``checks.max_move_seconds``), every acked message read back once and in order, the
prefill served by the new owner from stream objects, and the producer's idempotent session
continued on the new owner (no send failed, no new producer session there). A bad reassignment
to the shared system, without load: tests/systems/test_shared_reassign.py.
"""
from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from bench.history.names import EVENT_MOVE_COMPLETE
from bench.history.store import read_history
from bench.run.load import PREFILL_RECORD_BYTES
from tests.support.clusters import FAST

MiB = 1 << 20

pytestmark = pytest.mark.timeout(240)


def _events(run_dir, name):
    t = read_history(run_dir / "history.parquet")
    t = t.filter(pc.fill_null(pc.equal(t["event"], name), False))
    return [json.loads(d) if d else {} for d in t["detail"].to_pylist()]


def move_under_load(run_scenario, size: int):
    """Partition m-0 (on broker 1) filled with ``size`` bytes, moved to broker 2 under load."""
    [(run_dir, s)] = run_scenario({
        "name": f"shared-move-{size // MiB}MiB",
        "system": {"kind": "shared", "brokers": 3, "extra": FAST},
        "workload": {"topics": [{"name": "m", "partitions": 1, "replication_factor": 1}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 400, "duration_s": 5},
        "prefill": {"bytes_per_partition": size},
        "actions": [{"at_s": 2, "kind": "reassign", "topic": "m", "partition": 0, "to": [2]}],
        "checks": {"max_move_seconds": 2},
    })
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    (move,) = s["moves"]
    print(f"\n{size // MiB} MiB: move {json.dumps(move)}")
    assert move["new_leader"] == 2 and move["move_seconds"] <= 2.0, move
    # The idempotent session went on: nothing failed or in doubt, and the new owner knew the
    # producer from the partition's metadata (no new session there).
    p = s["producer"]
    assert p["acked"] > 500 and (p["failed"], p["info"]) == (0, 0), p
    sessions = [e for e in _events(run_dir, "shared_producer_session") if e["topic"] == "m" and e["source"] == 2]
    assert sessions == [], sessions
    # The prefill, read back from offset 0 after the move: served by the new owner from stream
    # objects in object storage (cold reads).
    assert s["verify"]["complete"] == 1 and s["verify"]["prefill_read"] == size // PREFILL_RECORD_BYTES, s["verify"]
    # Nothing copied between brokers; what went to object storage is the tail, not the partition.
    assert move["bytes_moved_inter_broker"] == 0 and move["bytes_moved_objstore"] < size / 2, move
    (opened,) = [e for e in _events(run_dir, "shared_partition_opened") if e.get("action_id") == 0]
    (elected,) = [e for e in _events(run_dir, EVENT_MOVE_COMPLETE) if e.get("action_id") == 0]
    return opened, elected


def test_move_100mib_partition_under_load(run_scenario):
    opened, elected = move_under_load(run_scenario, 100 * MiB)
    assert opened["recovery"] == "clean" and elected["how"] == "closed", (opened, elected)


def test_move_1gib_partition_under_load(run_scenario):
    opened, _ = move_under_load(run_scenario, 1024 * MiB)
    assert opened["recovery"] == "clean", opened
