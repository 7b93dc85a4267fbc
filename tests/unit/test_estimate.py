"""bench/analysis/estimate.py: a plan's estimate from facts and a model (no cluster)."""
from __future__ import annotations

import json
import math

import pytest

from bench.analysis import estimate as est

MB = 1e6


def model_json(tmp_path, *, validated=True, family="copy", system="replication", fixed=0.2, eff=1.0,
                impact=True, **extra):
    d = tmp_path / "agg"
    d.mkdir(exist_ok=True)
    row = {"system": system, "family": family, "fixed_s": fixed, "fixed_se": 0.01, "efficiency": eff,
           "efficiency_se": 0.01, "efficiency_fitted": True, "n": 6, "runs": "a/r1", "version": "abc1234",
           "domain": "{}", "open_per_object_s": 0.0, **extra}
    (d / "model.json").write_text(json.dumps({
        "models": {system: row},
        "validity": {system: {"validated": validated, "error_pct": -4.0 if validated else None,
                              "reason": None if validated else "no passing held-out size check"}},
        "validation": [{"system": system, "target_pct": 15.0}]}))
    if impact:
        (d / "moves.csv").write_text("system,unavailable_seconds\n" + "".join(
            f"{system},{x}\n" for x in (0.3, 0.5, 0.9)) + "other,99\n")
        (d / "latency.csv").write_text("level,system,scope,phase,p99_ms\n"
                                       f"run,{system},partitions,during,400\nrun,{system},partitions,before,10\n"
                                       f"run,{system},all,during,999\n")
    return d / "model.json"


def _facts(ingest=0.0, size=32 * MB, target=(1, 2, 4)):
    return est.PartitionFacts("t", 0, [1, 2, 3], list(target), 1, size, ingest)


def test_a_copy_move_is_its_bytes_over_the_throttle_with_the_held_out_band(tmp_path):
    src = est.load_model("replication", model_json(tmp_path))
    assert src.validated and src.band_pct == 4.0
    e = est.estimate([_facts(ingest=1 * MB)], src, est.Caps({1: 8 * MB, 4: 8 * MB}))
    (p,) = e["partitions"]
    assert p["seconds"] == pytest.approx(0.2 + 32 / 7)  # B / (e x T - r)
    assert (p["seconds_low"], p["seconds_high"]) == pytest.approx((p["seconds"] * 0.96, p["seconds"] * 1.04))
    assert p["feasible"] and p["bytes"] == pytest.approx(32 * MB + 1 * MB * 32 / 7)  # it carries its ingest too
    assert e["total_seconds"] == pytest.approx(p["seconds"], rel=0.02)
    assert e["impact"] == {"unavailable_seconds": {"median": 0.5, "max": 0.9, "n": 3},
                           "p99_during_move_ms": {"median": 400.0, "max": 400.0, "n": 1}}
    text = est.render(e)
    assert "t-0" in text and "held-out error -4.0 %" in text and "unavailable 0.50 s median" in text


def test_ingest_at_or_above_what_the_copy_achieves_cannot_finish(tmp_path):
    src = est.load_model("replication", model_json(tmp_path, eff=0.9))
    e = est.estimate([_facts(ingest=1.5 * MB), _facts(ingest=0.1 * MB, target=(1, 2, 3))],
                     src, est.Caps({1: 1.6 * MB}))
    bad, reorder = e["partitions"]
    assert bad["feasible"] is False and bad["seconds"] is None and "not gaining" in bad["why"]
    assert reorder["feasible"] and reorder["bytes"] == 0.0  # nothing added: the election only
    assert e["feasible"] is False and e["total_seconds"] is None
    assert "cannot finish" in est.render(e) and "NOT GAINING" in est.render(e)


def test_moves_sharing_a_broker_share_its_throttle_and_concurrency_serialises_them(tmp_path):
    src = est.load_model("replication", model_json(tmp_path))
    facts = [est.PartitionFacts("t", i, [1], [2], 1, 10 * MB, 0.0) for i in range(4)]
    caps = est.Caps({1: 10 * MB, 2: 10 * MB})
    at_once = est.estimate(facts, src, caps)["total_seconds"]
    one_by_one = est.estimate(facts, src, caps, concurrency=1)["total_seconds"]
    assert at_once == pytest.approx(0.2 + 4.0, rel=0.05)  # 40 MB through one 10 MB/s quota
    assert one_by_one == pytest.approx(4 * (0.2 + 1.0), rel=0.05)  # each fixed part paid in turn


