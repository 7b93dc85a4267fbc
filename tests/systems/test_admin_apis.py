"""Admin APIs a protocol-only observer and Kafka's own tools need (issue 14), with real clients
(kafka-python's KafkaAdminClient, confluent-kafka's AdminClient) against real clusters of both
systems: DescribeLogDirs, ElectLeaders, CreatePartitions, DescribeConfigs for brokers and topics
with Kafka's config sources, unknown settings refused, `cluster kill-broker` / `restart-broker`,
and the brokers' `client_connected` journal events.

One cluster per system (the fixtures repl and shared of tests/systems/conftest.py, shared with
test_groups.py: these tests only add topics and dynamic configs of their own), every process
stopped by PID at the end.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, ResourceType
from confluent_kafka.admin import NewTopic as CNewTopic
from kafka import TopicPartition as KTP
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from bench.run.cluster import Cluster
from systems.core import errors
from systems.core.events import read_events
from systems.core.process import alive
from tests.support.cli import ROOT, bench
from tests.support.clients import (
    admin,
    consume_all,
    incremental_alter,
    create_topics,
    idempotent_producer,
    produce_all,
    wait_for,
)
from tests.support.rawclient import RawConn

pytestmark = pytest.mark.timeout(180)


def _conf_admin(c: Cluster, **extra) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0, **extra})


def _produce(c: Cluster, topic: str, partitions: list[int], n: int = 20, size: int = 200) -> None:
    p = idempotent_producer(c.bootstrap)
    produce_all(p, [(topic, part, b"k%d" % i, b"v" * size, None) for part in partitions for i in range(n)])


def _leader(c: Cluster, topic: str, part: int) -> dict:
    """Leader and ISR from Metadata (librdkafka: fine with a dead broker in the bootstrap list)."""
    md = _conf_admin(c).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[part]
    return {"leader_id": p.leader, "isr_nodes": list(p.isrs), "replica_nodes": list(p.replicas)}


# -- DescribeLogDirs ------------------------------------------------------------------------
def test_describe_log_dirs_replication(repl):
    create_topics(repl.bootstrap, [NewTopic("ld", 1, 3)])
    _produce(repl, "ld", [0], n=50)
    a = admin(repl.bootstrap)
    try:
        def caught_up():
            out = a.describe_log_dirs({"ld": [0], "nosuch": [0]})
            sizes = {r["broker"]: [p for d in r["log_dirs"] for t in d["topics"] for p in t["partitions"]]
                     for r in out}
            ok = all(len(v) == 1 and v[0]["partition_size"] > 0 and v[0]["offset_lag"] == 0 for v in sizes.values())
            return (out, sizes) if ok and len({v[0]["partition_size"] for v in sizes.values()}) == 1 else None
        out, sizes = wait_for(caught_up, 15, "every replica of ld-0 caught up")
    finally:
        a.close()
    assert sorted(sizes) == [1, 2, 3]
    for r in out:
        (d,) = r["log_dirs"]
        assert d["error_code"] == 0 and d["log_dir"] == os.path.join(repl.dir, f"broker-{r['broker']}", "data")
        assert [t["name"] for t in d["topics"]] == ["ld"]  # the unknown topic is left out
        (p,) = d["topics"][0]["partitions"]
        # partition_size is the bytes of the replica's segments on that broker's disk
        on_disk = sum(os.path.getsize(f) for f in glob.glob(os.path.join(d["log_dir"], "ld-0", "*.log")))
        assert p["partition_size"] == on_disk > 50 * 200 and p["is_future_key"] is False
    # topics null: every replica the broker holds
    b = repl.brokers[2]
    resp = RawConn(b.host, b.port).request(DescribeLogDirsRequest[1](topics=None), DescribeLogDirsResponse)
    assert "ld" in [t.name for t in resp.results[0].topics]


def test_describe_log_dirs_follower_lag(repl):
    """A replica being added by a move, throttled: it reports fewer bytes than the leader and an
    offset_lag (the leader's high watermark minus its own log end)."""
    create_topics(repl.bootstrap, [NewTopic("lag", replica_assignments={0: [1]},
                                            topic_configs={"follower.replication.throttled.replicas": "*",
                                                           "min.insync.replicas": "1"})])
    _produce(repl, "lag", [0], n=3000, size=1000)
    incremental_alter(repl, 4, "2", {"follower.replication.throttled.rate": "300000"})
    a = admin(repl.bootstrap)
    try:
        a.alter_partition_reassignments({KTP("lag", 0): [1, 2]})

        def behind():
            out = {r["broker"]: {p["partition_index"]: p for d in r["log_dirs"] for t in d["topics"]
                                 for p in t["partitions"]} for r in a.describe_log_dirs({"lag": [0]}, brokers=[1, 2])}
            new, leader = out[2].get(0), out[1][0]
            return (new, leader) if new and 0 < new["partition_size"] < leader["partition_size"] \
                and new["offset_lag"] > 0 else None
        new, leader = wait_for(behind, 10, "the new replica copying, behind the leader")
        assert leader["offset_lag"] == 0 and new["offset_lag"] <= 3000
    finally:
        incremental_alter(repl, 4, "2", {"follower.replication.throttled.rate": None})
        wait_for(lambda: not a.list_partition_reassignments(), 30, "the move to finish")
        a.close()


def test_describe_log_dirs_shared(shared):
    create_topics(shared.bootstrap, [NewTopic("sld", 1, 1)])
    owner = _leader(shared, "sld", 0)["leader_id"]
    _produce(shared, "sld", [0], n=50)
    a = admin(shared.bootstrap)
    try:
        out = {r["broker"]: r["log_dirs"][0] for r in a.describe_log_dirs({"sld": [0]})}
    finally:
        a.close()
    assert sorted(out) == [1, 2]
    for bid, d in out.items():
        parts = [p for t in d["topics"] for p in t["partitions"]]
        if bid == owner:  # the owner: the partition's bytes in its stream (50 batches of one 200-byte record)
            assert len(parts) == 1 and 50 * 200 < parts[0]["partition_size"] < 50 * 400 and parts[0]["offset_lag"] == 0
        else:
            assert parts == []


# -- CreatePartitions -----------------------------------------------------------------------
@pytest.mark.parametrize("system", ["replication", "shared"])
def test_create_partitions(system, repl, shared):
    c = {"replication": repl, "shared": shared}[system]
    rf = 3 if system == "replication" else 1
    topic = f"cp-{system}"
    create_topics(c.bootstrap, [NewTopic(topic, 1, rf)])
    a = admin(c.bootstrap)
    try:
        def codes(req, **kw):
            r = a.create_partitions(req, raise_errors=False, **kw)
            return {t.name: t.error_code for t in r.results}

        assert codes({topic: 1}) == {topic: errors.INVALID_PARTITIONS}
        assert codes({"nosuch": 2}) == {"nosuch": errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert codes({topic: {"count": 2, "assignments": [[99] * rf]}}) == {topic: errors.INVALID_REPLICA_ASSIGNMENT}
        assert codes({topic: {"count": 2, "assignments": [[1, 2][:rf % 2 + 1]]}}) == \
            {topic: errors.INVALID_REPLICA_ASSIGNMENT}  # wrong replica count
        assert codes({topic: 3}, validate_only=True) == {topic: 0}
        assert len(a.describe_topics([topic])[0]["partitions"]) == 1  # validate_only changed nothing
        assert codes({topic: {"count": 2, "assignments": [[2, 3, 1][:rf]]}}) == {topic: 0}
        assert codes({topic: 2}) == {topic: errors.INVALID_PARTITIONS}  # not an increase
        parts = {p["partition_index"]: p for p in a.describe_topics([topic])[0]["partitions"]}
        assert parts[1]["replica_nodes"] == [2, 3, 1][:rf]
    finally:
        a.close()
    # confluent-kafka's AdminClient: up to 3
    ca = _conf_admin(c)
    fs = ca.create_partitions([NewPartitions(topic, 3)], request_timeout=15)
    fs[topic].result(timeout=20)
    # the new partitions serve produce and fetch
    _produce(c, topic, [1, 2], n=10)
    got = consume_all(c.bootstrap, {(topic, 1): 10, (topic, 2): 10}, timeout=30)
    assert [o for o, *_ in got[(topic, 2)]] == list(range(10))


# -- DescribeConfigs and KIP-464 defaults ------------------------------------------------------
def _kp_configs(c: Cluster, rtype, name: str, keys=None) -> dict:
    a = admin(c.bootstrap)
    try:
        res = a.describe_configs([KConfigResource(rtype, name, configs=keys)], include_synonyms=True,
                                 config_filter="all")
    finally:
        a.close()
    return res[rtype.name.lower()][name]


def test_describe_configs_broker_sources(repl):
    cfg = _kp_configs(repl, ConfigResourceType.BROKER, "1")
    # every known setting, Kafka's names; static (--config) vs default
    assert cfg["default.replication.factor"]["value"] == "3"
    assert cfg["default.replication.factor"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert cfg["min.insync.replicas"]["value"] == "2"
    assert cfg["num.partitions"]["value"] == "1" and cfg["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["unclean.leader.election.enable"]["value"] == "false"
    assert cfg["leader.replication.throttled.rate"]["value"] == "9223372036854775807"
    assert cfg["node.id"]["value"] == "1" and cfg["node.id"]["read_only"] is True
    assert {"broker.session.timeout.ms", "replica.lag.time.max.ms", "message.max.bytes"} <= set(cfg)
    # configuration_keys filter
    assert set(_kp_configs(repl, ConfigResourceType.BROKER, "2", keys=["min.insync.replicas", "nosuch"])) == \
        {"min.insync.replicas"}
    # dynamic values (IncrementalAlterConfigs): per broker and cluster-wide default
    incremental_alter(repl, 4, "1", {"leader.replication.throttled.rate": "1000000"})
    incremental_alter(repl, 4, "", {"num.partitions": "2"})
    try:
        cfg = _kp_configs(repl, ConfigResourceType.BROKER, "1")
        assert cfg["leader.replication.throttled.rate"]["value"] == "1000000"
        assert cfg["leader.replication.throttled.rate"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert cfg["num.partitions"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        assert [s["source"] for s in cfg["num.partitions"]["synonyms"]] == \
            ["DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG"]
        other = _kp_configs(repl, ConfigResourceType.BROKER, "2")
        assert other["leader.replication.throttled.rate"]["config_source"] == "DEFAULT_CONFIG"
        # KIP-464: -1 / -1 take num.partitions (here the dynamic default) and default.replication.factor
        ca = _conf_admin(repl)
        ca.create_topics([CNewTopic("dflt")], request_timeout=15)["dflt"].result(timeout=20)
        a = admin(repl.bootstrap)
        try:
            (t,) = a.describe_topics(["dflt"])
        finally:
            a.close()
        assert len(t["partitions"]) == 2 and all(len(p["replica_nodes"]) == 3 for p in t["partitions"])
        # confluent-kafka sees the same sources
        res = ca.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        entries = list(res.values())[0].result(timeout=20)
        assert entries["default.replication.factor"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert entries["num.partitions"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert entries["leader.replication.throttled.rate"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert entries["replica.lag.time.max.ms"].is_default
    finally:
        incremental_alter(repl, 4, "1", {"leader.replication.throttled.rate": None})
        incremental_alter(repl, 4, "", {"num.partitions": None})
    assert _kp_configs(repl, ConfigResourceType.BROKER, "1")["num.partitions"]["config_source"] == "DEFAULT_CONFIG"


def test_describe_configs_topic_defaults(repl):
    create_topics(repl.bootstrap, [NewTopic("tc", 1, 3, topic_configs={"retention.ms": "1000"}),
                                   NewTopic("tc2", 1, 3, topic_configs={"min.insync.replicas": "3"})])
    cfg = _kp_configs(repl, ConfigResourceType.TOPIC, "tc")
    assert cfg["retention.ms"]["value"] == "1000" and cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # no topic value: the broker synonym's (static here), as Kafka's synonyms give it
    assert cfg["min.insync.replicas"]["value"] == "2"
    assert cfg["min.insync.replicas"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert cfg["cleanup.policy"]["value"] == "delete" and cfg["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["max.message.bytes"]["value"] == "1048588"
    assert cfg["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    cfg2 = _kp_configs(repl, ConfigResourceType.TOPIC, "tc2")
    assert cfg2["min.insync.replicas"]["value"] == "3"
    assert [s["source"] for s in cfg2["min.insync.replicas"]["synonyms"]] == \
        ["DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"]


def test_shared_defaults_and_kip464(shared):
    cfg = _kp_configs(shared, ConfigResourceType.BROKER, "1")
    assert cfg["default.replication.factor"]["value"] == "1"
    assert cfg["default.replication.factor"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["min.insync.replicas"]["value"] == "1"
    assert cfg["num.partitions"]["value"] == "2" and cfg["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert cfg["wal.upload.threshold.bytes"]["config_source"] == "DEFAULT_CONFIG"  # the system's own keys too
    assert cfg["s3.endpoint"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert cfg["s3.secret.key"]["value"] is None and cfg["s3.secret.key"]["is_sensitive"] is True
    a = admin(shared.bootstrap)
    try:
        a.create_topics([NewTopic("sdflt", -1, -1)])
        (t,) = a.describe_topics(["sdflt"])
    finally:
        a.close()
    assert len(t["partitions"]) == 2 and all(len(p["replica_nodes"]) == 1 for p in t["partitions"])


# -- ElectLeaders ---------------------------------------------------------------------------
def test_elect_leaders_shared(shared):
    create_topics(shared.bootstrap, [NewTopic("sel", 1, 1)])
    a = admin(shared.bootstrap)
    try:
        r = a.elect_leaders(0, {"sel": [0]}, raise_errors=False)
    finally:
        a.close()
    (res,) = r.replica_election_results
    assert [p.error_code for p in res.partition_result] == [errors.ELECTION_NOT_NEEDED]


def _cli(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return bench("cluster", *args, timeout=timeout)


def test_elect_leaders_and_kill_restart_cli(repl):
    """Preferred and unclean election on the replication system, with broker 1 (the preferred
    replica) killed and restarted through `python -m bench cluster kill-broker|restart-broker`."""
    a = admin(repl.bootstrap)
    try:
        a.create_topics([NewTopic("el", replica_assignments={0: [1, 2, 3]})])
        wait_for(lambda: _leader(repl, "el", 0)["leader_id"] == 1, 10, "leader 1")

        def elect(kind, tps, client=a):
            r = client.elect_leaders(kind, tps, raise_errors=False)
            return {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results
                    for p in t.partition_result}

        assert elect(0, {"el": [0, 7]}) == {("el", 0): errors.ELECTION_NOT_NEEDED,
                                            ("el", 7): errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert elect(1, {"el": [0]}) == {("el", 0): errors.ELECTION_NOT_NEEDED}  # it has a leader

        pid = repl.brokers[1].pid
        r = _cli("kill-broker", "--dir", repl.dir, "--broker", "1", timeout=20)
        assert r.returncode == 0 and "killed" in r.stdout, r
        assert not alive(pid, repl.dir)
        wait_for(lambda: _leader(repl, "el", 0)["leader_id"] == 2, 15, "leader 2 after broker 1's loss")
        # a client that knows broker 1 is gone (kafka-python keeps sending to a dead controller id)
        b2 = repl.brokers[2]
        a2 = KafkaAdminClient(bootstrap_servers=f"{b2.host}:{b2.port}", request_timeout_ms=15000)
        try:
            assert elect(0, {"el": [0]}, a2) == {("el", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE}
        finally:
            a2.close()

        r = _cli("restart-broker", "--dir", repl.dir, "--broker", "1", "--timeout", "30")
        assert r.returncode == 0 and "serving again" in r.stdout, r
        state = json.load(open(os.path.join(repl.dir, "cluster.json")))
        new_pid = next(b["pid"] for b in state["brokers"] if b["id"] == 1)
        assert new_pid != pid and alive(new_pid, repl.dir)  # outlived the CLI
        repl.brokers[1] = Cluster.load(repl.dir).brokers[1]  # the fixture stops the new process
        wait_for(lambda: 1 in _leader(repl, "el", 0)["isr_nodes"], 20, "broker 1 back in the ISR")
        assert _leader(repl, "el", 0)["leader_id"] == 2
    finally:
        a.close()
    # confluent-kafka, partitions null: every partition; those not needing an election are left out
    ca = _conf_admin(repl)
    out = ca.elect_leaders(ElectionType.PREFERRED, None).result(timeout=20)
    got = {(tp.topic, tp.partition): err for tp, err in out.items()}
    # el-0 and every other partition broker 1's loss moved: elected back; nothing else listed
    assert ("el", 0) in got and all(err is None for err in got.values()), got
    assert _leader(repl, "el", 0)["leader_id"] == 1
    out = ca.elect_leaders(ElectionType.PREFERRED, [CTP("el", 0)]).result(timeout=20)
    (err,) = out.values()
    assert err is not None and err.code() == KafkaError.ELECTION_NOT_NEEDED, out


# -- unknown settings (the pure check: tests/unit/test_config_check.py; the CLI: tests/harness/test_cli_refusals.py)
def test_processes_refuse_unknown_settings(tmp_path):
    """Defence in depth: the broker and controller processes refuse an unknown key themselves."""
    cfg = json.dumps({"nosuch.key": "1"})
    for args in (["systems.core.controller", "--dir", str(tmp_path / "ctl"), "--config", cfg],
                 ["systems.core.broker", "--id", "1", "--backend", "systems.replication.backend", "--dir",
                  str(tmp_path / "b1"), "--controller", "127.0.0.1:9", "--config", cfg]):
        r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=20)
        assert r.returncode != 0 and "nosuch.key" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []  # refused before creating anything


# -- client_connected events ------------------------------------------------------------------
def test_client_connected_events(repl):
    a = admin(repl.bootstrap)
    a.close()
    k = KafkaAdminClient(bootstrap_servers=repl.bootstrap, client_id="probe-kp", request_timeout_ms=15000)
    k.list_topics()
    k.close()
    _conf_admin(repl, **{"client.id": "probe-ck"}).list_topics(timeout=15)

    def seen():
        ev = [e for e in read_events(repl.dir) if e["event"] == "client_connected"]
        ids = {e["client_id"] for e in ev}
        return ev if {"probe-kp", "probe-ck"} <= ids else None
    ev = wait_for(seen, 10, "client_connected events of both probes")
    ck = [e for e in ev if e["client_id"] == "probe-ck"]
    assert ck[0]["client_software_name"] and ck[0]["client_software_version"], ck[0]
    assert ck[0]["peer"].startswith("127.0.0.1:")
    # the brokers' own replica fetchers are recognisable by their client id
    assert any(e["client_id"].startswith("replica-fetcher-") for e in ev)
    # once per connection: no (broker, peer address) twice among the probes' connections
    keys = [(e["source"], e["peer"]) for e in ev if e["client_id"].startswith("probe-")]
    assert len(keys) == len(set(keys))


# -- tiered-storage topic configs on a cluster without tiered storage -----------------------------
def test_remote_storage_refused_without_tiered_storage(repl):
    """Kafka's names are known everywhere, but remote.storage.enable=true needs a cluster with
    remote.log.storage.system.enable (the tiered system): INVALID_CONFIG with Kafka's message, on
    create and on alter; a local retention above the total one is refused too."""
    a = AdminClient({"bootstrap.servers": repl.bootstrap})
    futs = a.create_topics([CNewTopic("rs", 1, 1, config={"remote.storage.enable": "true"}),
                            CNewTopic("lr", 1, 1, config={"retention.bytes": "1000", "local.retention.bytes": "2000"}),
                            CNewTopic("ok-local", 1, 1, config={"local.retention.bytes": "-2"})])
    errs = {}
    for name, f in futs.items():
        try:
            f.result(timeout=15)
            errs[name] = None
        except Exception as e:  # confluent_kafka.KafkaException
            errs[name] = e.args[0]
    assert errs["ok-local"] is None
    assert errs["rs"].code() == KafkaError.INVALID_CONFIG and "Tiered Storage functionality is disabled" in errs["rs"].str()
    assert errs["lr"].code() == KafkaError.INVALID_CONFIG and "local.retention.bytes" in errs["lr"].str()
    with pytest.raises(AssertionError, match="Tiered Storage functionality is disabled"):
        incremental_alter(repl, 2, "ok-local", {"remote.storage.enable": "true"})
