"""The TB-scale projection on Spark (pytest-benchmark; `make bench-projection`):

    .venv/bin/python -m pytest -p no:cacheprovider tests/benchmarks/test_projection_bench.py --benchmark-only -q -s

Models fitted on constructed moves with the physics of each family (the fit itself is not timed);
the Spark session (local[*]) is started and warmed before timing. A round is one
:func:`bench.analysis.projection.run`: the whole grid (both systems, >= 100,000 points, written as
Parquet by Spark) and every cluster simulation (10 to 500 brokers, up to 1 PB, in Spark tasks).
Target (issue 13): under 2 minutes per round on the 2-core dev machine after the session is up.
"""
from __future__ import annotations

import os
import random
import time

import pytest

from bench.analysis import model as mdl
from bench.analysis import projection
from bench.analysis.aggregate import spark_session
from tests.unit.test_model import MiB, copy_pt, shared_pt

TARGET_S = 120.0
MIN_POINTS = 100_000


@pytest.fixture(scope="module")
def spark():
    with spark_session("local[*]", driver_memory="2g") as s:
        s.range(10).count()  # the JVM and its first job before timing
        yield s


def _models():
    rng = random.Random(5)
    copy = [copy_pt(s, th, rate, noise=0.02, rng=rng) for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB)
            for th in (2.5e6, 6.25e6) for rate in (50, 200)]
    shared = [shared_pt(s, tail, objects=n) for s, tail, n in
              ((16 * MiB, 3e6, 2), (256 * MiB, 10e6, 32), (1024 * MiB, 2e6, 128), (4096 * MiB, 6e6, 1000))]
    models = {"replication": mdl.fit_model(copy, "replication"), "shared": mdl.fit_model(shared, "shared")}
    return models, mdl.validate(copy, "replication") + mdl.validate(shared, "shared")


def test_projection_grid_and_cluster_simulations(benchmark, spark, tmp_path):
    models, validation = _models()
    out = {}

    def run():
        t0 = time.perf_counter()
        out["res"] = projection.run(spark, models, validation, tmp_path / "proj", {"replication": 0.3, "shared": 1.5})
        out["wall"] = time.perf_counter() - t0

    benchmark.pedantic(run, rounds=3, iterations=1)
    res = out["res"]
    sims = res["rebalance"]
    benchmark.extra_info.update(points=res["grid"]["points"], clusters=len(sims), stages=res["timings_s"],
                                max_brokers=max(s["brokers"] for s in sims),
                                max_total_bytes=max(s["total_bytes"] for s in sims),
                                slowest_simulation_s=round(max(s["sim_seconds"] for s in sims), 2),
                                load_avg_1m=os.getloadavg()[0])
    print(f"\nprojection: {res['grid']['points']:,} grid points + {len(sims)} cluster simulations; "
          f"median {benchmark.stats.stats.median:.1f} s per round; stages {res['timings_s']}")
    assert res["grid"]["points"] >= MIN_POINTS
    assert {s["brokers"] for s in sims} >= {10, 500} and max(s["total_bytes"] for s in sims) >= 1e15
    assert (tmp_path / "proj" / "projection_grid").is_dir()
    assert benchmark.stats.stats.median < TARGET_S, f"median {benchmark.stats.stats.median:.1f} s > {TARGET_S:g} s"
