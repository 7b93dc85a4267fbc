"""Spark aggregation on a small synthetic results directory (SYNTHETIC TEST FIXTURES from
tests/support/synthetic.py, written through HistoryWriter), checked against bench/check/.

One Spark session (the `spark` fixture of tests/harness/conftest.py: local[2], 1g, UI off, loopback,
shared with test_consumer_runs.py), always stopped.
"""
from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from bench.analysis.aggregate import TABLES, AggregateError, aggregate, discover_runs
from bench.check import check_all
from bench.check.summary import build_summary, dumps
from bench.history.names import (
    COUNTER_OBJSTORE,
    EVENT_ACTION_END,
    EVENT_ACTION_START,
    EVENT_COUNTER,
    EVENT_LEADER_CHANGE,
    EVENT_LINK_SAMPLE,
    EVENT_MOVE_PHASE,
    EVENT_RUN_START,
    SOURCE_CLIENT,
)
from bench.history.store import HistoryWriter, event_row, read_history, send_row
from bench.report.summary import write_summary
from bench.report.tables import NO_LINKS
from bench.units import fmt_num
from tests.support.synthetic import SynthRun, write_run

MiB = 2**20


def _aggregate(*args, **kwargs):
    """aggregate() and its summary.md, as `bench aggregate` writes them."""
    res = aggregate(*args, **kwargs)
    write_summary(res)
    return res


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    base = root / "synthetic-sweep" / "20300101T000000Z"
    seed = 1
    # Four sizes per system (the held-out size check fits on the three smaller, which span > 8x at
    # the request, and predicts the largest), plus a copy run at a faster throttle.
    for size in (1 * MiB, 4 * MiB, 16 * MiB, 24 * MiB):
        cfg = SynthRun(system="replication", prefill_bytes=size, throttle_bytes_per_s=4 * MiB, rate_msgs_per_s=80,
                       duration_s=1, move_at_s=5, seed=seed)
        cfg.duration_s = math.ceil(cfg.move_at_s + cfg.move_seconds + 6)
        write_run(base / f"replication-{size}", cfg)
        seed += 1
    write_run(base / "replication-6MiB-fast", SynthRun(system="replication", prefill_bytes=6 * MiB,
                                                       throttle_bytes_per_s=16 * MiB, rate_msgs_per_s=80,
                                                       duration_s=14, move_at_s=5, seed=seed))
    for size, tail in ((1 * MiB, 1 * MiB), (4 * MiB, 3 * MiB), (16 * MiB, 2 * MiB), (24 * MiB, 5 * MiB)):
        seed += 1
        write_run(base / f"shared-{size}", SynthRun(system="shared", prefill_bytes=size, rate_msgs_per_s=80,
                                                    tail_bytes=tail, duration_s=14, move_at_s=5, seed=seed))
    # Tiered: the leader names a 3 MiB local tail of a 16 MiB partition, copied at two throttles.
    for size, throttle in ((16 * MiB, 4 * MiB), (16 * MiB, 16 * MiB)):
        seed += 1
        write_run(base / f"tiered-{throttle}", SynthRun(system="tiered", prefill_bytes=size, throttle_bytes_per_s=throttle,
                                                    local_tail_bytes=3 * MiB, rate_msgs_per_s=80, duration_s=14,
                                                    move_at_s=5, seed=seed))
    return root


@pytest.fixture(scope="module")
def agg(spark, results, tmp_path_factory):
    out = tmp_path_factory.mktemp("aggregate")
    return _aggregate([results], out, spark=spark, quantiles="exact")


def test_discovers_runs_and_writes_every_table(agg, results):
    runs, warnings = discover_runs([results])
    assert len(runs) == 11 and not warnings
    assert all(r.run_key.startswith("synthetic-sweep/20300101T000000Z/") for r in runs)
    for name, cols in TABLES.items():
        t = pq.read_table(agg.out_dir / f"{name}.parquet")
        assert t.column_names == [c for c, _ in cols]
        assert (agg.out_dir / f"{name}.csv").read_text().splitlines()[0] == ",".join(c for c, _ in cols)
    assert (agg.out_dir / "summary.md").read_text().startswith("# Aggregate of reassignment runs")
    assert json.loads((agg.out_dir / "model.json").read_text())["projection"]
    assert len(agg.tables["runs"]) == 11 and all(r["synthetic"] for r in agg.tables["runs"])


