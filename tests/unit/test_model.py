"""bench/analysis/model/: the physics fits, their held-out checks and what cannot be validated,
on constructed moves with exact (or seeded-noise) expectations."""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

import pytest

from bench.analysis import model as mdl
from bench.analysis.model import MovePoint, fit_linear, fit_model, validate

MiB = 2**20
LINK = "100mbit"


def params(size, throttle=6.25e6, rate=200, **extra):
    p = {"prefill_bytes_per_partition": size, "replication_throttle_bytes_per_s": throttle,
         "produce_rate_msgs_per_s": rate, "message_bytes": 4096, "partitions": 1, "link_rate": LINK, "brokers": 4,
         "duration_s": 22, **extra}
    return tuple(sorted(p.items()))


def copy_pt(size, throttle=6.25e6, rate=200, c=0.8, e=0.85, noise=0.0, rng=None, key=None, pre_s=3.0):
    r = rate * 4096.0
    B = size + r * pre_s
    t = c + B / (e * throttle - r)
    if noise:
        t *= 1 + rng.gauss(0, noise)
    return MovePoint("replication", key or f"c-{size}-{throttle}-{rate}-{rng.random() if rng else 0}", t, B, throttle,
                     r, params=params(size, throttle, rate), link_demand=(2 * r + throttle) / 12.5e6)


def tiered_pt(size, tail, throttle=6.25e6, rate=200, c=1.2, e=0.8, key=None, named=True, **extra):
    """A tiered move: the leader names ``tail`` bytes to copy (``named`` False: it never answered,
    the whole log was local, and the partition is what was copied)."""
    r = rate * 4096.0
    B = size + r * 3.0
    L = min(B, tail) if named else B
    t = c + L / (e * throttle - r)
    return MovePoint("tiered", key or f"t-{size}-{throttle}-{rate}", t, B, throttle, r,
                     params=params(size, throttle, rate, **extra), copy_bytes=L if named else None)


def shared_pt(size, tail, objects=4, c=0.9, u=0.9, per_obj=0.002, cap=12.5e6, key=None, **extra):
    t = c + tail / (u * cap) + per_obj * objects
    return MovePoint("shared", key or f"s-{size}-{tail}-{objects}", t, size, cap, 0.8e6, tail, objects,
                     0.05 + per_obj * objects, params(size, throttle=None, **extra))


def test_fit_linear_exact_line_and_standard_errors():
    f = fit_linear([1, 2, 3, 4], [3, 5, 7, 9])
    assert f.intercept == pytest.approx(1.0) and f.slope == pytest.approx(2.0)
    g = fit_linear([0, 1, 2, 3], [1, 3, 2, 4])  # slope 0.8, intercept 1.3, sse 1.8
    assert g.slope == pytest.approx(0.8) and g.intercept == pytest.approx(1.3)
    assert g.slope_se == pytest.approx(math.sqrt(1.8 / 2 / 5.0))
    with pytest.raises(ValueError):
        fit_linear([1, 1], [2, 3])


def test_copy_fit_recovers_the_physics_with_ingest():
    pts = [copy_pt(s, th, rate) for s in (4 * MiB, 32 * MiB) for th in (2.5e6, 6.25e6) for rate in (50, 200)]
    m = fit_model(pts, "replication")
    assert m.family == mdl.COPY.name == "copy" and m.kind is mdl.COPY
    assert m.fixed_s == pytest.approx(0.8, abs=1e-4) and m.efficiency == pytest.approx(0.85, rel=1e-4)
    assert m.fixed_se == pytest.approx(0, abs=1e-6)  # a perfect fit: no residual
    # bytes moved = B + r * (t - c); a copy slower than its ingest never ends
    t = m.predict(1e9, 125e6, 50e6)
    assert t == pytest.approx(0.8 + 1e9 / (0.85 * 125e6 - 50e6), rel=1e-4)
    assert m.bytes_moved(1e9, t, 50e6) == pytest.approx(1e9 + 50e6 * (t - 0.8), rel=1e-6)
    assert m.predict(1e9, 125e6, 110e6) == math.inf


def test_copy_fit_with_noise_has_standard_errors():
    rng = random.Random(3)
    pts = [copy_pt(s, noise=0.03, rng=rng) for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB) for _ in range(3)]
    m = fit_model(pts, "replication")
    assert m.efficiency == pytest.approx(0.85, rel=0.05)
    assert m.fixed_se is not None and m.efficiency_se is not None and m.efficiency_se < 0.05
    assert m.n == 12 and len(m.runs) == 12
    t, se = m.predict_with_se(1e10, 125e6, 1e6)
    assert se is not None and 0 < se < t


