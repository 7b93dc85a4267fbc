"""bench/analysis/projection.py without Spark: what may be projected, and the headline's rule
that a model without a passing held-out check shows "not validated" and never a number."""
from __future__ import annotations

import math

import pytest

from dataclasses import replace

from bench.analysis import model as mdl
from bench.analysis import projection
from bench.analysis.model.budget import LinkBudget
from tests.unit.test_model import MiB, copy_pt, shared_pt, tiered_pt


def _copy(sizes=(1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB)):
    pts = [copy_pt(s, key=f"{s}-{k}") for s in sizes for k in range(3)]
    pts += [copy_pt(16 * MiB, th, rate, key=f"{th}-{rate}") for th in (2.5e6, 3.75e6, 6.25e6) for rate in (50, 100, 200)]
    return pts


def _sims(models):
    return [{"system": s, "headline": True, "link_gbit_s": g, "rebalance_seconds": 1234.0, "bytes_moved": 1e14,
             "moves": 900} for s in models for g in projection.HEADLINE_LINKS_GBIT]


GBIT = 125e6


def _budget_pt(pt, link=GBIT, rf=3, **extra):
    """``pt`` moved without a throttle on a ``link``: what the link leaves after replication caps
    it (the budget check's moves)."""
    fam = mdl.family_of(pt.system)
    r = mdl.nominal_ingest(pt)
    b = LinkBudget(link, tuple(fam.steady_terms(r, rf, 0)))
    cap = b.cap(None)
    t = pt.move_seconds - pt.move_seconds + 0.8 + pt.partition_bytes / (0.85 * cap - r)
    prm = dict(pt.params, replication_throttle_bytes_per_s=None, link_rate=f"{link * 8 / 1e6:g}mbit", **extra)
    return replace(pt, run_key=pt.run_key + "-budget", move_seconds=t, cap_bytes_per_s=cap,
                   params=tuple(sorted(prm.items())), link_demand=(b.steady + link) / link)


def _production_copy():
    """Copies at production-like rates (20-50 MB/s throttles on a 1 Gbit/s link) and unthrottled
    ones the link budget caps: every check the headline needs, within every bound at 10 Gbit/s."""
    def pt(size, th, rate, key):
        p = copy_pt(size, th, rate, key=key)
        return replace(p, params=tuple(sorted(dict(p.params, link_rate="1000mbit").items())),
                       link_demand=(2 * rate * 4096.0 + th) / GBIT)
    pts = [pt(s, 40e6, 200, f"{s}-{k}") for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB) for k in range(3)]
    pts += [pt(16 * MiB, th, rate, f"{th}-{rate}") for th in (20e6, 30e6, 50e6) for rate in (1000, 2000, 4000)]
    pts += [_budget_pt(pt(64 * MiB, 40e6, 200, f"b{k}")) for k in range(3)]
    return pts


def test_steady_traffic_that_fills_the_link_is_infeasible_with_the_arithmetic():
    pts = _production_copy()
    m = mdl.fit_model([p for p in pts if not p.link_demand or p.link_demand < 1], "replication")
    v = projection.validity("replication", mdl.validate(pts, "replication"))
    r1 = projection.partition_case("replication", m, v, 1.0, 8.2e12, "8.2 TB", mdl.validate(pts, "replication"))
    assert r1["status"] == "infeasible" and r1["move_seconds"] is None and r1["bytes_moved"] is None
    # 2 followers x 100 MB/s + 1 group x 100 MB/s = 300 MB/s >= 125 MB/s
    assert "replication to 2 followers 200 MB/s" in r1["reason"] and "300 MB/s >= its 125 MB/s link" in r1["reason"]
    b = LinkBudget(125e6, (("a", 100e6), ("b", 25e6)))
    # the link carries its rate less the TCP/IP and Ethernet headers as payload (1448 of 1514 bytes)
    assert b.infeasible and LinkBudget(125e6, (("a", 100e6),)).cap(None) == pytest.approx(125e6 * 1448 / 1514 - 100e6)
    assert LinkBudget(125e6, (("a", 120e6),)).infeasible  # below the link's rate, above its payload
    assert LinkBudget(125e6, (("a", 100e6),)).cap(10e6) == 10e6 and not LinkBudget(None, ()).infeasible


