"""Fault suite: partition moves under an idempotent producer's load, with a fault in the middle.

Each scenario: a partition of a few tens of MiB (prefilled through the real produce path), a
steady confluent-kafka idempotent acks=all producer on it, a reassignment, and - while the move
is still in progress (asserted, not assumed) - one fault:

  replication  kill -9 of the source (leader moving away), of the target (copy resumes after
               restart), of the controller; a broker restarted (SIGTERM + start) during the copy
  shared       kill -9 of the source (owner closing), of the target, of the controller; the
               object store stopped 5 s; SIGSTOP of the owner until it is replaced, then SIGCONT

The moves are slowed on purpose so "the middle" is a real window: replication copies under a
throttle, shared uploads its whole un-uploaded tail at a capped object-store bandwidth.

Safety (asserted for every scenario): every acked message is read back at its acked offset,
byte-identical; no producer sequence number twice; sequence numbers in offset order. Each
scenario records a row (acked, lost, duplicated, reordered, longest gap between acks) that is
printed, and appended as JSON to $FAULT_ROWS when that is set; `python -m tests.test_faults
ROWS.jsonl` renders the table for docs/faults.md. The no-move variants of three shared faults
(kill -9 of the owner, split brain, store down) live in tests/test_shared_failures.py.
"""
from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from collections import Counter

import pytest
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from bench.run.cluster import Cluster
from systems.core.process import alive as _alive
from systems.core.events import read_events
from tests.clients import admin, create_topics, wait_for
from tests.shared_harness import LoadProducer, move_timeline, parse_payload, payload, prefill, read_back

MiB = 1 << 20
SESSION = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
# Shared: nothing is uploaded before the move, so the move's force upload carries the whole
# prefill, at 8 MB/s: a ~3 s window in the middle of the move.
SHARED = {**SESSION, "wal.upload.threshold.bytes": str(512 * MiB), "wal.upload.interval.ms": "600000",
          "wal.upload.max.backlog.bytes": str(512 * MiB), "s3.upload.bytes.per.s": "8000000"}
PREFILL = 24 * MiB
THROTTLE = 6_000_000  # replication: 24 MiB at 6 MB/s ~ 4 s of copy
RATE, SIZE = 300, 1000

pytestmark = pytest.mark.timeout(150)
ROWS: list[dict] = []


# -- shared helpers -------------------------------------------------------------------------


def live_bootstrap(c: Cluster) -> str:
    return ",".join(f"{p.host}:{p.port}" for _, p in sorted(c.brokers.items()) if _alive(p.pid, c.dir))


def partition_info(c: Cluster, topic: str) -> dict | None:
    try:
        a = admin(live_bootstrap(c))
    except (KafkaError, ValueError):
        return None
    try:
        t = a.describe_topics([topic])[0]
        return next(p for p in t["partitions"] if p["partition_index"] == 0)
    except (KafkaError, StopIteration):
        return None
    finally:
        a.close()


def reassigning(c: Cluster, topic: str) -> bool:
    try:
        a = admin(live_bootstrap(c))
    except KafkaError:
        return True  # unknown: treat as still moving
    try:
        return KTP(topic, 0) in a.list_partition_reassignments()
    except KafkaError:
        return True
    finally:
        a.close()


def stop_gracefully(c: Cluster, bid: int, timeout: float = 20) -> None:
    c.kill_broker(bid, signal.SIGTERM)
    wait_for(lambda: not _alive(c.brokers[bid].pid, c.dir), timeout, f"broker {bid} to stop")


