"""One request's worth per partition in the Kafka client, the rest held by the load (no locust
import here, so the rule is testable on its own).

librdkafka's idempotent producer sends a partition's next ProduceRequest only once the previous
one is answered (one request in flight per partition, each at most ``batch.size``: its debug log),
and while a ready batch waits for that answer its broker thread busy-polls (~20,000 poll() calls
a second). Against a system that acknowledges after a WAL PUT (~100 ms) the load process spent a
core at 2,000 msg/s of 4 KiB to one partition, ten times its cost against the copy system
(docs/measurements/automq.md). :class:`PartitionPacer` keeps that wait out of the client: a
partition's messages go to the client only while none of its earlier ones is unanswered, at most
one request's worth at a time; the same requests reach the wire, the wait costs nothing.

It also holds a partition's sends while a move's retried requests are unanswered, and a move's
client-side times (first ack on the new owner, unavailability) are what the harness measures:
measured with pacing, the default suite's held-out move checks moved by up to 2x. So it is a
workload setting (``workload.pace_partitions``) for capacity runs without moves.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

# A record's bytes besides its value in a batch (framing, varints, the load's two headers): on the
# safe side, so that one round fits one request.
RECORD_OVERHEAD_BYTES = 128


def round_size(client_conf: dict[str, Any], message_bytes: int) -> int:
    """Messages in one ProduceRequest of the client: batch.size over a record's size, at most
    batch.num.messages (librdkafka's defaults: 1,000,000 bytes, 10,000 messages)."""
    batch = int(client_conf.get("batch.size", 1_000_000))
    return max(1, min(int(client_conf.get("batch.num.messages", 10_000)), batch // (message_bytes + RECORD_OVERHEAD_BYTES)))


class PartitionPacer:
    """Per partition: the messages not yet handed to the client and the count of those handed over
    and not yet answered. ``send(item)`` hands one message to the client (True if it was taken)."""

    def __init__(self, round_max: int, send: Callable[[Any], bool]):
        self.round_max = round_max
        self.send = send
        self.held: dict[Hashable, list] = {}
        self.unanswered: dict[Hashable, int] = {}

    def hold(self, key: Hashable, item: Any) -> None:
        self.held.setdefault(key, []).append(item)

    def held_count(self) -> int:
        return sum(map(len, self.held.values()))

    def answered(self, key: Hashable) -> None:
        """A delivery report for ``key``: the last one releases the next round."""
        self.unanswered[key] -= 1
        if self.unanswered[key] == 0:
            self.release(key)

    def release_idle(self) -> None:
        """The partitions with nothing unanswered get their next round (end of a tick)."""
        for key in list(self.held):
            if not self.unanswered.get(key):
                self.release(key)

    def release(self, key: Hashable, everything: bool = False) -> None:
        """Hand ``key``'s held messages to the client: one round, or all of them (a drain)."""
        items = self.held.get(key)
        if not items:
            return
        n = len(items) if everything else self.round_max
        out, self.held[key] = items[:n], items[n:]
        for item in out:
            if self.send(item):
                self.unanswered[key] = self.unanswered.get(key, 0) + 1

    def release_all(self) -> None:
        for key in list(self.held):
            self.release(key, everything=True)