def test_a_validated_copy_model_projects_the_article_partition_with_its_validity_domain():
    pts = _production_copy()
    val = mdl.validate(pts, "replication")
    budget = [x for x in val if x["axis"] == "budget"]
    assert budget and all(x["status"] == "ok" for x in budget)
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "replication")
    v = projection.validity("replication", val)
    assert v.validated and {"size", "throttle", "ingest"} <= set(v.axes) and v.error_pct < 1e-3, v
    rows = projection.table_rows({"replication": m}, {"replication": v}, val)
    r10 = next(r for r in rows if r["size_label"] == "8.2 TB" and r["link_gbit_s"] == 10.0)
    # the leader's 1250 MB/s less 200 MB/s to its followers and 100 MB/s to its readers
    left = 1.25e9 * 1448 / 1514 - 300e6  # the 10 Gbit/s link's TCP payload less replication and reads
    assert r10["status"] == "validated" and r10["cap_bytes_per_s"] == pytest.approx(left)
    assert r10["move_seconds"] == pytest.approx(0.8 + 8.2e12 / (0.85 * left - 100e6), rel=1e-3)
    assert r10["bytes_moved"] == pytest.approx(8.2e12 + 100e6 * (r10["move_seconds"] - 0.8), rel=1e-6)
    rate = r10["validity"]["rate"]
    # the largest held-out rate is the budget check's: 125 MB/s of link (its TCP payload) less
    # 2 x 0.82 MB/s of replication
    assert rate["held_out_max"] == pytest.approx(125e6 * 1448 / 1514 - 2 * 200 * 4096.0)
    assert rate["factor"] == pytest.approx(left / rate["held_out_max"]) and rate["within"]
    assert r10["validity"]["bytes"]["factor"] > 1e4 and "extrapolated" in r10["validity_text"]


def test_a_projection_beyond_an_axis_bound_reads_not_validated_extrapolation():
    pts = _copy() + [_budget_pt(copy_pt(64 * MiB, key=f"b{k}"), link=12.5e6) for k in range(3)]
    val = mdl.validate(pts, "replication")
    m = mdl.fit_model(_copy(), "replication")
    v = projection.validity("replication", val)
    assert v.validated
    r10 = projection.partition_case("replication", m, v, 10.0, 8.2e12, "8.2 TB", val)
    assert r10["status"] == "not validated" and r10["move_seconds"] is None
    assert r10["reason"].startswith("extrapolation: the move's rate 896 MB/s is") and "(bound 30x)" in r10["reason"]


def test_ingest_beyond_the_copy_rate_never_finishes():
    pts = _production_copy()
    val = mdl.validate(pts, "replication")
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "replication")
    v = projection.validity("replication", val)
    never = projection.partition_case("replication", m, v, 3.0, 8.2e12, "8.2 TB", val)  # 59 MB/s left
    assert never["never"] and never["move_seconds"] is None and never["validated"]
    h = projection.headline({"replication": m}, {"replication": v}, _sims({"replication": m}), {"replication": v}, val)
    assert {(x["case"], x["link_gbit_s"]): x["status"] for x in h} == {
        ("partition", 1.0): "infeasible", ("partition", 10.0): "validated", ("partition", 25.0): "validated",
        ("cluster", 1.0): "infeasible", ("cluster", 10.0): "validated", ("cluster", 25.0): "validated"}


def test_a_broken_fit_of_one_size_is_not_validated_and_shows_no_number():
    one = [copy_pt(8 * MiB, key=f"k{i}") for i in range(3)]
    one += [copy_pt(8 * MiB, 4e6, key="t")]  # a second throttle: the model can be fitted, not validated
    m = mdl.fit_model(one, "replication")
    val = mdl.validate(one, "replication")
    v = projection.validity("replication", val)
    assert not v.validated and "size" in v.reason and v.error_pct is None
    h = projection.headline({"replication": m}, {"replication": v}, _sims({"replication": m}), {"replication": v})
    assert h and all(x["status"] in ("not validated", "infeasible") and x["value_s"] is None
                     and x["value_text"] is None and x["bytes_moved"] is None and x["reason"] for x in h)
    rows = projection.table_rows({"replication": m}, {"replication": v})
    assert all(r["move_seconds"] is None and r["move_time"] in ("not validated", "infeasible") for r in rows)


def test_a_failed_check_blocks_the_projection_with_its_error():
    val = [{"system": "shared", "axis": "size", "status": "failed", "error_pct": 41.0, "target_pct": 30.0,
            "label": "4 GiB", "reason": "|error| 41.0 % > 30 %"},
           {"system": "shared", "axis": "size", "status": "ok", "error_pct": 3.0, "target_pct": 30.0, "label": "1 GiB"}]
    v = projection.validity("shared", val)
    assert not v.validated and "4 GiB" in v.reason and "+41.0 %" in v.reason


