"""The load in Locust's distributed mode (scenario ``load.workers``, ``--load-workers``): the load
process is a Locust master and the producers run in worker processes (``locust -f
workloads/kafka_produce.py --worker``), their sends reaching the run's history through the master
(workloads/distributed.py). Run by the harness's own runner on a 3-broker replication cluster."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from bench.history.store import read_history

pytestmark = pytest.mark.timeout(240)

RATE = 300


def scenario(name: str, duration_s: float) -> dict:
    return {
        "name": name,
        "system": {"kind": "replication", "brokers": 3},
        "workload": {"topics": [{"name": "w", "partitions": 4}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": RATE, "producers": 4, "duration_s": duration_s},
        "load": {"workers": 2},
    }


def sends_by_worker(run_dir: Path) -> dict[str, int]:
    t = read_history(run_dir / "history.parquet")
    sends = t.filter(pc.fill_null(pc.equal(t["kind"], "send"), False))
    out: dict[str, int] = {}
    for name in sends["producer"].to_pylist():
        w = name.split(".", 1)[0]
        out[w] = out.get(w, 0) + 1
    return out


@pytest.mark.slow  # a whole run with two worker processes, as its sibling below
def test_two_workers_share_the_load_at_its_rate(run_scenario):
    [(run_dir, s)] = run_scenario(scenario("load-workers", 10))
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    p = s["producer"]
    w = p["workers"]
    assert w["count"] == 2 and w["lost"] == [] and w["unresolved_info"] == 0, w
    by = sends_by_worker(run_dir)
    assert set(by) == {"w0", "w1"} and min(by.values()) > 0.3 * sum(by.values()), by
    assert p["failed"] == 0 and p["info"] == 0
    assert p["rate_msgs_per_s"] == pytest.approx(RATE, rel=0.05), p


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_reported_and_loses_nothing_acked(run_scenario, tmp_path):
    """kill -9 of one worker 4 s into the load: the master reports it lost, its sends without an
    outcome become info (never ok), its users move to the other worker, and every acked send is
    read back (the checkers)."""
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for f in tmp_path.glob("run-*/**/logs/load.jsonl"):
                events = [json.loads(x) for x in f.read_text().splitlines() if x.startswith("{")]
                workers = next((e for e in events if e.get("event") == "workers"), None)
                started = next((e for e in events if e.get("event") == "started"), None)
                if workers and started and time.time() > started["ts"] + 4:
                    os.kill(workers["pids"]["w1"], signal.SIGKILL)  # a process the load process started
                    killed.append(workers["pids"]["w1"])
                    return
            time.sleep(0.1)

    t = threading.Thread(target=kill_one, daemon=True)
    t.start()
    [(run_dir, s)] = run_scenario(scenario("load-worker-killed", 14))
    t.join(timeout=5)
    assert killed, "the worker was never killed"
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    w = s["producer"]["workers"]
    assert w["count"] == 2 and w["lost"] == ["w1"], w
    by = sends_by_worker(run_dir)
    assert by.get("w0", 0) > 0 and by.get("w1", 0) > 0, by
    tab = read_history(run_dir / "history.parquet")
    ok = pc.fill_null(pc.and_(pc.equal(tab["kind"], "send"), pc.equal(tab["outcome"], "ok")), False)
    assert tab.filter(ok).num_rows > 0
    lost_rows = [e for e in tab.filter(pc.fill_null(pc.equal(tab["kind"], "send"), False))["error"].to_pylist()
                 if e and "lost before it reported" in e]
    assert len(lost_rows) == w["unresolved_info"]


def test_workers_that_never_connect_fail_the_run_before_its_load(run_scenario):
    """A remote worker that never comes: the run fails within the connect timeout, saying how many
    connected and where the master listened, and leaves nothing running (the local worker is
    stopped by PID)."""
    data = scenario("load-workers-missing", 5)
    data["load"] = {"workers": 1, "remote_workers": 1, "connect_timeout_s": 3}
    t0 = time.monotonic()
    [(run_dir, s)] = run_scenario(data)
    assert time.monotonic() - t0 < 60
    assert s["error"] is not None and "load workers: 1 of 2 connected to the master at 127.0.0.1:" in s["error"], s["error"]
    assert "not within 3 s" in s["error"]
    spec = json.loads((run_dir / "logs" / "load-spec.json").read_text())
    assert spec["remote_workers"] == 1
    for log in (run_dir / "logs").glob("load-worker-*.log"):
        assert "Traceback" not in log.read_text()