def _checked(run_dir):
    return check_all(read_history(run_dir / "history.parquet"))


def test_per_run_figures_agree_with_the_checkers(agg, results):
    runs = {r["run_key"]: r for r in agg.tables["runs"]}
    for key, row in runs.items():
        run_dir = results / key
        c = _checked(run_dir)
        moves = [m for m in agg.tables["moves"] if m["run_key"] == key]
        assert len(moves) == len(c["move_seconds"]["moves"]) == 1
        assert moves[0]["move_seconds"] == pytest.approx(c["move_seconds"]["moves"][0]["move_seconds"], abs=1e-9)
        win = c["unavailable_seconds"]["actions"][0]
        assert moves[0]["unavailable_seconds"] == pytest.approx(win["unavailable_seconds"], abs=1e-9)
        assert row["run_max_unavailable_seconds"] == pytest.approx(
            c["unavailable_seconds"]["run"]["max_unavailable_seconds"], abs=1e-9)
        assert row["latency_p99_ms"] == pytest.approx(c["latency"]["run"]["p99_ms"], rel=1e-9)
        assert row["latency_count"] == c["latency"]["run"]["count"]
        assert moves[0]["bytes_moved"] == c["bytes_moved"]["actions"][0]["bytes_moved"]
        lat = {(x["scope"], x["phase"]): x for x in agg.tables["latency"] if x["level"] == "run" and x["key"] == key}
        act = c["latency"]["actions"][0]
        for scope in ("all", "partitions"):
            for phase in ("before", "during", "after"):
                want, got = act[scope][phase], lat[(scope, phase)]
                assert got["count"] == want["count"], (key, scope, phase)
                for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
                    assert got[q] == pytest.approx(want[q], rel=1e-9), (key, scope, phase, q)
                if scope == "all":
                    assert got["info_count"] == want["info_count"] and got["fail_count"] == want["fail_count"]
        assert row["valid"] == "pass" and row["lost_writes"] == "pass"
        assert (row["lost_count"], row["duplicated_count"]) == (c["lost_writes"]["lost_count"],
                                                                c["duplicates"]["duplicated_count"]) == (0, 0)


def test_models_and_held_out_check(agg):
    fit = {m["system"]: m for m in agg.tables["model_fit"]}
    # the synthetic story's physics: copy t = 0.6 + B / (0.9 x 4 MiB/s - r), shared c + tail / L
    assert fit["replication"]["efficiency"] == pytest.approx(0.9, rel=0.05)
    assert fit["shared"]["efficiency"] == pytest.approx(1.0, rel=0.05)
    val = {(v["system"], v["axis"]): v for v in agg.tables["model_validation"]}
    for system in ("replication", "shared"):
        v = val[(system, "size")]
        assert v["status"] == "ok" and v["held_out_value"] == 24 * MiB and abs(v["error_pct"]) <= 15
        assert "24MiB" not in v["train_runs"] and v["n_train"] == 3
    model = json.loads((agg.out_dir / "model.json").read_text())
    assert {h["case"] for h in model["headline"]} == {"partition", "cluster"}
    # the copy model has no throttle or ingest check here: its projections are not validated
    copy = {(h["case"], h["link_gbit_s"]): h for h in model["headline"] if h["system"] == "replication"}
    assert all(h["value_s"] is None for h in copy.values())
    # at 1 Gbit/s replication (200 MB/s) and one group's reads (100 MB/s) fill the leader's link
    assert copy[("partition", 1.0)]["status"] == "infeasible" and "300 MB/s >= its 125 MB/s" in copy[("partition", 1.0)]["reason"]
    assert copy[("partition", 10.0)]["status"] == "not validated" and "throttle" in copy[("partition", 10.0)]["reason"]
    # the shared model passed its size check, but its 8.2 TB partition is not validated (these runs
    # have no emulated links: no budget check; no open measured with many objects)
    shared = {h["link_gbit_s"]: h for h in model["headline"] if h["system"] == "shared" and h["case"] == "partition"}
    assert shared[1.0]["status"] == "infeasible"
    assert shared[10.0]["status"] == "not validated" and shared[10.0]["value_s"] is None
    assert "budget" in shared[10.0]["reason"] and "objects opened" in shared[10.0]["validity_text"]
    assert model["validity"]["shared"]["validated"]
    assert model["grid"]["points"] >= 100_000
    proj = {(p["system"], p["link_gbit_s"], p["size_label"]): p for p in agg.tables["projection"]}
    assert proj[("replication", 1.0, "8.2 TB")]["move_time"] == "infeasible"
    assert proj[("replication", 10.0, "8.2 TB")]["move_time"] == "not validated"
    assert len(agg.tables["configs"]) == 11
    tl = [x for x in agg.tables["timeline"] if x["run_key"].endswith("shared-1048576")]
    assert sum(x["sent"] for x in tl) == next(r["sends"] for r in agg.tables["runs"] if r["run_key"].endswith("shared-1048576"))


