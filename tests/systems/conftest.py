"""tests/systems: tests that start brokers, clusters or an object store directly (tests/support/
clusters.py) and talk to them with real clients or raw protocol frames; no harness run."""
from __future__ import annotations

from pathlib import Path

from tests.support.clusters import GROUPS, cluster_fixture
from tests.support.folders import mark_folder

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    mark_folder(items, HERE, "systems")


# One cluster per system for the whole session, shared by test_admin_apis.py and test_groups.py:
# their tests add topics, groups and dynamic settings of their own, put back what they change (a
# killed broker is restarted, a dynamic setting deleted) and read only what they added. The static
# settings are reported as STATIC_BROKER_CONFIG by DescribeConfigs (test_admin_apis.py).
repl = cluster_fixture("replication", 3, scope="session", **GROUPS,
                       **{"default.replication.factor": "3", "min.insync.replicas": "2"})
shared = cluster_fixture("shared", 2, scope="session", **GROUPS, **{"num.partitions": "2"})
