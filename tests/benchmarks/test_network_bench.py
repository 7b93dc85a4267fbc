"""Moves and faults on emulated links (issue 11's figures; `make bench-network` runs them).

Every benchmark is a harness run (tests/benchmarks/runs.py) with `network: {link_rate: ...}`:
each broker, the controller and the object store in a network namespace on a tbf-shaped link
(bench/run/network.py), the clients on the client link. Figures come from summary.json.

- copy at the link: an unthrottled replication move of B >= 128 MiB over a link of L bytes/s
  takes 0.9..1.2 x B/L, at 100mbit and at 400mbit;
- contention: producers' p99 ack latency during an unthrottled copy that fills the link is
  >= 5x their p99 before the move; under a replication throttle of half the link, <= 2x;
- shared moves at a 200mbit link: a 64 MiB and a 1 GiB partition move within 30 % of each other;
- a shared broker's produce throughput is bounded by the object store's link and falls with it;
  its failover recovery (kill -9 of the owner, its WAL replayed from object storage) is measured
  at the same two object-store link rates.
Rounds are move_seconds (outage seconds, seconds per acked MB) via :data:`CLOCK`; the numbers
land in extra_info and are printed.
"""
from __future__ import annotations

import json
import statistics

import pytest

from bench.history.store import read_history
from bench.units import rate_bits
from tests.benchmarks.runs import CLOCK, TOPIC, MiB, moves_of, round_robin
from tests.support.clients import netns_unavailable

# Skipped, like tests/test_network.py, only where `ip netns add` is not permitted.


@pytest.fixture(autouse=True, scope="module")
def links_possible():
    """These measurements run on emulated links: without network namespaces they fail saying why."""
    why = netns_unavailable()
    assert why is None, f"emulated links cannot be made here: {why}"

# The prefill and the load cross the client link; a fast one keeps the prefill short. The
# brokers' (and object store's) links are the ones measured.
CLIENT_LINK = "2gbit"


def _bytes_per_s(rate: str) -> float:
    return rate_bits(rate) / 8


def _valid(run) -> dict:
    run_dir, s = run
    assert not s.get("error"), f"{run_dir}: {s.get('error')}"
    assert s["checks"]["valid"] is True, f"{run_dir}: failed {s['checks']['failed']}, unknown {s['checks']['unknown']}"
    return s


# -- 1. an unthrottled copy runs at the link's rate ------------------------------------------

@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("link,size", [("100mbit", 128 * MiB), ("400mbit", 512 * MiB)])
def test_unthrottled_copy_at_link_rate(benchmark, run_scenario, link, size):
    rate = _bytes_per_s(link)
    sc = round_robin("bench-net-copy", "replication", 2, size, moves=2, every_s=round(1.4 * size / rate + 4),
                     rate=100.0)
    sc["network"] = {"link_rate": link, "client_link_rate": CLIENT_LINK}
    run = run_scenario(sc)[0]
    moves = moves_of(run)
    seconds = [m["move_seconds"] for m in moves]
    CLOCK.rounds(benchmark, seconds)
    ratios = [m["move_seconds"] / (m["partition_bytes"] / rate) for m in moves]
    ratio = statistics.median(ratios)
    links = run[1]["links"]
    benchmark.extra_info.update(link=link, bytes=size, move_seconds=[round(s, 3) for s in seconds],
                                partition_bytes=[m["partition_bytes"] for m in moves],
                                ratios=[round(r, 3) for r in ratios], ratio_to_bytes_over_link=round(ratio, 3),
                                links={n: {w: links[n][w]["peak_utilisation"] for w in ("tx", "rx")}
                                       for n in ("broker-1", "broker-2")})
    print(f"\nunthrottled copy at {link}, {size / MiB:.0f} MiB: move seconds {[round(s, 2) for s in seconds]}, "
          f"ratios {[round(r, 3) for r in ratios]}, median = {ratio:.3f} x B/L; "
          f"peak utilisation {benchmark.extra_info['links']}")
    assert 0.9 <= ratio <= 1.2, ratio


# -- 2. contention: the copy and the producers share the link ----------------------------------