def test_tiered_moves_carry_the_bytes_their_leader_named(agg):
    """A tiered move's copy_bytes_at_request is the leader's copy_start (the local tail, not the
    partition); the tiered model is the copy physics over those bytes; the bytes table shows them."""
    moves = {m["run_key"].rsplit("/", 1)[1]: m for m in agg.tables["moves"]}
    for throttle in (4 * MiB, 16 * MiB):
        m = moves[f"tiered-{throttle}"]
        assert m["copy_bytes_at_request"] == 3 * MiB and m["partition_bytes"] > 16 * MiB
        assert m["bytes_moved_inter_broker"] == 3 * MiB and m["bytes_moved_objstore"] == 64 * 1024
    assert all(m["copy_bytes_at_request"] is None for k, m in moves.items() if not k.startswith("tiered"))
    fit = {m["system"]: m for m in agg.tables["model_fit"]}
    assert fit["tiered"]["family"] == "tiered_copy" and fit["tiered"]["efficiency"] == pytest.approx(0.9, rel=0.05)
    assert " + L / (" in fit["tiered"]["formula"] and fit["tiered"]["fixed_s"] == pytest.approx(0.6, abs=0.1)
    md = (agg.out_dir / "summary.md").read_text()
    section = md.split("## Bytes moved per configuration", 1)[1].split("\n## ", 1)[0]
    row = next(r for r in section.splitlines() if "tiered: prefill 16 MiB, throttle 4 MiB/s" in r)
    assert "| 16.8 MiB | 3 MiB |" in row


def test_no_runs_is_a_clear_error(spark, tmp_path):
    with pytest.raises(AggregateError, match="no runs found"):
        _aggregate([tmp_path], tmp_path / "out", spark=spark)


# --- faults: hand-made histories with fault / recovery pairs -----------------------------------

T0 = 1_900_000_000.0
RATE = 20  # sends per second per partition


def _fault_run(run_dir, system, stalls, events, start=None, edit=None):
    """Two partitions under a steady load for 40 s; ``stalls``: {partition: [(from_s, to_s, resume_s)]}
    = sends invoked in [from, to) are acked from ``resume`` on (in order); ``events``: (s, name, detail).
    summary.json is built by the checkers (bench/check/summary.py), as the runner writes it (then
    changed by ``edit``); ``start``: more run_start facts."""
    rows = [event_row(EVENT_RUN_START, T0, {"run_id": f"hand-{system}", "scenario": "hand-faults", "system": system,
                                            **(start or {})})]
    msg = 0
    for p in (0, 1):
        stalled = 0
        for i in range(40 * RATE):
            ts = T0 + i / RATE + 0.001 * p
            ack = ts + 0.005
            for lo, hi, resume in stalls.get(p, []):
                if T0 + lo <= ts < T0 + hi:
                    ack = T0 + resume + 0.001 * stalled
                    stalled += 1
            rows.append(send_row(msg, ts, producer="p0", topic="hot", partition=p, outcome="ok", ack_ts=ack,
                                 size_bytes=100))
            msg += 1
    for at, name, detail in events:
        rows.append(event_row(name, T0 + at, detail, topic=detail.get("topic"),
                              partition=detail.get("partition", -1)))
    run_dir.mkdir(parents=True)
    with HistoryWriter(run_dir / "history.parquet", flush_rows=50_000, flush_interval_s=None) as w:
        w.extend(rows)
    summary = build_summary(read_history(run_dir / "history.parquet"), None)
    (run_dir / "summary.json").write_text(dumps(edit(summary) if edit else summary))
    return summary


