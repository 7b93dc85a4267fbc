"""`bench reassign --estimate` on a real cluster, through the protocol only: the facts it reads
(size, ingest, throttle) and a plan whose ingest outruns its throttle, which it says cannot finish
and which then indeed does not; --verify shows that estimate beside the move's progress (the
arithmetic: tests/unit/test_estimate.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from kafka.admin import NewTopic

from bench.run.load import prefill
from tests.support.clients import admin, create_topics, idempotent_producer
from tests.unit.test_estimate import model_json

MiB = 1024 * 1024


def _reassign(c, plan, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                           "--reassignment-json-file", str(plan), *args], capture_output=True, text=True, timeout=timeout)


class Load:
    """~``rate`` bytes/s of 1 KiB values into one partition, from a thread, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.p = idempotent_producer(bootstrap)
        self.topic, self.rate, self.stop = topic, rate, threading.Event()
        self.t = threading.Thread(target=self.body, daemon=True)
        self.t.start()

    def body(self) -> None:
        value, t0, sent = b"x" * 1024, time.monotonic(), 0
        while not self.stop.is_set():
            while sent * 1024 < (time.monotonic() - t0) * self.rate:
                self.p.produce(self.topic, value, partition=0)
                sent += 1
            self.p.poll(0)
            time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        self.t.join(10)
        self.p.flush(30)


@pytest.mark.slow
def test_estimate_reads_the_cluster_and_a_move_it_calls_not_gaining_does_not_finish(make_cluster, tmp_path):
    c = make_cluster(brokers=2)
    create_topics(c.bootstrap, [NewTopic("big", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1]})])
    prefill(c.bootstrap, [("big", 0)], 8 * MiB)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [2]}]}))
    model = model_json(tmp_path, eff=1.0, fixed=0.2)

    r = _reassign(c, plan, "--estimate", "--json", "--throttle", "4000000", "--model", str(model), "--window", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    e = json.loads(r.stdout)
    (p,) = e["partitions"]
    assert e["system"] == "replication" and e["detected_system"] is True
    assert (p["from"], p["to"], p["leader"]) == ([1], [2], 1)
    assert 8 * MiB <= p["size_bytes"] <= 9 * MiB and p["ingest_bytes_per_s"] == 0  # nothing written now
    assert p["seconds"] == pytest.approx(0.2 + p["size_bytes"] / 4e6) and p["feasible"] is True
    assert e["total_seconds"] == pytest.approx(p["seconds"], rel=0.05)
    table = _reassign(c, plan, "--estimate", "--throttle", "4000000", "--model", str(model), "--window", "1")
    assert "big-0" in table.stdout and "total:" in table.stdout, table.stdout + table.stderr

    load = Load(c.bootstrap, "big", 1.5e6)  # 1.5 MB/s into a partition throttled to 1 MB/s
    try:
        time.sleep(2)
        r = _reassign(c, plan, "--estimate", "--json", "--throttle", "1000000", "--model", str(model), "--window", "3")
        assert r.returncode == 0, r.stdout + r.stderr
        e = json.loads(r.stdout)
        (p,) = e["partitions"]
        assert 1.0e6 < p["ingest_bytes_per_s"] < 2.5e6, p
        assert p["feasible"] is False and p["seconds"] is None and e["total_seconds"] is None
        r = _reassign(c, plan, "--execute", "--throttle", "1000000")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "executed_at" in json.loads((tmp_path / "plan.json.estimate.json").read_text())
        r = _reassign(c, plan, "--verify", "--window", "1")  # the estimate beside the live progress
        assert r.returncode == 1 and "estimate before --execute: never finishes (not gaining)" in r.stdout, r.stdout
        # Without --throttle the estimate takes the throttle the brokers have (DescribeConfigs).
        r = _reassign(c, plan, "--estimate", "--json", "--model", str(model), "--window", "1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["partitions"][0]["cap_bytes_per_s"] == 1e6
        # At the throttle alone the 8 MiB would take ~9 s; 20 s later the copy is still behind.
        time.sleep(20)
        a = admin(c.bootstrap)
        try:
            assert a.list_partition_reassignments(), "the move finished although its ingest outran its throttle"
        finally:
            a.close()
    finally:
        load.close()
        _reassign(c, plan, "--cancel")
