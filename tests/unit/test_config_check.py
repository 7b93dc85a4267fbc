"""Unknown and malformed broker settings refused by name (issue 14): the check every cluster start
and every broker and controller process runs (systems/core/config.py), without a process."""
from __future__ import annotations

import pytest

from systems.core.config import ConfigError, check
from systems.registry import profile


def test_check_function():
    assert check({"num.partitions": "3"}, profile("replication")) == {"num.partitions": 3}
    assert check(["wal.upload.threshold.bytes"], profile("shared")) == {"wal.upload.threshold.bytes": None}
    with pytest.raises(ConfigError, match="wal.upload.threshold.bytes"):
        check({"wal.upload.threshold.bytes": "1"}, profile("replication"))
    with pytest.raises(ConfigError, match="'abc'"):
        check({"min.insync.replicas": "abc"}, profile("shared"))
