"""bench/analysis/projection.py without Spark: what may be projected, and the headline's rule
that a model without a passing held-out check shows "not validated" and never a number."""
from __future__ import annotations

import math

import pytest

from bench.analysis import model as mdl
from bench.analysis import projection
from tests.unit.test_model import MiB, copy_pt, shared_pt, tiered_pt


def _copy(sizes=(1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB)):
    pts = [copy_pt(s, key=f"{s}-{k}") for s in sizes for k in range(3)]
    pts += [copy_pt(16 * MiB, th, rate, key=f"{th}-{rate}") for th in (2.5e6, 3.75e6, 6.25e6) for rate in (50, 100, 200)]
    return pts


def _sims(models):
    return [{"system": s, "headline": True, "link_gbit_s": g, "rebalance_seconds": 1234.0, "bytes_moved": 1e14,
             "moves": 900} for s in models for g in projection.HEADLINE_LINKS_GBIT]


def test_a_validated_copy_model_projects_the_article_example():
    pts = _copy()
    m = mdl.fit_model(pts, "replication")
    val = mdl.validate(pts, "replication")
    v = projection.validity("replication", val)
    assert v.validated and set(v.axes) == {"size", "throttle", "ingest"} and v.error_pct < 1e-3
    rows = projection.table_rows({"replication": m}, {"replication": v})
    r1 = next(r for r in rows if r["size_label"] == "8.2 TB" and r["link_gbit_s"] == 1.0)
    r10 = next(r for r in rows if r["size_label"] == "8.2 TB" and r["link_gbit_s"] == 10.0)
    # 100 MB/s of ingest against 0.85 x 125 MB/s: ~6 MB/s net; at 10 Gbit/s ~960 MB/s net
    assert r1["move_seconds"] == pytest.approx(0.8 + 8.2e12 / (0.85 * 125e6 - 100e6), rel=1e-3)
    assert r10["move_seconds"] == pytest.approx(0.8 + 8.2e12 / (0.85 * 1250e6 - 100e6), rel=1e-3)
    assert r10["bytes_moved"] == pytest.approx(8.2e12 + 100e6 * (r10["move_seconds"] - 0.8), rel=1e-6)


def test_ingest_beyond_the_copy_rate_never_finishes():
    pts = _copy()
    m = mdl.fit_model(pts, "replication")
    v = projection.validity("replication", mdl.validate(pts, "replication"))
    never = projection.partition_case("replication", m, v, 0.5, 8.2e12, "8.2 TB")  # 62.5 MB/s link
    assert never["never"] and never["move_seconds"] is None and never["validated"]
    h = projection.headline({"replication": m}, {"replication": v}, _sims({"replication": m}),
                            {"replication": v})
    assert all(x["status"] == "validated" and x["value_text"] for x in h)


def test_a_broken_fit_of_one_size_is_not_validated_and_shows_no_number():
    one = [copy_pt(8 * MiB, key=f"k{i}") for i in range(3)]
    one += [copy_pt(8 * MiB, 4e6, key="t")]  # a second throttle: the model can be fitted, not validated
    m = mdl.fit_model(one, "replication")
    val = mdl.validate(one, "replication")
    v = projection.validity("replication", val)
    assert not v.validated and "size" in v.reason and v.error_pct is None
    h = projection.headline({"replication": m}, {"replication": v}, _sims({"replication": m}), {"replication": v})
    assert h and all(x["status"] == "not validated" and x["value_s"] is None and x["value_text"] is None
                     and x["bytes_moved"] is None and x["reason"] for x in h)
    rows = projection.table_rows({"replication": m}, {"replication": v})
    assert all(r["move_seconds"] is None and r["move_time"] == "not validated" for r in rows)


def test_a_failed_check_blocks_the_projection_with_its_error():
    val = [{"system": "shared", "axis": "size", "status": "failed", "error_pct": 41.0, "target_pct": 30.0,
            "label": "4 GiB", "reason": "|error| 41.0 % > 30 %"},
           {"system": "shared", "axis": "size", "status": "ok", "error_pct": 3.0, "target_pct": 30.0, "label": "1 GiB"}]
    v = projection.validity("shared", val)
    assert not v.validated and "4 GiB" in v.reason and "+41.0 %" in v.reason


def test_the_cluster_case_also_needs_a_passing_rebalance_check():
    pts = [shared_pt(s, tail, objects=n, per_obj=2e-5) for s, tail, n in
           ((1 * MiB, 3e6, 1), (8 * MiB, 10e6, 2), (32 * MiB, 2e6, 5), (64 * MiB, 6e6, 20_000))]
    m = mdl.fit_model(pts, "shared")
    val = mdl.validate(pts, "shared")
    v = projection.validity("shared", val)
    sv = projection.validity("shared", val, ("rebalance",))
    assert v.validated and not sv.validated and "rebalance" in sv.reason
    h = projection.headline({"shared": m}, {"shared": v}, _sims({"shared": m}), {"shared": sv})
    part = [x for x in h if x["case"] == "partition"]
    clus = [x for x in h if x["case"] == "cluster"]
    assert all(x["status"] == "validated" and math.isfinite(x["value_s"]) for x in part)
    assert all(x["status"] == "not validated" and x["value_s"] is None for x in clus)


