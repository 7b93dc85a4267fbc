"""Progress and ETA of moves (`bench reassign --verify/--list/--watch`, bench/run/move_progress.py):
the tracker's arithmetic on fixed observations, and the CLI on a real throttled copy move."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

from kafka.admin import NewTopic

from bench.run.load import prefill
from bench.run.move_progress import Observation, Tracker, describe
from tests.clients import admin, create_topics

MiB = 1024 * 1024
TP = ("t", 0)


def _obs(ts, size4, lag4, *, leader_size=100_000, start=0, end=1000, isr=(1, 2, 3)):
    return Observation(ts=ts, ongoing={TP: {"replicas": [4, 2, 3], "adding": [4], "removing": [1]}},
                       leaders={TP: 1}, isr={TP: list(isr)},
                       sizes={TP: {1: leader_size, **({} if size4 is None else {4: size4})}},
                       lags={TP: {1: 0, **({} if size4 is None else {4: lag4})}}, offsets={TP: (start, end)})


def test_tracker_rate_and_eta():
    """Remaining = the new replica's offset lag x the leader's bytes per offset; rate and ETA over
    the window; a replica not created yet owes the leader's whole local log."""
    tr = Tracker(window_s=5.0)
    (p,) = tr.update(_obs(100.0, None, 0))
    assert (p.done_bytes, p.remaining_bytes, p.to_move_bytes, p.rate_bytes_per_s) == (0, 100_000, 100_000, None)
    (p,) = tr.update(_obs(102.0, 20_000, 800))  # 100 B per offset: 80,000 B to go
    assert (p.done_bytes, p.remaining_bytes) == (20_000, 80_000)
    assert p.rate_bytes_per_s == 10_000 and p.eta_s == 80_000 / 10_000
    # Tiered storage: the replica started at offset 600 of 1000, so its lag, not the leader's
    # size, is what is left: 100 offsets x 100 B.
    (p,) = tr.update(_obs(104.0, 30_000, 100))
    assert (p.done_bytes, p.remaining_bytes, p.to_move_bytes) == (30_000, 10_000, 40_000)
    # Not gaining (ingest as fast as the copy): no ETA.
    tr2 = Tracker(window_s=5.0)
    tr2.update(_obs(0.0, 10_000, 500))
    (p,) = tr2.update(_obs(1.0, 20_000, 500, leader_size=110_000, end=1100))
    assert p.rate_bytes_per_s == 10_000 and p.eta_s is None and "not gaining" in describe(p)
    # The window: only the last 5 s count.
    tr3 = Tracker(window_s=5.0)
    for i, (size, lag) in enumerate([(0, 1000), (1000, 990), (2000, 980), (50_000, 500), (60_000, 400),
                                     (70_000, 300), (80_000, 200), (90_000, 100)]):
        (p,) = tr3.update(_obs(float(i * 2), size, lag))
    assert p.rate_bytes_per_s == (90_000 - 60_000) / 6  # base: the newest sample >= 5 s old (t=8)
    # Records of mixed sizes (large prefill records first): 9 of the 10 60 kB records copied, 991 of
    # 1000 offsets to go; the leader's bytes less the replica's bound the lag's average.
    (p,) = Tracker().update(_obs(0.0, 54_000, 991))
    assert p.remaining_bytes == 100_000 - 54_000
    # Handover (shared storage): nothing copied.
    (h,) = Tracker(copies=False).update(_obs(0.0, None, 0))
    assert h.to_move_bytes is None and "no data copied" in describe(h)


def _verify(c, plan_path, *extra):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                        "--reassignment-json-file", plan_path, "--verify", *extra],
                       capture_output=True, text=True, timeout=60)
    return r, time.monotonic() - t0


LINE = re.compile(r"([\d.]+) (B|kB|MB|GB) of ([\d.]+) (B|kB|MB|GB) copied .*ETA (\d+) s")
UNIT = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def test_verify_shows_progress_and_eta_of_a_throttled_copy(make_cluster, tmp_path):
    """A 256 MiB partition moved 1 -> 2 at a 16 MB/s throttle: `--verify` shows bytes done growing
    and, at about the halfway point, an ETA within 20 % of the time the move then really took."""
    c = make_cluster(brokers=2)
    create_topics(c.bootstrap, [NewTopic("big", num_partitions=-1, replication_factor=-1,
                                         replica_assignments={0: [1]})])
    prefill(c.bootstrap, [("big", 0)], 256 * MiB)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [2]}]}))
    r = subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                        "--reassignment-json-file", str(plan), "--execute", "--throttle", "16000000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    t_start = time.monotonic()
    # --watch alongside: refreshes until the move is done, then verifies (a pipe: a line per refresh).
    watcher = subprocess.Popen([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                                "--reassignment-json-file", str(plan), "--verify", "--watch", "--interval", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done_at: list[float] = []

    def watch_completion():
        a = admin(c.bootstrap)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if not a.list_partition_reassignments():
                    done_at.append(time.monotonic())
                    return
                time.sleep(0.1)
        finally:
            a.close()

    th = threading.Thread(target=watch_completion, daemon=True)
    th.start()
    samples = []  # (monotonic time the sample was taken, done, total, eta)
    while th.is_alive():
        r, took = _verify(c, str(plan), "--window", "2")
        m = LINE.search(r.stdout)
        if r.returncode == 0 or m is None:
            assert r.returncode == 0 or "is still in progress" in r.stdout, r.stdout + r.stderr
            continue
        done, total = float(m[1]) * UNIT[m[2]], float(m[3]) * UNIT[m[4]]
        samples.append((time.monotonic(), done, total, float(m[5]), m.string[m.string.rfind("\n", 0, m.start()) + 1:m.end()]))
    th.join(5)
    assert done_at, "the move did not complete within 120 s"
    assert len(samples) >= 3, samples
    dones = [s[1] for s in samples]
    assert dones == sorted(dones) and dones[-1] > dones[0], samples
    assert all(250e6 < s[2] < 300e6 for s in samples), samples  # ~268 MB to move
    half = min(samples, key=lambda s: abs(s[1] / s[2] - 0.5))
    actual = done_at[0] - half[0]
    assert 0.35 < half[1] / half[2] < 0.65, samples
    print(f"halfway: {half[1] / 1e6:.1f} of {half[2] / 1e6:.1f} MB, ETA {half[3]:.0f} s, actual {actual:.1f} s; "
          f"move {done_at[0] - t_start:.1f} s after --execute; {len(samples)} samples\n{half[4]}")
    assert abs(half[3] - actual) <= 0.2 * actual, (half, actual, done_at[0] - t_start, samples)
    try:
        watched, _ = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    lines = [m for m in LINE.finditer(watched)]
    assert watcher.returncode == 0 and len(lines) >= 5, watched
    assert "Reassignment of partition big-0 is completed." in watched, watched
    # Once complete: Kafka's line and the throttles cleared.
    r, _ = _verify(c, str(plan), "--window", "2")
    assert r.returncode == 0 and "Reassignment of partition big-0 is completed." in r.stdout
    assert "Clearing broker-level throttles" in r.stdout
