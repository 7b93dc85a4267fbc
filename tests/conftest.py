"""Shared fixtures: real clusters in temp dirs, always stopped by PID."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.run.cluster import Cluster  # noqa: E402

def pytest_ignore_collect(collection_path, config):
    """Benchmarks (tests/benchmarks) are measurements, not tests: collected only with
    --benchmark-only (`make bench-throughput`, `make bench-gate`), never shown as skipped."""
    if "benchmarks" in collection_path.parts and not config.getoption("benchmark_only", False):
        return True
    return None


FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster(system="replication", brokers=3, **config) -> started Cluster."""
    started: list[Cluster] = []

    def make(system: str = "replication", brokers: int = 3, name: str = "cluster", **config) -> Cluster:
        cfg = dict(FAST)
        cfg.update({k.replace("_", "."): str(v) for k, v in config.items()})
        c = Cluster(system, brokers, str(tmp_path / name), cfg)
        started.append(c)
        return c.start(timeout=60)

    yield make
    for c in started:
        c.stop()
