"""Idempotent producer state per partition, with Kafka's sequence rules.

For each producer id the partition remembers its epoch and its last 5 batches
(first/last sequence and offsets) - the number of in-flight requests an
idempotent producer may have - so a retried batch is recognised as a duplicate
and answered with the offset it got the first time.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from . import errors
from .records import BatchHeader

MAX_CACHED_BATCHES = 5


@dataclass(slots=True)
class CachedBatch:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, h: BatchHeader) -> CachedBatch | None:
        """Validate a batch before append. Returns the cached batch if it is a
        duplicate (to answer with its original offset), None if it is new.
        Raises KafkaError for a fenced epoch or a sequence gap."""
        if h.producer_id < 0:
            return None
        entry = self.producers.get(h.producer_id)
        if entry is None:
            if h.base_sequence != 0:
                # Nothing known about this producer here and it is not at its start.
                raise errors.KafkaError(errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                        f"unknown producer {h.producer_id} at sequence {h.base_sequence}")
            return None
        if h.producer_epoch < entry.epoch:
            raise errors.KafkaError(errors.INVALID_PRODUCER_EPOCH,
                                    f"producer epoch {h.producer_epoch} is older than {entry.epoch}")
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise errors.KafkaError(errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                        f"new epoch {h.producer_epoch} must start at sequence 0")
            return None
        for b in entry.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        expected = (entry.last_seq + 1) & 0x7FFFFFFF
        if h.base_sequence != expected:
            raise errors.KafkaError(errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"expected sequence {expected}, got {h.base_sequence}")
        return None

    def update(self, h: BatchHeader) -> None:
        """Record an appended batch (its offsets already stamped)."""
        if h.producer_id < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = ProducerEntry(h.producer_epoch)
            self.producers[h.producer_id] = entry
        entry.batches.append(CachedBatch(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset))

    def truncate(self, offset: int) -> None:
        """Forget batches at or above offset (log truncation)."""
        for pid in list(self.producers):
            e = self.producers[pid]
            while e.batches and e.batches[-1].base_offset >= offset:
                e.batches.pop()
            if not e.batches:
                del self.producers[pid]

    def snapshot(self) -> dict:
        return {str(pid): {"epoch": e.epoch,
                           "batches": [[b.first_seq, b.last_seq, b.base_offset, b.last_offset] for b in e.batches]}
                for pid, e in self.producers.items()}

    @classmethod
    def from_snapshot(cls, snap: dict) -> "ProducerStateTable":
        t = cls()
        for pid, e in snap.items():
            entry = ProducerEntry(int(e["epoch"]))
            for b in e["batches"]:
                entry.batches.append(CachedBatch(*b))
            t.producers[int(pid)] = entry
        return t
