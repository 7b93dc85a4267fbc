"""The consumer checkers (bench/check/consumers.py) on small hand-written histories with
hand-computed expectations: at-least-once delivery per group, end-to-end latency windows, the
longest gap without a delivery, catch-up read rates; and the scenario's `consumers` section."""

import json

import pytest

from bench.check import check_all, check_catch_up, check_consumer_gaps, check_delivery, check_end_to_end
from bench.check.summary import build_summary
from bench.history.names import EVENT_ACTION_END, EVENT_ACTION_START, EVENT_CONSUMERS_FINISHED, EVENT_CONSUMERS_READY
from bench.history.store import event_row, send_row, to_table
from bench.scenario import ScenarioError, load_scenario, parse_scenario

T0 = 1_000.0  # binary-fraction offsets below keep sums exact

GROUPS = {
    "tail-0": {"set": "tail", "mode": "tail", "assignment": "group", "members": 2, "topics": ["t"],
               "start": {"t-0": 4, "t-1": 0}, "backlog": {"t-0": 0, "t-1": 0}},
    "catch_up-0": {"set": "catch_up", "mode": "catch_up", "assignment": "group", "members": 1, "topics": ["t"],
                   "start": {"t-0": 0, "t-1": 0}, "backlog": {"t-0": 4, "t-1": 0}},
}


def deliver(msg_id, ts, group, partition, offset, size=100, member="m0"):
    return {"kind": "deliver", "ts": ts, "msg_id": msg_id, "topic": "t", "partition": partition,
            "offset": offset, "size_bytes": size, "outcome": "ok", "group": group, "member": member}


def history(drop=(), redeliver=(), move=True):
    """Partition t-0 holds a 4-record backlog (offsets 0-3, prefill: msg id -1) and 8 messages
    sent every 0.5 s from T0 (offsets 4-11, acked 0.25 s later); t-1 gets 4 messages. The tail
    group gets each message 0.5 s after its send, except those sent during the move [T0+2,
    T0+3), delivered at T0+4 (a 2 s gap). The catch-up group reads the backlog at T0+0.5 ..
    T0+2 (400 bytes over 2 s from its start at T0), then each message 1 s after its send."""
    rows = [event_row(EVENT_CONSUMERS_READY, T0 - 1, {"groups": GROUPS})]
    rows.append(event_row(EVENT_CONSUMERS_FINISHED, T0 + 20, {"go_ts": T0, "caught_up": True, "behind": {}}))
    if move:
        rows.append(event_row(EVENT_ACTION_START, T0 + 2, {"action_id": 0, "action": "reassign", "topic": "t",
                                                           "partition": 0, "to": [2]}, topic="t", partition=0))
        rows.append(event_row(EVENT_ACTION_END, T0 + 3, {"action_id": 0, "action": "reassign", "ok": True}))
    for off in range(4):
        rows.append(deliver(-1, T0 + 0.5 * (off + 1), "catch_up-0", 0, off))
    mid = 0
    for i in range(8):
        ts = T0 + i * 0.5
        rows.append(send_row(mid, ts, producer="p0", topic="t", partition=0, outcome="ok", ack_ts=ts + 0.25,
                             offset=4 + i, size_bytes=100))
        if mid not in drop:
            when = T0 + 4 if T0 + 2 <= ts < T0 + 3 else ts + 0.5
            rows.append(deliver(mid, when, "tail-0", 0, 4 + i, member="m1"))
            if mid in redeliver:
                rows.append(deliver(mid, when + 1, "tail-0", 0, 4 + i, member="m0"))
        rows.append(deliver(mid, max(ts + 1, T0 + 2.25), "catch_up-0", 0, 4 + i))
        mid += 1
    for i in range(4):
        ts = T0 + i
        rows.append(send_row(mid, ts, producer="p0", topic="t", partition=1, outcome="ok", ack_ts=ts + 0.25,
                             offset=i, size_bytes=100))
        rows.append(deliver(mid, ts + 0.5, "tail-0", 1, i))
        rows.append(deliver(mid, ts + 1, "catch_up-0", 1, i))
        mid += 1
    return to_table(rows)