def test_a_shared_open_far_beyond_the_measured_objects_is_not_projected():
    pts = [shared_pt(s, tail, objects=n, per_obj=2e-5) for s, tail, n in
           ((1 * MiB, 3e6, 1), (8 * MiB, 10e6, 2), (32 * MiB, 2e6, 5), (64 * MiB, 6e6, 1_000))]
    m = mdl.fit_model(pts, "shared")
    v = projection.validity("shared", mdl.validate(pts, "shared"))
    assert v.validated
    small = projection.partition_case("shared", m, v, 1.0, 1e9, "1 GB")  # 15 objects of 64 MiB
    big = projection.partition_case("shared", m, v, 1.0, 8.2e12, "8.2 TB")  # 122,190 objects
    assert small["validated"] and small["move_seconds"] > 0
    assert not big["validated"] and big["move_seconds"] is None and "beyond 10x the 1,000 measured" in big["reason"]


def _tiered():
    pts = [tiered_pt(s, 12 * MiB, key=f"{s}-{k}") for s in (64 * MiB, 512 * MiB) for k in range(2)]
    pts += [tiered_pt(128 * MiB, 20 * MiB, th, rate, key=f"{th}-{rate}") for th in (2.5e6, 3.75e6, 6.25e6)
            for rate in (50, 100, 200)]
    return pts


def test_a_tiered_partition_copies_only_what_is_not_tiered():
    # KIP-1023: the open 1 GiB segment + 30 s of ingest awaiting upload; KIP-405: 1 h of ingest + a segment
    assert projection.tiered_copy_bytes(8.2e12, 100e6) == pytest.approx(2**30 + 100e6 * 30)
    assert projection.tiered_copy_bytes(8.2e12, 100e6, last_tiered=False) == pytest.approx(100e6 * 3600 + 2**30)
    assert projection.tiered_copy_bytes(1e9, 100e6) == 1e9  # a partition smaller than its tail is copied whole


def test_a_tiered_model_projects_from_its_throttle_and_ingest_checks():
    pts = _tiered()
    m = mdl.fit_model(pts, "tiered")
    val = mdl.validate(pts, "tiered")
    v = projection.validity("tiered", val)
    assert v.validated and {"throttle", "ingest"} <= set(v.axes), v
    rows = projection.table_rows({"tiered": m}, {"tiered": v})
    r10 = next(r for r in rows if r["size_label"] == "8.2 TB" and r["link_gbit_s"] == 10.0)
    copied = 2**30 + 100e6 * 30
    assert r10["move_seconds"] == pytest.approx(1.2 + copied / (0.8 * 1250e6 - 100e6), rel=1e-3)
    assert r10["bytes_moved"] == pytest.approx(copied + 100e6 * (r10["move_seconds"] - 1.2), rel=1e-6)
    assert "KIP-1023" in r10["basis"] and "L = min(8.2 TB" in r10["basis"]
    # without its throttle and ingest checks it is not validated, and says what to run
    only_size = pts[:4]
    v2 = projection.validity("tiered", mdl.validate(only_size, "tiered"))
    assert not v2.validated and "sweep-tiered" in v2.reason


def test_a_tiered_cluster_simulates_copies_of_the_local_tails():
    m = mdl.fit_model(_tiered(), "tiered")
    cfg = next(c for c in projection.cluster_configs({"tiered": m}) if c["headline"] and c["link_gbit_s"] == 10.0)
    assert cfg["rf"] == 3 and cfg["throttle_share"] == 0.5 and cfg["upload_threshold_bytes"] is None
    small = dict(cfg, brokers=10, add=1, partitions=40, total_bytes=40 * 3e11)
    res = projection.simulate_cluster(small)
    tail = projection.tiered_copy_bytes(1e11, cfg["ingest_per_partition"])
    # every move copies at most the tail, never its ~100 GB partition
    assert res["moves"] > 0 and res["bytes_moved"] <= res["moves"] * (tail + 1e6 * res["rebalance_seconds"])


def test_a_system_without_a_model_stays_in_the_headline_saying_why():
    rows = projection.unmodelled({"tiered": "tiered: 1 measured move(s) with a known cap; need at least 2"})
    assert {(r["case"], r["link_gbit_s"]) for r in rows} == {(c, g) for c in ("partition", "cluster")
                                                            for g in projection.HEADLINE_LINKS_GBIT}
    assert all(r["status"] == "not validated" and r["value_s"] is None and "need at least 2" in r["reason"]
               and r["system_label"] == "tiered storage (Kafka KIP-405)" for r in rows)
