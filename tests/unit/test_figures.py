"""The README's figures come from extracts of stored runs (bench/report/blocks.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.report import blocks as fig
from bench.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_readme_figure_blocks_are_what_the_stored_extracts_render():
    text = (ROOT / "README.md").read_text()
    names = [m["name"] for m in fig.BLOCK.finditer(text)]
    assert names, "README.md has no figure block"
    assert fig.figures(check=True) == [], "run `python -m bench figures` and commit the README"


def test_every_bundled_extract_and_the_faults_page_re_derive_from_their_bundles():
    """What `python -m bench figures --check` re-derives, on the repository's own evidence."""
    from bench.report import faults_doc

    wrong = [p for n in fig.extract_names() for p in fig.rederive(n)] + faults_doc.stale()
    assert wrong == [], wrong
    for n in fig.extract_names():
        e = json.loads((fig.MEASUREMENTS / f"{n}.json").read_text())
        assert e["commit"] and e["dirty"] is False, f"{n}.json: its bundle must name one clean commit"


def _summary(run_id: str, move_s: float, *, rep: int | None, new: bool = True, valid: bool | None = True) -> dict:
    s = {
        "run_id": run_id, "scenario": "sc", "system": "replication", "started_at": "2026-11-20T10:00:00+00:00",
        "completed": True, "error": None,
        "params": {"prefill_bytes_per_partition": 16 << 20, "replication_factor": 1, "link_rate": "100mbit"},
        "checks": {"valid": valid, "latency": {"actions": [{"action_id": 0, "all": {"during": {"p99_ms": 40.0 + rep}}}]}},
        "moves": [{"action_id": 0, "move_seconds": move_s, "partition_bytes": 1000, "bytes_moved_inter_broker": 1200,
                   "bytes_moved_objstore": 0, "unavailable_seconds": 0.1}],
        "producer": {"acked": 2000, "load_seconds": 20.0, "rate_msgs_per_s": 100.0, "latency_ms": {"p99": 12.0}},
        "outages": [],
        "cpu": {"load": 10.0},
    }
    if new:
        s.update(config_id=run_id.split("__rep=")[0], repetition=rep,
                 provenance={"date": "2026-11-24T01:00:00+00:00",
                             "machine": {"cpus": 2, "mem_gib": 23.5, "kernel": "6.1.0", "python": "3.11.7"},
                             "git": {"commit": "abc123", "dirty": False}, "versions": {}, "links_emulated": True})
    else:
        s.update(git_commit="def456", machine={"cpus": 4, "mem_gib": 8.0, "platform": "Linux-6.2.0-x86_64-with-glibc2.36",
                                               "python": "3.11.7"})
    return s


def _write(d: Path, s: dict) -> None:
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(s))


@pytest.fixture
def results(tmp_path):
    """results/ of a suite: configuration `a` three times (new summaries), `old` once (a summary
    written before provenance and repetitions), and the suite's list of its runs."""
    root = tmp_path / "results"
    runs = []
    for rep, secs in [(1, 2.0), (2, 3.0), (3, 2.5)]:
        rid = f"a__rep={rep}"
        _write(root / "sc" / "T1" / rid, _summary(rid, secs, rep=rep, valid=None if rep == 3 else True))
        runs.append(f"results/sc/T1/{rid}")
    _write(root / "sc" / "T2" / "old", _summary("old", 7.0, rep=1, new=False))
    runs.append("results/sc/T2/old")
    (root / "suite-default" / "T1").mkdir(parents=True)
    (root / "suite-default" / "T1" / "suite.json").write_text(json.dumps({"suite": "default", "runs": runs,
                                                                                   "seconds": 963.0}))
    return root