CONTENTION_LINK = "100mbit"


def _contention_scenario(size: int, throttle: int | None) -> dict:
    """Brokers 1 and 2 on 100mbit links; partition 0 of `moved` (on broker 1, ``size``
    prefilled) moved to broker 2 at 12 s while one producer (acks=all) writes 200 msgs/s of
    1000 B over `moved` and the two partitions of `load` (replication factor 2, one leader per
    broker). The copy fills broker 1's sending side and broker 2's receiving side: the writes
    to broker 2, the acks of broker 1 and the followers' fetches of `load` queue behind it."""
    system = {"kind": "replication", "brokers": 2}
    if throttle is not None:
        system["replication_throttle_bytes_per_s"] = throttle
        # The throttle caps the copy's mean rate; a fetch response still leaves at line rate.
        # Kafka's default 1 MiB response is 84 ms of a 100mbit link (0.8 ms of 10gbit): scaled
        # down with the link, a response takes ~5 ms and producers' packets pass between them.
        system["extra"] = {"replica.fetch.max.bytes": str(64 * 1024)}
    # Prefill batches of one 64 KiB record, so a fetch response can be that small too (a
    # response carries at least one whole batch).
    prefill_batch = 65 * 1024
    return {
        "name": "bench-net-contention",
        "system": system,
        "workload": {"topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 1},
                                {"name": "load", "partitions": 2, "replication_factor": 2}],
                     "message_bytes": 1000, "produce_rate_msgs_per_s": 200.0, "producers": 1, "duration_s": 30.0},
        "prefill": {"bytes_per_partition": size, "topics": [TOPIC], "batch_bytes": prefill_batch},
        "actions": [{"at_s": 12.0, "kind": "reassign", "topic": TOPIC, "partition": 0, "to": [2]}],
        "network": {"link_rate": CONTENTION_LINK, "client_link_rate": CLIENT_LINK},
    }


def _before_during(s: dict) -> tuple[dict, dict]:
    [lat] = s["checks"]["latency"]["actions"]
    return lat["all"]["before"], lat["all"]["during"]


@pytest.mark.benchmark(timer=CLOCK)
def test_copy_contention(benchmark, run_scenario):
    half = int(_bytes_per_s(CONTENTION_LINK) / 2)
    # Both copies last ~11 s: 128 MiB at the link, 64 MiB at half of it.
    runs = {"unthrottled": _valid(run_scenario(_contention_scenario(128 * MiB, None))[0]),
            "throttled_half_link": _valid(run_scenario(_contention_scenario(64 * MiB, half))[0])}
    res = {}
    for name, s in runs.items():
        [move] = s["moves"]
        before, during = _before_during(s)
        res[name] = {"move_seconds": round(move["move_seconds"], 3), "partition_bytes": move["partition_bytes"],
                     "p50_before_ms": round(before["p50_ms"], 2), "p50_during_ms": round(during["p50_ms"], 2),
                     "p99_before_ms": round(before["p99_ms"], 2), "p99_during_ms": round(during["p99_ms"], 2),
                     "samples_before": before["count"], "samples_during": during["count"],
                     "p99_ratio": round(during["p99_ms"] / before["p99_ms"], 2),
                     "broker_1_tx_peak_utilisation": s["links"]["broker-1"]["tx"]["peak_utilisation"]}
        print(f"\ncontention at {CONTENTION_LINK}, {name}: {res[name]}")
    CLOCK.rounds(benchmark, [r["move_seconds"] for r in res.values()])
    benchmark.extra_info.update(link=CONTENTION_LINK, throttle_bytes_per_s=half, **res)
    for r in res.values():
        assert r["samples_before"] >= 1000 and r["samples_during"] >= 1000, r
    assert res["unthrottled"]["p99_ratio"] >= 5, res["unthrottled"]
    # Holds only with the fetch size scaled to the link (above): a throttled copy's ~1 MB fetch
    # responses still leave at line rate and overflow the links' 20 ms tbf queue
    # (docs/measurements/network.md).
    assert res["throttled_half_link"]["p99_ratio"] <= 2, res["throttled_half_link"]


