"""Spark aggregation of run directories: `python -m bench aggregate [RESULTS_DIR ...]`.

Finds every run directory (one holding ``summary.json``) under the given roots, reads all their
Parquet histories in one Spark job and recomputes, from raw rows, the per-run figures the checkers
define (bench/check/): ``move_seconds``, ``unavailable_seconds`` (per move, and per fault until
its recovery: the ``outages`` of summary.json), produce latency quantiles before / during / after
each action (from raw samples; pooled per configuration, never averaged), error counts; plus a
produce timeline for the report. ``bytes_moved`` and move phases come from the (few) event rows,
which are the only rows brought to the driver; action windows and fault recoveries are rebuilt
from them with the checkers' own :class:`~bench.check.view.HistoryView` and
:func:`~bench.check.moves.fault_recoveries` so both agree.

Outputs under ``--out`` (default ``results/aggregate/``): one Parquet and one CSV file per table
(see :data:`TABLES`), ``model.json`` and ``summary.md``. Quantiles: ``approx`` (default) is Spark's
``percentile_approx`` with accuracy 100000 (rank error <= n / 100000); ``exact`` is Spark's
``percentile`` (linear interpolation, the same definition as numpy / the checkers) and is several
times slower on millions of rows.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.analysis import model as mdl
from bench.analysis import projection, rebalance
from bench.check.moves import (
    BYTES_SPLIT_NOTE, LINK_WAYS, check_bytes_moved, copy_start, fault_recoveries, move_link_fill, move_markers, outage_of,
    split_bytes_moved,
)
from bench.check.safety import VERDICTS, verdict, verdict_counts
from bench.check.view import UNAVAILABLE_POST_S, UNAVAILABLE_PRE_S, HistoryView
from bench.history.names import (EVENT_CONSUMERS_READY, EVENT_LEADER_CHANGE, EVENT_LINK_SAMPLE, EVENT_MOVE_COMPLETE,
                                 EVENT_MOVE_PHASE, EVENT_MOVE_PROGRESS)
from bench.history.store import SCHEMA
from bench.scenario import FAULT_RECOVERY, MOVE_ACTIONS, OWN_SETTINGS, RECOVERY_ACTIONS
from bench.units import MISSING, format_bytes, parse_bytes, rate_bits
from systems.registry import PROFILES

DEFAULT_OUT = Path("results/aggregate")
APPROX_ACCURACY = 100_000
QUANTILES = (0.5, 0.99, 0.999)
EVENT_COLS = ("kind", "ts", "msg_id", "topic", "partition", "event", "detail")
SAFETY_CHECKS = ("lost_writes", "duplicates", "reordering", "unexpected", "lost_prefill")
SAFETY_COUNTS = {"lost_writes": "lost_count", "duplicates": "duplicated_count", "reordering": "reordered_count",
                 "unexpected": "unexpected_count", "lost_prefill": "lost_prefill_count"}
# A move as the Kafka protocol alone shows it (summary.json moves[].protocol), beside the
# brokers' journal where there is one: request -> a client sees a target lead, -> the cluster no
# longer lists the reassignment, -> the journal's move_complete; the added replicas' size.
PROTOCOL_FIGURES = ("protocol_leader_change_seconds", "protocol_reassignment_seconds", "journal_complete_seconds",
                    "protocol_target_bytes")
PHASES = ("before", "during", "after")  # an action's latency windows (bench.check.moves.action_windows)
# The consumers table's figures given per configuration as median, min and max over its runs.
CONSUMER_FIGURES = ("e2e_during_p99_ms", "e2e_before_p99_ms", "e2e_after_p99_ms", "gap_seconds",
                    "catch_up_during_bytes_per_s", "catch_up_before_bytes_per_s")
# Per-configuration figures given as median, min and max over its runs (configs table).
SPREAD_FIGURES = ("move_seconds", "unavailable_seconds", "outage_seconds", "recovery_seconds",
                  "producer_unavailable_seconds", "partition_bytes", "copy_bytes_at_request", "bytes_moved",
                  "bytes_moved_at_request",
                  "bytes_moved_during_move", *PROTOCOL_FIGURES, *CONSUMER_FIGURES)
UNKNOWN = "unknown"  # a provenance or configuration fact a summary does not carry
NICE_BINS = (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300)
TIMELINE_BINS = 60  # at most this many bins per run timeline (coarse enough not to alias batched acks)
TIMELINE_ACCURACY = 1_000  # per-bin latency quantiles for the figure only (rank error <= n / 1000)


class AggregateError(Exception):
    """A user-facing problem (no runs, unreadable input): printed, never a traceback."""


# --------------------------------------------------------------------------------------------
# Output tables: name -> ordered (column, type). The contract with bench/analysis/report.py.

F64, I64, STR, BOOL = pa.float64(), pa.int64(), pa.string(), pa.bool_()
TABLES: dict[str, list[tuple[str, pa.DataType]]] = {
    "runs": [
        ("run_key", STR), ("run_id", STR), ("run_dir", STR), ("scenario", STR), ("system", STR),
        ("config_key", STR), ("config_label", STR), ("repetition", I64), ("repetitions", I64),
        ("synthetic", BOOL), ("started_at", STR), ("duration_s", F64),
        # summary.json's provenance (null / "unknown" for a summary written before it existed)
        ("date", STR), ("git_commit", STR), ("git_dirty", BOOL), ("machine", STR), ("versions", STR),
        ("links_emulated", BOOL), ("configuration", STR),
        ("prefill_bytes_per_partition", F64), ("replication_throttle_bytes_per_s", F64),
        ("objstore_bandwidth_bytes_per_s", F64), ("bandwidth_bytes_per_s", F64), ("message_bytes", F64),
        ("produce_rate_msgs_per_s", F64), ("brokers", I64),
        ("history_rows", I64), ("sends", I64), ("acked", I64), ("send_fail", I64), ("send_info", I64),
        ("reads", I64), ("events", I64), ("malformed_events", I64),
        ("load_start", F64), ("load_end", F64),
        ("latency_count", I64), ("latency_p50_ms", F64), ("latency_p99_ms", F64),
        ("latency_p999_ms", F64), ("latency_max_ms", F64),
        ("moves", I64), ("max_move_seconds", F64), ("max_unavailable_seconds", F64),
        ("run_max_unavailable_seconds", F64), ("bytes_moved", F64),
        ("valid", STR), ("failed_checks", STR),
        ("lost_writes", STR), ("duplicates", STR), ("reordering", STR), ("unexpected", STR), ("lost_prefill", STR),
        ("lost_count", I64), ("duplicated_count", I64), ("reordered_count", I64), ("unexpected_count", I64),
        ("lost_prefill_count", I64),
        ("timeline_t0", F64), ("timeline_bin_s", F64),
    ],
    "moves": [
        ("run_key", STR), ("system", STR), ("config_key", STR), ("action_id", STR), ("action", STR),
        ("topic", STR), ("partition", I64), ("new_leader", I64),
        ("request_ts", F64), ("leader_change_ts", F64), ("first_ack_ts", F64), ("end_ts", F64),
        ("move_seconds", F64), ("move_seconds_status", STR), ("summary_move_seconds", F64),
        ("unavailable_seconds", F64),
        ("partition_bytes", F64), ("partition_bytes_source", STR), ("produced_bytes_before_move", F64),
        ("bytes_moved_inter_broker", F64), ("bytes_moved_objstore", F64), ("bytes_moved", F64),
        ("bytes_written_during_move", F64), ("bytes_moved_at_request", F64), ("bytes_moved_during_move", F64),
        ("bytes_source", STR), ("unuploaded_bytes", F64),
        # the bytes the leader told the new replica to copy (tiered storage: the local tail; null:
        # it copied the whole log), bench.check.moves.copy_start
        ("copy_bytes_at_request", F64),
        ("replication_throttle_bytes_per_s", F64), ("objstore_bandwidth_bytes_per_s", F64),
        ("bandwidth_bytes_per_s", F64), ("phases_json", STR),
        # The move models' inputs: ingest during the move (bytes written during it / move_seconds),
        # the stream objects the new owner opened and its open phases' seconds (handover family),
        # how many partitions the action moved (the models fit single-partition moves only).
        ("ingest_bytes_per_s", F64), ("objects", F64), ("open_seconds", F64), ("partitions_in_action", I64),
        *[(name, F64) for name in PROTOCOL_FIGURES],
        ("with_consumers", BOOL),  # its run had workload consumers (not a move the models rest on)
    ],
    "latency": [
        ("level", STR), ("key", STR), ("system", STR), ("action_id", STR), ("scope", STR),
        ("phase", STR), ("from_ts", F64), ("to_ts", F64), ("count", I64), ("p50_ms", F64),
        ("p99_ms", F64), ("p999_ms", F64), ("max_ms", F64), ("info_count", I64), ("fail_count", I64),
        ("runs", STR),
    ],
    # Per run and fault action, as summary.json's ``outages`` (recomputed from the raw rows;
    # summary_unavailable_seconds is the run's summary.json figure, for tracing).
    "outages": [
        ("run_key", STR), ("run_id", STR), ("scenario", STR), ("system", STR), ("config_key", STR),
        ("action_id", STR), ("action", STR), ("broker", I64), ("start_ts", F64), ("partitions", STR),
        ("unavailable_seconds", F64), ("worst_partition", STR), ("recovered_by", STR), ("new_leader", I64),
        ("recovery_seconds", F64), ("first_ack_seconds", F64), ("summary_unavailable_seconds", F64),
    ],
    # Emulated links (runs on links only): every link_sample, per node (tx = sent by the node).
    "links": [("run_key", STR), ("system", STR), ("ts", F64), ("t_rel_s", F64), ("node", STR),
              ("tx_bytes_per_s", F64), ("rx_bytes_per_s", F64), ("rate_bits", F64)],
    # Per move and node of its links, as summary.json's moves[].links
    # (bench.check.moves.move_link_fill), with this table's move_seconds.
    "move_links": [
        ("run_key", STR), ("system", STR), ("config_key", STR), ("action_id", STR), ("topic", STR),
        ("partition", I64), ("partition_bytes", F64), ("move_seconds", F64), ("from_ts", F64), ("to_ts", F64),
        ("samples", I64), ("node", STR), ("role", STR),
        ("tx_mean_utilisation", F64), ("tx_peak_utilisation", F64), ("tx_mean_bytes_per_s", F64),
        ("tx_peak_bytes_per_s", F64), ("rx_mean_utilisation", F64), ("rx_peak_utilisation", F64),
        ("rx_mean_bytes_per_s", F64), ("rx_peak_bytes_per_s", F64),
    ],
    # The workload's consumer groups per run and action, as summary.json's ``consumers`` (the
    # checkers in bench/check/consumers.py, from raw samples): end-to-end latency of tail groups
    # on the action's partitions, the longest gap without a delivery, catch-up read rates.
    "consumers": [
        ("run_key", STR), ("system", STR), ("config_key", STR), ("scenario", STR), ("action_id", STR),
        ("action", STR), *[(f"e2e_{ph}_{q}_ms", F64) for ph in PHASES for q in ("p50", "p99", "p999")],
        ("e2e_during_count", I64), ("gap_seconds", F64),
        *[(f"catch_up_{ph}_bytes_per_s", F64) for ph in PHASES],
        ("run_e2e_p50_ms", F64), ("run_e2e_p99_ms", F64), ("catch_up_bytes_per_s", F64),
        ("catch_up_seconds", F64), ("backlog_bytes", F64), ("groups", I64), ("delivery_valid", STR),
        ("missing", I64), ("redelivered", I64),
    ],
    # Per run and time bin (the timeline's bins): tail groups' end-to-end latency quantiles by
    # delivery time (first delivery of each message), catch-up groups' delivered bytes per second.
    "consumer_timeline": [("run_key", STR), ("system", STR), ("bin", I64), ("t_rel_s", F64), ("bin_s", F64),
                          ("delivered", I64), ("e2e_p50_ms", F64), ("e2e_p99_ms", F64),
                          ("catch_up_bytes_per_s", F64)],
    "errors": [("run_key", STR), ("system", STR), ("outcome", STR), ("error", STR), ("count", I64)],
    # move_phase events of move actions; span: a phase timed from the request that holds other
    # phases (the system's profile names it), never to be stacked on them.
    "phases": [("run_key", STR), ("system", STR), ("config_key", STR), ("action_id", STR), ("phase", STR),
               ("span", BOOL), ("seconds", F64), ("bytes", F64)],
    # move_progress events of move actions (bench/run/move_progress.py: what `bench reassign
    # --verify` prints), t_rel_s from the move request.
    "move_progress": [("run_key", STR), ("system", STR), ("config_key", STR), ("action_id", STR), ("topic", STR),
                      ("partition", I64), ("t_rel_s", F64), ("to_move_bytes", F64), ("done_bytes", F64),
                      ("remaining_bytes", F64), ("rate_bytes_per_s", F64), ("eta_s", F64)],
    "timeline": [("run_key", STR), ("system", STR), ("bin", I64), ("t_rel_s", F64), ("bin_s", F64),
                 ("sent", I64), ("acked", I64), ("fail", I64), ("info", I64),
                 ("acks_per_s", F64), ("p50_ms", F64), ("p99_ms", F64)],
    # Per configuration (its repetitions pooled): a figure's median, min and max over its runs'
    # values (moves / faults); latency quantiles pooled from the raw samples of all its runs.
    "configs": [
        ("config_key", STR), ("config_label", STR), ("scenario", STR), ("system", STR),
        ("configuration", STR), ("prefill_bytes_per_partition", F64),
        ("replication_throttle_bytes_per_s", F64), ("objstore_bandwidth_bytes_per_s", F64),
        ("bandwidth_bytes_per_s", F64), ("runs", I64), ("repetitions", I64), ("run_keys", STR), ("moves", I64),
        *[(f"{m}_{s}", F64) for m in SPREAD_FIGURES for s in ("median", "min", "max")],
        ("move_seconds_stdev", F64), ("faults", I64),
        ("during_p99_ms", F64), ("before_p99_ms", F64),
        ("lost_count", I64), ("duplicated_count", I64),
        *[(f"valid_{v}", I64) for v in VERDICTS],
    ],
    "model_fit": [
        ("system", STR), ("family", STR), ("formula", STR), ("fixed_s", F64), ("fixed_se", F64),
        ("efficiency", F64), ("efficiency_se", F64), ("efficiency_fitted", BOOL), ("open_fixed_s", F64),
        ("open_per_object_s", F64), ("open_per_object_se", F64), ("open_objects_max", F64), ("open_n", I64),
        ("r2", F64), ("rmse_s", F64), ("n", I64), ("runs", STR), ("assumptions", STR),
        ("validated", BOOL), ("validation_error_pct", F64), ("validation_reason", STR),
    ],
    # One row per held-out check (bench.analysis.model.validate; axis "rebalance": the cluster
    # simulation against a measured multi-partition run).
    "model_validation": [
        ("system", STR), ("axis", STR), ("held_out_value", F64), ("label", STR), ("family", STR), ("status", STR),
        ("reason", STR), ("error_pct", F64), ("max_abs_error_pct", F64), ("target_pct", F64), ("measured_s", F64),
        ("predicted_s", F64), ("train_values", STR), ("train_runs", STR), ("test_runs", STR), ("n_train", I64),
        ("n_test", I64),
    ],
    "projection": [
        ("system", STR), ("link_gbit_s", F64), ("link_bytes_per_s", F64), ("size_label", STR),
        ("partition_bytes", F64), ("ingest_bytes_per_s", F64), ("move_seconds", F64), ("move_seconds_se", F64),
        ("move_time", STR), ("never", BOOL), ("bytes_moved", F64), ("validated", BOOL), ("error_pct", F64),
        ("reason", STR), ("basis", STR), ("based_on_runs", STR),
    ],
    # Simulated cluster rebalances (bench.analysis.projection / rebalance).
    "rebalance": [
        ("system", STR), ("brokers", I64), ("add", I64), ("total_bytes", F64), ("partitions", I64), ("rf", I64),
        ("link_gbit_s", F64), ("concurrency", I64), ("ingest_per_partition", F64), ("throttle_share", F64),
        ("upload_threshold_bytes", F64), ("moves", I64), ("rebalance_seconds", F64), ("bytes_moved", F64),
        ("never", I64), ("producer_seconds_above_target", F64), ("validated", BOOL), ("headline", BOOL),
        ("sim_seconds", F64),
    ],
}


def write_table(name: str, rows: list[dict[str, Any]], out: Path) -> pa.Table:
    cols = TABLES[name]
    schema = pa.schema(cols)
    data = {c: [_cell(r.get(c), t) for r in rows] for c, t in cols}
    table = pa.Table.from_pydict(data, schema=schema)
    pq.write_table(table, out / f"{name}.parquet")
    with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([c for c, _ in cols])
        for r in rows:
            w.writerow(["" if (v := _cell(r.get(c), t)) is None else v for c, t in cols])
    return table


def _cell(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if t == F64:
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if math.isfinite(f) else None
    if t == I64:
        try:
            return int(v)
        except (TypeError, ValueError):
            return None
    if t == BOOL:
        return bool(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


# --------------------------------------------------------------------------------------------
# Finding runs


@dataclass
class Run:
    idx: int
    run_key: str  # run dir relative to its results root: unique and traceable
    run_dir: Path
    summary: dict[str, Any]
    history_files: list[Path]
    scenario: Any = None
    config_key: str = ""  # what groups repetitions: summary.json's config_id, else config_label
    config_label: str = ""
    # Filled by the aggregation:
    stats: dict[str, Any] = field(default_factory=dict)
    view: HistoryView | None = None

    @property
    def system(self) -> str:
        s = self.summary.get("system")
        if not s and self.scenario is not None:
            s = self.scenario.system.kind
        return str(s or "unknown")

    def param(self, name: str) -> Any:
        p = self.summary.get("params") or {}
        if p.get(name) is not None:
            return p[name]
        sc = self.scenario
        if sc is None:
            return None
        if name == "prefill_bytes_per_partition":
            return sc.prefill.bytes_per_partition
        if name in ("message_bytes", "produce_rate_msgs_per_s"):
            return getattr(sc.workload, name)
        return getattr(sc.system, name, None)  # brokers and the systems' settings

    @property
    def bandwidth(self) -> Any:
        """The run's cap on a move's bytes/s: the setting its profile names (throttle, object-store
        cap) and, on emulated links, the links a move crosses (the brokers'; the object store's
        for a system with one), whichever is lowest (None: uncapped, on loopback)."""
        p = PROFILES.get(self.system)
        caps = []
        if p is not None and p.bandwidth_param and self.param(p.bandwidth_param):
            caps.append(float(self.param(p.bandwidth_param)))
        for key in ("link_rate", "object_store_link_rate"):
            rate = (self.summary.get("params") or {}).get(key)
            if rate:
                caps.append(rate_bits(rate) / 8)
        return min(caps) if caps else None


def span_phases(system: str) -> set[str]:
    """The move phases a system times from the request (its profile's ``request_phase``): each
    holds the phases the move went through before it."""
    p = PROFILES.get(system)
    return {phase for _, phase in p.journal.request_phase.values()} if p is not None else set()


def history_files(run_dir: Path) -> list[Path]:
    """The compacted history, else the part files of a run still in progress / crashed."""
    h = run_dir / "history.parquet"
    if h.is_file():
        return [h]
    parts = run_dir / "history.parquet.parts"
    if parts.is_dir():
        return sorted(parts.glob("part-*.parquet"))
    return []


def discover_runs(roots: Sequence[str | os.PathLike[str]]) -> tuple[list[Run], list[str]]:
    """Every run dir (holding summary.json) under ``roots``. -> (runs, warnings)."""
    runs: list[Run] = []
    warnings: list[str] = []
    seen: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            warnings.append(f"{root}: does not exist")
            continue
        found = [root / "summary.json"] if (root / "summary.json").is_file() else sorted(root.rglob("summary.json"))
        for sj in found:
            d = sj.parent.resolve()
            if d in seen or "aggregate" in sj.relative_to(root).parts[:1]:
                continue
            seen.add(d)
            try:
                summary = json.loads(sj.read_text(encoding="utf-8"))
                if not isinstance(summary, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                warnings.append(f"{sj}: unreadable summary ({exc}); run skipped")
                continue
            files = history_files(sj.parent)
            if not files:
                warnings.append(f"{sj.parent}: no history.parquet; run skipped")
                continue
            key = d.name if d == root.resolve() else d.relative_to(root.resolve()).as_posix()
            run = Run(len(runs), key, sj.parent, summary, files)
            run.scenario = _load_scenario(sj.parent / "scenario.yaml", warnings)
            run.config_label = config_key(run)
            run.config_key = str(summary.get("config_id") or run.config_label)
            runs.append(run)
    # A configuration is one system's, on one cluster: the same scenario run with system.kind
    # pinned by --set (not a matrix axis) on two systems, or against two clusters the harness did
    # not start, has one config_id; what tells them apart joins the key then.
    identities: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        identities[r.config_key].add(_identity(r))
    for r in runs:
        if len(identities[r.config_key]) > 1:
            r.config_key = f"{r.config_key} [{_identity(r)}]"
    keys = [r.run_key for r in runs]
    if len(set(keys)) != len(keys):  # same relative path under two roots: use full paths
        for r in runs:
            r.run_key = r.run_dir.resolve().as_posix()
    return runs, warnings


def _load_scenario(path: Path, warnings: list[str]) -> Any:
    if not path.is_file():
        return None
    from bench.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        warnings.append(f"{path}: {str(exc).splitlines()[0]} (scenario ignored)")
        return None


def _fmt_b(v: Any, per_s: bool = False) -> str:
    if v is None:
        return "none"
    try:
        return format_bytes(parse_bytes(v), exact=True) + "/s" * per_s  # exact: never merge two sizes
    except (TypeError, ValueError):
        return str(v)


def _identity(run: Run) -> str:
    """The system, and for a cluster the harness did not start, which one (its label, else its
    bootstrap address)."""
    c = run.summary.get("configuration") or {}
    p = PROFILES.get(run.system)
    own = c.get("label") if c.get("label") and (p is None or c["label"] != p.label) else None
    where = c.get("bootstrap") and (own or c["bootstrap"].split(",")[0])
    return f"{run.system} at {where}" if where else run.system


def config_key(run: Run) -> str:
    """A configuration described for people (scenario, system and sweep parameters); it groups
    repetitions of runs whose summary names no ``config_id``."""
    name = str(run.summary.get("scenario") or (run.scenario.name if run.scenario else "?"))
    parts = [f"prefill {_fmt_b(run.param('prefill_bytes_per_partition'))}"]
    p = PROFILES.get(run.system)
    if p is not None and p.bandwidth_param:
        parts.append(f"{p.bandwidth_label} {_fmt_b(run.param(p.bandwidth_param), per_s=True)}")
    link = (run.summary.get("params") or {}).get("link_rate")
    if link:
        parts.append(f"link {link}")
    parts += [f"msg {_fmt_b(run.param('message_bytes'))}", f"rate {run.param('produce_rate_msgs_per_s')}/s",
              f"brokers {run.param('brokers')}"]
    # the system's own settings the scenario set (tiered-move's KIP-1023 and KIP-405 runs differ only there)
    params = run.summary.get("params") or {}
    parts += [_setting_text(k, params[k]) for k in OWN_SETTINGS if params.get(k) is not None]
    return f"{name} {_identity(run)}: " + ", ".join(parts)


# --------------------------------------------------------------------------------------------
# Spark


@contextmanager
def spark_session(master: str | None = None, *, driver_memory: str = "2g", shuffle_partitions: int = 4,
                  app_name: str = "reassign-bench-aggregate"):
    """A Spark session configured for this machine (local, loopback only, no UI); always stopped."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.adaptive.enabled", "true"))
    if master.startswith("local"):
        b = (b.config("spark.driver.memory", driver_memory)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def _spark_schema():
    from pyspark.sql import types as T

    m = {pa.string(): T.StringType(), pa.float64(): T.DoubleType(), pa.int64(): T.LongType(),
         pa.int32(): T.IntegerType()}
    return T.StructType([T.StructField(f.name, m[f.type], True) for f in SCHEMA])


def read_histories(spark, runs: Sequence[Run]):
    """All histories as one DataFrame with an int ``run_idx`` column (no data leaves Spark)."""
    from pyspark.sql import functions as F

    schema = _spark_schema()
    frames = [spark.read.schema(schema).parquet(*[str(f) for f in r.history_files])
              .withColumn("run_idx", F.lit(r.idx).cast("int")) for r in runs]
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    return df


def _q(col, mode: str, accuracy: int):
    from pyspark.sql import functions as F

    qs = F.array(*[F.lit(q) for q in QUANTILES])
    if mode == "exact":
        return F.percentile(col, qs)
    return F.percentile_approx(col, qs, accuracy)


# --------------------------------------------------------------------------------------------
# The job


@dataclass
class AggregateResult:
    out_dir: Path
    runs: list[Run]
    tables: dict[str, list[dict[str, Any]]]
    models: dict[str, Any]
    warnings: list[str]
    timings: dict[str, float]


def aggregate(roots: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str] = DEFAULT_OUT, *,
              spark=None, master: str | None = None, quantiles: str = "exact",
              accuracy: int = APPROX_ACCURACY, write: bool = True, project: bool = True) -> AggregateResult:
    """Discover runs under ``roots``, aggregate them with Spark, fit the models, project them
    (``project``: the grid and cluster simulations, :mod:`bench.analysis.projection`), write tables.

    ``spark``: an existing session (kept running); otherwise one is started and stopped here.
    Raises :class:`AggregateError` when there is nothing to aggregate.
    """
    if quantiles not in ("approx", "exact"):
        raise ValueError("quantiles must be 'approx' or 'exact'")
    runs, warnings = discover_runs(roots)
    if not runs:
        where = ", ".join(str(r) for r in roots) or "(no directory given)"
        raise AggregateError(
            f"no runs found under {where}: a run directory holds summary.json and history.parquet. "
            "Produce runs with `python -m bench run <scenario.yaml>` first." + "".join(f"\n  {w}" for w in warnings))
    if spark is None:
        with spark_session(master) as s:
            return aggregate(roots, out_dir, spark=s, quantiles=quantiles, accuracy=accuracy, write=write,
                             project=project)
    out = Path(out_dir)
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    tables = _compute(spark, runs, quantiles, accuracy, warnings, timings)
    t = time.perf_counter()
    models, model_tables = fit_models(tables["moves"], runs)
    models["validation"].extend(rebalance_checks(runs, tables["moves"], models["models"]))
    model_tables["model_validation"] = validation_rows(models["validation"])
    tables.update(model_tables)
    timings["models_s"] = time.perf_counter() - t
    t = time.perf_counter()
    models["projection"] = proj = projection.run(spark, models["models"], models["validation"],
                                                  out if write else None,
                                                  handover_seconds(tables["moves"], models["models"])) if project else {}
    if proj:  # every system with moves is in the headline, a system without a model saying why
        proj["headline"] = proj.get("headline", []) + projection.unmodelled(models["notes"])
    tables["projection"], tables["rebalance"] = proj.get("projection", []), proj.get("rebalance", [])
    for row in tables["model_fit"]:
        v = proj.get("validity", {}).get(row["system"]) or {}
        row.update(validated=v.get("validated"), validation_error_pct=v.get("error_pct"),
                   validation_reason=v.get("reason"))
    timings["projection_s"] = time.perf_counter() - t
    tables["configs"] = config_table(runs, tables)
    timings["total_s"] = time.perf_counter() - t_all
    for k in ("_cpu_start", "_cpu_last"):
        timings.pop(k, None)
    res = AggregateResult(out, runs, tables, models, warnings, timings)
    if write:
        write_outputs(res)
    return res


