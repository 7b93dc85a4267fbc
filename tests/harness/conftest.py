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
    this 2-core machine, once instead of once per module. Set up for small inputs
    (bench.analysis.aggregate.spark.SMALL_INPUTS: one partition per local list and shuffle, the
    JVM's quick compiler), which give the same tables."""
    from bench.analysis.aggregate import spark_session
    from bench.analysis.aggregate.spark import SMALL_INPUTS

    with spark_session("local[2]", driver_memory="1g", conf=SMALL_INPUTS) as s:
        yield s
