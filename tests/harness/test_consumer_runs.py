"""Consumer groups in real runs, both systems: a tail group of two members and a catch-up group
read while a partition moves and a broker is killed (-9) and restarted; every acked message
reaches every group, and the run's summary, aggregate and report carry the consumer figures.
The same runner, clients and checkers as `bench run`."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from bench.history.store import read_history
from bench.run.runner import run_scenario
from bench.scenario import parse_scenario
from tests.support.clusters import FAST

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SYSTEMS = ("replication", "shared")
SCENARIO = {
    "name": "consume-small",
    "system": {"kind": "replication", "brokers": 3,
               "extra": {**FAST, "group.initial.rebalance.delay.ms": "0"}},
    "workload": {"topics": [{"name": "hot", "partitions": 1}, {"name": "events", "partitions": 2}],
                 "message_bytes": 1024, "produce_rate_msgs_per_s": 150, "duration_s": 12},
    "prefill": {"bytes_per_partition": "4MiB", "topics": ["hot"]},
    "consumers": [{"mode": "tail", "members": 2}, {"mode": "catch_up", "topics": ["hot"]}],
    # hot-0 on [1,2,3] / [1]; events-0 on [2,3,1] / [2]: broker 2 leads it when killed
    "actions": [{"at_s": 2, "kind": "reassign", "topic": "hot", "partition": 0, "to": [2, 3, 1]},
                {"at_s": 6, "kind": "kill_broker", "broker": 2},
                {"at_s": 9, "kind": "restart_broker", "broker": 2}],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both systems' runs under one results root: {system: (run_dir, summary)}, and the root."""
    root = tmp_path_factory.mktemp("results")
    out = {}
    for system in SYSTEMS:
        data = json.loads(json.dumps(SCENARIO))
        data["system"]["kind"] = system
        if system == "shared":
            data["actions"][0]["to"] = [3]
        [(run_dir, summary)] = run_scenario(parse_scenario(data, "consume-small.yaml"), results_root=root,
                                            progress=False)
        out[system] = (Path(run_dir), summary)
    return root, out


@pytest.fixture(params=SYSTEMS)
def consumer_run(request, runs):
    run_dir, summary = runs[1][request.param]
    return request.param, run_dir, summary


def test_every_acked_message_reaches_every_group_across_the_move_and_the_kill(consumer_run):
    system, run_dir, s = consumer_run
    checks = s["checks"]
    assert checks["valid"] is True, (system, checks["failed"], checks["unknown"])
    delivery = checks["delivery"]
    assert delivery["valid"] is True and delivery["caught_up"] is True
    assert set(delivery["groups"]) == {"bench.tail-0", "bench.catch_up-0"}
    for gid, g in delivery["groups"].items():
        assert g["required"] > 300 and g["missing"] == 0, (gid, g)  # catch_up: hot only (a third)
    acked = s["producer"]["acked"]
    tail = next(g for g in delivery["groups"].values() if g["mode"] == "tail")
    assert tail["required"] == acked  # the tail group reads both topics: every acked message


def test_tail_members_split_the_partitions_and_consumers_felt_the_actions(consumer_run):
    system, run_dir, s = consumer_run
    h = read_history(run_dir / "history.parquet")
    d = h.filter(pc.equal(h["kind"], "deliver"))
    tail = d.filter(pc.match_substring(d["group"], "tail"))
    members = {}
    for m, t, p in zip(tail["member"].to_pylist(), tail["topic"].to_pylist(), tail["partition"].to_pylist()):
        members.setdefault(m, set()).add((t, p))
    assert set(members) == {"m0", "m1"}, members  # both members got partitions
    # produce and consume times: the record's own timestamp rides along with the delivery time
    rts, dts = tail["record_ts"].to_pylist(), tail["ts"].to_pylist()
    assert all(r is not None and 0 <= d - r < 30 for r, d in zip(rts, dts))
    c = s["consumers"]
    move, kill = c["actions"][0], c["actions"][1]
    assert move["action"] == "reassign" and kill["action"] == "kill_broker"
    assert move["end_to_end_ms"]["before"]["count"] > 0 and move["end_to_end_ms"]["after"]["count"] > 0
    assert move["gap_seconds"] is not None and kill["gap_seconds"] is not None
    cu = next(iter(c["catch_up"].values()))
    assert cu["caught_up"] is True and cu["backlog_bytes"] >= 4 * 2**20
    assert cu["bytes_per_s"] > 0


def test_aggregate_and_report_show_consumers_of_both_systems(runs, spark, tmp_path):
    from bench.analysis.aggregate import aggregate
    from bench.report import build_report, load_tables

    aggregate([runs[0]], tmp_path / "agg", spark=spark)
    t = load_tables(tmp_path / "agg")
    assert {x["system"] for x in t["consumers"]} == set(SYSTEMS)
    assert all(x["delivery_valid"] == "true" and x["missing"] == 0 for x in t["consumers"])
    assert {x["system"] for x in t["consumer_timeline"] if x["e2e_p99_ms"] is not None} == set(SYSTEMS)
    out = build_report(tmp_path / "agg", tmp_path / "report")
    md = out["markdown"].read_text()
    assert "## Consumers across moves and faults" in md and "reassign (#0)" in md and "kill_broker (#1)" in md
    assert (out["figures"] / "consumers_timeline.png").is_file()
