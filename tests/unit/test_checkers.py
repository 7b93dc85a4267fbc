"""Checkers on small hand-written histories with hand-computed expectations."""

import json

import numpy as np
import pytest

from bench.check import (
    check_all,
    check_bytes_moved,
    check_duplicates,
    check_latency,
    check_lost_writes,
    check_move_seconds,
    check_reordering,
    check_unavailable_seconds,
    check_unexpected,
    check_unseen,
)
from bench.check.summary import build_summary
from bench.history.store import event_row, read_row, send_row, to_table
from bench.scenario import parse_scenario

T0 = 1_000.0  # times below are offsets from T0; chosen as binary fractions so sums are exact


def clean_rows():
    """Two producers, topic t with 2 partitions, 5 acked messages each, all read in order."""
    rows, offsets = [], {0: 0, 1: 0}
    for i in range(10):
        producer, part = f"p{i % 2}", (i // 2) % 2
        ts = T0 + i * 0.5
        rows.append(send_row(i, ts, producer=producer, topic="t", partition=part, outcome="ok",
                             ack_ts=ts + 0.25, offset=offsets[part], size_bytes=100))
        rows.append(read_row(i, T0 + 20 + i, topic="t", partition=part, offset=offsets[part]))
        offsets[part] += 1
    return rows


def without_read(rows, msg_id):
    return [r for r in rows if not (r["kind"] == "read" and r["msg_id"] == msg_id)]


def test_clean_history_passes():
    result = check_all(to_table(clean_rows()))
    assert result["valid"] is True, result
    assert result["failed"] == [] and result["unknown"] == []
    assert result["lost_writes"]["acked_count"] == 10
    assert result["duplicates"]["duplicated_count"] == 0
    assert result["reordering"]["checked_messages"] == 10
    json.dumps(result)  # results go to JSON as they are


def test_removing_one_acked_read_makes_lost_writes_fail():
    table = to_table(without_read(clean_rows(), 3))
    lost = check_lost_writes(table)
    assert lost["valid"] is False
    assert lost["lost_count"] == 1
    assert lost["lost_examples"] == [3]
    assert lost["lost_by_partition"] == {"t-1": 1}
    overall = check_all(table)
    assert overall["valid"] is False and overall["failed"] == ["lost_writes"]


def test_an_acked_write_read_only_in_another_partition_is_lost():
    """Matching is by partition: message 3 was acked on t-1; a copy of it read in t-0 does not
    stand for it (read_elsewhere_count)."""
    rows = without_read(clean_rows(), 3) + [read_row(3, T0 + 40, topic="t", partition=0, offset=9)]
    lost = check_lost_writes(to_table(rows))
    assert lost["valid"] is False and lost["lost_examples"] == [3] and lost["lost_by_partition"] == {"t-1": 1}, lost
    assert lost["read_elsewhere_count"] == 1
    assert check_lost_writes(to_table(clean_rows()))["read_elsewhere_count"] == 0


def test_a_value_read_back_unlike_the_one_sent_is_corrupted():
    """The send row's digest (CRC-32 of the value) against the read row's; a history without
    digests compares nothing and says so."""
    from bench.check import check_corrupted

    def with_digests(rows, bad=None):
        return [{**r, "digest": 1000 + r["msg_id"] + (1 if r["kind"] == "read" and r["msg_id"] == bad else 0)}
                for r in rows]

    ok = check_corrupted(to_table(with_digests(clean_rows())))
    assert ok["valid"] is True and ok["corrupted_count"] == 0 and ok["checked_count"] == 10, ok
    bad = check_corrupted(to_table(with_digests(clean_rows(), bad=7)))
    assert bad["valid"] is False and bad["corrupted_count"] == 1, bad
    assert bad["examples"] == [{"msg_id": 7, "topic": "t", "partition": 1, "offset": 3}]
    assert check_all(to_table(with_digests(clean_rows(), bad=7)))["failed"] == ["corrupted"]
    none = check_corrupted(to_table(clean_rows()))
    assert none["valid"] is True and none["checked_count"] == 0 and "not compared" in none["note"]


def test_lost_writes_unknown_without_reads_and_ignores_unacked():
    no_reads = [r for r in clean_rows() if r["kind"] != "read"]
    assert check_lost_writes(to_table(no_reads))["valid"] == "unknown"
    rows = clean_rows() + [send_row(99, T0 + 6, producer="p0", topic="t", partition=0,
                                    outcome="info", error="timed out")]
    assert check_lost_writes(to_table(rows))["valid"] is True  # unknown outcome, never read: fine


def test_lost_writes_in_a_partition_not_read_to_its_end_are_unknown():
    """An acked write the verifying consumer never reached (its read of that partition timed out)
    is not a loss but an unknown; one missing from a partition read to its end still fails."""
    def verify(part, complete):
        return event_row("verify", T0 + 30, {"topic": "t", "partition": part, "complete": complete, "read": 4},
                         topic="t", partition=part)

    cut = check_lost_writes(to_table(without_read(clean_rows(), 3) + [verify(1, False), verify(0, True)]))
    assert cut["valid"] == "unknown" and cut["lost_count"] == 0 and cut["unread_by_partition"] == {"t-1": 1}, cut
    assert "t-1" in cut["reason"]
    both = without_read(without_read(clean_rows(), 3), 0) + [verify(1, False), verify(0, True)]
    lost = check_lost_writes(to_table(both))  # id 0 (t-0, read to its end) is lost; id 3 unread
    assert lost["valid"] is False and lost["lost_examples"] == [0] and lost["lost_by_partition"] == {"t-0": 1}
    assert lost["unread_by_partition"] == {"t-1": 1}
    whole = check_lost_writes(to_table(without_read(clean_rows(), 3) + [verify(1, True), verify(0, True)]))
    assert whole["valid"] is False and whole["lost_examples"] == [3]


def test_duplicate_read_at_another_offset():
    rows = clean_rows()
    # Re-reading the same offset (consumer restart) is not a duplicate ...
    same = rows + [read_row(4, T0 + 40, topic="t", partition=0, offset=2)]
    assert check_duplicates(to_table(same))["valid"] is True
    # ... the same message at a second offset is.
    dup = rows + [read_row(4, T0 + 40, topic="t", partition=0, offset=7)]
    result = check_duplicates(to_table(dup))
    assert result["valid"] is False
    assert result["duplicated_count"] == 1 and result["extra_copies"] == 1
    assert result["examples"] == [{"msg_id": 4, "positions": [
        {"topic": "t", "partition": 0, "offset": 2}, {"topic": "t", "partition": 0, "offset": 7}]}]
    # A duplicate later in the log does not count as reordering (first occurrence is used).
    assert check_reordering(to_table(dup))["valid"] is True


def test_reordering_within_a_producer():
    rows = clean_rows()
    # Partition 0 holds ids 0,1 (p0,p1) at offsets 0,1 and 4,5 at offsets 2,3; p0's ids there are
    # 0 then 4. Swap the offsets where 0 and 4 were read: p0 now reads 4 before 0.
    for r in rows:
        if r["kind"] == "read" and r["msg_id"] == 0:
            r["offset"] = 2
        elif r["kind"] == "read" and r["msg_id"] == 4:
            r["offset"] = 0
    result = check_reordering(to_table(rows))
    assert result["valid"] is False
    assert result["reordered_count"] == 1
    assert result["examples"] == [{"topic": "t", "partition": 0, "producer": "p0", "offset": 2,
                                   "msg_id": 0, "prev_offset": 0, "prev_msg_id": 4}]


def test_interleaved_producers_are_not_reordering():
    rows = []
    # p0 sends ids 0,1; p1 sends 10,11; log order 10, 0, 11, 1 is fine per producer.
    for off, (mid, prod) in enumerate([(10, "p1"), (0, "p0"), (11, "p1"), (1, "p0")]):
        rows.append(send_row(mid, T0 + mid, producer=prod, topic="t", partition=0, outcome="ok",
                             ack_ts=T0 + mid + 1))
        rows.append(read_row(mid, T0 + 50, topic="t", partition=0, offset=off))
    assert check_reordering(to_table(rows))["valid"] is True


def test_info_send_that_was_read_is_reported_not_failed():
    rows = clean_rows() + [
        send_row(20, T0 + 6, producer="p0", topic="t", partition=0, outcome="info", error="timeout"),
        read_row(20, T0 + 40, topic="t", partition=0, offset=5),
        send_row(21, T0 + 7, producer="p0", topic="t", outcome="fail", error="MSG_SIZE_TOO_LARGE"),
        send_row(22, T0 + 8, producer="p0", topic="t", outcome="info", error="timeout"),
    ]
    table = to_table(rows)
    unseen = check_unseen(table)
    assert unseen["valid"] is True
    assert (unseen["info_total"], unseen["info_read"], unseen["info_read_examples"]) == (2, 1, [20])
    assert (unseen["fail_total"], unseen["fail_read"]) == (1, 0)
    # The info message is not an acked one: it takes no part in reordering and is not lost.
    assert check_reordering(table)["valid"] is True
    assert check_all(table)["valid"] is True


def test_unexpected_read():
    rows = clean_rows() + [read_row(777, T0 + 40, topic="t", partition=1, offset=9),
                           read_row(-1, T0 + 40, topic="t", partition=1, offset=10)]  # prefill
    result = check_unexpected(to_table(rows))
    assert result["valid"] is False and result["examples"] == [777]


# --- a reassignment of t-0 from broker 1 to broker 2 ----------------------------------------
#
# Sends on t-0 every 0.5 s from 0 to 19.5, acked 0.25 s later, except:
#   sends invoked in [10, 13) are blocked and all acked at 13.375;
#   sends from 13 on are acked 0.5 s later (new leader);
#   a send invoked at 9.875 (before the request) is acked at 13.3125.
# Events: action_start 10.0, leader_change to broker 2 at 13.25, action_end at 13.5.
# t-1 gets steady sends acked 0.125 s later (a partition the move does not touch).


def move_rows(with_leader_change=True):
    rows = []
    mid = 0
    for k in range(40):
        ts = k * 0.5
        ack = 13.375 if 10 <= ts < 13 else (ts + 0.5 if ts >= 13 else ts + 0.25)
        rows.append(send_row(mid, T0 + ts, producer="p0", topic="t", partition=0, outcome="ok",
                             ack_ts=T0 + ack))
        mid += 1
    rows.append(send_row(mid, T0 + 9.875, producer="p0", topic="t", partition=0, outcome="ok",
                         ack_ts=T0 + 13.3125))
    mid += 1
    for k in range(40):
        ts = k * 0.5
        rows.append(send_row(mid, T0 + ts, producer="p1", topic="t", partition=1, outcome="ok",
                             ack_ts=T0 + ts + 0.125))
        mid += 1
    rows += [
        event_row("action_start", T0 + 10.0, {"action": "reassign", "topic": "t", "partition": 0,
                                              "from": [1], "to": [2], "action_id": 0}),
        # Another partition's leader change must not be taken for t-0's.
        event_row("leader_change", T0 + 11.0, {"topic": "t", "partition": 1, "leader": 3, "action_id": 0}),
        event_row("move_phase", T0 + 12.0, {"phase": "copy", "seconds": 2.5, "bytes": 4096, "action_id": 0}),
        event_row("move_phase", T0 + 12.5, {"phase": "copy", "seconds": 0.5, "bytes": 1024, "action_id": 0}),
        event_row("action_end", T0 + 13.5, {"action": "reassign", "action_id": 0}),
    ]
    if with_leader_change:
        rows.append(event_row("leader_change", T0 + 13.25,
                              {"topic": "t", "partition": 0, "leader": 2, "action_id": 0}))
    return rows


SCENARIO = {
    "name": "m",
    "system": {"kind": "replication", "brokers": 3},
    "workload": {"topics": [{"name": "t", "partitions": 2, "replication_factor": 1}], "message_bytes": 100,
                 "produce_rate_msgs_per_s": 4, "duration_s": 20},
    "actions": [{"at_s": 10, "kind": "reassign", "topic": "t", "partition": 0, "to": [2]}],
}


def test_move_seconds():
    result = check_move_seconds(to_table(move_rows()))
    assert result["valid"] is True
    (move,) = result["moves"]
    assert (move["topic"], move["partition"], move["new_leader"]) == ("t", 0, 2)
    assert move["leader_change_ts"] == T0 + 13.25
    # First ack >= 13.25 of a send invoked >= 10: the blocked sends' 13.375, not the 13.3125 ack
    # of the send invoked before the request.
    assert move["first_ack_ts"] == T0 + 13.375
    assert move["move_seconds"] == pytest.approx(3.375, abs=1e-9)
    (action,) = result["actions"]
    assert action["move_seconds"] == pytest.approx(3.375, abs=1e-9)
    assert action["phases"] == {"copy": {"seconds": 3.0, "bytes": 5120}}


def test_the_estimate_made_before_a_move_is_set_beside_its_time_and_never_changes_the_verdict():
    est = {"action_id": 0, "total_seconds": 3.0, "model": {"source": "m.json", "commit": "abc"},
           "partitions": [{"topic": "t", "partition": 0, "seconds": 3.0, "seconds_low": 2.7, "seconds_high": 3.3,
                           "feasible": True}]}
    result = check_move_seconds(to_table(move_rows() + [event_row("move_estimate", T0 + 9.9, est)]))
    assert result["valid"] is True
    (move,) = result["moves"]
    assert (move["estimate_seconds"], move["estimate_model_commit"]) == (3.0, "abc")
    assert move["estimate_error_pct"] == pytest.approx(100 * (3.0 - 3.375) / 3.375)  # short by 11 %
    assert result["estimates"] == {"n": 1, "within_band": 0, "median_error_pct": pytest.approx(-11.111, abs=1e-3),
                                   "median_abs_error_pct": pytest.approx(11.111, abs=1e-3),
                                   "max_abs_error_pct": pytest.approx(11.111, abs=1e-3)}
    missing = check_move_seconds(to_table(move_rows() + [event_row("move_estimate", T0 + 9.9, {
        "action_id": 0, "error": "EstimateError: no link rate"})]))
    (move,) = missing["moves"]
    assert move["estimate_error"] == "EstimateError: no link rate" and "estimate_error_pct" not in move
    assert missing["estimates"] == {"n": 0, "within_band": 0, "missing": ["EstimateError: no link rate"]}
    assert "estimates" not in check_move_seconds(to_table(move_rows()))  # a run that made none


def test_move_seconds_unknown_without_leader_change():
    result = check_move_seconds(to_table(move_rows(with_leader_change=False)))
    assert result["valid"] == "unknown"
    assert result["moves"][0]["move_seconds"] == "unknown"
    assert check_all(to_table(move_rows(with_leader_change=False)))["valid"] == "unknown"


def test_a_move_a_later_action_replaced_has_no_time_and_leaves_its_action_known():
    """KIP-455: a new reassignment of a moving partition replaces the ongoing one; the earlier
    action's move of it is superseded, not unknown."""
    rows = move_rows(with_leader_change=False) + [
        event_row("move_superseded", T0 + 12.0, {"action_id": 0, "topic": "t", "partition": 0, "by": 1})]
    result = check_move_seconds(to_table(rows))
    assert result["valid"] is True
    (move,) = result["moves"]
    assert move["superseded_by"] == 1 and move["reason"] == "superseded by action 1"
    assert result["actions"][0]["move_seconds"] is None


def test_a_move_that_keeps_its_leader_is_timed_to_its_completion_and_a_no_op_is_not_timed():
    """Replicas added and removed behind a leader that stays: no leader change, the reassignment's
    completion is when the new placement serves (a later leader change, e.g. a fault's, is not
    this move's); a move to the replica list it already has has nothing to time."""
    rows = move_rows(with_leader_change=False) + [
        event_row("leader_change", T0 - 5.0, {"topic": "t", "partition": 0, "leader": 2}),  # the leader before
        event_row("move_complete", T0 + 12.0, {"topic": "t", "partition": 0, "new_leader": 2, "action_id": 0,
                                               "ts": T0 + 12.0}),
        event_row("leader_change", T0 + 18.0, {"topic": "t", "partition": 0, "leader": 2})]  # later, not the move's
    (move,) = check_move_seconds(to_table(rows))["moves"]
    assert move["leader_kept"] is True and move["leader_change_ts"] == T0 + 12.0
    assert move["move_seconds"] == pytest.approx(3.375)  # the first ack at or after 12 (the blocked 13.375)
    noop = [r for r in move_rows(with_leader_change=False) if r.get("event") != "action_start"] + [
        event_row("action_start", T0 + 10.0, {"action": "reassign", "action_id": 0, "partitions": [
            {"topic": "t", "partition": 0, "from": [2, 3], "to": [3, 2]}]})]  # a reorder moves no data
    result = check_move_seconds(to_table(noop))
    assert result["valid"] is True and result["moves"][0]["no_op"] is True


def test_move_seconds_limit_from_scenario():
    table = to_table(move_rows())
    strict = parse_scenario({**SCENARIO, "checks": {"max_move_seconds": 3}})
    loose = parse_scenario({**SCENARIO, "checks": {"max_move_seconds": 4}})
    assert check_move_seconds(table, strict)["valid"] is False
    assert check_move_seconds(table, loose)["valid"] is True
    overall = check_all(table, strict)
    assert overall["valid"] is False and overall["failed"] == ["move_seconds"]


def test_move_partitions_come_from_the_scenario_when_not_logged():
    rows = [r for r in move_rows() if r.get("event") != "action_start"]
    rows.append(event_row("action_start", T0 + 10.0, {"action_id": 0}))
    result = check_move_seconds(to_table(rows), parse_scenario(SCENARIO))
    assert [(m["topic"], m["partition"]) for m in result["moves"]] == [("t", 0)]
    assert result["moves"][0]["move_seconds"] == pytest.approx(3.375, abs=1e-9)


def test_unavailable_seconds():
    result = check_unavailable_seconds(to_table(move_rows()))
    assert result["valid"] is True
    (win,) = [w for w in result["actions"] if w["partition"] == 0]
    # Window [10 - 1, 13.5 + 5]; acks on t-0 inside: ..., 9.25, 9.75, 13.3125, 13.375, 13.5, ...
    assert win["window"] == [T0 + 9.0, T0 + 18.5]
    assert win["unavailable_seconds"] == pytest.approx(3.5625, abs=1e-9)
    assert win["gap"] == [T0 + 9.75, T0 + 13.3125]
    # t-1's leader change carries the action id, but action_start named t-0 only.
    assert [w["partition"] for w in result["actions"]] == [0]
    run = result["run"]
    assert run["window"] == [T0 + 0.0, T0 + 19.5]
    assert run["max_unavailable_seconds"] == pytest.approx(3.5625, abs=1e-9)
    assert run["worst_partitions"][0]["partition"] == 0
    # t-1 over the run: first ack 0.125 after the start, then every 0.5 s, last ack 19.625 is
    # past the load window's end (19.5), so the longest gap is 0.5.
    assert run["worst_partitions"][1]["unavailable_seconds"] == pytest.approx(0.5, abs=1e-9)
    limited = parse_scenario({**SCENARIO, "checks": {"max_unavailable_seconds": 3}})
    assert check_unavailable_seconds(to_table(move_rows()), limited)["valid"] is False


def test_unavailable_whole_window_without_acks():
    rows = [r for r in move_rows() if not (r["kind"] == "send" and r["partition"] == 0
                                           and 8 <= r["ts"] - T0)]
    result = check_unavailable_seconds(to_table(rows))
    (win,) = [w for w in result["actions"] if w["partition"] == 0]
    # Last t-0 ack is 7.75 (send at 7.5); none in [9, 18.5]: unavailable for the whole window.
    assert win["unavailable_seconds"] == pytest.approx(9.5, abs=1e-9)


def test_latency_before_during_after():
    result = check_latency(to_table(move_rows()))
    assert result["valid"] is True
    (act,) = result["actions"]
    part = act["partitions"]  # t-0 only
    # before [0, 10): 20 sends at 250 ms plus the 9.875 send at 13.3125 - 9.875 = 3437.5 ms.
    before = np.array([250.0] * 20 + [3437.5])
    assert part["before"]["count"] == 21
    assert part["before"]["p50_ms"] == pytest.approx(250.0)
    assert part["before"]["p99_ms"] == pytest.approx(250.0 + 0.8 * 3187.5)  # rank 19.8 of 0..20
    assert part["before"]["p999_ms"] == pytest.approx(np.percentile(before, 99.9))
    assert part["before"]["max_ms"] == pytest.approx(3437.5)
    # during [10, 13.5): blocked sends 10..12.5 acked at 13.375, send at 13.0 acked 0.5 s later.
    during = sorted([3375.0, 2875.0, 2375.0, 1875.0, 1375.0, 875.0, 500.0])
    assert part["during"]["count"] == 7
    assert part["during"]["p50_ms"] == pytest.approx(1875.0)
    assert part["during"]["p99_ms"] == pytest.approx(3375.0 - 0.06 * 500.0)  # rank 5.94
    # after [13.5, 19.5]: 13 sends, all 500 ms.
    assert part["after"]["count"] == 13
    assert part["after"]["p50_ms"] == pytest.approx(500.0) and part["after"]["p999_ms"] == pytest.approx(500.0)
    # "all" adds t-1 (125 ms each): 20 more before, 7 during, 13 after.
    assert [act["all"][ph]["count"] for ph in ("before", "during", "after")] == [41, 14, 26]
    assert act["all"]["during"]["p50_ms"] == pytest.approx(np.percentile(during + [125.0] * 7, 50))
    assert result["run"]["count"] == 81


def test_latency_counts_timeouts_per_window():
    rows = move_rows() + [send_row(500, T0 + 11.0, producer="p0", topic="t", partition=0,
                                   outcome="info", error="timeout")]
    act = check_latency(to_table(rows))["actions"][0]
    assert act["all"]["during"]["info_count"] == 1 and act["all"]["before"]["info_count"] == 0


def test_bytes_moved():
    rows = move_rows() + [
        event_row("counter", T0 + 11.0, {"name": "bytes_moved_inter_broker", "value": 1000, "broker": 2,
                                         "action_id": 0}),
        # No action_id: attributed by time to the action whose window contains it.
        event_row("counter", T0 + 12.0, {"name": "bytes_moved_inter_broker", "value": 500, "broker": 2}),
        event_row("counter", T0 + 12.5, {"name": "bytes_moved_objstore", "value": 64, "broker": 1}),
        # After the action ended: unattributed.
        event_row("counter", T0 + 19.0, {"name": "bytes_moved_inter_broker", "value": 7, "broker": 3}),
    ]
    result = check_bytes_moved(to_table(rows))
    assert result["valid"] is True
    (act,) = result["actions"]
    assert act["inter_broker_bytes"] == 1500 and act["objstore_bytes"] == 64
    assert act["bytes_moved"] == 1564
    assert act["by_broker"]["bytes_moved_inter_broker"] == {"2": 1500}
    assert result["unattributed"] == {"bytes_moved_inter_broker": 7}
    assert result["run"]["bytes_moved"] == 1571


# --- faults: the outage window runs until the first ack after recovery -----------------------


def outage_rows(blocked, until=30.0, partitions=(0,)):
    """Sends on t-<p> every 0.5 s from 0 to ``until``, acked 0.25 s later; a send invoked inside
    ``blocked[p] = (lo, hi)`` times out (info)."""
    rows, mid = [], 0
    for p in partitions:
        lo, hi = blocked.get(p, (-1.0, -1.0))
        for k in range(int(until / 0.5) + 1):
            ts = k * 0.5
            if lo <= ts < hi:
                rows.append(send_row(mid, T0 + ts, producer="p0", topic="t", partition=p, outcome="info",
                                     error="timeout"))
            else:
                rows.append(send_row(mid, T0 + ts, producer="p0", topic="t", partition=p, outcome="ok",
                                     ack_ts=T0 + ts + 0.25))
            mid += 1
    return rows


def action(ts, aid, kind, end=None, ok=True, **detail):
    rows = [event_row("action_start", T0 + ts, {"action": kind, "action_id": aid, **detail})]
    return rows + [event_row("action_end", T0 + (ts if end is None else end),
                             {"action": kind, "action_id": aid, "ok": ok})]


def test_broker_kill_outage_runs_until_the_first_ack_after_the_restart():
    # Copy system, replication factor 1: broker 1 (t-0's only replica) killed at 10, leader -1 at
    # 10.5; restarted at 24, serving (action_end) at 25.5. The client sees leader 1 again at 25.0:
    # the faulted broker coming back is no failover, the restart's end is the recovery.
    rows = outage_rows({0: (10.0, 25.5)})
    rows += action(10.0, 0, "kill_broker", broker=1, partitions=[{"topic": "t", "partition": 0}])
    rows += [event_row("leader_change", T0 + 10.5, {"topic": "t", "partition": 0, "leader": -1,
                                                    "source": "client"}),
             event_row("leader_change", T0 + 25.0, {"topic": "t", "partition": 0, "leader": 1,
                                                    "source": "client"})]
    rows += action(24.0, 1, "restart_broker", end=25.5, broker=1)
    table = to_table(rows)
    assert check_move_seconds(table)["moves"] == []
    result = check_unavailable_seconds(table)
    (kill,) = result["actions"]  # the restart has no window of its own
    assert (kill["action"], kill["broker"], kill["partition"]) == ("kill_broker", 1, 0)
    assert kill["recovered_by"] == "restart_broker" and kill["recovery_action_id"] == 1
    assert kill["recovery_ts"] == T0 + 25.5
    # Last ack before: 9.5 + 0.25; first at or after 25.5: the send at 25.5, acked at 25.75.
    assert kill["first_ack_ts"] == T0 + 25.75
    assert kill["window"] == [T0 + 9.0, T0 + 25.75]
    assert kill["unavailable_seconds"] == pytest.approx(25.75 - 9.75, abs=1e-9)  # not cut after 5 s
    assert result["run"]["max_unavailable_seconds"] == pytest.approx(16.0, abs=1e-9)


def test_broker_kill_outage_ends_at_the_failover():
    # Shared system: owner 1 of t-0 killed at 10; the client sees leader 2 at 13.5 and acks resume
    # with the send at 13.5. The controller's own journal said so at 13.0 (not what a client saw),
    # and broker 1 is restarted much later: the failover is the recovery.
    rows = outage_rows({0: (10.0, 13.5)})
    rows += action(10.0, 0, "kill_broker", broker=1, partitions=[{"topic": "t", "partition": 0}])
    rows += [event_row("leader_change", T0 + 13.0, {"topic": "t", "partition": 0, "leader": 2,
                                                    "source": "controller"}),
             event_row("leader_change", T0 + 13.5, {"topic": "t", "partition": 0, "leader": 2,
                                                    "source": "client"})]
    rows += action(25.0, 1, "restart_broker", end=26.0, broker=1)
    (kill,) = check_unavailable_seconds(to_table(rows))["actions"]
    assert (kill["recovered_by"], kill["new_leader"], kill["recovery_ts"]) == ("leader_change", 2, T0 + 13.5)
    assert kill["window"] == [T0 + 9.0, T0 + 13.75]
    assert kill["unavailable_seconds"] == pytest.approx(13.75 - 9.75, abs=1e-9)


def test_pause_outage_ends_at_the_resume_of_the_same_broker():
    # Broker 2 (t-1) frozen at 5 and resumed (action_end) at 9; broker 3 is resumed first, which
    # is not t-1's recovery; a failed resume would not be one either.
    rows = outage_rows({1: (5.0, 9.0)}, until=15.0, partitions=(0, 1))
    rows += action(4.0, 0, "pause_broker", broker=3, partitions=[])
    rows += action(5.0, 1, "pause_broker", broker=2, partitions=[{"topic": "t", "partition": 1}])
    rows += action(6.0, 2, "resume_broker", broker=3)
    rows += action(7.0, 3, "resume_broker", broker=2, ok=False)
    rows += action(8.5, 4, "resume_broker", end=9.0, broker=2)
    (pause,) = check_unavailable_seconds(to_table(rows))["actions"]
    assert (pause["action_id"], pause["partition"]) == (1, 1)
    assert (pause["recovered_by"], pause["recovery_action_id"]) == ("resume_broker", 4)
    assert pause["window"] == [T0 + 4.0, T0 + 9.25]
    assert pause["unavailable_seconds"] == pytest.approx(9.25 - 4.75, abs=1e-9)


def test_object_store_outage_covers_every_partition_until_its_restart():
    # No partitions named: every partition with load is affected. t-0 stalls from 10 to 15,
    # t-1 from 10 to 14; the store is serving again (action_end) at 14.5.
    rows = outage_rows({0: (10.0, 15.0), 1: (10.0, 14.0)}, until=20.0, partitions=(0, 1))
    rows += action(10.0, 0, "stop_object_store")
    rows += action(14.0, 1, "start_object_store", end=14.5)
    result = check_unavailable_seconds(to_table(rows))
    w = {x["partition"]: x for x in result["actions"]}
    assert sorted(w) == [0, 1] and {x["recovered_by"] for x in w.values()} == {"start_object_store"}
    assert w[0]["window"] == [T0 + 9.0, T0 + 15.25]  # first t-0 ack at or after 14.5
    assert w[0]["unavailable_seconds"] == pytest.approx(15.25 - 9.75, abs=1e-9)
    assert w[1]["window"] == [T0 + 9.0, T0 + 14.75]
    assert w[1]["unavailable_seconds"] == pytest.approx(14.25 - 9.75, abs=1e-9)
    limited = parse_scenario({**SCENARIO, "actions": [], "checks": {"max_unavailable_seconds": 5}})
    assert check_unavailable_seconds(to_table(rows), limited)["valid"] is False


def test_fault_without_recovery_runs_to_the_end_of_the_load():
    rows = outage_rows({0: (10.0, 30.5)})
    rows += action(10.0, 0, "kill_controller", partitions=[{"topic": "t", "partition": 0}])
    (w,) = check_unavailable_seconds(to_table(rows))["actions"]
    assert w["recovered_by"] is None and w["first_ack_ts"] is None
    assert w["window"] == [T0 + 9.0, T0 + 30.0]  # the last send invocation
    assert w["unavailable_seconds"] == pytest.approx(30.0 - 9.75, abs=1e-9)


def test_summary_outages_per_fault():
    # A move of t-0 requested at 10 (first ack on the new owner at 13.375) and a pause of
    # broker 1 at 11: the fault landed mid-move. Broker 1 resumed at 12 (end 12.5).
    rows = move_rows()
    rows += action(11.0, 1, "pause_broker", broker=1, partitions=[{"topic": "t", "partition": 0}])
    rows += action(12.0, 2, "resume_broker", end=12.5, broker=1)
    summary = build_summary(to_table(rows), None)
    (out,) = summary["outages"]
    assert (out["action_id"], out["kind"], out["broker"], out["partitions"]) == (1, "pause_broker", 1, ["t-0"])
    assert out["during_moves"] == [0]
    assert (out["recovered_by"], out["recovered_ts"]) == ("resume_broker", T0 + 12.5)
    assert out["recovery_seconds"] == pytest.approx(1.5)
    # Window [10, 13.3125] (first ack at or after 12.5); last ack before it 9.75.
    assert out["unavailable_seconds"] == pytest.approx(13.3125 - 10.0, abs=1e-9)
    assert out["run_unavailable_seconds"] == pytest.approx(3.5625, abs=1e-9)


def test_large_history_is_vectorised():
    # 200k messages: a Python loop over rows would take far longer than this test's budget.
    n = 200_000
    import pyarrow as pa

    from bench.history.store import SCHEMA

    ids = np.arange(n, dtype=np.int64)
    ts = T0 + ids * 1e-4
    part = (ids % 4).astype(np.int32)
    off = ids // 4
    nulls = {f.name: pa.nulls(n, f.type) for f in SCHEMA}
    sends = pa.table({**nulls, "kind": pa.array(["send"] * n), "ts": ts, "msg_id": ids,
                      "producer": pa.array(["p0"] * n), "topic": pa.array(["t"] * n),
                      "partition": part, "ack_ts": ts + 0.002, "outcome": pa.array(["ok"] * n),
                      "offset": off}, schema=SCHEMA)
    keep = ids != 12_345
    reads = pa.table({**nulls, "kind": pa.array(["read"] * n), "ts": ts + 1, "msg_id": ids,
                      "topic": pa.array(["t"] * n), "partition": part,
                      "outcome": pa.array(["ok"] * n), "offset": off}, schema=SCHEMA).filter(pa.array(keep))
    result = check_all(pa.concat_tables([sends, reads]))
    assert result["lost_writes"]["lost_examples"] == [12_345]
    assert result["duplicates"]["valid"] is True and result["reordering"]["valid"] is True
    assert result["latency"]["run"]["p50_ms"] == pytest.approx(2.0, abs=1e-6)


def test_bytes_moved_split_counts_writes_during_the_move_first():
    from bench.check.moves import split_bytes_moved

    # 46.7 MB moved for a 39.7 MB partition: 7 MB were written while it moved
    assert split_bytes_moved(46_700_000, 7_000_000) == {"bytes_moved_at_request": 39_700_000,
                                                        "bytes_moved_during_move": 7_000_000}
    # a handover uploads a small tail: what was written during the move is at most what moved
    assert split_bytes_moved(600_000, 1_400_000) == {"bytes_moved_at_request": 0, "bytes_moved_during_move": 600_000}
    assert split_bytes_moved(600_000, None) == {"bytes_moved_at_request": None, "bytes_moved_during_move": None}


def test_an_unknown_safety_check_counts_nothing():
    from bench.check.safety import verdict, verdict_counts

    result = check_all(to_table([r for r in clean_rows() if r["kind"] != "read"]))
    assert result["duplicates"]["valid"] == "unknown" and result["duplicates"]["duplicated_count"] is None
    assert result["reordering"]["reordered_count"] is None and result["unexpected"]["unexpected_count"] is None
    assert [verdict(v) for v in (True, False, "unknown", None)] == ["pass", "fail", "unknown", "unknown"]
    assert verdict_counts(["pass", "unknown", "pass", "fail"]) == "2 pass, 1 fail, 1 unknown"


def test_copy_start_is_the_first_answer_to_an_added_replica():
    """bench.check.moves.copy_start: the bytes the leader told the move's new replica to copy."""
    from bench.check.moves import copy_start
    from bench.check.view import HistoryView

    def start(ts, replica, b, aid=0, part=0):
        return event_row("copy_start", T0 + ts, {"topic": "t", "partition": part, "replica": replica,
                                                 "offset": 10, "bytes_to_copy": b, "action_id": aid})

    rows = move_rows() + [start(10.1, 3, 999, aid=1), start(10.2, 1, 111), start(10.3, 2, 4096),
                          start(12.0, 2, 8192), start(10.4, 2, 555, part=1)]
    v = HistoryView(to_table(rows))
    assert copy_start(v, 0, ("t", 0), {2}) == {"ts": T0 + 10.3, "replica": 2, "offset": 10, "bytes_to_copy": 4096}
    assert copy_start(v, 0, ("t", 0))["bytes_to_copy"] == 111  # any replica when the added ones are unknown
    assert copy_start(HistoryView(to_table(move_rows())), 0, ("t", 0), {2}) is None  # copied from the log's start


def test_lost_prefill_counts_prefill_records_read_back():
    from bench.check import check_lost_prefill

    def prefill(part, n):
        return event_row("prefill", T0, {"topic": "t", "partition": part, "bytes": n * 100, "messages": n},
                         topic="t", partition=part)

    def verify(part, read, complete=True):
        return event_row("verify", T0 + 30, {"topic": "t", "partition": part, "prefill_read": read,
                                             "complete": complete, "read": read}, topic="t", partition=part)

    base = clean_rows()
    assert check_lost_prefill(to_table(base))["valid"] is True  # no prefill: nothing to check
    ok = check_lost_prefill(to_table(base + [prefill(0, 50), prefill(1, 50), verify(0, 50), verify(1, 52)]))
    assert ok["valid"] is True and ok["lost_prefill_count"] == 0 and ok["prefill_messages"] == 100
    lost = check_lost_prefill(to_table(base + [prefill(0, 50), prefill(1, 50), verify(0, 47), verify(1, 50)]))
    assert lost["valid"] is False and lost["lost_prefill_count"] == 3 and lost["lost_by_partition"] == {"t-0": 3}
    unread = check_lost_prefill(to_table(base + [prefill(0, 50), verify(0, 10, complete=False)]))
    assert unread["valid"] == "unknown" and unread["lost_prefill_count"] is None and "t-0" in unread["reason"]
    assert check_all(to_table(base + [prefill(0, 50), verify(0, 47)]))["failed"] == ["lost_prefill"]


def test_upgrade_summary_turns_an_older_summary_into_the_current_shape():
    """bench.check.summary.upgrade_summary: a current summary comes back equal; a version-1 one
    gets what it lacks (from the view's events and the caller's raw-row figures)."""
    from bench.check.summary import SCHEMA_VERSION, build_summary, upgrade_summary
    from bench.check.view import HistoryView

    rows = move_rows() + [event_row("copy_start", T0 + 10.3, {"topic": "t", "partition": 0, "replica": 2,
                                                              "offset": 10, "bytes_to_copy": 4096, "action_id": 0})]
    current = build_summary(to_table(rows), None)
    assert current["schema_version"] == SCHEMA_VERSION and upgrade_summary(current) == current
    old = json.loads(json.dumps(current))
    del old["schema_version"]
    for m in old["moves"]:
        for k in ("copy_bytes_at_request", "bytes_written_during_move", "bytes_moved_at_request",
                  "bytes_moved_during_move"):
            m.pop(k)
    old["configuration"] = {"label": "x", "wal_batch_interval_ms": 200, "wal_upload_threshold_bytes": None}
    up = upgrade_summary(old, HistoryView(to_table(rows)), written_during=lambda m: 700)
    assert up["schema_version"] == SCHEMA_VERSION and old.get("schema_version") is None  # a new dict
    (m,) = up["moves"]
    assert m["copy_bytes_at_request"] == 4096 and m["bytes_written_during_move"] == 700
    assert up["configuration"]["system_settings"] == {"wal_batch_interval_ms": 200}
    assert upgrade_summary(old)["moves"][0]["bytes_written_during_move"] is None  # no raw rows: unknown


def test_a_declared_move_metric_reaches_the_summary_and_the_report(monkeypatch):
    """A per-move metric is one entry of bench/check/metrics.py: the summary computes it for every
    move, an older summary gets it on upgrade, and the report's "More move figures" table shows it."""
    from bench.check import metrics, summary
    from bench.check.view import HistoryView
    from bench.report import tables as report_tables

    def elect(v, m):
        return None if m.leader_change_ts is None else m.leader_change_ts - m.request_ts

    extra = metrics.MoveMetric("elect_seconds", "request to new leader s", "seconds from the request to the "
                               "first leader change to the new owner", elect)
    declared = (*metrics.MOVE_METRICS, extra)
    monkeypatch.setattr(summary, "MOVE_METRICS", declared)
    s = summary.build_summary(to_table(move_rows()), None)
    (m,) = s["moves"]
    assert m["elect_seconds"] is not None and 0 < m["elect_seconds"] <= m["move_seconds"]
    for drop_version in (True, False):  # a metric declared after the run, whatever the summary's version
        old = json.loads(json.dumps(s))
        del old["moves"][0]["elect_seconds"]
        if drop_version:
            del old["schema_version"]
        up = summary.upgrade_summary(old, HistoryView(to_table(move_rows())))
        assert up["moves"][0]["elect_seconds"] == pytest.approx(m["elect_seconds"])

    monkeypatch.setattr(report_tables, "MOVE_METRICS", declared)
    assert report_tables.more_moves_head() == ["configuration", "runs", "request to new leader s"]
    config = {"config_label": "c", "config_key": "c", "runs": 3, "repetitions": 3, "moves": 3,
              "elect_seconds_median": 0.5, "elect_seconds_min": 0.4, "elect_seconds_max": 0.7}
    assert report_tables.more_moves_rows([config]) == [["c", "3", "0.5 (0.4–0.7)"]]


def test_a_moves_estimate_in_an_action_of_several_is_compared_at_the_action():
    rows = move_rows() + [event_row("move_estimate", T0 + 9.9, {
        "action_id": 0, "total_seconds": 4.0, "model": {},
        "partitions": [{"topic": "t", "partition": p, "seconds": 3.0, "seconds_low": 2.7, "seconds_high": 3.3}
                       for p in (0, 1)]})]
    rows = [event_row("action_start", T0 + 10.0, {"action": "drain_broker", "broker": 1, "action_id": 0,
                                                  "partitions": [{"topic": "t", "partition": 0, "from": [1], "to": [2]},
                                                                 {"topic": "t", "partition": 1, "from": [1], "to": [3]}]})
            if r.get("event") == "action_start" else r for r in rows]
    result = check_move_seconds(to_table(rows))
    assert len(result["moves"]) == 2
    assert all("estimate_error_pct" not in m and m["estimate_seconds"] == 3.0 for m in result["moves"])
    (action,) = result["actions"]
    assert action["estimate_seconds"] == 4.0