def test_handover_fit_subtracts_the_measured_open_cost():
    pts = [shared_pt(s, tail, objects=n) for s, tail, n in
           ((1 * MiB, 3e6, 1), (8 * MiB, 10e6, 2), (32 * MiB, 2e6, 5), (64 * MiB, 6e6, 9), (4096 * MiB, 5e6, 1000))]
    m = fit_model(pts, "shared")
    assert m.kind is mdl.HANDOVER and m.efficiency_fitted
    assert m.open_per_object_s == pytest.approx(0.002, rel=1e-6) and m.open_objects_max == 1000
    assert m.efficiency == pytest.approx(0.9, rel=1e-6) and m.fixed_s == pytest.approx(0.9, abs=1e-6)
    assert m.predict(1e12, 125e6, 0, 512 * MiB, 10_000) == pytest.approx(0.9 + 512 * MiB / (0.9 * 125e6) + 20.0)


def test_tail_grows_with_ingest_up_to_the_threshold():
    assert mdl.tail_bytes(1e6, 512 * MiB, 10) == 1e7
    assert mdl.tail_bytes(100e6, 512 * MiB, 10) == 512 * MiB


def test_size_check_fits_on_smaller_sizes_spanning_8x():
    rng = random.Random(1)
    pts = [copy_pt(s, noise=0.02, rng=rng) for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB) for _ in range(3)]
    checks = [v for v in validate(pts, "replication") if v["axis"] == "size"]
    assert len(checks) == 1  # 32 MiB cannot be checked (1 and 8 MiB span < 8x); 64 MiB can
    v = checks[0]
    assert v["status"] == "ok" and v["held_out"] == {"size": 64 * MiB} and abs(v["error_pct"]) < 15
    assert v["train_values"] == [1 * MiB, 8 * MiB, 32 * MiB] and v["train_span"] >= 8
    assert not set(v["train_runs"]) & set(v["test_runs"])  # no repetition of the held-out size in training


def test_a_held_out_size_the_model_misses_fails():
    pts = [copy_pt(s) for s in (1 * MiB, 8 * MiB, 32 * MiB)]
    big = copy_pt(64 * MiB)
    slow = MovePoint(big.system, "slow", big.move_seconds * 1.25, big.partition_bytes, big.cap_bytes_per_s,
                     big.ingest_bytes_per_s, params=big.params)
    v = next(v for v in validate(pts + [slow], "replication") if v["axis"] == "size")
    assert v["status"] == "failed" and v["error_pct"] == pytest.approx((1 / 1.25 - 1) * 100, rel=1e-4)


def test_one_size_only_is_insufficient():
    pts = [copy_pt(8 * MiB, key=f"k{i}") for i in range(3)]
    v = validate(pts, "replication")
    assert [x["status"] for x in v] == ["insufficient"] and "size check needs 4" in v[0]["reason"]


def test_sizes_spanning_less_than_8x_are_insufficient():
    pts = [copy_pt(s) for s in (16 * MiB, 24 * MiB, 32 * MiB, 64 * MiB)]
    v = [x for x in validate(pts, "replication") if x["axis"] == "size"]
    assert v[-1]["status"] == "insufficient" and "need 8x" in v[-1]["reason"]


def test_throttle_and_ingest_checks_hold_out_the_largest_value_per_family():
    pts = [copy_pt(16 * MiB, th, rate, key=f"{th}-{rate}-{k}") for th in (2.5e6, 3.75e6, 6.25e6)
           for rate in (50, 100, 200) for k in range(2)]
    v = validate(pts, "replication", axes=("throttle", "ingest"))
    th = [x for x in v if x["axis"] == "throttle"]
    ing = [x for x in v if x["axis"] == "ingest"]
    assert len(th) == 3 and all(x["held_out"] == {"throttle": 6.25e6} and x["status"] == "ok" for x in th)
    assert len(ing) == 3 and all(x["held_out"] == {"ingest": 200 * 4096.0} for x in ing)
    assert all(abs(x["error_pct"]) < 1e-3 for x in th + ing)


def test_families_differ_by_every_other_setting():
    a = copy_pt(8 * MiB)
    b = MovePoint(a.system, "b", a.move_seconds, a.partition_bytes, a.cap_bytes_per_s, a.ingest_bytes_per_s,
                  params=params(8 * MiB, brokers=5))
    assert mdl.family_key(a, "size") != mdl.family_key(b, "size")
    c = MovePoint(a.system, "c", a.move_seconds, a.partition_bytes, a.cap_bytes_per_s, a.ingest_bytes_per_s,
                  params=params(64 * MiB, duration_s=40))  # the load's duration never splits a family
    assert mdl.family_key(a, "size") == mdl.family_key(c, "size")


