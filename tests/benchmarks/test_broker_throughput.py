"""Broker throughput with real clients (pytest-benchmark; `make bench-throughput`).

One broker; 4 KiB messages written by the harness's fast producer (bench.run.load.prefill, the
path every run's prefill takes: acks=1, big batches), then a confluent-kafka consumer reading the
partition back. MB/s and the broker's peak RSS are recorded in extra_info; the benchmark time is
one full transfer. A produce burst is timed here rather than as a scenario run: a run's load is
rate-shaped (a target rate, not "as fast as the broker takes"), and prefill is the harness's
producer path for writing as fast as possible.
"""
from __future__ import annotations

import threading
import time

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.admin import NewTopic

from bench.run.load import prefill
from tests.support.clients import create_topics

MSG = 4096
N = 50_000  # ~205 MB per round


class RssSampler:
    def __init__(self, pid: int):
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from bench.run.cluster import Cluster
    c = Cluster("replication", 1, str(tmp_path_factory.mktemp("tput") / "cluster"), {})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_produce_4k_acks1(benchmark, broker):
    rounds = iter(range(100))
    sampler = RssSampler(broker.brokers[1].pid)

    def setup():
        topic = f"produce-{next(rounds)}"
        create_topics(broker.bootstrap, [NewTopic(topic, 1, 1)])
        return (broker.bootstrap, [(topic, 0)], N * MSG), {"record_bytes": MSG}

    with sampler:
        benchmark.pedantic(prefill, setup=setup, rounds=3, iterations=1)
    mbps = N * MSG / benchmark.stats.stats.median / 1e6
    benchmark.extra_info.update(mb_per_s_median=round(mbps, 1), broker_peak_rss_mib=round(sampler.peak / 2**20, 1))
    print(f"\nproduce: {mbps:.0f} MB/s (median of 3), broker peak RSS {sampler.peak / 2**20:.0f} MiB")
    assert sampler.peak < 300 * 2**20


def test_fetch_4k(benchmark, broker):
    create_topics(broker.bootstrap, [NewTopic("fetch", 1, 1)])
    prefill(broker.bootstrap, [("fetch", 0)], N * MSG, record_bytes=MSG)
    sampler = RssSampler(broker.brokers[1].pid)

    def consume():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "b", "enable.auto.commit": False,
                      "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
        c.assign([TopicPartition("fetch", 0, 0)])
        n = 0
        deadline = time.monotonic() + 120
        while n < N and time.monotonic() < deadline:
            n += len(c.consume(10000, 1.0))
        c.close()
        assert n == N

    with sampler:
        benchmark.pedantic(consume, rounds=3, iterations=1)
    mbps = N * MSG / benchmark.stats.stats.median / 1e6
    benchmark.extra_info.update(mb_per_s_median=round(mbps, 1), broker_peak_rss_mib=round(sampler.peak / 2**20, 1))
    print(f"\nfetch: {mbps:.0f} MB/s (median of 3), broker peak RSS {sampler.peak / 2**20:.0f} MiB")
    assert sampler.peak < 300 * 2**20
