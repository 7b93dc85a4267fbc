import json
import threading

import pyarrow as pa
import pytest

from bench.history.store import (
    FIELDS,
    SCHEMA,
    HistoryWriter,
    event_row,
    read_history,
    read_row,
    send_row,
    to_table,
)

EXPECTED_SCHEMA = pa.schema(
    [
        ("kind", pa.string()), ("ts", pa.float64()), ("msg_id", pa.int64()),
        ("producer", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
        ("ack_ts", pa.float64()), ("outcome", pa.string()), ("error", pa.string()),
        ("offset", pa.int64()), ("size_bytes", pa.int32()), ("event", pa.string()),
        ("detail", pa.string()), ("group", pa.string()), ("member", pa.string()),
        ("record_ts", pa.float64()), ("digest", pa.int64()),
    ]
)


def sample_rows():
    return [
        send_row(0, 100.0, producer="p0", topic="t", partition=1, outcome="ok", ack_ts=100.5,
                 offset=7, size_bytes=4096),
        send_row(1, 101.0, producer="p0", topic="t", outcome="info", error="timed out"),
        read_row(0, 110.0, topic="t", partition=1, offset=7, size_bytes=4096),
        event_row("action_start", 105.0, {"action": "reassign", "topic": "t", "partition": 1,
                                          "from": [1], "to": [2], "action_id": 3}),
    ]


def test_schema_is_the_published_contract():
    assert SCHEMA.equals(EXPECTED_SCHEMA)
    assert FIELDS == tuple(EXPECTED_SCHEMA.names)


def test_histories_written_before_the_consumer_columns_still_read(tmp_path):
    import pyarrow.parquet as pq

    old = to_table(sample_rows()).drop_columns(["group", "member", "record_ts", "digest"])
    pq.write_table(old, tmp_path / "history.parquet")
    table = read_history(tmp_path / "history.parquet")
    assert table.schema.equals(EXPECTED_SCHEMA)
    assert table.column("group").null_count == table.column("digest").null_count == len(sample_rows())


def test_round_trip_keeps_schema_values_and_defaults(tmp_path):
    path = tmp_path / "history.parquet"
    with HistoryWriter(path, flush_rows=3) as w:
        for row in sample_rows():
            w.append(row)
    assert path.is_file()
    assert not (tmp_path / "history.parquet.parts").exists()  # compacted on close
    table = read_history(path)
    assert table.schema.equals(EXPECTED_SCHEMA)
    rows = table.to_pylist()
    assert [r["kind"] for r in rows] == ["send", "send", "read", "event"]
    assert rows[0]["ack_ts"] == 100.5 and rows[0]["offset"] == 7 and rows[0]["partition"] == 1
    assert rows[1]["outcome"] == "info" and rows[1]["ack_ts"] is None
    assert rows[1]["partition"] == -1  # unknown partition defaults to -1
    assert rows[2]["outcome"] == "ok" and rows[2]["msg_id"] == 0
    ev = rows[3]
    assert ev["msg_id"] == -1 and ev["producer"] is None and ev["partition"] == -1
    assert json.loads(ev["detail"]) == {"action": "reassign", "topic": "t", "partition": 1,
                                        "from": [1], "to": [2], "action_id": 3}
    assert table.equals(to_table(sample_rows()))


def test_crash_before_close_loses_only_the_buffered_rows(tmp_path):
    path = tmp_path / "history.parquet"
    w = HistoryWriter(path, flush_rows=2, flush_interval_s=None)
    for row in sample_rows()[:3]:
        w.append(row)
    # Two rows flushed as a part, one still in memory; the writer is never closed ("crash").
    assert w.rows_written == 2
    assert not path.exists()
    table = read_history(path)
    assert table.num_rows == 2
    assert table.column("msg_id").to_pylist() == [0, 1]


def test_appends_from_many_threads(tmp_path):
    path = tmp_path / "history.parquet"
    w = HistoryWriter(path, flush_rows=97)
    n_threads, per_thread = 8, 1000

    def produce(t):
        for i in range(per_thread):
            msg_id = t * per_thread + i
            w.append(send_row(msg_id, 1000.0 + i, producer=f"p{t}", topic="t", partition=t % 3,
                              outcome="ok", ack_ts=1000.5 + i))

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    w.close()
    w.close()  # idempotent
    table = read_history(path)
    ids = sorted(table.column("msg_id").to_pylist())
    assert ids == list(range(n_threads * per_thread))
    # Per producer, rows keep their append order.
    for t in range(n_threads):
        mine = [r["msg_id"] for r in table.to_pylist() if r["producer"] == f"p{t}"]
        assert mine == list(range(t * per_thread, (t + 1) * per_thread))


def test_refuses_to_overwrite_and_rejects_bad_rows(tmp_path):
    path = tmp_path / "history.parquet"
    w = HistoryWriter(path)
    with pytest.raises(FileExistsError):
        HistoryWriter(path)  # parts dir of the open writer already exists
    with pytest.raises(ValueError, match="unknown history field"):
        w.append({"kind": "send", "ts": 1.0, "msgid": 3})
    with pytest.raises(ValueError, match="kind"):
        w.append({"kind": "write", "ts": 1.0})
    with pytest.raises(ValueError, match="outcome"):
        w.append({"kind": "send", "ts": 1.0, "outcome": "timeout"})
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.append(event_row("counter", 2.0, {"name": "x", "value": 1}))
    with pytest.raises(FileExistsError):
        HistoryWriter(path)
    assert read_history(path).num_rows == 0


def test_read_history_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_history(tmp_path / "nope.parquet")
