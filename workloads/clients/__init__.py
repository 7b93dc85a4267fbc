"""The producing client library of the load (``workload.client_library``): one small driver per
library behind the same interface, so the Locust user (workloads/kafka_produce.py) paces, names,
records and drains every library's sends alike, and only the client differs.

* ``librdkafka`` (confluent-kafka, in the Locust process: the default, what every other scenario
  measures);
* ``kafka-python``, ``kafkajs`` (Node) and ``sarama`` (Go, from Debian's packages): each its own
  process, one per producer user, started by :class:`~workloads.clients.process.ProcessDriver`
  and speaking JSON lines (the contract is in that module).

Each is idempotent with ``acks=all`` in its own names and otherwise keeps its own defaults (its
retries, backoffs, metadata refresh): that is what a user of the library gets, and what the
``clients-move`` scenario compares. Every driver reports the effective settings it runs with.
"""
from __future__ import annotations

from workloads.clients.base import Delivery, Driver, DriverConfig

LIBRARIES = ("librdkafka", "kafka-python", "kafkajs", "sarama")
DEFAULT_LIBRARY = "librdkafka"


def open_driver(library: str, conf: DriverConfig) -> Driver:
    """A connected driver of ``library`` (raises :class:`~workloads.clients.base.DriverError`
    with a line a user understands when the library is missing or the cluster unreachable)."""
    if library == "librdkafka":
        from workloads.clients.librdkafka import LibrdkafkaDriver

        return LibrdkafkaDriver(conf)
    if library in LIBRARIES:
        from workloads.clients.process import ProcessDriver

        return ProcessDriver(library, conf)
    raise ValueError(f"unknown client library {library!r}: one of {', '.join(LIBRARIES)}")


def prepare(library: str) -> None:
    """Build or install ``library``'s driver if this machine does not have it yet (kafkajs: npm ci;
    sarama: a Go build), so a run can do it before its load's clock starts; nothing for the
    in-process librdkafka. Raises DriverError saying what is missing."""
    if library != "librdkafka" and library in LIBRARIES:
        from workloads.clients.process import command

        command(library)


__all__ = ["LIBRARIES", "DEFAULT_LIBRARY", "Delivery", "Driver", "DriverConfig", "open_driver", "prepare"]