def test_a_handover_spans_an_empty_tail_to_a_full_one(tmp_path):
    src = est.load_model("shared", model_json(tmp_path, family="handover", system="shared", eff=0.5))
    with pytest.raises(est.EstimateError, match="WAL settings"):
        est.estimate([_facts()], src, est.Caps(link_bytes_per_s=125 * MB))
    ho = est.Handover(upload_threshold_bytes=32 * 2**20, upload_interval_s=10)
    e = est.estimate([_facts(ingest=1 * MB)], src, est.Caps(link_bytes_per_s=125 * MB), handover=ho)
    (p,) = e["partitions"]
    cap = 125 * MB * est.WIRE_PAYLOAD_SHARE
    assert p["bytes_high"] == 10 * MB  # the ingest over the upload interval, below the threshold
    assert p["seconds_low"] == pytest.approx(0.2 * 0.96)
    assert p["seconds_high"] == pytest.approx((0.2 + 10 * MB / (0.5 * cap)) * 1.04)
    assert p["seconds_low"] < p["seconds"] < p["seconds_high"] and p["bytes_to"] == "object storage"


def test_a_handovers_estimate_waits_one_ack_of_the_producers_now(tmp_path):
    """A handover model with a client part: the election, then the producers' next leader query,
    then one ack of theirs; an estimate told the producers' ack latency now (--client-ack-ms, a
    run's load) waits that ack instead of the model's runs' own, one for one, and says so."""
    from bench.analysis.model import leader_query_at

    src = est.load_model("shared", model_json(tmp_path, family="handover", system="shared", eff=1.0,
                                              client_start_s=0.01, client_ack_s=0.12, client_ack_ref_s=0.1))
    ho = est.Handover(upload_threshold_bytes=5 * 2**20, upload_interval_s=10)
    own = est.estimate([_facts(ingest=0.8 * MB)], src, est.Caps({1: 6.25 * MB}), handover=ho)
    slow = est.estimate([_facts(ingest=0.8 * MB)], src, est.Caps({1: 6.25 * MB}), handover=ho, client_ack_s=0.3)
    (p,), (q,) = own["partitions"], slow["partitions"]
    elect = 0.2 + 5 * 2**20 / 2 / (6.25 * MB)  # the middle tail (the threshold's half) at the move cap
    assert p["seconds"] == pytest.approx(leader_query_at(elect, 0.01) + 0.12)
    assert q["seconds"] == pytest.approx(p["seconds"] + 0.2) and q["seconds_high"] > p["seconds_high"]
    assert own["client_ack_seconds"] is None and slow["client_ack_seconds"] == 0.3
    assert "at acks of 0.3 s" in est.render(slow)
    # three producers writing the partition (200 records/s between them): the earliest of their
    # queries names the new owner, so the estimate is sooner; one producer is the default
    facts = [est.PartitionFacts("t", 0, [1, 2, 3], [1, 2, 4], 1, 32 * MB, 0.8 * MB, records_per_s=200.0)]
    one = est.estimate(facts, src, est.Caps({1: 6.25 * MB}), handover=ho)["partitions"][0]
    three = est.estimate(facts, src, est.Caps({1: 6.25 * MB}), handover=ho, producers={"t": 3})["partitions"][0]
    assert one["seconds"] == pytest.approx(p["seconds"]) and one["producers"] == 1
    assert three["seconds"] < one["seconds"] and three["producers"] == 3
    assert three["seconds"] == pytest.approx(leader_query_at(elect, 0.01, 3, 3 / 200.0) + 0.12)


