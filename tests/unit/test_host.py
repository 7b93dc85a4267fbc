"""Host saturation (bench/check/host.py) on hand-written histories, and the move models leaving a
saturated move out (bench/analysis/aggregate/fits.py)."""

import json

import pytest

from bench.check.host import (
    SATURATED_BUSY_PCT, SOURCE_HOST, SOURCE_MACHINE, host_samples, host_window, is_saturated, move_host, run_host,
)
from bench.check.summary import SCHEMA_VERSION, build_summary, upgrade_summary
from bench.check.view import HistoryView
from bench.history.store import event_row, send_row, to_table

T0 = 1_000.0


def host(ts, busy):
    return event_row("host_sample", T0 + ts, {"busy_pct": busy, "user_pct": busy, "system_pct": 0.0, "iowait_pct": 0.0,
                                              "steal_pct": busy / 5, "interval_s": 1.0, "cpus": 2, "load_1m": 1.0,
                                              "cpu_pressure_pct": busy / 10})


def history(busy_at, machine_only=False, move_at=10.0, first_ack_at=13.5):
    """A 20 s load (load_started at 0, load_finished at 20) with host samples every second
    (``busy_at(second)``: the share of the second before it), one reassign of t-0 at ``move_at``
    whose new owner acks first at ``first_ack_at``. ``machine_only``: the samples only as
    cpu_sample's ``_machine`` key, as histories from before host_sample have them."""
    rows = [event_row("load_started", T0, {"pid": 1}), event_row("load_finished", T0 + 20.0, {})]
    for k in range(40):
        ts = k * 0.5
        # acks stall from the request to the new owner's first ack
        ack = max(ts, first_ack_at) if move_at <= ts < first_ack_at else ts + 0.125
        rows.append(send_row(k, T0 + ts, producer="p0", topic="t", partition=0, outcome="ok", ack_ts=T0 + ack,
                             size_bytes=100))
    rows += [event_row("action_start", T0 + move_at, {"action": "reassign", "topic": "t", "partition": 0,
                                                      "from": [1], "to": [2], "action_id": 0}),
             event_row("leader_change", T0 + first_ack_at - 0.25, {"topic": "t", "partition": 0, "leader": 2,
                                                                    "action_id": 0}),
             event_row("action_end", T0 + first_ack_at + 1.0, {"action": "reassign", "action_id": 0})]
    for s in range(1, 21):
        b = busy_at(s)
        rows.append(event_row("cpu_sample", T0 + s, {"broker-1": 40.0, "load": 60.0, "_machine": b})
                    if machine_only else host(s, b))
    return rows


def hot_move(s):
    """95 % busy while the move runs (seconds 11-14), 50 % otherwise."""
    return 95.0 if 11 <= s <= 14 else 50.0


def test_the_rule_a_mean_over_the_window_above_90_percent_with_two_samples_at_least():
    assert SATURATED_BUSY_PCT == 90.0
    assert is_saturated(90.1, 2) is True and is_saturated(90.0, 2) is False and is_saturated(20.0, 5) is False
    assert is_saturated(100.0, 1) is None and is_saturated(None, 3) is None  # fewer than 2 samples: unknown


def test_a_move_timed_on_a_busy_host_is_saturated_its_run_is_not():
    v = HistoryView(to_table(history(hot_move)))
    s = build_summary(v.table, None)
    (m,) = s["moves"]
    assert m["move_seconds"] == pytest.approx(3.5)
    # window [10, 13.5]: 1 s of the sample at 11 (busy 95 %), 1 s at 12, 1 s at 13, 0.5 s at 14 (95 %)
    assert m["host_busy_mean_pct"] == 95.0 and m["host_busy_peak_pct"] == 95.0 and m["host_saturated"] is True
    h = s["host"]
    # the load window [0, 20]: 4 of 20 samples at 95 %, the rest 50 %
    assert h["busy_mean_pct"] == pytest.approx((4 * 95 + 16 * 50) / 20, abs=0.05) and h["saturated"] is False
    assert (h["samples"], h["samples_over_threshold"], h["busy_peak_pct"]) == (20, 4, 95.0)
    assert (h["from_ts"], h["to_ts"], h["threshold_pct"], h["source"]) == (T0, T0 + 20, 90.0, SOURCE_HOST)
    assert h["run_processes_pct"] is None  # no cpu_sample: nothing of the run's own to count
    assert h["cpu_pressure_mean_pct"] == pytest.approx((4 * 9.5 + 16 * 5) / 20, abs=0.05)  # reported, not judged
    assert h["steal_mean_pct"] == pytest.approx((4 * 19 + 16 * 10) / 20, abs=0.05)  # the hypervisor's share
    json.dumps(s, allow_nan=False)


