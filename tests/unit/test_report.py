"""bench/report/ on hand-made aggregate tables (no Spark)."""
from __future__ import annotations

import base64
import json
import re

import pytest

from bench.analysis.aggregate import TABLES, fit_models, write_table
from bench.report import ReportError, build_report
from bench.report.tables import NO_LINKS

MiB = 2**20


def _tables():
    runs, moves, timeline, phases, progress = [], [], [], [], []
    for i, (system, size) in enumerate([("replication", 4 * MiB), ("replication", 16 * MiB), ("replication", 64 * MiB),
                                        ("shared", 4 * MiB), ("shared", 64 * MiB),
                                        ("unknown", 8 * MiB)]):  # stored results of a system no profile has
        key = f"hand/t/{system}-{size}"
        secs = 0.5 + size / (0.9 * 4 * MiB) if system == "replication" else 0.7
        runs.append({"run_key": key, "system": system, "config_key": key, "synthetic": True, "valid": "pass",
                     "lost_writes": "pass", "duplicates": "pass", "reordering": "pass", "unexpected": "pass",
                     "timeline_t0": 100.0, "timeline_bin_s": 0.5, "load_start": 90.0})
        moves.append({"run_key": key, "system": system, "config_key": key, "action_id": "0", "action": "reassign",
                      "topic": "hot", "partition": 0, "request_ts": 100.0, "first_ack_ts": 100.0 + secs,
                      "move_seconds": secs, "unavailable_seconds": 0.4, "partition_bytes": size,
                      "bytes_moved_inter_broker": size if system == "replication" else 0,
                      "bytes_moved_objstore": 0 if system == "replication" else 2 * MiB,
                      "bytes_moved": size if system == "replication" else 2 * MiB,
                      "unuploaded_bytes": 2 * MiB if system == "shared" else None,
                      "replication_throttle_bytes_per_s": 4 * MiB if system == "replication" else None,
                      "objstore_bandwidth_bytes_per_s": 16 * MiB if system == "shared" else None,
                      "bandwidth_bytes_per_s": {"replication": 4 * MiB, "shared": 16 * MiB}.get(system)})
        if system == "replication":  # move_progress samples every 0.5 s, the ETA 10 % long
            moves[-1]["end_ts"] = 100.0 + secs
            progress += [{"run_key": key, "system": system, "config_key": key, "action_id": "0", "topic": "hot",
                          "partition": 0, "t_rel_s": t, "to_move_bytes": size, "done_bytes": size * t / secs,
                          "remaining_bytes": size * (1 - t / secs), "rate_bytes_per_s": size / secs,
                          "eta_s": 1.1 * (secs - t)} for t in [0.5 * k for k in range(1, int(secs / 0.5))]]
        for b in range(-10, 40):
            timeline.append({"run_key": key, "system": system, "bin": b, "t_rel_s": b * 0.5, "bin_s": 0.5, "sent": 50,
                             "acked": 50, "fail": 0, "info": 0, "acks_per_s": 100.0, "p50_ms": 3.0, "p99_ms": 9.0})
        if system == "shared":  # two parts and the span from the request that holds them
            phases += [{"run_key": key, "system": system, "action_id": "0", "phase": ph, "span": span,
                        "seconds": secs, "bytes": b}
                       for ph, span, secs, b in (("close.flush", False, 0.2, 2 * MiB), ("request_to_elect", True, 0.5, 0),
                                                 ("open.open", False, 0.4, 0))]
    configs = [_config("hand", "hand", "replication", runs=3, repetitions=3, moves=3,
                       move_seconds=(1160.4, 1100.0, 1200.0), unavailable_seconds=(0.4, 0.4, 0.4),
                       partition_bytes=(39_636_172, 39_636_172, 39_636_172),
                       bytes_moved=(48_968_499, 46 * MiB, 50 * MiB),
                       bytes_moved_at_request=(41_943_040, 41_943_040, 41_943_040),
                       bytes_moved_during_move=(7_025_459, 4 * MiB, 8 * MiB),
                       before_p99_ms=9.0, during_p99_ms=12345.0, lost_count=0, duplicated_count=0,
                       valid_pass=2, valid_unknown=1, configuration=COPY_CONFIGURATION)]
    # broker-loss: the copy system's outage lasts until the restart (two runs), the shared one's
    # until the failover a client saw.
    outages = []
    for key, system, secs, by, rec, leader in [
            ("hand/bl/replication-a", "replication", 15.2, "restart_broker", 15.0, None),
            ("hand/bl/replication-b", "replication", 14.8, "restart_broker", 14.9, None),
            ("hand/bl/shared", "shared", 4.3, "leader_change", 3.1, 2)]:
        runs.append({"run_key": key, "system": system, "config_key": f"broker-loss {system}", "synthetic": True,
                     "valid": "pass"})
        outages.append({"run_key": key, "run_id": key, "scenario": "broker-loss", "system": system,
                        "config_key": f"broker-loss {system}", "action_id": "0", "action": "kill_broker", "broker": 1,
                        "start_ts": 100.0, "partitions": "hot-0", "unavailable_seconds": secs,
                        "worst_partition": "hot-0", "recovered_by": by, "new_leader": leader,
                        "recovery_seconds": rec, "first_ack_seconds": secs - 1})
    configs += [_config(f"broker-loss {system}", "broker-loss", system, runs=n, faults=n, outage_seconds=o,
                        recovery_seconds=rec, producer_unavailable_seconds=o, lost_count=0, duplicated_count=0,
                        valid_pass=n)
                for system, n, o, rec in (("replication", 2, (15.0, 14.8, 15.2), (14.95, 14.9, 15.0)),
                                          ("shared", 1, (4.3, 4.3, 4.3), (3.1, 3.1, 3.1)))]
    links, move_links = _links(moves)
    t = {"runs": runs, "moves": moves, "timeline": timeline, "phases": phases, "move_progress": progress,
         "latency": [], "errors": [],
         "configs": configs, "outages": outages, "links": links, "move_links": move_links}
    _, model_tables = fit_models(moves)
    t.update(model_tables, projection=_projection(), rebalance=_rebalance())
    return t