def test_collect_pools_repetitions_and_reads_both_provenance_formats(results, tmp_path):
    out = fig.collect([results / "suite-default" / "T1"], "s", tmp_path / "m", allow_dirty=True, allow_mixed=True)
    e = json.loads(out.read_text())
    assert e["kind"] == "runs" and e["commit"] is None and e["dirty"] is True  # two commits, one tree unknown
    assert e["suite_seconds"] == 963.0
    assert "; the suite's runs took 16 min (first cluster start to last summary)." in fig.render("s", tmp_path / "m")
    a, old = e["configurations"]
    assert [r["run_id"] for r in a["runs"]] == ["a__rep=1", "a__rep=2", "a__rep=3"]
    assert a["figures"]["move_seconds"] == {"median": 2.5, "min": 2.0, "max": 3.0, "n": 3}
    assert a["figures"]["p99_during_move_ms"] == {"median": 42.0, "min": 41.0, "max": 43.0, "n": 3}
    assert a["figures"]["bytes_moved"]["median"] == 1200
    assert a["figures"]["outage_seconds"] is None
    # 10 % of a core for 20 s = 2 CPU s over 2,000 acked messages: 1 CPU s per 1,000
    assert a["figures"]["load_cpu_s_per_1000_msgs"]["median"] == pytest.approx(1.0)
    assert a["verdicts"] == {"pass": 2, "fail": 0, "unknown": 1}
    assert a["runs"][0]["provenance"] == {"date": "2026-11-24T01:00:00+00:00", "commit": "abc123", "dirty": False,
                                          "machine": {"cpus": 2, "mem_gib": 23.5, "kernel": "6.1.0"},
                                          "links_emulated": True}
    assert old["config_id"] == "old" and old["figures"]["move_seconds"]["n"] == 1
    assert old["runs"][0]["provenance"] == {"date": "2026-11-20T10:00:00+00:00", "commit": "def456", "dirty": None,
                                            "machine": {"cpus": 4, "mem_gib": 8.0, "kernel": "6.2.0"},
                                            "links_emulated": True}
    # a results root finds the same runs as the suite's list
    again = json.loads(fig.collect([results], "r", tmp_path / "m", allow_dirty=True, allow_mixed=True).read_text())
    assert [c["config_id"] for c in again["configurations"]] == ["a", "old"]