def test_every_acked_message_delivered_passes_and_redeliveries_are_allowed():
    res = check_delivery(history(redeliver={1}))
    assert res["valid"] is True, res
    tail = res["groups"]["tail-0"]
    assert (tail["required"], tail["delivered"], tail["missing"], tail["redelivered"]) == (12, 12, 0, 1)
    assert res["groups"]["catch_up-0"]["required"] == 12


def test_an_acked_message_a_group_never_got_fails_naming_it():
    res = check_delivery(history(drop={3}))
    assert res["valid"] is False
    tail = res["groups"]["tail-0"]
    assert tail["missing"] == 1
    assert tail["missing_examples"] == [{"msg_id": 3, "topic": "t", "partition": 0, "offset": 7}]
    assert res["groups"]["catch_up-0"]["missing"] == 0
    assert check_all(history(drop={3}))["failed"] == ["delivery"]


def test_a_backlog_record_a_catch_up_group_never_got_fails():
    rows = [r for r in history().to_pylist()
            if not (r["kind"] == "deliver" and r["group"] == "catch_up-0" and r["msg_id"] == -1 and r["offset"] == 1)]
    res = check_delivery(to_table(rows))
    assert res["valid"] is False
    g = res["groups"]["catch_up-0"]
    assert g["missing"] == 0 and g["missing_backlog"] == 1
    assert g["missing_backlog_examples"] == [{"topic": "t", "partition": 0, "offset": 1}]


def test_an_acked_send_with_an_unknown_offset_is_still_required():
    rows = history(drop={5}).to_pylist()
    for r in rows:
        if r["kind"] == "send" and r["msg_id"] == 5:
            r["offset"] = None  # acked, but its delivery report gave no offset
    res = check_delivery(to_table(rows))
    assert res["valid"] is False and res["groups"]["tail-0"]["missing_examples"][0]["msg_id"] == 5


def test_consumers_that_never_started_fail_the_delivery_check():
    rows = [r for r in history().to_pylist() if r["kind"] == "send"]
    res = check_delivery(to_table(rows), _with({"mode": "tail"}))
    assert res["valid"] is False and "never started" in res["reason"]


def test_a_run_with_catch_up_groups_only_keeps_its_per_action_rates():
    rows = history().to_pylist()
    groups = {"catch_up-0": GROUPS["catch_up-0"]}
    rows[0]["detail"] = json.dumps({"groups": groups})
    rows = [r for r in rows if not (r["kind"] == "deliver" and r["group"] == "tail-0")]
    (a,) = build_summary(to_table(rows), None)["consumers"]["actions"]
    assert a["action"] == "reassign" and a["catch_up_bytes_per_s"]["before"] == pytest.approx(200.0)
    assert a["end_to_end_ms"] == {} and a["gap_seconds"] is None


def test_messages_before_a_groups_start_offset_are_not_required():
    rows = history().to_pylist()
    groups = json.loads(json.dumps(GROUPS))
    groups["tail-0"]["start"]["t-0"] = 8  # the group starts at offset 8: messages 0-3 are not its to read
    rows[0]["detail"] = json.dumps({"groups": groups})
    rows = [r for r in rows if not (r["kind"] == "deliver" and r["group"] == "tail-0" and r["msg_id"] in (0, 1, 2, 3))]
    res = check_delivery(to_table(rows))
    assert res["valid"] is True and res["groups"]["tail-0"]["required"] == 8


def test_end_to_end_latency_windows_around_the_move():
    res = check_end_to_end(history(redeliver={1}))
    assert res["valid"] is True
    part = res["actions"][0]["partitions"]
    # before [T0, T0+2): sends 0..3 of t-0, each delivered 0.5 s later (a redelivery never counts)
    assert part["before"]["count"] == 4 and part["before"]["p50_ms"] == pytest.approx(500.0)
    # during [T0+2, T0+3): sends at T0+2 and T0+2.5 delivered at T0+4
    assert part["during"]["count"] == 2
    assert part["during"]["p50_ms"] == pytest.approx(1750.0)
    assert part["during"]["p999_ms"] == pytest.approx(1999.5)  # 1500 + 0.999 * 500
    assert part["after"]["count"] == 2 and part["after"]["p99_ms"] == pytest.approx(500.0)
    # the catch-up group's latency (a backlog's age) is not the system's: tail groups only
    assert res["run"]["count"] == 12 and list(res["groups"]) == ["tail-0"]


