"""The rebalance simulator (bench/analysis/rebalance.py): hand-checkable physics, concurrency,
planners' determinism, and one measured run rebuilt from moves rows."""
from __future__ import annotations

import math
import time

import pytest

from bench.analysis.rebalance import (
    SimMove,
    measured_seconds,
    partition_sizes,
    plan_drain,
    plan_scale_out,
    predict_run,
    simulate,
    sources_from_summary,
)

MB = 1e6


def test_one_move_is_bytes_over_net_rate_plus_fixed():
    r = simulate([SimMove("t-0", 1, 2, 60 * MB, 1 * MB, 2.0)], out_cap=7 * MB)
    assert r.seconds == pytest.approx(60 / 6 + 2.0)
    assert r.bytes_moved == pytest.approx(60 * MB + 10 * MB)  # plus what was written meanwhile
    assert r.moves == [("t-0", 0.0, pytest.approx(12.0))] and r.never == []


def test_two_moves_sharing_a_source_take_twice_as_long():
    one = simulate([SimMove("a", 1, 2, 10 * MB, 0, 0)], out_cap=5 * MB).seconds
    two = simulate([SimMove("a", 1, 2, 10 * MB, 0, 0), SimMove("b", 1, 3, 10 * MB, 0, 0)], out_cap=5 * MB).seconds
    assert one == pytest.approx(2.0) and two == pytest.approx(4.0)
    # different sources and targets: in parallel
    par = simulate([SimMove("a", 1, 2, 10 * MB, 0, 0), SimMove("b", 3, 4, 10 * MB, 0, 0)], out_cap=5 * MB).seconds
    assert par == pytest.approx(2.0)


def test_target_cap_is_shared_too():
    moves = [SimMove("a", 1, 4, 10 * MB, 0, 0), SimMove("b", 2, 4, 10 * MB, 0, 0)]
    assert simulate(moves, out_cap=5 * MB).seconds == pytest.approx(2.0)  # no in cap
    assert simulate(moves, out_cap=5 * MB, in_cap={4: 5 * MB}).seconds == pytest.approx(4.0)


def test_share_grows_when_a_move_finishes():
    # 5 and 10 MB from one 5 MB/s source: both at 2.5 until t=2 (small done), then 5 MB left at 5.
    r = simulate([SimMove("s", 1, 2, 5 * MB, 0, 0), SimMove("b", 1, 3, 10 * MB, 0, 0)], out_cap=5 * MB)
    ends = dict((k, e) for k, _, e in r.moves)
    assert ends["s"] == pytest.approx(2.0) and ends["b"] == pytest.approx(3.0)


def test_concurrency_one_serialises_with_fixed_cost_holding_the_slot():
    moves = [SimMove(f"m{i}", 1, 2 + i, 10 * MB, 0, 1.0) for i in range(3)]
    r = simulate(moves, out_cap=5 * MB, concurrency=1)
    assert r.seconds == pytest.approx(3 * (2.0 + 1.0))
    assert [(k, s) for k, s, _ in r.moves] == [("m0", 0.0), ("m1", pytest.approx(3.0)), ("m2", pytest.approx(6.0))]
    # all at once: bytes shared (6 s), fixed costs overlap
    assert simulate(moves, out_cap=5 * MB).seconds == pytest.approx(6.0 + 1.0)


def test_concurrency_counts_targets_and_lets_later_moves_pass():
    # m0 and m1 both enter broker 9 (concurrency 1: m1 waits); m2 (3 -> 4) passes it in plan order.
    moves = [SimMove("m0", 1, 9, 10 * MB, 0, 0), SimMove("m1", 2, 9, 10 * MB, 0, 0), SimMove("m2", 3, 4, 10 * MB, 0, 0)]
    r = simulate(moves, out_cap=5 * MB, concurrency=1)
    starts = {k: s for k, s, _ in r.moves}
    assert starts == {"m0": 0.0, "m2": 0.0, "m1": pytest.approx(2.0)}
    assert r.seconds == pytest.approx(4.0)


def test_queued_copy_carries_what_was_written_while_it_waited():
    moves = [SimMove("a", 1, 2, 10 * MB, 0, 0), SimMove("b", 1, 3, 10 * MB, 1 * MB, 0)]
    r = simulate(moves, out_cap=5 * MB, concurrency=1)
    # b starts at 2 s with 12 MB, net 4 MB/s: 3 s
    assert r.seconds == pytest.approx(5.0)
    assert r.bytes_moved == pytest.approx(10 * MB + 12 * MB + 3 * MB)