def _projection():
    """Validated copy rows (one never finishes) and a shared system that is not validated."""
    rows = []
    for gbit in (1.0, 10.0):
        for label, size in (("1 GB", 1e9), ("8.2 TB", 8.2e12)):
            never = gbit == 1.0 and size > 1e12
            rows.append({"system": "replication", "link_gbit_s": gbit, "size_label": label, "partition_bytes": size,
                         "move_seconds": None if never else 0.5 + size / (gbit * 1.06e8 - 1e8 if gbit > 1 else 6e6),
                         "never": never, "validated": True, "error_pct": 4.0, "reason": None, "basis": "copy basis",
                         "based_on_runs": "hand/t/replication-4194304"})
            rows.append({"system": "shared", "link_gbit_s": gbit, "size_label": label, "partition_bytes": size,
                         "move_seconds": None, "never": False, "validated": False, "error_pct": None,
                         "reason": "no passing held-out size check", "basis": "shared basis", "based_on_runs": ""})
    return rows


def _rebalance():
    return [{"system": "replication", "brokers": b, "add": b // 10, "total_bytes": 1e15, "link_gbit_s": g,
             "concurrency": 5, "rebalance_seconds": 3600.0 * 100 / b / g, "validated": True, "headline": False}
            for b in (10, 100, 500) for g in (1.0, 10.0)]


COPY_CONFIGURATION = {"system": "replication", "label": "copy", "replication_factor": 3, "min_insync_replicas": 2,
                      "acks": "all", "ack_meaning": "when the in-sync replicas have it in their page cache",
                      "throttle_bytes_per_s": 4 * MiB, "throttle_rule": "a third of the link per move",
                      "link_rate": "100mbit", "client_link_rate": "1gbit", "object_store_link_rate": None,
                      "wal_batch_interval_ms": None, "wal_upload_threshold_bytes": None}


def _config(key, scenario, system, runs, configuration=None, **figures):
    """A configs-table row: figures given as (median, min, max) spread, others as they are."""
    row = {"config_key": key, "config_label": key, "scenario": scenario, "system": system, "runs": runs,
           "moves": 0, "faults": 0, "configuration": json.dumps(configuration) if configuration else None,
           "valid_pass": 0, "valid_fail": 0, "valid_unknown": 0}
    for name, v in figures.items():
        if isinstance(v, tuple):
            row.update({f"{name}_median": v[0], f"{name}_min": v[1], f"{name}_max": v[2]})
        else:
            row[name] = v
    return row


LINK_RUNS = ("replication-4194304", "replication-67108864", "shared-67108864")  # run on links
RATE_BITS = 100_000_000