def _production_shared(big_objects=20_000, big_tail=60e6):
    """Handovers on a 1 Gbit/s link (100 MB/s upload cap) whose largest held-out move has a
    ``big_tail`` and ``big_objects``, and unthrottled ones the link budget caps."""
    def pt(size, tail, n, cap=100e6, key=None, demand=None):
        p = shared_pt(size, tail, objects=n, per_obj=2e-5, cap=cap, key=key)
        return replace(p, params=tuple(sorted(dict(p.params, link_rate="1000mbit").items())),
                       link_demand=demand if demand is not None else (2 * 0.8192e6 + cap) / GBIT)
    pts = [pt(s, tail, n) for s, tail, n in ((1 * MiB, 3e6, 1), (8 * MiB, 10e6, 2), (32 * MiB, 2e6, 5),
                                             (64 * MiB, big_tail, big_objects))]
    left = GBIT - 2 * 0.8192e6  # the WAL and the uploads of 0.82 MB/s
    pts += [pt(64 * MiB, 50e6, 9, cap=left, key=f"b{k}", demand=(GBIT - left + GBIT) / GBIT) for k in range(2)]
    return pts


def test_the_cluster_case_also_needs_a_passing_rebalance_check():
    pts = _production_shared()
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "shared")
    val = mdl.validate(pts, "shared")
    v = projection.validity("shared", val)
    sv = projection.validity("shared", val, ("rebalance",))
    assert v.validated and not sv.validated and "rebalance" in sv.reason
    h = projection.headline({"shared": m}, {"shared": v}, _sims({"shared": m}), {"shared": sv}, val)
    part = {x["link_gbit_s"]: x for x in h if x["case"] == "partition"}
    clus = [x for x in h if x["case"] == "cluster"]
    # the owner's WAL, uploads and one group's reads: 300 MB/s, more than a 1 Gbit/s link
    assert part[1.0]["status"] == "infeasible" and "300 MB/s >= its 125 MB/s link" in part[1.0]["reason"]
    assert all(part[g]["status"] == "validated" and math.isfinite(part[g]["value_s"]) for g in (10.0, 25.0))
    assert all(x["status"] in ("not validated", "infeasible") and x["value_s"] is None for x in clus)


def test_a_shared_open_far_beyond_the_measured_objects_is_not_projected():
    pts = _production_shared(big_objects=1_000)
    val = mdl.validate(pts, "shared")
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "shared")
    v = projection.validity("shared", val)
    assert v.validated
    small = projection.partition_case("shared", m, v, 10.0, 1e9, "1 GB", val)  # 15 objects of 64 MiB
    big = projection.partition_case("shared", m, v, 10.0, 8.2e12, "8.2 TB", val)  # 122,190 objects
    assert small["validated"] and small["move_seconds"] > 0
    assert not big["validated"] and big["move_seconds"] is None
    assert "objects opened 122,190 is 122x the largest held-out 1,000 (bound 10x)" in big["reason"]


def _tiered(throttles=(2.5e6, 3.75e6, 6.25e6), rates=(50, 100, 200), link="100mbit"):
    pts = [tiered_pt(s, 12 * MiB, link_rate=link, key=f"{s}-{k}") for s in (64 * MiB, 512 * MiB) for k in range(2)]
    pts += [tiered_pt(128 * MiB, 20 * MiB, th, rate, link_rate=link, key=f"{th}-{rate}") for th in throttles
            for rate in rates]
    return pts


def production_tiered():
    link = GBIT
    pts = [replace(p, link_demand=(3 * mdl.nominal_ingest(p) + p.cap_bytes_per_s) / link)
           for p in _tiered((20e6, 30e6, 50e6), (1000, 2000, 4000), "1000mbit")]
    for k in range(2):  # unthrottled: the link less 2 followers' replication and the uploads
        p = tiered_pt(128 * MiB, 20 * MiB, 40e6, 1000, link_rate="1000mbit", key=f"b{k}")
        r = mdl.nominal_ingest(p)
        cap = link - 3 * r
        t = 1.2 + p.copy_bytes / (0.8 * cap - r)
        prm = dict(p.params, replication_throttle_bytes_per_s=None)
        pts.append(replace(p, move_seconds=t, cap_bytes_per_s=cap, params=tuple(sorted(prm.items())),
                           link_demand=(3 * r + link) / link))
    return pts


