"""The shared system's snapshot handoff (shared.handoff=snapshot) killed with -9 at each of its
steps, under an idempotent producer: the source after it stopped writes, before and after the
controller took the handoff; the controller between closing the streams and electing the target;
the target once it serves. The killed process is restarted; producing goes on. Every acked
message is read back exactly once and in order, nothing beyond them is in the log, and the journal
never shows two brokers accepting writes for the partition at once (an owner accepts from its
``shared_partition_opened`` until its ``shared_partition_closing``, ``_fenced`` or death).

Failpoints (``shared.failpoint``, systems/shared/settings.py FAILPOINTS) make the process SIGKILL
itself exactly at a step, once per process directory, so the restarted one goes on.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic
from kafka.errors import KafkaConnectionError

from systems.core.process import alive
from systems.core.events import read_events
from systems.shared.settings import FAILPOINTS
from tests.support.clients import admin, consume_all, create_topics, idempotent_producer, wait_for

pytestmark = pytest.mark.timeout(180)


class Load:
    """One idempotent producer sending b"m-<i>" to h-0 at about 400 msg/s on its own thread."""

    def __init__(self, bootstrap: str):
        self.p = idempotent_producer(bootstrap)
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _cb(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.p.produce("h", value=b"m-%d" % i, partition=0, on_delivery=self._cb)
            i += 1
            self.p.poll(0)
            time.sleep(0.0025)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(10)
        assert self.p.flush(90) == 0, "messages still unacknowledged 90 s after the load stopped"


def _owners_never_overlap(events: list[dict]) -> list[tuple]:
    """(broker, from, to) intervals in which a broker accepted writes for h-0; asserts they never overlap."""
    mine = [e for e in events if e.get("topic") == "h" and e.get("partition") == 0]
    deaths = [e for e in events if e["event"] == "shared_failpoint" and isinstance(e["source"], int)]
    intervals, open_at = [], {}
    for e in sorted(mine + deaths, key=lambda e: e["ts"]):
        b = e["source"]
        if e["event"] == "shared_partition_opened":
            open_at[b] = e["ts"]
        elif e["event"] in ("shared_partition_closing", "shared_partition_fenced", "shared_failpoint") and b in open_at:
            intervals.append((b, open_at.pop(b), e["ts"]))
    intervals += [(b, t, float("inf")) for b, t in open_at.items()]
    intervals.sort(key=lambda x: x[1])
    for (b1, s1, e1), (b2, s2, e2) in zip(intervals, intervals[1:]):
        assert e1 <= s2, f"brokers {b1} and {b2} both accepted writes for h-0: {intervals}"
    return intervals


@pytest.mark.slow  # ~12 s each; .ci/run runs them after make test
@pytest.mark.parametrize("where", FAILPOINTS)
def test_snapshot_handoff_killed_at_each_step_loses_nothing(make_cluster, where):
    c = make_cluster("shared", 3, shared_handoff="snapshot", shared_failpoint=where)
    create_topics(c.bootstrap, [NewTopic("h", num_partitions=-1, replication_factor=-1, replica_assignments={0: [1]})])
    load = Load(c.bootstrap)
    try:
        wait_for(lambda: len(load.acked) > 300, 30, "the load acked on broker 1")
        a = admin(c.bootstrap)
        try:
            assert a.alter_partition_reassignments({KTP("h", 0): [2]}) == {KTP("h", 0): None}
        except KafkaConnectionError:
            pass  # the broker that forwarded it died at its failpoint: the journal shows the request
        finally:
            a.close()
        wait_for(lambda: any(e["event"] == "shared_move_requested" for e in read_events(c.dir)), 10,
                 "the move's request")
        role = where.split(".")[0]
        bid = {"source": 1, "target": 2}.get(role)
        victim = c.controller if bid is None else c.brokers[bid]
        wait_for(lambda: not alive(victim.pid, c.dir), 30, f"the {where} failpoint to kill pid {victim.pid}")
        time.sleep(1.0)  # down for a moment, as after a real crash
        c.restart_controller() if bid is None else c.restart_broker(bid)
        n = len(load.acked)
        wait_for(lambda: len(load.acked) > n + 400, 60, "producing to go on after the restart")
    finally:
        load.stop()
    assert load.failed == [], load.failed[:5]
    got = [v for _, _, v, _ in consume_all(c.bootstrap, {("h", 0): len(load.acked)}, timeout=90)[("h", 0)]]
    assert got == sorted(load.acked, key=lambda v: int(v[2:])), "acked messages lost, duplicated or reordered"
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "hw"})
    try:
        assert cons.get_watermark_offsets(TopicPartition("h", 0), timeout=10)[1] == len(load.acked)
    finally:
        cons.close()
    events = read_events(c.dir)
    assert [e["name"] for e in events if e["event"] == "shared_failpoint"] == [where]
    intervals = _owners_never_overlap(events)
    print(f"\n{where}: {len(load.acked)} acked, owners {[(b, round(s, 3), round(e, 3)) for b, s, e in intervals]}")
