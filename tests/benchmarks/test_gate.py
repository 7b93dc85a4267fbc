"""Regression gates (pytest-benchmark): the figures users rely on, compared with a saved baseline,
and ratios measured within one session that must hold on any machine of this kind.

Timing gates (a slower build shows as a larger median, compared with the baseline in .benchmarks/):

- produce:  N x 4 KiB into one broker with the harness's fast producer (bench.run.load.prefill,
            acks=all, one replica); a round is the CPU seconds of client and broker (:class:`CpuClock`)
                                                                   -> MB per CPU second in extra_info
- fetch:    the same N messages read back by a confluent-kafka consumer; CPU seconds likewise
- copy:     a harness run on emulated 100mbit links moving a replication partition of B bytes
            under replication throttle T, 3 moves; each round is one move's move_seconds
- shared:   a harness run on emulated links moving a shared-storage partition of fixed size, 9
            moves; each round is one move's move_seconds                    -> phases in extra_info
- load CPU: the load process's CPU seconds per 1,000 acked messages in the copy and the shared
            run (same load: LOAD); one round, the run's figure
- aggregate: Spark aggregation of a synthetic sweep (bench/analysis/aggregate.py), session kept warm
                                                                              -> rows/s

Ratio gates (both sides measured in the same run or session, so machine speed cancels; absolute
bounds, each with its reason at its assert):

- copy:      median of move_seconds / (bytes_moved_inter_broker / T)  in [0.9, 1.3]
- shared:    median move_seconds at 1 GiB / at 64 MiB                  in [0.75, 1.3]   (full)
- load CPU:  shared / copy, CPU seconds per 1,000 messages             <= 1.5

The move gates are scenario runs through the runner (tests/benchmarks/runs.py): their rounds are
the moves' move_seconds from summary.json, and a run whose safety checks fail fails the gate. Each
scenario runs once per session (:func:`gate_run`); the tests that read it share it.

Parameter ids carry the set: `quick` (CI, under two minutes) and `full` (adds larger sizes, the
size ratio and the aggregation). Run and compare: `make bench-gate-quick` / `make bench-gate`;
record a baseline: `make bench-gate-baseline` (README, "Tests": tolerances and how the noise was measured).
"""
from __future__ import annotations

import statistics
import time

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.admin import NewTopic

from bench.run.cluster import Cluster
from bench.run.load import prefill
from tests.benchmarks.runs import CLOCK, MiB, moves_of, round_robin
from tests.support.clients import create_topics, netns_unavailable

MSG = 4096
# The move gates run on emulated links; skipped only where `ip netns add` is not permitted.


@pytest.fixture(scope="module")
def links_possible():
    """The gates on emulated links: without network namespaces they fail saying why."""
    why = netns_unavailable()
    assert why is None, f"emulated links cannot be made here: {why}"


# -- broker produce / fetch cost ----------------------------------------------------------------

class CpuClock:
    """A pytest-benchmark timer (``@pytest.mark.benchmark(timer=CPU)``): CPU seconds of this
    process (the client and its librdkafka threads) plus the broker's. Other work on this 2-core
    machine stretched the wall time of the same produce up to 6x between runs, the CPU it takes
    far less (README, "Tests")."""

    __name__ = "CpuClock"  # pytest-benchmark names the timer in its saved results

    def __init__(self) -> None:
        self.broker: psutil.Process | None = None

    def __call__(self) -> float:
        t = self.broker.cpu_times()
        return time.process_time() + t.user + t.system


CPU = CpuClock()


@pytest.fixture(scope="module")
def one_broker(tmp_path_factory):
    c = Cluster("replication", 1, str(tmp_path_factory.mktemp("gate-tput") / "c"), {})
    c.start()
    try:
        [broker] = c.brokers.values()
        CPU.broker = psutil.Process(broker.pid)
        yield c
    finally:
        c.stop()


def _mb_per_cpu_s(benchmark, n: int) -> None:
    benchmark.extra_info["mb_per_cpu_s_median"] = round(n * MSG / benchmark.stats.stats.median / 1e6, 1)