def test_render_check_and_missing_extract(results, tmp_path, capsys):
    m = tmp_path / "m"
    fig.collect([results / "sc"], "s", m, allow_dirty=True, allow_mixed=True)
    doc = tmp_path / "R.md"
    doc.write_text("intro\n<!-- figures:s begin -->\nmove 9.99 s\n<!-- figures:s end -->\nrest\n")
    assert main_code(["figures", "--check", "--file", str(doc), "--dir", str(m)]) == 1
    assert "figures:s" in capsys.readouterr().err
    assert "9.99" in doc.read_text()  # --check writes nothing
    assert main_code(["figures", "--file", str(doc), "--dir", str(m)]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n<!-- figures:s begin -->\n") and text.endswith("<!-- figures:s end -->\nrest\n")
    assert "| sc | replication, RF 1 | 16 MiB | 3 (2/0/1) | ? / ? / ? | 2.50 (2.00-3.00) |" in text
    assert "4 run(s); 2026-11-20 to 2026-11-24; commit `abc123`, `def456 (dirty: unknown)`" in text
    assert main_code(["figures", "--check", "--file", str(doc), "--dir", str(m)]) == 0
    doc.write_text("<!-- figures:nothing begin -->\n<!-- figures:nothing end -->\n")
    assert main_code(["figures", "--check", "--file", str(doc), "--dir", str(m)]) == 1
    assert "no extract" in capsys.readouterr().err


def test_collect_benchmark_json(tmp_path):
    src = tmp_path / "b.json"
    src.write_text(json.dumps({
        "datetime": "2026-11-24T01:00:00", "commit_info": {"id": "abc123", "dirty": False},
        "machine_info": {"release": "6.1.0", "python_version": "3.11.7", "cpu": {"count": 2, "brand_raw": "Xeon"}},
        "benchmarks": [{"name": "test_gate_copy_throttle[quick]", "extra_info": {"ratio": 1.01, "moves": [1, 2], "40mbit": {"mb_per_s": 2.5, "acked": 7}},
                        "stats": {"median": 2.25, "min": 2.1, "max": 2.3, "rounds": 3, "mean": 2.2}}]}))
    every = json.loads(fig.collect([src], "g", tmp_path / "m").read_text())
    assert every["benchmarks"][0]["extra_info"] == {"ratio": 1.01, "40mbit.mb_per_s": 2.5, "40mbit.acked": 7}
    e = json.loads(fig.collect([src], "g", tmp_path / "m", extra=["ratio"]).read_text())
    assert e["provenance"] == {"date": "2026-11-24T01:00:00", "commit": "abc123", "dirty": False,
                               "machine": {"cpus": 2, "cpu": "Xeon", "kernel": "6.1.0", "python": "3.11.7"}}
    assert e["benchmarks"] == [{"name": "test_gate_copy_throttle[quick]", "rounds": 3, "median": 2.25, "min": 2.1,
                                "max": 2.3, "extra_info": {"ratio": 1.01}}]
    assert "| `test_gate_copy_throttle[quick]` | 2.25 | 2.10-2.30 | 3 | ratio 1.01 |" in fig.render("g", tmp_path / "m")


def test_fmt_never_uses_exponents():
    assert [fig.fmt(x) for x in (1163.4, 0.00012345, 16.0, 2.5, 0.405, None)] == \
        ["1,163", "0.000123", "16.0", "2.50", "0.405", "-"]


def main_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_collect_and_render_a_model_extract(tmp_path):
    model = {
        "models": {"replication": {"system": "replication", "formula": "t = 0.8 s + B / (0.85 x T - r)", "n": 12,
                                   "runs": "a,b", "fixed_s": 0.8, "fixed_se": 0.1, "efficiency": 0.85}},
        "validation": [{"system": "replication", "axis": "size", "label": "64 MiB", "status": "ok", "error_pct": -3.2,
                        "target_pct": 15.0, "measured_s": 14.1, "predicted_s": 13.65, "n_train": 9, "n_test": 3,
                        "train_runs": ["a"], "test_runs": ["b"], "reason": None, "family": "brokers=4"}],
        "headline": [{"case": "partition", "title": "One partition", "system": "replication", "link_gbit_s": 1.0,
                      "status": "validated", "value_s": 3600.0, "value_text": "1.0 h", "error_pct": 3.2,
                      "validations": ["size"], "reason": None, "basis": "b"},
                     {"case": "partition", "title": "One partition", "system": "shared", "link_gbit_s": 1.0,
                      "status": "not validated", "value_s": None, "value_text": None, "error_pct": None,
                      "validations": [], "reason": "no passing held-out size check", "basis": "b"}],
        "grid": {"points": 197784},
    }
    src = tmp_path / "aggregate" / "model.json"
    src.parent.mkdir()
    src.write_text(json.dumps(model))
    with pytest.raises(fig.FiguresError, match="runs.csv"):  # the runs it rests on: the aggregate's runs table
        fig.collect([src], "models", out_dir=tmp_path)
    _write(tmp_path / "calibrate" / "T" / "a", _summary("a", 1.0, rep=1))
    (src.parent / "runs.csv").write_text(f"run_key,run_dir\ncalibrate/T/a,{tmp_path / 'calibrate' / 'T' / 'a'}\n")
    out = fig.collect([src], "models", out_dir=tmp_path)
    assert json.loads(out.read_text())["commit"] == "abc123"
    assert sorted(fig.evidence.read_manifest(tmp_path / "bundles" / "models")["files"]) == \
        ["aggregate/model.json", "aggregate/runs.csv", "calibrate/T/a/summary.json"]
    text = fig.render("models", tmp_path)
    assert json.loads(out.read_text())["kind"] == "model"
    assert "| partition | replication | 1 Gbit/s | 1.0 h | ≤ 3.20 % | size |" in text
    assert "not validated: no passing held-out size check" in text and "| replication | size | 64 MiB | ok |" in text
    bad = tmp_path / "other" / "model.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"models": {}}))
    with pytest.raises(fig.FiguresError, match="not an aggregate's model.json"):
        fig.collect([bad], "x", out_dir=tmp_path)


def test_a_multi_move_run_gets_one_row_per_move_with_the_link_in_force(tmp_path):
    # calibrate: moves one after another, the links stepped between them; each move's link in force
    # at its request comes from the summary (HistoryView.link_rate_at, the models' rule)
    s = _summary("cal__system.kind=replication", 1.0, rep=1)
    s["moves"] = [{"action_id": 0, "topic": "z1", "partition": 0, "move_seconds": 2.0, "partition_bytes": 4e6,
                   "link_rate_at_request": "100mbit"},
                  {"action_id": 3, "topic": "l2", "partition": 0, "move_seconds": 0.5, "partition_bytes": 8e6,
                   "link_rate_at_request": "1gbit"},
                  {"action_id": 4, "topic": "x", "partition": 0, "move_seconds": 0.1, "partition_bytes": 0}]
    _write(tmp_path / "cal" / "T" / "run", s)
    e = fig.collect_runs([tmp_path])
    [run] = e["configurations"][0]["runs"]
    assert [(m["partition"], m["link"]) for m in run["moves"]] == [("z1-0", "100mbit"), ("l2-0", "1gbit"), ("x-0", None)]
    text = fig.render_runs("x", e)
    assert "| z1-0 | 100mbit | 2.00 s (4.00 MB) |" in text and "| l2-0 | 1gbit | 0.500 s (8.00 MB) |" in text, text


def _clean_results(tmp_path: Path, commit: str = "abc123", dirty: bool = False) -> Path:
    """Three repetitions of configuration `a` with a scenario file each, all on one commit."""
    root = tmp_path / "results"
    for rep in (1, 2, 3):
        s = _summary(f"a__rep={rep}", 2.0 + rep, rep=rep)
        s["provenance"]["git"] = {"commit": commit, "dirty": dirty}
        s["checks"].update(lost_writes={"valid": True, "lost_count": 0}, duplicates={"valid": True, "duplicated_count": 0},
                           corrupted={"valid": True, "corrupted_count": 1 if rep == 3 else 0})
        _write(root / "sc" / "T1" / f"a__rep={rep}", s)
        (root / "sc" / "T1" / f"a__rep={rep}" / "scenario.yaml").write_text(f"name: sc\n# rep {rep}\n")
    return root


def test_collect_refuses_a_dirty_tree_and_mixed_commits_unless_told(tmp_path):
    dirty = _clean_results(tmp_path / "d", dirty=True)
    with pytest.raises(fig.FiguresError, match="dirty"):
        fig.collect([dirty], "x", tmp_path / "m")
    assert not (tmp_path / "m" / "x.json").exists()
    assert json.loads(fig.collect([dirty], "x", tmp_path / "m", allow_dirty=True).read_text())["dirty"] is True
    other = _clean_results(tmp_path / "o", commit="fff999")
    with pytest.raises(fig.FiguresError, match="2 commits"):
        fig.collect([_clean_results(tmp_path / "c"), other], "y", tmp_path / "m")
    e = json.loads(fig.collect([_clean_results(tmp_path / "c2")], "z", tmp_path / "m").read_text())
    assert (e["commit"], e["dirty"], e["bundle"]) == ("abc123", False, "bundles/z")


def test_check_rederives_every_extract_from_its_bundle_and_fails_on_any_edit(tmp_path, capsys):
    m = tmp_path / "m"
    fig.collect([_clean_results(tmp_path)], "s", m)
    doc = tmp_path / "R.md"
    doc.write_text("<!-- figures:s begin -->\n<!-- figures:s end -->\n")
    assert main_code(["figures", "--file", str(doc), "--dir", str(m)]) == 0
    check = ["figures", "--check", "--file", str(doc), "--dir", str(m)]
    assert main_code(check) == 0, capsys.readouterr().err
    assert "| sc | replication, RF 1 | 16 MiB | 3 (3/0/0) | 0 / 0 / 1 | 4.00 (3.00-5.00) |" in doc.read_text()
    bundle = m / "bundles" / "s"
    manifest = fig.evidence.read_manifest(bundle)
    assert manifest["commit"] == "abc123" and len(manifest["runs"]) == 3
    assert sorted(manifest["files"]) == [f"sc/T1/a__rep={r}/{f}" for r in (1, 2, 3) for f in ("scenario.yaml", "summary.json")]
    assert all(len(r["summary_sha256"]) == 64 and r["history_sha256"] is None for r in manifest["runs"])

    def one_char(path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))

    extract = m / "s.json"
    saved = extract.read_text()
    one_char(extract, '"median": 4', '"median": 5')  # the figure the block quotes ...
    assert main_code(check) == 1
    assert "not what its bundle" in capsys.readouterr().err
    extract.write_text(saved.replace('"date": "2026', '"date": "2027', 1))  # ... or a field no block shows
    assert main_code(check) == 1
    extract.write_text(saved)
    assert main_code(check) == 0
    summary = bundle / "files" / "sc" / "T1" / "a__rep=2" / "summary.json"
    one_char(summary, '"move_seconds": 4.0', '"move_seconds": 4.5')
    assert main_code(check) == 1
    assert "a__rep=2/summary.json: sha256 differs" in capsys.readouterr().err
    fig.collect([_clean_results(tmp_path / "again")], "s", m)  # a fresh bundle of the same runs
    assert main_code(check) == 0
    one_char(bundle / "manifest.json", '"summary_sha256": "', '"summary_sha256": "0')  # not a file --check hashes
    assert main_code(check) == 1
    assert "not what its bundle" in capsys.readouterr().err
    fig.collect([tmp_path / "again" / "results"], "s", m)
    assert main_code(check) == 0
    (bundle / "files" / "extra.json").write_text("{}")
    assert main_code(check) == 1
    assert "extra.json: not in the manifest" in capsys.readouterr().err
    (bundle / "files" / "extra.json").unlink()
    assert main_code(check) == 0
    (m / "old.json").write_text(saved.replace('"bundle": "bundles/s"', '"bundle": null'))  # an extract with no bundle
    assert main_code(check) == 1
    assert "old.json: no evidence bundle" in capsys.readouterr().err