# -- 3. shared moves do not grow with the partition --------------------------------------------

SHARED_LINK = "200mbit"
SHARED_SIZES = {"64MiB": 64 * MiB, "1GiB": 1024 * MiB}


@pytest.mark.benchmark(timer=CLOCK)
def test_shared_move_size_independent(benchmark, run_scenario):
    sc = round_robin("bench-net-shared-moves", "shared", 3, 0, moves=4, every_s=3.0, first_s=8.0, rate=300.0)
    sc["matrix"] = {"prefill.bytes_per_partition": list(SHARED_SIZES.values())}
    sc["network"] = {"link_rate": SHARED_LINK, "client_link_rate": CLIENT_LINK}
    out = {name: moves_of(run) for name, run in zip(SHARED_SIZES, run_scenario(sc))}
    CLOCK.rounds(benchmark, [m["move_seconds"] for moves in out.values() for m in moves])
    p50 = {name: statistics.median(m["move_seconds"] for m in moves) for name, moves in out.items()}
    ratio = max(p50.values()) / min(p50.values())
    for name, moves in out.items():
        benchmark.extra_info[name] = {"move_seconds": [round(m["move_seconds"], 3) for m in moves],
                                      "move_seconds_p50": round(p50[name], 3),
                                      "partition_bytes": [m["partition_bytes"] for m in moves],
                                      "bytes_moved_objstore": [m["bytes_moved_objstore"] for m in moves]}
        print(f"\nshared move at {SHARED_LINK}, {name}: {benchmark.extra_info[name]}")
    benchmark.extra_info.update(link=SHARED_LINK, size_ratio_p50=round(ratio, 3))
    print(f"size ratio of the medians: {ratio:.3f}")
    assert ratio <= 1.3, ratio


# -- 4. a shared broker is bounded by its object-store link ------------------------------------

OBJSTORE_LINKS = ("40mbit", "160mbit")
FAST_LINK = "1gbit"


@pytest.mark.benchmark(timer=CLOCK)
def test_shared_throughput_bounded_by_objstore_link(benchmark, run_scenario):
    sc = {
        "name": "bench-net-shared-throughput",
        # 50 ms WAL interval: the 250 ms default caps one broker near 20 MB/s by itself
        # (test_shared_bench), which would hide the link.
        "system": {"kind": "shared", "brokers": 1, "wal_batch_interval_ms": 50.0},
        "workload": {"topics": [{"name": "load", "partitions": 4, "replication_factor": 1}], "message_bytes": 4096,
                     "produce_rate_msgs_per_s": 10000.0, "producers": 2, "duration_s": 15.0},
        "network": {"link_rate": FAST_LINK, "client_link_rate": CLIENT_LINK},
        "matrix": {"network.object_store_link_rate": list(OBJSTORE_LINKS)},
    }
    res = {}
    for link, (run_dir, s) in zip(OBJSTORE_LINKS, run_scenario(sc)):
        _valid((run_dir, s))
        p, os_link = s["producer"], s["links"]["objstore"]
        res[link] = {"mb_per_s": round(p["throughput_mb_per_s"], 2),
                     "link_mb_per_s": round(_bytes_per_s(link) / 1e6, 2),
                     "share_of_link": round(p["throughput_mb_per_s"] * 1e6 / _bytes_per_s(link), 3),
                     "acked": p["acked"], "ack_ms_p99": round(p["latency_ms"]["p99"], 1),
                     "objstore_rx_mean_utilisation": os_link["rx"]["mean_utilisation"],
                     "objstore_rx_peak_utilisation": os_link["rx"]["peak_utilisation"],
                     "broker_cpu": s["cpu"].get("broker-1")}
        print(f"\nshared produce, object-store link {link}: {res[link]}")
    CLOCK.rounds(benchmark, [1 / res[link]["mb_per_s"] for link in OBJSTORE_LINKS])  # seconds per acked MB
    benchmark.extra_info.update(res)
    slow, fast = (res[link] for link in OBJSTORE_LINKS)
    for r in res.values():
        assert r["share_of_link"] <= 1.0, r  # every acked byte crossed the object store's link
    assert slow["objstore_rx_mean_utilisation"] >= 0.7, slow  # the slow link is what limits
    assert slow["mb_per_s"] < 0.6 * fast["mb_per_s"], res


