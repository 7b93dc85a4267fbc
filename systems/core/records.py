"""Record batch (magic v2) headers: validation and offset assignment.

Batches are stored exactly as producers sent them; only the fields Kafka's
broker itself owns are rewritten: baseOffset and partitionLeaderEpoch, both
outside the CRC (which covers attributes..end), so the CRC stays valid.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from . import errors

HEADER_SIZE = 61  # up to and including recordCount
LOG_OVERHEAD = 12  # baseOffset + batchLength
_HDR = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LEN = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
NO_PRODUCER_ID = -1


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    length: int  # total bytes incl. the 12-byte log overhead
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf, pos: int = 0) -> BatchHeader:
    (base, blen, epoch, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq, count) = _HDR.unpack_from(buf, pos)
    return BatchHeader(base, blen + LOG_OVERHEAD, epoch, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq, count)


def validate_produce(records) -> BatchHeader:
    """Check a produce request's records: exactly one well-formed v2 batch with a good CRC.

    Raises KafkaError with the code Kafka's broker answers for the same problem.
    """
    n = len(records)
    if n < HEADER_SIZE:
        raise errors.KafkaError(errors.CORRUPT_MESSAGE, f"record batch too short ({n} bytes)")
    magic = records[16]
    if magic != 2:
        raise errors.KafkaError(errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"magic {magic} not supported, only v2")
    h = parse_header(records)
    if h.length != n:
        # Kafka accepts only one batch per partition in a v3+ produce request.
        if h.length < n:
            raise errors.KafkaError(errors.INVALID_RECORD, "produce request must hold exactly one record batch")
        raise errors.KafkaError(errors.CORRUPT_MESSAGE, f"batch length {h.length} exceeds the {n} bytes sent")
    if crc32c.crc32c(memoryview(records)[21:]) != h.crc:
        raise errors.KafkaError(errors.CORRUPT_MESSAGE, "record batch CRC mismatch")
    if h.record_count != h.last_offset_delta + 1 or h.record_count <= 0:
        raise errors.KafkaError(errors.INVALID_RECORD, "recordCount does not match lastOffsetDelta")
    if h.attributes & ATTR_CONTROL:
        raise errors.KafkaError(errors.INVALID_RECORD, "clients may not send control batches")
    if h.attributes & ATTR_TRANSACTIONAL:
        raise errors.KafkaError(errors.INVALID_TXN_STATE, "transactions are not supported by this broker")
    return h


def assign(batch: bytearray, base_offset: int, leader_epoch: int) -> None:
    """Stamp the broker-owned fields (outside the CRC) into a batch in place."""
    _BASE_OFFSET.pack_into(batch, 0, base_offset)
    _EPOCH.pack_into(batch, 12, leader_epoch)


def iter_batches(buf, start: int = 0, end: int | None = None):
    """Yield (position, header) for each complete batch in buf[start:end]."""
    end = len(buf) if end is None else end
    pos = start
    while pos + HEADER_SIZE <= end:
        base, blen = _OFFSET_LEN.unpack_from(buf, pos)
        total = blen + LOG_OVERHEAD
        if blen < HEADER_SIZE - LOG_OVERHEAD or pos + total > end:
            return
        yield pos, parse_header(buf, pos)
        pos += total


def check_crc(buf, pos: int, h: BatchHeader) -> bool:
    return crc32c.crc32c(memoryview(buf)[pos + 21: pos + h.length]) == h.crc
