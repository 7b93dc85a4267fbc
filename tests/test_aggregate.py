"""Spark aggregation on a small synthetic results directory (SYNTHETIC TEST FIXTURES from
bench/analysis/synthetic.py, written through HistoryWriter), checked against bench/check/.

One Spark session for the whole module (local[2], 1g, UI off, loopback), always stopped.
"""
from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from bench.analysis.aggregate import TABLES, AggregateError, aggregate, discover_runs, spark_session
from bench.check import check_all
from bench.history.store import read_history
from bench.analysis.synthetic import SynthRun, write_run

MiB = 2**20


@pytest.fixture(scope="module")
def spark():
    with spark_session("local[2]", driver_memory="1g", shuffle_partitions=2) as s:
        yield s


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    base = root / "synthetic-sweep" / "20300101T000000Z"
    seed = 1
    for size in (2 * MiB, 6 * MiB, 12 * MiB):
        cfg = SynthRun(system="replication", prefill_bytes=size, throttle_bytes_per_s=4 * MiB, rate_msgs_per_s=80,
                       duration_s=1, move_at_s=5, seed=seed)
        cfg.duration_s = math.ceil(cfg.move_at_s + cfg.move_seconds + 6)
        write_run(base / f"replication-{size}", cfg)
        seed += 1
    write_run(base / "replication-6MiB-fast", SynthRun(system="replication", prefill_bytes=6 * MiB,
                                                       throttle_bytes_per_s=16 * MiB, rate_msgs_per_s=80,
                                                       duration_s=14, move_at_s=5, seed=seed))
    for size in (2 * MiB, 12 * MiB):
        seed += 1
        write_run(base / f"shared-{size}", SynthRun(system="shared", prefill_bytes=size, rate_msgs_per_s=80,
                                                    duration_s=14, move_at_s=5, seed=seed))
    return root


@pytest.fixture(scope="module")
def agg(spark, results, tmp_path_factory):
    out = tmp_path_factory.mktemp("aggregate")
    return aggregate([results], out, spark=spark, quantiles="exact")


def test_discovers_runs_and_writes_every_table(agg, results):
    runs, warnings = discover_runs([results])
    assert len(runs) == 6 and not warnings
    assert all(r.run_key.startswith("synthetic-sweep/20300101T000000Z/") for r in runs)
    for name, cols in TABLES.items():
        t = pq.read_table(agg.out_dir / f"{name}.parquet")
        assert t.column_names == [c for c, _ in cols]
        assert (agg.out_dir / f"{name}.csv").read_text().splitlines()[0] == ",".join(c for c, _ in cols)
    assert (agg.out_dir / "summary.md").read_text().startswith("# Aggregate of reassignment runs")
    assert json.loads((agg.out_dir / "model.json").read_text())["projection"]
    assert len(agg.tables["runs"]) == 6 and all(r["synthetic"] for r in agg.tables["runs"])


def _checked(run_dir):
    return check_all(read_history(run_dir / "history.parquet"))


def test_per_run_figures_agree_with_the_checkers(agg, results):
    runs = {r["run_key"]: r for r in agg.tables["runs"]}
    for key, row in runs.items():
        run_dir = results / key
        c = _checked(run_dir)
        moves = [m for m in agg.tables["moves"] if m["run_key"] == key]
        assert len(moves) == len(c["move_seconds"]["moves"]) == 1
        assert moves[0]["move_seconds"] == pytest.approx(c["move_seconds"]["moves"][0]["move_seconds"], abs=1e-9)
        win = c["unavailable_seconds"]["actions"][0]
        assert moves[0]["unavailable_seconds"] == pytest.approx(win["unavailable_seconds"], abs=1e-9)
        assert row["run_max_unavailable_seconds"] == pytest.approx(
            c["unavailable_seconds"]["run"]["max_unavailable_seconds"], abs=1e-9)
        assert row["latency_p99_ms"] == pytest.approx(c["latency"]["run"]["p99_ms"], rel=1e-9)
        assert row["latency_count"] == c["latency"]["run"]["count"]
        assert moves[0]["bytes_moved"] == c["bytes_moved"]["actions"][0]["bytes_moved"]
        lat = {(x["scope"], x["phase"]): x for x in agg.tables["latency"] if x["level"] == "run" and x["key"] == key}
        act = c["latency"]["actions"][0]
        for scope in ("all", "partitions"):
            for phase in ("before", "during", "after"):
                want, got = act[scope][phase], lat[(scope, phase)]
                assert got["count"] == want["count"], (key, scope, phase)
                for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
                    assert got[q] == pytest.approx(want[q], rel=1e-9), (key, scope, phase, q)
                if scope == "all":
                    assert got["info_count"] == want["info_count"] and got["fail_count"] == want["fail_count"]
        assert row["valid"] == "true" and row["lost_writes"] == "true"


def test_models_and_held_out_check(agg):
    fit = {m["system"]: m for m in agg.tables["model_fit"]}
    assert fit["replication"]["slope_fitted"] and fit["replication"]["efficiency"] == pytest.approx(0.9, rel=0.05)
    val = [v for v in agg.tables["model_validation"] if v["system"] == "replication"]
    assert val and all(v["status"] == "ok" and abs(v["error_pct"]) <= 15 for v in val)
    proj = {(p["system"], p["link_gbit_s"], p["size_label"]): p for p in agg.tables["projection"]}
    assert proj[("replication", 1.0, "8.2 TB")]["move_seconds"] > 3600 * 15
    assert proj[("shared", 1.0, "8.2 TB")]["move_seconds"] < 5
    assert len(agg.tables["configs"]) == 6
    tl = [x for x in agg.tables["timeline"] if x["run_key"].endswith("shared-2097152")]
    assert sum(x["sent"] for x in tl) == next(r["sends"] for r in agg.tables["runs"] if r["run_key"].endswith("shared-2097152"))


def test_no_runs_is_a_clear_error(spark, tmp_path):
    with pytest.raises(AggregateError, match="no runs found"):
        aggregate([tmp_path], tmp_path / "out", spark=spark)