def test_longest_gap_without_a_delivery_during_the_move():
    res = check_consumer_gaps(history())
    (a,) = res["actions"]
    # window [T0+1, min(T0+3+5, load end T0+3.5)]: deliveries of t-0 at T0+1.5 (send T0+1),
    # T0+2 (send T0+1.5), then T0+4 is outside; the gap runs from T0+2 to the window's end.
    assert a["window"] == [T0 + 1, T0 + 3.5]
    assert a["groups"]["tail-0"]["gap_seconds"] == pytest.approx(1.5)
    assert a["max_gap_seconds"] == pytest.approx(1.5)


def test_catch_up_rate_and_duration():
    res = check_catch_up(history())
    g = res["groups"]["catch_up-0"]
    assert g["backlog_records"] == 4 and g["caught_up"] is True
    assert g["backlog_bytes"] == 400
    assert g["catch_up_seconds"] == pytest.approx(2.0)  # from go (T0) to the last backlog record (T0+2)
    assert g["bytes_per_s"] == pytest.approx(200.0)
    rates = g["actions"][0]["bytes_per_s"]
    assert rates["before"] == pytest.approx(200.0)  # [T0, T0+2): 400 bytes over 2 s
    assert rates["during"] is None  # the catch-up ended when the move started


def test_runs_without_consumers_are_neutral_and_summarised_as_none():
    rows = [r for r in history().to_pylist() if r["kind"] == "send"]
    res = check_all(to_table(rows))
    for name in ("delivery", "end_to_end", "consumer_gaps", "catch_up"):
        assert res[name]["valid"] is True and not res[name]["groups"]
    assert build_summary(to_table(rows), None)["consumers"] is None


def test_summary_carries_the_consumer_figures():
    s = build_summary(history(), None)
    c = s["consumers"]
    assert c["delivery_valid"] is True
    assert c["groups"]["tail-0"]["delivered"] == 12
    (a,) = c["actions"]
    assert a["end_to_end_ms"]["during"]["count"] == 2
    assert a["gap_seconds"] == pytest.approx(1.5)
    assert a["catch_up_bytes_per_s"]["before"] == pytest.approx(200.0)
    json.dumps(s)


# -- the scenario's consumers section -----------------------------------------------------------

def _with(consumers, **prefill):
    d = load_scenario("workloads/scenarios/reassign-one.yaml").resolved()
    d["consumers"] = consumers
    d["prefill"].update(prefill)
    return parse_scenario(d, "sc.yaml", check_matrix=False)


@pytest.mark.parametrize("consumers, prefill, where, says", [
    ({"mode": "tail", "start_lag_bytes": "1MiB"}, {}, "consumers.0.start_lag_bytes", "only applies to mode catch_up"),
    ([{"mode": "catch_up", "topics": ["nope"]}], {}, "consumers.0.topics.0", "unknown topic 'nope'"),
    ([{"mode": "catch_up"}], {"bytes_per_partition": 0}, "consumers.0.mode", "has no prefill"),
    ([{"mode": "tail"}, {"mode": "tail"}], {}, "consumers.1.name", "give each set its own name"),
    ([{"mode": "tail", "members": 0}], {}, "consumers.0.members", "must be >= 1 (got 0)"),
    ([{"mode": "tail", "group": "x"}], {}, "consumers.0.group", "unknown field"),
    ([{"mode": "sideways"}], {}, "consumers.0.mode", "tail"),
])
def test_bad_consumers_sections_are_refused_naming_the_field(consumers, prefill, where, says):
    with pytest.raises(ScenarioError) as e:
        _with(consumers, **prefill)
    assert f"sc.yaml: {where}: " in str(e.value) and says in str(e.value)


def test_one_mapping_is_one_consumer_set():
    sc = _with({"groups": 2, "members": 3})
    (cs,) = sc.consumers
    assert (cs.groups, cs.members, cs.mode, cs.assignment, cs.label) == (2, 3, "tail", "group", "tail")
    assert sc.consumer_topics(cs) == ["hot"]