def test_the_held_out_moves_own_opens_never_fit_the_open_cost():
    small = [shared_pt(s, tail, objects=2, key=f"s{s}") for s, tail in ((1 * MiB, 3e6), (8 * MiB, 10e6), (32 * MiB, 2e6))]
    # the large size's opens cost far more per object than the small ones say: if they leaked into
    # the open-cost fit the prediction would match; held out, it must not
    big = [shared_pt(4096 * MiB, 5e6, objects=1000, per_obj=0.01, key="big")]
    v = next(x for x in validate(small + big, "shared", open_points=small + big) if x["axis"] == "size")
    assert v["status"] == "failed" and v["predicted_s"] < v["measured_s"]


def test_human_seconds():
    assert mdl.human_seconds(65600) == "18.2 h" and mdl.human_seconds(0.25) == "250 ms"
    assert mdl.human_seconds(math.inf) == "never"


def test_a_family_without_a_model_is_refused(monkeypatch):
    from dataclasses import replace

    from systems import registry

    monkeypatch.setitem(registry.PROFILES, "teleport", replace(registry.PROFILES["replication"], name="teleport",
                                                                move_model="teleport"))
    with pytest.raises(ValueError, match="no move-time model for the 'teleport' family"):
        fit_model([MovePoint("teleport", "t", 1.0, 1e6, 1e6)], "teleport")


def test_the_client_ack_lag_is_its_median_in_the_fixed_cost():
    """Fitted on request -> leader change; leader change -> first ack (noisy) enters c as its median."""
    rng = random.Random(4)
    pts = []
    for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB):
        for k in range(3):
            p = copy_pt(s, key=f"{s}-{k}")
            lag = 0.2 + rng.choice((0.0, 0.1, 0.8))  # a reconnect now and then
            pts.append(MovePoint(p.system, p.run_key, p.move_seconds + lag, p.partition_bytes, p.cap_bytes_per_s,
                                 p.ingest_bytes_per_s, params=p.params, elect_seconds=p.move_seconds))
    m = fit_model(pts, "replication")
    lags = sorted(x.move_seconds - x.elect_seconds for x in pts)
    assert m.efficiency == pytest.approx(0.85, rel=1e-4)  # the bytes' share is exact despite the lag noise
    assert m.fixed_s == pytest.approx(0.8 + statistics.median(lags), rel=1e-4)
    assert "ack lag" in " ".join(m.assumptions)


def test_the_tiered_copy_fits_the_copy_physics_over_the_bytes_its_leader_named():
    """t = c + L / (e*T - r) with L the local tail, not the partition: one fitting code with the copy."""
    pts = [tiered_pt(s, 12 * MiB, th, rate) for s in (64 * MiB, 1024 * MiB) for th in (2.5e6, 6.25e6)
           for rate in (50, 200)]
    m = fit_model(pts, "tiered")
    assert m.kind is mdl.TIERED_COPY and m.kind.copies and mdl.family_of("tiered") is mdl.TIERED_COPY
    assert m.fixed_s == pytest.approx(1.2, abs=1e-4) and m.efficiency == pytest.approx(0.8, rel=1e-4)
    assert m.formula().startswith("t = 1.2 s + L / (0.8 x T - r)")
    assert mdl.TIERED_COPY.target_pct == 30.0 and mdl.COPY.target_pct == 15.0
    # a move whose leader never named a start copied its whole log
    whole = tiered_pt(4 * MiB, 12 * MiB, named=False)
    assert whole.copy_bytes is None and mdl.TIERED_COPY.bytes_of(whole) == whole.partition_bytes
    assert mdl.predict_point(m, whole) == pytest.approx(whole.move_seconds, rel=1e-6)


def test_a_tiered_size_check_says_the_copy_does_not_grow_with_the_size():
    """Sizes 64 MiB .. 1 GiB all copy a ~12 MiB tail: the size check is insufficient and says why;
    the throttle check identifies the bytes' rate and passes."""
    pts = [tiered_pt(s, 12 * MiB + k * MiB, key=f"{s}-{k}") for s in (64 * MiB, 128 * MiB, 512 * MiB, 1024 * MiB)
           for k in range(3)]
    pts += [tiered_pt(128 * MiB, 12 * MiB, th, key=f"th-{th}-{k}") for th in (2.5e6, 3.75e6, 6.25e6) for k in range(2)]
    val = validate(pts, "tiered")
    size = [v for v in val if v["axis"] == "size"]
    assert size and all(v["status"] == "insufficient" for v in size)
    assert any("bytes to copy" in v["reason"] and "only the part not in object storage is copied" in v["reason"]
               for v in size), size
    thr = [v for v in val if v["axis"] == "throttle"]
    assert thr and all(v["status"] == "ok" for v in thr) and abs(thr[0]["error_pct"]) < 1e-3


# --- the rules a check cannot break (issue 29) ---------------------------------------------


