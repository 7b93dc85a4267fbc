"""bench.results.load on small hand-made aggregates (no Spark): DataFrames with the aggregate's
columns and types, a missing table as an empty frame, a clear error without an aggregate."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bench.analysis.aggregate import TABLES, AggregateResult, write_outputs, write_table
from bench.results import ATTRS, NoAggregateError, Results, load

MiB = 2**20
ROOT = Path(__file__).resolve().parents[2]


def small_tables(fits: bool = True) -> dict[str, list[dict]]:
    """Three copy moves (two sizes) and two shared ones; one copy move has no move_seconds and
    no partition (a move the checkers could not time); with ``fits``, a model_fit row that names
    only its system, n and runs."""
    runs, moves = [], []
    for i, (system, size, secs) in enumerate([("replication", 4 * MiB, 1.5), ("replication", 16 * MiB, 4.5),
                                              ("replication", 16 * MiB, None), ("shared", 4 * MiB, 0.7),
                                              ("shared", 16 * MiB, 0.9)]):
        key = f"hand/t/{system}-{i}"
        runs.append({"run_key": key, "system": system, "config_key": f"{system}-{size}", "synthetic": True,
                     "repetition": 1, "repetitions": None, "moves": 1, "valid": "pass", "timeline_t0": 100.0,
                     "timeline_bin_s": 0.5, "load_start": 90.0})
        moves.append({"run_key": key, "system": system, "config_key": f"{system}-{size}", "action_id": "0",
                      "action": "reassign", "topic": "hot", "partition": None if secs is None else 0,
                      "request_ts": 100.0, "first_ack_ts": None if secs is None else 100.0 + secs,
                      "end_ts": 100.0 + (secs or 30.0), "move_seconds": secs, "partition_bytes": size,
                      "bytes_moved": size if system == "replication" else MiB})
    fit = {"system": "replication", "n": 2, "runs": "hand/t/replication-0,hand/t/replication-1"}
    return {"runs": runs, "moves": moves, "model_fit": [fit] if fits else []}


def write_aggregate(agg: Path, tables: dict[str, list[dict]], model: dict | None = None,
                    skip: tuple[str, ...] = ()) -> Path:
    agg.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        if name not in skip:
            write_table(name, tables.get(name, []), agg)
    if model is not None:
        (agg / "model.json").write_text(json.dumps(model))
    return agg


def test_load_reads_every_table_from_a_results_root_or_its_aggregate(tmp_path):
    agg = write_aggregate(tmp_path / "results" / "aggregate", small_tables(), {"notes": {}, "headline": []})
    r = load(tmp_path / "results")
    assert isinstance(r, Results) and r.path == agg
    assert load(agg).path == agg and load(str(agg)).path == agg
    assert r.model == {"notes": {}, "headline": []}
    for attr, name in ATTRS.items():
        df = getattr(r, attr)
        assert isinstance(df, pd.DataFrame) and list(df.columns) == [c for c, _ in TABLES[name]], attr
        assert r.table(name) is df and r.table(attr) is df
    assert set(r.tables) == set(TABLES) and set(ATTRS.values()) <= set(TABLES)
    assert all(getattr(r, name) is r.table(name) for name in TABLES if name not in ATTRS.values())
    assert repr(r).startswith(f"Results({str(agg)!r}, rows: runs=5, moves=5,")
    assert len(r.runs) == 5 and len(r.moves) == 5 and len(r.fits) == 1 and r.validation.empty
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.moves = r.runs  # type: ignore[misc]
    with pytest.raises(KeyError, match="no table 'nope'"):
        r.table("nope")
    with pytest.raises(AttributeError):
        r.nope  # noqa: B018


def test_types_keep_missing_values_missing(tmp_path):
    r = load(write_aggregate(tmp_path / "agg", small_tables()))
    m = r.moves
    # A count with a missing value stays an integer column (pandas' nullable Int64), never floats.
    assert str(m["partition"].dtype) == "Int64" and m["partition"].isna().tolist() == [False, False, True, False, False]
    assert str(r.runs["synthetic"].dtype) == "boolean" and r.runs["synthetic"].all()
    assert m["move_seconds"].dtype == "float64" and m["move_seconds"].isna().sum() == 1
    assert m["system"].tolist()[:1] == ["replication"] and m["topic"].notna().all()
    # records(): the rows as pyarrow reads them from the file, None for missing.
    for name in TABLES:
        assert r.records(name) == pq.read_table(r.path / f"{name}.parquet").to_pylist(), name
    assert r.records("fits") == r.records("model_fit")


def test_a_missing_table_file_is_an_empty_frame_with_its_columns(tmp_path):
    agg = write_aggregate(tmp_path / "agg", small_tables(), skip=("errors", "links", "projection"))
    r = load(agg)
    assert r.model == {}  # no model.json: an empty dict, the tables still load
    for df, name in ((r.errors, "errors"), (r.links, "links"), (r.projection, "projection")):
        assert df.empty and list(df.columns) == [c for c, _ in TABLES[name]]
    assert str(r.errors["count"].dtype) == "Int64" and r.records("links") == []
    assert len(r.moves) == 5


def test_an_older_file_without_a_column_reads_it_as_missing(tmp_path):
    agg = write_aggregate(tmp_path / "agg", small_tables())
    t = pq.read_table(agg / "moves.parquet")
    pq.write_table(t.drop_columns(["bytes_moved", "partition"]), agg / "moves.parquet")
    m = load(agg).moves
    assert list(m.columns) == [c for c, _ in TABLES["moves"]]
    assert m["bytes_moved"].isna().all() and str(m["partition"].dtype) == "Int64" and m["partition"].isna().all()


@pytest.mark.parametrize("where", ["empty", "absent", "results root without aggregate"])
def test_no_aggregate_is_a_clear_error(tmp_path, where):
    path = tmp_path / "nothing"
    if where != "absent":
        path.mkdir()
    if where == "results root without aggregate":
        (path / "aggregate").mkdir()
        (path / "aggregate" / "summary.md").write_text("# not an aggregate")
    with pytest.raises(NoAggregateError, match=re.escape(str(path)) + ".*run `python -m bench aggregate"):
        load(path)
    assert issubclass(NoAggregateError, FileNotFoundError)


def test_load_reads_what_write_outputs_writes(tmp_path):
    # every column present (None where unknown), as the aggregation's rows are
    tables = {name: [{c: r.get(c) for c, _ in cols} for r in small_tables().get(name, [])]
              for name, cols in TABLES.items()}
    res = AggregateResult(out_dir=tmp_path / "results" / "aggregate", runs=[], tables=tables,
                          models={"models": {}, "notes": {"shared": "one size only"}, "validation": [],
                                  "projection": {}}, warnings=["a warning"],
                          timings={"total": 1.0})
    write_outputs(res)
    r = load(tmp_path / "results")
    assert r.model["notes"] == {"shared": "one size only"} and r.model["warnings"] == ["a warning"]
    assert r.records("moves") == pq.read_table(res.out_dir / "moves.parquet").to_pylist()
    assert r.moves["move_seconds"].sum() == pytest.approx(1.5 + 4.5 + 0.7 + 0.9)


def readme_example() -> str:
    """The Python block of README.md's "Results in a notebook" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Results in a notebook", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    write_aggregate(tmp_path / "results" / "aggregate", small_tables(), {"notes": {}})
    monkeypatch.chdir(tmp_path)
    code = readme_example()
    assert len(code.strip().splitlines()) <= 10
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    # the median move_seconds per system, a move without one left out (median of 1.5 and 4.5)
    assert ns["per_system"].to_dict() == {"replication": 3.0, "shared": 0.8}