def test_ingest_at_or_above_share_never_finishes():
    r = simulate([SimMove("hot", 1, 2, 10 * MB, 5 * MB, 0)], out_cap=5 * MB)
    assert r.seconds == math.inf and r.never == ["hot"]
    # above its share while sharing, it catches up once the other move is done
    r = simulate([SimMove("hot", 1, 2, 10 * MB, 3 * MB, 0), SimMove("x", 1, 3, 5 * MB, 0, 0)], out_cap=5 * MB)
    assert r.never == [] and math.isfinite(r.seconds)
    ends = dict((k, e) for k, _, e in r.moves)
    assert ends["x"] == pytest.approx(2.0) and ends["hot"] == pytest.approx(2.0 + (10 + 2 * 0.5) / 2)


def test_producer_seconds_above_target():
    moves = [SimMove("a", 1, 2, 10 * MB, 0, 0), SimMove("b", 3, 4, 10 * MB, 0, 0)]
    # broker 2's link 10 MB/s carries 4 MB/s ingest + 5 MB/s move = 90 %+ for 2 s; broker 4 stays under
    r = simulate(moves, out_cap=5 * MB, handover_s=0.5, link=10 * MB, ingest_by_broker={2: 4.1 * MB, 4: 1 * MB},
                 leaders_by_broker={2: 3, 4: 3})
    assert r.producer_seconds_above_target == pytest.approx(2 * 0.5 + 3 * 2.0)
    assert simulate(moves, out_cap=5 * MB, handover_s=0.5).producer_seconds_above_target == pytest.approx(1.0)


def test_partition_sizes():
    s = partition_sizes(1e15, 1000, sigma=1.5, seed=7)
    assert len(s) == 1000 and sum(s) == pytest.approx(1e15) and max(s) > 5 * min(s)
    assert s == partition_sizes(1e15, 1000, sigma=1.5, seed=7) and s != partition_sizes(1e15, 1000, sigma=1.5, seed=8)
    assert partition_sizes(10.0, 4, dist="equal") == [2.5] * 4


def _parts(n, seed=0):
    return [(f"t-{i}", b, 1e5) for i, b in enumerate(partition_sizes(1e12, n, seed=seed))]


def test_planners_deterministic_and_balanced():
    parts = _parts(96)
    a = plan_scale_out(6, 2, parts, rf=3, seed=1, fixed_s=2.0)
    assert a == plan_scale_out(6, 2, parts, rf=3, seed=1, fixed_s=2.0)
    assert a != plan_scale_out(6, 2, parts, rf=3, seed=2, fixed_s=2.0)
    assert sum(1 for m in a if m.dst == 7) == 96 * 3 // 8 and sum(1 for m in a if m.dst == 8) == 96 * 3 // 8
    assert all(m.fixed_s == 2.0 and m.ingest_bytes_per_s == 1e5 for m in a)
    d = plan_drain(6, 1, parts, rf=3, seed=1)
    assert d == plan_drain(6, 1, parts, rf=3, seed=1)
    assert len(d) == 96 * 3 // 6 and all(m.dst != 1 for m in d)
    # handover: the old owner uploads, nothing is written into the carried bytes
    h = plan_drain(4, 1, parts, rf=1, seed=1, copies=False)
    assert all(m.src == 1 and m.ingest_bytes_per_s == 0 for m in h) and len(h) == 24


def test_large_cluster_is_fast():
    # 1 PB, 500 -> 550 brokers, RF 3: ~11k moves at Cruise Control's default concurrency
    parts = [(f"t-{i}", b, 2e5) for i, b in enumerate(partition_sizes(1e15, 40000, seed=3))]
    moves = plan_scale_out(500, 50, parts, rf=3, seed=3, fixed_s=5.0)
    assert len(moves) > 10000
    for sharing in ("equal", "fifo"):
        t0 = time.perf_counter()
        r = simulate(moves, out_cap=50e6, in_cap=50e6, concurrency=5, sharing=sharing)
        assert time.perf_counter() - t0 < 3.0  # ~0.3-0.4 s on a busy 2-core box; headroom for CI
        assert len(r.moves) == len(moves) and math.isfinite(r.seconds)
    # all at once: every move at a broker is re-rated at each event there (1k moves: ~0.3 s)
    small = plan_scale_out(100, 10, parts[:4000], rf=3, seed=3, fixed_s=5.0)
    t0 = time.perf_counter()
    assert len(simulate(small, out_cap=50e6, in_cap=50e6).moves) == len(small)
    assert time.perf_counter() - t0 < 3.0