def test_a_fit_whose_training_set_holds_the_held_out_value_is_refused():
    pts = [copy_pt(s, key=f"{s}") for s in (1 * MiB, 8 * MiB, 32 * MiB, 64 * MiB)]
    with pytest.raises(mdl.FitRefused, match="at or beyond the held-out size"):
        fit_model(pts, "replication", held_out=("size", 64 * MiB))
    # strictly smaller values only: the same points less the held-out one fit
    assert fit_model(pts[:3], "replication", held_out=("size", 64 * MiB)).n == 3
    # every check of validate() obeys it: its training values all lie below the held-out one
    for v in validate(pts, "replication"):
        assert all(x < v["held_out"]["size"] for x in v["train_values"])


def test_runs_of_two_code_versions_are_never_pooled():
    a = [replace(copy_pt(s, key=f"a{s}"), version="aaa") for s in (1 * MiB, 8 * MiB, 32 * MiB)]
    b = [replace(copy_pt(64 * MiB, key="b"), version="bbb")]
    with pytest.raises(mdl.FitRefused, match="2 code versions .aaa, bbb."):
        fit_model(a + b, "replication")
    assert fit_model(a + b, "replication", pool_versions=True).n == 4
    m = fit_model(a, "replication")
    assert m.version == "aaa"
    # a held-out check never crosses versions: 64 MiB of another commit is no test of the others
    assert not [v for v in validate(a + b, "replication") if v["status"] in ("ok", "failed")]
    dirty = [replace(p, version="aaa+dirty") for p in a]
    with pytest.raises(mdl.FitRefused):
        fit_model(a + dirty, "replication")


def test_a_held_out_prediction_uses_the_scenario_s_nominal_ingest():
    p = copy_pt(64 * MiB)
    # the bytes measured during a long move say 3x the scenario's rate: an outcome, not an input
    measured = replace(p, ingest_bytes_per_s=3 * p.ingest_bytes_per_s)
    m = fit_model([copy_pt(s) for s in (1 * MiB, 8 * MiB, 32 * MiB)], "replication")
    assert mdl.predict_point(m, measured) == pytest.approx(mdl.predict_point(m, p))
    assert mdl.nominal_ingest(measured) == 200 * 4096.0
    # no scenario settings at all: the measured rate is all there is
    bare = replace(measured, params=())
    assert mdl.nominal_ingest(bare) == measured.ingest_bytes_per_s


def test_fits_keep_physical_parameters():
    # moves faster than their cap allows (e > 1) with a negative intercept: both clamp
    pts = [MovePoint("replication", f"k{s}", -0.3 + s / (1.3 * 6.25e6), float(s), 6.25e6, 0.0,
                     params=params(s, rate=0.0001)) for s in (4 * MiB, 16 * MiB, 64 * MiB)]
    m = fit_model(pts, "replication")
    assert m.fixed_s >= 0 and 0 < m.efficiency <= 1.0
    assert any("physical bounds" in a for a in m.assumptions)
    sh = [shared_pt(s, tail, objects=2, c=0.01, u=2.0, key=f"s{tail}") for s, tail in
          ((1 * MiB, 3e6), (8 * MiB, 10e6), (32 * MiB, 20e6))]
    h = fit_model(sh, "shared")
    assert h.fixed_s >= 0 and 0 < h.efficiency <= 1.0


def test_families_are_keyed_by_every_effective_setting():
    a = copy_pt(8 * MiB)
    other = {"system_extra": '{"num.io.threads": 2}', "prefill_batch_bytes": 16384, "workload.linger_ms": 250}
    for k, v in other.items():
        b = replace(a, params=tuple(sorted(dict(a.params, **{k: v}).items())))
        assert mdl.family_key(a, "size") != mdl.family_key(b, "size"), k
    # the axis' own matrix name never splits its family
    c = replace(a, params=tuple(sorted(dict(a.params, **{"prefill.bytes_per_partition": 1}).items())))
    assert mdl.family_key(a, "size") == mdl.family_key(c, "size")
    assert mdl.family_key(a, "size") != mdl.family_key(replace(a, version="x"), "size")


def test_moves_of_one_run_at_stepped_links_give_a_link_check():
    # link-steps: one run moves three partitions, its links stepped between them; the held-out
    # 1gbit move shares its run with the training moves, never its fit
    pts = []
    for rate, link in (("100mbit", 12.5e6), ("200mbit", 25e6), ("1000mbit", 125e6)):
        r = 100 * 4096.0
        cap = link - 2 * r
        B = 100 * MiB
        p = MovePoint("replication", "link-steps/run-1", 0.2 + B / (0.9 * cap - r), B, cap, r,
                      params=params(96 * MiB, throttle=None, rate=100, link_rate=rate))
        pts.append(replace(p, link_demand=(2 * r + link) / link))
    v = [x for x in validate(pts, "replication", open_points=pts) if x["axis"] == "link"]
    assert [x["status"] for x in v] == ["ok"] and v[0]["held_out"] == {"link": 1e9} and abs(v[0]["error_pct"]) < 1e-3
    assert v[0]["train_values"] == [1e8, 2e8]


