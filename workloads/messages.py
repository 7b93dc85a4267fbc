"""How harness messages are tagged (shared by the Locust users, the prefill and the verifying
consumer; no Locust import here, so the runner can use it without gevent's monkey-patching)."""
from __future__ import annotations

ID_HEADER = "id"  # decimal message id, unique per run, increasing in send order per producer
PRODUCER_HEADER = "p"  # the producer's name (history column `producer`)
PREFILL_HEADER = "prefill"  # present on prefill records (they have no id: msg_id -1 when read)
PREFILL_RECORD_BYTES = 64 * 1024  # a prefill record's value unless a scenario sets prefill.record_bytes

# The load's producer settings, the same against every system (the report states them).
PRODUCER_ACKS = "all"  # with enable.idempotence
# linger.ms, unless the scenario's workload.linger_ms says otherwise: 5 ms, the client's own
# default - librdkafka's (so confluent-kafka's) since v1.5.0, which raised it from 0.5 to 5 ms,
# and the Apache Kafka Java producer's since 4.0 (KIP-1030 raised it from 0 to 5 ms). Chosen
# for no system. librdkafka's busy-poll while an idempotent producer's request waits for a slow
# acknowledgement (docs/measurements/automq.md) shows in the report's sensitivity table; capacity
# runs without moves pace each partition instead (workload.pace_partitions, workloads/pacing.py).
PRODUCER_LINGER_MS = 5


def parse_headers(headers) -> tuple[int, str | None]:
    """Message headers -> (msg_id, producer); msg_id -1 for prefill / foreign records."""
    msg_id, producer = -1, None
    for k, v in headers or ():
        if k == ID_HEADER and v is not None:
            try:
                msg_id = int(v)
            except ValueError:
                pass
        elif k == PRODUCER_HEADER and v is not None:
            producer = v.decode(errors="replace")
    return msg_id, producer