def test_verify_rehashes_the_histories_and_reruns_the_checkers(tmp_path, capsys):
    """A run still on disk: its history's and summary's sha256 and the checkers re-run on its
    history (the summary `bench analyze` would write) against the bundle."""
    import pyarrow as pa

    from bench.check.summary import write_summary
    from bench.history.store import SCHEMA, read_history
    from tests.support.synthetic import SynthRun, write_run

    run = tmp_path / "results" / "synthetic-sweep" / "T" / "r1"
    write_run(run, SynthRun("replication", duration_s=10.0, move_at_s=3.0, rate_msgs_per_s=40.0))
    table = read_history(run / "history.parquet")
    start = {"kind": "event", "ts": table["ts"][0].as_py(), "msg_id": -1, "partition": -1, "event": "run_start",
             "detail": json.dumps({"run_id": "r1", "scenario": "synthetic-sweep", "system": "replication",
                                   "provenance": {"git": {"commit": "abc123", "dirty": False}}})}
    import pyarrow.parquet as pq
    pq.write_table(pa.concat_tables([pa.Table.from_pylist([start], schema=SCHEMA), table]), run / "history.parquet")
    write_summary(run)
    m = tmp_path / "m"
    fig.collect([tmp_path / "results"], "v", m)
    assert main_code(["figures", "verify", "--dir", str(m)]) == 0
    assert "v: 1 run(s), 1 on this machine, 1 re-checked" in capsys.readouterr().out
    moved = tmp_path / "elsewhere"
    (tmp_path / "results").rename(moved)  # not where it ran: found under --results
    assert main_code(["figures", "verify", "--dir", str(m)]) == 0
    assert "0 of 1 bundled runs found" in capsys.readouterr().out
    assert main_code(["figures", "verify", "--dir", str(m), "--results", str(moved)]) == 0
    assert "1 re-checked" in capsys.readouterr().out
    h = moved / "synthetic-sweep" / "T" / "r1" / "history.parquet"
    pq.write_table(pq.read_table(h).slice(1), h)  # the history lost a row
    assert main_code(["figures", "verify", "--dir", str(m), "--results", str(moved)]) == 1
    assert "history differs" in capsys.readouterr().out


