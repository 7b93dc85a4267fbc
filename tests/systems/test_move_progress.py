"""Progress and ETA of moves (`bench reassign --verify/--list/--watch`, bench/run/move_progress.py):
the CLI on a real throttled copy move (the tracker's arithmetic on fixed observations:
tests/unit/test_move_progress_tracker.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest
from kafka.admin import NewTopic

from bench.run.load import prefill
from tests.support.clients import admin, create_topics

MiB = 1024 * 1024


def _verify(c, plan_path, *extra):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bench", "reassign", "--bootstrap-server", c.bootstrap,
                        "--reassignment-json-file", plan_path, "--verify", *extra],
                       capture_output=True, text=True, timeout=60)
    return r, time.monotonic() - t0


LINE = re.compile(r"([\d.]+) (B|kB|MB|GB) of ([\d.]+) (B|kB|MB|GB) copied .*ETA (\d+) s")
UNIT = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


@pytest.mark.slow
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
