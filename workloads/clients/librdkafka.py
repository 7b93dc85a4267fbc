"""librdkafka through confluent-kafka, in the Locust process (the load's default client)."""
from __future__ import annotations

import json
import time
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Producer

from workloads.clients.base import Delivery, Done, Driver, DriverConfig
from workloads.messages import PRODUCER_ACKS

# Errors after which the message was certainly not written (never left the client, or the
# broker rejected it for good). Everything else is "info": it may have been written.
FAIL_CODES = frozenset({
    KafkaError._PURGE_QUEUE, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
    KafkaError._INVALID_ARG, KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD,
    KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
})


class LibrdkafkaDriver(Driver):
    library = "librdkafka"

    def __init__(self, conf: DriverConfig):
        self.conf = {"bootstrap.servers": conf.bootstrap, "acks": PRODUCER_ACKS, "enable.idempotence": True,
                     "linger.ms": int(conf.linger_ms), "message.timeout.ms": int(conf.message_timeout_ms),
                     "client.id": conf.client_id, "partitioner": "murmur2_random", **conf.settings}
        self.producer = Producer(self.conf)

    def send(self, msg_id: int, topic: str, partition: int, producer: str, value: bytes,
             headers: list[tuple[str, bytes]], done: Done, key: bytes | None = None) -> str | None:
        def report(err, msg) -> None:
            if err is None:
                done(Delivery("ok", msg.partition(), msg.offset(), time.time(), None))
            else:
                part = msg.partition() if msg is not None and msg.partition() is not None else partition
                done(Delivery("fail" if err.code() in FAIL_CODES else "info", part, None, None,
                              f"{err.name()}: {err.str()}"))

        # a keyed send (partition -1) leaves the partition to the client's partitioner
        where = {"key": key} if partition < 0 else {"partition": partition}
        try:
            self.producer.produce(topic, value=value, headers=headers, on_delivery=report, **where)
        except (BufferError, KafkaException) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def serve(self) -> None:
        self.producer.poll(0)

    def outstanding(self) -> int:
        return len(self.producer)

    def purge(self) -> None:
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)

    def partitions(self, topic: str) -> int:
        md = self.producer.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        return len(t.partitions) if t is not None and t.error is None else 0

    def close(self) -> None:
        self.producer = None

    def describe(self) -> dict[str, Any]:
        shown = {k: v for k, v in self.conf.items() if k not in ("bootstrap.servers", "sasl.password", "ssl.key.password")}
        return {"library": self.library, "version": confluent_kafka.libversion()[0],
                "binding": f"confluent-kafka {confluent_kafka.version()[0]}", "settings": json.loads(json.dumps(shown))}
