"""The harness runner: invalid scenarios rejected up front, a short real run end to end, analyze
reproducing summary.json, journal translation, load shapes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml

from bench.check import check_lost_writes
from bench.history.store import read_history
from systems.registry import profile
from bench.history.journal import MoveWindows, translate
from bench.check.summary import analyze, dumps
from workloads.rates import rate_at

ROOT = Path(__file__).resolve().parents[2]

SMALL = {
    "name": "small",
    "description": "tiny end-to-end run",
    "system": {"kind": "replication", "brokers": 3, "replication_throttle_bytes_per_s": "8MiB",
               "extra": {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}},
    "workload": {"topics": [{"name": "hot", "partitions": 2, "replication_factor": 1}], "message_bytes": "1KiB",
                 "produce_rate_msgs_per_s": 200, "duration_s": 30,  # > 1000 acks, the move done in 1 s
                 "end_after_actions_s": 5,  # the load ends ~5 s after the move: ~8 s, not 30
                 "linger_ms": 100},  # not the default (5): it must reach the producers
    "prefill": {"bytes_per_partition": "2MiB"},
    "actions": [{"at_s": 2, "kind": "reassign", "topic": "hot", "partition": 0, "to": [3]}],
}


def _bench(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300")  # rich tables unfolded
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


# --------------------------------------------------------------------------------------------
# Rejected before anything starts


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["workload"].update(colour="blue"), "workload.colour: unknown field"),
    (lambda d: d["workload"].update(produce_rate_msgs_per_s=-5), "workload.produce_rate_msgs_per_s: must be > 0"),
    (lambda d: d["actions"][0].update(to=[9]), "actions.0.to: broker 9 does not exist"),
])
def test_invalid_scenario_rejected_before_anything_starts(tmp_path, mutate, needle):
    data = json.loads(json.dumps(SMALL))
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    results = tmp_path / "results"
    r = _bench("run", str(path), "--results", str(results), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr, r.stderr
    assert not results.exists()  # nothing was started, nothing written


def test_bad_override_and_unknown_builtin_rejected(tmp_path):
    r = _bench("run", "reassign-one", "--set", "system.brokers=0", "--results", str(tmp_path / "r"), "--no-progress")
    assert r.returncode == 2 and "system.brokers: must be >= 1" in r.stderr, r.stderr
    r = _bench("run", "no-such-scenario", "--results", str(tmp_path / "r"), "--no-progress")
    assert r.returncode == 2 and "not a built-in scenario" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_builtin_scenarios_listed(tmp_path):
    r = _bench("list", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    for name in ("reassign-one", "broker-loss", "drain", "scale-out", "sweep"):
        assert name in r.stdout


def test_list_marks_interrupted_runs(tmp_path):
    """Runs that did not complete are marked, with why they ended: from summary.json (`ended`,
    or `error` for runs recorded before it), else from runner.json (bench.run.ending)."""
    import psutil

    def run_dir(stamp, summary=None, runner=None):
        d = tmp_path / "small" / stamp
        d.mkdir(parents=True)
        (d / "scenario.yaml").write_text(yaml.safe_dump(SMALL))
        if summary is not None:
            (d / "summary.json").write_text(json.dumps({"run_id": stamp, "system": "replication", "checks": {},
                                                        **summary}))
        if runner is not None:
            (d / "runner.json").write_text(json.dumps(runner))

    run_dir("20260101T000000Z")  # kill -9 before runner.json existed
    run_dir("20260101T000100Z", {"completed": False, "error": "KeyboardInterrupt: ", "ended": "interrupted: SIGINT"})
    run_dir("20260101T000200Z", {"completed": False, "error": "KeyboardInterrupt: signal 15"})  # before `ended`
    run_dir("20260101T000300Z", {"completed": False, "error": "RunError: prefill failed\nat offset 3",
                                 "ended": "crashed: RunError: prefill failed"})
    run_dir("20260101T000400Z", {"completed": True, "error": None, "ended": "completed"})
    run_dir("20260101T000500Z", runner={"pid": 2 ** 22 + 1, "create_time": 1.0, "ended": None})  # gone
    run_dir("20260101T000600Z", runner={"pid": 1, "create_time": 1.0, "ended": "interrupted: SIGTERM"})
    me = psutil.Process()
    run_dir("20260101T000700Z", runner={"pid": me.pid, "create_time": me.create_time(), "ended": None})
    r = _bench("list", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[4].strip() for line in r.stdout.splitlines()
            if line.startswith("│ ") and "/small/" in line}
    assert rows == {
        "20260101T000000Z": "killed (no summary)",
        "20260101T000100Z": "interrupted: SIGINT",
        "20260101T000200Z": "interrupted: SIGTERM",
        "20260101T000300Z": "crashed: RunError: prefill failed",
        "20260101T000400Z": "completed",
        "20260101T000500Z": "killed (no summary)",
        "20260101T000600Z": "interrupted: SIGTERM (no summary)",
        "20260101T000700Z": f"running (pid {me.pid})",
    }, r.stdout


def test_how_a_run_ended_in_words():
    from bench.run.ending import how_it_ended

    assert how_it_ended(None) == "completed"
    assert how_it_ended(KeyboardInterrupt()) == "interrupted: SIGINT"
    assert how_it_ended(KeyboardInterrupt("SIGTERM")) == "interrupted: SIGTERM"
    assert how_it_ended(ValueError("bad offset 3\nmore")) == "crashed: ValueError: bad offset 3"


def test_a_signal_a_library_turned_into_its_own_error_still_ends_the_run_as_that_signal(monkeypatch):
    """SIGTERM during a prefill came out of confluent_kafka's produce() as "expected header key to be
    unicode string" (CI, 428075f): the run was recorded as crashed, the next run started, and
    `bench run` exited 0. Once a stop signal arrived, whatever a run stops with is that signal."""
    import signal

    from bench.run import ending

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(ending, "_received", None)
    assert isinstance(ending.as_interrupt(ValueError("no signal yet")), ValueError)
    try:
        ending.stop_on_signals()
        try:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises at the next bytecode, long before this ends
            except KeyboardInterrupt:  # a library's C code replacing the exception with its own
                raise TypeError("expected header key to be unicode string") from None
        except TypeError as exc:
            stopped = ending.as_interrupt(exc)
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    assert isinstance(stopped, KeyboardInterrupt) and isinstance(stopped.__cause__, TypeError)
    assert ending.how_it_ended(stopped) == "interrupted: SIGTERM"


@pytest.mark.parametrize("sig, during", [("SIGINT", "load"),
                                         pytest.param("SIGTERM", "prefill", marks=pytest.mark.slow)])
def test_a_stopped_run_is_recorded_and_listed(tmp_path, sig, during):
    """A real `bench run` stopped with SIGINT (Ctrl-C) once its cluster is up, or with SIGTERM
    while its prefill waits for acks (20,000 batches of one 1 KB record into the shared system:
    over a minute): the runner
    stops within seconds, cleans up, writes its summary with ended "interrupted: <signal>", and
    `bench list` shows it."""
    import signal

    data = json.loads(json.dumps(SMALL))
    data["system"].update(brokers=1, replication_throttle_bytes_per_s=None)
    if during == "prefill":  # each batch's ack waits for a WAL PUT: ~4 ms, one request at a time
        data["system"]["kind"] = "shared"
    data["workload"].update(topics=[{"name": "hot", "partitions": 1, "replication_factor": 1}], duration_s=120)
    del data["workload"]["end_after_actions_s"]  # no action to end after
    data.update(prefill={"bytes_per_partition": 0} if during == "load" else
                {"bytes_per_partition": 20_000_000, "record_bytes": 1000, "batch_bytes": 1024}, actions=[])
    path = tmp_path / "stopped.yaml"
    path.write_text(yaml.safe_dump(data))
    results = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "bench", "run", str(path), "--results", str(results),
                             "--no-progress"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run_dir = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(results.glob("*/*/cluster.path"))
            if found:
                run_dir = found[0].parent
                cluster_dir = Path(found[0].read_text().strip())
                if (cluster_dir / "cluster.json").is_file():
                    break
            time.sleep(0.2)
        assert run_dir is not None and proc.poll() is None, "the run did not start its cluster within 90 s"
        time.sleep(2.0)  # the load running, or the prefill's records queued and waiting for acks
        proc.send_signal(getattr(signal, sig))
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=90)
        stopped_s = time.monotonic() - t0
        assert proc.returncode == 128 + getattr(signal, sig), err.decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pointer in results.glob("*/*/cluster.path"):  # whatever a failed teardown left, by PID
            _bench("cluster", "clean", "--dir", str(pointer.parent))
    # the cluster's stop takes a few seconds; a prefill that ran on to its end would take far longer
    assert stopped_s < 30, f"{sig} during the {during}: the run took {stopped_s:.0f} s to stop"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ended"] == f"interrupted: {sig}" and summary["completed"] is False, summary
    assert json.loads((run_dir / "runner.json").read_text())["ended"] == f"interrupted: {sig}"
    r = _bench("list", "--results", str(results))
    assert f"interrupted: {sig}" in r.stdout, r.stdout


# --------------------------------------------------------------------------------------------
# A short real run


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from bench.run.runner import run_scenario
    from bench.scenario import parse_scenario

    root = tmp_path_factory.mktemp("results")
    sc = parse_scenario(json.loads(json.dumps(SMALL)), "small.yaml")
    [(run_dir, summary)] = run_scenario(sc, results_root=root, progress=False)
    return Path(run_dir), summary


def test_short_run_end_to_end(small_run):
    run_dir, summary = small_run
    # Layout.
    assert run_dir.parent.parent.name == "results" or run_dir.parent.name == "small"
    for f in ("scenario.yaml", "history.parquet", "summary.json", "logs/harness.log", "logs/load.log",
              "logs/controller.log", "logs/broker-1.log", "cluster/controller/events.jsonl"):
        assert (run_dir / f).exists(), f
    assert not list(run_dir.glob(".history-*")), "partial histories are merged away"
    # Checkers pass, and the run measured what it should.
    checks = summary["checks"]
    assert checks["valid"] is True, (checks["failed"], checks["unknown"], checks["move_seconds"]["moves"])
    p = summary["producer"]
    assert p["acked"] > 1000 and p["failed"] == 0 and p["acked"] == p["sent"]
    assert abs(p["rate_msgs_per_s"] - 200) < 40
    # workload.end_after_actions_s: the load ended after the move, not at duration_s
    [fin] = [json.loads(d) for d in read_history(run_dir / "history.parquet").filter(
        pc.equal(pc.field("event"), "load_finished"))["detail"].to_pylist()]
    assert fin["after_actions"] is True and fin["early"] is False and 5 < fin["load_seconds"] < 20, fin
    [move] = summary["moves"]
    assert (move["topic"], move["partition"], move["from"], move["to"]) == ("hot", 0, [1], [3])
    assert move["new_leader"] == 3
    assert 0 < move["move_seconds"] < 10
    assert move["partition_bytes"] >= 2 * 2**20
    assert move["bytes_moved_inter_broker"] >= 2 * 2**20
    # The protocol-only view beside the journal's: the same move, seen through Metadata,
    # ListPartitionReassignments and DescribeLogDirs.
    proto = move["protocol"]
    assert proto["journal_complete_seconds"] is not None and proto["leader_change_seconds"] is not None
    # the poller sees the change at its next poll, which may come just after the first ack
    assert proto["leader_change_seconds"] <= move["move_seconds"] + proto["resolution_s"]["metadata"]
    assert proto["target_bytes"]["3"] >= 2 * 2**20  # the new replica holds the prefill
    assert summary["verify"]["complete"] == 2 and summary["verify"]["prefill_read"] > 0
    for k in ("run_id", "scenario", "system", "started_at", "finished_at", "duration_s", "config_id"):
        assert summary[k] is not None, k
    assert (summary["config_id"], summary["repetition"], summary["repetitions"]) == ("small", 1, 1)
    prov = summary["provenance"]
    assert set(prov["machine"]) == {"cpus", "mem_gib", "kernel", "platform", "python"}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert prov["git"]["commit"] == (head or None) and isinstance(prov["git"]["dirty"], bool) == bool(head)
    assert prov["links_emulated"] is False and prov["date"].startswith(summary["started_at"][:10])
    assert prov["versions"]["confluent-kafka"] and prov["versions"]["librdkafka"] and prov["versions"]["seaweedfs"]
    conf = summary["configuration"]
    assert (conf["system"], conf["replication_factor"], conf["min_insync_replicas"], conf["acks"]) == \
        ("replication", 1, None, "all")
    assert conf["throttle_bytes_per_s"] == 8 * 2**20 and conf["throttle_rule"] == "a fixed rate in bytes/s"
    # workload.linger_ms reached the load's producers: recorded, and felt (a message waits up to
    # 100 ms for its batch: the median ack takes tens of ms, a few ms at the default 5 ms)
    assert conf["linger_ms"] == summary["params"]["linger_ms"] == 100
    assert json.loads((run_dir / "logs" / "load-spec.json").read_text())["linger_ms"] == 100
    assert p["latency_ms"]["p50"] >= 30, p["latency_ms"]
    assert p["load_cpu_s_per_1000_msgs"] is not None and p["load_cpu_s_per_1000_msgs"] > 0
    assert "page cache" in conf["ack_meaning"]
    for k in ("prefill_bytes_per_partition", "replication_throttle_bytes_per_s", "objstore_bandwidth_bytes_per_s",
              "message_bytes", "produce_rate_msgs_per_s", "brokers"):
        assert k in summary["params"], k
    # The whole host's CPU once a second over the load, and the saturation rule (bench/check/host.py)
    # on the run's load window and on the move's.
    host = summary["host"]
    assert host["source"] == "host_sample" and host["samples"] >= 5 and 0 < host["busy_mean_pct"] <= 100
    assert host["saturated"] is (host["busy_mean_pct"] > host["threshold_pct"] == 90)
    assert host["busy_mean_pct"] <= host["busy_peak_pct"] and host["samples_over_threshold"] <= host["samples"]
    assert move["host_saturated"] is None or move["host_saturated"] is (move["host_busy_mean_pct"] > 90)
    hist = read_history(run_dir / "history.parquet")
    [end] = hist.filter(pc.equal(pc.field("event"), "load_finished"))["ts"].to_pylist()
    # the samples overlapping the load window (bench/check/host.py; the samplers stop once the load
    # reports "finished", so one may start after it)
    rows = hist.filter(pc.equal(pc.field("event"), "host_sample")).select(["ts", "detail"]).to_pylist()
    samples = [d for r in rows if r["ts"] - (d := json.loads(r["detail"]))["interval_s"] < end]
    assert len(samples) == host["samples"] and all(0.9 < x["interval_s"] < 2 and x["cpus"] >= 1 for x in samples)
    assert all(0 <= x["busy_pct"] <= 100 and 0 <= x["user_pct"] + x["system_pct"] <= 100.1 for x in samples)


def test_analyze_reproduces_summary(small_run):
    run_dir, _ = small_run
    stored = json.loads((run_dir / "summary.json").read_text())
    assert json.loads(dumps(analyze(run_dir))) == stored
    r = _bench("analyze", str(run_dir))
    assert r.returncode == 0 and "matches stored summary.json" in r.stdout, r.stdout + r.stderr


def test_list_shows_whether_the_host_was_saturated(small_run):
    run_dir, summary = small_run
    r = _bench("list", "--results", str(run_dir.parent.parent))
    # the runs table's row (a built-in scenario's description may hold the run id's word too)
    row = next(line for line in r.stdout.splitlines() if str(summary["run_id"]) in line and line.count("│") > 6)
    want = {True: "yes", False: "no", None: "unknown"}[summary["host"]["saturated"]]
    assert row.split("│")[6].strip().startswith(f"{want} ("), r.stdout
    assert "host saturated: a window is saturated when the host's mean CPU busy share" in r.stdout


def test_real_history_losing_an_acked_message_fails_lost_writes(small_run):
    run_dir, _ = small_run
    table = read_history(run_dir / "history.parquet")
    reads = pc.and_(pc.equal(table["kind"], "read"), pc.greater_equal(table["msg_id"], 0))
    victim = table.filter(reads)["msg_id"][0].as_py()
    edited = table.filter(pc.invert(pc.and_(reads, pc.equal(table["msg_id"], victim))))
    assert check_lost_writes(table)["valid"] is True
    res = check_lost_writes(edited)
    assert res["valid"] is False and res["lost_examples"] == [victim]


# --------------------------------------------------------------------------------------------
# Journal translation and shapes (no cluster)


def test_journal_translation():
    """Core events mean the same for every system; each profile says what its own move events mean."""
    copy, shared = profile("replication").journal, profile("shared").journal
    w = MoveWindows()
    w.add(0, [("hot", 0)], 100.0)
    w.end(0, 110.0)
    [lc] = translate({"ts": 105.0, "event": "leader_change", "source": "controller", "topic": "hot",
                      "partition": 0, "leader": 3, "leader_epoch": 2}, copy, w)
    assert lc["event"] == "leader_change" and lc["detail"]["action_id"] == 0 and lc["detail"]["leader"] == 3
    [mc] = translate({"ts": 106.0, "event": "reassignment_completed", "source": "controller", "topic": "hot",
                      "partition": 0, "replicas": [3], "leader": 3}, copy, w)
    assert mc["event"] == "move_complete" and mc["detail"]["new_leader"] == 3
    [c_in] = translate({"ts": 104.0, "event": "bytes_moved", "source": 3, "kind": "inter_broker",
                        "direction": "reassign_in", "topic": "hot", "partition": 0, "bytes": 10}, copy, w)
    [c_out] = translate({"ts": 104.0, "event": "bytes_moved", "source": 1, "kind": "inter_broker",
                         "direction": "reassign_out", "topic": "hot", "partition": 0, "bytes": 10}, copy, w)
    assert c_in["detail"]["name"] == "bytes_moved_inter_broker" and c_in["detail"]["value"] == 10
    assert c_out["detail"]["name"] == "bytes_sent_inter_broker"  # a copy is counted once
    rows = translate({"ts": 105.0, "event": "shared_partition_closed", "source": 1, "topic": "hot",
                      "partition": 0, "force_upload_ms": 120.0, "force_upload_bytes": 4096,
                      "close_total_ms": 300.0}, shared, w)
    assert [r["event"] for r in rows] == ["shared_partition_closed", "move_phase", "counter"]
    assert rows[1]["detail"]["phase"] == "close.force_upload" and rows[1]["detail"]["seconds"] == 0.12
    assert rows[2]["detail"]["name"] == "bytes_moved_objstore"
    [el, ph] = translate({"ts": 107.0, "event": "shared_move_elected", "source": "controller", "topic": "hot",
                          "partition": 0, "to": 2, "since_request_s": 0.8}, shared, w)
    assert el["event"] == "move_complete" and el["detail"]["new_leader"] == 2 and ph["detail"]["seconds"] == 0.8
    # Another system's move event means nothing special to this one: kept as is.
    [kept] = translate({"ts": 107.0, "event": "shared_move_elected", "source": "controller", "topic": "hot",
                        "partition": 0, "to": 2}, copy, w)
    assert kept["event"] == "shared_move_elected"
    [other] = translate({"ts": 200.0, "event": "something_new", "source": 2, "topic": "hot", "partition": 0}, copy, w)
    assert other["event"] == "something_new" and "action_id" not in other["detail"]  # outside the window
    [bad] = translate({"event": "x"}, copy, w)
    assert bad["event"] == "journal_malformed"


def test_shapes():
    assert rate_at("steady", 5, 100) == 100
    assert rate_at("ramp", 5, 100, ramp_s=10) == 50 and rate_at("ramp", 20, 100, ramp_s=10) == 100
    kw = {"burst_every_s": 10, "burst_factor": 3, "burst_s": 2}
    assert rate_at("burst", 1, 100, **kw) == 100  # first period at base rate
    assert rate_at("burst", 11, 100, **kw) == 300 and rate_at("burst", 13, 100, **kw) == 100
    # The Locust shape classes are checked in a subprocess: importing locust here would
    # monkey-patch this pytest process with gevent.
    code = ("from workloads.shapes import make_shape\n"
            "s = make_shape('ramp', 100, 30, users=2, ramp_s=10)\n"
            "assert s.tick() == (2, 2.0) and s.rate_at(5) == 50\n"
            "assert make_shape('steady', 1, 0.0).tick() is None\n"
            "assert make_shape('steady', 1, 0.0, hold=True).tick() == (1, 1.0)\n"
            "import workloads.kafka_produce as kp\n"
            "from locust.util.load_locustfile import is_shape_class, is_user_class\n"
            "assert [n for n, v in vars(kp).items() if is_shape_class(v)] == ['ScenarioShape']\n"
            "assert [n for n, v in vars(kp).items() if is_user_class(v)] == ['KafkaProducerUser']\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_move_scheduler_limits_moves_per_broker():
    """Cruise Control's per-broker concurrency: a move counts on every broker it adds or removes a
    replica on; moves start in plan order, a later one passes a blocked one; None = all at once."""
    from bench.run.timeline import MoveScheduler

    plan = [("t", 0, [4], [1]), ("t", 1, [4], [2]), ("t", 2, [5], [3]), ("t", 3, [2, 6, 7], [2, 3, 7])]
    s = MoveScheduler(plan, 1)
    assert [p for _, p, _ in s.take()] == [0, 2]  # 1 waits for broker 4; 3 waits for broker 3
    assert s.queued() == 2 and s.take() == []
    s.finish(("t", 0))
    assert [p for _, p, _ in s.take()] == [1]
    s.finish(("t", 2))
    assert [(p, to) for _, p, to in s.take()] == [(3, [2, 6, 7])]  # counts on 3 and 6, not 2 or 7
    for tp in [("t", 1), ("t", 3)]:
        s.finish(tp)
    assert s.idle() and s.load == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0}
    every = MoveScheduler(plan, None)
    assert len(every.take()) == 4 and every.queued() == 0