def test_a_handover_lists_where_it_can_land_at_the_producers_leader_queries(tmp_path):
    """The producers' leader queries come at ~0.1, 0.3, 0.7 s after their first refusal, each
    interval +-20 %: the election, anywhere the unknown tail puts it, is seen at the first query
    after it. The estimate lists each query that may be it, with its chance and the move's time
    there; an election range clear of every query's jitter has one outcome and no list."""
    from bench.analysis.model.base import leader_query_at, leader_query_outcomes

    def model(fixed: float):
        return est.load_model("shared", model_json(tmp_path, family="handover", system="shared", eff=1.0, fixed=fixed,
                                                   client_start_s=0.06, client_ack_s=0.2, client_ack_ref_s=0.2))

    # tails of 0-4 MB at 6.25 MB/s: elected 0.07-0.71 s after the request, 0.01-0.65 s after the refusal
    ho = est.Handover(upload_threshold_bytes=4.0 * MB, upload_interval_s=10)
    e = est.estimate([_facts(ingest=1 * MB)], model(0.07), est.Caps({1: 6.25 * MB}), handover=ho)
    (p,) = e["partitions"]
    outs = {o["query_s"]: o for o in p["outcomes"]}
    # uniform over the 0.64 s: ~14 % by the ~0.1 s query, ~31 % by the ~0.3 s one, ~55 % at the ~0.7 s one
    assert sorted(outs) == pytest.approx([0.1, 0.3, 0.7])
    assert [outs[q]["probability"] for q in sorted(outs)] == pytest.approx([0.14, 0.31, 0.55], abs=0.04)
    assert sum(o["probability"] for o in outs.values()) == pytest.approx(1.0, abs=0.03)
    assert [o["probability"] for o in p["outcomes"]] == sorted((o["probability"] for o in p["outcomes"]), reverse=True)
    times = [outs[q]["seconds"] for q in sorted(outs)]
    assert times == sorted(times) and times[-1] - times[0] > 0.3  # each a query's time + one ack (0.2 s)
    assert p["seconds_low"] < times[0] and times[-1] < p["seconds_high"]
    assert "at the ~0.3 s query" in est.render(e) and "where it lands" in est.render(e)
    # elected 0.5-0.58 s after the request (tails of 0-0.5 MB): only the ~0.7 s query follows it
    clear = est.estimate([_facts(ingest=1 * MB)], model(0.5), est.Caps({1: 6.25 * MB}),
                         handover=est.Handover(upload_threshold_bytes=0.5 * MB, upload_interval_s=10))
    assert "outcomes" not in clear["partitions"][0]
    # one election time: the outcomes' mean is the expected query time the model predicts with;
    # several: the mean over them
    for t in (0.2, 0.36, 0.4, 0.9, 3.0):
        one = leader_query_outcomes(t, 0.06)
        assert sum(p for _, p, _ in one) == pytest.approx(1.0)
        assert sum(p * q for _, p, q in one) == pytest.approx(leader_query_at(t, 0.06), abs=0.002)
    ts = [0.2, 0.36, 0.4, 0.9]
    pooled = leader_query_outcomes(ts, 0.06)
    assert sum(p * q for _, p, q in pooled) == pytest.approx(sum(leader_query_at(t, 0.06) for t in ts) / 4, abs=0.002)
    assert leader_query_outcomes(40.0, 0.06)[0][0] is None  # beyond the schedule's table
    assert leader_query_outcomes(0.05, 0.06) == [(0.0, 1.0, 0.05)]  # before any refusal: seen at once


def test_an_unthrottled_copy_needs_a_link_and_a_missing_model_says_what_to_run(tmp_path):
    src = est.load_model("replication", model_json(tmp_path, validated=False, impact=False))
    assert not src.validated and src.band_pct == 15.0 and "size check" in src.why_not_validated
    with pytest.raises(est.EstimateError, match="--throttle .* or --link"):
        est.estimate([_facts()], src, est.Caps())
    e = est.estimate([_facts()], src, est.Caps(link_bytes_per_s=125 * MB))
    assert math.isclose(e["partitions"][0]["cap_bytes_per_s"], 125 * MB * est.WIRE_PAYLOAD_SHARE)
    assert "not validated" in est.render(e) and "no measured moves" in est.render(e)
    with pytest.raises(est.EstimateError, match="has no tiered model"):
        est.load_model("tiered", tmp_path / "agg" / "model.json")
    with pytest.raises(est.EstimateError, match="bench aggregate"):
        est.load_model("replication", tmp_path / "nothing.json")