def _jvm_cpu_s() -> float | None:
    """CPU seconds used so far by this process's children (the local Spark JVM): a figure that
    holds up better than wall time on a shared machine."""
    try:
        import psutil

        return sum(sum(c.cpu_times()[:2]) for c in psutil.Process().children(recursive=True))
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def _cpu_mark(timings: dict[str, float], stage: str) -> None:
    now = _jvm_cpu_s()
    if now is None:
        return
    last = timings.pop("_cpu_last", timings.get("_cpu_start", now))
    timings[f"{stage}_jvm_cpu_s"] = now - last
    timings["_cpu_last"] = now


def _compute(spark, runs: list[Run], qmode: str, accuracy: int, warnings: list[str],
             timings: dict[str, float], cache: bool = False) -> dict[str, list[dict[str, Any]]]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    timings["_cpu_start"] = _jvm_cpu_s() or 0.0
    hist = read_histories(spark, runs)
    sends = (hist.filter(F.col("kind") == "send")
             .select("run_idx", "ts", "ack_ts", "outcome", "topic", "partition", "size_bytes")
             .withColumn("lat_ms", F.when((F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                                          (F.col("ack_ts") - F.col("ts")) * 1000.0)))
    if cache:
        from pyspark import StorageLevel

        sends = sends.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _compute_with(spark, runs, hist, sends, qmode, accuracy, warnings, timings, t0)
    finally:
        if cache:
            sends.unpersist()


def _compute_with(spark, runs, hist, sends, qmode, accuracy, warnings, timings, t0):
    from pyspark.sql import functions as F

    by_idx = {r.idx: r for r in runs}

    # 1. Per run: counts, load window, latency over the whole run (raw samples).
    is_send = F.col("kind") == "send"
    stats_rows = (hist.groupBy("run_idx").agg(
        F.count(F.lit(1)).alias("history_rows"),
        F.sum(is_send.cast("long")).alias("sends"),
        F.sum((is_send & (F.col("outcome") == "ok")).cast("long")).alias("send_ok"),
        F.sum((is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull()).cast("long")).alias("acked"),
        F.sum((is_send & (F.col("outcome") == "fail")).cast("long")).alias("send_fail"),
        F.sum((is_send & (F.col("outcome") == "info")).cast("long")).alias("send_info"),
        F.sum((F.col("kind") == "read").cast("long")).alias("reads"),
        F.sum((F.col("kind") == "event").cast("long")).alias("events"),
        F.min(F.when(is_send, F.col("ts"))).alias("load_start"),
        F.max(F.when(is_send, F.col("ts"))).alias("load_end"),
        F.min("ts").alias("first_ts"),
        # What a fault naming no partitions affects (every partition with a send; see below).
        F.collect_set(F.when(is_send & F.col("topic").isNotNull() & (F.col("partition") >= 0),
                             F.struct("topic", "partition"))).alias("sent_partitions"),
        F.count(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(), 1)).alias("latency_count"),
        _q(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                  (F.col("ack_ts") - F.col("ts")) * 1000.0), qmode, accuracy).alias("lat_q"),
        F.max(F.when(is_send & (F.col("outcome") == "ok") & F.col("ack_ts").isNotNull(),
                     (F.col("ack_ts") - F.col("ts")) * 1000.0)).alias("latency_max_ms"),
    ).collect())
    for row in stats_rows:
        st = row.asDict()
        q = st.pop("lat_q") or [None] * 3
        st.update(latency_p50_ms=q[0], latency_p99_ms=q[1], latency_p999_ms=q[2],
                  sent_partitions={(x["topic"], x["partition"]) for x in st["sent_partitions"]})
        if st["load_start"] is None:  # no sends: checkers fall back to the first ts
            st["load_start"] = st["load_end"] = st["first_ts"] or 0.0
        by_idx[row["run_idx"]].stats = st
    for r in runs:
        r.stats = r.stats or {"history_rows": 0, "sends": 0, "load_start": 0.0, "load_end": 0.0}

    # 2. Events (a few thousand rows per run; Parquet pushdown skips the rest) to the driver, and
    # actions rebuilt from them exactly as the checkers do.
    per_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in hist.filter(F.col("kind") == "event").select("run_idx", *EVENT_COLS).collect():
        d = row.asDict()
        per_run[d.pop("run_idx")].append(d)
    for r in runs:
        cols = {f: [e.get(f) for e in per_run.get(r.idx, [])] for f in SCHEMA.names}
        r.view = HistoryView(pa.Table.from_pydict(cols, schema=SCHEMA), r.scenario)
        _ = r.view.events  # parse once (counts malformed events)
    timings["scan_s"] = time.perf_counter() - t0
    _cpu_mark(timings, "scan")

    # 3. Driver-side plan: move candidates, unavailability windows (faults: with their recoveries),
    # latency windows, timeline bins.
    move_keys: list[dict[str, Any]] = []
    unav_windows: list[dict[str, Any]] = []
    faults: list[tuple[Run, Any, list[dict[str, Any]]]] = []
    lat_windows: list[dict[str, Any]] = []
    tl_params: list[dict[str, Any]] = []
    bytes_by_action: dict[tuple[int, str], dict[str, Any]] = {}
    phases_rows: list[dict[str, Any]] = []
    progress_rows: list[dict[str, Any]] = []
    for r in runs:
        v = r.view
        ls, le = float(r.stats["load_start"]), float(r.stats["load_end"])
        acts = v.actions
        move_keys += _move_candidates(r, v)
        leader_changes = v.events_named(EVENT_LEADER_CHANGE)
        for a in acts:
            if a.kind in RECOVERY_ACTIONS:
                continue  # no window of its own: it ends its fault's
            w0 = max(a.start - UNAVAILABLE_PRE_S, ls)
            if a.kind in FAULT_RECOVERY:
                # Window [w0, first ack at/after the partition's recovery] (the pass finds that ack;
                # none: the end of the load), as check_unavailable_seconds defines it.
                recs = fault_recoveries(v, _named_fault(a, r), leader_changes)
                faults.append((r, a, recs))
                unav_windows += [{"run_idx": r.idx, "action_id": str(a.action_id), "topic": x["topic"],
                                  "partition": x["partition"], "w0": w0, "w1": max(le, w0),
                                  "rec_ts": x["recovery_ts"]} for x in recs]
                continue
            end = a.end if a.end is not None else le
            w1 = max(min(end + UNAVAILABLE_POST_S, le), w0)
            for tp in sorted(a.partitions):
                unav_windows.append({"run_idx": r.idx, "action_id": str(a.action_id), "topic": tp[0],
                                     "partition": tp[1], "w0": w0, "w1": w1, "rec_ts": None})
        prev_end = ls
        for i, a in enumerate(acts):
            nxt = acts[i + 1].start if i + 1 < len(acts) else le
            end = a.end if a.end is not None else max(nxt, a.start)
            bounds = {"before": (max(ls, prev_end), a.start, False), "during": (a.start, end, False),
                      "after": (end, max(nxt, end), True)}
            for ph, (lo, hi, inc) in bounds.items():
                base = {"run_idx": r.idx, "action_id": str(a.action_id), "phase": ph, "lo": lo, "hi": hi,
                        "inc": inc}
                lat_windows.append({**base, "scope": "all", "topic": None, "partition": None})
                for tp in sorted(a.partitions):
                    lat_windows.append({**base, "scope": "partitions", "topic": tp[0], "partition": tp[1]})
            prev_end = end
        bm = check_bytes_moved(v)
        for a in bm["actions"]:
            bytes_by_action[(r.idx, str(a["action_id"]))] = a
        # Phases of move actions only: a broker also opens and closes partitions at start-up and
        # shutdown (no action id), which are no move's.
        move_ids = {str(a.action_id) for a in acts if a.kind in MOVE_ACTIONS}
        spans = span_phases(r.system)
        for e in v.events_named(EVENT_MOVE_PHASE):
            if e.action_id is None or str(e.action_id) not in move_ids:
                continue
            phase = str(e.detail.get("phase"))
            phases_rows.append({"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
                                "action_id": str(e.action_id), "phase": phase, "span": phase in spans,
                                "seconds": float(e.detail.get("seconds") or 0.0),
                                "bytes": float(e.detail.get("bytes") or 0.0)})
        starts = {str(a.action_id): a.start for a in acts if a.kind in MOVE_ACTIONS}
        for e in v.events_named(EVENT_MOVE_PROGRESS):
            if e.action_id is None or str(e.action_id) not in starts:
                continue
            progress_rows.append({"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
                                  "action_id": str(e.action_id), "topic": e.topic, "partition": e.partition,
                                  "t_rel_s": e.ts - starts[str(e.action_id)],
                                  **{k: e.detail.get(k) for k in ("to_move_bytes", "done_bytes", "remaining_bytes",
                                                                  "rate_bytes_per_s", "eta_s")}})
        moves_acts = [a for a in acts if a.kind in MOVE_ACTIONS] or acts
        t_ref = moves_acts[0].start if moves_acts else ls
        span = max(le - ls, 1e-3)
        bin_s = next((b for b in NICE_BINS if span / b <= TIMELINE_BINS), NICE_BINS[-1])
        tl_params.append({"run_idx": r.idx, "t0": t_ref, "bin_s": float(bin_s)})
        r.stats.update(timeline_t0=t_ref, timeline_bin_s=float(bin_s))

    t1 = time.perf_counter()
    # 4. Per action and partition it acts on, in one pass over its acked sends: the first ack
    # served by the new owner (move_seconds), the longest ack-free interval in the action's window
    # (unavailable_seconds) and the bytes acked before the request (partition size estimate).
    per_tp, run_gaps = _partition_pass(spark, sends, runs, unav_windows, move_keys)
    first_acks = per_tp
    gaps = {k: v["unavailable_seconds"] for k, v in per_tp.items()}
    timings["moves_unavailable_s"] = time.perf_counter() - t1
    _cpu_mark(timings, "moves_unavailable")

    # 6. Latency before/during/after each action, per run and pooled per configuration.
    t2 = time.perf_counter()
    latency_rows = _latency(spark, sends, lat_windows, runs, qmode, accuracy)
    timings["latency_s"] = time.perf_counter() - t2
    _cpu_mark(timings, "latency")

    # 7. Timeline (sent/acked per bin, latency quantiles per bin) and error counts.
    t3 = time.perf_counter()
    timeline_rows = _timeline(spark, sends, tl_params, runs, qmode, accuracy)
    err_rows = (hist.filter((F.col("kind") == "send") & (F.col("outcome") != "ok"))
                .groupBy("run_idx", "outcome", "error").count().collect())
    errors = [{"run_key": by_idx[e["run_idx"]].run_key, "system": by_idx[e["run_idx"]].system,
               "outcome": e["outcome"], "error": e["error"], "count": e["count"]} for e in err_rows]
    errors.sort(key=lambda e: (e["run_key"], -e["count"]))
    timings["timeline_errors_s"] = time.perf_counter() - t3
    _cpu_mark(timings, "timeline_errors")

    t4 = time.perf_counter()
    consumer_timeline = _consumer_timeline(spark, hist, tl_params, runs, qmode, accuracy)
    timings["consumers_s"] = time.perf_counter() - t4
    _cpu_mark(timings, "consumers")

    # 8. Assemble per-move, per-fault and per-run rows.
    moves = _move_rows(runs, move_keys, first_acks, gaps, bytes_by_action)
    run_rows = _run_rows(runs, moves, gaps, run_gaps)
    return {"runs": run_rows, "moves": moves, "outages": _outage_rows(faults, per_tp), "latency": latency_rows,
            "errors": errors, "phases": phases_rows, "move_progress": progress_rows, "timeline": timeline_rows, "links": _link_rows(runs),
            "move_links": _move_link_rows(runs, moves), "consumers": _consumer_rows(runs),
            "consumer_timeline": consumer_timeline}


