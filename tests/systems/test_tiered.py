"""The tiered-storage system (systems/tiered): KIP-405 uploads and local retention, a moved
replica that starts after the last tiered offset (KIP-1023) or at the leader's local log start
(KIP-405), consumers served from object storage, and kill -9 of either end of a tiered move.

One cluster of 4 brokers for the module (SeaweedFS as the object store); each test uses its own
topics with 256 KiB segments so a few MiB tier several segments."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest
from confluent_kafka import Consumer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition as KTP

from tests.support.clients import admin, consume_all, idempotent_producer, incremental_alter, produce_all, wait_for
from tests.support.clusters import start_cluster

KiB, MiB = 1 << 10, 1 << 20
SEGMENT = 256 * KiB
CONFIG = {"remote.log.manager.task.interval.ms": 200, "replica.lag.time.max.ms": 10000,
          "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory, "tiered", 4, CONFIG)
    yield c
    c.stop()


def _topic(c, name: str, replicas: list[int], **configs) -> None:
    a = admin(c.bootstrap)
    try:
        cfg = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
               "local.retention.bytes": str(2 * SEGMENT), **{k.replace("_", "."): str(v) for k, v in configs.items()}}
        a.create_topics([NewTopic(name, -1, -1, replica_assignments={0: replicas}, topic_configs=cfg)])
    finally:
        a.close()


def _fill(c, topic: str, n: int, size: int = 4 * KiB, tag: str = "m") -> list:
    p = idempotent_producer(c.bootstrap, **{"linger.ms": 5, "log_level": 0})
    return produce_all(p, [(topic, 0, None, f"{tag}{i:07d}".encode().ljust(size, b"."), None) for i in range(n)])


def _metrics(c, bid: int, topic: str) -> dict:
    path = os.path.join(c.dir, f"broker-{bid}", "metrics.json")
    if not os.path.exists(path):  # the broker writes it once a second, the first time a second after start
        return {}
    with open(path) as f:
        return json.load(f)["partitions"].get(f"{topic}-0", {})


def _events(c, bid: int, name: str, topic: str) -> list[dict]:
    out = []
    with open(os.path.join(c.dir, f"broker-{bid}", "events.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == name and rec.get("topic") == topic:
                out.append(rec)
    return out


def _leader(c, topic: str) -> int:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "meta", "log_level": 0})
    try:
        return cons.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
    finally:
        cons.close()


def _replicas(c, topic: str) -> list[int]:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "meta", "log_level": 0})
    try:
        return list(cons.list_topics(topic, timeout=5).topics[topic].partitions[0].replicas)
    finally:
        cons.close()


def _tiered_upto(c, bid: int, topic: str, offset: int) -> bool:
    m = _metrics(c, bid, topic)
    return m.get("highest_tiered_offset", -1) >= offset and m.get("local_log_start_offset", 0) > 0


def _check_all(c, topic: str, acked: list) -> None:
    got = consume_all(c.bootstrap, {(topic, 0): len(acked)}, timeout=60)[(topic, 0)]
    assert [v for _, _, v, _ in got][:len(acked)] == [m.value() for m in acked]
    assert [o for o, _, _, _ in got][:len(acked)] == list(range(len(acked)))


def test_segments_tiered_then_deleted_locally_and_read_back(cluster):
    """Closed segments are uploaded, local copies go once tiered and past local.retention.bytes,
    and a consumer reading from offset 0 is served from object storage."""
    _topic(cluster, "tier-a", [1, 2, 3])
    acked = _fill(cluster, "tier-a", 1200)  # ~4.9 MiB: ~19 segments of 256 KiB
    leader = _leader(cluster, "tier-a")
    wait_for(lambda: all(_tiered_upto(cluster, b, "tier-a", 800) for b in (1, 2, 3)), 30, "segments tiered")
    for b in (1, 2, 3):
        m = _metrics(cluster, b, "tier-a")
        assert m["log_size_bytes"] <= 4 * SEGMENT, m  # local retention 2 segments + the active one
        assert m["log_start_offset"] == 0 and m["local_log_start_offset"] > 0
    ups = _events(cluster, leader, "tiered_upload", "tier-a")
    assert ups and all(u["end_offset"] > u["base_offset"] for u in ups)
    # Nothing is deleted locally before it is tiered.
    for b in (1, 2, 3):
        for d in _events(cluster, b, "tiered_local_deleted", "tier-a"):
            assert any(u["base_offset"] <= d["base_offset"] and d["end_offset"] <= u["end_offset"] for u in ups), d
    _check_all(cluster, "tier-a", acked)
    wait_for(lambda: _metrics(cluster, leader, "tier-a").get("tiered_read_bytes", 0) > 0, 5, "reads from object storage")


class Load:
    """acks=all idempotent produce in the background; `acked` in offset order at the end."""

    def __init__(self, c, topic: str, tag: str):
        self.p = idempotent_producer(c.bootstrap, **{"linger.ms": 5, "log_level": 0})
        self.topic, self.tag, self.acked, self.failed = topic, tag, [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _cb(self, err, msg):
        (self.failed if err else self.acked).append(err or msg)

    def _run(self):
        i = 0
        while not self.stop.is_set():
            self.p.produce(self.topic, value=f"{self.tag}{i:07d}".encode().ljust(4 * KiB, b"."), partition=0,
                           on_delivery=self._cb)
            i += 1
            self.p.poll(0)
            time.sleep(0.04)  # ~25 messages/s, ~100 KB/s

    def finish(self) -> list:
        self.stop.set()
        self.thread.join(10)
        assert self.p.flush(60) == 0
        assert not self.failed, self.failed[:3]
        return sorted(self.acked, key=lambda m: m.offset())


def _set_kip1023(c, on: bool) -> None:
    incremental_alter(c, 4, "", {"follower.fetch.last.tiered.offset.enable": "true" if on else "false"})


def _throttle(c, topic: str, rate: int) -> None:
    incremental_alter(c, 4, "", {"leader.replication.throttled.rate": str(rate),
                                 "follower.replication.throttled.rate": str(rate)})
    incremental_alter(c, 2, topic, {"leader.replication.throttled.replicas": "*",
                                    "follower.replication.throttled.replicas": "*"})


def _moved(c, topic: str, target: list[int]) -> bool:
    return sorted(_replicas(c, topic)) == sorted(target) and _leader(c, topic) in target


def _copied(c, bid: int, topic: str) -> int:
    return sum(e["bytes"] for e in _events(c, bid, "bytes_moved", topic) if e.get("direction") == "reassign_in")


def _move_and_wait(cluster, topic: str, replicas: list[int]) -> None:
    a = admin(cluster.bootstrap)
    try:
        a.alter_partition_reassignments({KTP(topic, 0): replicas})
    finally:
        a.close()
    wait_for(lambda: _moved(cluster, topic, replicas), 60, "the move")


@pytest.mark.parametrize("kip1023", [True, False], ids=["last-tiered", "local-start"])
def test_move_copies_only_the_local_tail(cluster, kip1023):
    """A tiered partition under load moves [1,2,3] -> [4,2,3]: broker 4 starts after the last
    tiered offset (KIP-1023) or at the leader's local log start (KIP-405), copies only that, and
    as the new leader serves offset 0 from object storage with every acked message intact."""
    topic = f"tier-move-{int(kip1023)}"
    _set_kip1023(cluster, kip1023)
    _topic(cluster, topic, [1, 2, 3])
    acked = _fill(cluster, topic, 1200, tag="p")
    wait_for(lambda: _tiered_upto(cluster, 1, topic, 800), 30, "segments tiered")
    load = Load(cluster, topic, "l")
    time.sleep(0.5)
    _move_and_wait(cluster, topic, [4, 2, 3])
    acked += load.finish()
    built = _events(cluster, 4, "tiered_replica_built", topic)
    start = _events(cluster, 1, "tiered_copy_from", topic)
    assert built and start, "broker 4 did not start from the tiered offsets"
    assert built[0]["start"] == ("last_tiered_offset" if kip1023 else "local_log_start")
    assert built[0]["from_offset"] == start[-1]["offset"] > 0
    total = sum(len(m.value()) for m in acked)
    copied = _copied(cluster, 4, topic)
    # KIP-1023: what was not tiered yet (the active segment and any not yet uploaded) and the
    # load meanwhile; KIP-405: the leader's local log (local retention + active) as well.
    assert copied <= (3 if kip1023 else 5) * SEGMENT + 512 * KiB, (copied, total)
    assert copied < 0.3 * total
    assert _leader(cluster, topic) == 4
    _check_all(cluster, topic, acked)
    wait_for(lambda: _metrics(cluster, 4, topic).get("tiered_read_bytes", 0) > 0, 5, "reads from object storage")
    # The new replica's object-store requests, journaled (the move's cost in requests): its tier
    # state (KIP-405's rebuild: a LIST, GETs of the manifests and of the segment's epochs and
    # producer snapshot) and its first listing; it uploads nothing.
    journaled = [e["objstore_requests"] for name in ("tiered_replica_built", "tiered_remote_loaded")
                 for e in _events(cluster, 4, name, topic)]
    assert built[0]["objstore_requests"]["list"] >= 1 and built[0]["objstore_requests"]["get"] >= 1, built
    assert sum(r["put"] for r in journaled) == 0, journaled
    _set_kip1023(cluster, True)


def test_new_replica_skips_tiered_data_the_leader_still_holds(cluster):
    """KIP-1023: an empty new replica starts after the last tiered offset even where the leader
    still holds those segments locally (local retention not reached), so it copies only the part
    not yet uploaded; as the new leader it serves the rest from object storage."""
    topic = "tier-held"
    _topic(cluster, topic, [1, 2, 3], local_retention_bytes=64 * MiB)
    acked = _fill(cluster, topic, 600, tag="h")  # ~2.4 MiB: ~9 segments, all kept locally
    wait_for(lambda: _metrics(cluster, 1, topic).get("highest_tiered_offset", -1) >= 300, 30, "segments tiered")
    assert _metrics(cluster, 1, topic)["local_log_start_offset"] == 0
    _move_and_wait(cluster, topic, [4, 2, 3])
    (built,) = _events(cluster, 4, "tiered_replica_built", topic)
    start = _events(cluster, 1, "tiered_copy_from", topic)[-1]
    assert built["from_offset"] == start["offset"] >= 300 and built["start"] == "last_tiered_offset"
    assert _copied(cluster, 4, topic) < sum(len(m.value()) for m in acked) / 2
    _check_all(cluster, topic, acked)


def test_an_estimate_prices_an_untiered_tail_of_two_record_sizes_as_the_leader_does(cluster):
    """The estimate's bytes after the last tiered offset (bench/run/move_estimate.py: records sampled
    across the tail with Fetch) against what the leader then tells the new replica to copy, for a
    tail that starts with 64 KiB records and ends with 4 KiB ones (a prefill, then the load)."""
    from bench.analysis.estimate import facts_between
    from bench.run.move_estimate import sample_logs

    topic = "tier-est"
    _topic(cluster, topic, [1, 2, 3], segment_bytes=4 * MiB, local_retention_bytes=64 * MiB)
    _fill(cluster, topic, 100, size=64 * KiB, tag="big")  # one 4 MiB segment tiered, ~2.4 MiB active
    _fill(cluster, topic, 200, size=4 * KiB, tag="small")
    wait_for(lambda: _metrics(cluster, 1, topic).get("highest_tiered_offset", -1) >= 50, 30, "a segment tiered")
    a = admin(cluster.bootstrap)
    try:
        first = sample_logs(a, {topic}, profile_tails=True)
        second = sample_logs(a, {topic})
    finally:
        a.close()
    (f,) = facts_between([{"topic": topic, "partition": 0, "replicas": [4, 2, 3]}], first, second)
    first.tails.clear()  # without the samples: no load between the two, so at the local log's mean
    (newest,) = facts_between([{"topic": topic, "partition": 0, "replicas": [4, 2, 3]}], first, second)
    _move_and_wait(cluster, topic, [4, 2, 3])
    named = _events(cluster, 1, "tiered_copy_from", topic)[-1]["bytes_to_copy"]
    assert f.untiered_bytes == pytest.approx(named, rel=0.03), (f.untiered_bytes, named)
    assert abs(newest.untiered_bytes / named - 1) > 0.3  # what the estimate took before it sampled the tail


@pytest.mark.parametrize("victim", ["target", "leader"])
def test_kill_during_tiered_move_loses_nothing(cluster, victim):
    """kill -9 of the new replica (mid-copy of the tail) or of the leader during a throttled tiered
    move; the victim is restarted, the move completes, every acked message reads back from 0."""
    topic = f"tier-kill-{victim}"
    _topic(cluster, topic, [1, 2, 3])
    acked = _fill(cluster, topic, 1200, tag="p")
    wait_for(lambda: _tiered_upto(cluster, 1, topic, 800), 30, "segments tiered")
    _throttle(cluster, topic, 200_000)  # above the load's ~100 KB/s, so the tail takes seconds
    try:
        load = Load(cluster, topic, "l")
        a = admin(cluster.bootstrap)
        try:
            a.alter_partition_reassignments({KTP(topic, 0): [4, 2, 3]})
        finally:
            a.close()
        wait_for(lambda: _events(cluster, 4, "tiered_replica_built", topic) and _copied(cluster, 4, topic) > 0,
                 30, "the copy of the tail to start")
        assert len(_replicas(cluster, topic)) == 4, "the move finished before the kill"
        bid = 4 if victim == "target" else _leader(cluster, topic)
        cluster.kill_broker(bid)
        time.sleep(1.0)
        cluster.restart_broker(bid, timeout=60)
        # A restarted old leader is out of sync too, and the leader's throttle is one quota for all
        # its out-of-sync replicas (as in Kafka): at 200 KB/s each of the two got about the load's
        # rate and the move could stall (it did on a busy CI host). The operator's fix: raise it.
        _throttle(cluster, topic, 1_000_000)
        wait_for(lambda: _moved(cluster, topic, [4, 2, 3]), 90, "the move to complete")
        acked += load.finish()
    finally:
        incremental_alter(cluster, 4, "", {"leader.replication.throttled.rate": None,
                                           "follower.replication.throttled.rate": None})
    _check_all(cluster, topic, acked)
