"""A randomized schedule run end to end (`python -m bench chaos`): drawn, stored, run through the
runner and checked; no acked message lost, duplicated or corrupted."""
from __future__ import annotations

import json

import pytest
import yaml

from bench.scenario.chaos import draw
from tests.support.cli import bench


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_chaos_run_keeps_every_acked_write_and_stores_its_schedule(tmp_path):
    p = bench("chaos", "--system", "shared", "--seed", "4", "--minutes", "1.2", "--results", str(tmp_path),
              "--no-progress", timeout=360)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    schedule = tmp_path / "chaos" / "chaos-shared-seed4-1.2min.yaml"
    assert yaml.safe_load(schedule.read_text()) == draw("shared", 4, 1.2)  # what a replay runs
    [summary] = list((tmp_path / "chaos-shared-seed4").rglob("summary.json"))
    s = json.loads(summary.read_text())
    c = s["checks"]
    assert (c["lost_writes"]["lost_count"], c["duplicates"]["duplicated_count"], c["corrupted"]["corrupted_count"]) \
        == (0, 0, 0), (s["verdict"], s["problems"])
    assert c["corrupted"]["checked_count"] > 0 and s["verdict"] in ("pass", "unknown")
    assert "acked writes: lost 0, duplicated 0, corrupted 0" in p.stdout
