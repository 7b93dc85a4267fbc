"""What the load's producers met at the brokers during a move (bench/check/client_view.py) and the
report's table per system and client library (bench/report/client_table.py)."""
from __future__ import annotations

from bench.check.client_view import client_requests
from bench.check.view import Event
from bench.report.client_table import client_rows
from bench.report.format import MISSING


def line(ts: float, metadata: int, errors: dict | None = None) -> Event:
    return Event("client_requests", ts, None, None,
                 {"client_id": "locust-p0", "metadata": metadata, "produce_errors": errors or {}})


def test_a_moves_errors_and_metadata_requests_are_those_of_its_window():
    """Request at 100 s, first ack 0.5 s later: the lines from the request to the broker's next
    count after the ack (0.25 s) are the move's, only the moved partition's errors count."""
    lines = [line(99.9, 5, {"hot-0": {"NOT_LEADER_OR_FOLLOWER": 9}}),  # before the request
             line(100.1, 1, {"hot-0": {"NOT_LEADER_OR_FOLLOWER": 2}, "other-0": {"NOT_LEADER_OR_FOLLOWER": 7}}),
             line(100.6, 2, {"hot-0": {"NOT_LEADER_OR_FOLLOWER": 1, "NOT_ENOUGH_REPLICAS": 3}}),
             line(100.74, 1),  # within the last interval after the ack
             line(101.5, 4, {"hot-0": {"REQUEST_TIMED_OUT": 1}})]  # after it
    got = client_requests(lines, ("hot", 0), 100.0, 0.5)
    assert got == {"client_errors": {"NOT_ENOUGH_REPLICAS": 3, "NOT_LEADER_OR_FOLLOWER": 3},
                   "client_metadata_requests": 4}
    assert client_requests(lines, ("hot", 0), 100.0, None) == {"client_errors": None,
                                                               "client_metadata_requests": None}


def timed(ts: float, asked: list[float], errors: dict | None = None, first: dict | None = None) -> Event:
    return Event("client_requests", ts, None, None,
                 {"client_id": "locust-p0", "metadata": len(asked), "metadata_ts": asked,
                  "produce_errors": errors or {}, "produce_error_ts": first or {}})


def test_a_moves_client_times_show_the_refusal_and_the_query_that_found_the_new_leader():
    """Request at 100 s, elected at 100.40, first ack at 100.70: refused at 100.05 (the other
    partition's earlier refusal is not the move's); the queries up to the ack, from the request;
    the first at or after the election found the new leader (100.42; not the one at 100.35)."""
    nl = {"NOT_LEADER_OR_FOLLOWER": 1}
    lines = [timed(99.9, [99.8]),
             timed(100.25, [100.05, 100.15], {"hot-0": nl, "other-0": nl}, {"hot-0": 100.05, "other-0": 100.01}),
             timed(100.5, [100.35, 100.42]),
             timed(100.75, [100.9]),  # a request after the first ack (its line is within the window)
             timed(101.5, [101.4], {"hot-0": nl}, {"hot-0": 101.4})]
    got = client_requests(lines, ("hot", 0), 100.0, 0.7, 100.4)
    assert got["client_refused_seconds"] == 0.05
    assert got["client_metadata_seconds"] == [0.05, 0.15, 0.35, 0.42]
    assert got["client_leader_query_seconds"] == 0.42
    assert got["client_errors"] == nl and got["client_metadata_requests"] == 5
    # no election known, or none of the queries after it: no query found it; older lines: no times at all
    assert client_requests(lines, ("hot", 0), 100.0, 0.7)["client_leader_query_seconds"] is None
    assert client_requests(lines, ("hot", 0), 100.0, 0.7, 100.6)["client_leader_query_seconds"] is None
    assert "client_refused_seconds" not in client_requests([line(100.1, 1)], ("hot", 0), 100.0, 0.7, 100.4)


def test_the_client_table_compares_libraries_and_stays_away_without_them():
    def move(run: str, lib: str, unavail: float, errors: str, n: int, meta: int) -> dict:
        return {"run_key": run, "system": "shared", "client_library": lib, "partitions_in_action": 1,
                "move_seconds": unavail, "unavailable_seconds": unavail, "client_errors_json": errors,
                "client_error_count": n, "client_metadata_requests": meta}

    moves = [move("a", "librdkafka", 0.9, '{"NOT_LEADER_OR_FOLLOWER": 2}', 2, 4),
             move("b", "sarama", 1.9, '{"NOT_LEADER_OR_FOLLOWER": 10}', 10, 9)]
    runs = [{"run_key": "a", "valid": "pass", "lost_count": 0, "duplicated_count": 0, "acked": 2000, "load_start": 0.0,
             "load_end": 20.0, "produce_rate_msgs_per_s": 100.0},
            {"run_key": "b", "valid": "pass", "lost_count": 0, "duplicated_count": 1}]
    latency = [{"level": "run", "scope": "all", "phase": "during", "key": "b", "p99_ms": 1800.0}]
    rows = client_rows(moves, latency, runs)
    assert [r[1] for r in rows] == ["librdkafka", "sarama"]
    assert rows[1][2] == "1 (1)" and "NOT_LEADER_OR_FOLLOWER 10" in rows[1][8] and rows[1][-1] == "0 / 1"
    assert rows[0][3] == "100 of 100" and rows[1][3] == MISSING
    assert client_rows([m for m in moves if m["client_library"] == "librdkafka"], latency, runs) == []