@pytest.mark.benchmark(timer=CPU)
@pytest.mark.parametrize("n", [pytest.param(20_000, id="quick"), pytest.param(60_000, id="full")])
def test_gate_produce(benchmark, one_broker, n):
    rounds = iter(range(1000))

    def setup():
        topic = f"gate-produce-{n}-{next(rounds)}"
        create_topics(one_broker.bootstrap, [NewTopic(topic, 1, 1)])
        return (one_broker.bootstrap, [(topic, 0)], n * MSG), {"record_bytes": MSG}

    benchmark.pedantic(prefill, setup=setup, rounds=7, iterations=1, warmup_rounds=1)
    _mb_per_cpu_s(benchmark, n)


@pytest.mark.benchmark(timer=CPU)
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
    _mb_per_cpu_s(benchmark, n)


# -- scenario runs shared by the move, ratio and load-CPU gates ----------------------------------

# The same load in every gate run, so the load process's CPU per message compares across systems.
LOAD = {"rate": 1000.0, "message_bytes": 256}
THROTTLE = 8_000_000  # B/s: below the brokers' 100mbit (12.5 MB/s) link, so the throttle sets the pace
COPY_BYTES = {"quick": 16 * MiB, "full": 64 * MiB}
SHARED_BYTES = {"quick": 64 * MiB, "full": 1024 * MiB}


def _scenario(system: str, gate_set: str) -> dict:
    if system == "replication":
        # Two brokers on 100mbit links, the partition alternating between them; a move gets twice
        # its nominal copy time before the next one is requested.
        size = COPY_BYTES[gate_set]
        sc = round_robin(f"gate-copy-{gate_set}", system, 2, size, moves=3, every_s=round(2 * size / THROTTLE + 2),
                         first_s=3.0, replication_throttle_bytes_per_s=THROTTLE, **LOAD)
        sc["network"] = {"link_rate": "100mbit", "client_link_rate": "1gbit"}
    else:
        # Links fast enough that the 1 GiB prefill stays short: a shared move does not copy.
        sc = round_robin(f"gate-shared-{gate_set}", system, 3, SHARED_BYTES[gate_set], moves=9, every_s=2.0,
                         first_s=3.0, **LOAD)
        sc["network"] = {"link_rate": "1gbit"}
    # The baseline in .benchmarks/ was recorded at linger.ms 250; at the default 5 librdkafka spins
    # against the shared system's slower acks (3.3x the copy system's CPU per message, measured and
    # reported by the default suite's sensitivity table): the gate keeps watching for regressions
    # on the terms its baseline was taken on until that spin is fixed.
    sc["workload"]["linger_ms"] = 250
    return sc


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    """gate_run(system, set) -> (run_dir, summary): that gate scenario, run once per session
    through the harness's runner (tests/conftest.py's ``run_scenario`` does the same per test)."""
    from bench.run.runner import run_scenario
    from bench.scenario import parse_scenario

    done: dict[tuple[str, str], tuple] = {}

    def get(system: str, gate_set: str):
        if (system, gate_set) not in done:
            sc = parse_scenario(_scenario(system, gate_set), "<gate>", [])
            out = tmp_path_factory.mktemp(f"gate-{system}-{gate_set}") / "run"
            done[system, gate_set] = run_scenario(sc, out_dir=out, progress=False)[0]
        return done[system, gate_set]

    return get


SETS = [pytest.param("quick", id="quick"), pytest.param("full", id="full")]


# -- replication: throttle efficiency on links -------------------------------------------------

@pytest.mark.usefixtures("links_possible")
@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("gate_set", SETS)
def test_gate_copy_throttle(benchmark, gate_run, gate_set):
    moves = moves_of(gate_run("replication", gate_set))
    seconds = [m["move_seconds"] for m in moves]
    CLOCK.rounds(benchmark, seconds)
    # Bytes the throttle let through for this move (the partition at the request plus what the
    # load wrote during the copy), both sides from the same run.
    ratios = [m["move_seconds"] / (m["bytes_moved_inter_broker"] / THROTTLE) for m in moves]
    ratio = statistics.median(ratios)
    benchmark.extra_info.update(bytes=COPY_BYTES[gate_set], throttle_bytes_per_s=THROTTLE, link_rate="100mbit",
                                move_seconds=[round(s, 3) for s in seconds],
                                bytes_moved_inter_broker=[m["bytes_moved_inter_broker"] for m in moves],
                                move_time_over_bytes_per_throttle=[round(r, 3) for r in ratios],
                                move_time_over_bytes_per_throttle_median=round(ratio, 3))
    # Lower 0.9: Kafka's throttling_test bound (the copy may not beat the throttle by more than
    # the quota window's slack); upper 1.3: the fixed part of a move (request, ISR join,
    # election, first ack: ~0.3 s) plus tbf's framing (~5 %) on a ~2 s move, with room for noise.
    assert 0.9 <= ratio <= 1.3, ratios


