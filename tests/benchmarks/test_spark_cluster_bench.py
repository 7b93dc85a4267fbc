"""`bench aggregate` on a 2-worker Spark standalone cluster beside local mode (pytest-benchmark;
run only with --benchmark-only, `make bench-spark`):

    .venv/bin/python -m pytest -p no:cacheprovider tests/benchmarks/test_spark_cluster_bench.py --benchmark-only -q -s

A SYNTHETIC sweep (tests/support/synthetic.py: every registered system, three sizes, two
throttles) is aggregated through the CLI, as a user runs it: local mode (`local[2]`, the default)
and `--spark-master` on `bench spark start --workers 2` (workers of 1 core, 1 GiB), in turn, one
pair per round, so both meet the same machine. The benchmark times the cluster runs; extra_info
has both sides' wall times, their medians and the ratio cluster / local. Each round's outputs must
be the same tables and model.json (tests/support/spark_compare.py). On 2 cores the cluster's
executor JVMs compete with the driver for the same cores: the cluster's point is a real cluster,
not speed here."""
from __future__ import annotations

import statistics
import time

import pytest

from bench.analysis.aggregate.standalone import start
from systems.core.process import alive
from tests.support.cli import bench as _bench
from tests.support.spark_compare import assert_same_outputs
from tests.support.synthetic import write_sweep

ROUNDS = 3
pytestmark = pytest.mark.timeout(1500)  # 3 pairs of whole aggregations, about 2 minutes each


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-bench")
    write_sweep(root / "runs", sizes=(4 * 2**20, 16 * 2**20, 32 * 2**20), duration_s=20.0)
    return root


def _aggregate(root, out, *extra) -> float:
    t0 = time.perf_counter()
    r = _bench("aggregate", str(root / "runs"), "--out", str(out), *extra, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return time.perf_counter() - t0


def test_aggregate_standalone_vs_local(benchmark, sweep):
    c = start(sweep / "spark", workers=2, memory="1g")
    local_s: list[float] = []
    cluster_s: list[float] = []
    n = {"round": 0}
    try:
        def local():  # each round's local run comes right before its cluster run
            n["round"] += 1
            local_s.append(_aggregate(sweep, sweep / f"local-{n['round']}"))

        def cluster():
            cluster_s.append(_aggregate(sweep, sweep / f"cluster-{n['round']}", "--spark-master", c.master_url))

        benchmark.pedantic(cluster, setup=local, rounds=ROUNDS, iterations=1)
    finally:
        stopped = _bench("spark", "stop", "--dir", str(sweep / "spark"), timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(alive(p.pid, c.dir) for p in c.processes)
    tables = [assert_same_outputs(sweep / f"local-{i}", sweep / f"cluster-{i}") for i in range(1, ROUNDS + 1)]
    lm, cm = statistics.median(local_s), statistics.median(cluster_s)
    benchmark.extra_info.update(workers=2, tables=tables[0], local_s=[round(x, 1) for x in local_s],
                                cluster_s=[round(x, 1) for x in cluster_s], local_median_s=round(lm, 1),
                                cluster_median_s=round(cm, 1), cluster_over_local=round(cm / lm, 2))
    print(f"\nlocal {local_s} s, cluster {cluster_s} s: medians {lm:.1f} / {cm:.1f} s, ratio {cm / lm:.2f}; "
          f"{tables[0]} tables and model.json equal in every round")
