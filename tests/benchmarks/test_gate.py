"""Regression gates (pytest-benchmark): the figures users rely on, compared with a saved baseline.

Each benchmark's timed value is one fixed amount of work, so a slower build shows as a larger
median:

- produce:  N x 4 KiB through one broker (acks=1, confluent-kafka)         -> MB/s in extra_info
- fetch:    the same N messages read back by a confluent-kafka consumer     -> MB/s
- copy:     a replication move of B bytes under throttle T; the timed value is request -> move
            finished, so its ratio to B/T is the throttle efficiency         -> ratio in extra_info
- shared:   a shared-storage move of a partition of fixed size under a light idempotent load;
            request -> target serving (its open event)                       -> move_seconds
- aggregate: Spark aggregation of a synthetic sweep (bench/analysis/aggregate.py), session kept warm
                                                                              -> rows/s

Parameter ids carry the set: `quick` (CI, a few minutes) and `full` (adds larger sizes and the
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
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic

from bench.run.cluster import Cluster
from systems.core.events import read_events
from tests.benchmarks.common import MSG, fill, timed_move
from tests.clients import admin, create_topics, wait_for
from tests.shared_harness import LoadProducer, move_timeline
from tests.shared_harness import prefill as prefill_big

MiB = 1 << 20


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
        return (one_broker.bootstrap, topic, n), {}

    benchmark.pedantic(fill, setup=setup, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["mb_per_s_median"] = round(n * MSG / benchmark.stats.stats.median / 1e6, 1)


@pytest.mark.parametrize("n", [pytest.param(20_000, id="quick"), pytest.param(60_000, id="full")])
def test_gate_fetch(benchmark, one_broker, n):
    topic = f"gate-fetch-{n}"
    create_topics(one_broker.bootstrap, [NewTopic(topic, 1, 1)])
    fill(one_broker.bootstrap, topic, n)

    def consume():
        c = Consumer({"bootstrap.servers": one_broker.bootstrap, "group.id": "gate", "enable.auto.commit": False,
                      "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = 0, time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            got += len(c.consume(10000, 0.5))
        c.close()
        assert got == n

    benchmark.pedantic(consume, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["mb_per_s_median"] = round(n * MSG / benchmark.stats.stats.median / 1e6, 1)


# -- replication: throttle efficiency ----------------------------------------------------------

@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    c = Cluster("replication", 2, str(tmp_path_factory.mktemp("gate-copy") / "c"), {})
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("size,rate", [pytest.param(16 * MiB, 8_000_000, id="quick"),
                                       pytest.param(64 * MiB, 16_000_000, id="full")])
def test_gate_copy_throttle(benchmark, two_brokers, size, rate):
    from tests.loadgen import prefill
    c = two_brokers
    topic = f"gate-copy-{size}"
    create_topics(c.bootstrap, [NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1]})])
    prefill(c.bootstrap, topic, 0, size)
    seconds: list[float] = []

    def move():
        seconds.append(timed_move(c, topic, rate))

    benchmark.pedantic(move, rounds=3, iterations=1)
    ratio = statistics.median(seconds) / (size / rate)
    benchmark.extra_info.update(bytes=size, throttle_bytes_per_s=rate, move_seconds=[round(s, 3) for s in seconds],
                                move_time_over_bytes_per_throttle=round(ratio, 3))
    assert 0.9 <= ratio <= 1.3, ratio  # Kafka's throttling_test lower bound; upper: not badly slower


# -- shared: move time at a fixed size ---------------------------------------------------------

@pytest.fixture(scope="module")
def shared3(tmp_path_factory):
    c = Cluster("shared", 3, str(tmp_path_factory.mktemp("gate-shared") / "c"),
                {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000"})
    c.start(timeout=60)
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("size", [pytest.param(64 * MiB, id="quick"), pytest.param(512 * MiB, id="full")])
def test_gate_shared_move(benchmark, shared3, size):
    c = shared3
    topic = f"gate-move-{size // MiB}"
    create_topics(c.bootstrap, [NewTopic(topic, replica_assignments={0: [1]},
                                         topic_configs={"max.message.bytes": str(16 * MiB)})])
    prefill_big(c.bootstrap, topic, 0, size)

    def drained():
        ups = [e for e in read_events(c.dir) if e["event"] == "shared_upload" and e["source"] == 1]
        return ups and ups[-1].get("backlog_bytes", 0) < 32 * MiB
    wait_for(drained, 120, "uploads to catch up", 0.2)
    load = LoadProducer(c.bootstrap, topic, 0, msgs_per_s=300, size=1000, tag=b"gate").start()
    owner = [1]
    moves: list[float] = []
    a = admin(c.bootstrap)

    def move():
        to = owner[0] % 3 + 1
        a.alter_partition_reassignments({KTP(topic, 0): [to]})
        tl = wait_for(lambda: (lambda t: t if t and t["to"] == to and "ready_ts" in t else None)(
            move_timeline(c.dir, topic, 0)), 30, "the move", 0.02)
        moves.append(tl["move_seconds"])
        owner[0] = to

    try:
        wait_for(lambda: len(load.acks) > 300, 30, "load")
        benchmark.pedantic(move, rounds=9, iterations=1, setup=lambda: time.sleep(1.0))
    finally:
        a.close()
        load.stop(60)
    assert not load.errors and load.fatal is None, load.errors[:3]
    benchmark.extra_info.update(bytes=size, move_seconds=[round(s, 3) for s in moves],
                                move_seconds_median=round(statistics.median(moves), 3))


# -- aggregation rate ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [pytest.param(1, id="full")])
def test_gate_aggregate(benchmark, tmp_path, scale):
    from bench.analysis import aggregate as agg, synthetic
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