def test_a_tiered_partition_copies_only_what_is_not_tiered():
    # KIP-1023: the open 1 GiB segment + 30 s of ingest awaiting upload; KIP-405: 1 h of ingest + a segment
    assert projection.tiered_copy_bytes(8.2e12, 100e6) == pytest.approx(2**30 + 100e6 * 30)
    assert projection.tiered_copy_bytes(8.2e12, 100e6, last_tiered=False) == pytest.approx(100e6 * 3600 + 2**30)
    assert projection.tiered_copy_bytes(1e9, 100e6) == 1e9  # a partition smaller than its tail is copied whole


def test_a_tiered_model_projects_from_its_throttle_and_ingest_checks():
    pts = production_tiered()
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "tiered")
    val = mdl.validate(pts, "tiered")
    v = projection.validity("tiered", val)
    assert v.validated and {"throttle", "ingest"} <= set(v.axes), v
    rows = projection.table_rows({"tiered": m}, {"tiered": v}, val)
    cap = 1250e6 * 1448 / 1514 - 400e6  # TCP payload less 2 followers, one group's reads and the uploads
    # 1 GB: smaller than the local tail, copied whole (no assumption about what is tiered)
    r1 = next(r for r in rows if r["size_label"] == "1 GB" and r["link_gbit_s"] == 10.0)
    assert r1["status"] == "validated", r1["reason"]
    assert r1["move_seconds"] == pytest.approx(1.2 + 1e9 / (0.8 * cap - 100e6), rel=1e-3)
    assert r1["bytes_moved"] == pytest.approx(1e9 + 100e6 * (r1["move_seconds"] - 1.2), rel=1e-6)
    # 8.2 TB: the new replica copies only the assumed local tail: not validated, and says so
    r10 = next(r for r in rows if r["size_label"] == "8.2 TB" and r["link_gbit_s"] == 10.0)
    assert r10["status"] == "not validated" and "assumption" in r10["reason"] and r10["move_seconds"] is None
    assert "KIP-1023" in r10["basis"] and "L = min(8.2 TB" in r10["basis"]
    # without its throttle and ingest checks it is not validated, and says what to run
    only_size = pts[:4]
    v2 = projection.validity("tiered", mdl.validate(only_size, "tiered"))
    assert not v2.validated and "sweep-tiered" in v2.reason


def test_the_headline_cluster_s_moves_are_judged_as_a_partition_case_is():
    # a scale-out's partition (100 GB at 1 MB/s) rests on the same axes and assumptions as the
    # article's: the tiered copy of what is not tiered stays an assumption even with a rebalance check
    pts = production_tiered()
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "tiered")
    val = mdl.validate(pts, "tiered")
    v = projection.validity("tiered", val)
    rebalance = {"system": "tiered", "axis": "rebalance", "status": "ok", "error_pct": 5.0, "target_pct": 20.0}
    sv = projection.validity("tiered", val + [rebalance], ("rebalance",))
    assert sv.validated
    h = projection.headline({"tiered": m}, {"tiered": v}, _sims({"tiered": m}), {"tiered": sv}, val + [rebalance])
    c10 = next(x for x in h if x["case"] == "cluster" and x["link_gbit_s"] == 10.0)
    assert c10["status"] == "not validated" and "assumption" in c10["reason"] and c10["value_s"] is None
    assert c10["validity"] and c10["validity_text"]  # per axis: measured range, extrapolation
    # the copy's cluster, validated, carries its moves' validity domain
    pts = _production_copy()
    val = mdl.validate(pts, "replication")
    m = mdl.fit_model([p for p in pts if p.link_demand < 1], "replication")
    v = projection.validity("replication", val)
    h = projection.headline({"replication": m}, {"replication": v}, _sims({"replication": m}), {"replication": v}, val)
    c10 = next(x for x in h if x["case"] == "cluster" and x["link_gbit_s"] == 10.0)
    assert c10["status"] == "validated" and c10["value_s"] > 0 and "rate" in c10["validity"], c10


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


def test_a_move_s_link_is_the_one_in_force_on_its_brokers_at_the_request():
    # one rule (HistoryView.link_rate_at) for the models' moves and the summary's
    from bench.analysis.aggregate.discovery import StoredRun
    from bench.check.view import HistoryView
    from bench.history.store import event_row, to_table

    def step(ts, broker, rate):
        return event_row("action_start", ts, {"action": "set_link_rate", "node": f"broker-{broker}", "rate": rate})
    rows = [step(10.0, b, "200mbit") for b in (1, 2, 3, 4)] + [step(20.0, 1, "1gbit"), step(20.0, 4, "1gbit")]
    view = HistoryView(to_table(rows))
    r = StoredRun(0, "k", None, {"params": {"link_rate": "100mbit", "brokers": 4}}, [], view=view)
    assert r.link_at(5.0) == "100mbit" and r.link_at(12.0, {1, 4}) == "200mbit"
    assert r.link_at(25.0, {1, 4}) == "1gbit" and r.link_at(25.0, {1, 2}) == "200mbit"
    assert r.link_at(25.0) == "200mbit"  # every broker's: the lowest
    assert view.link_rate_at(25.0, "100mbit", range(1, 5)) == "200mbit"
    assert StoredRun(1, "k", None, {"params": {}}, [], view=view).link_at(25.0) is None  # no emulated link


