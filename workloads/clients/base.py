"""What every client driver offers the load's producer user (workloads/kafka_produce.py)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol


class DriverError(Exception):
    """A driver cannot start or its client failed for good (one line a user understands)."""


@dataclass(frozen=True)
class DriverConfig:
    """The same for every library: the harness's settings, then the user's own (``settings``, in
    the library's own names; librdkafka's are the scenario's ``system.client``)."""

    bootstrap: str
    client_id: str
    linger_ms: int
    message_timeout_ms: int
    body: bytes  # every value: the message id's low ``stamp`` bytes, then this
    stamp: int
    settings: dict[str, Any] = field(default_factory=dict)


class Delivery(NamedTuple):
    """A send's outcome: ``ok`` (acknowledged), ``fail`` (certainly not written), ``info``
    (unknown: may have been written); ``error`` = "<TYPE>: <message>"."""

    outcome: str
    partition: int
    offset: int | None
    ack_ts: float | None
    error: str | None


Done = Callable[[Delivery], None]


class Driver(Protocol):
    """One producer of one library (librdkafka.py, process.py). Never blocks the caller's gevent loop."""

    library: str

    def send(self, msg_id: int, topic: str, partition: int, producer: str, value: bytes,
             headers: list[tuple[str, bytes]], done: Done, key: bytes | None = None) -> str | None:
        """Hand one message to the client: None, or why it refused it (never sent; ``done`` is
        then not called).
        ``partition`` -1 with a ``key``: the client's partitioner picks (librdkafka only)."""
        ...

    def serve(self) -> None:
        """Run the delivery callbacks that are due (in the caller's greenlet)."""
        ...

    def outstanding(self) -> int:
        """Messages handed over and not yet answered."""
        ...

    def purge(self) -> None:
        """Give up every outstanding message: each still gets its ``done`` (``info``, or ``fail``
        where the library knows it was never sent)."""
        ...

    def partitions(self, topic: str) -> int:
        """The topic's partition count at the cluster (0: no such topic)."""
        ...

    def close(self) -> None:
        ...

    def broken(self) -> str | None:
        """Why the client can send no more (its process died), else None."""
        return None

    def describe(self) -> dict[str, Any]:
        """library, version, the effective settings and (where the library exposes them) its own
        counts of retries and errors by type."""
        ...


def value_of(msg_id: int, body: bytes, stamp: int) -> bytes:
    """A message's value: the id's low ``stamp`` bytes (big-endian), then the body; every driver
    builds the same bytes (the read-back's CRC-32 names the message)."""
    return msg_id.to_bytes(8, "big")[8 - stamp:] + body