def _links(moves):
    """Link samples (40 s from the load start, 10 s before the move) and the move's link fill for
    the runs on links: broker-1 is the source, broker-3 the target (broker-2 a second target that
    received less); the shared run has an object store."""
    links, move_links = [], []
    for m in moves:
        if not m["run_key"].endswith(LINK_RUNS):
            continue
        nodes = ["controller", "broker-1", "broker-2", "broker-3"] + (["objstore"] if m["system"] == "shared" else [])
        for k in range(1, 41):
            moving = 10 < k <= 10 + m["move_seconds"]
            for n in nodes:
                busy = moving and n in ("broker-1", "broker-3")
                links.append({"run_key": m["run_key"], "system": m["system"], "ts": 90.0 + k, "t_rel_s": float(k),
                              "node": n, "tx_bytes_per_s": 11e6 if busy and n == "broker-1" else 1e5,
                              "rx_bytes_per_s": 11e6 if busy and n == "broker-3" else 6e5, "rate_bits": RATE_BITS})
        fill = {"broker-1": ("source", 0.5, 0.8, 0.01, 0.02), "broker-2": ("target", 0.01, 0.02, 0.3, 0.4),
                "broker-3": ("target", 0.01, 0.02, 0.6, 0.7), "objstore": ("objstore", 0.05, 0.06, 0.35, 0.45)}
        for n, (role, tx, txp, rx, rxp) in fill.items():
            if n in nodes:
                move_links.append({**{k: m[k] for k in ("run_key", "system", "config_key", "action_id", "topic",
                                                        "partition", "partition_bytes", "move_seconds")},
                                   "from_ts": m["request_ts"], "to_ts": m["request_ts"] + m["move_seconds"],
                                   "samples": 3, "node": n, "role": role, "tx_mean_utilisation": tx,
                                   "tx_peak_utilisation": txp, "rx_mean_utilisation": rx, "rx_peak_utilisation": rxp})
    return links, move_links