def restore(c: Cluster) -> None:
    """Every process of the module's cluster running and every broker unfenced again."""
    if c.system == "shared" and getattr(c, "_seaweed", None) is None:
        c.start_object_store()
    if not _alive(c.controller.pid, c.dir):
        c.restart_controller()
    for bid, p in c.brokers.items():
        try:
            os.kill(p.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        if not _alive(p.pid, c.dir):
            c.restart_broker(bid, timeout=60)
    c.wait_ready(60)


def tally(load: LoadProducer, msgs: list[tuple[int, bytes]]) -> dict:
    """Count anomalies instead of stopping at the first: lost (acked, not read back
    byte-identical at its acked offset), duplicated (a sequence number read more than once),
    reordered (a sequence number read after a higher one)."""
    tag = load.tag.ljust(8, b"_")[:8]
    by_offset, counts, order = {}, Counter(), []
    for off, v in msgs:
        t, seq = parse_payload(v)
        if t != tag:
            continue
        by_offset[off] = v
        counts[seq] += 1
        order.append(seq)
    reordered, high = 0, -1
    for s in order:
        if s < high:
            reordered += 1
        high = max(high, s)
    lost = sum(1 for seq, off, _ in load.acks if by_offset.get(off) != payload(load.tag, seq, load.size))
    ack_ts = sorted(t for _, _, t in load.acks)
    gap = max((b - a for a, b in zip(ack_ts, ack_ts[1:])), default=0.0)
    return {"acked": len(load.acks), "lost": lost, "duplicated": sum(n - 1 for n in counts.values() if n > 1),
            "reordered": reordered, "longest_gap_s": round(gap, 2), "send_errors": len(load.errors)}


def record(row: dict) -> None:
    ROWS.append(row)
    print(f"\nFAULT {json.dumps(row)}")
    out = os.environ.get("FAULT_ROWS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def run_fault(c: Cluster, name: str, assignment: list[int], target: list[int], fault, *, throttle=None) -> dict:
    """Prefill, start the load, request the move, call fault(ctx) mid-move, wait for the move to
    finish and the load to be served, then check every acked message."""
    topic = name
    create_topics(c.bootstrap, [NewTopic(topic, replica_assignments={0: assignment},
                                         topic_configs={"max.message.bytes": str(16 * MiB)})])
    prefill(c.bootstrap, topic, 0, PREFILL)
    load = LoadProducer(c.bootstrap, topic, 0, msgs_per_s=RATE, size=SIZE, tag=name[:8].encode(),
                        **{"request.timeout.ms": 5000}).start()
    ctx = {"topic": topic, "source": assignment, "target": target, "load": load}
    try:
        wait_for(lambda: len(load.acks) > 200, 30, "load producer acks")
        ctx["t_request"] = time.monotonic()
        ctx["since"] = time.time()
        if c.system == "replication":
            from bench.cli.reassign import execute
            plan = [{"topic": topic, "partition": 0, "replicas": target}]
            assert execute(c.bootstrap, plan, throttle, False, out=io.StringIO()) == 0
        else:
            a = admin(c.bootstrap)
            try:
                res = a.alter_partition_reassignments({KTP(topic, 0): target})
                assert all(e is None for e in res.values()), res
            finally:
                a.close()
        fault(c, ctx)
        assert ctx.get("mid_move"), f"{name}: the fault did not land in the middle of the move"
        # The move finishes (or, for the shared system, the partition is owned and served again).
        if c.system == "replication":
            wait_for(lambda: (p := partition_info(c, topic)) and p["replica_nodes"] == target
                     and p["leader_id"] in target and not reassigning(c, topic), 90, "the move to finish", 0.2)
        ctx.setdefault("t_fault_end", time.monotonic())
        n = len(load.acks)
        wait_for(lambda: len(load.acks) > n + 300, 60, "acks after the fault")
    finally:
        left = load.stop(90)
    restore(c)
    end = max(off for _, off, _ in load.acks) + 1
    counts = tally(load, read_back(c.bootstrap, topic, 0, 0, end, timeout=90))
    p = partition_info(c, topic)
    row = {"system": c.system, "scenario": name, "fault": ctx.get("fault"), **counts,
           "final_replicas": p["replica_nodes"] if p else None, "unflushed": left, "fatal": load.fatal}
    if c.system == "shared":
        tl = move_timeline(c.dir, topic, 0)
        row["last_move"] = {k: tl.get(k) for k in ("cause", "to", "recovery", "election_how")} if tl else None
        # Did the source finish its own close (step 4) or did the controller's failover do it?
        row["source_closed"] = any(e["event"] == "shared_partition_closed" and e.get("topic") == topic
                                   and e.get("from") == assignment[0] for e in read_events(c.dir))
    record(row)
    assert left == 0 and load.fatal is None, row
    assert counts["lost"] == 0 and counts["duplicated"] == 0 and counts["reordered"] == 0, row
    return row


# -- replication ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def repl(tmp_path_factory):
    c = Cluster("replication", 3, str(tmp_path_factory.mktemp("faults-r") / "c"), dict(SESSION))
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.stop()


def _copying(c: Cluster, topic: str, target: int) -> bool:
    """The new replica has some but not all of the data: mid-copy."""
    d = os.path.join(c.dir, f"broker-{target}", "data", f"{topic}-0")
    try:
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log"))
    except OSError:
        return False
    return 0 < size < PREFILL


def _mid_copy(c, ctx, target: int) -> None:
    wait_for(lambda: _copying(c, ctx["topic"], target), 20, "the copy to start")
    time.sleep(0.8)
    ctx["mid_move"] = _copying(c, ctx["topic"], target) and reassigning(c, ctx["topic"])


def test_replication_kill9_source_mid_copy(repl):
    """[1,2] -> [2,3]: the leader (moving away) dies; 2 leads, 3 finishes copying from 2."""
    def fault(c, ctx):
        _mid_copy(c, ctx, 3)
        ctx["fault"] = "kill -9 source (leader) broker 1"
        c.kill_broker(1)
    row = run_fault(repl, "r-ksrc", [1, 2], [2, 3], fault, throttle=THROTTLE)
    assert row["final_replicas"] == [2, 3]
    # Known gap (left to the backend's owner): broker 1 was down when it was removed, so its old
    # files stay on disk after it restarts (Kafka deletes such stray logs); nothing serves them.


def test_replication_kill9_target_mid_copy(repl):
    """[1] -> [3]: the target dies mid-copy and comes back 2 s later; the copy resumes."""
    def fault(c, ctx):
        _mid_copy(c, ctx, 3)
        ctx["fault"] = "kill -9 target broker 3, restart after 2 s"
        c.kill_broker(3)
        time.sleep(2)
        c.restart_broker(3)
    run_fault(repl, "r-ktgt", [1], [3], fault, throttle=THROTTLE)


def test_replication_kill9_controller_mid_copy(repl):
    """[1] -> [2]: the controller dies mid-copy, restarts 3 s later; the move completes."""
    def fault(c, ctx):
        _mid_copy(c, ctx, 2)
        ctx["fault"] = "kill -9 controller, restart after 3 s"
        c.kill_controller()
        time.sleep(3)
        c.restart_controller()
    run_fault(repl, "r-kctl", [1], [2], fault, throttle=THROTTLE)


def test_replication_broker_restart_mid_copy(repl):
    """[1] -> [2]: the source (sole leader, RF 1) is restarted (SIGTERM, start) mid-copy: the
    partition has no leader while it is down, then the copy resumes."""
    def fault(c, ctx):
        _mid_copy(c, ctx, 2)
        ctx["fault"] = "restart (SIGTERM + start) of source broker 1"
        stop_gracefully(c, 1)
        c.restart_broker(1)
    run_fault(repl, "r-rst", [1], [2], fault, throttle=THROTTLE)


# -- shared ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    c = Cluster("shared", 3, str(tmp_path_factory.mktemp("faults-s") / "c"), dict(SHARED))
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.stop()


def _mid_close(c, ctx, delay: float = 0.7) -> None:
    wait_for(lambda: move_timeline(c.dir, ctx["topic"], 0), 10, "the move request")
    time.sleep(delay)
    tl = move_timeline(c.dir, ctx["topic"], 0)
    ctx["mid_move"] = tl is not None and tl.get("close_total_ms") is None and "ready_ts" not in tl


def _served_by(c: Cluster, topic: str, owners) -> bool:
    """The latest move (or failover) of the partition has opened it on one of `owners`; read from
    the event journals, so a frozen broker in the bootstrap list cannot stall the check."""
    tl = move_timeline(c.dir, topic, 0)
    return bool(tl) and "ready_ts" in tl and tl["to"] in owners


def test_shared_kill9_source_mid_move(shared):
    """1 -> 2: the owner dies while uploading its tail; failover replays its WAL."""
    def fault(c, ctx):
        _mid_close(c, ctx)
        ctx["fault"] = "kill -9 source (owner) broker 1 during the force upload"
        c.kill_broker(1)
        wait_for(lambda: _served_by(c, ctx["topic"], (2, 3)), 30, "a new owner", 0.2)
    run_fault(shared, "s-ksrc", [1], [2], fault)


def test_shared_kill9_target_mid_move(shared):
    """1 -> 2: the target dies before it has opened the partition."""
    def fault(c, ctx):
        _mid_close(c, ctx)
        ctx["fault"] = "kill -9 target broker 2 before it serves, restart after the failover"
        c.kill_broker(2)
        wait_for(lambda: _served_by(c, ctx["topic"], (1, 3)), 40, "an owner", 0.2)
    run_fault(shared, "s-ktgt", [1], [2], fault)


def test_shared_kill9_controller_mid_move(shared):
    """1 -> 2: the controller dies during the source's upload, restarts 3 s later."""
    def fault(c, ctx):
        _mid_close(c, ctx)
        ctx["fault"] = "kill -9 controller during the force upload, restart after 3 s"
        c.kill_controller()
        time.sleep(3)
        c.restart_controller()
        wait_for(lambda: _served_by(c, ctx["topic"], (2,)), 40, "the target to serve", 0.2)
    run_fault(shared, "s-kctl", [1], [2], fault)


def test_shared_object_store_down_5s_mid_move(shared):
    """1 -> 2: the object store stops for 5 s during the source's upload."""
    def fault(c, ctx):
        _mid_close(c, ctx)
        ctx["fault"] = "object store stopped 5 s during the force upload"
        c.stop_object_store()
        time.sleep(5)
        c.start_object_store()
        wait_for(lambda: _served_by(c, ctx["topic"], (2,)), 60, "the target to serve", 0.2)
    run_fault(shared, "s-osd", [1], [2], fault)


def test_shared_sigstop_owner_mid_move(shared):
    """1 -> 2: the owner is frozen (SIGSTOP) mid-upload until the controller has replaced it,
    then resumed (SIGCONT): its late writes and commits are fenced."""
    def fault(c, ctx):
        _mid_close(c, ctx)
        ctx["fault"] = "SIGSTOP source (owner) broker 1 until replaced, then SIGCONT"
        c.kill_broker(1, signal.SIGSTOP)
        try:
            wait_for(lambda: _served_by(c, ctx["topic"], (2, 3)), 30, "a new owner", 0.2)
            time.sleep(0.5)
        finally:
            c.kill_broker(1, signal.SIGCONT)
    run_fault(shared, "s-stop", [1], [2], fault)


# -- the table ------------------------------------------------------------------------------

def render(rows: list[dict]) -> str:
    """One line per (system, scenario): runs, totals, and the longest gap over all runs."""
    agg: dict[tuple, dict] = {}
    for r in rows:
        a = agg.setdefault((r["system"], r["scenario"]), {"fault": r["fault"], "runs": 0, "acked": 0, "lost": 0,
                                                           "duplicated": 0, "reordered": 0, "gap": 0.0})
        a["runs"] += 1
        for k in ("acked", "lost", "duplicated", "reordered"):
            a[k] += r[k]
        a["gap"] = max(a["gap"], r["longest_gap_s"])
    out = ["| system | scenario | fault | runs | acked | lost | duplicated | reordered | longest gap between acks (s) |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for (system, name), a in sorted(agg.items()):
        out.append(f"| {system} | {name} | {a['fault']} | {a['runs']} | {a['acked']} | {a['lost']} | "
                   f"{a['duplicated']} | {a['reordered']} | {a['gap']:.2f} |")
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(render([json.loads(line) for line in f if line.strip()]))
