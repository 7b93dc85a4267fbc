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


def test_cluster_start_says_which_topic_defaults_it_applied_and_how_to_change_them():
    """`bench cluster start`: the production defaults per system, where each came from, and on the
    copy systems why a replication-factor-1 topic refuses acks=all writes and what to do."""
    from bench.cli.cluster import production_defaults, topic_defaults_lines

    copy = topic_defaults_lines("replication", production_defaults("replication", 3), {})
    assert copy[0] == ("topic defaults: default.replication.factor=3 (replication's production configuration), "
                       "min.insync.replicas=2 (replication's production configuration)")
    assert "NOT_ENOUGH_REPLICAS" in copy[1] and "--config min.insync.replicas=1" in copy[1]
    assert "replication factor >= 2" in copy[1]
    shared = topic_defaults_lines("shared", production_defaults("shared", 3), {})
    assert shared[0].startswith("topic defaults: default.replication.factor=1 (shared's production configuration)")
    assert "NOT_ENOUGH_REPLICAS" not in shared[1] and "--config min.insync.replicas=N" in shared[1]
    given = {"min.insync.replicas": "1"}
    relaxed = topic_defaults_lines("tiered", {**production_defaults("tiered", 3), **given}, given)
    assert "min.insync.replicas=1 (--config)" in relaxed[0] and "NOT_ENOUGH_REPLICAS" not in relaxed[1]
    assert production_defaults("replication", 1) == {"default.replication.factor": "1", "min.insync.replicas": "1"}
