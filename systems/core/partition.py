"""A partition replica hosted by a broker: appends, reads, acks, the high watermark.

Storage is pluggable (a local segmented log for the replication backend, object
storage streams for the shared backend); backends subclass Partition to add
replication or WAL durability by overriding `after_append`, `wait_acked` and
`on_metadata`.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools

from . import errors, records
from .metadata import PartitionInfo
from .producer_state import ProducerStateTable


class Partition:
    def __init__(self, broker_id: int, info: PartitionInfo, store):
        self.broker_id = broker_id
        self.topic, self.topic_id, self.index = info.topic, info.topic_id, info.partition
        self.info = info
        self.store = store
        self.producers = ProducerStateTable()
        for h in store.batches():
            self.producers.update(h)
        self.hw = 0
        self._hw_waiters: list = []  # heap of (offset, seq, future)
        self._seq = itertools.count()
        self._data_waiters: set[asyncio.Future] = set()
        self.closed = False
        self.leading = False  # set by on_metadata, never from the constructor's view

    # -- identity -----------------------------------------------------------
    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def leader_epoch(self) -> int:
        return self.info.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.leading and not self.closed

    @property
    def serving(self) -> bool:
        """Whether clients' produce, fetch and list-offsets requests are served here (a system may
        require more than leadership: the shared one, a valid lease)."""
        return self.is_leader

    @property
    def log_start_offset(self) -> int:
        return self.store.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.store.log_end_offset

    def on_metadata(self, info: PartitionInfo) -> None:
        """A new metadata view of this partition (leader/ISR/replicas changed)."""
        old_epoch = self.info.leader_epoch
        self.info = info
        leading = info.leader == self.broker_id
        if leading and (not self.leading or info.leader_epoch != old_epoch):
            self.leading = True
            self.become_leader()
        elif not leading and self.leading:
            self.leading = False
            self.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)
            self.become_follower()
        elif not leading:
            self.become_follower()

    def become_leader(self) -> None:
        """Leader-only replica: all it holds is committed."""
        self.advance_hw(self.log_end_offset)

    def become_follower(self) -> None:
        """Not the leader (or no leader at all): backends start following here."""

    def check_epoch(self, current_leader_epoch: int) -> int:
        """KIP-320 fencing of clients with a stale or future leader epoch."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return errors.NONE
        if current_leader_epoch < self.leader_epoch:
            return errors.FENCED_LEADER_EPOCH
        return errors.UNKNOWN_LEADER_EPOCH

    # -- produce ------------------------------------------------------------
    def append(self, batch, max_message_bytes: int) -> tuple[int, int]:
        """Validate and append one producer batch as leader. Runs synchronously
        (no await) so requests on a connection append in arrival order.
        Returns (base_offset, last_offset); a duplicate returns its original offsets."""
        if len(batch) > max_message_bytes:
            raise errors.KafkaError(errors.MESSAGE_TOO_LARGE,
                                    f"batch of {len(batch)} bytes exceeds max.message.bytes {max_message_bytes}")
        h = records.validate_produce(batch)
        dup = self.producers.check(h)
        if dup is not None:
            return dup.base_offset, dup.last_offset
        base = self.store.log_end_offset
        h.base_offset = base
        head = bytearray(batch[:16])
        records.assign(head, base, self.leader_epoch)
        self.append_stamped([head, memoryview(batch)[16:]], h)
        return base, h.last_offset

    def append_stamped(self, parts: list, h: records.BatchHeader) -> None:
        self.store.append(parts, h.base_offset, h.last_offset, h.max_timestamp)
        self.producers.update(h)
        self.after_append(h.last_offset + 1)

    def after_append(self, new_leo: int) -> None:
        """Leader-only replica: everything appended is committed."""
        self.advance_hw(new_leo)

    async def wait_acked(self, last_offset: int, acks: int, timeout: float) -> int:
        """Wait until a produce up to last_offset may be acknowledged."""
        if acks == -1:
            return await self.wait_hw(last_offset + 1, timeout)
        return errors.NONE

    # -- high watermark -----------------------------------------------------
    def advance_hw(self, hw: int) -> None:
        if hw <= self.hw:
            return
        self.hw = hw
        while self._hw_waiters and self._hw_waiters[0][0] <= hw:
            _, _, fut = heapq.heappop(self._hw_waiters)
            if not fut.done():
                fut.set_result(errors.NONE)
        self.notify_data()

    def notify_data(self) -> None:
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()

    async def wait_hw(self, offset: int, timeout: float) -> int:
        if self.hw >= offset:
            return errors.NONE
        if not self.is_leader:
            # Leadership lost (or the replica deleted) between the append and this wait:
            # fail_waiters() already ran, so nothing would ever complete this wait.
            return errors.NOT_LEADER_OR_FOLLOWER
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._hw_waiters, (offset, next(self._seq), fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return errors.REQUEST_TIMED_OUT

    def data_waiter(self) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._data_waiters.add(fut)
        return fut

    def fail_waiters(self, code: int) -> None:
        """Leadership lost or partition closed: pending acks get `code`."""
        for _, _, fut in self._hw_waiters:
            if not fut.done():
                fut.set_result(code)
        self._hw_waiters.clear()
        self.notify_data()

    # -- reads --------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        return self.store.read(offset, max_bytes, self.hw if upto is None else upto)

    def tier_offset(self, latest_tiered: bool, replica: int = -1) -> tuple[int, int]:
        """ListOffsets' tiered-storage answers for a partition without tiered storage (Kafka's):
        the earliest local offset is the log start; nothing is tiered (-1)."""
        return (-1 if latest_tiered else self.log_start_offset), errors.NONE

    def offset_for_timestamp(self, ts: int) -> tuple[int, int]:
        found = self.store.offset_for_timestamp(ts)
        if found is None or found[0] >= self.hw:
            return -1, -1
        return found

    def close(self) -> None:
        self.closed = True
        self.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)
        self.store.close()

    def delete(self) -> None:
        self.closed = True
        self.fail_waiters(errors.NOT_LEADER_OR_FOLLOWER)
        self.store.delete()
