"""Spark aggregation of run directories: `python -m bench aggregate [RESULTS_DIR ...]`.

Finds every run directory (one holding ``summary.json``) under the given roots (discovery.py),
reads all their Parquet histories in one Spark job and recomputes, from raw rows, the per-run
figures the checkers define (bench/check/): ``move_seconds``, ``unavailable_seconds`` (per move,
and per fault until its recovery: the ``outages`` of summary.json), produce latency quantiles
before / during / after each action (from raw samples; pooled per configuration, never averaged),
error counts; plus a produce timeline for the report (passes.py, in the order job.py runs them).
``bytes_moved`` and move phases come from the (few) event rows, which are the only rows brought to
the driver; action windows, fault recoveries and move candidates are the checkers' own
(bench/check/windows.py, plan.py), so both agree. Rows per move, fault and run (rows.py), the
per-configuration table (configs.py), the move models' fits and checks (fits.py).

Outputs under ``--out`` (default ``results/aggregate/``): one Parquet and one CSV file per table
(:data:`TABLES`, tables.py: importable without Spark) and ``model.json``; ``bench aggregate`` adds
``summary.md`` (bench/report/summary.py).
"""

from bench.analysis.aggregate.configs import config_table
from bench.analysis.aggregate.discovery import (
    UNKNOWN, StoredRun, config_key, discover_runs, history_files, machine_label, provenance_of, setting_text,
    span_phases,
)
from bench.analysis.aggregate.fits import (
    FIT_ACTIONS, ack_lags, fit_models, handover_seconds, model_move, move_points, projection_model,
    rebalance_checks, validation_rows,
)
from bench.analysis.aggregate.job import AggregateError, AggregateResult, aggregate, compute, write_outputs
from bench.analysis.aggregate.spark import APPROX_ACCURACY, QUANTILES, jvm_cpu_s, read_histories, spark_session
from bench.analysis.aggregate.tables import (
    CONSUMER_FIGURES, DEFAULT_OUT, PROTOCOL_FIGURES, SAFETY_CHECKS, SAFETY_COUNTS, SPREAD_FIGURES, TABLES, write_table,
)

__all__ = [
    "APPROX_ACCURACY", "CONSUMER_FIGURES", "DEFAULT_OUT", "FIT_ACTIONS", "PROTOCOL_FIGURES", "QUANTILES",
    "SAFETY_CHECKS", "SAFETY_COUNTS", "SPREAD_FIGURES", "TABLES", "UNKNOWN", "AggregateError", "AggregateResult",
    "StoredRun", "ack_lags", "aggregate", "compute", "config_key", "config_table", "discover_runs", "fit_models",
    "handover_seconds", "history_files", "jvm_cpu_s", "machine_label", "model_move", "move_points",
    "projection_model", "provenance_of", "read_histories", "rebalance_checks", "setting_text", "span_phases",
    "spark_session", "validation_rows", "write_outputs", "write_table",
]
