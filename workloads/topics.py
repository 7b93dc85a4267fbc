"""The load's topic list, ``name[:partitions[:producers]],...`` (``--kafka-topics``), and which
topic a producer user writes to. Kept apart from workloads/kafka_produce.py so that it can be
imported without Locust (whose import monkey-patches the importing process with gevent)."""
from __future__ import annotations


def parse_topics(spec: str) -> list[tuple[str, int | None, int | None]]:
    """``name[:partitions[:producers]],...`` -> [(name, partitions or None, producers or None)]."""
    out = []
    for item in str(spec).split(","):
        item = item.strip()
        if not item:
            continue
        name, _, rest = item.partition(":")
        parts, _, producers = rest.partition(":")
        out.append((name, int(parts) if parts else None, int(producers) if producers else None))
    if not out:
        raise ValueError("no topics given (--kafka-topics name[:partitions[:producers]],...)")
    given = [t[2] is not None for t in out]
    if any(given) and not all(given):
        raise ValueError("producers given for some topics only: give them for every topic or none")
    return out


def topic_of_user(topics: list[tuple[str, int | None, int | None]], index: int) -> int | None:
    """With producers per topic: the topic (its position) that user ``index`` produces to - the
    first topic's producers come first, then the next topic's, round-robin past the sum."""
    counts = [t[2] for t in topics]
    if counts[0] is None:
        return None
    i = index % sum(counts)
    for k, n in enumerate(counts):
        if i < n:
            return k
        i -= n
    raise AssertionError("unreachable")
