"""`bench aggregate` on a Spark standalone cluster (`bench spark start`: a master and 2 workers,
JVMs started from the installed PySpark) gives the same tables and model.json as local mode, on a
synthetic sweep (SYNTHETIC TEST FIXTURES, tests/support/synthetic.py; compared by
tests/support/spark_compare.py); every process it started is stopped by PID."""
from __future__ import annotations

import json

import pytest

from bench.analysis.aggregate.standalone import SparkCluster, start
from systems.core.process import alive
from tests.support.cli import bench as _bench
from tests.support.spark_compare import assert_same_outputs
from tests.support.synthetic import write_sweep


@pytest.mark.slow
def test_aggregate_on_a_two_worker_standalone_cluster_equals_local_mode(tmp_path):
    write_sweep(tmp_path / "runs", sizes=(4 * 2**20, 16 * 2**20), duration_s=14.0)
    local = _bench("aggregate", str(tmp_path / "runs"), "--out", str(tmp_path / "local"), timeout=300)
    assert local.returncode == 0, local.stderr[-3000:]

    c = start(tmp_path / "spark", workers=2, memory="1g")
    try:
        status = _bench("spark", "status", "--dir", str(tmp_path / "spark"), "--json", timeout=60)
        assert status.returncode == 0 and json.loads(status.stdout)["alive_workers"] == 2
        on = _bench("aggregate", str(tmp_path / "runs"), "--out", str(tmp_path / "cluster"),
                    "--spark-master", c.master_url, timeout=300)
        assert on.returncode == 0, on.stderr[-3000:]
        # the work ran on the workers: each started an executor for the application
        assert all(any((tmp_path / "spark" / f"worker-{i}").iterdir()) for i in (1, 2))
    finally:
        stopped = _bench("spark", "stop", "--dir", str(tmp_path / "spark"), timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(alive(p.pid, c.dir) for p in c.processes)

    assert_same_outputs(tmp_path / "local", tmp_path / "cluster")


def test_spark_commands_on_no_cluster_say_so(tmp_path):
    r = _bench("spark", "stop", "--dir", str(tmp_path / "none"), timeout=60)
    assert r.returncode == 1 and "no Spark cluster in" in r.stderr and "bench spark start" in r.stderr
    r = _bench("spark", "start", "--dir", str(tmp_path / "s"), "--workers", "0", timeout=60)
    assert r.returncode == 1 and "--workers must be at least 1" in r.stderr
    assert not (tmp_path / "s" / "spark.json").exists()
    with pytest.raises(Exception, match="no Spark cluster"):
        SparkCluster.load(tmp_path / "none")
