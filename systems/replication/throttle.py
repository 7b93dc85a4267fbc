"""Replication throttles with Kafka's semantics.

`leader.replication.throttled.rate` / `follower.replication.throttled.rate`
(bytes/s, per broker) cap replication traffic only for replicas listed in the
topic configs `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` ("partition:broker,..." or "*"),
and only while that replica is out of the ISR: ordinary ISR replication is
never slowed. As in Kafka, a throttled fetch is skipped while the quota is
exceeded, and the bytes actually moved are charged afterwards.
"""
from __future__ import annotations

import time


class Quota:
    """Byte-rate quota: spending may overdraw; `exceeded` while in debt."""

    def __init__(self, rate: float | None):
        self.rate = rate
        self.tokens = 0.0
        self.last = time.monotonic()

    def set_rate(self, rate: float | None) -> None:
        if rate != self.rate:
            self.rate = rate
            self.tokens = 0.0
            self.last = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        if self.rate:
            # Burst capped at 100 ms of rate, so a move cannot get ahead of the cap.
            self.tokens = min(self.rate * 0.1, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def exceeded(self) -> bool:
        if not self.rate:
            return False
        self._refill()
        return self.tokens < 0

    def charge(self, n: int) -> None:
        if self.rate:
            self._refill()
            self.tokens -= n

    def delay(self) -> float:
        """Seconds until the debt is paid."""
        if not self.rate or self.tokens >= 0:
            return 0.0
        return -self.tokens / self.rate


def throttled_replicas(value: str | None, partition: int) -> set[int] | str:
    """Parse "0:1,0:2,1:3" (or "*") into the broker ids throttled for a partition."""
    if not value:
        return set()
    value = value.strip()
    if value == "*":
        return "*"
    out = set()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        p, _, b = item.partition(":")
        if int(p) == partition:
            out.add(int(b))
    return out


def is_listed(value: str | None, partition: int, broker: int) -> bool:
    listed = throttled_replicas(value, partition)
    return listed == "*" or broker in listed
