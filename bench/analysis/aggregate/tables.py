"""The aggregate's output tables: name -> ordered (column, type), the contract with the report
(bench/report/) and :mod:`bench.results`, and how a table is written (one Parquet and one CSV file).
Importable without Spark."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.check.metrics import MOVE_METRIC_NAMES
from bench.check.safety import VERDICTS
from bench.check.windows import PHASES
from bench.history.names import OBJSTORE_REQUEST_KINDS

DEFAULT_OUT = Path("results/aggregate")
SAFETY_CHECKS = ("lost_writes", "duplicates", "corrupted", "reordering", "unexpected", "lost_prefill")
SAFETY_COUNTS = {"lost_writes": "lost_count", "duplicates": "duplicated_count", "corrupted": "corrupted_count",
                 "reordering": "reordered_count",
                 "unexpected": "unexpected_count", "lost_prefill": "lost_prefill_count"}
# A move as the Kafka protocol alone shows it (summary.json moves[].protocol), beside the
# brokers' journal where there is one: request -> a client sees a target lead, -> the cluster no
# longer lists the reassignment, -> the journal's move_complete; the added replicas' size.
PROTOCOL_FIGURES = ("protocol_leader_change_seconds", "protocol_reassignment_seconds", "journal_complete_seconds",
                    "protocol_target_bytes")
# The consumers table's figures given per configuration as median, min and max over its runs.
CONSUMER_FIGURES = ("e2e_during_p99_ms", "e2e_before_p99_ms", "e2e_after_p99_ms", "gap_seconds",
                    "catch_up_during_bytes_per_s", "catch_up_before_bytes_per_s")
# Per-configuration figures given as median, min and max over its runs (configs table).
SPREAD_FIGURES = ("move_seconds", "unavailable_seconds", "outage_seconds", "recovery_seconds",
                  "producer_unavailable_seconds", "load_cpu_s_per_1000_msgs", "partition_bytes", *MOVE_METRIC_NAMES, "bytes_moved",
                  "bytes_moved_at_request",
                  "bytes_moved_during_move", *PROTOCOL_FIGURES, *CONSUMER_FIGURES)


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
        # the producers' linger.ms and the load process's CPU s per 1,000 acked messages (summary.json)
        ("linger_ms", F64), ("load_cpu_s_per_1000_msgs", F64),
        ("history_rows", I64), ("sends", I64), ("acked", I64), ("send_fail", I64), ("send_info", I64),
        ("reads", I64), ("events", I64), ("malformed_events", I64),
        ("load_start", F64), ("load_end", F64),
        ("latency_count", I64), ("latency_p50_ms", F64), ("latency_p99_ms", F64),
        ("latency_p999_ms", F64), ("latency_max_ms", F64),
        ("moves", I64), ("max_move_seconds", F64), ("max_unavailable_seconds", F64),
        ("run_max_unavailable_seconds", F64), ("bytes_moved", F64),
        ("valid", STR), ("failed_checks", STR), ("problems", STR),
        ("lost_writes", STR), ("duplicates", STR), ("corrupted", STR), ("reordering", STR), ("unexpected", STR),
        ("lost_prefill", STR),
        ("lost_count", I64), ("duplicated_count", I64), ("corrupted_count", I64), ("reordered_count", I64),
        ("unexpected_count", I64),
        ("lost_prefill_count", I64),
        ("timeline_t0", F64), ("timeline_bin_s", F64),
        # summary.json's host: the host's CPU over the load window (bench/check/host.py; null: unknown)
        ("host_busy_mean_pct", F64), ("host_busy_peak_pct", F64), ("host_saturated", BOOL), ("host_source", STR),
        ("host_run_processes_pct", F64),  # of the host's CPU, the run's own processes' share
        ("host_steal_pct", F64),  # of it, the hypervisor's share (steal: other guests of the machine)
    ],
    "moves": [
        ("run_key", STR), ("system", STR), ("config_key", STR), ("action_id", STR), ("action", STR),
        ("topic", STR), ("partition", I64), ("new_leader", I64),
        ("request_ts", F64), ("leader_change_ts", F64), ("first_ack_ts", F64), ("end_ts", F64),
        ("refused_ts", F64),  # the old owner's first refusal of writes, where its journal says (a handover)
        ("client_refused_ts", F64),  # the first refusal the load's producers met (summary: client_refused_seconds)
        # the load's producing library and what it met at the brokers while the move was unavailable
        # to it (summary.json's moves: client_errors, client_metadata_requests)
        ("client_library", STR), ("client_errors_json", STR), ("client_error_count", I64),
        ("client_metadata_requests", I64),
        ("move_seconds", F64), ("move_seconds_status", STR), ("summary_move_seconds", F64),
        ("unavailable_seconds", F64),
        ("partition_bytes", F64), ("partition_bytes_source", STR), ("produced_bytes_before_move", F64),
        ("bytes_moved_inter_broker", F64), ("bytes_moved_objstore", F64), ("bytes_moved", F64),
        ("bytes_written_during_move", F64), ("bytes_moved_at_request", F64), ("bytes_moved_during_move", F64),
        ("bytes_source", STR), ("unuploaded_bytes", F64),
        *[(name, F64) for name in MOVE_METRIC_NAMES],  # bench/check/metrics.py
        ("replication_throttle_bytes_per_s", F64), ("objstore_bandwidth_bytes_per_s", F64),
        ("bandwidth_bytes_per_s", F64), ("link_rate_at_request", STR), ("phases_json", STR),
        # The scenario's settings for the moved partition (a run may hold partitions of several
        # sizes and ingest rates): its prefill and its nominal ingest (Scenario.nominal_ingest_of).
        # and the nominal ingest of every partition its leader leads then (the sender's steady traffic).
        ("prefill_bytes_of_partition", F64), ("nominal_ingest_bytes_per_s", F64), ("sender_ingest_bytes_per_s", F64),
        # The load's producer clients writing to the moved partition and one's mean gap between its
        # sends to it (Scenario.producers_of): each learns of a new leader on its own schedule.
        ("producers_of_partition", I64), ("producer_send_gap_s", F64),
        # The move models' inputs: ingest during the move (bytes written during it / move_seconds),
        # the stream objects the new owner opened and its open phases' seconds (handover family),
        # how many partitions the action moved (the models fit single-partition moves only).
        ("ingest_bytes_per_s", F64), ("objects", F64), ("open_seconds", F64), ("partitions_in_action", I64),
        *[(name, F64) for name in PROTOCOL_FIGURES],
        ("with_consumers", BOOL),  # its run had workload consumers (not a move the models rest on)
        # The estimate made before the request (bench/run/move_estimate.py) and its error against
        # move_seconds, + long / - short; the commit of the model it used (from earlier runs).
        ("estimate_seconds", F64), ("estimate_seconds_low", F64), ("estimate_seconds_high", F64),
        ("estimate_error_pct", F64), ("estimate_model_commit", STR),
        ("estimate_outcomes_json", STR),  # a handover: the client queries it may land at
        # The load's median ack latency on the moved partitions before the request (the latency
        # table's phase before): the handover model's client part moves with it.
        ("ack_p50_before_ms", F64),
        # What the move asked of the object store (its close and open), by request kind: what
        # bench/analysis/cost.py prices.
        *[(f"objstore_{k}_requests", I64) for k in OBJSTORE_REQUEST_KINDS],
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
        ("configuration", STR), ("params", STR), ("prefill_bytes_per_partition", F64),
        ("replication_throttle_bytes_per_s", F64), ("objstore_bandwidth_bytes_per_s", F64),
        ("bandwidth_bytes_per_s", F64), ("linger_ms", F64), ("runs", I64), ("repetitions", I64), ("run_keys", STR), ("moves", I64),
        *[(f"{m}_{s}", F64) for m in SPREAD_FIGURES for s in ("median", "min", "max")],
        ("move_seconds_stdev", F64), ("faults", I64),
        ("during_p99_ms", F64), ("before_p99_ms", F64),
        ("lost_count", I64), ("duplicated_count", I64),
        *[(f"valid_{v}", I64) for v in VERDICTS],
        # bench/check/host.py: runs whose load window and moves whose window saturated the host,
        # moves it could not tell (the moves' host figures: host_busy_*_pct_median|min|max above)
        ("runs_host_saturated", I64), ("moves_host_saturated", I64), ("moves_host_unknown", I64),
        ("load_host_busy_mean_pct_median", F64), ("load_host_busy_mean_pct_min", F64),
        ("load_host_busy_mean_pct_max", F64), ("load_run_processes_pct_median", F64),
        ("load_run_processes_pct_min", F64), ("load_run_processes_pct_max", F64),
        ("load_steal_pct_median", F64), ("load_steal_pct_min", F64), ("load_steal_pct_max", F64),
    ],
    "model_fit": [
        ("system", STR), ("family", STR), ("formula", STR), ("fixed_s", F64), ("fixed_se", F64),
        ("efficiency", F64), ("efficiency_se", F64), ("efficiency_fitted", BOOL), ("open_fixed_s", F64),
        ("open_per_object_s", F64), ("open_per_object_se", F64), ("open_objects_max", F64), ("open_n", I64),
        ("r2", F64), ("rmse_s", F64), ("n", I64), ("runs", STR), ("assumptions", STR),
        # the code version the fit rests on and its fitted range per axis (the report's headline
        # figure rebuilds each model from this row: without them no check would be its own)
        ("version", STR), ("domain", STR),
        ("untiered", STR),  # tiered copy: the untiered tail's measured relation (JSON), empty: not measured
        # handover: the client's part (its leader queries' origin, the ack after the one that names
        # the new leader), empty: a median client lag is in fixed_s
        ("client_start_s", F64), ("client_ack_s", F64), ("client_ack_ref_s", F64),
        ("client_producers", I64), ("client_send_gap_s", F64),
        ("validated", BOOL), ("validation_error_pct", F64), ("validation_reason", STR),
        # the moves of its kind left out because the host was saturated, and those kept unknown
        # (bench/check/host.py; bench/analysis/aggregate/fits.py host_left_out), in words
        ("saturated_left_out", I64), ("host_unknown_kept", I64), ("host_note", STR),
    ],
    # One row per held-out check (bench.analysis.model.validate; axis "rebalance": the cluster
    # simulation against a measured multi-partition run).
    "model_validation": [
        ("system", STR), ("axis", STR), ("held_out_value", F64), ("label", STR), ("family", STR), ("status", STR),
        ("reason", STR), ("error_pct", F64), ("max_abs_error_pct", F64), ("target_pct", F64), ("measured_s", F64),
        ("predicted_s", F64), ("train_values", STR), ("train_runs", STR), ("test_runs", STR), ("n_train", I64),
        ("n_test", I64),
        ("measured_bytes", F64), ("predicted_bytes", F64),  # axis "untiered": the tail's bytes, not seconds
    ],
    # Per partition of a tiered run: its untiered tail in steady state (bench/analysis/aggregate/rows.py
    # untiered_rows), the data of the untiered relation and its check.
    "untiered": [
        ("run_key", STR), ("system", STR), ("config_key", STR), ("version", STR), ("topic", STR),
        ("partition", I64), ("segment_bytes", F64), ("upload_interval_s", F64), ("ingest_bytes_per_s", F64),
        ("backlog_segments", F64), ("samples", I64), ("steady_seconds", F64), ("mean_bytes", F64),
        ("max_bytes", F64), ("p95_bytes", F64),
    ],
    "projection": [
        ("system", STR), ("link_gbit_s", F64), ("link_bytes_per_s", F64), ("size_label", STR),
        ("partition_bytes", F64), ("ingest_bytes_per_s", F64), ("move_seconds", F64), ("move_seconds_se", F64),
        ("move_time", STR), ("never", BOOL), ("bytes_moved", F64), ("validated", BOOL), ("error_pct", F64),
        ("reason", STR), ("basis", STR), ("based_on_runs", STR), ("status", STR), ("replication_factor", I64),
        ("consumer_groups", I64), ("steady_bytes_per_s", F64), ("cap_bytes_per_s", F64), ("budget", STR),
        ("validity_text", STR), ("version", STR),
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
    data = {c: [cell(r.get(c), t) for r in rows] for c, t in cols}
    table = pa.Table.from_pydict(data, schema=schema)
    pq.write_table(table, out / f"{name}.parquet")
    with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([c for c, _ in cols])
        for r in rows:
            w.writerow(["" if (v := cell(r.get(c), t)) is None else v for c, t in cols])
    return table


def cell(v: Any, t: pa.DataType) -> Any:
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



__all__ = ["CONSUMER_FIGURES", "DEFAULT_OUT", "PROTOCOL_FIGURES", "SAFETY_CHECKS", "SAFETY_COUNTS", "SPREAD_FIGURES",
           "TABLES", "cell", "write_table"]