def _consumer_modes(runs: list[Run]) -> list[tuple[int, str, str]]:
    """(run_idx, group, mode) of every run's workload consumer groups (its consumers_ready event)."""
    out = []
    for r in runs:
        ev = r.view.events_named(EVENT_CONSUMERS_READY)
        for gid, g in ((ev[0].detail.get("groups") or {}).items() if ev else ()):
            out.append((r.idx, str(gid), str(g.get("mode"))))
    return out


def _consumer_timeline(spark, hist, params: list[dict[str, Any]], runs: list[Run], qmode: str,
                       accuracy: int) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    modes = _consumer_modes(runs)
    if not modes or not params:
        return []
    m = spark.createDataFrame(modes, "run_idx int, group string, mode string")
    p = spark.createDataFrame([(x["run_idx"], x["t0"], x["bin_s"]) for x in params],
                              "run_idx int, t0 double, bin_s double")
    d = (hist.filter(F.col("kind") == "deliver").select("run_idx", "ts", "msg_id", "group", "size_bytes")
         .join(F.broadcast(m), ["run_idx", "group"]).join(F.broadcast(p), "run_idx"))
    sent = (hist.filter((F.col("kind") == "send") & (F.col("msg_id") >= 0))
            .groupBy("run_idx", "msg_id").agg(F.min("ts").alias("send_ts")))
    first = (d.filter((F.col("mode") == "tail") & (F.col("msg_id") >= 0))
             .groupBy("run_idx", "group", "msg_id").agg(F.min("ts").alias("ts"), F.first("t0").alias("t0"),
                                                         F.first("bin_s").alias("bin_s"))
             .join(sent, ["run_idx", "msg_id"]))
    tail = (first.withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
            .groupBy("run_idx", "bin").agg(
                F.count(F.lit(1)).alias("delivered"),
                _q((F.col("ts") - F.col("send_ts")) * 1000.0, qmode, min(accuracy, TIMELINE_ACCURACY)).alias("q"))
            .collect())
    catch = (d.filter(F.col("mode") == "catch_up")
             .withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
             .groupBy("run_idx", "bin").agg(F.sum("size_bytes").alias("bytes")).collect())
    by_idx = {r.idx: r for r in runs}
    binw = {x["run_idx"]: x["bin_s"] for x in params}
    rows: dict[tuple[int, int], dict[str, Any]] = {}

    def row(ri: int, b: int) -> dict[str, Any]:
        if (ri, b) not in rows:
            rows[(ri, b)] = {"run_key": by_idx[ri].run_key, "system": by_idx[ri].system, "bin": b,
                             "t_rel_s": b * binw[ri], "bin_s": binw[ri], "delivered": 0, "e2e_p50_ms": None,
                             "e2e_p99_ms": None, "catch_up_bytes_per_s": None}
        return rows[(ri, b)]

    for x in tail:
        q = x["q"] or [None] * 3
        row(x["run_idx"], x["bin"]).update(delivered=x["delivered"], e2e_p50_ms=q[0], e2e_p99_ms=q[1])
    for x in catch:
        row(x["run_idx"], x["bin"])["catch_up_bytes_per_s"] = float(x["bytes"] or 0) / binw[x["run_idx"]]
    return [rows[k] for k in sorted(rows, key=lambda k: (by_idx[k[0]].run_key, k[1]))]


