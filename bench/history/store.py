"""Append-only run history stored as Parquet.

One row per operation, Jepsen style: a ``send`` (a produce request and its outcome), a ``read``
(a message the verifying consumer saw), a ``deliver`` (a message a workload consumer got, with
its ``group``, ``member`` and the record's own timestamp) or an ``event`` (harness actions, leader changes, move
phases, counters). The schema below is a contract shared by the runner, the checkers, the Spark
aggregation and the report; change it only together with them.

Crash safety. A Parquet file is unreadable until its footer is written, so a single open
``ParquetWriter`` would lose the *whole* history if the harness died mid-run. Instead every flush
writes one complete, atomically renamed part file under ``<path>.parts/``; ``close()`` compacts the
parts into ``<path>`` (atomic rename) and removes them. ``read_history`` reads whichever exists, so a
crash loses at most the rows still buffered in memory.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # "send" | "read" | "deliver" | "event"
        ("ts", pa.float64()),  # unix seconds: send invoked / message read or delivered / event happened
        ("msg_id", pa.int64()),  # unique per message within a run; -1 for events
        ("producer", pa.string()),  # null for events
        ("topic", pa.string()),
        ("partition", pa.int32()),  # -1 if not applicable / unknown
        ("ack_ts", pa.float64()),  # null unless acked
        ("outcome", pa.string()),  # "ok" | "fail" | "info" (info = unknown, e.g. a timeout)
        ("error", pa.string()),
        ("offset", pa.int64()),  # null if unknown
        ("size_bytes", pa.int32()),
        ("event", pa.string()),  # for kind=event: action_start, leader_change, counter, ...
        ("detail", pa.string()),  # JSON text
        ("group", pa.string()),  # deliver: the consumer group (by hand, `assign`: the group it stands for)
        ("member", pa.string()),  # deliver: the consumer within its group
        ("record_ts", pa.float64()),  # deliver: the record's timestamp (CreateTime: the producer's clock), s
        ("digest", pa.int64()),  # send: CRC-32 of the value sent; read: of the value read back (null: not taken)
    ]
)

FIELDS: tuple[str, ...] = tuple(SCHEMA.names)
KINDS = frozenset({"send", "read", "deliver", "event"})
OUTCOMES = frozenset({"ok", "fail", "info"})

_FIELD_SET = frozenset(FIELDS)


def _parts_dir(path: Path) -> Path:
    return path.with_name(path.name + ".parts")


def send_row(
    msg_id: int,
    ts: float,
    *,
    producer: str,
    topic: str,
    partition: int = -1,
    outcome: str,
    ack_ts: float | None = None,
    offset: int | None = None,
    size_bytes: int | None = None,
    error: str | None = None,
    digest: int | None = None,
) -> dict[str, Any]:
    """A ``send`` row: one produce call and its outcome (ok / fail / info)."""
    return {
        "kind": "send", "ts": ts, "msg_id": msg_id, "producer": producer, "topic": topic,
        "partition": partition, "ack_ts": ack_ts, "outcome": outcome, "error": error,
        "offset": offset, "size_bytes": size_bytes, "digest": digest,
    }


def read_row(
    msg_id: int,
    ts: float,
    *,
    topic: str,
    partition: int,
    offset: int,
    producer: str | None = None,
    size_bytes: int | None = None,
    digest: int | None = None,
) -> dict[str, Any]:
    """A ``read`` row: the verifying consumer saw ``msg_id`` at (topic, partition, offset)."""
    return {
        "kind": "read", "ts": ts, "msg_id": msg_id, "producer": producer, "topic": topic,
        "partition": partition, "outcome": "ok", "offset": offset, "size_bytes": size_bytes, "digest": digest,
    }


def event_row(
    event: str,
    ts: float,
    detail: Mapping[str, Any] | None = None,
    *,
    topic: str | None = None,
    partition: int = -1,
) -> dict[str, Any]:
    """An ``event`` row; ``detail`` is stored as JSON text."""
    return {
        "kind": "event", "ts": ts, "msg_id": -1, "topic": topic, "partition": partition,
        "event": event, "detail": None if detail is None else dict(detail),
    }


class HistoryWriter:
    """Buffered, thread-safe, append-only Parquet history writer.

    ``append`` may be called from any thread (producer delivery callbacks, consumer, runner).
    Every ``flush_rows`` rows, or when ``flush_interval_s`` has passed since the last flush at the
    time of an append, the buffer is written as one complete part file. ``close()`` compacts the
    parts into ``path``. Missing optional keys become null; ``msg_id`` and ``partition`` default to
    -1; a mapping ``detail`` is JSON-encoded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_rows: int = 10_000,
        flush_interval_s: float | None = 5.0,
        fsync: bool = False,
        compact_row_group_rows: int = 131_072,
    ) -> None:
        if flush_rows < 1:
            raise ValueError("flush_rows must be >= 1")
        self.path = Path(path)
        self._parts = _parts_dir(self.path)
        # Append-only per run: never clobber an existing history.
        if self.path.exists() or self._parts.exists():
            raise FileExistsError(f"history already exists: {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._parts.mkdir()
        self._flush_rows = flush_rows
        self._flush_interval_s = flush_interval_s
        self._fsync = fsync
        self._compact_rows = compact_row_group_rows
        self._lock = threading.Lock()  # guards buffer, counters, closed flag
        self._io_lock = threading.Lock()  # serialises file writes (parts keep their order)
        self._buffer: list[dict[str, Any]] = []
        self._next_part = 0
        self._last_flush = time.monotonic()
        self._rows_written = 0
        self._closed = False

    # -- appending ---------------------------------------------------------------------------

    @staticmethod
    def _normalise(row: Mapping[str, Any]) -> dict[str, Any]:
        unknown = row.keys() - _FIELD_SET
        if unknown:
            raise ValueError(f"unknown history field(s): {sorted(unknown)}")
        kind = row.get("kind")
        if kind not in KINDS:
            raise ValueError(f"history row kind must be one of {sorted(KINDS)}, got {kind!r}")
        ts = row.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or math.isnan(ts):
            raise ValueError(f"history row ts must be a number, got {ts!r}")
        outcome = row.get("outcome")
        if outcome is not None and outcome not in OUTCOMES:
            raise ValueError(f"history row outcome must be one of {sorted(OUTCOMES)}, got {outcome!r}")
        out = dict(row)
        if out.get("msg_id") is None:
            out["msg_id"] = -1
        if out.get("partition") is None:
            out["partition"] = -1
        detail = out.get("detail")
        if detail is not None and not isinstance(detail, str):
            out["detail"] = json.dumps(detail, sort_keys=True, default=str)
        return out

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row (a mapping with keys from :data:`FIELDS`)."""
        self.extend((row,))

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append several rows under one lock acquisition."""
        normalised = [self._normalise(r) for r in rows]
        batch = None
        with self._lock:
            if self._closed:
                raise ValueError("HistoryWriter is closed")
            self._buffer.extend(normalised)
            due = len(self._buffer) >= self._flush_rows or (
                self._flush_interval_s is not None
                and time.monotonic() - self._last_flush >= self._flush_interval_s
            )
            if due:
                batch, seq = self._take_locked()
        if batch:
            self._write_part(batch, seq)

    def _take_locked(self) -> tuple[list[dict[str, Any]], int]:
        batch, self._buffer = self._buffer, []
        seq = self._next_part
        self._next_part += 1
        self._last_flush = time.monotonic()
        return batch, seq

    # -- writing -----------------------------------------------------------------------------

    def _fsync_path(self, path: Path) -> None:
        if self._fsync:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _write_part(self, batch: list[dict[str, Any]], seq: int) -> None:
        # Built outside the append lock so appenders are not blocked by conversion or IO.
        table = pa.Table.from_pylist(batch, schema=SCHEMA)
        final = self._parts / f"part-{seq:08d}.parquet"
        tmp = final.with_suffix(".tmp")
        with self._io_lock:
            pq.write_table(table, tmp)
            self._fsync_path(tmp)
            os.replace(tmp, final)  # readers never see a half-written part
        with self._lock:
            self._rows_written += table.num_rows

    def flush(self) -> None:
        """Write buffered rows now (as one part file)."""
        with self._lock:
            if not self._buffer:
                return
            batch, seq = self._take_locked()
        self._write_part(batch, seq)

    @property
    def rows_written(self) -> int:
        """Rows durably written to part files (excludes the in-memory buffer)."""
        with self._lock:
            return self._rows_written

    def close(self) -> None:
        """Flush, compact the parts into ``path`` and remove them. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            batch, seq = self._take_locked() if self._buffer else (None, -1)
        if batch:
            self._write_part(batch, seq)
        with self._io_lock:
            self._compact()

    def _compact(self) -> None:
        parts = sorted(self._parts.glob("part-*.parquet"))
        tmp = self.path.with_name(self.path.name + ".tmp")
        with pq.ParquetWriter(tmp, SCHEMA) as writer:
            pending: list[pa.Table] = []
            pending_rows = 0
            # Coalesce small parts into larger row groups for the reader's sake.
            for part in parts:
                t = pq.read_table(part, schema=SCHEMA)
                pending.append(t)
                pending_rows += t.num_rows
                if pending_rows >= self._compact_rows:
                    writer.write_table(pa.concat_tables(pending), row_group_size=self._compact_rows)
                    pending, pending_rows = [], 0
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=self._compact_rows)
        self._fsync_path(tmp)
        # The complete file appears atomically before the parts go, so a crash in between leaves
        # a readable history (read_history prefers the compacted file).
        os.replace(tmp, self.path)
        for part in parts:
            part.unlink()
        for leftover in self._parts.glob("*.tmp"):
            leftover.unlink()
        self._parts.rmdir()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows (as given to :meth:`HistoryWriter.append`) -> a history table, without a file.
    Handy for tests and for building histories in memory."""
    return pa.Table.from_pylist([HistoryWriter._normalise(r) for r in rows], schema=SCHEMA)


def read_history(path: str | os.PathLike[str]) -> pa.Table:
    """Read a history written by :class:`HistoryWriter` (closed, still open, or crashed).

    ``path`` is the history file. If it does not exist yet (run in progress or crashed before
    ``close()``), the part files under ``<path>.parts/`` are read instead. A directory of Parquet
    files is also accepted. The result always has exactly :data:`SCHEMA`.
    """
    path = Path(path)
    parts = _parts_dir(path)
    if path.is_file():
        # The compacted file is written atomically and only after all parts; it is complete.
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.parquet"))
    elif parts.is_dir():
        files = sorted(parts.glob("part-*.parquet"))
    else:
        raise FileNotFoundError(f"no history at {path}")
    tables = [pq.read_table(f, schema=SCHEMA) for f in files]
    if not tables:
        return SCHEMA.empty_table()
    return pa.concat_tables(tables).select(list(FIELDS)).cast(SCHEMA)