# The shared controller's journal event for a replayed WAL (systems/shared/controller.py); the
# runner keeps journal events under their own name.
WAL_RECOVERED = "shared_wal_recovered"


def _wal_recovery(run_dir, broker: int) -> dict:
    """The controller's replay of ``broker``'s first incarnation: WAL bytes and milliseconds."""
    t = read_history(run_dir / "history.parquet")
    [d] = [json.loads(d) for e, d in zip(t["event"].to_pylist(), t["detail"].to_pylist())
           if e == WAL_RECOVERED and json.loads(d)["broker"] == broker and json.loads(d)["wal_bytes"] > 0]
    return d


@pytest.mark.benchmark(timer=CLOCK)
def test_shared_failover_recovery_vs_objstore_link(benchmark, run_scenario):
    # kill -9 of broker 1 at 14 s; nothing is uploaded before (threshold and interval above the
    # run), so the controller must replay all of broker 1's WAL from object storage (~2 MB/s
    # x 14 s) before its partition gets a new owner. Restarted well after any failover.
    sc = {
        "name": "bench-net-shared-failover",
        "system": {"kind": "shared", "brokers": 3, "wal_upload_threshold_bytes": 512 * MiB,
                   "extra": {"wal.upload.interval.ms": 600000, "broker.session.timeout.ms": 3000,
                             "broker.heartbeat.interval.ms": 500}},
        "workload": {"topics": [{"name": "hot", "partitions": 3, "replication_factor": 1}], "message_bytes": 4096,
                     "produce_rate_msgs_per_s": 1500.0, "producers": 1, "duration_s": 40.0},
        "actions": [{"at_s": 14.0, "kind": "kill_broker", "broker": 1},
                    {"at_s": 36.0, "kind": "restart_broker", "broker": 1}],
        "network": {"link_rate": FAST_LINK, "client_link_rate": CLIENT_LINK},
        "matrix": {"network.object_store_link_rate": list(OBJSTORE_LINKS)},
    }
    res = {}
    for link, (run_dir, s) in zip(OBJSTORE_LINKS, run_scenario(sc)):
        _valid((run_dir, s))
        [o] = s["outages"]
        wal = _wal_recovery(run_dir, 1)
        res[link] = {"wal_bytes_replayed": wal["wal_bytes"], "wal_replay_seconds": round(wal["recovery_ms"] / 1000, 3),
                     "wal_replay_mb_per_s": round(wal["wal_bytes"] / wal["recovery_ms"] / 1000, 2),
                     "link_mb_per_s": round(_bytes_per_s(link) / 1e6, 2),
                     "unavailable_seconds": round(o["unavailable_seconds"], 3),
                     "recovery_seconds": round(o["recovery_seconds"], 3), "recovered_by": o["recovered_by"],
                     "first_ack_seconds": round(o["first_ack_seconds"], 3),
                     "objstore_tx_peak_utilisation": s["links"]["objstore"]["tx"]["peak_utilisation"],
                     "producer_mb_per_s": round(s["producer"]["throughput_mb_per_s"], 2)}
        print(f"\nshared failover, object-store link {link}: {res[link]}")
    CLOCK.rounds(benchmark, [res[link]["unavailable_seconds"] for link in OBJSTORE_LINKS])
    benchmark.extra_info.update(res)
    slow, fast = (res[link] for link in OBJSTORE_LINKS)
    for r in res.values():
        assert r["recovered_by"] == "leader_change", r  # failed over, not back with the restart
        assert r["wal_bytes_replayed"] >= 10e6, r  # enough WAL for the link to matter
        # the replay reads every WAL byte through the object store's link (and writes it back)
        assert r["wal_replay_mb_per_s"] <= r["link_mb_per_s"], r
    assert slow["wal_replay_seconds"] > fast["wal_replay_seconds"], res
    assert slow["unavailable_seconds"] > fast["unavailable_seconds"], res