def _act(aid, kind, broker=None, partitions=None):
    d = {"action_id": aid, "action": kind, **({"broker": broker} if broker is not None else {})}
    return d if partitions is None else {**d, "partitions": [{"topic": "hot", "partition": p} for p in partitions]}


@pytest.fixture(scope="module")
def fault_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    # Copy-like: the killed leader's partition waits for the restart (done at 25 s); then the
    # controller is killed naming no partitions (every partition with a send is affected).
    copy = _fault_run(root / "copy", "replication", {0: [(10, 25.3, 25.3)], 1: [(30, 34.2, 34.2)]}, [
        (10, EVENT_ACTION_START, _act(0, "kill_broker", 1, [0])), (10.01, EVENT_ACTION_END, _act(0, "kill_broker", 1)),
        (24, EVENT_ACTION_START, _act(1, "restart_broker", 1)), (25, EVENT_ACTION_END, _act(1, "restart_broker", 1)),
        (30, EVENT_ACTION_START, _act(2, "kill_controller")), (30.01, EVENT_ACTION_END, _act(2, "kill_controller")),
        (33, EVENT_ACTION_START, _act(3, "restart_controller")), (34, EVENT_ACTION_END, _act(3, "restart_controller")),
    ])
    # Shared-like: a client sees the failover at 13 s, long before the restart; the controller's
    # own journal saw it earlier, which is not what producers see.
    shared = _fault_run(root / "shared", "shared", {0: [(10, 13.4, 13.4)]}, [
        (10, EVENT_ACTION_START, _act(0, "kill_broker", 1, [0])), (10.01, EVENT_ACTION_END, _act(0, "kill_broker", 1)),
        (12, EVENT_LEADER_CHANGE, {"topic": "hot", "partition": 0, "leader": 2, "source": "controller"}),
        (13, EVENT_LEADER_CHANGE, {"topic": "hot", "partition": 0, "leader": 2, "source": SOURCE_CLIENT}),
        (24, EVENT_ACTION_START, _act(1, "restart_broker", 1)), (25, EVENT_ACTION_END, _act(1, "restart_broker", 1)),
    ])
    return root, {"copy": copy, "shared": shared}


def test_fault_outages_equal_the_summary(spark, fault_results, tmp_path):
    root, summaries = fault_results
    agg = _aggregate([root], tmp_path / "agg", spark=spark, quantiles="exact")
    got = {(o["run_key"], o["action_id"]): o for o in agg.tables["outages"]}
    assert len(got) == 3
    for key, s in summaries.items():
        assert s["outages"], key
        for want in s["outages"]:
            o = got[(key, str(want["action_id"]))]
            assert o["action"] == want["kind"] and o["broker"] == want["broker"] and o["run_id"] == s["run_id"]
            assert o["partitions"] == ",".join(want["partitions"]) and o["worst_partition"] == want["worst_partition"]
            assert o["recovered_by"] == want["recovered_by"] and o["new_leader"] == want.get("new_leader")
            for f in ("unavailable_seconds", "recovery_seconds", "first_ack_seconds"):
                assert o[f] == pytest.approx(want[f], abs=1e-9), (key, want["action_id"], f)
            assert o["summary_unavailable_seconds"] == o["unavailable_seconds"]
    # The copy system's outage runs until the restart, not 5 s after the kill ...
    kill = got[("copy", "0")]
    assert kill["recovered_by"] == "restart_broker" and kill["recovery_seconds"] == pytest.approx(15.0)
    assert kill["unavailable_seconds"] == pytest.approx(25.3 - (10 - 1 / RATE + 0.005), abs=1e-6)
    # ... the controller's covers both partitions, named by none of its events ...
    ctl = got[("copy", "2")]
    assert ctl["partitions"] == "hot-0,hot-1" and ctl["worst_partition"] == "hot-1"
    assert ctl["unavailable_seconds"] == pytest.approx(34.2 - (30 - 1 / RATE + 0.006), abs=1e-6)
    # ... and the shared system's until the failover a client saw.
    fo = got[("shared", "0")]
    assert fo["recovered_by"] == EVENT_LEADER_CHANGE and fo["new_leader"] == 2
    assert fo["recovery_seconds"] == pytest.approx(3.0)
    assert fo["unavailable_seconds"] == pytest.approx(13.4 - (10 - 1 / RATE + 0.005), abs=1e-6)
    runs = {r["run_key"]: r for r in agg.tables["runs"]}
    assert runs["copy"]["max_unavailable_seconds"] == pytest.approx(kill["unavailable_seconds"])
    # Per configuration: the faults' outages with their spread, the producers' worst gap.
    cfg = {c["config_label"].split(":")[0]: c for c in agg.tables["configs"]}
    copy_cfg = cfg["hand-faults replication"]
    assert copy_cfg["faults"] == 2 and copy_cfg["moves"] == 0
    assert (copy_cfg["outage_seconds_min"], copy_cfg["outage_seconds_max"]) == (
        pytest.approx(ctl["unavailable_seconds"]), pytest.approx(kill["unavailable_seconds"]))
    assert copy_cfg["producer_unavailable_seconds_max"] == pytest.approx(runs["copy"]["run_max_unavailable_seconds"])
    assert copy_cfg["during_p99_ms"] > 1000  # from the kill to the restart: the stalled acks
    md = (agg.out_dir / "summary.md").read_text()
    row = next(r for r in md.split("## Results per configuration", 1)[1].splitlines()
               if r.startswith("| hand-faults replication"))
    # outages 15.3 (kill, until the restart) and 4.24 (controller); recovered after 15 and 4 s
    assert "| 9.79 (4.24–15.3) | 9.5 (4–15) | 15.3 |" in row and row.endswith("| – | – | 0 pass, 0 fail, 1 unknown |")
    assert "## Fault outages" in md and "| copy | replication | kill_broker | 1 | hot-0 | 15.3 | restart broker | 15 |" in md
    assert f"| shared | shared | kill_broker | 1 | hot-0 | {fmt_num(fo['unavailable_seconds'])} | failover to 2 | 3 |" in md