def test_per_move_settings_give_one_run_several_sizes_and_ingest_rates():
    # calibrate: one run holds partitions of several sizes and rates; each move's settings are its
    # partition's, so the size and ingest checks group them as if each were a run of its own
    from bench.analysis.aggregate.fits import per_move_settings

    run = {"link_rate": "100mbit", "prefill_bytes_per_partition": 0, "produce_rate_msgs_per_s": 600}
    m = {"link_rate_at_request": "200mbit", "prefill_bytes_of_partition": 16.0 * MiB,
         "nominal_ingest_bytes_per_s": 409600.0}
    got = per_move_settings(m, run)
    assert got == {"link_rate": "200mbit", "prefill_bytes_per_partition": 16 * MiB, "ingest_bytes_per_s": 409600.0}
    p = replace(copy_pt(16 * MiB), params=tuple(sorted({**dict(params(16 * MiB)), **got}.items())))
    assert mdl.axis_value(p, "ingest") == 409600.0 and mdl.nominal_ingest(p) == 409600.0
    assert mdl.axis_value(p, "size") == 16 * MiB
    # the ingest axis' own settings never split its family; they split every other axis' family
    q = replace(p, params=tuple(sorted({**dict(p.params), "ingest_bytes_per_s": 819200.0}.items())))
    assert mdl.family_key(p, "ingest") == mdl.family_key(q, "ingest")
    assert mdl.family_key(p, "size") != mdl.family_key(q, "size")
    # nor does the size (an input of the prediction): moves of every size at the lower rates fit it
    r = replace(p, params=tuple(sorted({**dict(p.params), "prefill_bytes_per_partition": MiB}.items())))
    assert mdl.family_key(p, "ingest") == mdl.family_key(r, "ingest")
    # a run without emulated links keeps none
    assert "link_rate" not in per_move_settings(m, {"link_rate": None})


def test_the_link_axis_fits_moves_of_every_size_below_the_held_out_link():
    pts = []
    for link, bits in (("100mbit", 12.5e6), ("200mbit", 25e6)):
        for size in (4 * MiB, 32 * MiB):
            p = copy_pt(size, throttle=bits, key=f"{link}-{size}")
            pts.append(replace(p, params=tuple(sorted({**dict(p.params), "link_rate": link}.items()))))
    held = copy_pt(32 * MiB, throttle=125e6, key="1g")
    pts.append(replace(held, params=tuple(sorted({**dict(held.params), "link_rate": "1000mbit"}.items()))))
    checks = [c for c in validate(pts, "replication", axes=("link",)) if c["held_out"].get("link") == 1e9]
    assert len(checks) == 1 and checks[0]["n_train"] == 4 and checks[0]["status"] == "ok", checks


def test_the_sender_s_ingest_follows_the_leaders_the_run_s_earlier_moves_left():
    # calibrate moves partitions one after another: a later move's sender leads what the placement
    # and the earlier leader changes give it at its request, never what moves after it give
    from types import SimpleNamespace

    from bench.analysis.aggregate.rows import leader_timeline, sender_ingest
    from bench.scenario import parse_scenario
    from tests.unit.test_scenario import minimal

    data = minimal()
    data["system"]["brokers"] = 2
    data["workload"]["topics"] = [{"name": "a", "partitions": 2, "replication_factor": 1}]
    data["workload"]["produce_rate_msgs_per_s"] = 100
    data["actions"] = []
    sc = parse_scenario(data, "x.yaml")
    run = SimpleNamespace(scenario=sc)
    per = sc.nominal_ingest_of("a")  # a-0 on broker 1, a-1 on broker 2
    moves = [{"topic": "a", "partition": 1, "lc_ts": 10.0, "new_leader": 1},
             {"topic": "a", "partition": 0, "lc_ts": 30.0, "new_leader": 2}]
    tl = leader_timeline(run, list(reversed(moves)))
    assert sender_ingest(run, {"topic": "a", "partition": 0, "request_ts": 5.0}, tl) == pytest.approx(per)
    assert sender_ingest(run, {"topic": "a", "partition": 0, "request_ts": 20.0}, tl) == pytest.approx(2 * per)
    assert sender_ingest(run, {"topic": "a", "partition": 1, "request_ts": 31.0}, tl) == pytest.approx(per)
    assert sender_ingest(SimpleNamespace(scenario=None), moves[0], leader_timeline(SimpleNamespace(scenario=None), moves)) is None