def _png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _report(tmp_path, tables):
    agg = tmp_path / "agg"
    agg.mkdir()
    for name in TABLES:
        write_table(name, tables.get(name, []), agg)
    return build_report(agg, tmp_path / "rep")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of the hand-made tables as they are, built once for the tests that only read
    it (a build renders ~10 figures: ~3 s)."""
    return _report(tmp_path_factory.mktemp("report"), _tables())


def test_report_is_self_contained_and_names_its_runs(report):
    out = report
    html = out["html"].read_text()
    md = out["markdown"].read_text()
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(imgs) == 9 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in imgs)
    assert "src='figures" not in html and "SYNTHETIC" in html
    for name in ("move_time_vs_bytes", "bytes_moved", "produce_timeline", "links", "unavailable_seconds",
                 "move_phases", "move_progress", "projection", "rebalance"):
        assert (out["figures"] / f"{name}.png").stat().st_size > 5000
        assert f"figures/{name}.png" in md
    captions = re.findall(r"^\*(.+)\*$", md, re.M)
    assert len(captions) == 9 and all("run(s)" in c or "validated" in c for c in captions)
    assert "Held-out" in md and "Safety verdicts" in md
    # Labels come from the profiles; a system without one keeps its name.
    assert "**replication copy (Kafka)**: 3 measured move(s) in 3 run(s)" in md
    assert "**shared storage (AutoMQ-style)**: 2 measured move(s)" in md and "**unknown**: 1 measured move(s)" in md
    # Medians with their spread (never 1.16e+03); an unknown verdict is counted as unknown.
    assert ("| hand | 3 | 1160 (1100–1200) | 0.4 | – | – | – | 9 | 12345 | 0 | 0 | 2 pass, 0 fail, 1 unknown |"
            in md)
    assert "| hand | 3 | 37.8 MiB | – | 46.7 MiB (46 MiB–50 MiB) | 40 MiB | 6.7 MiB (4 MiB–8 MiB) |" in md
    text = re.sub(r"base64,[A-Za-z0-9+/=]+", "", html)
    assert not re.search(r"\de[+-]\d", md) and not re.search(r"\de[+-]\d", text)


def test_fault_outages_until_recovery(report):
    out = report
    md, html = out["markdown"].read_text(), out["html"].read_text()
    section = md.split("## Fault outages", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| broker-loss")]
    assert rows == [("| broker-loss | replication copy (Kafka) | kill_broker | 1 | 15 (14.8–15.2) | restart broker "
                     "| 14.9 (14.9–15) | 2 |"),
                    "| broker-loss | shared storage (AutoMQ-style) | kill_broker | 1 | 4.3 | failover to 2 | 3.1 | 1 |"]
    assert "3 run(s): `hand/bl/` + `replication-a`, `replication-b`, `shared`" in section
    assert "<h2>Fault outages</h2>" in html and "<td class=''>failover to 2</td>" in html
    # The unavailability figure draws the fault outages too (whole, not cut 5 s after the fault).
    cap = next(c for c in re.findall(r"^\*(.+)\*$", md, re.M) if "first ack after recovery" in c)
    assert all(f"`bl/{k}`" in cap for k in ("replication-a", "replication-b", "shared"))


def test_nic_over_time_and_link_fill(report):
    out = report
    md, html = out["markdown"].read_text(), out["html"].read_text()
    # One run per system on links, the one with its largest move: 64 MiB, never the 4 MiB copy.
    section = md.split("## NIC over time", 1)[1].split("\n## ", 1)[0]
    cap = re.search(r"^\*(.+)\*$", section, re.M).group(1)
    assert "2 run(s): `hand/t/` + `replication-67108864`, `shared-67108864`" in cap and "4194304" not in cap
    # Two columns (systems) of four rows (brokers 1-3 and the object store; not the controller).
    w, h = _png_size((out["figures"] / "links.png").read_bytes())
    assert w > 1200 and h > 700
    assert "<h2>NIC over time</h2>" in html
    rows = [r for r in md.split("## Link fill during moves", 1)[1].split("\n## ", 1)[0].splitlines()
            if r.startswith("| ") and "hand/" in r]
    assert rows == [  # registry order; the busier of two targets; the copy system has no object store
        ("| replication copy (Kafka) | hand/t/replication-4194304 | 4 MiB | 1.61 | broker-1 50% (80%) "
         "| broker-3 60% (70%) | – |"),
        ("| replication copy (Kafka) | hand/t/replication-67108864 | 64 MiB | 18.3 | broker-1 50% (80%) "
         "| broker-3 60% (70%) | – |"),
        ("| shared storage (AutoMQ-style) | hand/t/shared-67108864 | 64 MiB | 0.7 | broker-1 50% (80%) "
         "| broker-3 60% (70%) | 35% (45%), 5% (6%) |")]
    assert "<h2>Link fill during moves</h2>" in html and "<td class=''>35% (45%), 5% (6%)</td>" in html


def test_no_runs_on_links_says_so(tmp_path):
    t = {**_tables(), "links": [], "move_links": []}
    out = _report(tmp_path, t)
    md, html = out["markdown"].read_text(), out["html"].read_text()
    nic = md.split("## NIC over time", 1)[1].split("\n## ", 1)[0]
    fill = md.split("## Link fill during moves", 1)[1].split("\n## ", 1)[0]
    assert [x for x in nic.splitlines() if x.startswith("*")] == [f"*{NO_LINKS}*"]
    assert [x for x in fill.splitlines() if x.strip()] == [NO_LINKS]
    assert _png_size((out["figures"] / "links.png").read_bytes())[1] < 300  # one line, not an empty grid
    assert html.count(NO_LINKS) == 2


def test_every_scenario_has_its_figures(report):
    md = report["markdown"].read_text()
    section = md.split("## Results per configuration", 1)[1].split("\n## ", 1)[0]
    rows = {r.split("|")[1].strip(): r for r in section.splitlines() if r.startswith("| ") and "|---" not in r}
    # broker-loss: no move, its outage, recovery and the producers' worst gap, with their spread
    assert rows["broker-loss replication"] == ("| broker-loss replication | 2 | – | – | 15 (14.8–15.2) | 14.9 (14.9–15) "
                                               "| 15 (14.8–15.2) | – | – | 0 | 0 | 2 pass, 0 fail, 0 unknown |")
    assert rows["broker-loss shared"].startswith("| broker-loss shared | 1 | – | – | 4.3 | 3.1 | 4.3 |")


def test_verdicts_are_pass_fail_unknown_with_counts(tmp_path):
    t = _tables()
    t["runs"][0].update(valid="unknown", duplicates="unknown")
    t["runs"][1].update(valid="fail", lost_writes="fail", failed_checks="lost_writes")
    out = _report(tmp_path, t)
    md, html = out["markdown"].read_text(), out["html"].read_text()
    assert "- Safety verdicts over 9 run(s): 7 pass, 1 fail, 1 unknown; failed: hand/t/replication-16777216." in md
    section = md.split("## Safety verdicts", 1)[1].split("\n## ", 1)[0]
    assert "true" not in section and "false" not in section
    # the broker-loss runs' summaries name no per-check verdicts: unknown, never pass
    assert "- verdict: 7 pass, 1 fail, 1 unknown" in section and "- duplicates: 5 pass, 0 fail, 4 unknown" in section
    # no lost_prefill column in these tables (an aggregate from before it): unknown
    assert ("| hand/t/replication-4194304 | replication copy (Kafka) | unknown | pass | unknown | unknown | pass | pass | unknown |  |"
            in section)
    assert "<td class='unk'>unknown</td>" in html and "<td class='bad'>fail</td>" in html


def test_report_opens_with_provenance_and_the_configurations_compared(tmp_path):
    t = _tables()
    for i, r in enumerate(t["runs"]):
        if i < 6:  # the other runs' summaries carry no provenance
            r.update(date=f"2030-01-0{1 + i // 3}T00:00:00Z", git_commit="abc123def4567890", git_dirty=i == 0,
                     machine="2 cores, 23.5 GiB, kernel 6.18.44, Python 3.11.7", links_emulated=True,
                     versions=json.dumps({"confluent-kafka": "2.6.0", "seaweedfs": "3.80"}))
    md = _report(tmp_path, t)["markdown"].read_text()
    head = md.split("## Measured at a glance", 1)[0]
    assert head.index("## Headline") < head.index("## Provenance") < head.index("## Configurations compared")
    assert "- Machine: 2 cores, 23.5 GiB, kernel 6.18.44, Python 3.11.7 (6 runs); unknown (3 runs)." in head
    assert "- Date (UTC): 2030-01-01 00:00 to 2030-01-02 00:00 (3 runs unknown)." in head
    assert "- Git commit: abc123def456 (5 runs); abc123def456 (dirty) (1 run); unknown (3 runs)." in head
    assert "- Versions: confluent-kafka 2.6.0, seaweedfs 3.80 (6 runs); unknown (3 runs)." in head
    assert "- Links emulated (per-node NICs in network namespaces): unknown (3 runs); yes (6 runs)." in head
    assert ("| replication copy (Kafka) | hand (1 configuration) | 3 | 3 | 2 | acks=all | when the in-sync replicas have "
            "it in their page cache | a third of the link per move: 4 MiB/s, the replication throttle | "
            "100mbit / 1gbit / none | none |"
            in head)
    # a configuration whose summaries predate the configuration block: unknown, never guessed
    assert "| shared storage (AutoMQ-style) | broker-loss (1 configuration) | 1 | unknown | unknown |" in head


def test_phase_chart_never_stacks_a_span_on_its_parts(report):
    from bench.report.figures import phase_bars

    parts, spans, part_names, span_names = phase_bars(_tables())
    assert part_names == ["close.flush", "open.open"] and span_names == ["request_to_elect"]
    k = ("hand/t/shared-67108864", "0")
    assert sum(parts[k].values()) == pytest.approx(0.6) and dict(spans[k]) == {"request_to_elect": 0.5}
    md = report["markdown"].read_text()
    cap = md.split("## Move phase breakdown", 1)[1].split("\n## ", 1)[0]
    assert "never stacked" in cap and "2 run(s)" in cap


def test_missing_aggregate_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="python -m bench aggregate"):
        build_report(tmp_path / "nothing", tmp_path / "rep")


TIERED_CONFIGURATION = {**COPY_CONFIGURATION, "system": "tiered", "label": "tiered",
                        "ack_meaning": "in the page cache of every in-sync replica; uploads come later",
                        "object_store_link_rate": "1gbit",
                        "system_settings": {"segment_bytes": 4 * MiB, "local_retention_bytes": 8 * MiB,
                                            "new_replica_starts_at": "last tiered offset + 1 (KIP-1023)"}}
SHARED_CONFIGURATION = {**COPY_CONFIGURATION, "system": "shared", "label": "shared", "replication_factor": 1,
                        "min_insync_replicas": None, "ack_meaning": "after the WAL object's PUT",
                        "throttle_bytes_per_s": None, "throttle_rule": None, "object_store_link_rate": "1gbit",
                        "system_settings": {"wal_batch_interval_ms": 100, "wal_upload_threshold_bytes": 512 * MiB}}


def test_three_systems_side_by_side(tmp_path):
    """Copy, tiered and shared in one report: the title names all three (registry order), each
    states what its ack means and its own settings, the tiered moves show the bytes their leader
    named, and the tiered model's line is drawn over those bytes."""
    t = _tables()
    for i, (size, th) in enumerate(((16 * MiB, 4 * MiB), (64 * MiB, 4 * MiB), (64 * MiB, 8 * MiB))):
        key = f"hand/t/tiered-{size}-{th}"
        secs = 1.2 + 3 * MiB / (0.8 * th)
        t["runs"].append({"run_key": key, "system": "tiered", "config_key": "hand tiered", "synthetic": True,
                          "valid": "pass", "lost_writes": "pass", "duplicates": "pass", "reordering": "pass",
                          "unexpected": "pass", "lost_prefill": "pass", "timeline_t0": 100.0, "timeline_bin_s": 0.5,
                          "load_start": 90.0})
        t["timeline"] += [{"run_key": key, "system": "tiered", "bin": b, "t_rel_s": b * 0.5, "bin_s": 0.5, "sent": 50,
                           "acked": 50, "fail": 0, "info": 0, "acks_per_s": 100.0, "p50_ms": 3.0, "p99_ms": 9.0}
                          for b in range(-10, 40)]
        t["moves"].append({"run_key": key, "system": "tiered", "config_key": "hand tiered", "action_id": "0",
                           "action": "reassign", "topic": "hot", "partition": 0, "request_ts": 100.0,
                           "first_ack_ts": 100.0 + secs, "move_seconds": secs, "unavailable_seconds": 0.3,
                           "partition_bytes": size, "copy_bytes_at_request": 3 * MiB,
                           "bytes_moved_inter_broker": 3 * MiB, "bytes_moved_objstore": 4096,
                           "bytes_moved": 3 * MiB + 4096, "replication_throttle_bytes_per_s": th,
                           "bandwidth_bytes_per_s": th})
    t["configs"] += [_config("hand tiered", "hand", "tiered", runs=3, repetitions=3, moves=3,
                             move_seconds=(2.2, 1.7, 2.2), partition_bytes=(64 * MiB, 16 * MiB, 64 * MiB),
                             copy_bytes_at_request=(3 * MiB, 3 * MiB, 3 * MiB), valid_pass=3,
                             configuration=TIERED_CONFIGURATION),
                     _config("hand shared", "hand", "shared", runs=2, moves=2, valid_pass=2,
                             configuration=SHARED_CONFIGURATION)]
    _, model_tables = fit_models(t["moves"])
    t.update(model_tables)
    fit = {m["system"]: m for m in t["model_fit"]}
    assert fit["tiered"]["family"] == "tiered_copy" and fit["tiered"]["efficiency"] == pytest.approx(0.8, rel=1e-3)
    md = _report(tmp_path, t)["markdown"].read_text()
    assert md.startswith("# Partition reassignment: replication copy (Kafka) vs tiered storage (Kafka KIP-405) vs "
                         "shared storage (AutoMQ-style)")
    configs = md.split("## Configurations compared", 1)[1].split("\n## ", 1)[0]
    assert ("| tiered storage (Kafka KIP-405) | hand (1 configuration) | 3 | 3 | 2 | acks=all | in the page cache of "
            "every in-sync replica; uploads come later |" in configs)
    assert ("segment 4 MiB, local retention 8 MiB, new replica starts at: last tiered offset + 1 (KIP-1023) |"
            in configs)
    assert "wal batch interval 100 ms, wal upload threshold 512 MiB |" in configs
    assert configs.index("replication copy") < configs.index("tiered storage") < configs.index("shared storage")
    assert "| hand tiered | 3 | 64 MiB (16 MiB–64 MiB) | 3 MiB |" in md
    assert "tiered: c + L / (e x T - r)" in md
    assert ("**tiered storage (Kafka KIP-405)**: 3 measured move(s) in 3 run(s), move_seconds median" in md
            and "3 of them copied only the tail their leader named, 3 MiB–3 MiB." in md)