# --- repetitions, provenance, move phases, bytes moved split -----------------------------------

PROVENANCE = {"date": "2030-01-01T00:00:00Z", "git": {"commit": "abc123def4567890", "dirty": True},
              "machine": {"cpus": 2, "mem_gib": 23.5, "kernel": "6.18.44", "platform": "Linux", "python": "3.11.7"},
              "versions": {"reassign-bench": "0.1.0", "seaweedfs": "3.80"}, "links_emulated": True}
CONFIGURATION = {"system": "shared", "label": "shared", "replication_factor": 1, "min_insync_replicas": None,
                 "acks": "all", "ack_meaning": "after the WAL object's PUT", "throttle_bytes_per_s": None,
                 "throttle_rule": None, "link_rate": "100mbit", "client_link_rate": "1gbit",
                 "object_store_link_rate": "1gbit", "wal_batch_interval_ms": 200, "wal_upload_threshold_bytes": 2**29}


def _without_split(summary):
    """A summary from before the bytes split (version 1: no schema_version): the aggregate
    recomputes it from the raw rows."""
    summary = json.loads(json.dumps(summary))
    del summary["schema_version"]
    for m in summary["moves"]:
        for k in ("bytes_written_during_move", "bytes_moved_at_request", "bytes_moved_during_move"):
            del m[k]
    return summary


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """One shared configuration run three times: partition 0 moves at 10 s, its new owner leads
    0.6 / 0.8 / 1.0 s later; sends from 10.2 s on wait for it. Start-up opens carry no action id."""
    root = tmp_path_factory.mktemp("reps")
    summaries = []
    for rep, d in enumerate((0.6, 0.8, 1.0), start=1):
        move = {"action_id": 0, "action": "reassign", "partitions": [{"topic": "hot", "partition": 0, "from": [1],
                                                                       "to": [2]}]}
        events = [(1, EVENT_MOVE_PHASE, {"phase": "open.open", "seconds": 0.01, "bytes": 0}),
                  (10, EVENT_ACTION_START, move),
                  (10 + d / 2, EVENT_MOVE_PHASE, {"action_id": 0, "phase": "close.wal_wait", "seconds": d / 2}),
                  (10 + d / 2, EVENT_COUNTER, {"action_id": 0, "name": COUNTER_OBJSTORE, "value": 5000, "broker": 1,
                                               "topic": "hot", "partition": 0}),
                  (10 + d, EVENT_MOVE_PHASE, {"action_id": 0, "phase": "close.force_upload", "seconds": d / 2}),
                  (10 + d, EVENT_MOVE_PHASE, {"action_id": 0, "phase": "request_to_elect", "seconds": d}),
                  (10 + d, EVENT_LEADER_CHANGE, {"topic": "hot", "partition": 0, "leader": 2, "action_id": 0}),
                  (10 + d + 0.01, EVENT_MOVE_PHASE, {"action_id": 0, "phase": "open.replay", "seconds": 0.01}),
                  (11.5, EVENT_ACTION_END, {"action_id": 0, "action": "reassign"}),
                  (39, EVENT_MOVE_PHASE, {"phase": "close.wal_wait", "seconds": 0.02, "bytes": 0})]
        start = {"run_id": f"hand-rep__rep={rep}", "scenario": "hand-rep", "config_id": "hand-rep",
                 "repetition": rep, "repetitions": 3, "provenance": PROVENANCE, "configuration": CONFIGURATION}
        summaries.append(_fault_run(root / f"rep{rep}", "shared", {0: [(10.2, 10 + d, 10 + d + 0.01)]}, events,
                                    start=start, edit=_without_split if rep == 3 else None))
    return root, summaries


