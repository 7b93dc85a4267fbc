"""Two `bench aggregate` outputs compared: the same tables (every CSV) and the same model.json,
floats to 1e-9 relative (a cluster may sum in another order than local mode); what may differ is
how long the computation took (the aggregate's timings, the projection grid's and each cluster
simulation's wall time), never a result. Used by the standalone-cluster test and benchmark."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

TIMINGS = ("sim_seconds",)


def _results_only(model: dict) -> dict:
    model.pop("timings_s")
    model["grid"].pop("seconds")
    for r in model["rebalance"]:
        r.pop("sim_seconds")
    return model


def _close(a, b, path="") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), path
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


def assert_same_outputs(a: Path, b: Path) -> int:
    """Every table and model.json of two aggregate output dirs equal; -> the tables compared."""
    csvs = sorted(p.name for p in a.glob("*.csv"))
    assert csvs and csvs == sorted(p.name for p in b.glob("*.csv"))
    for name in csvs:
        x, y = (pd.read_csv(d / name).drop(columns=list(TIMINGS), errors="ignore") for d in (a, b))
        pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=1e-9, obj=name)
    ma, mb = (_results_only(json.loads((d / "model.json").read_text())) for d in (a, b))
    _close(ma, mb, "model.json")
    assert ma["models"]  # the comparison covers fitted models, not two empty files
    return len(csvs)
