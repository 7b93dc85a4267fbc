"""Old import path (before issue 27): the helpers are in tests/support/clients.py and
tests/support/clusters.py. Kept until the branches of issue 27 are merged; then removed."""
from tests.support.clients import *  # noqa: F401,F403
from tests.support.clients import incremental_alter, network_names, netns_unavailable, wait_for  # noqa: F401
from tests.support.clusters import start_cluster  # noqa: F401