def _open(n, per_obj=2e-5, a=0.01, key=None, latency=None, version="v1"):
    """A shared move whose open walked ``n`` objects: open(n) = a + per_obj * n."""
    p = shared_pt(16 * MiB, 1e6, objects=n, per_obj=per_obj, key=key or f"o-{n}-{latency}",
                  object_store_latency=latency)
    return replace(p, open_seconds=a + per_obj * n, version=version)


def test_open_cost_check_predicts_the_highest_level_from_the_lower_ones_only():
    """Opens at ~1k, 3k and 10k objects fit open(n); the 100k level is predicted (never fitted on),
    within 30 %: a linear cost passes, a cost that grows faster beyond 10k fails."""
    train = [_open(n, key=f"r{i}") for i, n in enumerate((1000, 1010, 3000, 3020, 10000, 10050))]
    held = [_open(n, key=f"h{i}") for i, n in enumerate((100_000, 100_400, 100_800))]
    [c] = mdl.validate_open(train + held, "shared", "v1")
    assert c["axis"] == "objects" and c["status"] == "ok", c
    assert c["held_out"] == {"objects": 100_000} and c["n_train"] == 6 and c["n_test"] == 3
    assert set(c["train_runs"]).isdisjoint(c["test_runs"]) and c["error_pct"] == pytest.approx(0.0, abs=1e-6)
    assert c["test_domain"] == {"objects": [100_000.0, 100_800.0]} and c["fit"] == {"version": "v1"}
    # quadratic beyond the training opens: 3x slower at 100k than the line says -> fails
    slow = [replace(p, open_seconds=3 * p.open_seconds) for p in held]
    [c] = mdl.validate_open(train + slow, "shared", "v1")
    assert c["status"] == "failed" and c["error_pct"] == pytest.approx(-66.7, abs=0.5), c


def test_open_cost_check_needs_a_high_level_of_one_latency_and_one_version():
    """Opens of a few objects (make bench's) cannot be checked: one insufficient entry saying what
    to run; opens at another object-store latency or of another code version never join a group."""
    few = [_open(n, key=f"f{n}", latency="p50=30ms,p99=80ms") for n in (4, 9, 20, 41, 90)]
    [c] = mdl.validate_open(few, "shared", "v1")
    assert c["status"] == "insufficient" and "suite open" in c["reason"] and c["test_domain"] == {}, c
    # the 100k opens without latency, the small ones only with it: no group has lower levels
    held = [_open(100_000 + i, key=f"h{i}") for i in range(3)]
    [c] = mdl.validate_open(few + held, "shared", "v1")
    assert c["status"] == "insufficient", c
    # the lower levels measured on another commit do not train this version's check
    train = [_open(n, key=f"r{n}", version="v0") for n in (1000, 3000, 10000)]
    [c] = mdl.validate_open(train + held, "shared", "v1")
    assert c["status"] == "insufficient", c
    assert mdl.validate_open(train + held, "replication", "v1") == []  # no opens: no entry


def _tails(levels_mib, per=3, slow_above=None, factor=1.0):
    """Shared moves whose tail is their prefill (plus a little load), three per level."""
    out = []
    for lv in levels_mib:
        for i in range(per):
            tail = lv * MiB + i * 200_000
            p = shared_pt(lv * MiB, tail, key=f"t{lv}-{i}")
            if slow_above is not None and lv > slow_above:
                p = replace(p, move_seconds=p.move_seconds * factor)
            out.append(p)
    return out


def test_tail_check_predicts_the_largest_tail_from_the_smaller_ones_only():
    """Moves grouped by their tail at the request (levels within 2x): the 64 MiB tails are
    predicted by the model fitted on the 4 and 16 MiB ones, within 30 %; a close whose upload
    slows beyond 16 MiB fails; tails within 2x of each other give no check."""
    [c] = [v for v in validate(_tails((4, 16, 64)), "shared", axes=("tail",)) if v["axis"] == "tail"]
    assert c["status"] == "ok" and c["held_out"] == {"tail": 64 * MiB} and c["label"].startswith("tail >= 64"), c
    assert c["n_train"] == 6 and c["n_test"] == 3 and c["error_pct"] == pytest.approx(0.0, abs=1e-6)
    assert set(c["train_runs"]).isdisjoint(c["test_runs"]) and c["train_values"] == [4 * MiB, 16 * MiB]
    assert c["test_domain"]["tail"] == [64 * MiB, 64 * MiB + 400_000]
    [c] = [v for v in validate(_tails((4, 16, 64), slow_above=16, factor=2.0), "shared", axes=("tail",))
           if v["axis"] == "tail"]
    assert c["status"] == "failed" and c["error_pct"] == pytest.approx(-50.0, abs=0.5), c
    # calibrate's tails (a few hundred kB, within 2x): one level, nothing to hold out
    near = [shared_pt(s, t, key=f"n{t}") for s, t in ((MiB, 500e3), (4 * MiB, 600e3), (16 * MiB, 715e3))]
    assert [v for v in validate(near, "shared", axes=("tail",)) if v["axis"] == "tail"] == []