def test_a_mean_not_a_single_sample_one_spike_does_not_saturate_a_move():
    v = HistoryView(to_table(history(lambda s: 100.0 if s == 12 else 70.0)))
    h = move_host(v, 0, T0 + 10.0, 3.5)
    assert h["busy_peak_pct"] == 100.0 and h["busy_mean_pct"] == pytest.approx((100 + 2.5 * 70) / 3.5, abs=0.05)
    assert h["saturated"] is False and h["samples"] == 4


def test_samples_are_weighted_by_their_seconds_inside_the_window():
    samples, _ = host_samples(HistoryView(to_table(history(lambda s: 100.0 if s == 11 else 80.0))))
    # [10.75, 12.25]: 0.25 s of the sample at 11 (100 %), 1 s at 12, 0.25 s at 13 (80 %)
    w = host_window(samples, T0 + 10.75, T0 + 12.25)
    assert w["busy_mean_pct"] == pytest.approx((0.25 * 100 + 1.25 * 80) / 1.5, abs=0.05) and w["samples"] == 3


def test_fewer_than_two_samples_is_unknown_and_says_why():
    v = HistoryView(to_table(history(lambda s: 99.0, move_at=10.25, first_ack_at=10.75)))
    (m,) = build_summary(v.table, None)["moves"]
    assert m["host_saturated"] is None and m["host_busy_mean_pct"] == 99.0  # one sample: no verdict
    assert "1 host sample(s)" in move_host(v, 0, T0 + 10.25, 0.5)["reason"]
    # a move never timed: its window runs to the action's end
    assert move_host(v, 0, T0 + 10.25, None)["samples"] == 2


def test_a_history_without_host_samples_is_unknown():
    rows = [r for r in history(hot_move) if r.get("event") != "host_sample"]
    s = build_summary(to_table(rows), None)
    assert s["host"]["saturated"] is None and s["host"]["source"] is None and s["host"]["samples"] == 0
    assert s["host"]["reason"] == "no host samples in the history"
    assert s["moves"][0]["host_saturated"] is None and s["moves"][0]["host_busy_mean_pct"] is None


def test_an_older_history_is_judged_on_cpu_samples_machine_key_without_its_first():
    v = HistoryView(to_table(history(hot_move, machine_only=True)))
    samples, source = host_samples(v)
    assert source == SOURCE_MACHINE and len(samples) == 19  # the first covers an unknown interval
    assert (samples[0].start, samples[0].end) == (T0 + 1, T0 + 2)
    assert move_host(v, 0, T0 + 10.0, 3.5)["saturated"] is True
    assert run_host(v)["samples"] == 19 and run_host(v)["saturated"] is False
    assert run_host(v)["run_processes_pct"] is None  # no host_sample nor provenance: the cores are unknown
    v = HistoryView(to_table(history(hot_move, machine_only=True) + [
        event_row("run_start", T0 - 5, {"provenance": {"machine": {"cpus": 2}}})]))
    assert run_host(v)["run_processes_pct"] == 50.0  # (broker-1 40 % + load 60 %) of one core each / 2 cores


def test_an_older_summary_gets_host_from_its_history_on_upgrade():
    table = to_table(history(hot_move))
    current = build_summary(table, None)
    assert current["schema_version"] == SCHEMA_VERSION == 6 and upgrade_summary(current) == current
    old = json.loads(json.dumps(current))
    old["schema_version"] = 3
    del old["host"]
    for k in ("host_busy_mean_pct", "host_busy_peak_pct", "host_saturated"):
        del old["moves"][0][k]
    up = upgrade_summary(old, HistoryView(table))
    assert up == current
    alone = upgrade_summary(old)  # no history: unknown, said so
    assert alone["host"]["saturated"] is None and "no history" in alone["host"]["reason"]
    assert "host_saturated" not in alone["moves"][0]


# --------------------------------------------------------------------------------------------
# The models leave saturated moves out


def _move(run, size, secs, saturated, system="replication"):
    return {"system": system, "run_key": run, "config_key": f"c{size}", "action": "reassign", "action_id": "0",
            "partitions_in_action": 1, "with_consumers": False, "move_seconds": secs, "partition_bytes": size,
            "bandwidth_bytes_per_s": 8e6, "ingest_bytes_per_s": 0.0, "unuploaded_bytes": None, "objects": None,
            "open_seconds": None, "leader_change_ts": None, "request_ts": 0.0, "copy_bytes_at_request": None,
            "host_saturated": saturated, "host_busy_mean_pct": 95.0 if saturated else 50.0}