def test_fifo_sharing_staggers_moves_so_fixed_parts_overlap():
    # two equal moves off one 5 MB/s source, 1 s fixed each, concurrency 1 per broker not binding
    moves = [SimMove("a", 1, 2, 10 * MB, 0, 1.0), SimMove("b", 1, 3, 10 * MB, 0, 1.0)]
    eq = simulate(moves, out_cap=5 * MB, sharing="equal")
    ff = simulate(moves, out_cap=5 * MB, sharing="fifo")
    assert eq.seconds == pytest.approx(4.0 + 1.0)  # both end their transfer at 4 s
    assert dict((k, e) for k, _, e in ff.moves) == {"a": pytest.approx(3.0), "b": pytest.approx(5.0)}
    # with concurrency 2 on the source and four moves: equal leaves the link idle in each fixed part
    four = [SimMove(f"m{i}", 1, 2 + i, 10 * MB, 0, 1.0) for i in range(4)]
    assert simulate(four, out_cap=5 * MB, concurrency=2, sharing="equal").seconds == pytest.approx(2 * (4 + 1))
    assert simulate(four, out_cap=5 * MB, concurrency=2, sharing="fifo").seconds == pytest.approx(8 + 1)
    # fifo respects the target's cap: the older move leaves what its target cannot take
    two = [SimMove("a", 1, 2, 10 * MB, 0, 0), SimMove("b", 1, 3, 10 * MB, 0, 0)]
    ends = dict((k, e) for k, _, e in simulate(two, out_cap=5 * MB, in_cap={2: 2 * MB}, sharing="fifo").moves)
    assert ends == {"b": pytest.approx(10 / 3), "a": pytest.approx(5.0)}
    with pytest.raises(ValueError, match="sharing"):
        simulate(two, out_cap=1.0, sharing="fair")


def test_check_interval_delays_slot_release():
    moves = [SimMove(f"m{i}", 1, 2, 10 * MB, 0, 0.5) for i in range(2)]
    assert simulate(moves, out_cap=5 * MB, concurrency=1).seconds == pytest.approx(5.0)
    # done at 2.5 s, seen at the 10 s check, the next runs 10 -> 12.5
    assert simulate(moves, out_cap=5 * MB, concurrency=1, check_interval_s=10.0).seconds == pytest.approx(12.5)


def _row(p, src_ts, lc, ack, b, during, **kw):
    return {"topic": "events", "partition": p, "new_leader": kw.pop("dst", 2), "request_ts": src_ts,
            "leader_change_ts": lc, "first_ack_ts": ack, "partition_bytes": b, "bytes_written_during_move": during,
            "bandwidth_bytes_per_s": 5 * MB, "move_seconds": ack - src_ts, **kw}


def test_predict_run_from_rows():
    # two partitions leaving broker 1 at concurrency 1: 10 MB each at 5 MB/s, c = 0.5
    rows = [_row(0, 100.0, 102.4, 102.5, 10 * MB, 0), _row(3, 100.0, 104.9, 105.0, 10 * MB, 0, dst=3)]
    params = {"copies": True, "fixed_s": 0.5, "efficiency": 1.0}
    p = predict_run(rows, params, concurrency=1, sources={"events-0": 1, "events-3": 1}, check_interval_s=0)
    assert p["predicted_seconds"] == pytest.approx(5.0) and p["measured_seconds"] == pytest.approx(5.0)
    assert predict_run(rows, params, sources={"events-0": 1, "events-3": 1})["predicted_seconds"] == pytest.approx(4.5)
    assert measured_seconds(rows) == pytest.approx(5.0)
    assert sources_from_summary({"moves": [{"topic": "events", "partition": 3, "from": [1, 2]}]}) == {"events-3": 1}
    with pytest.raises(ValueError, match="source"):
        predict_run(rows, params)


def test_ack_lag_is_paid_once_not_per_round():
    moves = [SimMove(f"m{i}", 1, 2, 10 * MB, 0, 0.5) for i in range(3)]
    r = simulate(moves, out_cap=5 * MB, concurrency=1, ack_lag_s=1.0)
    assert r.seconds == pytest.approx(3 * 2.5 + 1.0)
    assert [e for _, _, e in r.moves] == [pytest.approx(3.5), pytest.approx(6.0), pytest.approx(8.5)]


def test_with_retention_a_queued_partition_keeps_its_size():
    moves = [SimMove(f"p{i}", 1, 2, 100.0, 1.0, 0.0) for i in range(2)]
    grown = simulate(moves, 11.0, None, 1)  # the second waits 10 s and grows by 10 bytes
    kept = simulate(moves, 11.0, None, 1, retention=True)
    assert kept.seconds == pytest.approx(20.0) and grown.seconds == pytest.approx(10.0 + 110.0 / 10.0)
    assert kept.bytes_moved == pytest.approx(2 * (100.0 + 10.0))
