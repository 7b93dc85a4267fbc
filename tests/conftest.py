"""Shared fixtures: real clusters in temp dirs, always stopped by PID."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.run.cluster import Cluster  # noqa: E402
from bench.run.network import PREFIX  # noqa: E402
from tests.clients import network_names  # noqa: E402

def pytest_ignore_collect(collection_path, config):
    """Benchmarks (tests/benchmarks) are measurements, not tests: collected only with
    --benchmark-only (`make bench-throughput`, `make bench-gate`), never shown as skipped."""
    if "benchmarks" in collection_path.parts and not config.getoption("benchmark_only", False):
        return True
    return None


@pytest.fixture(scope="session", autouse=True)
def no_network_left_behind():
    """After the whole session, no namespace or link that a test's cluster made is left."""
    before = set(network_names(PREFIX))
    yield
    left = sorted(set(network_names(PREFIX)) - before)
    if left:
        pytest.fail(f"the tests left network objects behind: {', '.join(left)}")


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


@pytest.fixture
def run_scenario(tmp_path):
    """run_scenario(data, overrides=()) -> [(run_dir, summary), ...]: a scenario (a dict as in a
    YAML file, or a built-in name) run through the harness's own runner and checkers, exactly as
    `python -m bench run` does, with results under the test's temp dir."""
    from bench.run.runner import run_scenario as run
    from bench.scenario import load_scenario, parse_scenario, resolve_scenario

    count = [0]

    def go(data, overrides=()):
        count[0] += 1
        if isinstance(data, str):
            sc = load_scenario(resolve_scenario(data), list(overrides))
        else:
            sc = parse_scenario(data, "<test>", list(overrides))
        return run(sc, out_dir=tmp_path / f"run-{count[0]}", progress=False)

    return go
