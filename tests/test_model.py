"""bench/analysis/model.py: fits, held-out check and projection on constructed data (exact expectations)."""
from __future__ import annotations

import math

import pytest

from bench.analysis import model as mdl
from bench.analysis.model import MovePoint, fit_linear, fit_model, held_out, project

MiB = 2**20


def copy_pt(size, bw, fixed=0.5, eff=0.8, key=None):
    return MovePoint("replication", key or f"c-{size}-{bw}", fixed + size / (eff * bw), size, size, bw)


def shared_pt(size, tail, bw, fixed=1.5, key=None):
    return MovePoint("shared", key or f"s-{size}", fixed + tail / bw, size, tail, bw)


def test_fit_linear_exact_line_and_standard_errors():
    f = fit_linear([1, 2, 3, 4], [3, 5, 7, 9])
    assert f.intercept == pytest.approx(1.0) and f.slope == pytest.approx(2.0)
    assert f.r2 == pytest.approx(1.0) and f.rmse == pytest.approx(0.0, abs=1e-12)
    assert f.intercept_se == pytest.approx(0.0, abs=1e-9) and f.slope_se == pytest.approx(0.0, abs=1e-9)
    # Known residuals: y = [1, 3, 2, 4] on x = [0, 1, 2, 3] -> slope 0.8, intercept 1.3, sse 1.8
    g = fit_linear([0, 1, 2, 3], [1, 3, 2, 4])
    assert g.slope == pytest.approx(0.8) and g.intercept == pytest.approx(1.3)
    s2 = 1.8 / 2
    assert g.slope_se == pytest.approx(math.sqrt(s2 / 5.0))  # Sxx = 5
    assert g.intercept_se == pytest.approx(math.sqrt(s2 * (1 / 4 + 1.5**2 / 5)))
    with pytest.raises(ValueError):
        fit_linear([1, 1], [2, 3])


def test_copy_model_recovers_fixed_cost_and_efficiency():
    pts = [copy_pt(s, bw) for s in (4 * MiB, 16 * MiB, 64 * MiB) for bw in (4 * MiB, 16 * MiB)]
    m = fit_model(pts, "replication")
    assert m.mode == "normalised" and m.slope_fitted
    assert m.fixed_s == pytest.approx(0.5) and m.efficiency == pytest.approx(0.8)
    assert m.predict(1e12, 125e6) == pytest.approx(0.5 + 1e12 / (0.8 * 125e6))
    assert m.n == 6 and len(m.runs) == 6


def test_copy_model_without_throttle_is_absolute():
    pts = [MovePoint("replication", f"r{i}", 1.0 + s / 50e6, s, s, None) for i, s in enumerate((1e7, 2e7, 4e7))]
    m = fit_model(pts, "replication")
    assert m.mode == "absolute" and m.effective_rate_bytes_per_s == pytest.approx(50e6)
    assert m.predict(1e9, None) == pytest.approx(1.0 + 1e9 / 50e6)
    # A link slower than the measured rate caps it.
    assert m.predict(1e9, 10e6) == pytest.approx(1.0 + 1e9 / 10e6)


def test_shared_model_with_flat_tail_holds_slope_at_one():
    pts = [shared_pt(s, 2 * MiB, 16 * MiB) for s in (4 * MiB, 16 * MiB, 64 * MiB)]
    m = fit_model(pts, "shared")
    assert not m.slope_fitted and m.slope == 1.0
    assert m.fixed_s == pytest.approx(1.5) and m.unuploaded_bytes == 2 * MiB
    assert "held at 1" in " ".join(m.assumptions)


def test_non_positive_slope_is_not_used():
    pts = [MovePoint("shared", "a", 0.42, 1e7, 1e6, None), MovePoint("shared", "b", 0.41, 4e7, 2e6, None)]
    m = fit_model(pts, "shared")
    assert not m.slope_fitted and m.fixed_s == pytest.approx(0.415)
    assert m.predict(2e6, None) == pytest.approx(0.415)


def test_held_out_predicts_largest_size_exactly_on_a_perfect_line():
    pts = [copy_pt(s, bw) for s in (4 * MiB, 16 * MiB, 64 * MiB) for bw in (4 * MiB, 16 * MiB)]
    ho = held_out(pts, "replication")
    assert ho["status"] == "ok" and ho["test_size"] == 64 * MiB
    assert ho["train_sizes"] == [4 * MiB, 16 * MiB]
    assert len(ho["rows"]) == 2 and ho["max_abs_error_pct"] == pytest.approx(0.0, abs=1e-9)
    assert ho["within_target"] is True and ho["target_pct"] == 15.0


def test_held_out_reports_error_percent():
    pts = [copy_pt(s, 4 * MiB) for s in (4 * MiB, 16 * MiB)]
    big = copy_pt(64 * MiB, 4 * MiB)
    slow = MovePoint("replication", "slow", big.move_seconds * 1.25, big.partition_bytes, big.bytes_to_travel,
                     big.bandwidth_bytes_per_s)
    ho = held_out(pts + [slow], "replication")
    assert ho["rows"][0]["error_pct"] == pytest.approx((1 / 1.25 - 1) * 100)  # -20 %
    assert ho["within_target"] is False


def test_held_out_needs_two_sizes():
    ho = held_out([copy_pt(4 * MiB, 4 * MiB)], "replication")
    assert ho["status"] == "insufficient"
    ho = held_out([copy_pt(4 * MiB, 4 * MiB), copy_pt(16 * MiB, 4 * MiB)], "replication")
    assert ho["status"] == "insufficient"  # one size left to fit on: no slope


def test_projection_sizes_links_and_8_2_tb_over_1_gbit():
    copy = fit_model([copy_pt(s, bw, fixed=0.0, eff=1.0) for s in (1e7, 4e7) for bw in (4e6, 16e6)], "replication")
    shared = fit_model([shared_pt(s, 5e6, 16e6) for s in (1e7, 4e7)], "shared")
    rows = project({"replication": copy, "shared": shared})
    assert len(rows) == 2 * 2 * 4
    r = next(x for x in rows if x["system"] == "replication" and x["size_label"] == "8.2 TB" and x["link_gbit_s"] == 1)
    assert r["move_seconds"] == pytest.approx(8.2e12 / 125e6)  # 65,600 s ~ 18.2 h (the design note's figure)
    assert r["move_time"] == "18.2 h" and r["bytes_moved"] == 8.2e12
    s1 = next(x for x in rows if x["system"] == "shared" and x["size_label"] == "8.2 TB" and x["link_gbit_s"] == 1)
    s2 = next(x for x in rows if x["system"] == "shared" and x["size_label"] == "1 GB" and x["link_gbit_s"] == 1)
    assert s1["move_seconds"] == pytest.approx(1.5 + 5e6 / 125e6) == s2["move_seconds"]
    assert s1["bytes_moved"] == 5e6
    assert all(x["based_on_runs"] for x in rows)


def test_human_seconds():
    assert mdl.human_seconds(65600) == "18.2 h" and mdl.human_seconds(0.25) == "250 ms"


def test_a_family_without_a_model_is_refused(monkeypatch):
    from dataclasses import replace

    from systems import registry

    monkeypatch.setitem(registry.PROFILES, "tiered", replace(registry.PROFILES["replication"], name="tiered",
                                                              move_model="tiered"))
    with pytest.raises(ValueError, match="no move-time model for the 'tiered' family"):
        fit_model([MovePoint("tiered", "t", 1.0, 1e6, 1e6, None)], "tiered")
