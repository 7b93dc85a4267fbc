"""Fixtures for every folder: what a test needs is said by its folder (tests/unit: nothing
started; tests/systems: brokers and clusters started directly; tests/harness: scenarios through
the harness's runner, CLI, Locust or Spark; tests/benchmarks: measurements). Shared support is in
tests/support/."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.run.network import PREFIX  # noqa: E402
from tests.support.clients import network_names  # noqa: E402
from tests.support.clusters import FAST, make_cluster, run_scenario  # noqa: E402,F401  (fixtures; FAST: old import path)
from tests.support.leftovers import networks_left  # noqa: E402


def pytest_ignore_collect(collection_path, config):
    """Benchmarks (tests/benchmarks) are measurements, not tests: collected only with
    --benchmark-only (`make bench-throughput`, `make bench-gate`), never shown as skipped."""
    if "benchmarks" in collection_path.parts and not config.getoption("benchmark_only", False):
        return True
    return None


@pytest.fixture(scope="session", autouse=True)
def no_network_left_behind(tmp_path_factory):
    """After the whole session, no namespace or link that a test's cluster made is left. Every
    cluster of the session lives under pytest's temp dir (the runner's too: BENCH_CLUSTER_TMP), so
    networks of other sessions running on the machine are not counted."""
    os.environ.setdefault("BENCH_CLUSTER_TMP", str(tmp_path_factory.mktemp("clusters")))
    roots = [tmp_path_factory.getbasetemp(), Path(os.environ["BENCH_CLUSTER_TMP"])]
    before = set(network_names(PREFIX))
    yield
    left = networks_left(before, roots)
    if left:
        pytest.fail(f"the tests left network objects behind: {', '.join(left)}")
