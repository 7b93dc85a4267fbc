"""The consumer-group coordinator's partition of __consumer_offsets for a group id (issue 15), as
Kafka computes it; the groups themselves, on real clusters: tests/systems/test_groups.py."""
from __future__ import annotations

from systems.core.groups import partition_for


def test_partition_for_is_kafkas():
    """Java's String.hashCode over UTF-16 units, Kafka's Utils.abs (MIN_VALUE -> 0)."""
    assert partition_for("", 50) == 0
    assert partition_for("hello", 1 << 30) == 99162322
    assert partition_for("polygenelubricants", 7) == 0  # hashCode is Integer.MIN_VALUE
    assert partition_for("\u00e9", 1000) == 233
    assert partition_for("\U0001F600", 1 << 30) == 55357 * 31 + 56832  # a surrogate pair
    assert partition_for("console-consumer-1", 50) == abs(_java_hash("console-consumer-1")) % 50


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
