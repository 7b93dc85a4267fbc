"""The aggregation's outputs as pandas DataFrames, for notebooks and the report.

    from bench.results import load
    r = load("results")                       # a results root (its aggregate/), or an aggregate folder
    r.moves.groupby("system")["move_seconds"].median()

Reads what ``python -m bench aggregate`` wrote (bench/analysis/aggregate/job.py ``write_outputs``):
one Parquet file per table of :data:`~bench.analysis.aggregate.tables.TABLES` and ``model.json``; never
a raw history. Columns and types are the aggregate's: integer and boolean columns use pandas'
nullable dtypes (``Int64``, ``boolean``), so a missing value stays missing (``<NA>``) instead of
turning a column of counts into floats; strings are objects with ``None``; floats use ``NaN``
(the aggregate writes no non-finite number, so NaN only ever means missing).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.analysis.aggregate.tables import TABLES

AGGREGATE_DIR = "aggregate"  # under a results root, as `python -m bench aggregate` writes it
MODEL_FILE = "model.json"
# Results attribute -> aggregate table (the model tables get shorter names here).
ATTRS: dict[str, str] = {
    "runs": "runs", "moves": "moves", "latency": "latency", "timeline": "timeline", "outages": "outages",
    "configs": "configs", "phases": "phases", "links": "links", "move_links": "move_links", "errors": "errors",
    "fits": "model_fit", "validation": "model_validation", "projection": "projection",
}
# Nullable pandas dtypes where numpy's would change the values (ints with a null become floats).
_DTYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


class NoAggregateError(FileNotFoundError):
    """``path`` holds no aggregate (and has no ``aggregate/`` that does)."""


# eq=False: DataFrames have no truth value to compare or hash by; a Results is its own identity.
@dataclass(frozen=True, eq=False)
class Results:
    path: Path  # the aggregate folder read
    model: dict[str, Any]  # model.json ({} if the aggregate has none)
    runs: pd.DataFrame
    moves: pd.DataFrame
    latency: pd.DataFrame
    timeline: pd.DataFrame
    outages: pd.DataFrame
    configs: pd.DataFrame
    phases: pd.DataFrame
    links: pd.DataFrame
    move_links: pd.DataFrame
    errors: pd.DataFrame
    fits: pd.DataFrame  # model_fit
    validation: pd.DataFrame  # model_validation
    projection: pd.DataFrame
    # Every table of aggregate.TABLES by its aggregate name (the attributes above included), so a
    # table added to the aggregation is here, and an attribute, without a change to this class.
    tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    def __getattr__(self, name: str) -> pd.DataFrame:
        # Only called when normal lookup fails: a table without a field of its own.
        tables = self.__dict__.get("tables")
        if tables is not None and not name.startswith("_") and name in tables:
            return tables[name]
        raise AttributeError(name)

    def __repr__(self) -> str:  # a notebook shows the tables' sizes, not every frame
        sizes = ", ".join(f"{n}={len(df)}" for n, df in self.tables.items())
        return f"Results({str(self.path)!r}, rows: {sizes})"

    def table(self, name: str) -> pd.DataFrame:
        """A table by its aggregate name (``model_fit``) or its attribute here (``fits``)."""
        key = ATTRS.get(name, name)
        if key not in self.tables:
            raise KeyError(f"no table {name!r}: one of {', '.join(self.tables)}")
        return self.tables[key]

    def records(self, name: str) -> list[dict[str, Any]]:
        """A table's rows as plain Python values (None for missing), in the aggregate's column
        order: what ``pyarrow.parquet.read_table(f).to_pylist()`` gives."""
        schema = pa.schema(TABLES[ATTRS.get(name, name)])
        df = self.table(name)
        return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False).to_pylist()


def aggregate_dir(path: str | os.PathLike[str]) -> Path:
    """The aggregate folder ``path`` names: itself if it holds one, else its ``aggregate/``."""
    p = Path(path)
    for d in (p, p / AGGREGATE_DIR):
        if d.is_dir() and _holds_aggregate(d):
            return d
    where = "does not exist" if not p.exists() else "holds no aggregate (no model.json, no table .parquet)"
    raise NoAggregateError(f"{p} {where}: run `python -m bench aggregate [RESULTS_DIR]` first (it writes "
                           f"{Path('results') / AGGREGATE_DIR}/ from run directories with summary.json and "
                           "history.parquet)")


def _holds_aggregate(d: Path) -> bool:
    return (d / MODEL_FILE).is_file() or any((d / f"{name}.parquet").is_file() for name in TABLES)


def read_table(agg: Path, name: str) -> pd.DataFrame:
    """One aggregate table: its file's rows with the aggregate's columns and types (a column an
    older aggregate lacks is all-missing; a missing file gives no rows)."""
    schema = pa.schema(TABLES[name])
    f = agg / f"{name}.parquet"
    if not f.is_file():
        return schema.empty_table().to_pandas(types_mapper=_DTYPES.get)
    t = pq.read_table(f)
    cols = []
    for col in schema:
        if col.name not in t.column_names:
            cols.append(pa.nulls(t.num_rows, col.type))
        else:
            c = t.column(col.name)
            cols.append(c if c.type == col.type else c.cast(col.type))
    extra = [n for n in t.column_names if n not in schema.names]  # a newer aggregate's: kept, after ours
    out = pa.Table.from_arrays(cols + [t.column(n) for n in extra], names=schema.names + extra)
    return out.to_pandas(types_mapper=_DTYPES.get)


def load(path: str | os.PathLike[str] = "results") -> Results:
    """The aggregate under ``path`` (a results root or an aggregate folder) as DataFrames.

    Raises :class:`NoAggregateError` (a FileNotFoundError) naming ``path`` when there is none."""
    agg = aggregate_dir(path)
    mf = agg / MODEL_FILE
    model = json.loads(mf.read_text(encoding="utf-8")) if mf.is_file() else {}
    tables = {name: read_table(agg, name) for name in TABLES}
    return Results(path=agg, model=model, tables=tables, **{a: tables[t] for a, t in ATTRS.items()})


__all__ = ["ATTRS", "NoAggregateError", "Results", "aggregate_dir", "load", "read_table"]
