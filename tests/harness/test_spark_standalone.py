"""`bench aggregate` on a Spark standalone cluster (`bench spark start`: a master and 2 workers,
JVMs started from the installed PySpark) gives the same tables and model.json as local mode, on a
synthetic sweep (SYNTHETIC TEST FIXTURES, tests/support/synthetic.py); every process it started is
stopped by PID."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bench.analysis.aggregate.standalone import SparkCluster, start
from systems.core.process import alive
from tests.support.cli import bench as _bench
from tests.support.synthetic import write_sweep

# What may differ: how long the computation took (the aggregate's timings, the projection grid's
# and each cluster simulation's wall time), never a result.
TIMINGS = ("sim_seconds",)


def _results_only(model: dict) -> dict:
    model.pop("timings_s")
    model["grid"].pop("seconds")
    for r in model["rebalance"]:
        r.pop("sim_seconds")
    return model


def _close(a, b, path="") -> None:
    """Equal, floats to 1e-9 relative (a cluster may sum in another order than local mode)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), path
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


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

    csvs = sorted(p.name for p in (tmp_path / "local").glob("*.csv"))
    assert csvs and csvs == sorted(p.name for p in (tmp_path / "cluster").glob("*.csv"))
    for name in csvs:
        a, b = (pd.read_csv(tmp_path / d / name).drop(columns=list(TIMINGS), errors="ignore") for d in ("local", "cluster"))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, obj=name)
    ma, mb = (_results_only(json.loads((tmp_path / d / "model.json").read_text())) for d in ("local", "cluster"))
    _close(ma, mb, "model.json")
    assert ma["models"]  # the comparison covers fitted models, not two empty files


def test_spark_commands_on_no_cluster_say_so(tmp_path):
    r = _bench("spark", "stop", "--dir", str(tmp_path / "none"), timeout=60)
    assert r.returncode == 1 and "no Spark cluster in" in r.stderr and "bench spark start" in r.stderr
    r = _bench("spark", "start", "--dir", str(tmp_path / "s"), "--workers", "0", timeout=60)
    assert r.returncode == 1 and "--workers must be at least 1" in r.stderr
    assert not (tmp_path / "s" / "spark.json").exists()
    with pytest.raises(Exception, match="no Spark cluster"):
        SparkCluster.load(tmp_path / "none")
