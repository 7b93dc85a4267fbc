"""tests/harness: tests that run the harness as users do - scenarios through its runner and
checkers (the run_scenario fixture), its command line (`python -m bench ...`), the Locust load,
the Spark aggregation."""
from __future__ import annotations

from pathlib import Path

from tests.support.folders import mark_folder

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    mark_folder(items, HERE, "harness")
