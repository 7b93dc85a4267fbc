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


def move_under_load(run_scenario, size: int, **system):
    """Partition m-0 (on broker 1) filled with ``size`` bytes, moved to broker 2 under load."""
    [(run_dir, s)] = run_scenario({
        "name": f"shared-move-{size // MiB}MiB",
        "system": {"kind": "shared", "brokers": 3, "extra": FAST, **system},
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
    (closed,) = [e for e in _events(run_dir, "shared_partition_closed") if e.get("action_id") == 0
                 and e["topic"] == "m" and e["reason"] == "moved"]
    return opened, elected, {**closed, "_move": move}


def test_move_100mib_partition_under_load(run_scenario):
    opened, elected, closed = move_under_load(run_scenario, 100 * MiB)
    assert opened["recovery"] == "clean" and elected["how"] == "closed", (opened, elected)
    # The election opened the streams for the target: it asked the controller for nothing.
    assert opened["preopened"] is True and closed["handoff"] == "upload", (opened, closed)
    # Its object-store requests, counted by each broker under the move's tag: the close PUT the meta
    # stream and the forced tail (at least one object), the open read the meta stream's last range.
    move = closed["_move"]
    assert move["objstore_requests"]["put"] == closed["objstore_requests"]["put"] >= 1, (move, closed)
    assert move["objstore_requests"]["get"] == opened["objstore_requests"]["get"] >= 1, (move, opened)


@pytest.mark.slow  # make test keeps tests/systems/test_shared_handoff.py's kill -9 case; make bench measures it
def test_a_snapshot_handoff_touches_no_object_storage_between_close_and_open(run_scenario):
    """shared.handoff=snapshot: the unuploaded tail (nothing was uploaded: threshold and interval far
    away) is committed by reference to its WAL objects and the final state reaches the target
    through the controller; the close has no meta persist or forced upload, the open no replay GET."""
    opened, elected, closed = move_under_load(run_scenario, 16 * MiB, handoff="snapshot",
                                              wal_upload_threshold_bytes="512MiB",
                                              extra={**FAST, "wal.upload.interval.ms": 120000})
    print(f"\nclosed {json.dumps(closed)}\nopened {json.dumps(opened)}")
    assert closed["handoff"] == "snapshot" and "force_upload_ms" not in closed and "meta_persist_ms" not in closed
    assert closed["tail_ref_bytes"] >= 16 * MiB, closed  # the whole prefill was the tail
    assert opened["recovery"] == "handoff" and opened["preopened"] is True and opened["replay_bytes"] == 0, opened
    assert opened["end_offset"] == closed["end_offset"], (opened, closed)
    assert closed["objstore_requests"]["put"] == 0 and opened["objstore_requests"]["get"] == 0, (closed, opened)


@pytest.mark.slow
def test_move_1gib_partition_under_load(run_scenario):
    opened, _, _ = move_under_load(run_scenario, 1024 * MiB)
    assert opened["recovery"] == "clean", opened


@pytest.mark.slow  # make bench's calibrate runs the shared system under the move budget too
def test_a_moves_forced_upload_is_paced_to_the_move_budget(run_scenario):
    """system.move_upload_bytes_per_s (what the move budget becomes on the shared system): the
    close's forced upload of a ~4 MiB unuploaded tail is paced to 2 MB/s (Kafka's replication
    throttle does the same to a copy move), and the move still completes with every check passing."""
    rate = 2_000_000
    [(run_dir, s)] = run_scenario({
        "name": "shared-move-budget",
        # nothing uploaded before the move: the prefill and the load are the tail the close uploads
        "system": {"kind": "shared", "brokers": 3, "move_upload_bytes_per_s": rate, "wal_upload_threshold_bytes": "256MiB",
                   "extra": {**FAST, "wal.upload.interval.ms": 120000}},
        "workload": {"topics": [{"name": "m", "partitions": 1, "replication_factor": 1}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 200, "duration_s": 5},
        "prefill": {"bytes_per_partition": 4 * MiB},
        "actions": [{"at_s": 1, "kind": "reassign", "topic": "m", "partition": 0, "to": [2]}],
    })
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    (closed,) = [e for e in _events(run_dir, "shared_partition_closed") if e.get("reason") == "moved"]
    forced, ms = closed["force_upload_bytes"], closed["force_upload_ms"]
    burst = rate / 10  # the token bucket starts full (systems/shared/objstore.py TokenBucket)
    print(f"\nforced upload {forced} bytes in {ms} ms at a {rate} bytes/s cap; move {s['moves'][0]['move_seconds']} s")
    assert forced >= 4 * MiB, closed
    assert ms / 1000 >= 0.9 * (forced - burst) / rate, closed  # the cap binds ...
    assert ms / 1000 <= (forced / rate) + 3.0, closed  # ... and nothing else held it
    conf = s["configuration"]
    assert (conf["move_budget_bytes_per_s"], conf["move_budget_rule"]) == (rate, "a fixed rate"), conf
    assert "forced upload" in conf["move_budget_mechanism"]
