"""How harness messages are tagged (shared by the Locust users, the prefill and the verifying
consumer; no Locust import here, so the runner can use it without gevent's monkey-patching)."""
from __future__ import annotations

ID_HEADER = "id"  # decimal message id, unique per run, increasing in send order per producer
PRODUCER_HEADER = "p"  # the producer's name (history column `producer`)
PREFILL_HEADER = "prefill"  # present on prefill records (they have no id: msg_id -1 when read)

# The load's producer settings, the same against every system (the report states them).
PRODUCER_ACKS = "all"  # with enable.idempotence
PRODUCER_LINGER_MS = 250  # why not 5: workloads/kafka_produce.py, KafkaProducerUser.on_start


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
