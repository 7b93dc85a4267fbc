"""Regression gates (pytest-benchmark): the figures users rely on, compared with a saved baseline.

Each benchmark's timed value is one fixed amount of work, so a slower build shows as a larger
median:

- produce:  N x 4 KiB into one broker with the harness's fast producer (bench.run.load.prefill,
            acks=1)                                                         -> MB/s in extra_info
- fetch:    the same N messages read back by a confluent-kafka consumer     -> MB/s
- copy:     a harness run moving a replication partition of B bytes under throttle T, 3 moves;
            each round is one move's move_seconds (request -> first ack on the new owner), so
            its ratio to B/T is the throttle efficiency                     -> ratio in extra_info
- shared:   a harness run moving a shared-storage partition of fixed size under a light load,
            9 moves; each round is one move's move_seconds                  -> phases in extra_info
- aggregate: Spark aggregation of a synthetic sweep (bench/analysis/aggregate.py), session kept warm
                                                                              -> rows/s

The move gates are scenario runs through the runner (tests/benchmarks/runs.py): their rounds are
the moves' move_seconds from summary.json, and a run whose safety checks fail fails the gate.

Parameter ids carry the set: `quick` (CI, under two minutes) and `full` (adds larger sizes and the
aggregation). Run and compare (see docs/faults.md, "Regression gates"):

    pytest tests/benchmarks/test_gate.py --benchmark-only -k quick \
        --benchmark-storage=file://.benchmarks --benchmark-compare \
        --benchmark-compare-fail=median:35%
"""
from __future__ import annotations

import statistics
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.admin import NewTopic

from bench.run.cluster import Cluster
from bench.run.load import prefill
from tests.benchmarks.runs import CLOCK, MiB, moves_of, round_robin
from tests.clients import create_topics

MSG = 4096


# -- broker produce / fetch throughput ---------------------------------------------------------

@pytest.fixture(scope="module")
def one_broker(tmp_path_factory):
    c = Cluster("replication", 1, str(tmp_path_factory.mktemp("gate-tput") / "c"), {})
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("n", [pytest.param(20_000, id="quick"), pytest.param(60_000, id="full")])
def test_gate_produce(benchmark, one_broker, n):
    rounds = iter(range(1000))

    def setup():
        topic = f"gate-produce-{n}-{next(rounds)}"
        create_topics(one_broker.bootstrap, [NewTopic(topic, 1, 1)])
        return (one_broker.bootstrap, [(topic, 0)], n * MSG), {"record_bytes": MSG}

    benchmark.pedantic(prefill, setup=setup, rounds=7, iterations=1, warmup_rounds=1)
    benchmark.extra_info["mb_per_s_median"] = round(n * MSG / benchmark.stats.stats.median / 1e6, 1)


@pytest.mark.parametrize("n", [pytest.param(20_000, id="quick"), pytest.param(60_000, id="full")])
def test_gate_fetch(benchmark, one_broker, n):
    topic = f"gate-fetch-{n}"
    create_topics(one_broker.bootstrap, [NewTopic(topic, 1, 1)])
    prefill(one_broker.bootstrap, [(topic, 0)], n * MSG, record_bytes=MSG)

    def consume():
        c = Consumer({"bootstrap.servers": one_broker.bootstrap, "group.id": "gate", "enable.auto.commit": False,
                      "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = 0, time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            got += len(c.consume(10000, 0.5))
        c.close()
        assert got == n

    benchmark.pedantic(consume, rounds=7, iterations=1, warmup_rounds=1)
    benchmark.extra_info["mb_per_s_median"] = round(n * MSG / benchmark.stats.stats.median / 1e6, 1)


# -- replication: throttle efficiency ----------------------------------------------------------

@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("size,rate", [pytest.param(16 * MiB, 8_000_000, id="quick"),
                                       pytest.param(64 * MiB, 16_000_000, id="full")])
def test_gate_copy_throttle(benchmark, run_scenario, size, rate):
    # Two brokers, the partition alternating between them; a move gets twice its nominal copy
    # time before the next one is requested; a light load (0.1 MB/s) so the partition hardly grows.
    sc = round_robin("gate-copy", "replication", 2, size, moves=3, every_s=round(2 * size / rate + 2),
                     first_s=3.0, rate=100.0, replication_throttle_bytes_per_s=rate)
    moves = moves_of(run_scenario(sc)[0])
    seconds = [m["move_seconds"] for m in moves]
    CLOCK.rounds(benchmark, seconds)
    ratio = statistics.median(m["move_seconds"] / (m["partition_bytes"] / rate) for m in moves)
    benchmark.extra_info.update(bytes=size, throttle_bytes_per_s=rate, move_seconds=[round(s, 3) for s in seconds],
                                bytes_moved_inter_broker=[m["bytes_moved_inter_broker"] for m in moves],
                                move_time_over_bytes_per_throttle=round(ratio, 3))
    assert 0.9 <= ratio <= 1.3, ratio  # Kafka's throttling_test lower bound; upper: not badly slower


# -- shared: move time at a fixed size ---------------------------------------------------------

@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("size", [pytest.param(64 * MiB, id="quick"), pytest.param(512 * MiB, id="full")])
def test_gate_shared_move(benchmark, run_scenario, size):
    sc = round_robin("gate-shared", "shared", 3, size, moves=9, every_s=2.0)
    moves = moves_of(run_scenario(sc)[0])
    seconds = [m["move_seconds"] for m in moves]
    CLOCK.rounds(benchmark, seconds)
    phases = sorted({p for m in moves for p in m["phases"]})
    benchmark.extra_info.update(
        bytes=size, move_seconds=[round(s, 3) for s in seconds],
        move_seconds_median=round(statistics.median(seconds), 3),
        phases_seconds_median={p: round(statistics.median(m["phases"].get(p, 0.0) for m in moves), 4)
                               for p in phases},
        bytes_moved_objstore_median=statistics.median(m["bytes_moved_objstore"] for m in moves))


# -- aggregation rate ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [pytest.param(1, id="full")])
def test_gate_aggregate(benchmark, tmp_path, scale):
    from bench.analysis import aggregate as agg
    from bench.analysis import synthetic
    runs = synthetic.write_sweep(tmp_path / "runs", rate=400.0 * scale, duration_s=30.0)
    rows = 0
    import pyarrow.parquet as pq
    for r in runs:
        rows += sum(pq.read_metadata(p).num_rows for p in r.rglob("*.parquet"))
    with agg.spark_session() as spark:
        agg.aggregate([tmp_path / "runs"], tmp_path / "out", spark=spark, write=False)  # warm-up
        benchmark.pedantic(lambda: agg.aggregate([tmp_path / "runs"], tmp_path / "out", spark=spark, write=False),
                           rounds=3, iterations=1)
    benchmark.extra_info.update(runs=len(runs), history_rows=rows,
                                rows_per_s_median=round(rows / benchmark.stats.stats.median))
