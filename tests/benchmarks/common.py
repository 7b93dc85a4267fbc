"""Work the benchmarks and the regression gates both time: a 4 KiB acks=1 fill, and a
replication move whose duration is the controller's own record of it."""
from __future__ import annotations

import io
import time

from confluent_kafka import Producer

from bench.cli.reassign import execute, verify
from systems.core.events import read_events
from tests.clients import admin, wait_for

MSG = 4096


def fill(bootstrap: str, topic: str, n: int) -> None:
    """n messages of 4 KiB to partition 0, acks=1, large batches."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 10, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 262144})
    val = b"v" * MSG
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=val, partition=0)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(120) == 0


def replicas(c, topic):
    """(replicas of partition 0, ongoing reassignments)."""
    a = admin(c.bootstrap)
    try:
        p = a.describe_topics([topic])[0]["partitions"][0]
        return p["replica_nodes"], a.list_partition_reassignments()
    finally:
        a.close()


def timed_move(c, topic: str, throttle: int | None) -> float:
    """Move partition 0 between brokers 1 and 2 with the reassign tool (--execute, then
    --verify, which clears throttles); returns reassignment_started -> reassignment_completed
    from the controller's journal, so the tool's own start-up is not counted."""
    cur, _ = replicas(c, topic)
    plan = [{"topic": topic, "partition": 0, "replicas": [2] if cur == [1] else [1]}]
    since = time.time()
    assert execute(c.bootstrap, plan, throttle, False, out=io.StringIO()) == 0
    wait_for(lambda: (r := replicas(c, topic))[0] == plan[0]["replicas"] and not r[1], 600, "the move")
    verify(c.bootstrap, plan, out=io.StringIO())
    ev = [e for e in read_events(c.dir) if e.get("topic") == topic and e["ts"] >= since]
    start = next(e["ts"] for e in ev if e["event"] == "reassignment_started")
    end = next(e["ts"] for e in ev if e["event"] == "reassignment_completed")
    return end - start
