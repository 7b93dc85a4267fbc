"""Fixtures for every folder: what a test needs is said by its folder (tests/unit: nothing
started; tests/systems: brokers and clusters started directly; tests/harness: scenarios through
the harness's runner, CLI, Locust or Spark; tests/benchmarks: measurements). Shared support is in
tests/support/."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# A shell starts a background job (`make test &`, nohup) with SIGINT ignored, and its children
# inherit that: the tests that stop a `bench run` with Ctrl-C (SIGINT) would wait in vain. Python's
# own SIGINT handling here, so every child starts with SIGINT's default action.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from bench.run.network import PREFIX  # noqa: E402
from tests.support.clients import network_names  # noqa: E402
from tests.support.clusters import make_cluster, run_scenario  # noqa: E402,F401  (fixtures)
from tests.support.leftovers import networks_left  # noqa: E402


# The folders, in the order a whole run takes them: what starts least first, so a broken build
# fails within a minute. A test file anywhere else is refused (it would say nothing of its needs).
FOLDERS = ("unit", "systems", "harness", "benchmarks")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(session, config, items):
    def folder(item) -> str:
        rel = item.path.resolve().relative_to(TESTS).parts
        if len(rel) < 2 or rel[0] not in FOLDERS:
            raise pytest.UsageError(f"{item.path}: a test belongs in one of tests/{{{','.join(FOLDERS)}}} "
                                    "(tests/conftest.py), by what it starts")
        return rel[0]

    items.sort(key=lambda item: FOLDERS.index(folder(item)))  # stable: a module's tests stay together


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