def _linger_config(system, linger, cpu, scenario="reassign-one", moves=3, **figures):
    params = {"prefill_bytes_per_partition": 64 * MiB, "move_budget_of_link": 0.5, "linger_ms": linger,
              "system.kind": system, **({"workload.linger_ms": linger} if linger != 5 else {})}
    key = f"{scenario} {system} linger {linger}"
    return _config(key, scenario, system, runs=3, repetitions=3, moves=moves, faults=0 if moves else 3,
                   params=json.dumps(params), prefill_bytes_per_partition=64 * MiB,
                   load_cpu_s_per_1000_msgs=(cpu, cpu * 0.9, cpu * 1.1), before_p99_ms=12.0, during_p99_ms=40.0,
                   **figures)


def test_the_sensitivity_table_shows_each_system_at_both_lingers_and_names_a_spinning_client(tmp_path):
    """Configurations that differ only in linger.ms side by side; the note computes the load CPU
    ratio (never a typed number) and names the system the client spins against at the default."""
    from bench.report import tables as tb

    t = _tables()
    t["configs"] += [_linger_config("replication", 5, 0.02, move_seconds=(14.0, 13.5, 14.2),
                                    unavailable_seconds=(0.1, 0.1, 0.2)),
                     _linger_config("replication", 250, 0.015, move_seconds=(14.1, 13.9, 14.3),
                                    unavailable_seconds=(0.4, 0.3, 0.5)),
                     _linger_config("shared", 5, 0.09, move_seconds=(1.1, 1.0, 1.3),
                                    unavailable_seconds=(0.9, 0.8, 1.0)),
                     _linger_config("shared", 250, 0.018, move_seconds=(1.2, 1.1, 1.3),
                                    unavailable_seconds=(1.0, 0.9, 1.1))]
    groups = tb.linger_groups(t["configs"])
    assert [[(c["system"], tb._linger(c)) for c in g] for g in groups] == [
        [("replication", 5), ("replication", 250)], [("shared", 5), ("shared", 250)]]
    md = _report(tmp_path, t)["markdown"].read_text()
    section = md.split(f"## {tb.SENSITIVITY_TITLE}", 1)[1].split("\n## ", 1)[0]
    assert ("| reassign-one, 64 MiB partitions | shared storage (AutoMQ-style) | 5 | 3 | 1.1 (1–1.3) | 0.9 (0.8–1) "
            "| 12 | 40 | 0.09 (0.081–0.099) |" in section)
    assert "| reassign-one, 64 MiB partitions | replication copy (Kafka) | 250 | 3 | 14.1 (13.9–14.3) |" in section
    # 0.09 / 0.02 and 0.018 / 0.015, computed from the table
    assert ("the client spins against shared storage (AutoMQ-style): the load process spent 0.09 s per 1,000 "
            "messages against it, 4.5x replication copy (Kafka)'s (0.02) (at linger.ms=250: 1.2x replication copy "
            "(Kafka)'s (0.015))" in section)
    # no spin: said with the ratios instead
    calm = [c for c in t["configs"] if not (c.get("params") and c["system"] == "shared" and tb._linger(c) == 5)]
    calm.append(_linger_config("shared", 5, 0.025))
    note = tb.sensitivity_note(calm)
    assert "no system made the load process spend 1.5x or more" in note and "shared, 1.2x replication's (0.02)" in note
    # a configuration whose summaries carry no params (older aggregates): not in the table
    assert tb.linger_groups([_config("x", "s", "shared", runs=1)]) == []


