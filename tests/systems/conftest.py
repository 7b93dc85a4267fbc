"""tests/systems: tests that start brokers, clusters or an object store directly (tests/support/
clusters.py) and talk to them with real clients or raw protocol frames; no harness run."""
from __future__ import annotations

from pathlib import Path

from tests.support.folders import mark_folder

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    mark_folder(items, HERE, "systems")