def test_facts_between_two_samples_take_size_and_ingest_from_the_leader_and_no_growth_across_a_leader_change():
    from bench.analysis.estimate import facts_between
    from bench.run.move_estimate import LogSample

    first = LogSample(100.0, {("t", 0): [1, 2], ("t", 1): [2]}, {("t", 0): 1, ("t", 1): 2},
                      {("t", 0): {1: 1_000_000, 2: 900_000}, ("t", 1): {2: 5_000}})
    second = LogSample(104.0, {("t", 0): [1, 2], ("t", 1): [2]}, {("t", 0): 1, ("t", 1): 3},
                       {("t", 0): {1: 1_400_000, 2: 1_300_000}, ("t", 1): {3: 6_000}})
    plan = [{"topic": "t", "partition": 0, "replicas": [2, 3]}, {"topic": "t", "partition": 1, "replicas": [1]}]
    a, b = facts_between(plan, first, second)
    assert (a.replicas, a.target, a.leader, a.size_bytes, a.ingest_bytes_per_s, a.adding) == (
        [1, 2], [2, 3], 1, 1_400_000, 100_000, [3])
    assert (b.leader, b.size_bytes, b.ingest_bytes_per_s) == (3, 6_000, 0.0)  # a new leader: no growth known
    # retention deleted a segment between the samples: the new offsets times the bytes per offset
    first.offsets[("t", 0)], second.offsets[("t", 0)] = (0, 1000), (500, 1200)
    second.sizes[("t", 0)][1] = 700_000
    (a,) = facts_between(plan[:1], first, second)
    assert a.ingest_bytes_per_s == pytest.approx(200 / 4 * 700_000 / 700)
    with pytest.raises(est.EstimateError, match="no such partition"):
        facts_between([{"topic": "t", "partition": 9, "replicas": [1]}], first, second)
    second.leaders[("t", 0)] = -1
    with pytest.raises(est.EstimateError, match="no leader"):
        facts_between(plan[:1], first, second)


def test_a_runs_estimate_never_holds_its_move_up_and_samples_again_after_waiting(monkeypatch):
    """RunEstimator: samples a window before the move and at it; a move that waited (after_moves)
    gets a fresh second sample; a cluster slow to answer costs the move at most RUN_WAIT_S and
    leaves it without an estimate, said in the event."""
    import time

    from bench.run import move_estimate as me

    samples: list[float] = []

    def fake_sample(admin, topics, profile_tails=False):
        samples.append(time.time())
        return me.LogSample(time.time())

    monkeypatch.setattr(me, "sample_logs", fake_sample)
    monkeypatch.setattr(me, "RUN_WAIT_S", 0.3)
    calls = []

    def fn(admin, plan, first, second, *, system, link_bytes_per_s, concurrency, client_ack_s=None, producers=None):
        calls.append((first.ts, second.ts, client_ack_s))
        assert producers == {"t": 2}  # the load's producers per topic, as the run knows them
        return {"partitions": [{"topic": "t", "partition": 0, "seconds": 1.0}], "total_seconds": 1.0,
                "feasible": True, "model": {}, "sample_seconds": second.ts - first.ts}

    windows = []

    def acks(t0, t1):  # the load's median ack over the sampling window
        windows.append((t0, t1))
        return 0.26

    r = me.RunEstimator(fn, lambda: object(), {"t"}, "replication", None, acks, {"t": 2})
    r.prepare(0, time.time() + 0.1)
    time.sleep(0.2)
    assert r.estimate(0, [("t", 0, [2])], None)["total_seconds"] == 1.0 and len(samples) == 2
    assert calls[-1] == pytest.approx((samples[0], samples[1], 0.26))
    assert windows == [pytest.approx(calls[-1][:2])]  # the window the samples span
    r.prepare(1, time.time())
    time.sleep(1.3)  # the move waited for earlier moves: its second sample is stale
    assert "error" not in r.estimate(1, [("t", 0, [2])], None) and len(samples) == 5
    assert calls[-1][1] == pytest.approx(samples[-1])

    def slow(*a, **k):
        time.sleep(2)

    r = me.RunEstimator(slow, lambda: object(), {"t"}, "replication", None)
    r.prepare(0, time.time())
    time.sleep(0.05)
    t0 = time.monotonic()
    out = r.estimate(0, [("t", 0, [2])], None)
    assert time.monotonic() - t0 < 1.5 and "slow to answer" in out["error"]  # not the fn's 2 s
    assert r.estimate(7, [("t", 0, [2])], None) == {"error": "no samples taken before the move"}


