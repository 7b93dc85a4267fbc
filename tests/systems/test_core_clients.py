"""The core with real clients: admin, idempotent produce, two consumer libraries."""
from __future__ import annotations

import random
import time

from kafka import KafkaConsumer, TopicPartition as KTP
from kafka.admin import NewTopic

from tests.support.clients import admin, consume_all, create_topics, idempotent_producer, produce_all

N_MESSAGES = 100_000


def _messages(topics, n, seed=7):
    rnd = random.Random(seed)
    for i in range(n):
        topic = topics[i % len(topics)]
        key = f"key-{rnd.randrange(10_000)}".encode()
        value = i.to_bytes(8, "big") + rnd.randbytes(rnd.randrange(16, 200))
        headers = [("seq", str(i).encode()), ("src", b"test")]
        yield topic, None, key, value, headers


def test_produce_and_read_back_with_both_client_libraries(make_cluster):
    c = make_cluster(brokers=3)
    topics = ["orders", "payments", "audit"]
    create_topics(c.bootstrap, [
        NewTopic("orders", 6, 1),
        NewTopic("payments", num_partitions=-1, replication_factor=-1,
                 replica_assignments={i: [1 + (i % 3)] for i in range(6)}),
        NewTopic("audit", 6, 1),
    ])
    a = admin(c.bootstrap)
    try:
        described = {t["name"]: t for t in a.describe_topics(topics)}
    finally:
        a.close()
    assert all(len(described[t]["partitions"]) == 6 for t in topics)
    explicit = {p["partition_index"]: p["replica_nodes"] for p in described["payments"]["partitions"]}
    assert explicit == {i: [1 + (i % 3)] for i in range(6)}

    p = idempotent_producer(c.bootstrap)
    sent = list(_messages(topics, N_MESSAGES))
    acked = produce_all(p, sent)
    assert len(acked) == N_MESSAGES

    # Expected content per partition, in offset order; production order per
    # partition must equal offset order (the producer is idempotent, in order).
    expected: dict[tuple[str, int], list] = {}
    for m in sorted(acked, key=lambda m: (m.topic(), m.partition(), m.offset())):
        seq = int.from_bytes(m.value()[:8], "big")
        _, _, key, value, headers = sent[seq]
        assert (m.key(), m.value()) == (key, value)
        expected.setdefault((m.topic(), m.partition()), []).append((m.offset(), key, value, headers))
    for tp, items in expected.items():
        offsets = [o for o, *_ in items]
        assert offsets == sorted(offsets) == list(range(len(items))), f"{tp}: acked offsets not dense and ordered"
        seqs = [int(h[0][1]) for *_, h in items]
        assert seqs == sorted(seqs), f"{tp}: produce order not kept"
    assert len(expected) == 18

    # confluent-kafka (librdkafka) consumer
    got = consume_all(c.bootstrap, {tp: len(v) for tp, v in expected.items()})
    for tp, items in expected.items():
        assert got[tp] == items, f"{tp}: confluent-kafka read differs"

    # kafka-python consumer: assign + seek, no group
    kc = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False,
                       consumer_timeout_ms=1000, fetch_max_bytes=8 << 20)
    try:
        tps = [KTP(t, i) for t, i in expected]
        kc.assign(tps)
        for tp in tps:
            kc.seek(tp, 0)
        read: dict[tuple[str, int], list] = {tp: [] for tp in expected}
        deadline = time.monotonic() + 120
        while sum(map(len, read.values())) < N_MESSAGES and time.monotonic() < deadline:
            for ktp, msgs in kc.poll(timeout_ms=500, max_records=20000).items():
                for m in msgs:
                    read[(m.topic, m.partition)].append((m.offset, m.key, m.value, [(k, v) for k, v in m.headers]))
    finally:
        kc.close()
    for tp, items in expected.items():
        assert read[tp] == items, f"{tp}: kafka-python read differs"