def _consumer_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """Per run with consumers and per action: summary.json's ``consumers`` figures."""
    rows = []
    for r in runs:
        c = r.summary.get("consumers")
        if not isinstance(c, dict):
            continue
        cu = [g for g in (c.get("catch_up") or {}).values() if isinstance(g, dict)]
        groups = c.get("groups") or {}
        run = {"run_key": r.run_key, "system": r.system, "config_key": r.config_key,
               "scenario": r.summary.get("scenario"),
               "run_e2e_p50_ms": (c.get("end_to_end_ms") or {}).get("p50_ms"),
               "run_e2e_p99_ms": (c.get("end_to_end_ms") or {}).get("p99_ms"),
               "catch_up_bytes_per_s": _med([g.get("bytes_per_s") for g in cu if g.get("bytes_per_s") is not None]),
               "catch_up_seconds": _med([g.get("catch_up_seconds") for g in cu
                                         if g.get("catch_up_seconds") is not None]),
               "backlog_bytes": _med([g.get("backlog_bytes") for g in cu if g.get("backlog_bytes") is not None]),
               "groups": len(groups), "delivery_valid": str(c.get("delivery_valid")).lower(),
               "missing": sum(int(g.get("missing") or 0) + int(g.get("missing_backlog") or 0) for g in groups.values()),
               "redelivered": sum(int(g.get("redelivered") or 0) for g in groups.values())}
        for a in c.get("actions") or []:
            if a.get("action") in RECOVERY_ACTIONS:
                continue  # its effect is the end of its fault's windows
            e2e = a.get("end_to_end_ms") or {}
            rates = a.get("catch_up_bytes_per_s") or {}
            rows.append({**run, "action_id": str(a.get("action_id")), "action": a.get("action"),
                         **{f"e2e_{ph}_{q}_ms": (e2e.get(ph) or {}).get(f"{q}_ms")
                            for ph in PHASES for q in ("p50", "p99", "p999")},
                         "e2e_during_count": (e2e.get("during") or {}).get("count"),
                         "gap_seconds": a.get("gap_seconds"),
                         **{f"catch_up_{ph}_bytes_per_s": rates.get(ph) for ph in PHASES}})
    rows.sort(key=lambda x: (x["run_key"], x["action_id"]))
    return rows


def _named_fault(a: Any, r: Run) -> Any:
    """The fault as :func:`fault_recoveries` needs it. A controller / object-store fault that names
    no partitions affects every partition with a send, which it finds among the sends of its view;
    the aggregate's view holds only events, so name them from the Spark scan instead."""
    if a.partitions or a.broker is not None:
        return a
    return replace(a, logged=set(r.stats.get("sent_partitions") or ()))


