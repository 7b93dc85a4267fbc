"""Clusters for tests, each in its own temp dir and stopped by PID when its fixture ends.

- ``FAST``: the broker settings every test cluster shares (defined here once).
- ``start_cluster``: a started cluster of a system, for a fixture of any scope.
- ``cluster_fixture``: a module- or session-scoped cluster, for tests that only read it or add
  topics and settings of their own (one start for many tests).
- ``make_cluster`` / ``run_scenario`` (pytest fixtures, registered by tests/conftest.py): a fresh
  cluster per test, for tests that kill, pause or reconfigure it; a scenario run through the
  harness's own runner and checkers, as ``python -m bench run`` does.
"""
from __future__ import annotations

import pytest

from bench.run.cluster import Cluster

# A broker that stops heartbeating is fenced after 3 s (Kafka's default is 9 s), so a test that
# kills or isolates a broker waits seconds for the failover, not tens of seconds.
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}

# Consumer groups without the 3 s initial rebalance delay, and sessions as short as 1 s allowed.
GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def start_cluster(tmp_path_factory, system: str, brokers: int, config: dict) -> Cluster:
    """A cluster of ``system`` with exactly ``config`` in a pytest temp dir, started (stopped
    again if the start fails)."""
    c = Cluster(system, brokers, str(tmp_path_factory.mktemp(system) / "cluster"), config)
    try:
        c.start(timeout=60)
    except BaseException:
        c.stop()
        raise
    return c


def cluster_fixture(system: str, brokers: int, scope: str = "module", **config):
    """A pytest fixture of the given scope yielding one started cluster (``FAST`` plus
    ``config``, keys as Kafka spells them), stopped when the scope ends."""

    @pytest.fixture(scope=scope)
    def cluster(tmp_path_factory):
        c = start_cluster(tmp_path_factory, system, brokers, {**FAST, **config})
        yield c
        c.stop()

    return cluster


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster(system="replication", brokers=3, **config) -> started Cluster (``FAST`` plus
    ``config``, underscores in keys read as dots); every one is stopped after the test."""
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
    """run_scenario(data, overrides=(), estimates=None) -> [(run_dir, summary), ...]: a scenario (a
    dict as in a YAML file, or a built-in name) run through the harness's own runner and checkers,
    exactly as `python -m bench run` does, with results under the test's temp dir; ``estimates``:
    what estimates each move before its request (`bench run` gives bench.analysis.estimate.RunModels)."""
    from bench.run.runner import run_scenario as run
    from bench.scenario import load_scenario, parse_scenario, resolve_scenario

    count = [0]

    def go(data, overrides=(), estimates=None):
        count[0] += 1
        if isinstance(data, str):
            sc = load_scenario(resolve_scenario(data), list(overrides))
        else:
            sc = parse_scenario(data, "<test>", list(overrides))
        return run(sc, out_dir=tmp_path / f"run-{count[0]}", progress=False, estimates=estimates)

    return go