class _Admin:
    """What calibrated_model asks of an admin client: DescribeCluster's id and the bootstrap."""

    def __init__(self, cluster_id, bootstrap="127.0.0.1:9092"):
        self._id = cluster_id
        self.config = {"bootstrap_servers": [bootstrap]}

    def describe_cluster(self):
        return {"cluster_id": self._id, "brokers": []}


def test_a_calibrated_cluster_finds_its_own_model_first_and_says_so(tmp_path):
    root = tmp_path / "calibration"
    cal_dir = root / est.calibration_key("Xy/z 1", "ignored")
    (cal_dir / "aggregate").mkdir(parents=True)
    model = model_json(tmp_path)
    (cal_dir / "aggregate" / "model.json").write_text(model.read_text())
    (cal_dir / est.CALIBRATION_FILE).write_text(json.dumps({"cluster_id": "Xy/z 1", "calibrated_at": "2026-11-28T10:00:00Z"}))
    assert cal_dir.name == "Xy_z_1"  # a file name
    assert est.calibrated_model(_Admin("Xy/z 1"), root) == cal_dir / "aggregate" / "model.json"
    assert est.calibrated_model(_Admin("other"), root) is None  # another cluster: none
    # a cluster without an id is found by its bootstrap address
    by_addr = root / est.calibration_key(None, "127.0.0.1:9092") / "aggregate"
    by_addr.mkdir(parents=True)
    (by_addr / "model.json").write_text(model.read_text())
    assert est.calibrated_model(_Admin(None), root) == by_addr / "model.json"

    src = est.load_model("replication", cal_dir / "aggregate" / "model.json")
    assert src.calibration["calibrated_at"] == "2026-11-28T10:00:00Z" and "moves of this cluster" in src.describe()
    e = est.estimate([_facts()], src, est.Caps({1: 8 * MB, 4: 8 * MB}))
    assert e["model"]["calibrated"] is True
    assert "calibrated on this cluster 2026-11-28T10:00:00Z" in est.render(e)
    plain = est.load_model("replication", model)  # a harness model: not calibrated, and it says so
    assert plain.calibration is None and "not calibrated on this cluster" in plain.describe()
    assert "not calibrated on this cluster" in est.render(est.estimate([_facts()], plain, est.Caps({1: 8 * MB, 4: 8 * MB})))


def test_calibration_counts_an_external_clusters_runs_as_the_system_its_configs_match(tmp_path):
    from bench.analysis.aggregate.discovery import discover_runs
    from tests.support.synthetic import SynthRun, write_run

    d = write_run(tmp_path / "r" / "run1", SynthRun(system="replication", duration_s=8, move_at_s=3))
    s = json.loads((d / "summary.json").read_text())
    s["system"] = "external"
    s["external_cluster"] = {"bootstrap": "h:9092", "cluster_id": "c1", "behaves_as": "replication"}
    (d / "summary.json").write_text(json.dumps(s))
    (run,), _ = discover_runs([tmp_path / "r"])
    assert run.system == "external"  # the default: as it ran, never pooled with the harness's systems
    (run,), _ = discover_runs([tmp_path / "r"], external_as_profile=True)
    assert run.system == "replication"