# -- shared: move time at a fixed size, and its independence of the size ------------------------

@pytest.mark.usefixtures("links_possible")
@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("gate_set", SETS)
def test_gate_shared_move(benchmark, gate_run, gate_set):
    moves = moves_of(gate_run("shared", gate_set))
    seconds = [m["move_seconds"] for m in moves]
    CLOCK.rounds(benchmark, seconds)
    phases = sorted({p for m in moves for p in m["phases"]})
    benchmark.extra_info.update(
        bytes=SHARED_BYTES[gate_set], move_seconds=[round(s, 3) for s in seconds],
        move_seconds_median=round(statistics.median(seconds), 3),
        phases_seconds_median={p: round(statistics.median(m["phases"].get(p, 0.0) for m in moves), 4)
                               for p in phases},
        bytes_moved_objstore_median=statistics.median(m["bytes_moved_objstore"] for m in moves))
    if gate_set == "full":
        small = statistics.median(m["move_seconds"] for m in moves_of(gate_run("shared", "quick")))
        ratio = statistics.median(seconds) / small
        benchmark.extra_info.update(move_seconds_median_64MiB=round(small, 3), size_ratio_1GiB_over_64MiB=round(ratio, 3))
        # A move uploads only the un-uploaded tail (at most wal.upload.threshold.bytes, 32 MiB)
        # and hands ownership over: 16x the partition may not cost 30 % more (nor, by symmetry,
        # 25 % less: that would mean the small run was slowed by something else).
        assert 0.75 <= ratio <= 1.3, (statistics.median(seconds), small)


# -- the load generator's cost per message against each system ----------------------------------

@pytest.mark.usefixtures("links_possible")
@pytest.mark.benchmark(timer=CLOCK)
@pytest.mark.parametrize("system", ["replication", "shared"])
@pytest.mark.parametrize("gate_set", SETS)
def test_gate_load_cpu(benchmark, gate_run, gate_set, system):
    run = gate_run(system, gate_set)
    moves_of(run)  # the run completed and passed its checks
    own = run[1]["producer"]["load_cpu_s_per_1000_msgs"]  # the load process's CPU over its acked rate
    assert own is not None, run[0]
    CLOCK.rounds(benchmark, [own])
    benchmark.extra_info.update(load=LOAD, load_cpu_seconds_per_1000_msgs=round(own, 4))
    if system != "replication":
        copy = gate_run("replication", gate_set)[1]["producer"]["load_cpu_s_per_1000_msgs"]
        benchmark.extra_info.update(over_replication=round(own / copy, 3))
        # The load generator's cost per message must not depend on the system under test
        # (issue 12's target: within 1.5x of its cost against the copy system).
        assert own / copy <= 1.5, (own, copy)


# -- aggregation rate ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [pytest.param(1, id="full")])
def test_gate_aggregate(benchmark, tmp_path, scale):
    from bench.analysis import aggregate as agg
    from tests.support import synthetic
    runs = synthetic.write_sweep(tmp_path / "runs", rate=400.0 * scale, duration_s=30.0)
    rows = 0
    import pyarrow.parquet as pq
    for r in runs:
        rows += sum(pq.read_metadata(p).num_rows for p in r.rglob("*.parquet"))
    with agg.spark_session() as spark:
        # The aggregation itself; the projection has its own benchmark (test_projection_bench.py).
        agg.aggregate([tmp_path / "runs"], tmp_path / "out", spark=spark, write=False, project=False)  # warm-up
        benchmark.pedantic(lambda: agg.aggregate([tmp_path / "runs"], tmp_path / "out", spark=spark, write=False,
                                                 project=False), rounds=3, iterations=1)
    benchmark.extra_info.update(runs=len(runs), history_rows=rows,
                                rows_per_s_median=round(rows / benchmark.stats.stats.median))
