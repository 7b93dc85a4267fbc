"""tests/harness: tests that run the harness as users do - scenarios through its runner and
checkers (the run_scenario fixture), its command line (`python -m bench ...`), the Locust load,
the Spark aggregation."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.folders import mark_folder

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    mark_folder(items, HERE, "harness")


@pytest.fixture(scope="session")
def spark():
    """One Spark session for every harness test that aggregates (local[2], 1g, UI off, loopback),
    stopped at the end of the session: starting the JVM and running its first job take ~20 s on
    this 2-core machine, once instead of once per module."""
    from bench.analysis.aggregate import spark_session

    with spark_session("local[2]", driver_memory="1g", shuffle_partitions=2) as s:
        yield s