def test_the_faults_page_is_checked_against_its_bundle(tmp_path):
    """docs/faults.md's table is re-derived from the bundled runs; a one-character edit fails."""
    from bench.report import faults_doc

    bundle = tmp_path / "files"
    s = _summary("fault-kill-source__system.kind=replication", 3.0, rep=1)
    s.update(scenario="fault-kill-source", verdict="pass", problems=[],
             checks={"valid": True, "lost_writes": {"valid": True, "lost_count": 0},
                     "duplicates": {"valid": True, "duplicated_count": 0},
                     "corrupted": {"valid": True, "corrupted_count": 0},
                     "reordering": {"valid": True, "reordered_count": 0}},
             outages=[{"unavailable_seconds": 12.5, "recovered_by": "restart_broker", "recovery_seconds": 14.0}])
    _write(bundle / "fault-kill-source" / "T" / "r1", s)
    doc = tmp_path / "faults.md"
    assert faults_doc.stale(doc, tmp_path / "missing") == []  # no bundle: nothing to re-derive from
    doc.write_text(faults_doc.replace_section("# Faults\n\n## Bad input\n\nkept\n",
                                              faults_doc.generate([str(bundle)], out=None)))
    assert faults_doc.stale(doc, bundle) == []
    text = doc.read_text()
    assert "| `faults/kill-source` | replication | 1 | 2000 | 0 | 0 | 0 | 0 | 1 pass, 0 fail, 0 unknown |" in text
    doc.write_text(text.replace("| 2000 |", "| 2001 |", 1))
    assert faults_doc.stale(doc, bundle)


