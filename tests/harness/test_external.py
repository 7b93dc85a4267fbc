"""A cluster the harness does not start (system kind external): scenario validation, client
settings, and a real run against a cluster started on the side, acted on only through the Kafka
protocol and the scenario's shell commands."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.run import clients
from bench.run.cluster import Cluster
from bench.scenario import ScenarioError, load_scenario, parse_scenario, resolve_scenario, to_external

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-7f3a-never-written"

BASE = {
    "name": "ext",
    "system": {"kind": "external", "brokers": 3, "bootstrap": "127.0.0.1:9092"},
    "workload": {"topics": [{"name": "t", "partitions": 2}], "message_bytes": "1KiB",
                 "produce_rate_msgs_per_s": 100, "duration_s": 10},
}


def _with(**system) -> dict:
    d = json.loads(json.dumps(BASE))
    d["system"].update(system)
    return d


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["system"].pop("bootstrap"), "system.bootstrap: required for system kind 'external'"),
    (lambda d: d["system"].update(bootstrap="nohost"), "'nohost' is not host:port"),
    (lambda d: d["system"].update(bootstrap="h:1,h:99999"), "'h:99999' is not host:port"),
    (lambda d: d["system"].update(kind="replication"), "system.bootstrap: only for a cluster the harness does not start"),
    (lambda d: d["system"].update(wal_upload_threshold_bytes="64MiB"),
     "system.wal_upload_threshold_bytes: not a setting of system 'external'"),
    (lambda d: d["system"].update(extra={"num.partitions": 3}), "system.extra: not a setting of system 'external'"),
    (lambda d: d.update(network={"link_rate": "100mbit"}), "network.link_rate: the links of a cluster the harness"),
    (lambda d: d["system"].update(client={"acks": "1"}), "system.client.acks: cannot be set"),
    (lambda d: d["system"].update(client={"sasl.password": {"env": "1BAD"}}), "environment variable name"),
    (lambda d: d["system"].update(commands={"kill_broker": "kill {pid}"}), "unknown placeholder(s) ['pid']"),
    (lambda d: d.update(actions=[{"at_s": 1, "kind": "kill_broker", "broker": 2}]),
     "actions.0.kind: kill_broker: needs system.commands.kill_broker"),
    (lambda d: d.update(actions=[{"at_s": 1, "kind": "kill_controller"}]),
     "actions.0.kind: kill_controller: acts on processes or links of a cluster the harness starts"),
    (lambda d: d.update(actions=[{"at_s": 1, "kind": "add_broker_and_rebalance"}]),
     "actions.0.kind: add_broker_and_rebalance: starts a broker"),
])
def test_external_scenario_errors_name_the_field(mutate, needle):
    d = json.loads(json.dumps(BASE))
    mutate(d)
    with pytest.raises(ScenarioError) as e:
        parse_scenario(d, "ext.yaml")
    assert needle in str(e.value)
    assert str(e.value).startswith("ext.yaml: ")


def test_for_cluster_prefixes_topics_and_takes_the_cluster_defaults():
    d = _with(commands={"kill_broker": "true {broker}"})
    d["workload"]["topics"].append({"name": "u", "partitions": 1, "replication_factor": 1})
    d["prefill"] = {"bytes_per_partition": "1MiB", "topics": ["t"]}
    d["actions"] = [{"at_s": 1, "kind": "reassign", "topic": "t", "partition": 0, "replace": 1, "by": 3},
                    {"at_s": 2, "kind": "move_set", "partitions": [{"topic": "u", "partition": 0, "to": [2]}]}]
    sc = parse_scenario(d, "ext.yaml")
    assert sc.replication_factor(sc.workload.topics[0]) is None  # the cluster's, not known yet
    r = sc.for_cluster([1, 2, 3, 4], default_replication_factor=2, min_insync_replicas=2)
    assert [t.name for t in r.workload.topics] == ["bench.t", "bench.u"]
    assert [r.replication_factor(t) for t in r.workload.topics] == [2, 1]
    assert [r.min_insync_replicas(t) for t in r.workload.topics] == [2, 1]  # never above the RF
    assert r.prefill.topics == ["bench.t"]
    assert r.actions[0].topic == "bench.t" and r.actions[1].partitions[0].topic == "bench.u"
    assert r.placement()["bench.t"][0] == [1, 2]
    with pytest.raises(ScenarioError, match=r"the cluster has \[0, 1, 2\] \(no \[3\]\)"):
        sc.for_cluster([0, 1, 2], 2, 1)
    # A replace move checked once the replicas are known: broker 3 holds none of bench.t-0 at RF 3.
    with pytest.raises(ScenarioError, match="already holds a replica"):
        sc.for_cluster([1, 2, 3], 3, 2)


def test_builtin_scenario_as_external_says_what_did_not_carry_over():
    sc = load_scenario(resolve_scenario("broker-loss"))
    ext, notes = to_external(sc, "h:9092", commands={"kill_broker": "k {broker}", "restart_broker": "r {broker}"},
                             client={"client.id": "x"})
    assert ext.system.kind == "external" and ext.system.client == {"client.id": "x"}
    assert ext.matrix == {} and ext.network.link_rate is None
    text = "\n".join(notes)
    assert "system.segment_bytes=10485760 not applied" in text and "--link-rate 100mbit" in text
    assert "--object-store-latency p50=30ms,p99=80ms" in text
    ext, notes = to_external(load_scenario(resolve_scenario("reassign-one")), "h:9092")
    assert ext.system.replication_throttle_bytes_per_s == 6_250_000  # the move budget: half the 100mbit link
    assert any(n.startswith("move budget 0.5 of the 100mbit link -> 6250000 bytes/s") for n in notes), notes
    # the shared system's mechanism is not a Kafka cluster's: said, not carried
    _, notes = to_external(load_scenario(resolve_scenario("reassign-one"), ["system.kind=shared"]), "h:9092")
    assert "system.move_budget_of_link=0.5 not applied: shared's mechanism for it is not the harness's to set on " \
           "that cluster" in notes
    assert list(ext.matrix) == ["prefill.bytes_per_partition"]


def test_client_settings_reach_each_kind_of_client(monkeypatch):
    monkeypatch.setenv("BENCH_TEST_SECRET", SECRET)
    settings = {"client.id": "probe", "linger.ms": "7", "security.protocol": "PLAINTEXT",
                "sasl.password": {"env": "BENCH_TEST_SECRET"}, "ssl.ca.location": "/ca.pem",
                "request.timeout.ms": "9000"}
    conf = clients.librdkafka("h:1", {"client.id": "own", "linger.ms": 20}, settings)
    assert conf["client.id"] == "probe" and conf["linger.ms"] == "7" and conf["sasl.password"] == SECRET
    kp = clients.kafka_python(settings)
    assert kp == {"client_id": "probe", "security_protocol": "PLAINTEXT", "sasl_plain_password": SECRET,
                  "ssl_cafile": "/ca.pem", "request_timeout_ms": 9000}  # linger.ms: not an admin's setting
    assert clients.plain(parse_scenario(_with(client=settings), "x").system.client)["sasl.password"] == \
        {"env": "BENCH_TEST_SECRET"}
    monkeypatch.delenv("BENCH_TEST_SECRET")
    with pytest.raises(clients.ClientSettingError, match="system.client.sasl.password: environment variable "
                                                         "BENCH_TEST_SECRET is not set"):
        clients.resolve(settings)


def _bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300")
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_unreachable_bootstrap_fails_fast_naming_it(tmp_path):
    t0 = time.monotonic()
    r = _bench("run", "reassign-one", "--external", "127.0.0.1:1", "--results", str(tmp_path), "--no-progress")
    assert r.returncode == 1, r.stderr
    assert "no broker reachable at 127.0.0.1:1: tried 127.0.0.1:1 (TCP connect to 127.0.0.1: connection refused)" \
        in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert time.monotonic() - t0 < 5  # a refused port is said at once (issue 17)
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "client.id": "test-setup"})
    for i in range(n):
        p.produce(topic, value=f"foreign-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    """Every record of the topic: ``expect`` of them, then one more second for any extra."""
    from confluent_kafka import Consumer, TopicPartition

    # Reads by assignment, commits nothing: the test reads, it does not consume as a group.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "test-setup"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, deadline = [], time.monotonic() + 30
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m.value())
        if len(out) >= expect:
            deadline = min(deadline, time.monotonic() + 1.0)
    c.close()
    return sorted(out)


@pytest.mark.slow
def test_external_run_touches_only_its_topics_and_reaches_every_client(make_cluster, run_scenario, monkeypatch,
                                                                      tmp_path):
    """A real run against a cluster started on the side, from a scenario that names its bootstrap
    and not its brokers: a move (estimated before its request) and a broker kill / restart through
    the scenario's commands pass the checkers; a topic without the prefix keeps every record; the
    run's topics are gone and the throttle is back afterwards; every client connection carried the
    scenario's client.id; the secret read from the environment is in no file of the run."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    c = make_cluster("replication", 3, default_replication_factor=2, min_insync_replicas=1)
    try:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, client_id="test-setup")
        admin.create_topics([NewTopic("orders", 2, 2)])
        _produce(c.bootstrap, "orders", 40)
        before = _read_all(c.bootstrap, "orders", 2, 40)
        assert len(before) == 40
        bench = f"{sys.executable} -m bench cluster"
        monkeypatch.setenv("BENCH_TEST_SECRET", SECRET)
        data = _with(bootstrap=c.bootstrap, replication_throttle_bytes_per_s="20MiB",
                     client={"client.id": "probe-7f3a", "linger.ms": 7, "sasl.password": {"env": "BENCH_TEST_SECRET"}},
                     commands={"kill_broker": f"{bench} kill-broker --dir {c.dir} --broker {{broker}}",
                               "restart_broker": f"{bench} restart-broker --dir {c.dir} --broker {{broker}}"})
        data["workload"]["duration_s"] = 12
        data["prefill"] = {"bytes_per_partition": "256KiB"}
        data["actions"] = [{"at_s": 2, "kind": "reassign", "topic": "t", "partition": 0, "replace": 1, "by": 3},
                           {"at_s": 5, "kind": "kill_broker", "broker": 2},
                           {"at_s": 8, "kind": "restart_broker", "broker": 2}]
        data["consumers"] = {"mode": "tail", "members": 2}
        del data["system"]["brokers"]  # a bootstrap address and nothing else: the cluster's brokers
        from bench.analysis.estimate import RunModels
        from tests.unit.test_estimate import model_json

        [(run_dir, s)] = run_scenario(data, estimates=RunModels((model_json(tmp_path, fixed=0.5),)))
        assert s.get("error") is None, s.get("error")
        assert s["checks"]["valid"] is True, s["checks"]
        assert s["system"] == "external" and s["configuration"]["replication_factor"] == 2
        [move] = s["moves"]
        assert move["topic"] == "bench.t" and move["to"] == [3, 2] and move["move_seconds"] is not None
        assert move["protocol"]["leader_change_seconds"] is not None
        assert s["configuration"]["brokers"] == 3  # from Metadata
        # estimated before the request, from the cluster's configs (the system) and throttle
        assert move["estimate_seconds"] > 0.5 and move["estimate_model_commit"] == "abc1234", move
        assert move["estimate_error_pct"] is not None
        [outage] = s["outages"]
        assert outage["broker"] == 2 and outage["unavailable_seconds"] is not None

        assert _read_all(c.bootstrap, "orders", 2, 40) == before  # the foreign topic: every record, untouched
        assert not [t for t in admin.list_topics() if t.startswith("bench.")]
        assert s["consumers"]["groups"]["bench.tail-0"]["missing"] == 0
        groups = [g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()]
        assert not [g for g in groups if g.startswith("bench.")], groups  # the run's group: gone
        cfg = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                                     ["leader.replication.throttled.rate"])], config_filter="all")
        assert cfg["broker"]["1"]["leader.replication.throttled.rate"]["config_source"] == "DEFAULT_CONFIG"

        ids = set()
        for ev in Path(c.dir).glob("broker-*/events.jsonl"):
            for line in ev.read_text().splitlines():
                rec = json.loads(line)
                if rec.get("event") == "client_connected" and rec["ts"] >= s["moves"][0]["request_ts"] - 60:
                    ids.add(rec["client_id"])
        ours = {i for i in ids if not i.startswith("replica-fetcher-") and i != "test-setup"}
        assert ours == {"probe-7f3a"}, ids  # load, prefill, verify, poller, admins, observer alike
        spec = json.loads((run_dir / "logs" / "load-spec.json").read_text())
        assert spec["client"]["linger.ms"] == "7"  # the load's producers get it (kafka_producer_config)
        for f in run_dir.rglob("*"):
            if f.is_file():
                assert SECRET.encode() not in f.read_bytes(), f

        # A topic of the run already there: refused before anything is written, and kept.
        admin.create_topics([NewTopic("bench.t", 1, 1)])
        [(_, s2)] = run_scenario(data)
        assert "bench.t already exist on the cluster" in s2["error"] and "existing_topics: replace" in s2["error"]
        assert "bench.t" in admin.list_topics()
        admin.close()
    finally:
        # The restart was done by another process: stop the brokers cluster.json names now.
        Cluster.load(c.dir).stop()