def _outage_rows(faults: list[tuple[Run, Any, list[dict[str, Any]]]],
                 per_tp: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fault action, summary.json's ``outages`` figures (bench/check/summary.py) from the fault
    windows: the worst affected partition's outage; when and how the last of them recovered."""
    rows = []
    for r, a, recs in faults:
        aid = str(a.action_id)
        win = [{**x, **per_tp[(r.idx, aid, x["topic"], x["partition"])]} for x in recs]
        fig = outage_of(a.start, [{**w, "first_ack_ts": w["recovered_ack_ts"]} for w in win])
        summ = next((o for o in r.summary.get("outages") or []
                     if isinstance(o, dict) and str(o.get("action_id")) == aid), {})
        rows.append({
            "run_key": r.run_key, "run_id": r.summary.get("run_id"),
            "scenario": r.summary.get("scenario") or (r.scenario.name if r.scenario else None),
            "system": r.system, "config_key": r.config_key, "action_id": aid, "action": a.kind,
            "broker": a.broker, "start_ts": a.start, "partitions": ",".join(fig["partitions"]),
            **{k: fig[k] for k in ("unavailable_seconds", "worst_partition", "recovered_by")},
            "new_leader": fig.get("new_leader"),
            **{k: fig[k] for k in ("recovery_seconds", "first_ack_seconds")},
            "summary_unavailable_seconds": summ.get("unavailable_seconds"),
        })
    rows.sort(key=lambda x: (x["run_key"], x["start_ts"]))
    return rows


def _move_candidates(r: Run, v: HistoryView) -> list[dict[str, Any]]:
    """Per move action and partition: request ts and the leader change to the new owner, chosen
    exactly as :func:`bench.checkers.check_move_seconds` chooses it."""
    out = []
    leader_changes = v.events_named(EVENT_LEADER_CHANGE)
    completes = v.events_named(EVENT_MOVE_COMPLETE)
    for a in v.actions:
        if a.kind not in MOVE_ACTIONS:
            continue
        for tp in sorted(a.partitions):
            _, new_leader, lc = move_markers(a, tp, completes, leader_changes)
            out.append({"run_idx": r.idx, "action_id": str(a.action_id), "action": a.kind, "topic": tp[0],
                        "partition": tp[1], "request_ts": a.start, "end_ts": a.end,
                        "lc_ts": lc.ts if lc is not None else None,
                        "new_leader": lc.detail["leader"] if lc is not None else new_leader})
    return out


def _partition_pass(spark, sends, runs: list[Run], windows: list[dict[str, Any]],
                    move_keys: list[dict[str, Any]]) -> tuple[dict[tuple, dict[str, Any]], dict[int, float]]:
    """One sort of every partition's acks, then one aggregation (two grouping sets) giving:

    * per (run, action, partition) window ``[w0, w1]``: ``unavailable_seconds`` = the longest
      interval in the window without an ack (window edges count), ``first_ack_ts`` = the first ack
      of a send invoked at/after the request and acked at/after the leader change (move_seconds),
      ``produced_before`` = bytes acked before the request, ``produced_during`` = from the request
      to the leader change (summary.json's ``bytes_written_during_move``); a fault's window (``rec_ts``: its
      partition's recovery) ends instead at ``recovered_ack_ts``, the first ack at/after
      ``rec_ts``, if there is one;
    * per run: the longest ack-free interval of any partition with a send over the load window.

    ``d`` = an ack's distance to the previous ack of its partition; a gap lies inside a window
    when both its acks do (``ack_ts - d >= w0``). An ack is at or before the first ack at/after
    ``rec_ts`` when it or its predecessor is before ``rec_ts``, so a fault window needs no second
    pass. -> (per window key, per run_idx).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    tpk = ["run_idx", "topic", "partition"]
    lw = spark.createDataFrame([(r.idx, float(r.stats["load_start"]), float(r.stats["load_end"])) for r in runs],
                               "run_idx int, ls double, le double")
    mk = {(m["run_idx"], m["action_id"], m["topic"], m["partition"]): m for m in move_keys}
    wrows = []
    for x in windows:
        m = mk.get((x["run_idx"], x["action_id"], x["topic"], x["partition"]), {})
        wrows.append((x["run_idx"], x["action_id"], x["topic"], x["partition"], x["w0"], x["w1"],
                      x["rec_ts"], m.get("request_ts"), m.get("lc_ts")))
    w = spark.createDataFrame(wrows or [(-1, "", "", -1, 0.0, 0.0, None, None, None)],
                              "run_idx int, action_id string, topic string, partition int, w0 double, "
                              "w1 double, rec_ts double, request_ts double, lc_ts double")
    acks = F.when(F.col("lat_ms").isNotNull(), F.col("ack_ts"))
    s = (sends.filter(F.col("topic").isNotNull() & (F.col("partition") >= 0))
         .select(*tpk, "ts", "size_bytes", acks.alias("ack"))
         .withColumn("d", F.col("ack") - F.lag("ack").over(Window.partitionBy(*tpk).orderBy("ack")))
         .join(F.broadcast(lw), "run_idx")
         .join(F.broadcast(w), tpk, "left"))
    ack, d, rec = F.col("ack"), F.col("d"), F.col("rec_ts")
    in_load = (ack >= F.col("ls")) & (ack <= F.col("le"))
    in_w = (ack >= F.col("w0")) & (ack <= F.col("w1"))
    in_fault = (ack >= F.col("w0")) & ((ack < rec) | d.isNull() | (ack - d < rec))
    res = (s.groupBy(*tpk, "action_id").agg(
        F.max(F.when(in_load & (ack - d >= F.col("ls")), d)).alias("run_inner"),
        F.min(F.when(in_load, ack)).alias("run_first"), F.max(F.when(in_load, ack)).alias("run_last"),
        F.max(F.when(in_w & (ack - d >= F.col("w0")), d)).alias("inner"),
        F.min(F.when(in_w, ack)).alias("first"), F.max(F.when(in_w, ack)).alias("last"),
        F.min(F.when(ack >= rec, ack)).alias("rec_ack"),
        F.max(F.when(in_fault & (ack - d >= F.col("w0")), d)).alias("rec_inner"),
        F.min(F.when(in_fault, ack)).alias("rec_first"),
        F.min(F.when((F.col("ts") >= F.col("request_ts")) & F.col("lc_ts").isNotNull()
                     & (ack >= F.col("lc_ts")), ack)).alias("first_ack_ts"),
        F.sum(F.when(ack < F.col("request_ts"), F.col("size_bytes"))).alias("produced_before"),
        F.sum(F.when((ack >= F.col("request_ts")) & (ack < F.col("lc_ts")), F.col("size_bytes"))).alias("produced_during"),
    ).collect())
    found = {(x["run_idx"], x["action_id"], x["topic"], x["partition"]): x.asDict() for x in res}
    out = {}
    for x in windows:
        k = (x["run_idx"], x["action_id"], x["topic"], x["partition"])
        g = found.get(k) or {"first": None, "first_ack_ts": None, "produced_before": None, "produced_during": None,
                             "rec_ack": None}
        rec_ack = g["rec_ack"] if x["rec_ts"] is not None else None
        if rec_ack is not None:  # a recovered fault: [w0, its first ack after recovery]
            w1 = max(rec_ack, x["w0"])
            gap = w1 - x["w0"] if g["rec_first"] is None else max(g["rec_first"] - x["w0"], g["rec_inner"] or 0.0)
        elif g["first"] is None:
            gap = x["w1"] - x["w0"]  # no ack at all in the window: the whole window
        else:
            gap = max(g["first"] - x["w0"], x["w1"] - g["last"], g["inner"] or 0.0)
        out[k] = {"unavailable_seconds": gap, "first_ack_ts": g["first_ack_ts"],
                  "produced_before": g["produced_before"], "recovered_ack_ts": rec_ack,
                  # acked from the request to the leader change (none acked: 0; no leader change: unknown)
                  "produced_during": None if mk.get(k, {}).get("lc_ts") is None else (g["produced_during"] or 0)}
    win = {r.idx: (float(r.stats["load_start"]), float(r.stats["load_end"])) for r in runs}
    run_gaps: dict[int, float] = {}
    for x in res:  # rows of one partition (one per window on it) carry the same run_* values
        ls, le = win[x["run_idx"]]
        g = le - ls if x["run_first"] is None else max(x["run_first"] - ls, le - x["run_last"], x["run_inner"] or 0.0)
        run_gaps[x["run_idx"]] = max(run_gaps.get(x["run_idx"], 0.0), g)
    return out, run_gaps


def _latency(spark, sends, windows: list[dict[str, Any]], runs: list[Run], qmode: str,
             accuracy: int) -> list[dict[str, Any]]:
    """Latency quantiles per (run, action, scope, phase) and pooled per (configuration, action,
    scope, phase), always from raw samples (a configuration's quantiles are never averaged from
    its runs')."""
    from pyspark.sql import functions as F

    if not windows:
        return []
    by_idx = {r.idx: r for r in runs}
    w = spark.createDataFrame(
        [(x["run_idx"], x["action_id"], x["phase"], x["scope"], x["topic"], x["partition"], x["lo"], x["hi"],
          x["inc"], by_idx[x["run_idx"]].config_key) for x in windows],
        "run_idx int, action_id string, phase string, scope string, wtopic string, wpartition int, "
        "lo double, hi double, inc boolean, config_key string")
    s = sends.select("run_idx", "ts", "lat_ms", "outcome", "topic", "partition")
    cond = ((s["run_idx"] == w["run_idx"]) & (s["ts"] >= w["lo"])
            & ((s["ts"] < w["hi"]) | (w["inc"] & (s["ts"] == w["hi"])))
            & (w["wtopic"].isNull() | ((s["topic"] == w["wtopic"]) & (s["partition"] == w["wpartition"]))))
    j = s.join(F.broadcast(w), cond).select(s["run_idx"], "config_key", "action_id", "scope", "phase",
                                            "lat_ms", "outcome")
    qfn = (_q(F.col("lat_ms"), qmode, accuracy)).alias("q")
    aggs = [F.count("lat_ms").alias("n"), qfn, F.max("lat_ms").alias("mx"),
            F.sum((F.col("outcome") == "info").cast("long")).alias("info_count"),
            F.sum((F.col("outcome") == "fail").cast("long")).alias("fail_count")]
    res = [{**x.asDict(), "pooled": 0} for x in
           j.groupBy("config_key", "run_idx", "action_id", "scope", "phase").agg(*aggs).collect()]
    # Pooled per configuration: only where a configuration has several runs (else it is the run).
    n_runs: dict[str, int] = defaultdict(int)
    for r in runs:
        n_runs[r.config_key] += 1
    multi = sorted(r.idx for r in runs if n_runs[r.config_key] > 1)
    if multi:
        res += [{**x.asDict(), "pooled": 1, "run_idx": None} for x in
                j.filter(F.col("run_idx").isin(multi)).groupBy("config_key", "action_id", "scope", "phase")
                .agg(*aggs).collect()]
    got = {(x["pooled"], x["config_key"], x["run_idx"], x["action_id"], x["scope"], x["phase"]): x for x in res}
    out = []
    seen_w = {}
    for x in windows:  # one row per planned window, even if no send fell in it
        seen_w.setdefault((x["run_idx"], x["action_id"], x["scope"], x["phase"]), x)
    for (ri, aid, scope, ph), x in seen_w.items():
        r = by_idx[ri]
        g = got.get((0, r.config_key, ri, aid, scope, ph))
        out.append(_lat_row("run", r.run_key, r.system, aid, scope, ph, x["lo"], x["hi"], g, r.run_key))
    cfg_runs: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        cfg_runs[r.config_key].append(r.run_key)
    pooled = sorted({(by_idx[ri].config_key, aid, scope, ph) for (ri, aid, scope, ph) in seen_w})
    for ck, aid, scope, ph in pooled:
        if n_runs[ck] > 1:
            g = got.get((1, ck, None, aid, scope, ph))
        else:  # one run: its figures are the configuration's
            ri = next(r.idx for r in runs if r.config_key == ck)
            g = got.get((0, ck, ri, aid, scope, ph))
        system = next(r.system for r in runs if r.config_key == ck)
        out.append(_lat_row("config", ck, system, aid, scope, ph, None, None, g, ",".join(sorted(cfg_runs[ck]))))
    return out


def _lat_row(level, key, system, aid, scope, ph, lo, hi, g, runs) -> dict[str, Any]:
    q = (g["q"] if g is not None else None) or [None] * 3
    return {"level": level, "key": key, "system": system, "action_id": aid, "scope": scope, "phase": ph,
            "from_ts": lo, "to_ts": hi, "count": g["n"] if g is not None else 0, "p50_ms": q[0], "p99_ms": q[1],
            "p999_ms": q[2], "max_ms": g["mx"] if g is not None else None,
            "info_count": (g["info_count"] or 0) if g is not None else 0,
            "fail_count": (g["fail_count"] or 0) if g is not None else 0, "runs": runs}


def _timeline(spark, sends, params: list[dict[str, Any]], runs: list[Run], qmode: str,
              accuracy: int) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    if not params:
        return []
    p = spark.createDataFrame([(x["run_idx"], x["t0"], x["bin_s"]) for x in params],
                              "run_idx int, t0 double, bin_s double")
    s = sends.join(F.broadcast(p), "run_idx")
    by_send = (s.withColumn("bin", F.floor((F.col("ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
               .groupBy("run_idx", "bin").agg(
                   F.count(F.lit(1)).alias("sent"),
                   F.sum((F.col("outcome") == "fail").cast("long")).alias("fail"),
                   F.sum((F.col("outcome") == "info").cast("long")).alias("info"),
                   _q(F.col("lat_ms"), qmode, min(accuracy, TIMELINE_ACCURACY)).alias("q")).collect())
    by_ack = (s.filter(F.col("lat_ms").isNotNull())
              .withColumn("bin", F.floor((F.col("ack_ts") - F.col("t0")) / F.col("bin_s")).cast("long"))
              .groupBy("run_idx", "bin").count().collect())
    by_idx = {r.idx: r for r in runs}
    binw = {x["run_idx"]: x["bin_s"] for x in params}
    rows: dict[tuple[int, int], dict[str, Any]] = {}

    def row(ri: int, b: int) -> dict[str, Any]:
        k = (ri, b)
        if k not in rows:
            rows[k] = {"run_key": by_idx[ri].run_key, "system": by_idx[ri].system, "bin": b,
                       "t_rel_s": b * binw[ri], "bin_s": binw[ri], "sent": 0, "acked": 0, "fail": 0, "info": 0,
                       "acks_per_s": 0.0, "p50_ms": None, "p99_ms": None}
        return rows[k]

    for x in by_send:
        q = x["q"] or [None] * 3
        row(x["run_idx"], x["bin"]).update(sent=x["sent"], fail=x["fail"], info=x["info"], p50_ms=q[0], p99_ms=q[1])
    for x in by_ack:
        rr = row(x["run_idx"], x["bin"])
        rr.update(acked=x["count"], acks_per_s=x["count"] / binw[x["run_idx"]])
    return [rows[k] for k in sorted(rows, key=lambda k: (by_idx[k[0]].run_key, k[1]))]


def _summary_moves(r: Run) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for m in r.summary.get("moves") or []:
        if isinstance(m, dict) and m.get("topic") is not None and m.get("partition") is not None:
            out[(str(m.get("action_id")), str(m["topic"]), int(m["partition"]))] = m
    return out


def _unuploaded_from_phases(phases: dict[str, dict[str, float]]) -> float | None:
    b = [ph["bytes"] for name, ph in phases.items()
         if any(w in name.lower() for w in ("upload", "flush", "unuploaded", "tail")) and ph["bytes"]]
    return float(sum(b)) if b else None


def _open_of(phases: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """The phases that report the objects they walked are the new owner's open: their objects
    and summed seconds."""
    opens = [ph for ph in phases.values() if "objects" in ph]
    if not opens:
        return {"objects": None, "open_seconds": None}
    return {"objects": max(ph["objects"] for ph in opens), "open_seconds": sum(ph["seconds"] for ph in opens)}


def _protocol_of(p: dict[str, Any] | None) -> dict[str, Any]:
    p = p or {}
    target = p.get("target_bytes")
    return {"protocol_leader_change_seconds": p.get("leader_change_seconds"),
            "protocol_reassignment_seconds": p.get("reassignment_seconds"),
            "journal_complete_seconds": p.get("journal_complete_seconds"),
            "protocol_target_bytes": float(sum(target.values())) if target else None}


def _move_rows(runs, move_keys, first_acks, gaps, bytes_by_action) -> list[dict[str, Any]]:
    by_idx = {r.idx: r for r in runs}
    phases: dict[tuple[int, str], dict[str, dict[str, float]]] = defaultdict(dict)
    for r in runs:
        for e in r.view.events_named(EVENT_MOVE_PHASE):
            ph = phases[(r.idx, str(e.action_id))].setdefault(str(e.detail.get("phase")), {"seconds": 0.0, "bytes": 0.0})
            ph["seconds"] += float(e.detail.get("seconds") or 0.0)
            ph["bytes"] += float(e.detail.get("bytes") or 0.0)
            if isinstance(e.detail.get("objects"), (int, float)):  # an open phase: the objects it walked
                ph["objects"] = max(float(e.detail["objects"]), ph.get("objects", 0.0))
    sm_cache = {r.idx: _summary_moves(r) for r in runs}
    n_parts: dict[tuple[int, str], int] = defaultdict(int)
    for m in move_keys:
        n_parts[(m["run_idx"], m["action_id"])] += 1
    rows = []
    for m in move_keys:
        r = by_idx[m["run_idx"]]
        k = (m["run_idx"], m["action_id"], m["topic"], m["partition"])
        fa = first_acks.get(k, {})
        first = fa.get("first_ack_ts")
        if m["lc_ts"] is None:
            secs, status = None, "unknown: no leader_change to the new leader"
        elif first is None:
            secs, status = None, "unknown: no ack after the leader change"
        else:
            secs, status = first - m["request_ts"], "ok"
        sm = sm_cache[r.idx].get((m["action_id"], m["topic"], m["partition"]), {})
        produced = fa.get("produced_before")
        prefill = r.param("prefill_bytes_per_partition")
        if sm.get("partition_bytes") is not None:
            pbytes, psrc = float(sm["partition_bytes"]), "summary"
        elif prefill is not None:
            pbytes, psrc = float(prefill) + float(produced or 0), "prefill+produced"
        else:
            pbytes, psrc = None, "unknown"
        single = n_parts[(m["run_idx"], m["action_id"])] == 1
        ba = bytes_by_action.get((m["run_idx"], m["action_id"]), {})
        if sm.get("bytes_moved_inter_broker") is not None or sm.get("bytes_moved_objstore") is not None:
            ib, ob, bsrc = sm.get("bytes_moved_inter_broker"), sm.get("bytes_moved_objstore"), "summary"
        elif ba and single:
            ib, ob, bsrc = ba.get("inter_broker_bytes"), ba.get("objstore_bytes"), "counters"
        else:
            ib = ob = None
            bsrc = "counters (action total, several partitions)" if ba else "none"
        moved = None if ib is None and ob is None else float(ib or 0) + float(ob or 0)
        if "bytes_written_during_move" in sm:
            during = sm["bytes_written_during_move"]
        else:  # a summary from before the split: the same definition from the raw rows
            during = fa.get("produced_during")
        ph = phases.get((m["run_idx"], m["action_id"]), {})
        copy_bytes = None
        if "copy_bytes_at_request" in sm:
            copy_bytes = sm["copy_bytes_at_request"]
        elif r.view is not None:  # a summary from before the field: the same definition from the raw rows
            added = set(sm.get("to") or ()) - set(sm.get("from") or ()) or None
            aid = next((a.action_id for a in r.view.actions if str(a.action_id) == m["action_id"]), m["action_id"])
            start = copy_start(r.view, aid, (m["topic"], m["partition"]), added)
            copy_bytes = start["bytes_to_copy"] if start else None
        unupl = _unuploaded_from_phases(ph) if single else None
        if unupl is None and mdl.family(r.system) == mdl.HANDOVER_MODEL:
            unupl = float(ob) if ob is not None else None
        rows.append({
            "run_key": r.run_key, "system": r.system, "config_key": r.config_key, "action_id": m["action_id"],
            "action": m["action"], "topic": m["topic"], "partition": m["partition"],
            "new_leader": m["new_leader"], "request_ts": m["request_ts"], "leader_change_ts": m["lc_ts"],
            "first_ack_ts": first, "end_ts": m["end_ts"], "move_seconds": secs, "move_seconds_status": status,
            "summary_move_seconds": sm.get("move_seconds") if isinstance(sm.get("move_seconds"), (int, float)) else None,
            "unavailable_seconds": gaps.get(k),
            "partition_bytes": pbytes, "partition_bytes_source": psrc, "produced_bytes_before_move": produced,
            "bytes_moved_inter_broker": ib, "bytes_moved_objstore": ob, "bytes_moved": moved, "bytes_source": bsrc,
            "bytes_written_during_move": during, **split_bytes_moved(moved, during),
            "unuploaded_bytes": unupl,
            "copy_bytes_at_request": None if copy_bytes is None else float(copy_bytes),
            "replication_throttle_bytes_per_s": r.param("replication_throttle_bytes_per_s"),
            "objstore_bandwidth_bytes_per_s": r.param("objstore_bandwidth_bytes_per_s"),
            "bandwidth_bytes_per_s": r.bandwidth,
            "phases_json": json.dumps(ph, sort_keys=True) if ph else None,
            "ingest_bytes_per_s": float(during) / secs if during is not None and secs else None,
            **(_open_of(ph) if single else {"objects": None, "open_seconds": None}),
            "partitions_in_action": n_parts[(m["run_idx"], m["action_id"])],
            **_protocol_of(sm.get("protocol")),
            "with_consumers": isinstance(r.summary.get("consumers"), dict),
        })
    rows.sort(key=lambda x: (x["run_key"], x["request_ts"] or 0, x["topic"], x["partition"]))
    return rows


def _link_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """Every link_sample of every run, one row per node; t_rel_s from the run's load start."""
    rows = []
    for r in runs:
        ls = float(r.stats["load_start"])
        for e in sorted(r.view.events_named(EVENT_LINK_SAMPLE), key=lambda e: e.ts):
            for node, d in sorted(e.detail.items()):
                if isinstance(d, dict):
                    rows.append({"run_key": r.run_key, "system": r.system, "ts": e.ts, "t_rel_s": e.ts - ls,
                                 "node": node, "tx_bytes_per_s": d.get("tx_bytes_per_s"),
                                 "rx_bytes_per_s": d.get("rx_bytes_per_s"), "rate_bits": d.get("rate_bits")})
    return rows


def _move_link_rows(runs: list[Run], moves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per move (a row of the moves table) and node: :func:`move_link_fill` over the move's window."""
    by_key = {r.run_key: r for r in runs}
    acts = {r.run_key: {str(a.action_id): a for a in r.view.actions} for r in runs}
    rows = []
    for m in moves:
        r = by_key[m["run_key"]]
        fill = move_link_fill(r.view, acts[r.run_key][m["action_id"]], (m["topic"], m["partition"]),
                              m["move_seconds"])
        if fill is None:
            continue
        for node, x in fill["nodes"].items():
            rows.append({**{k: m[k] for k in ("run_key", "system", "config_key", "action_id", "topic", "partition",
                                               "partition_bytes", "move_seconds")},
                         "from_ts": fill["from_ts"], "to_ts": fill["to_ts"], "samples": fill["samples"],
                         "node": node, "role": x["role"],
                         **{f"{way}_{k}": x.get(way, {}).get(k) for way in LINK_WAYS
                            for k in ("mean_utilisation", "peak_utilisation", "mean_bytes_per_s", "peak_bytes_per_s")}})
    return rows


def provenance_of(summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json's ``provenance`` ({} for a summary written before it existed)."""
    p = summary.get("provenance")
    return p if isinstance(p, dict) else {}


def machine_label(machine: Any) -> str:
    """``2 cores, 23.5 GiB, kernel 6.18.44, Python 3.11.7`` (unknown parts left out)."""
    if not isinstance(machine, dict) or not machine:
        return UNKNOWN
    parts = []
    if machine.get("cpus") is not None:
        parts.append(f"{machine['cpus']} cores")
    if isinstance(machine.get("mem_gib"), (int, float)):
        parts.append(f"{fmt_num(machine['mem_gib'])} GiB")
    if machine.get("kernel"):
        parts.append(f"kernel {machine['kernel']}")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    return ", ".join(parts) or UNKNOWN


def commit_label(commit: Any, dirty: Any) -> str:
    """``29ada24cecb0`` / ``29ada24cecb0 (dirty)`` / unknown."""
    if not commit:
        return UNKNOWN
    return str(commit)[:12] + (" (dirty)" if dirty else "" if dirty is False else " (dirty: unknown)")


def _json_or_none(x: Any) -> str | None:
    return json.dumps(x, sort_keys=True) if isinstance(x, dict) and x else None


def _run_rows(runs, moves, gaps, run_gaps) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        st = r.stats
        checks = r.summary.get("checks") or {}
        mine = [m for m in moves if m["run_key"] == r.run_key]
        secs = [m["move_seconds"] for m in mine if m["move_seconds"] is not None]
        ug = [g for (ri, *_), g in gaps.items() if ri == r.idx]
        bm = [m["bytes_moved"] for m in mine if m["bytes_moved"] is not None]
        failed = checks.get("failed")
        prov = provenance_of(r.summary)
        git = prov.get("git") if isinstance(prov.get("git"), dict) else {}
        row = {
            "run_key": r.run_key, "run_id": r.summary.get("run_id"), "run_dir": str(r.run_dir),
            "scenario": r.summary.get("scenario") or (r.scenario.name if r.scenario else None),
            "system": r.system, "config_key": r.config_key, "synthetic": bool(r.summary.get("synthetic")),
            "config_label": r.config_label, "repetition": r.summary.get("repetition"),
            "repetitions": r.summary.get("repetitions"),
            "started_at": r.summary.get("started_at"), "duration_s": r.summary.get("duration_s"),
            "date": prov.get("date"), "git_commit": git.get("commit"), "git_dirty": git.get("dirty"),
            "machine": machine_label(prov.get("machine")), "versions": _json_or_none(prov.get("versions")),
            "links_emulated": prov.get("links_emulated"),
            "configuration": _json_or_none(r.summary.get("configuration")),
            **{p: r.param(p) for p in ("prefill_bytes_per_partition", "replication_throttle_bytes_per_s",
                                       "objstore_bandwidth_bytes_per_s", "message_bytes",
                                       "produce_rate_msgs_per_s", "brokers")},
            "bandwidth_bytes_per_s": r.bandwidth,
            **{k: st.get(k) for k in ("history_rows", "sends", "acked", "send_fail", "send_info", "reads", "events",
                                      "load_start", "load_end", "latency_count", "latency_p50_ms", "latency_p99_ms",
                                      "latency_p999_ms", "latency_max_ms", "timeline_t0", "timeline_bin_s")},
            "malformed_events": r.view.bad_events if r.view else 0,
            "moves": len(mine), "max_move_seconds": max(secs) if secs else None,
            "max_unavailable_seconds": max(ug) if ug else None,
            "run_max_unavailable_seconds": run_gaps.get(r.idx),
            "bytes_moved": sum(bm) if bm else None,
            "valid": verdict(checks.get("valid", "unknown")),
            "failed_checks": ",".join(failed) if isinstance(failed, list) else None,
        }
        for name in SAFETY_CHECKS:
            c = checks.get(name)
            row[name] = verdict(c.get("valid") if isinstance(c, dict) else c)
            # a count of an unknown check (no reads) is no count
            row[SAFETY_COUNTS[name]] = (c.get(SAFETY_COUNTS[name]) if isinstance(c, dict) and row[name] != "unknown"
                                        else None)
        rows.append(row)
    rows.sort(key=lambda x: x["run_key"])
    return rows


# --------------------------------------------------------------------------------------------
# Models and per-configuration table


FIT_ACTIONS = ("reassign", "move_set")  # the measured moves the models rest on (not drains, scale-outs, faults)


def model_move(m: dict[str, Any]) -> bool:
    """A move the models may rest on: a single-partition reassign / move_set of a run without
    workload consumers (consumers' reads share the links a move crosses, which the models do not
    describe)."""
    return (m.get("action") in FIT_ACTIONS and (m.get("partitions_in_action") or 1) == 1
            and not m.get("with_consumers"))


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def move_points(moves: Iterable[dict[str, Any]], runs: Sequence[Run] = ()) -> list[mdl.MovePoint]:
    """One model input per measured single-partition move of a reassign / move_set action, with
    its run's settings (summary.json params) for grouping the held-out checks."""
    params = {r.run_key: tuple(sorted((k, _hashable(v)) for k, v in (r.summary.get("params") or {}).items()))
              for r in runs}
    pts = []
    for m in moves:
        if (m.get("move_seconds") is None or m.get("partition_bytes") is None or not model_move(m)
                or mdl.family(m["system"]) is None):
            continue
        bw = m.get("bandwidth_bytes_per_s")
        pts.append(mdl.MovePoint(
            m["system"], m["run_key"], float(m["move_seconds"]), float(m["partition_bytes"]),
            float(bw) if bw else None, float(m.get("ingest_bytes_per_s") or 0.0),
            None if m.get("unuploaded_bytes") is None else float(m["unuploaded_bytes"]),
            None if m.get("objects") is None else float(m["objects"]),
            None if m.get("open_seconds") is None else float(m["open_seconds"]), params.get(m["run_key"], ()),
            None if m.get("leader_change_ts") is None or m.get("request_ts") is None
            else float(m["leader_change_ts"]) - float(m["request_ts"]),
            None if m.get("copy_bytes_at_request") is None else float(m["copy_bytes_at_request"])))
    return pts


def projection_model(pts: list[mdl.MovePoint], validation: list[dict[str, Any]], system: str) -> mdl.MoveModel:
    """The model a system projects with: fitted on every move of the family (one configuration
    but for the checked axis) of its best passing held-out check - a size check reaching the
    largest held-out size first, then throttle, link, ingest (a tiered copy's bytes do not grow
    with the size: its throttle check is the one that passes). Without a passing check, on the
    family with the most moves of the first axis whose moves identify a model (then the
    projection says "not validated")."""
    mine = [p for p in pts if p.system == system]
    if not mine:
        raise ValueError(f"{system}: no measured single-partition moves")
    order = list(mdl.AXES)

    def families(axis: str) -> dict[tuple, list[mdl.MovePoint]]:
        fams: dict[tuple, list[mdl.MovePoint]] = defaultdict(list)
        for p in mine:
            fams[mdl.family_key(p, axis)].append(p)
        return fams

    ok = [v for v in validation if v["system"] == system and v["status"] == "ok" and v["axis"] in order]
    for v in sorted(ok, key=lambda v: (order.index(v["axis"]), -float(v["held_out"].get(v["axis"]) or 0.0))):
        fams = families(v["axis"])
        chosen = next((fk for fk, fp in fams.items() if v["test_runs"][0] in {p.run_key for p in fp}), None)
        if chosen is not None:
            return mdl.fit_model(fams[chosen], system, mine)
    first: ValueError | None = None
    for axis in order:
        fams = families(axis)
        chosen = max(fams, key=lambda fk: (len(fams[fk]), str(fk)))
        try:
            return mdl.fit_model(fams[chosen], system, mine)
        except ValueError as exc:
            first = first or exc
    raise first  # type: ignore[misc]


def fit_models(moves: list[dict[str, Any]], runs: Sequence[Run] = ()
               ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """-> ({"models", "notes", "validation"}, {"model_fit", "model_validation"} rows)."""
    pts = move_points(moves, runs)
    models: dict[str, mdl.MoveModel] = {}
    notes: dict[str, str] = {}
    validation: list[dict[str, Any]] = []
    for system in PROFILES:
        if not any(p.system == system for p in pts):
            continue
        mine = [p for p in pts if p.system == system]
        validation.extend(mdl.validate(mine, system, open_points=mine))
        try:
            models[system] = projection_model(pts, validation, system)
        except ValueError as exc:
            notes[system] = str(exc)
    return ({"models": models, "notes": notes, "validation": validation},
            {"model_fit": [m.to_row() for m in models.values()], "model_validation": validation_rows(validation)})


REBALANCE_MIN_MOVES = 2  # an action moving at least this many partitions is a rebalance to simulate
REBALANCE_TARGET_PCT = 20.0


def rebalance_checks(runs: Sequence[Run], moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]
                     ) -> list[dict[str, Any]]:
    """The cluster simulation (bench.analysis.rebalance) against every measured multi-partition move
    action, per configuration: the median predicted vs the median measured time to rebalance
    (first request -> last moved partition's first ack). The models are fitted on single moves only,
    so these runs are held out by construction."""
    by_cfg: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    lags = ack_lags(moves, models)
    for r in runs:
        m = models.get(r.system)
        if m is None or r.scenario is None:
            continue
        rows = [x for x in moves if x["run_key"] == r.run_key and (x["partitions_in_action"] or 0) >= REBALANCE_MIN_MOVES]
        for aid in sorted({x["action_id"] for x in rows}):
            rows_of = [x for x in rows if x["action_id"] == aid]
            acts = r.scenario.actions  # action ids are the actions' indexes in the scenario
            conc = getattr(acts[int(aid)], "concurrency", None) if aid.isdigit() and int(aid) < len(acts) else None
            # The client's ack lag (leader change -> first ack) holds no concurrency slot: the
            # simulator adds it once at the end, so it leaves the per-move fixed cost.
            lag = lags.get(r.system, 0.0)
            params = {"family": m.family, "fixed_s": max(0.0, m.fixed_s - lag), "efficiency": m.efficiency,
                      "open_per_object_s": m.open_per_object_s, "ack_lag_s": lag}
            try:
                pred = rebalance.predict_run(rows_of, params, concurrency=conc,
                                             sources=rebalance.sources_from_summary(r.summary))
            except (ValueError, KeyError) as exc:
                pred = {"error": str(exc)}
            by_cfg[(r.config_key, aid)].append({"run": r, "rows": rows_of, "pred": pred, "concurrency": conc})
    out = []
    for (ck, aid), items in sorted(by_cfg.items()):
        r0 = items[0]["run"]
        ok = [i for i in items if i["pred"].get("measured_seconds") and i["pred"].get("predicted_seconds") is not None]
        label = (f"{r0.summary.get('scenario') or r0.config_label}: {len(items[0]['rows'])} moves, concurrency "
                 f"{items[0]['concurrency'] or 'all'}")
        base = {"system": r0.system, "axis": "rebalance", "held_out": {"rebalance": float(len(items[0]["rows"]))},
                "label": label, "family": ck, "target_pct": REBALANCE_TARGET_PCT, "train_values": [],
                "train_runs": models[r0.system].runs, "test_runs": sorted(i["run"].run_key for i in items),
                "n_train": models[r0.system].n, "n_test": len(items), "max_abs_error_pct": None}
        if not ok:
            why = next((i["pred"].get("error") for i in items if i["pred"].get("error")), "no measured time to rebalance")
            out.append({**base, "status": "insufficient", "reason": why, "error_pct": None,
                        "measured_s": None, "predicted_s": None})
            continue
        meas = statistics.median(i["pred"]["measured_seconds"] for i in ok)
        pred = statistics.median(i["pred"]["predicted_seconds"] for i in ok)
        err = (pred - meas) / meas * 100.0 if math.isfinite(pred) else math.inf
        good = abs(err) <= REBALANCE_TARGET_PCT
        out.append({**base, "status": "ok" if good else "failed",
                    "reason": None if good else f"|error| {abs(err):.1f} % > {REBALANCE_TARGET_PCT:g} %",
                    "error_pct": err, "measured_s": meas, "predicted_s": pred,
                    "max_abs_error_pct": max(abs(i["pred"]["error_pct"]) for i in ok
                                             if i["pred"].get("error_pct") is not None)})
    return out


def ack_lags(moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]) -> dict[str, float]:
    """Per system: the median leader change -> first ack over every single-partition move the
    models may fit on (the client's lag: its metadata refresh and, for a target it has no
    connection to, the connect; the same for any partition size)."""
    out = {}
    for system in models:
        xs = [x["first_ack_ts"] - x["leader_change_ts"] for x in moves if x["system"] == system
              and model_move(x) and x["first_ack_ts"] is not None and x["leader_change_ts"] is not None]
        if xs:
            out[system] = max(0.0, statistics.median(xs))
    return out


def handover_seconds(moves: list[dict[str, Any]], models: dict[str, mdl.MoveModel]) -> dict[str, float]:
    """Per system: the median unavailability of a moved partition over the moves its model rests on."""
    out = {}
    for system, m in models.items():
        keys = set(m.runs)
        xs = [x["unavailable_seconds"] for x in moves if x["run_key"] in keys and x["unavailable_seconds"] is not None]
        if xs:
            out[system] = statistics.median(xs)
    return out


def validation_rows(validation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for v in validation:
        held = v.get("held_out") or {}
        rows.append({**{k: v.get(k) for k in ("system", "axis", "label", "family", "status", "reason", "error_pct",
                                             "max_abs_error_pct", "target_pct", "measured_s", "predicted_s",
                                             "n_train", "n_test")},
                     "held_out_value": next(iter(held.values()), None),
                     "train_values": ",".join(f"{x:g}" for x in v.get("train_values") or []),
                     "train_runs": ",".join(v.get("train_runs") or []), "test_runs": ",".join(v.get("test_runs") or [])})
    return rows


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _spread_cols(name: str, xs: Iterable[Any]) -> dict[str, float | None]:
    known = [float(x) for x in xs if x is not None]
    return {f"{name}_median": _med(known), f"{name}_min": min(known, default=None),
            f"{name}_max": max(known, default=None)}


def _sum_known(xs: Iterable[Any]) -> int | None:
    known = [int(x) for x in xs if x is not None]
    return sum(known) if known else None


def config_table(runs: list[Run], tables: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per configuration (its repetitions together): the median, min and max of each figure over
    its moves, faults or runs; latency quantiles pooled from its runs' raw samples."""
    by_cfg: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_cfg[r.config_key].append(r)
    lat = {(x["key"], x["scope"], x["phase"]): x for x in tables["latency"]
           if x["level"] == "config" and x["scope"] == "partitions"}
    out = []
    for ck, rs in sorted(by_cfg.items()):
        keys = {r.run_key for r in rs}
        mv = [m for m in tables["moves"] if m["run_key"] in keys]
        outages = [o for o in tables["outages"] if o["run_key"] in keys]
        run_rows = [x for x in tables["runs"] if x["run_key"] in keys]
        secs = [m["move_seconds"] for m in mv if m["move_seconds"] is not None]
        r0 = rs[0]
        # First move's windows, else the first fault's, whose "during" is from the fault to the next
        # action (its recovery): pooled raw samples over the configuration's runs.
        acts = [(m["action_id"], "during") for m in mv] or [(o["action_id"], "after") for o in outages]
        first_aid, while_ = min(acts, default=(None, "during"), key=lambda a: (len(a[0]), a[0]))
        during = next((x for (k, s, p), x in lat.items() if k == ck and p == while_ and x["action_id"] == first_aid), None)
        before = next((x for (k, s, p), x in lat.items() if k == ck and p == "before" and x["action_id"] == first_aid), None)
        planned = [r.summary.get("repetitions") for r in rs if isinstance(r.summary.get("repetitions"), int)]
        row = {
            "config_key": ck, "config_label": r0.config_label, "scenario": r0.summary.get("scenario"),
            "system": r0.system, "configuration": _json_or_none(r0.summary.get("configuration")),
            "prefill_bytes_per_partition": r0.param("prefill_bytes_per_partition"),
            "replication_throttle_bytes_per_s": r0.param("replication_throttle_bytes_per_s"),
            "objstore_bandwidth_bytes_per_s": r0.param("objstore_bandwidth_bytes_per_s"),
            "bandwidth_bytes_per_s": r0.bandwidth, "runs": len(rs), "repetitions": max(planned, default=None),
            "run_keys": ",".join(sorted(keys)), "moves": len(mv), "faults": len(outages),
            "move_seconds_stdev": statistics.stdev(secs) if len(secs) >= 2 else None,
            "during_p99_ms": during["p99_ms"] if during else None,
            "before_p99_ms": before["p99_ms"] if before else None,
            "lost_count": _sum_known(x["lost_count"] for x in run_rows),
            "duplicated_count": _sum_known(x["duplicated_count"] for x in run_rows),
            **{f"valid_{v}": sum(1 for x in run_rows if x["valid"] == v) for v in VERDICTS},
        }
        for name in ("move_seconds", "unavailable_seconds", "partition_bytes", "copy_bytes_at_request", "bytes_moved",
                     "bytes_moved_at_request", "bytes_moved_during_move", *PROTOCOL_FIGURES):
            row.update(_spread_cols(name, (m[name] for m in mv)))
        row.update(_spread_cols("outage_seconds", (o["unavailable_seconds"] for o in outages)))
        row.update(_spread_cols("recovery_seconds", (o["recovery_seconds"] for o in outages)))
        row.update(_spread_cols("producer_unavailable_seconds", (x["run_max_unavailable_seconds"] for x in run_rows)))
        # Consumers: over the configuration's moves (a fault's figures are in the consumers table).
        cons = [x for x in tables.get("consumers", []) if x["run_key"] in keys and x["action"] in MOVE_ACTIONS]
        for name in CONSUMER_FIGURES:
            row.update(_spread_cols(name, (x[name] for x in cons)))
        out.append(row)
    return out


# --------------------------------------------------------------------------------------------
# Writing


def write_outputs(res: AggregateResult) -> None:
    out = res.out_dir
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        write_table(name, res.tables.get(name, []), out)
    models = res.models["models"]
    proj = res.models.get("projection") or {}
    (out / "model.json").write_text(json.dumps({
        "models": {k: m.to_row() for k, m in models.items()}, "notes": res.models["notes"],
        "validation": res.models["validation"], "validity": proj.get("validity", {}),
        "headline": proj.get("headline", []), "projection": res.tables["projection"],
        "grid": proj.get("grid", {}), "rebalance": res.tables["rebalance"],
        "timings_s": res.timings, "warnings": res.warnings,
    }, indent=2, default=str), encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(res), encoding="utf-8")


FMT_MAX_DECIMALS = 4  # below 0.0001 a table shows 0: no figure here is meaningful at that scale


def fmt_num(x: Any) -> str:
    """The one number format of summary.md and the report: 3 significant digits in plain
    notation, whole from 1000 up (1160, never 1.16e+03), at most 4 decimals (never 3.14e-16)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return MISSING
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return str(x)
    if x == 0 or abs(x) >= 1000:
        return f"{x:.0f}"
    decimals = min(FMT_MAX_DECIMALS, max(0, 2 - math.floor(math.log10(abs(x)))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_range(median: Any, lo: Any, hi: Any, fmt=fmt_num) -> str:
    """``median (min–max)``; the median alone when all values are equal (or there is one)."""
    if median is None:
        return MISSING
    if lo is None or hi is None or lo == hi:
        return fmt(median)
    return f"{fmt(median)} ({fmt(lo)}–{fmt(hi)})"


def fmt_spread(xs: list[Any], fmt=fmt_num) -> str:
    """The median (min–max) of several values; a missing one is counted, never a zero."""
    known = sorted(x for x in xs if x is not None)
    if not known:
        return MISSING
    text = fmt_range(statistics.median(known), known[0], known[-1], fmt)
    return text + (f", {len(xs) - len(known)} missing" if len(known) < len(xs) else "")


def _cfg(c: dict[str, Any], name: str, fmt=fmt_num) -> str:
    return fmt_range(c.get(f"{name}_median"), c.get(f"{name}_min"), c.get(f"{name}_max"), fmt)


def _runs_of(c: dict[str, Any]) -> str:
    """``3`` or ``2 of 3`` (planned repetitions, when a run is missing)."""
    planned = c.get("repetitions")
    return f"{c['runs']} of {planned}" if planned and planned != c["runs"] else str(c["runs"])


def _count(x: Any) -> str:
    return MISSING if x is None else str(x)


SPREAD_NOTE = ("Figures per configuration: median (min–max) over its runs' moves, faults or runs (runs: how many); "
               "one value when all agree. Produce latency p99 of the first moved (else faulted) partitions, pooled "
               "from the raw samples of all the runs: before the action, and during it (a move: request to its "
               "end; a fault: until the next action, its recovery). Producer unavailable s: a run's longest time "
               "any partition went without an ack over the whole load.")
RESULT_HEAD = ["configuration", "runs", "move s", "unavailable s (move)", "outage s (fault)", "recovery s",
               "producer unavailable s", "p99 before (ms)", "p99 during (ms)", "lost", "duplicated", "verdicts"]


def result_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per configuration: its moves', faults' and producers' figures with their spread."""
    return [[c["config_label"] or c["config_key"], _runs_of(c), _cfg(c, "move_seconds"),
             _cfg(c, "unavailable_seconds"), _cfg(c, "outage_seconds"), _cfg(c, "recovery_seconds"),
             _cfg(c, "producer_unavailable_seconds"), fmt_num(c["before_p99_ms"]), fmt_num(c["during_p99_ms"]),
             _count(c["lost_count"]), _count(c["duplicated_count"]),
             ", ".join(f"{c[f'valid_{v}']} {v}" for v in VERDICTS)] for c in configs]


BYTES_HEAD = ["configuration", "runs", "partition at the request", "leader's bytes to copy (tiered start)",
              "bytes moved", "of which partition at the request", "of which written during the move"]


def bytes_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    """``leader's bytes to copy``: what a tiered leader told the new replica to copy at the
    request (the local tail after the last tiered offset or from its local log start); – where
    the new replica copied the whole log (no such answer)."""
    return [[c["config_label"] or c["config_key"], _runs_of(c), _cfg(c, "partition_bytes", format_bytes),
             _cfg(c, "copy_bytes_at_request", format_bytes),
             _cfg(c, "bytes_moved", format_bytes), _cfg(c, "bytes_moved_at_request", format_bytes),
             _cfg(c, "bytes_moved_during_move", format_bytes)] for c in configs if c["moves"]]


PROTOCOL_HEAD = ["configuration", "runs", "move_seconds (first ack on the new owner)", "a client sees a target lead",
                 "reassignment no longer listed", "journal: move complete", "bytes moved (journal)",
                 "added replicas' size (DescribeLogDirs)"]
PROTOCOL_NOTE = (
    "Each move as the Kafka protocol alone shows it, the view the harness has of any cluster it does not "
    "start, beside the brokers' own journal where there is one (seconds from the request; medians, min-max "
    "over runs). The protocol view's resolution is one poll: Metadata every {metadata:g} s, "
    "ListPartitionReassignments every {reassignments:g} s, DescribeLogDirs every {log_dirs:g} s. "
    "'-': not seen that way (a cluster that completes a move within one poll, or does not list it as "
    "a reassignment; no journal outside the harness's own systems).")


CONSUMERS_TITLE = "Consumers across moves and faults"
CONSUMERS_HEAD = ["configuration", "action", "runs", "end-to-end p50 ms (before / during / after)",
                  "end-to-end p99 ms (before / during / after)", "longest gap without a delivery (s)",
                  "catch-up read MB/s (before / during / after)", "not delivered (whole runs)"]
CONSUMERS_NOTE = (
    "What the workload's consumer groups felt (scenario section `consumers`; medians over runs, min-max in "
    "brackets). End-to-end latency: from the producer's send call to a message's first delivery to a `tail` "
    "group, on the action's partitions, windows by send time as for produce latency; it includes the "
    "producers' batching (linger.ms) and the time until a message is readable: on the copy and tiered systems "
    "once every in-sync replica has it (the high watermark), on the shared system once its WAL write is durable "
    "in object storage. Gap: the longest time a tail group got no message of those partitions, from 1 s before the action "
    "to 5 s after its end (a fault: after the producers' first ack past recovery). Catch-up: the backlog "
    "bytes per second a `catch_up` group (started behind, reading while the load produces) read in each "
    "window, the mean over catch-up groups. Not delivered: acked messages and backlog records some group never "
    "got, over the whole of the configuration's runs (at least once, per group: must be 0).")


def consumer_rows(consumers: list[dict[str, Any]], configs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per configuration and action (id): the consumers table's figures, medians (min-max) over runs."""
    labels = {c["config_key"]: c["config_label"] or c["config_key"] for c in configs}
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for x in consumers:
        by[(x["config_key"], x["action_id"])].append(x)
    order = {c["config_key"]: i for i, c in enumerate(configs)}

    def spread(xs: list[dict[str, Any]], name: str, scale: float = 1.0) -> str:
        known = [float(x[name]) * scale for x in xs if x.get(name) is not None]
        return fmt_range(_med(known), min(known, default=None), max(known, default=None)) if known else MISSING

    rows = []
    for (ck, aid), xs in sorted(by.items(), key=lambda kv: (order.get(kv[0][0], 1 << 30), kv[0][0], kv[0][1])):
        rows.append([labels.get(ck, ck), f"{xs[0]['action']} (#{aid})", str(len(xs)),
                     " / ".join(spread(xs, f"e2e_{ph}_p50_ms") for ph in PHASES),
                     " / ".join(spread(xs, f"e2e_{ph}_p99_ms") for ph in PHASES),
                     spread(xs, "gap_seconds"),
                     " / ".join(spread(xs, f"catch_up_{ph}_bytes_per_s", 1e-6) for ph in PHASES),
                     str(sum(int(x["missing"] or 0) for x in xs))])
    return rows


def protocol_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    return [[c["config_label"] or c["config_key"], _runs_of(c), _cfg(c, "move_seconds"),
             _cfg(c, "protocol_leader_change_seconds"), _cfg(c, "protocol_reassignment_seconds"),
             _cfg(c, "journal_complete_seconds"), _cfg(c, "bytes_moved", format_bytes),
             _cfg(c, "protocol_target_bytes", format_bytes)] for c in configs if c["moves"]]


def provenance_lines(runs: list[dict[str, Any]]) -> list[str]:
    """Where and from what the runs came: machine(s), date(s), commit(s), versions, links; a fact
    a summary does not carry counts as unknown."""
    def tally(values: list[Any]) -> str:
        seen: dict[str, int] = defaultdict(int)
        for v in values:
            seen[UNKNOWN if v in (None, "") else str(v)] += 1
        if len(seen) == 1:
            return next(iter(seen))
        return "; ".join(f"{v} ({n} run{'s' * (n != 1)})" for v, n in sorted(seen.items()))

    # ISO-8601 UTC to the minute: "2026-11-23 23:52"
    dates = sorted(str(r["date"])[:16].replace("T", " ") for r in runs if r.get("date"))
    no_date = len(runs) - len(dates)
    date = (UNKNOWN if not dates else dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}")
    if dates and no_date:
        date += f" ({no_date} run{'s' * (no_date != 1)} unknown)"
    versions = []
    for r in runs:
        v = json.loads(r["versions"]) if r.get("versions") else None
        versions.append(", ".join(f"{k} {x if x is not None else UNKNOWN}" for k, x in v.items()) if v else None)
    links = ["yes" if r.get("links_emulated") else "no" if r.get("links_emulated") is False else None for r in runs]
    return [f"Machine: {tally([r.get('machine') if r.get('machine') != UNKNOWN else None for r in runs])}.",
            f"Date (UTC): {date}.",
            f"Git commit: {tally([commit_label(r.get('git_commit'), r.get('git_dirty')) if r.get('git_commit') else None for r in runs])}.",
            f"Versions: {tally(versions)}.",
            f"Links emulated (per-node NICs in network namespaces): {tally(links)}."]


CONFIG_HEAD = ["system", "configurations", "runs", "replication factor", "min.insync.replicas", "producers",
               "an acknowledgement means", "replication throttle", "links (broker / client / object store)",
               "the system's own settings"]
CONFIG_NOTE = ("What each system ran with: every system gets the same producers (librdkafka, idempotent, the acks "
               "and linger.ms shown; an ack's latency includes up to linger.ms of batching), load and links; what an "
               "acknowledgement promises differs and is stated here, as are the settings only one system has "
               "(its profile's, effective values).")


def _setting_text(key: str, value: Any) -> str:
    """``segment_bytes`` 4194304 -> ``segment 4 MiB``; ``wal_batch_interval_ms`` 100 -> ``wal batch
    interval 100 ms``."""
    name = key.replace("_", " ")
    if isinstance(value, bool) or value is None:
        return f"{name} {str(value).lower()}"
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{name.removesuffix(' bytes')} {format_bytes(value)}"
    if key.endswith("_ms") and isinstance(value, (int, float)):
        return f"{name.removesuffix(' ms')} {fmt_num(value)} ms"
    return f"{name}: {value}"


def own_settings_text(conf: dict[str, Any]) -> str:
    """The configuration's ``system_settings`` (the profile's describe()) in words; a summary from
    before them: its WAL settings, if any."""
    own = conf.get("system_settings")
    if own is None:
        own = {k: conf[k] for k in ("wal_batch_interval_ms", "wal_upload_threshold_bytes") if conf.get(k) is not None}
    return ", ".join(_setting_text(k, v) for k, v in own.items()) if own else "none"


def producer_settings(conf: dict[str, Any]) -> str:
    out = f"acks={conf.get('acks', UNKNOWN)}"
    return out + (f", linger.ms={conf['linger_ms']}" if conf.get("linger_ms") is not None else "")


def configuration_rows(configs: list[dict[str, Any]], label=str) -> list[list[Any]]:
    """"Configurations compared": one row per system and distinct configuration (summary.json's
    ``configuration``), naming the scenarios that ran it; unknown for summaries without one."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in configs:
        groups[(c["system"], c.get("configuration") or "")].append(c)
    order = {s: i for i, s in enumerate(PROFILES)}
    rows = []
    for (system, cj), cs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0])):
        x = json.loads(cj) if cj else {}

        def get(k: str) -> Any:
            return x.get(k, UNKNOWN) if x else UNKNOWN

        def none_as(v: Any, text: str) -> Any:
            return text if v is None else v

        th = get("throttle_bytes_per_s")
        throttle = (UNKNOWN if th == UNKNOWN else "none" if th is None
                    else f"{format_bytes(th)}/s" + (f" ({x['throttle_rule']})" if x.get("throttle_rule") else ""))
        links = " / ".join(str(none_as(get(k), "none")) for k in ("link_rate", "client_link_rate", "object_store_link_rate"))
        if links == " / ".join([UNKNOWN] * 3):
            links = UNKNOWN
        scen = sorted({c["scenario"] or "?" for c in cs})
        rows.append([label(system), ", ".join(scen) + f" ({len(cs)} configuration{'s' * (len(cs) != 1)})",
                     sum(c["runs"] for c in cs), get("replication_factor"), none_as(get("min_insync_replicas"), "n/a"),
                     producer_settings(x) if x else UNKNOWN, get("ack_meaning"), throttle, links,
                     own_settings_text(x) if x else UNKNOWN])
    return rows


def _rate(bytes_per_s: Any) -> str:
    return MISSING if bytes_per_s is None else f"{format_bytes(bytes_per_s)}/s"


def recovery_label(o: dict[str, Any]) -> str:
    """How a fault ended, for a table: the recovery action ("restart broker", "resume broker",
    ...), or a failover to the broker a client saw lead."""
    by = o.get("recovered_by")
    if by is None:
        return "not recovered"
    if by == EVENT_LEADER_CHANGE:
        return "failover" + (f" to {o['new_leader']}" if o.get("new_leader") is not None else "")
    return str(by).replace("_", " ")


LINK_FILL_HEAD = ["system", "run", "partition", "move s", "source tx", "target rx", "object store rx, tx"]
LINK_FILL_NOTE = ("How full each link was during a move, as a share of the link's rate: mean (peak) of the "
                  "once-a-second link samples overlapping [request, request + move_seconds] (no move_seconds: "
                  "until the action's end), each weighted by its seconds inside. For several source or target "
                  "brokers, the busiest. tx = sent by the node, rx = received.")
NO_LINKS = "No run on emulated links (no link_sample events): nothing to show."


def _fill(x: dict[str, Any] | None, way: str) -> str:
    if x is None or x.get(f"{way}_mean_utilisation") is None:
        return MISSING
    return f"{x[f'{way}_mean_utilisation']:.0%} ({x[f'{way}_peak_utilisation']:.0%})"


def _busiest(xs: list[dict[str, Any]], role: str, way: str) -> dict[str, Any] | None:
    return max((x for x in xs if x["role"] == role and x[f"{way}_mean_utilisation"] is not None),
               key=lambda x: x[f"{way}_mean_utilisation"], default=None)


def link_fill_rows(move_links: list[dict[str, Any]], label=str) -> list[list[Any]]:
    """One row per move for the "link fill during moves" table (summary.md and the report), from
    the move_links table, in its order; ``label`` names a system."""
    per: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for x in move_links:
        per[(x["run_key"], x["from_ts"], x["action_id"], x["topic"], x["partition"])].append(x)
    rows = []
    for (run_key, *_), xs in per.items():
        src, dst, obj = _busiest(xs, "source", "tx"), _busiest(xs, "target", "rx"), _busiest(xs, "objstore", "rx")
        x0 = xs[0]
        rows.append([label(x0["system"]), run_key, format_bytes(x0["partition_bytes"]), fmt_num(x0["move_seconds"]),
                     f"{src['node']} {_fill(src, 'tx')}" if src else MISSING,
                     f"{dst['node']} {_fill(dst, 'rx')}" if dst else MISSING,
                     f"{_fill(obj, 'rx')}, {_fill(obj, 'tx')}" if obj else MISSING])
    return rows


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _pm(x: Any, se: Any) -> str:
    return fmt_num(x) if se is None else f"{fmt_num(x)} ± {fmt_num(se)}"


def _err(x: Any) -> str:
    return MISSING if x is None else f"{x:+.1f} %"


def model_markdown(tables: dict[str, list[dict[str, Any]]], notes: dict[str, str] | None = None,
                   headline: list[dict[str, Any]] | None = None) -> str:
    """Headline, model fits, held-out checks and projection as Markdown (summary.md and the report)."""
    parts = []
    if headline is not None:
        parts += ["### Headline (projections from validated models)", ""]
        parts.append(md_table(["case", "system", "link", "projection", "held-out error", "rests on"], [
            [h["case"], h["system"], f"{h['link_gbit_s']:g} Gbit/s",
             h["value_text"] if h["status"] == "validated" else f"not validated: {h['reason']}",
             MISSING if h.get("error_pct") is None else f"≤ {h['error_pct']:.1f} %",
             ", ".join(h.get("validations") or []) or MISSING] for h in headline]) if headline else "No model to project.")
        parts += [""] + sorted({f"- {h['title']}: {h['system']}: {h['basis']}" for h in headline}) + [""]
    parts += ["### Fitted models", ""]
    if tables["model_fit"]:
        parts.append(md_table(
            ["system", "formula", "fixed cost c (s)", "efficiency", "open per object (ms)", "R²", "RMSE (s)", "n",
             "validated"],
            [[m["system"], m["formula"], _pm(m["fixed_s"], m["fixed_se"]),
              _pm(m["efficiency"], m["efficiency_se"]) if m["efficiency_fitted"] else "1 (held)",
              MISSING if m["family"] != mdl.HANDOVER_MODEL else _pm(m["open_per_object_s"] * 1000,
                                                                   None if m["open_per_object_se"] is None
                                                                   else m["open_per_object_se"] * 1000),
              fmt_num(m["r2"]), fmt_num(m["rmse_s"]), m["n"],
              "yes" if m.get("validated") else f"no: {m.get('validation_reason')}"] for m in tables["model_fit"]]))
        parts += [""] + [f"- **{m['system']}** rests on {m['n']} move(s) of runs {m['runs']}. {m['assumptions']}"
                         for m in tables["model_fit"]]
    for s, n in (notes or {}).items():
        parts.append(f"- **{s}**: not fitted ({n}).")
    parts += ["", "### Held-out checks", "",
              "Fitted on the smaller values of one axis (the other settings equal), predicting the held-out "
              "value's moves from their inputs at the request; error of the median move.", ""]
    if tables["model_validation"]:
        parts.append(md_table(
            ["system", "axis", "held out", "status", "measured (s)", "predicted (s)", "error", "target", "fitted on"],
            [[v["system"], v["axis"], v.get("label") or MISSING,
              v["status"] + (f" ({v['reason']})" if v.get("reason") else ""), fmt_num(v.get("measured_s")),
              fmt_num(v.get("predicted_s")), _err(v.get("error_pct")),
              MISSING if v.get("target_pct") is None else f"±{v['target_pct']:g} %",
              f"{v.get('n_train') or 0} moves" + (f" ({v['family']})" if v.get("family") else "")]
             for v in tables["model_validation"]]))
    else:
        parts.append("No measured moves to validate.")
    parts += ["", "### Projection: a partition ingesting 100 MB/s", ""]
    proj = tables["projection"]
    if proj:
        systems = [s for s in PROFILES if any(p["system"] == s for p in proj)]
        keys = sorted({(p["link_gbit_s"], p["partition_bytes"], p["size_label"]) for p in proj})
        rows = []
        for gbit, _, lbl in keys:
            row = [f"{gbit:g} Gbit/s", lbl]
            for s in systems:
                p = next((x for x in proj if x["system"] == s and x["link_gbit_s"] == gbit and x["size_label"] == lbl), None)
                row += [p["move_time"] if p else MISSING,
                        format_bytes(p["bytes_moved"]) if p and p["bytes_moved"] is not None else MISSING]
            rows.append(row)
        parts.append(md_table(["link", "partition"] + [f"{s} {c}" for s in systems for c in ("move time", "bytes moved")],
                              rows))
        parts += ["", "Basis:"] + sorted({f"- {p['system']} @ {p['link_gbit_s']:g} Gbit/s: {p['basis']}" for p in proj})
        parts.append("- 1 Gbit/s = 125 MB/s; sizes are decimal (1 TB = 10^12 bytes); the fitted fixed cost and "
                     "efficiency are assumed to hold at the link speed; disks, CPU and the object store keep up.")
    else:
        parts.append("No model could be fitted: no measured moves.")
    return "\n".join(parts) + "\n"


def summary_markdown(res: AggregateResult) -> str:
    t = res.tables
    lines = ["# Aggregate of reassignment runs", "",
             f"{len(res.runs)} run(s) of {len(t['configs'])} configuration(s); tables in this directory "
             "(Parquet + CSV). Quantiles from raw samples.", ""]
    if res.warnings:
        lines += ["Warnings:"] + [f"- {w}" for w in res.warnings] + [""]
    lines += ["## Provenance", ""] + [f"- {x}" for x in provenance_lines(t["runs"])] + [""]
    lines += ["## Configurations compared", "", CONFIG_NOTE, "",
              md_table(CONFIG_HEAD, configuration_rows(t["configs"])), ""]
    lines += ["## Results per configuration", "", SPREAD_NOTE, "", md_table(RESULT_HEAD, result_rows(t["configs"])), ""]
    if any(c["moves"] for c in t["configs"]):
        lines += ["## Bytes moved per configuration", "", BYTES_SPLIT_NOTE, "",
                  md_table(BYTES_HEAD, bytes_rows(t["configs"])), ""]
    if t.get("consumers"):
        lines += [f"## {CONSUMERS_TITLE}", "", CONSUMERS_NOTE, "",
                  md_table(CONSUMERS_HEAD, consumer_rows(t["consumers"], t["configs"])), ""]
    lines += ["## Runs", "", md_table(
        ["run", "system", "repetition", "sends", "acked", "fail", "info", "p99 ms", "max move s",
         "max unavailable s", "valid", "failed checks"],
        [[r["run_key"], r["system"], _repetition(r), r["sends"], r["acked"], r["send_fail"], r["send_info"],
          fmt_num(r["latency_p99_ms"]), fmt_num(r["max_move_seconds"]), fmt_num(r["max_unavailable_seconds"]),
          r["valid"], r["failed_checks"] or ""]
         for r in t["runs"]]), "", f"Verdicts: {verdict_counts(r['valid'] for r in t['runs'])}.", ""]
    if t["outages"]:
        lines += ["## Fault outages", "",
                  ("Per fault action: the worst affected partition's time without an ack, from 1 s before the "
                   "fault to its first ack after recovery (the paired recovery action's end, or a failover a "
                   "client saw), as summary.json's `outages`."), "", md_table(
                      ["run", "system", "fault", "broker", "partitions", "outage s", "recovered by", "recovery s"],
                      [[o["run_key"], o["system"], o["action"], MISSING if o["broker"] is None else o["broker"],
                        o["partitions"], fmt_num(o["unavailable_seconds"]), recovery_label(o),
                        fmt_num(o["recovery_seconds"])] for o in t["outages"]]), ""]
    lines += ["## Link fill during moves", "", LINK_FILL_NOTE, "",
              md_table(LINK_FILL_HEAD, link_fill_rows(t["move_links"])) if t["move_links"] else NO_LINKS, ""]
    lines += ["## Models", "", model_markdown(t, res.models.get("notes"),
                                              (res.models.get("projection") or {}).get("headline"))]
    lines += ["", "Timings (s): " + ", ".join(f"{k} {fmt_num(v)}" for k, v in res.timings.items())]
    return "\n".join(lines) + "\n"


def _repetition(r: dict[str, Any]) -> str:
    rep, of = r.get("repetition"), r.get("repetitions")
    return MISSING if rep is None else f"{rep} of {of}" if of else str(rep)


__all__ = [
    "BYTES_HEAD", "CONFIG_HEAD", "CONFIG_NOTE", "DEFAULT_OUT", "RESULT_HEAD", "SPREAD_NOTE", "TABLES", "VERDICTS",
    "AggregateError", "aggregate", "bytes_rows", "config_table", "configuration_rows", "discover_runs",
    "fit_models", "fmt_num", "fmt_range", "fmt_spread", "link_fill_rows", "md_table", "model_markdown",
    "move_points", "provenance_lines", "recovery_label", "result_rows", "spark_session", "span_phases",
    "summary_markdown", "verdict", "verdict_counts",
]
