"""`bench calibrate` on a cluster the harness started but drives as an external one (the protocol
only): its moves run on prefixed test topics that are gone afterwards, the model is fitted on
them alone, and `reassign --estimate` with that model says it was calibrated on this cluster (the
lookup by cluster id: tests/unit/test_estimate.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.admin import NewTopic

from bench.run.load import prefill
from tests.support.clients import admin, create_topics
from tests.support.clusters import start_cluster

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


def _bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.slow  # three runs of six moves and a Spark aggregation: about 2 minutes
@pytest.mark.timeout(900)
def test_calibrate_fits_the_clusters_own_model_and_estimate_uses_it(tmp_path, tmp_path_factory):
    c = start_cluster(tmp_path_factory, "replication", 4, {})  # production defaults, as `bench cluster start`
    try:
        r = _bench("calibrate", "--bootstrap-server", c.bootstrap, "--results", str(tmp_path / "res"),
                   "--throttle", "8MB", "--no-progress", timeout=800)
        assert r.returncode == 0, r.stdout + r.stderr
        (cal,) = (tmp_path / "res" / "calibration").iterdir()
        doc = json.loads((cal / "calibration.json").read_text())
        assert doc["behaves_as"] == "replication" and doc["bootstrap"] == c.bootstrap and len(doc["runs"]) == 3
        model = cal / "aggregate" / "model.json"
        fitted = json.loads(model.read_text())
        assert set(fitted["models"]) == {"replication"}, fitted["models"].keys()  # this cluster's moves only
        assert f"stored in {cal}/" in r.stdout
        a = admin(c.bootstrap)
        try:
            assert not [t for t in a.list_topics() if t.startswith("bench.")]  # its test topics are gone
        finally:
            a.close()

        create_topics(c.bootstrap, [NewTopic("t", -1, -1, replica_assignments={0: [1, 2, 3]})])
        prefill(c.bootstrap, [("t", 0)], 8 * MiB)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]}))
        e = _bench("reassign", "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan), "--estimate",
                   "--throttle", "8000000", "--model", str(model), "--json", timeout=60)
        assert e.returncode == 0, e.stdout + e.stderr
        est = json.loads(e.stdout)
        assert est["model"]["calibrated"] is True and est["model"]["calibration"]["behaves_as"] == "replication"
        assert est["partitions"][0]["seconds"] > 0
    finally:
        c.stop()