def test_repetitions_provenance_phases_and_bytes_split(spark, repeated, tmp_path):
    root, summaries = repeated
    agg = _aggregate([root], tmp_path / "agg", spark=spark, quantiles="exact")
    (cfg,) = agg.tables["configs"]  # the runs of one config_id are one configuration
    secs = sorted(s["moves"][0]["move_seconds"] for s in summaries)
    assert cfg["config_key"] == "hand-rep" and cfg["runs"] == cfg["repetitions"] == 3
    assert (cfg["move_seconds_min"], cfg["move_seconds_median"], cfg["move_seconds_max"]) == tuple(
        pytest.approx(x) for x in secs)
    assert secs[0] == pytest.approx(0.61, abs=0.01) and secs[2] == pytest.approx(1.01, abs=0.01)
    runs = sorted(agg.tables["runs"], key=lambda r: r["repetition"])
    assert [r["repetition"] for r in runs] == [1, 2, 3] and all(r["repetitions"] == 3 for r in runs)
    r = runs[0]
    assert (r["date"], r["git_commit"], r["git_dirty"], r["links_emulated"]) == (
        "2030-01-01T00:00:00Z", "abc123def4567890", True, True)
    assert r["machine"] == "2 cores, 23.5 GiB, kernel 6.18.44, Python 3.11.7"
    # Phases of the move action only; the span from the request is marked, never a part.
    ph = agg.tables["phases"]
    assert {p["action_id"] for p in ph} == {"0"} and len(ph) == 3 * 4
    assert {p["phase"] for p in ph if p["span"]} == {"request_to_elect"}
    # Written during the move: acked on the partition from the request to the leader change; the
    # summary's figure, and for a summary without it the same from the raw rows.
    moves = sorted(agg.tables["moves"], key=lambda m: m["run_key"])
    for m, s in zip(moves, summaries):
        want = s["moves"][0]
        assert m["bytes_written_during_move"] == want["bytes_written_during_move"] > 0, m["run_key"]
        assert m["bytes_moved"] == 5000
        assert m["bytes_moved_during_move"] == min(5000, want["bytes_written_during_move"])
        assert m["bytes_moved_at_request"] + m["bytes_moved_during_move"] == m["bytes_moved"]
    md = (agg.out_dir / "summary.md").read_text()
    assert "- Git commit: abc123def456 (dirty)." in md and "- Links emulated (per-node NICs in network namespaces): yes." in md
    assert "| shared | hand-rep (1 configuration) | 3 | 1 | n/a | acks=all | after the WAL object's PUT | none | " \
           "100mbit / 1gbit / 1gbit | wal batch interval 200 ms, wal upload threshold 512 MiB |" in md
    row = next(x for x in md.split("## Results per configuration", 1)[1].splitlines() if x.startswith("| hand-rep"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["3", f"{fmt_num(secs[1])} ({fmt_num(secs[0])}–{fmt_num(secs[2])})"]
    # No reads in these histories: the safety checks are unknown, neither passed nor counted as 0.
    assert cells[-3:] == ["–", "–", "0 pass, 0 fail, 3 unknown"]
    assert "| rep1 | shared | 1 of 3 |" in md


# --- links: link_sample events, per-move link fill --------------------------------------------

RATE_BITS = 80_000_000  # 10 MB/s


def _sample(k):
    """The link_sample at T0 + k s: broker-1 sends k MB/s; broker-2 3 MB/s until 14 s, then 9 MB/s."""
    return {"broker-1": {"tx_bytes_per_s": k * 1e6, "rx_bytes_per_s": 1000.0, "rate_bits": RATE_BITS},
            "broker-2": {"tx_bytes_per_s": 3e6 if k <= 14 else 9e6, "rx_bytes_per_s": 0.0, "rate_bits": RATE_BITS},
            "broker-3": {"tx_bytes_per_s": 500.0, "rx_bytes_per_s": 2e6, "rate_bits": RATE_BITS},
            "controller": {"tx_bytes_per_s": 10.0, "rx_bytes_per_s": 10.0, "rate_bits": RATE_BITS},
            "objstore": {"tx_bytes_per_s": 0.0, "rx_bytes_per_s": 5e6, "rate_bits": 2 * RATE_BITS}}


@pytest.fixture(scope="module")
def link_results(tmp_path_factory):
    """One run on links: hot-0 moves 1 -> 3 at 5 s (its new leader seen at 8.2 s: move_seconds
    3.205); hot-1 is asked to move 2 -> 1 at 12 s and never does (action end 14.5 s)."""
    root = tmp_path_factory.mktemp("links")
    summary = _fault_run(root / "links", "shared", {}, [
        (5, EVENT_ACTION_START, {**_act(0, "reassign"), "partitions": [
            {"topic": "hot", "partition": 0, "from": [1], "to": [3]}]}),
        (8.2, EVENT_LEADER_CHANGE, {"topic": "hot", "partition": 0, "leader": 3, "source": SOURCE_CLIENT,
                                    "action_id": 0}),
        (8.3, EVENT_ACTION_END, _act(0, "reassign")),
        (12, EVENT_ACTION_START, {**_act(1, "reassign"), "partitions": [
            {"topic": "hot", "partition": 1, "from": [2], "to": [1]}]}),
        (14.5, EVENT_ACTION_END, {**_act(1, "reassign"), "ok": False}),
        *[(k, EVENT_LINK_SAMPLE, _sample(k)) for k in range(1, 20)],
    ])
    return root, summary


def test_move_link_fill_weighs_the_samples_overlapping_the_move(link_results):
    _, s = link_results
    m0, m1 = s["moves"]
    assert m0["move_seconds"] == pytest.approx(3.205, abs=1e-6)
    fill = m0["links"]
    # Window [5, 8.205]: samples 6, 7, 8 whole and 0.205 s of sample 9 (sample 5 covers [4, 5]).
    assert fill["samples"] == 4 and fill["to_ts"] - fill["from_ts"] == pytest.approx(3.205, abs=1e-6)
    assert {n: x["role"] for n, x in fill["nodes"].items()} == {"broker-1": "source", "broker-3": "target",
                                                                "objstore": "objstore"}
    src = fill["nodes"]["broker-1"]["tx"]
    mean = (6 + 7 + 8 + 9 * 0.205) / 3.205 * 1e6
    assert src["mean_bytes_per_s"] == pytest.approx(mean, abs=0.1)
    assert src["mean_utilisation"] == pytest.approx(mean * 8 / RATE_BITS, abs=1e-4)
    assert src["peak_bytes_per_s"] == 9e6 and src["peak_utilisation"] == pytest.approx(0.9)
    assert fill["nodes"]["broker-3"]["rx"]["mean_utilisation"] == pytest.approx(0.2)
    assert fill["nodes"]["objstore"]["rx"]["mean_utilisation"] == pytest.approx(0.25)  # on its own, faster link
    # No move_seconds (never moved): until the action's end, [12, 14.5] = samples 13, 14 and half of 15.
    assert m1["move_seconds"] is None and m1["links"]["samples"] == 3
    assert m1["links"]["to_ts"] - m1["links"]["from_ts"] == pytest.approx(2.5, abs=1e-6)
    assert m1["links"]["nodes"]["broker-2"]["role"] == "source" and m1["links"]["nodes"]["broker-1"]["role"] == "target"
    assert m1["links"]["nodes"]["broker-2"]["tx"]["mean_bytes_per_s"] == pytest.approx((3 + 3 + 9 * 0.5) / 2.5 * 1e6,
                                                                                       abs=0.1)
    # The run-wide block: every sample equally.
    assert s["links"]["broker-1"]["tx"]["mean_bytes_per_s"] == pytest.approx(10e6)


def test_link_tables_agree_with_the_summary(spark, link_results, tmp_path):
    root, s = link_results
    agg = _aggregate([root], tmp_path / "agg", spark=spark, quantiles="exact")
    links = agg.tables["links"]
    assert len(links) == 19 * 5
    load_start = next(r["load_start"] for r in agg.tables["runs"])
    b1 = sorted((x for x in links if x["node"] == "broker-1"), key=lambda x: x["ts"])
    assert [x["tx_bytes_per_s"] for x in b1] == [k * 1e6 for k in range(1, 20)]
    assert all(x["t_rel_s"] == pytest.approx(x["ts"] - load_start) for x in links)
    assert b1[0]["t_rel_s"] == pytest.approx(1.0) and b1[0]["rate_bits"] == RATE_BITS
    rows = {(x["action_id"], x["node"]): x for x in agg.tables["move_links"]}
    assert set(rows) == {("0", "broker-1"), ("0", "broker-3"), ("0", "objstore"),
                         ("1", "broker-2"), ("1", "broker-1"), ("1", "objstore")}
    for m in s["moves"]:
        for node, want in m["links"]["nodes"].items():
            got = rows[(str(m["action_id"]), node)]
            assert got["role"] == want["role"] and got["samples"] == m["links"]["samples"]
            assert got["from_ts"] == pytest.approx(m["links"]["from_ts"]) and got["to_ts"] == pytest.approx(m["links"]["to_ts"])
            for way in ("tx", "rx"):
                for k, x in want[way].items():
                    assert got[f"{way}_{k}"] == pytest.approx(x), (m["action_id"], node, way, k)
    md = (agg.out_dir / "summary.md").read_text()
    section = md.split("## Link fill during moves", 1)[1].split("\n## ", 1)[0]
    assert "| shared | links | 10 kB | 3.21 | broker-1 71% (90%) | broker-3 20% (20%) | 25% (25%), 0% (0%) |" in section
    assert "| shared | links | 24 kB | – | broker-2 42% (90%) | broker-1 0% (0%) | 25% (25%), 0% (0%) |" in section


def test_runs_without_links_have_no_link_rows(agg):
    assert agg.tables["links"] == [] and agg.tables["move_links"] == []
    assert NO_LINKS in (agg.out_dir / "summary.md").read_text()


def test_move_bandwidth_is_the_lowest_cap_including_links(tmp_path):
    """A run's bandwidth cap (the models' x = bytes / cap) is its throttle or object-store cap,
    or the emulated links a move crosses, whichever is lowest; none on loopback."""
    from bench.analysis.aggregate import StoredRun

    def run(system, **params):
        return StoredRun(0, "r", tmp_path, {"system": system, "params": params}, [])

    assert run("replication").bandwidth is None
    assert run("replication", link_rate="100mbit").bandwidth == 12_500_000
    assert run("replication", link_rate="100mbit", replication_throttle_bytes_per_s=4_000_000).bandwidth == 4_000_000
    assert run("shared", link_rate="1gbit", object_store_link_rate="40mbit").bandwidth == 5_000_000
    assert run("shared", objstore_bandwidth_bytes_per_s=8_000_000).bandwidth == 8_000_000


def test_the_tail_a_move_carried_is_in_the_phases_its_journal_names():
    """The shared system's journal names the close's forced upload as the tail's phase
    (JournalMeaning.tail_phases); a system without such phases reports none."""
    from bench.analysis.aggregate.rows import tail_from_phases

    ph = {"close.force_upload": {"seconds": 0.1, "bytes": 3000.0}, "close.wal_wait": {"seconds": 0.2, "bytes": 0.0},
          "open.replay": {"seconds": 0.1, "bytes": 500.0}}
    assert tail_from_phases("shared", ph) == 3000.0
    assert tail_from_phases("shared", {"close.force_upload": {"seconds": 0.1, "bytes": 0.0}}) is None
    assert tail_from_phases("replication", ph) is None