def test_a_tail_fit_holding_a_tail_at_or_beyond_the_held_out_level_is_refused():
    pts = _tails((4, 16, 64))
    with pytest.raises(mdl.FitRefused, match="tail"):
        fit_model(pts, "shared", held_out=("tail", 64 * MiB))
    fit_model(pts[:6], "shared", held_out=("tail", 64 * MiB))  # the lower levels only: fitted


def test_a_miss_within_the_noise_of_the_held_out_median_is_inconclusive():
    """Beyond the target but within two standard errors of the held-out median (the training
    moves' spread about the fit): inconclusive, which no axis rests on; the same miss after
    exact training moves: failed."""
    def check(scatter):
        pts = _tails((4, 16, 64), slow_above=16, factor=1.6)
        pts = [replace(p, move_seconds=p.move_seconds + (scatter if i % 2 else -scatter)) if i < 6 else p
               for i, p in enumerate(pts)]
        [c] = [v for v in validate(pts, "shared", axes=("tail",)) if v["axis"] == "tail"]
        return c
    c = check(1.5)
    assert c["status"] == "inconclusive" and c["error_pct"] == pytest.approx(-35.0, abs=0.5) and "noise" in c["reason"], c
    c = check(0.0)
    assert c["status"] == "failed" and c["error_pct"] == pytest.approx(-37.5, abs=0.5), c


def test_the_clients_leader_queries_double_from_100ms_to_1s():
    """librdkafka's leader queries after a refusal (base.leader_query_at): the first 100 ms after
    it, then 200, 400, 800 ms, then every second (each +-20 %); the expected one at or after t."""
    q = mdl.leader_query_at
    assert q(0.03, 0.05) == 0.03  # the leader changed before any refusal: nothing to wait for
    assert q(0.06, 0.05) == pytest.approx(0.15, abs=0.002)  # the first query, whatever its jitter
    assert q(0.2, 0.05) == pytest.approx(0.35, abs=0.003)  # the second: 0.05 + 0.1 + 0.2
    ts = [0.05 + 0.01 * i for i in range(400)]
    qs = [q(t, 0.05) for t in ts]
    assert all(b >= a - 1e-9 for a, b in zip(qs, qs[1:])) and all(x >= t for x, t in zip(qs, ts))
    # far out, a query every 1 s +-20 %: the mean wait is E[X^2] / 2E[X] = 0.5067 s
    assert q(100.0, 0.05) - 100.0 == pytest.approx(0.5067, abs=1e-3)
    assert q(29.0, 0.05) - 29.0 == pytest.approx(0.5067, abs=0.01)


def test_several_producers_find_the_new_leader_at_the_earliest_of_their_queries():
    """Each producer writing to the partition queries the leader on its own schedule, from its own
    first refusal (its next send, within its gap after the first producer's): the expected first
    query of any of them comes sooner the more there are, never before the change, and one
    producer's is the single schedule."""
    q = mdl.leader_query_at
    assert q(0.2, 0.05, 1, 0.15) == q(0.2, 0.05)
    for t in (0.08, 0.2, 0.32, 0.5, 2.0):
        one, three, eight = q(t, 0.05), q(t, 0.05, 3, 0.15), q(t, 0.05, 8, 0.15)
        assert t <= eight <= three <= one, (t, one, three, eight)
    assert q(0.2, 0.05) - q(0.2, 0.05, 3, 0.15) > 0.03  # a query ~0.3 s for one, sooner for three
    assert q(0.03, 0.05, 4, 0.1) == 0.03  # changed before any refusal: nothing to wait for
    assert q(0.2, 0.05, 3, 0.15) == q(0.2, 0.05, 3, 0.15)  # the same table every time (fixed seeds)


