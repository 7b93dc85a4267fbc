"""A tiered run samples what a new replica would copy (bench/run/observe.py sample_untiered): the
leader's bytes after its last tiered offset, through ListOffsets, as the relation behind the tiered
copy's TB projection needs them (bench/analysis/aggregate/rows.py untiered_rows)."""
from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from bench.history.names import EVENT_UNTIERED
from bench.history.store import read_history

MiB = 1 << 20


@pytest.mark.slow  # a whole run; the rows it feeds: tests/unit/test_untiered.py
def test_a_tiered_run_samples_each_leader_s_untiered_tail(run_scenario):
    [(run_dir, s)] = run_scenario({
        "name": "untiered-sample",
        "system": {"kind": "tiered", "brokers": 3, "segment_bytes": "1MiB", "local_retention_bytes": "8MiB",
                   "extra": {"remote.log.manager.task.interval.ms": 500}},
        "workload": {"topics": [{"name": "t", "partitions": 2}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 400, "duration_s": 6},
        "prefill": {"bytes_per_partition": "3MiB"},
    })
    assert s["error"] is None and s["checks"]["valid"] is True, (run_dir, s["error"], s["checks"])
    t = read_history(run_dir / "history.parquet")
    t = t.filter(pc.fill_null(pc.equal(t["event"], EVENT_UNTIERED), False))
    samples = [json.loads(d) for d in t["detail"].to_pylist()]
    assert len(samples) >= 5, len(samples)  # every other protocol tick (0.5 s) over the run
    assert {x["segment_bytes"] for x in samples} == {MiB} and {x["upload_interval_s"] for x in samples} == {0.5}
    parts = [p for x in samples for p in x["partitions"].values()]
    assert {k for x in samples for k in x["partitions"]} == {"t-0", "t-1"}
    for p in parts:
        assert 0 <= p["untiered_bytes"] <= p["local_bytes"] and p["local_start"] <= p["end"], p
    # once closed segments are tiered (every 0.5 s), a new replica would copy a fraction of the
    # local log: the active segment and what waits for the next task, never the 3 MiB prefill
    tiered = [p for p in parts if p["last_tiered"] >= 0]
    assert tiered and all(p["untiered_bytes"] < 2 * MiB + 400 * 1000 for p in tiered), tiered[-3:]
    assert max(p["local_bytes"] for p in tiered) >= 3 * MiB