def test_a_tiered_copy_from_the_last_tiered_offset_is_its_untiered_tail_at_the_newest_records_size(tmp_path):
    from bench.analysis.estimate import facts_between
    from bench.run.move_estimate import LogSample

    tp = ("t", 0)
    # a 64 MiB local log of large old records (offsets 0-999), then 4 kB records: 200 written between
    # the samples, 300 after the last tiered offset 1099
    first = LogSample(100.0, {tp: [1, 2, 3]}, {tp: 1}, {tp: {1: 64_000_000 + 200_000}}, {tp: (0, 1200)})
    second = LogSample(104.0, {tp: [1, 2, 3]}, {tp: 1}, {tp: {1: 64_000_000 + 1_000_000}}, {tp: (0, 1400)},
                       last_tiered={tp: 1099})
    (f,) = facts_between([{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}], first, second)
    assert f.untiered_bytes == pytest.approx(300 * 4_000)  # not 300 x the log's mean (~46 kB)
    assert f.ingest_bytes_per_s == pytest.approx(200_000)
    src = est.load_model("tiered", model_json(tmp_path, family="tiered_copy", system="tiered", fixed=0.2))
    caps = est.Caps({1: 8 * MB})
    kip1023 = est.estimate([f], src, caps, from_last_tiered=True)["partitions"][0]
    kip405 = est.estimate([f], src, caps, from_last_tiered=False)["partitions"][0]
    assert kip1023["bytes_to_copy"] == f.untiered_bytes and kip405["bytes_to_copy"] == f.size_bytes
    assert kip1023["seconds"] < 1 < 8 < kip405["seconds"]
    second.last_tiered.clear()  # nothing tiered (or no tiered storage): the local log
    (f,) = facts_between([{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}], first, second)
    assert f.untiered_bytes is None


def test_a_tail_of_two_record_sizes_is_bisected_to_the_offset_where_they_change():
    from bench.run.move_estimate import TAIL_SAMPLES, sample_tail

    # offsets 4050-4721: the last 46 records of a prefill of 64 KiB records, then 4 kB ones
    calls = []

    def size_at(o):
        calls.append(o)
        return 65_536 if o < 4096 else 4_000

    prof = sample_tail(size_at, 4050, 4722)
    assert len(calls) <= TAIL_SAMPLES and len(set(calls)) == len(calls)
    assert prof.bytes_between(4050, 4722) == 46 * 65_536 + (4722 - 4096) * 4_000
    assert prof.bytes_between(4100, 4200) == 100 * 4_000  # any part of it, exactly
    # one size throughout: the first spread of samples, no bisection
    calls.clear()
    assert sample_tail(lambda o: calls.append(o) or 1_000, 0, 10_000).bytes_between(0, 10_000) == 10_000_000
    assert len(calls) == 8


def test_the_untiered_tail_takes_the_sampled_profile_and_prices_newer_offsets_at_the_newest_records():
    from bench.analysis.estimate import untiered_of
    from bench.run.move_estimate import LogSample, TailProfile

    tp = ("t", 0)
    # first sample: last tiered 999, end 1300; its profile: 100 offsets of 60 kB, then 4 kB
    prof = TailProfile(1000, 1300, {1000: 60_000, 1099: 60_000, 1100: 4_000, 1299: 4_000})
    first = LogSample(100.0, {tp: [1]}, {tp: 1}, {tp: {1: 50_000_000}}, {tp: (0, 1300)}, {tp: 999}, {tp: prof})
    # second: 200 more 4 kB records, and the leader tiered up to 1049 meanwhile
    second = LogSample(105.0, {tp: [1]}, {tp: 1}, {tp: {1: 50_800_000}}, {tp: (0, 1500)}, {tp: 1049})
    assert untiered_of(tp, 50_800_000, first, second) == pytest.approx(50 * 60_000 + 200 * 4_000 + 200 * 4_000)
    # without a profile: every offset at the newest records' size
    first.tails.clear()
    assert untiered_of(tp, 50_800_000, first, second) == pytest.approx(450 * 4_000)


def test_a_brokers_move_cap_is_the_config_its_systems_profile_names():
    from systems.registry import PROFILES

    class Admin:
        def describe_configs(self, resources, config_filter):
            b = resources[0].name
            return {"broker": {b: {"leader.replication.throttled.rate": "9000000",
                                   "shared.move.upload.bytes.per.s": "6250000" if b == "1" else None}}}

    by_system = {n: est.broker_rates(Admin(), {1, 2}, p.move_cap_config) for n, p in PROFILES.items()}
    assert by_system["shared"] == {1: 6_250_000.0}  # broker 2 has no cap: its link caps the upload
    assert by_system["replication"] == by_system["tiered"] == {1: 9_000_000.0, 2: 9_000_000.0}