def test_the_scale_table_shows_each_setting_against_production_and_flags_a_broken_scaling(tmp_path):
    """The configurations' declared scale model, per scaled setting: value run, production value,
    source, factor; a setting off its declared factor by more than the tolerance says BREAKS, and
    so does the configurations table."""
    from bench.check.summary import configuration_of
    from bench.report import tables as tb
    from bench.scenario import expand, load_scenario, resolve_scenario

    def conf(*overrides):
        sc = load_scenario(resolve_scenario("reassign-one"), ["matrix.system.kind=[tiered]",
                                                               "matrix.prefill.bytes_per_partition=[64MiB]", *overrides])
        return configuration_of(expand(sc)[0][1])

    scaled, broken = conf(), conf("system.segment_bytes=4MiB")
    assert broken["scale"]["breaks"] == ["system.segment_bytes", "remote.log.manager.task.interval.ms"]
    t = _tables()
    t["configs"] += [_config("scaled", "reassign-one", "tiered", runs=3, configuration=scaled),
                     _config("broken", "tiered-4mib", "tiered", runs=3, configuration=broken),
                     _config("plain", "hand-made", "tiered", runs=1, configuration={**scaled, "scale": None})]
    md = _report(tmp_path, t)["markdown"].read_text()
    section = md.split(f"## {tb.SCALE_TITLE}", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| tiered storage")]
    seg = [r for r in rows if "| system.segment_bytes |" in r]
    assert seg == ["| tiered storage (Kafka KIP-405) | reassign-one | system.segment_bytes | 10 MiB | 1 GiB | "
                   "Kafka's default segment.bytes (log.segment.bytes = 1073741824; KIP-1030 kept it in 4.0) | "
                   "1/102 (1/100) | ok (-2.3%) |",
                   "| tiered storage (Kafka KIP-405) | tiered-4mib | system.segment_bytes | 4 MiB | 1 GiB | "
                   "Kafka's default segment.bytes (log.segment.bytes = 1073741824; KIP-1030 kept it in 4.0) | "
                   "1/256 (1/100) | BREAKS (-60.9%, tolerance ±5%) |"]
    link = next(r for r in rows if "network.link_rate" in r)
    assert "| 12.5 MB/s | 1250 MB/s |" in link and "| 1/100 (1/100) | ok (+0.0%) |" in link
    latency = next(r for r in rows if "object_store_latency" in r)
    assert "| 30 ms | 30 ms |" in latency and "Quickwit" in latency
    size = next(r for r in rows if "the largest partition's size" in r)
    assert "| 64 MiB | 6.2 GiB | what the run stands for" in size and size.endswith("| stands for |")
    assert "Declaring no scale model (not checked): hand, hand-made." in section
    configs = md.split("## Configurations compared", 1)[1].split("\n## ", 1)[0]
    assert "1/100 / 1/100; broken by system.segment_bytes, remote.log.manager.task.interval.ms |" in configs
    assert "| not declared |" in configs


def test_the_estimates_table_sets_each_configurations_estimates_beside_its_moves():
    from bench.report.tables import estimate_rows

    moves = [{"config_key": "c", "move_seconds": 10.0, "estimate_seconds": 11.0, "estimate_seconds_low": 9.0,
              "estimate_seconds_high": 12.0, "estimate_error_pct": 10.0, "estimate_model_commit": "abcdef0123456"},
             {"config_key": "c", "move_seconds": 10.0, "estimate_seconds": 7.0, "estimate_seconds_low": 6.0,
              "estimate_seconds_high": 8.0, "estimate_error_pct": -30.0, "estimate_model_commit": "abcdef0123456"},
             {"config_key": "c", "move_seconds": 10.0, "estimate_seconds": None},  # a move without an estimate
             {"config_key": "c", "move_seconds": 30.0, "estimate_seconds": 9.0, "estimate_error_pct": None},  # a drain's
             {"config_key": "d", "move_seconds": 5.0, "estimate_seconds": None}]
    configs = [{"config_key": "c", "config_label": "copy"}, {"config_key": "d", "config_label": "shared"}]
    (row,) = estimate_rows(moves, configs)  # d made no estimate: left out
    assert row[0] == "copy" and row[1] == 2
    assert row[4:9] == ["-10.0 %", "20.0 % / 30.0 %", "1 of 2", "1 of 2", "1 of 2"] and row[9] == "abcdef0123"
    # a handover estimated between its two outcomes (seen at a client query or one interval later):
    # a move on the other outcome than the mean is near an outcome, not near the estimate
    outs = '[{"probability": 0.7, "query_s": 0.7, "seconds": 1.0}, {"probability": 0.3, "query_s": 0.3, "seconds": 0.66}]'
    ho = [{"config_key": "s", "move_seconds": ms, "estimate_seconds": 0.9, "estimate_seconds_low": 0.4,
           "estimate_seconds_high": 2.0, "estimate_error_pct": 100 * (0.9 - ms) / ms, "estimate_model_commit": "abc",
           "estimate_outcomes_json": outs} for ms in (0.98, 0.68, 0.5)]
    (row,) = estimate_rows(ho, [{"config_key": "s", "config_label": "shared"}])
    assert row[7:9] == ["1 of 3", "2 of 3"]
