"""The command line refusing bad input before it starts or reaches anything: one line naming the
problem, no traceback (the same checks without a process: tests/unit/test_config_check.py and
tests/unit/test_fuzz_bad_input.py)."""
from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.cli import bench


@pytest.mark.parametrize("setting,named", [("nosuch.key=1", "'nosuch.key'"),
                                           ("broker.session.timeout.ms=abc", "broker.session.timeout.ms='abc'")])
def test_cluster_start_refuses_bad_settings(tmp_path, setting, named):
    t0 = time.monotonic()
    r = bench("cluster", "start", "--dir", str(tmp_path / "c"), "--brokers", "1", "--config", setting, timeout=10)
    assert time.monotonic() - t0 < 5
    assert r.returncode == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "c" / "cluster.json")  # nothing started


def test_cli_bad_plan_exit_code_and_message(tmp_path):
    path = tmp_path / f"plan-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": -3, "replicas": [1]}]}))
    r = bench("reassign", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(path), "--execute")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith("error: ") and "partitions[0]: 'partition' must be" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