def test_a_soak_extract_quotes_its_judgement_and_re_derives(tmp_path):
    run = tmp_path / "soak" / "T"
    s = _summary("soak", 1.0, rep=1)
    s["checks"] = {"valid": True, "lost_writes": {"lost_count": 0}, "duplicates": {"duplicated_count": 0},
                   "corrupted": {"corrupted_count": 0}}
    _write(run, s)
    (run / "soak.json").write_text(json.dumps({
        "system": "shared", "config": {"log.cache.bytes": 67108864}, "minutes": 30.0, "warmup_s": 600.0, "rate_msgs_per_s": 1000.0, "moves": 9,
        "acked": 1_800_000, "failed": 0, "unknown": 0, "max_broker_growth_pct": 2.5, "verdict": "pass",
        "file_descriptors": {"broker-1": {"growth": 1}, "broker-2": {"growth": 3}, "load": {"growth": 40}},
        "object_store": {"bytes_per_acked_byte": {"baseline": 1.03, "final": 1.031}, "growth_pct": 0.1,
                         "groups": {"c/wal": {"baseline": {"objects": 10}, "final": {"objects": 12}}}}}))
    e = json.loads(fig.collect([tmp_path / "soak"], "soak-shared", tmp_path / "m").read_text())
    assert e["kind"] == "soak" and e["runs"][0]["max_broker_fd_growth"] == 3
    text = fig.render("soak-shared", tmp_path / "m")
    assert ("| shared (log.cache.bytes=67108864) | 30.0 (20.0) | 1,000 | 9 | 1,800,000 | 0 / 0 / 0 | +2.5 % | 3 | "
            "10 - 12 | 1.03 - 1.03 | pass (run: pass) |") in text
    assert fig.rederive("soak-shared", tmp_path / "m") == []
    assert "T/soak.json" in fig.evidence.read_manifest(tmp_path / "m" / "bundles" / "soak-shared")["files"]


def test_a_chaos_extract_counts_every_safety_check_per_seed_and_says_why_a_run_is_not_a_pass(tmp_path):
    root = tmp_path / "results"
    for seed, lost in ((1, 0), (2, 0)):
        s = _summary(f"chaos-replication-seed{seed}", 1.0, rep=1)
        s["scenario"] = f"chaos-replication-seed{seed}"
        s["checks"] = {"valid": True if seed == 1 else "unknown", "unknown": [] if seed == 1 else ["move_seconds"],
                       **{check: {f"{n}_count": lost} for n, check in
                          (("lost", "lost_writes"), ("duplicated", "duplicates"), ("corrupted", "corrupted"),
                           ("reordered", "reordering"), ("lost_prefill", "lost_prefill"))}}
        d = root / f"chaos-replication-seed{seed}" / "T"
        _write(d, s)
        (d / "scenario.yaml").write_text("name: c\nworkload: {duration_s: 600}\nactions:\n"
                                         "- {kind: reassign}\n- {kind: kill_broker}\n- {kind: reassign}\n")
    e = json.loads(fig.collect([root / "chaos-replication-seed1", root / "chaos-replication-seed2"], "chaos",
                               tmp_path / "m").read_text())
    assert e["kind"] == "chaos" and [r["seed"] for r in e["runs"]] == [1, 2]
    assert e["runs"][0]["actions"] == {"reassign": 2, "kill_broker": 1}
    text = fig.render("chaos", tmp_path / "m")
    assert "| replication | 1 | 10.0 | 2 reassign, 1 kill_broker | 2,000 | 0 / 0 / 0 / 0 / 0 | pass |" in text
    assert "unknown (checks without a verdict: move_seconds) |" in text
    assert fig.rederive("chaos", tmp_path / "m") == []
    manifest = fig.evidence.read_manifest(tmp_path / "m" / "bundles" / "chaos")
    assert "chaos-replication-seed1/T/scenario.yaml" in manifest["files"]  # each schedule replays from the bundle


def test_a_figure_only_some_repetitions_have_is_pooled_over_those(tmp_path):
    """A move the producers never saw refused has no leader query: that repetition lacks the
    figure, the others still pool it (a real case: a copy move whose clients learned of the new
    leader from their metadata poll)."""
    for rep, query in [(1, 50.9), (2, None), (3, 51.5)]:
        s = _summary(f"a__rep={rep}", 51.0, rep=rep)
        s["moves"][0].update(elect_seconds=50.6, **({"client_leader_query_seconds": query} if query else {}))
        _write(tmp_path / "sc" / "T1" / f"a__rep={rep}", s)
    (a,) = fig.collect_runs([tmp_path])["configurations"]
    assert a["figures"]["client_leader_query_seconds"] == {"median": 51.2, "min": 50.9, "max": 51.5, "n": 2}
    assert a["figures"]["elect_seconds"]["n"] == 3