def test_the_models_leave_a_saturated_move_out_and_say_how_many():
    from bench.analysis.aggregate.fits import fit_models, host_left_out, model_move, move_points

    moves = [_move(f"r{i}", size, 1.0 + size / 8e6, None if i == 0 else False)
             for i, size in enumerate((8e6, 16e6, 32e6, 64e6))]
    slow = _move("r9", 32e6, 60.0, True)  # timed on a saturated host: 10x the others
    assert model_move(moves[1]) and model_move(moves[0]) and not model_move(slow)  # unknown: kept
    assert [p.run_key for p in move_points(moves + [slow])] == ["r0", "r1", "r2", "r3"]
    assert host_left_out(moves + [slow]) == {"replication": {"saturated_left_out": 1, "host_unknown_kept": 1}}
    models, tables = fit_models(moves + [slow])
    (row,) = tables["model_fit"]
    assert row["n"] == 4 and "r9" not in row["runs"]
    assert (row["saturated_left_out"], row["host_unknown_kept"]) == (1, 1)
    assert row["host_note"] == "1 saturated move left out (host CPU > 90 %); 1 with the host unknown kept"
    assert models["models"]["replication"].fixed_s == pytest.approx(1.0, abs=0.05)  # the slow move did not pull it

    # every move of a system saturated: no model, and the notes say why
    models, tables = fit_models([_move("s1", 8e6, 9.0, True, "shared"), _move("s2", 16e6, 9.0, True, "shared")])
    assert tables["model_fit"] == [] and models["notes"]["shared"] == (
        "no move to fit on: 2 saturated moves left out (host CPU > 90 %)")
    # too few moves left to fit: the reason, and how many the host took away
    models, _ = fit_models([_move("t1", 8e6, 2.0, False), _move("t2", 16e6, 3.0, True)])
    assert models["notes"]["replication"].endswith("(1 saturated move left out (host CPU > 90 %))")


def test_the_report_counts_saturated_moves_per_configuration_and_over_all():
    from bench.report import tables as tb

    t = {"moves": [_move("r1", 8e6, 2.0, True), _move("r2", 8e6, 2.0, False), _move("r3", 8e6, 2.0, None),
                   _move("r4", 8e6, 2.0, False, "shared")],
         "runs": [{"run_key": "r1", "host_saturated": True}, {"run_key": "r2", "host_saturated": False},
                  {"run_key": "r3", "host_saturated": None}, {"run_key": "r4", "host_saturated": False}]}
    (line,) = tb.host_lines(t)
    assert line.startswith("Host saturated (mean CPU busy > 90 % of all cores over the window): 1 of 4 moves (25 %), "
                           "1 unknown (copy 1 of 3; shared 0 of 1); 1 of 4 runs' load windows, 1 unknown."), line
    c = {"config_key": "c", "config_label": "c", "runs": 3, "repetitions": 3, "moves": 3, "runs_host_saturated": 1,
         "moves_host_saturated": 1, "moves_host_unknown": 1, "load_host_busy_mean_pct_median": 70.0,
         "load_host_busy_mean_pct_min": 60.0, "load_host_busy_mean_pct_max": 92.0, "host_busy_mean_pct_median": 80.0,
         "host_busy_mean_pct_min": 50.0, "host_busy_mean_pct_max": 95.0, "host_busy_peak_pct_median": 99.0,
         "host_busy_peak_pct_min": 99.0, "host_busy_peak_pct_max": 99.0,
         "load_steal_pct_median": 25.0, "load_steal_pct_min": 0.0, "load_steal_pct_max": 28.0}
    assert tb.host_rows([c]) == [["c", "3", "70 (60–92)", "–", "25 (0–28)", "1", 3, "1", "33 %", "1", "80 (50–95)", "99"]]


def test_a_run_whose_hypervisor_took_the_cpu_says_so():
    from bench.cli.runs import host_text
    from bench.report import tables as tb

    s = {"host": {"saturated": True, "busy_mean_pct": 95.0, "steal_mean_pct": 27.4}, "moves": []}
    assert host_text(s, markup=False) == "yes (95 %), steal 27 %"
    s["host"]["steal_mean_pct"] = 1.0  # below the notice: not named
    assert host_text(s, markup=False) == "yes (95 %)"
    t = {"moves": [_move("r1", 8e6, 2.0, True)],
         "runs": [{"run_key": "r1", "host_saturated": True, "host_steal_pct": 27.4},
                  {"run_key": "r2", "host_saturated": False, "host_steal_pct": 0.5}]}
    (line,) = tb.host_lines(t)
    assert line.endswith("In 1 of 2 runs the hypervisor took 5 % or more of the CPU for other guests (steal, up to "
                         "27 %): those runs shared the machine; run again when it is quiet."), line
    t["runs"][0]["host_steal_pct"] = None
    assert "hypervisor" not in tb.host_lines(t)[0]
