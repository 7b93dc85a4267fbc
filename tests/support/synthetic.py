"""SYNTHETIC TEST FIXTURES — not measurements.

Builds run directories shaped exactly like the runner's (``scenario.yaml``, ``history.parquet``,
``summary.json``) from a simple physical story, so the aggregation and the report can be tested
before (and independently of) real runs. Every summary written here carries ``"synthetic": true``
and a ``synthetic-`` run id; the report marks such runs as synthetic.

The story of one run: ``partitions`` partitions under a steady produce load; at ``move_at_s`` one
partition is reassigned; the system's profile picks the story by its move-model family. Copy: the
new replica fetches ``partition_bytes`` and what is written meanwhile at ``efficiency`` x the throttle
(``t = fixed + B / (efficiency * throttle - ingest)``, the copy model's physics), then leadership moves
(producers to that partition stall ``gap_s`` around the switch). Tiered copy: the same, but the
new replica first fetches a little auxiliary state from object storage and the leader names the
bytes it has to copy (``copy_start``): the local tail, ``min(partition, local_tail_bytes)``.
Shared: the unuploaded tail is flushed at the object-store cap, then ownership moves. Latencies are
lognormal; sends stalled by the switch are acked after it; a few time out (outcome ``info``).
Generation is vectorised (numpy / pyarrow): 10 million rows take seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.analysis.model import family_of
from bench.history.store import SCHEMA, HistoryWriter
from systems.registry import NAMES, profile

T_BASE = 1_800_000_000.0


@dataclass
class SynthRun:
    system: str  # a registered system of the copy, tiered copy or shared move-model family
    prefill_bytes: int = 8 * 2**20
    throttle_bytes_per_s: int | None = 4 * 2**20  # copy family: the bandwidth cap
    objstore_bytes_per_s: int | None = 16 * 2**20  # shared family: the bandwidth cap
    tail_bytes: int = 2 * 2**20  # shared family: unuploaded at the move
    local_tail_bytes: int = 3 * 2**20  # tiered copy: not in object storage at the move (what is copied)
    aux_state_bytes: int = 64 * 1024  # tiered copy: leader epochs + producer snapshot read from object storage
    message_bytes: int = 4096
    rate_msgs_per_s: float = 200.0
    duration_s: float = 30.0
    move_at_s: float = 8.0
    partitions: int = 2
    efficiency: float = 0.9  # copy: share of the throttle achieved
    fixed_s: float = 0.6  # fixed cost of a move (election, metadata)
    gap_s: float = 0.4  # producers to the moved partition stall this long at the switch
    seed: int = 0
    with_reads: bool = True
    with_checks: bool = True

    def __post_init__(self) -> None:
        if family_of(self.system) is None:
            raise ValueError(f"no synthetic story for the {profile(self.system).move_model!r} move-model family")

    @property
    def copy(self) -> bool:
        """A copy family (the whole log, or a tiered copy's local tail)."""
        return family_of(self.system).copies

    @property
    def tiered(self) -> bool:
        """The leader names the bytes to copy (copy_start): a tiered copy's local tail."""
        return family_of(self.system).names_copy_start

    @property
    def copy_bytes(self) -> float:
        """The bytes the new replica copies: the partition, or a tiered copy's local tail."""
        b = self.partition_bytes_at_move
        return min(b, float(self.local_tail_bytes)) if self.tiered else b

    @property
    def bandwidth_bytes_per_s(self) -> int | None:
        return self.throttle_bytes_per_s if self.copy else self.objstore_bytes_per_s

    @property
    def move_seconds(self) -> float:
        if self.copy:
            return self.fixed_s + self.copy_bytes / (self.efficiency * self.throttle_bytes_per_s
                                                     - self.ingest_bytes_per_s)
        return self.fixed_s + self.tail_bytes / self.objstore_bytes_per_s

    @property
    def ingest_bytes_per_s(self) -> float:
        """Into the moved partition (the load spreads evenly over the partitions)."""
        return self.rate_msgs_per_s / self.partitions * self.message_bytes

    @property
    def partition_bytes_at_move(self) -> float:
        return self.prefill_bytes + self.rate_msgs_per_s / self.partitions * self.move_at_s * self.message_bytes


def build_history(cfg: SynthRun) -> tuple[pa.Table, dict[str, Any]]:
    """-> (history table with :data:`bench.history.SCHEMA`, facts used for the summary)."""
    rng = np.random.default_rng(cfg.seed)
    t0 = T_BASE + cfg.seed * 10_000.0
    n = int(cfg.rate_msgs_per_s * cfg.duration_s)
    ts = t0 + np.arange(n) / cfg.rate_msgs_per_s + rng.uniform(0, 0.2 / cfg.rate_msgs_per_s, n)
    part = (np.arange(n) % cfg.partitions).astype(np.int32)
    lat = rng.lognormal(math.log(0.003), 0.35, n)
    req = t0 + cfg.move_at_s
    move_s = cfg.move_seconds
    moved = 0
    lc = req + move_s - 0.05  # leader change just before the first ack the new owner serves
    # Copy contention: slower acks everywhere while bytes are copied.
    copying = (ts >= req) & (ts < lc - cfg.gap_s)
    lat = np.where(copying, lat * (1.3 if cfg.copy else 1.05), lat)
    ack = ts + lat
    stalled = (part == moved) & (ts >= lc - cfg.gap_s) & (ts < lc)
    ack = np.where(stalled, lc + 0.01 + lat, ack)
    # The first send after the switch must be acked after it too.
    outcome = np.full(n, "ok", dtype=object)
    timeouts = stalled & (rng.random(n) < 0.05)
    outcome[timeouts] = "info"
    ok = outcome == "ok"
    ack_col = np.where(ok, ack, np.nan)
    msg_id = np.arange(n, dtype=np.int64)
    # Offsets per partition in send order (one idempotent producer keeps its order).
    offsets = np.full(n, -1, dtype=np.int64)
    for p in range(cfg.partitions):
        idx = np.flatnonzero(ok & (part == p))
        offsets[idx] = np.arange(idx.size)
    size = np.full(n, cfg.message_bytes, dtype=np.int32)

    sends = pa.table({
        "kind": pa.array(np.full(n, "send", dtype=object), pa.string()),
        "ts": ts, "msg_id": msg_id,
        "producer": pa.array(np.full(n, "p0", dtype=object), pa.string()),
        "topic": pa.array(np.full(n, "hot", dtype=object), pa.string()),
        "partition": part,
        "ack_ts": pa.array(ack_col, pa.float64(), from_pandas=True),
        "outcome": pa.array(outcome, pa.string()),
        "error": pa.array(np.where(timeouts, "KafkaTimeoutError", None), pa.string()),
        "offset": pa.array(np.where(ok, offsets, 0), pa.int64(), mask=~ok),
        "size_bytes": size,
        "event": pa.nulls(n, pa.string()), "detail": pa.nulls(n, pa.string()),
        "group": pa.nulls(n, pa.string()), "member": pa.nulls(n, pa.string()), "record_ts": pa.nulls(n, pa.float64()),
        "digest": pa.nulls(n, pa.int64()),
    }, schema=SCHEMA)
    tables = [sends]
    if cfg.with_reads:
        ri = np.flatnonzero(ok)
        tables.append(pa.table({
            "kind": pa.array(np.full(ri.size, "read", dtype=object), pa.string()),
            "ts": ack[ri] + 0.005, "msg_id": msg_id[ri],
            "producer": pa.array(np.full(ri.size, "p0", dtype=object), pa.string()),
            "topic": pa.array(np.full(ri.size, "hot", dtype=object), pa.string()),
            "partition": part[ri], "ack_ts": pa.nulls(ri.size, pa.float64()),
            "outcome": pa.array(np.full(ri.size, "ok", dtype=object), pa.string()),
            "error": pa.nulls(ri.size, pa.string()), "offset": offsets[ri],
            "size_bytes": size[ri], "event": pa.nulls(ri.size, pa.string()),
            "detail": pa.nulls(ri.size, pa.string()),
            "group": pa.nulls(ri.size, pa.string()), "member": pa.nulls(ri.size, pa.string()),
            "record_ts": pa.nulls(ri.size, pa.float64()), "digest": pa.nulls(ri.size, pa.int64()),
        }, schema=SCHEMA))
    pbytes = cfg.prefill_bytes + int(((part == moved) & ok & (ack < req)).sum()) * cfg.message_bytes
    ev: list[tuple[float, str, dict[str, Any]]] = [
        (req, "action_start", {"action_id": 0, "action": "reassign", "topic": "hot", "partition": moved, "to": [3]}),
    ]
    copied = min(pbytes, cfg.local_tail_bytes) if cfg.tiered else pbytes
    if cfg.copy:
        copy_s = copied / (cfg.efficiency * cfg.throttle_bytes_per_s - cfg.ingest_bytes_per_s)
        if cfg.tiered:  # the leader names the start (the history vocabulary's copy_start), the
            # new replica reads the auxiliary state of the last tiered segment
            ev += [(req + 0.05, "copy_start", {"action_id": 0, "topic": "hot", "partition": moved, "replica": 3,
                                               "offset": int((pbytes - copied) // cfg.message_bytes),
                                               "bytes_to_copy": int(copied), "journal_event": "tiered_copy_from"}),
                   (req + 0.1, "move_phase", {"action_id": 0, "phase": "tier.aux_state", "seconds": 0.05,
                                              "bytes": cfg.aux_state_bytes}),
                   (req + 0.1, "counter", {"action_id": 0, "name": "bytes_moved_objstore",
                                           "value": cfg.aux_state_bytes, "broker": 3})]
        ev += [(req + copy_s, "move_phase", {"action_id": 0, "phase": "copy", "seconds": copy_s, "bytes": copied}),
               (req + copy_s, "counter", {"action_id": 0, "name": "bytes_moved_inter_broker", "value": copied,
                                          "broker": 3})]
        phases = {"copy": copy_s, "isr_join_and_elect": move_s - copy_s}
        if cfg.tiered:
            phases["tier.aux_state"] = 0.05
    else:
        flush_s = cfg.tail_bytes / cfg.objstore_bytes_per_s
        rest = move_s - flush_s
        ev += [(req + flush_s, "move_phase", {"action_id": 0, "phase": "flush_tail", "seconds": flush_s,
                                              "bytes": cfg.tail_bytes}),
               (req + flush_s + rest * 0.4, "move_phase", {"action_id": 0, "phase": "handover", "seconds": rest * 0.4,
                                                           "bytes": 0}),
               (lc, "move_phase", {"action_id": 0, "phase": "recover", "seconds": rest * 0.6, "bytes": 4096}),
               (req + flush_s, "counter", {"action_id": 0, "name": "bytes_moved_objstore", "value": cfg.tail_bytes,
                                           "broker": 1})]
        phases = {"flush_tail": flush_s, "handover": rest * 0.4, "recover": rest * 0.6}
    ev += [(lc, "leader_change", {"action_id": 0, "topic": "hot", "partition": moved, "leader": 3}),
           (lc, "move_complete", {"action_id": 0, "topic": "hot", "partition": moved, "new_leader": 3, "ts": lc}),
           (lc + 0.02, "action_end", {"action_id": 0, "action": "reassign", "ok": True}),
           (t0 + cfg.duration_s, "run_end", {"completed": True, "error": None, "ended": "completed",
                                            "duration_s": cfg.duration_s})]
    ne = len(ev)
    tables.append(pa.table({
        "kind": pa.array(["event"] * ne, pa.string()), "ts": [e[0] for e in ev], "msg_id": [-1] * ne,
        "producer": pa.nulls(ne, pa.string()), "topic": pa.array(["hot"] * ne, pa.string()),
        "partition": pa.array([moved] * ne, pa.int32()), "ack_ts": pa.nulls(ne, pa.float64()),
        "outcome": pa.nulls(ne, pa.string()), "error": pa.nulls(ne, pa.string()),
        "offset": pa.nulls(ne, pa.int64()), "size_bytes": pa.nulls(ne, pa.int32()),
        "event": [e[1] for e in ev], "detail": [json.dumps(e[2], sort_keys=True) for e in ev],
        "group": pa.nulls(ne, pa.string()), "member": pa.nulls(ne, pa.string()), "record_ts": pa.nulls(ne, pa.float64()),
        "digest": pa.nulls(ne, pa.int64()),
    }, schema=SCHEMA))
    facts = {"t0": t0, "request_ts": req, "leader_change_ts": lc, "partition_bytes": pbytes, "phases": phases,
             "move_seconds_model": move_s, "copy_bytes": copied if cfg.tiered else None}
    return pa.concat_tables(tables), facts


def scenario_yaml(cfg: SynthRun, name: str) -> str:
    import yaml

    system: dict[str, Any] = {"kind": cfg.system, "brokers": 3}
    bandwidth_param = profile(cfg.system).bandwidth_param
    if bandwidth_param and cfg.bandwidth_bytes_per_s:
        system[bandwidth_param] = cfg.bandwidth_bytes_per_s
    return yaml.safe_dump({
        "name": name, "description": "SYNTHETIC TEST FIXTURE (not a measurement)", "system": system,
        "workload": {"topics": [{"name": "hot", "partitions": cfg.partitions, "replication_factor": 1}],
                     "message_bytes": cfg.message_bytes, "produce_rate_msgs_per_s": cfg.rate_msgs_per_s,
                     "duration_s": cfg.duration_s},
        "prefill": {"bytes_per_partition": cfg.prefill_bytes},
        "actions": [{"at_s": cfg.move_at_s, "kind": "reassign", "topic": "hot", "partition": 0, "to": [3]}],
    }, sort_keys=False)


def write_run(run_dir: str | Path, cfg: SynthRun, *, scenario: str = "synthetic-sweep",
              use_writer: bool = True) -> Path:
    """Write one synthetic run directory. ``use_writer``: go through HistoryWriter (small runs);
    otherwise write the Parquet file directly (millions of rows)."""
    from bench.check import check_all

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    table, facts = build_history(cfg)
    if use_writer:
        with HistoryWriter(run_dir / "history.parquet", flush_rows=50_000, flush_interval_s=None) as w:
            w.extend(table.to_pylist())
    else:
        pq.write_table(table, run_dir / "history.parquet", row_group_size=1_000_000)
    (run_dir / "scenario.yaml").write_text(scenario_yaml(cfg, scenario), encoding="utf-8")
    checks: dict[str, Any] = {"valid": "unknown"}
    moves: list[dict[str, Any]] = []
    if cfg.with_checks:
        full = check_all(table)
        # each check's verdict and counts (lost_count, ...), as summary.json has them
        checks = {k: ({"valid": v["valid"], **{c: x for c, x in v.items() if c.endswith("_count")}}
                      if isinstance(v, dict) and "valid" in v else v) for k, v in full.items()}
        for m in full["move_seconds"]["moves"]:
            un = next((w["unavailable_seconds"] for w in full["unavailable_seconds"]["actions"]
                       if w["topic"] == m["topic"] and w["partition"] == m["partition"]), None)
            moves.append({"action_id": m["action_id"], "kind": m["action"], "topic": m["topic"],
                          "partition": m["partition"], "from": [1], "to": [3], "move_seconds": m["move_seconds"],
                          "bytes_moved_inter_broker": (facts["copy_bytes"] or facts["partition_bytes"]) if cfg.copy
                          else 0,
                          "bytes_moved_objstore": (cfg.aux_state_bytes if cfg.tiered else 0) if cfg.copy
                          else cfg.tail_bytes,
                          "copy_bytes_at_request": facts["copy_bytes"],
                          "unavailable_seconds": un, "partition_bytes": facts["partition_bytes"],
                          "phases": facts["phases"]})
    run_id = f"synthetic-{cfg.system}-{cfg.prefill_bytes}-{cfg.seed}"
    summary = {
        "run_id": run_id, "scenario": scenario, "system": cfg.system, "synthetic": True,
        "started_at": facts["t0"], "finished_at": facts["t0"] + cfg.duration_s, "duration_s": cfg.duration_s,
        "completed": True, "error": None, "ended": "completed", "problems": [],
        "provenance": {"date": None, "machine": None, "git": {"commit": None, "dirty": None}, "versions": None,
                       "links_emulated": False},
        "params": {"prefill_bytes_per_partition": cfg.prefill_bytes,
                   "message_bytes": cfg.message_bytes, "produce_rate_msgs_per_s": cfg.rate_msgs_per_s, "brokers": 3,
                   "partitions": cfg.partitions},
        "checks": checks, "moves": moves, "producer": {"sent": int(cfg.rate_msgs_per_s * cfg.duration_s)},
    }
    bandwidth_param = profile(cfg.system).bandwidth_param
    if bandwidth_param:
        summary["params"][bandwidth_param] = cfg.bandwidth_bytes_per_s
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return run_dir


def write_sweep(root: str | Path, *, sizes: tuple[int, ...] = (4 * 2**20, 16 * 2**20, 32 * 2**20),
                throttles: tuple[int, ...] = (4 * 2**20, 16 * 2**20), rate: float = 100.0,
                duration_s: float = 20.0) -> list[Path]:
    """A small synthetic sweep over the registered systems: for every size, a copy-family system
    (the whole log or a tiered copy's local tail) gets a run per throttle, a shared-family system
    one run (its tail varies a little)."""
    root = Path(root) / "synthetic-sweep" / "20300101T000000Z"
    out = []
    seed = 1
    for s in sizes:
        for system in NAMES:
            family = family_of(system)
            if family is not None and family.copies:
                for th in throttles:
                    cfg = SynthRun(system=system, prefill_bytes=s, throttle_bytes_per_s=th,
                                   rate_msgs_per_s=rate, duration_s=duration_s, seed=seed)
                    cfg.duration_s = max(duration_s, math.ceil(cfg.move_at_s + cfg.move_seconds + 6))
                    out.append(write_run(root / f"{system}-{s}-{th}", cfg))
                    seed += 1
            elif family is not None:
                out.append(write_run(root / f"{system}-{s}",
                                     SynthRun(system=system, prefill_bytes=s, rate_msgs_per_s=rate,
                                              duration_s=duration_s, seed=seed,
                                              tail_bytes=int(2 * 2**20 * (1 + 0.1 * (seed % 3))))))
                seed += 1
    return out
