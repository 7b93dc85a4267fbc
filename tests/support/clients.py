"""Small helpers around the real clients used by tests and benchmarks (clusters themselves:
tests/support/clusters.py)."""
from __future__ import annotations

import subprocess
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    a = admin(bootstrap)
    try:
        res = a.create_topics(topics)
        errs = [t for t in res.to_object()["topics"] if t["error_code"]] if hasattr(res, "to_object") else \
            [t for t in res["topics"] if t["error_code"]]
        assert not errs, errs
    finally:
        a.close()


def idempotent_producer(bootstrap: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 60000}
    conf.update(extra)
    return Producer(conf)


def produce_all(p: Producer, items, flush_timeout: float = 120.0) -> list:
    """Produce (topic, partition|None, key, value, headers) items; returns acked messages."""
    acked, failed = [], []

    def cb(err, msg):
        (failed if err else acked).append((err, msg) if err else msg)

    for topic, part, key, value, headers in items:
        while True:
            try:
                if part is None:
                    p.produce(topic, value=value, key=key, headers=headers, on_delivery=cb)
                else:
                    p.produce(topic, value=value, key=key, headers=headers, partition=part, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(flush_timeout)
    assert remaining == 0, f"{remaining} messages not delivered in {flush_timeout}s"
    assert not failed, failed[:5]
    return acked


def consume_all(bootstrap: str, tps: dict[tuple[str, int], int], timeout: float = 60.0) -> dict:
    """Read each (topic, partition) from offset 0 until `count` messages were read.
    Returns {(topic, partition): [(offset, key, value, headers), ...]}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    out = {tp: [] for tp in tps}
    try:
        c.assign([TopicPartition(t, p, 0) for t, p in tps])
        deadline = time.monotonic() + timeout
        while any(len(out[tp]) < n for tp, n in tps.items()):
            if time.monotonic() > deadline:
                got = {tp: len(v) for tp, v in out.items()}
                raise AssertionError(f"timed out reading back: got {got}, want {tps}")
            for m in c.consume(10000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                out[(m.topic(), m.partition())].append((m.offset(), m.key(), m.value(), m.headers()))
    finally:
        c.close()
    return out


def wait_for(pred, timeout: float, what: str, every: float = 0.05):
    """Poll pred() until it returns something truthy (returned); fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def netns_unavailable() -> str | None:
    """Why this machine cannot make network namespaces (emulated links need root or
    CAP_NET_ADMIN and iproute2), or None if it can: tried with a throwaway namespace."""
    name = f"rbprobe{uuid.uuid4().hex[:6]}"
    try:
        r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10, check=False)
    except FileNotFoundError:
        return "iproute2 (`ip`) is not installed"
    if r.returncode != 0:
        return f"`ip netns add` is not permitted here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10, check=False)
    return None


def network_names(stem: str) -> list[str]:
    """Network namespaces and root-namespace links whose names start with `stem`, read from
    `ip` itself (not through the code under test); [] without iproute2."""
    out = []
    for cmd in (["ip", "netns", "list"], ["ip", "-o", "link"]):
        try:
            text = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False).stdout
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return []
        for line in text.splitlines():
            # "rbabc123-b1 (id: 2)" / "7: rbabc123-cl@if6: <...>"
            name = line.split()[0] if cmd[1] == "netns" else line.split(":")[1].strip().split("@")[0]
            if name.startswith(stem):
                out.append(name)
    return out


def incremental_alter(c, rtype: int, name: str, configs: dict) -> None:
    """IncrementalAlterConfigs (None deletes) through a raw connection to broker 1: exact control
    of the resource name ("" = the cluster-wide broker default, which client libraries refuse).
    rtype: 2 topic, 4 broker."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

    from tests.support.rawclient import RawConn

    b = c.brokers[1]
    R = IncrementalAlterConfigsRequest
    req = R[1](validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=rtype, resource_name=name, configs=[
            R.AlterConfigsResource.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
            for k, v in configs.items()])])
    resp = RawConn(b.host, b.port).request(req, IncrementalAlterConfigsResponse)
    assert [r.error_code for r in resp.responses] == [0], resp