def test_a_results_folder_of_two_commits_projects_with_the_newest():
    from bench.analysis.aggregate.discovery import StoredRun
    from bench.analysis.aggregate.fits import newest_version, run_version

    def run(key, commit, started, dirty=False):
        return StoredRun(0, key, None, {"system": "replication", "started_at": started,
                                        "provenance": {"git": {"commit": commit, "dirty": dirty}}}, [])
    runs = [run("a", "aaa", "2026-11-20T10:00:00+00:00"), run("b", "bbb", "2026-11-26T10:00:00+00:00"),
            run("c", "ccc", "2026-11-27T10:00:00+00:00", dirty=True)]
    assert [run_version(r.summary) for r in runs] == ["aaa", "bbb", "ccc+dirty"]
    pts = [replace(copy_pt(8 * MiB), version=v) for v in ("aaa", "bbb")]  # no move of ccc's run fits
    assert newest_version(runs, "replication", pts) == "bbb"
    assert run_version({}) is None


def test_the_budget_check_pools_the_ingest_rates_into_one_median():
    """The ingest is an input of a budget prediction (it sets the steady traffic), so moves at
    several rates form one family: one check, its median over every rate's moves."""
    thr = [copy_pt(s, 6.25e6, rate, key=f"t{s}-{rate}") for s in (8 * MiB, 32 * MiB) for rate in (50, 100)]
    link = [_budget_pt(copy_pt(32 * MiB, 6.25e6, rate, key=f"l{rate}-{k}"), link=12.5e6)
            for rate in (50, 100) for k in range(2)]
    [c] = [v for v in mdl.validate(thr + link, "replication", axes=("budget",)) if v["status"] != "insufficient"]
    assert c["status"] == "ok" and c["n_train"] == 4 and c["n_test"] == 4 and "ingest" not in c["label"], c
    assert c["error_pct"] == pytest.approx(0.0, abs=1e-6)


def test_an_inconclusive_check_neither_validates_nor_fails_its_axis():
    unsure = {"system": "shared", "axis": "size", "status": "inconclusive", "error_pct": -35.0, "target_pct": 30.0,
              "label": "32 MiB", "reason": "|error| 35.0 % > 30 %, but ... within the noise of the held-out median"}
    v = projection.validity("shared", [unsure])
    assert not v.validated and "no passing held-out size check" in v.reason and "noise" in v.reason
    ok = dict(unsure, status="ok", error_pct=-10.0, reason=None)
    v = projection.validity("shared", [unsure, ok])
    assert v.validated and v.error_pct == pytest.approx(10.0)


def test_a_backlog_below_the_untiered_relation_s_measured_ones_is_extrapolation():
    """The cluster's 1 MB/s partitions (backlog 0.028 segments of 1 GiB) rest on the relation's
    intercept, measured at backlogs 1.43-2.86: 51x below, beyond the 10x bound; the article's
    partition (2.79) lies within."""
    pts = [tiered_pt(s, 4 * MiB, key=f"t{s}") for s in (1 * MiB, 8 * MiB, 32 * MiB)]
    m = replace(mdl.fit_model(pts, "tiered"), untiered={"a": 0.5, "b": 0.5, "backlog": [1.43, 2.86]})
    check = {"system": "tiered", "axis": "untiered", "status": "ok", "error_pct": 3.6, "label": "backlog 2.86",
             "test_domain": {"untiered": [2.86, 2.86]}, "fit": {"version": m.version}}
    low = projection.domain("tiered", m, [check], {"untiered": 0.028})["untiered"]
    assert low["below"] and low["factor"] == pytest.approx(1.43 / 0.028) and not low["within"]
    assert "below the smallest measured 1.43" in projection.extrapolation_reason({"untiered": low})
    art = projection.domain("tiered", m, [check], {"untiered": 2.79})["untiered"]
    assert not art["below"] and art["within"] and projection.extrapolation_reason({"untiered": art}) is None