def test_handover_fit_takes_the_clients_part_from_its_leader_queries():
    """With the leader change and the old owner's first refusal of each move measured, the
    handover's client part is fitted apart: moves whose first ack is the client's query schedule
    (from each move's refusal) after the change plus a constant ack give back that ack, the
    refusals' median as the origin a prediction takes, and a prediction is the schedule applied to
    the predicted election, then the ack and the open. Without measured refusals there is no
    schedule: the lag stays a constant in c."""
    from dataclasses import replace

    pts = []
    for (s, tail, n), refuse in zip(((1 * MiB, 0.5e6, 1), (8 * MiB, 3e6, 2), (32 * MiB, 1.5e6, 5), (64 * MiB, 6e6, 9)),
                                    (0.05, 0.07, 0.06, 0.09)):
        p = shared_pt(s, tail, objects=n, c=0.2, u=0.9)
        elect = p.move_seconds - 0.002 * n  # the open comes after the election
        pts.append(replace(p, elect_seconds=elect, refuse_seconds=refuse,
                           move_seconds=mdl.leader_query_at(elect, refuse) + 0.12 + 0.002 * n))
    m = fit_model(pts, "shared")
    assert m.client_start_s == pytest.approx(0.065) and m.client_ack_s == pytest.approx(0.12, abs=1e-6)
    assert m.fixed_s == pytest.approx(0.2, abs=1e-3) and m.efficiency == pytest.approx(0.9, rel=1e-3)
    elect = 0.2 + 2e6 / (0.9 * 12.5e6)
    assert m.predict(16 * MiB, 12.5e6, 0, 2e6, 3) == pytest.approx(mdl.leader_query_at(elect, 0.065)
                                                                   + m.client_ack_s + 0.002 * 3)
    assert m.formula().startswith("t = Q(") and "leader query" in m.formula()
    assert mdl.MoveModel.from_row(m.to_row()).predict(16 * MiB, 12.5e6, 0, 2e6, 3) == \
        pytest.approx(m.predict(16 * MiB, 12.5e6, 0, 2e6, 3))
    blind = fit_model([replace(p, refuse_seconds=None) for p in pts], "shared")
    assert blind.client_start_s is None and not blind.formula().startswith("t = Q(")


def test_handover_client_part_waits_one_ack_of_the_load_now():
    """The retried batch after the leader query is acked like any other: moves whose first ack
    comes their own load's median ack (measured before each) after the query give that ack's
    median as the fit's reference, and a model for a load acked slower (for_client) predicts that
    much later, one for one. An election just past the ~0.3 s query waits for the ~0.7 s one: the
    step a constant lag after the election cannot show. A model without a client part (no
    refusals measured) is the same for any load."""
    from dataclasses import replace

    pts = []
    for (s, tail, n), ack in zip(((1 * MiB, 0.5e6, 1), (8 * MiB, 3e6, 2), (32 * MiB, 1.5e6, 5), (64 * MiB, 6e6, 9)),
                                 (0.08, 0.10, 0.12, 0.15)):
        p = shared_pt(s, tail, objects=n, c=0.05, u=0.9)
        elect = p.move_seconds - 0.002 * n
        pts.append(replace(p, elect_seconds=elect, refuse_seconds=0.01, ack_before_s=ack,
                           move_seconds=mdl.leader_query_at(elect, 0.01) + ack + 0.01 + 0.002 * n))
    m = fit_model(pts, "shared")
    assert m.client_ack_ref_s == pytest.approx(0.11) and m.client_ack_s == pytest.approx(0.12, abs=1e-6)
    assert "at acks of 0.11 s" in m.formula()
    base = m.predict(16 * MiB, 12.5e6, 0, 1e6, 3)
    slow = m.for_client(0.26)
    assert slow.client_ack_ref_s == 0.26 and slow.predict(16 * MiB, 12.5e6, 0, 1e6, 3) == pytest.approx(base + 0.15)
    assert m.for_client(None) is m
    assert mdl.MoveModel.from_row(slow.to_row()).predict(16 * MiB, 12.5e6, 0, 1e6, 3) == \
        pytest.approx(base + 0.15)
    # elected at 0.05 + tail / (0.9 x 12.5 MB/s): 0.25 s, before the third query (~0.31 s), and 0.40 s, after it
    early, late = (m.predict(16 * MiB, 12.5e6, 0, (e - 0.05) * 0.9 * 12.5e6, 0) for e in (0.25, 0.40))
    assert late - early > 0.3
    blind = fit_model([replace(p, refuse_seconds=None) for p in pts], "shared")
    assert blind.client_start_s is None and blind.for_client(0.5) is blind
    # moves written by three producers each: the same ack comes back from their earliest queries,
    # and a prediction for three producers is sooner than for one
    three = [replace(p, producers=3, send_gap_s=0.15,
                     move_seconds=mdl.leader_query_at(p.elect_seconds, 0.01, 3, 0.15) + p.ack_before_s + 0.01
                     + 0.002 * p.objects) for p in pts]
    m3 = fit_model(three, "shared")
    assert m3.client_ack_s == pytest.approx(0.12, abs=1e-6)
    assert m3.for_client(None, 3, 0.15).predict(16 * MiB, 12.5e6, 0, 1e6, 3) < m3.predict(16 * MiB, 12.5e6, 0, 1e6, 3)