def test_crosscheck_compares_medians_within_tolerance_or_resolution(tmp_path):
    from bench.report import blocks as figures
    from bench.run.crosscheck import compare

    def run(cfg, move, out, valid=True):
        return {"config_id": cfg, "checks": {"valid": valid}, "completed": True, "moves": [{"move_seconds": move}],
                "outages": [{"unavailable_seconds": out}] if out is not None else []}

    b = [run("a", 10.0, None), run("a", 12.0, None), run("a", 11.0, None), run("b", 0.50, 4.0), run("b", 0.52, 4.1)]
    e = [run("a", 11.9, None), run("a", 12.5, None), run("a", 11.5, None), run("b", 0.58, 4.6), run("b", 0.60, 4.7)]
    res = compare(b, e)
    a, bb = res["configs"]
    assert a["move_seconds"]["built_in"] == 11.0 and a["move_seconds"]["as_external"] == 11.9 and a["agrees"]
    assert bb["move_seconds"]["agrees"]  # 0.08 s apart: over 10 %, within the 0.1 s poll
    assert not bb["unavailable_seconds"]["agrees"] and not bb["agrees"] and not res["agrees"]
    assert not compare([run("a", 1.0, None)], [run("a", 1.0, None, valid=False)])["agrees"]  # verdicts differ

    out = tmp_path / "xc"
    (out / "s" / "r").mkdir(parents=True)
    (out / "s" / "r" / "summary.json").write_text(json.dumps({**b[0], "run_id": "a", "provenance": {
        "date": "2026-11-24", "git": {"commit": "abc123", "dirty": False}}}))
    (out / "crosscheck.json").write_text(json.dumps({"scenarios": {"s": {"replication": res}}, "agrees": False}))
    figures.collect([out / "crosscheck.json"], "xc", out_dir=tmp_path)
    text = figures.render("xc", tmp_path)
    assert "| s | replication | b | 2 / 2 | True / True | 0.510 / 0.590 (x1.16) | 4.05 / 4.65 (x1.15) | **no** |" in text
