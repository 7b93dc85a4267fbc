"""Estimates before a move (`bench reassign --estimate`, and a run's before each of its moves): what
a plan will take on a cluster, from what the protocol shows of it and a fitted move-time model,
before anything is executed.

Inputs (``PartitionFacts``, from two samples of the cluster's logs some seconds apart through the
Kafka protocol only, bench/run/move_estimate.py; :func:`facts_between`): each planned partition's
current and target replicas, its leader, the leader's log size (DescribeLogDirs) and its ingest
(the log's growth between the samples); :func:`cluster_estimate` adds the brokers' configs (the
system, their throttles, the shared system's WAL bounds). The model is one system's :class:`~bench.analysis.model.MoveModel` from a ``model.json``
(``ModelSource``: which file, which runs and commit, whether its held-out checks passed and by how
much they missed). Per partition:

* **copy** families (the copy system, tiered storage): every added replica copies the leader's
  log, ``t = c + B / (e x T - r)`` with ``T`` the leader's cap (its replication throttle, or the
  link's TCP payload when there is none) and ``r`` the ingest; ``r >= e x T`` is *not gaining*: the
  copy never catches up (``feasible: false``). For tiered storage ``B`` is, where the brokers start a
  new replica after the last tiered offset (KIP-1023) and the leader has tiered some of its log, the
  bytes after its last tiered offset (ListOffsets LATEST_TIERED, KIP-1005; those offsets at the
  bytes per offset of a few records sampled across them with Fetch, and of the records written
  between the samples); else the leader's local log (DescribeLogDirs reports local bytes).
* **handover** (shared storage): the old owner uploads its un-uploaded tail and the new one opens
  the stream: the new owner is elected at ``c + tail / (u x L)``, ``L`` the old owner's cap on a
  move's upload (its profile's ``move_cap_config``, e.g. shared.move.upload.bytes.per.s, where set;
  else its link); the producers learn of it at their next leader query and are acked one ack later
  (the model's client part: ``client_ack_s`` is the producers' median ack latency now, where known:
  ``--client-ack-ms``, or a run's load over the sampling window; with several producers writing
  the partition, ``--producers`` or a run's scenario, the earliest of their queries). The protocol does not show the
  tail, so the estimate spans tail = 0 (``seconds_low``) to what the WAL can hold before it uploads
  (the smaller of the upload threshold and the ingest over the upload interval: ``seconds_high``);
  ``seconds`` is the middle tail's, the median time for a move requested at a random point of the
  upload cycle (the time grows with the tail, in steps where the election crosses a leader query).

Each time carries the model's band: its held-out error where the checks passed, else the checks'
target, said as not validated. The plan's total runs the moves through the cluster simulator
(bench/analysis/rebalance.py: per-broker caps shared by the moves on a broker, at most
``concurrency`` moves per broker, in plan order). Client impact is the measured distribution of
the system's moves behind the model (unavailable seconds and the moved partitions' p99 ack latency
during moves, from the aggregate tables beside its ``model.json``), when they are there.
"""
from __future__ import annotations

import csv
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.analysis.model import MoveModel
from bench.analysis.model.budget import WIRE_PAYLOAD_SHARE
from bench.analysis.rebalance import SimMove, simulate
from bench.run import move_progress as mp
from bench.run.move_estimate import LogSample
from bench.paths import ROOT
from systems.registry import profile

# Where a model is looked for when none is named: a local aggregate, then the repository's bundled
# one (the models of the last stored `make bench`, docs/measured.md).
MODEL_PATHS = (ROOT / "results/aggregate/model.json",
               ROOT / "docs/measurements/bundles/models/files/aggregate/model.json")
# Where `bench calibrate` keeps a cluster's own model (<key>/aggregate/model.json, <key>/calibration.json),
# looked for before MODEL_PATHS for that cluster.
CALIBRATIONS = ROOT / "results" / "calibration"
CALIBRATION_FILE = "calibration.json"


def calibration_key(cluster_id: str | None, bootstrap: str) -> str:
    """A cluster's folder under CALIBRATIONS: its cluster id (DescribeCluster), else its bootstrap
    address, as a file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", cluster_id or bootstrap)


def calibrated_model(admin, root: Path = CALIBRATIONS) -> Path | None:
    """The model `bench calibrate` fitted on the cluster ``admin`` talks to, if there is one."""
    try:
        cid = admin.describe_cluster().get("cluster_id")
    except Exception:  # noqa: BLE001 - unknown: no calibration to find
        return None
    boot = admin.config.get("bootstrap_servers")
    boot = ",".join(boot) if isinstance(boot, list) else str(boot or "")
    for key in dict.fromkeys((calibration_key(cid, boot), calibration_key(None, boot))):
        p = root / key / "aggregate" / "model.json"
        if p.is_file():
            return p
    return None


KIP_1023_KEY = "follower.fetch.last.tiered.offset.enable"  # a new replica starts after the last tiered offset
TIERED_FAMILY = "tiered_copy"
NO_THROTTLE = 2**63 - 1  # Kafka's "no throttle" is Long.MAX_VALUE


class EstimateError(Exception):
    """No estimate can be made (no model for the system, no cap); the message says what to give."""


@dataclass
class PartitionFacts:
    topic: str
    partition: int
    replicas: list[int]  # now
    target: list[int]  # the plan's
    leader: int
    size_bytes: float  # the leader's log (DescribeLogDirs)
    ingest_bytes_per_s: float
    # tiered storage: the leader's bytes after its last tiered offset, what a KIP-1023 replica
    # copies (None: nothing tiered, or no tiered storage)
    untiered_bytes: float | None = None
    # records written per second between the samples (the leader's end offset; 0: unknown)
    records_per_s: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def adding(self) -> list[int]:
        return [b for b in self.target if b not in self.replicas]


@dataclass
class ModelSource:
    path: str
    system: str
    model: MoveModel
    validated: bool
    error_pct: float | None  # held-out error of the checks the model rests on (signed, worst)
    band_pct: float  # the relative band every estimate carries
    why_not_validated: str | None = None
    impact: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None  # calibration.json: fitted on this cluster's own moves

    @property
    def version(self) -> str | None:
        return self.model.version

    def describe(self) -> str:
        how = (f"held-out error {self.error_pct:+.1f} %" if self.validated and self.error_pct is not None
               else f"not validated ({self.why_not_validated}); band = its checks' target")
        return (f"{self.system} model {self.model.formula()} from {self.path} ({self.basis()}); {how}, "
                f"so +/-{self.band_pct:.0f} %")

    def basis(self) -> str:
        c = self.calibration
        if c:
            return (f"n = {self.model.n} moves of this cluster, calibrated {c.get('calibrated_at', '?')} by "
                    f"`bench calibrate` at commit {str(self.version or '?')[:10]}")
        return (f"n = {self.model.n} moves of this harness's {self.system} system, commit "
                f"{str(self.version or '?')[:10]}; not calibrated on this cluster")


def load_model(system: str, path: str | Path | None = None, search: tuple[Path, ...] | None = None) -> ModelSource:
    """The model of ``system`` from ``path`` (a model.json), else from the first of ``search``
    (default :data:`MODEL_PATHS`) that has one."""
    tried = [Path(path)] if path else list(search or MODEL_PATHS)
    for p in tried:
        if not p.is_file():
            continue
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise EstimateError(f"{p}: not a model.json ({e})") from None
        row = (doc.get("models") or {}).get(system)
        if row is None:
            if path:
                note = (doc.get("notes") or {}).get(system)
                raise EstimateError(f"{p} has no {system} model" + (f": {note}" if note else ""))
            continue
        model = MoveModel.from_row(row)
        validity = (doc.get("validity") or {}).get(system) or {}
        targets = [v.get("target_pct") for v in doc.get("validation") or []
                   if v.get("system") == system and isinstance(v.get("target_pct"), (int, float))]
        err = validity.get("error_pct")
        ok = bool(validity.get("validated")) and isinstance(err, (int, float))
        band = abs(err) if ok else (max(targets) if targets else 30.0)
        cal = p.parent.parent / CALIBRATION_FILE
        return ModelSource(str(p), system, model, ok, err if ok else None, max(band, 1.0),
                           None if ok else (validity.get("reason") or "no passing held-out check"),
                           measured_impact(p.parent, system), json.loads(cal.read_text()) if cal.is_file() else None)
    where = ", ".join(str(p) for p in tried)
    raise EstimateError(f"no {system} move-time model in {where}: run `python -m bench aggregate` on stored runs "
                        f"of that system (or name a model.json with --model)")


def measured_impact(aggregate_dir: Path, system: str) -> dict[str, Any]:
    """What the system's moves behind the model did to clients: unavailable seconds per move
    (moves.csv) and the moved partitions' p99 ack latency during moves (latency.csv); {} where the
    aggregate's tables are not beside the model."""
    out: dict[str, Any] = {}

    def rows(name: str) -> list[dict[str, str]]:
        p = aggregate_dir / f"{name}.csv"
        if not p.is_file():
            return []
        with p.open(newline="") as f:
            return [r for r in csv.DictReader(f) if r.get("system") == system]

    def stats(xs: list[float]) -> dict[str, float] | None:
        xs = sorted(x for x in xs if math.isfinite(x))
        if not xs:
            return None
        return {"median": statistics.median(xs), "max": xs[-1], "n": len(xs)}

    def num(v: str | None) -> float:
        try:
            return float(v) if v not in (None, "") else math.nan
        except ValueError:
            return math.nan

    un = stats([num(r.get("unavailable_seconds")) for r in rows("moves")])
    p99 = stats([num(r.get("p99_ms")) for r in rows("latency")
                 if r.get("level") == "run" and r.get("scope") == "partitions" and r.get("phase") == "during"])
    if un:
        out["unavailable_seconds"] = un
    if p99:
        out["p99_during_move_ms"] = p99
    return out


@dataclass
class Caps:
    """What a move may use, per broker (bytes/s): ``throttle`` (the brokers' replication quota) or
    ``link`` (the link rate: its TCP payload share when there is no throttle)."""

    throttle: dict[int, float] = field(default_factory=dict)
    link_bytes_per_s: float | None = None

    def of(self, broker: int) -> float | None:
        t = self.throttle.get(broker)
        link = self.link_bytes_per_s * WIRE_PAYLOAD_SHARE if self.link_bytes_per_s else None
        if t and link:
            return min(t, link)
        return t or link


@dataclass
class Handover:
    """What bounds a shared-storage partition's un-uploaded tail (the broker's WAL settings)."""

    upload_threshold_bytes: float
    upload_interval_s: float

    def tail_high(self, f: PartitionFacts) -> float:
        return min(f.size_bytes, self.upload_threshold_bytes, f.ingest_bytes_per_s * self.upload_interval_s)


def estimate(facts: list[PartitionFacts], src: ModelSource, caps: Caps, concurrency: int | None = None,
             handover: Handover | None = None, from_last_tiered: bool = False,
             client_ack_s: float | None = None, producers: int | dict[str, int] | None = None) -> dict[str, Any]:
    """The estimate of a plan: per partition and in total (see the module doc). ``from_last_tiered``:
    the brokers start a new replica after the last tiered offset (KIP-1023), so a tiered copy's
    bytes are the leader's untiered tail where it has tiered any. ``client_ack_s``: the producers'
    median ack latency now (a model with a client part waits one such ack after the leader query;
    None: the model's runs' own). ``producers``: the producer clients writing to each partition (one
    number, or one per topic; None: one, the latest a handover is seen): each queries the leader on
    its own schedule, one's sends to the partition its records per second over them apart."""
    m = src.model.for_client(client_ack_s)
    copies = m.kind.copies
    if not copies and handover is None:
        raise EstimateError(f"{src.system}: the brokers' WAL settings (wal.upload.threshold.bytes, "
                            "wal.upload.interval.ms) are needed to bound the tail a handover uploads")
    band = src.band_pct / 100.0
    rows, sims = [], []
    for f in facts:
        cap = caps.of(f.leader)
        if cap is None:
            raise EstimateError(f"{f.name}: its leader, broker {f.leader}, has no replication throttle and no link "
                                "rate is known: give --throttle (what --execute would set) or --link (e.g. 1gbit)")
        row: dict[str, Any] = {"topic": f.topic, "partition": f.partition, "from": f.replicas, "to": f.target,
                               "leader": f.leader, "size_bytes": f.size_bytes, "ingest_bytes_per_s": f.ingest_bytes_per_s,
                               "cap_bytes_per_s": cap}
        if sorted(f.target) == sorted(f.replicas) or (copies and not f.adding):
            # a reorder or a removal only: the leader election is the move (the model's fixed part)
            row.update(seconds=m.fixed_s, seconds_low=m.fixed_s * (1 - band), seconds_high=m.fixed_s * (1 + band),
                       bytes=0.0, feasible=True)
        elif copies:
            tiered_tail = from_last_tiered and m.family == TIERED_FAMILY and f.untiered_bytes is not None
            # the model's L: what the leader names when the new replica asks where to start, right
            # after the request (its rebuild from object storage comes after): the tail now
            b = f.untiered_bytes if tiered_tail else f.size_bytes
            t = m.predict(b, cap, f.ingest_bytes_per_s)
            ok = math.isfinite(t)
            row.update(seconds=t if ok else None, seconds_low=t * (1 - band) if ok else None,
                       seconds_high=t * (1 + band) if ok else None, feasible=ok, bytes_to_copy=b,
                       bytes=len(f.adding) * m.bytes_moved(b, t, f.ingest_bytes_per_s) if ok else None)
            if not ok:
                row["why"] = (f"not gaining: ingest {f.ingest_bytes_per_s / 1e6:.3g} MB/s >= what the copy achieves "
                              f"({m.efficiency:.3g} x {cap / 1e6:.3g} MB/s)")
            for new in f.adding:
                sims.append(SimMove(f"{f.name}:{new}", f.leader, new, b, f.ingest_bytes_per_s, m.fixed_s))
        else:
            hi_tail = handover.tail_high(f)
            k = producers.get(f.topic) if isinstance(producers, dict) else producers
            mk = m.for_client(None, k, k / f.records_per_s if k and f.records_per_s > 0 else 0.0) if k else m
            mid = mk.predict(f.size_bytes, cap, 0.0, tail_bytes=hi_tail / 2)
            ok = m.efficiency * cap > f.ingest_bytes_per_s  # the WAL's uploads keep up with the ingest
            outs = mk.client_outcomes(cap, 0.0, hi_tail)
            if len(outs) > 1:  # the election may fall on either side of one of the client's queries
                row["outcomes"] = outs
            row.update(seconds=mid, seconds_low=mk.predict(f.size_bytes, cap, 0.0, tail_bytes=0.0) * (1 - band),
                       seconds_high=mk.predict(f.size_bytes, cap, 0.0, tail_bytes=hi_tail) * (1 + band),
                       producers=k or 1,
                       bytes=hi_tail / 2, bytes_high=hi_tail, feasible=ok, bytes_to="object storage")
            if not ok:
                row["why"] = (f"not gaining: ingest {f.ingest_bytes_per_s / 1e6:.3g} MB/s >= the upload rate "
                              f"({m.efficiency:.3g} x {cap / 1e6:.3g} MB/s)")
            new = next((b for b in f.target if b != f.leader), f.target[0])
            sims.append(SimMove(f.name, f.leader, new, hi_tail / 2, 0.0, m.fixed_s))
        rows.append(row)
    total = _total(rows, sims, caps, m, copies, concurrency)
    return {
        "system": src.system, "family": m.family,
        "client_ack_seconds": client_ack_s if m.client_ack_s is not None else None,
        "model": {"source": src.path, "formula": m.formula(), "commit": src.version, "n": m.n,
                  "validated": src.validated, "error_pct": src.error_pct, "band_pct": src.band_pct,
                  "why_not_validated": src.why_not_validated, "calibrated": src.calibration is not None,
                  "calibration": src.calibration},
        "concurrency": concurrency,
        "partitions": rows,
        "total_seconds": total,
        "total_seconds_low": total * (1 - band) if total is not None else None,
        "total_seconds_high": total * (1 + band) if total is not None else None,
        "feasible": all(r["feasible"] for r in rows),
        "bytes": sum(r["bytes"] for r in rows) if all(r["bytes"] is not None for r in rows) else None,
        "impact": src.impact,
    }


def _total(rows: list[dict[str, Any]], sims: list[SimMove], caps: Caps, m: MoveModel, copies: bool,
           concurrency: int | None) -> float | None:
    """The plan's time, first request to last move done: the moves that carry bytes through the
    simulator (the per-broker caps shared, at most ``concurrency`` per broker), at least the
    longest move that carries none. None if some move never finishes."""
    if not all(r["feasible"] for r in rows):
        return None
    longest = max((r["seconds"] for r in rows), default=0.0)
    if not sims:
        return longest
    brokers = {s.src for s in sims} | {s.dst for s in sims}
    cap = {b: m.efficiency * (caps.of(b) or math.inf) for b in brokers}
    res = simulate(sims, cap, cap if copies else None, concurrency, sharing="fifo")
    return max(res.seconds, longest) if math.isfinite(res.seconds) else None


def facts_between(plan: list[dict], first: LogSample, second: LogSample) -> list[PartitionFacts]:
    """Each planned move's facts: replicas and leader now (``second``), the leader's log size and its
    ingest: the log's growth per second between the samples; where it shrank (retention deleted a
    segment meanwhile) the new offsets (ListOffsets) times the log's mean bytes per offset (records
    of mixed sizes make that mean wrong, so it is only the fallback); 0 across a leader change."""
    out = []
    dt = second.ts - first.ts
    for p in plan:
        tp = (p["topic"], p["partition"])
        if tp not in second.replicas:
            raise EstimateError(f"{tp[0]}-{tp[1]}: the cluster has no such partition")
        leader = second.leaders.get(tp, -1)
        if leader < 0:
            raise EstimateError(f"{tp[0]}-{tp[1]} has no leader now: nothing to estimate its move from")
        size = float(second.sizes.get(tp, {}).get(leader, 0))
        before = first.sizes.get(tp, {}).get(leader) if first.leaders.get(tp) == leader else None
        ingest = 0.0
        if before is not None and dt > 0:
            if size >= before:
                ingest = (size - before) / dt
            elif tp in first.offsets and tp in second.offsets:
                start, end = second.offsets[tp]
                per_offset = size / (end - start) if end > start else 0.0
                ingest = max(0.0, (end - first.offsets[tp][1]) / dt * per_offset)
        records = 0.0
        if first.leaders.get(tp) == leader and tp in first.offsets and tp in second.offsets and dt > 0:
            records = max(0.0, (second.offsets[tp][1] - first.offsets[tp][1]) / dt)
        out.append(PartitionFacts(tp[0], tp[1], list(second.replicas[tp]), list(p["replicas"]), leader, size, ingest,
                                  untiered_of(tp, size, first, second), records))
    return out


def untiered_of(tp: tuple[str, int], size: float, first: LogSample, second: LogSample) -> float | None:
    """The leader's bytes after its last tiered offset: the offsets the first sample's tail profile
    covers at its sampled bytes per offset (bench/run/move_estimate.py sample_tail: a tail may start
    with records of another size than its newest), the others at the bytes per offset of the records
    written between the two samples (the newest records: the tail's own kind), else at the local
    log's mean; at most the local log. None where nothing is tiered."""
    last = second.last_tiered.get(tp)
    if last is None or tp not in second.offsets:
        return None
    start, end = second.offsets[tp]
    if end <= last + 1:
        return 0.0
    per = size / (end - start) if end > start else 0.0
    same_leader = tp in first.offsets and first.leaders.get(tp) == second.leaders.get(tp)
    if same_leader:
        grew, was = end - first.offsets[tp][1], first.sizes.get(tp, {}).get(second.leaders[tp])
        if grew > 0 and was is not None and size > was:
            per = (size - was) / grew
    prof = first.tails.get(tp) if same_leader else None
    if prof is None:
        return min(size, (end - last - 1) * per)
    known = prof.bytes_between(last + 1, end)
    unknown = (end - last - 1) - max(0, min(end, prof.end) - max(last + 1, prof.start))
    return min(size, known + unknown * per)


def broker_rates(admin, brokers: set[int], key: str = mp.THROTTLE_KEYS[0]) -> dict[int, float]:
    """Each broker's cap on a move's bytes/s (``key``, the system's ``move_cap_config``: Kafka's
    leader.replication.throttled.rate, a dynamic config), where set."""
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import KafkaError

    out: dict[int, float] = {}
    for b in sorted(brokers):
        try:
            res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(b))], config_filter="all")
            v = mp.config_value(res.get("broker", {}).get(str(b), {}).get(key))
        except KafkaError:
            continue
        if v not in (None, "") and float(v) < NO_THROTTLE:
            out[b] = float(v)
    return out


def cluster_estimate(admin, plan: list[dict], first: LogSample, second: LogSample, *, throttle: float | None = None,
                     link_bytes_per_s: float | None = None, concurrency: int | None = None,
                     model: str | Path | None = None, system: str | None = None,
                     search: tuple[Path, ...] | None = None, source: ModelSource | None = None,
                     client_ack_s: float | None = None, producers: int | dict[str, int] | None = None
                     ) -> dict[str, Any]:
    """The estimate of ``plan`` from two samples: the system from the brokers' configs unless named,
    the throttle each broker has unless one is given (what --execute would set), the model from
    ``model`` or the first of ``search`` that has one (default :data:`MODEL_PATHS`),
    or ``source``, one loaded before (a ModelSource of the system); ``client_ack_s`` and
    ``producers`` as :func:`estimate` takes them. Raises EstimateError when no estimate can be made."""
    facts = facts_between(plan, first, second)
    configs = mp.broker_configs(admin)
    name = system or mp.system_of(configs)
    if source is None and model is None and search is None and (cal := calibrated_model(admin)) is not None:
        search = (cal, *MODEL_PATHS)  # this cluster's own model first
    src = source if source is not None and source.system == name else load_model(name, model, search)
    brokers = {b for f in facts for b in (*f.replicas, *f.target)}
    rates = ({b: float(throttle) for b in brokers} if throttle
             else broker_rates(admin, brokers, profile(name).move_cap_config))
    handover = None
    if not src.model.kind.copies and "wal.upload.threshold.bytes" in configs:
        handover = Handover(float(configs["wal.upload.threshold.bytes"]),
                            float(configs.get("wal.upload.interval.ms") or 0) / 1000)
    e = estimate(facts, src, Caps(rates, link_bytes_per_s), concurrency, handover,
                 from_last_tiered=str(configs.get(KIP_1023_KEY, "false")).lower() == "true", client_ack_s=client_ack_s,
                 producers=producers)
    e["detected_system"] = system is None
    e["sample_seconds"] = round(second.ts - first.ts, 3)
    return e


class RunModels:
    """A run's estimates (bench/run/move_estimate.py RunEstimator calls it before each move): the
    model of the run's system from the first of ``search`` (the run's results' aggregate: runs
    stored before this one, never its own), then :data:`MODEL_PATHS`, read once per system."""

    def __init__(self, search: tuple[Path, ...] = ()) -> None:
        self.search = tuple(dict.fromkeys((*search, *MODEL_PATHS)))
        self._sources: dict[str, ModelSource] = {}

    def __call__(self, admin, plan: list[dict], first: LogSample, second: LogSample, *, system: str | None,
                 link_bytes_per_s: float | None, concurrency: int | None,
                 client_ack_s: float | None = None, producers: dict[str, int] | None = None) -> dict[str, Any]:
        name = system or mp.system_of(mp.broker_configs(admin))  # an external cluster: from its configs
        if name not in self._sources:
            cal = calibrated_model(admin) if system is None else None  # an external cluster's own model first
            self._sources[name] = load_model(name, None, ((cal,) if cal else ()) + self.search)
        return cluster_estimate(admin, plan, first, second, link_bytes_per_s=link_bytes_per_s,
                                concurrency=concurrency, system=name, source=self._sources[name],
                                client_ack_s=client_ack_s, producers=producers)


def render(e: dict[str, Any]) -> str:
    """The estimate as a person reads it: one line per partition, the total, the model and the
    client impact it rests on."""
    def mb(x: float | None) -> str:
        return "-" if x is None else f"{x / 1e6:,.1f} MB"

    def secs(r: dict[str, Any], k: str = "seconds") -> str:
        if r.get(k) is None:
            return "never"
        return f"{r[k]:,.1f} s ({r[k + '_low']:,.1f}-{r[k + '_high']:,.1f})"

    lines = [f"{'partition':<20} {'replicas':<18} {'size':>12} {'ingest':>12} {'to move':>12}  estimate"]
    for r in e["partitions"]:
        name = f"{r['topic']}-{r['partition']}"
        reps = f"{r['from']} -> {r['to']}".replace(" ", "")
        moved = mb(r["bytes"]) + (" (store)" if r.get("bytes_to") else "")
        lines.append(f"{name:<20} {reps:<18} {mb(r['size_bytes']):>12} {mb(r['ingest_bytes_per_s']) + '/s':>12} "
                     f"{moved:>12}  {secs(r)}" + (f"  NOT GAINING: {r['why']}" if not r["feasible"] else ""))
        if r.get("outcomes"):
            lines.append(f"{'':<20} where it lands: the producers find the new owner at their first leader query "
                         f"after its election; over any tail up to {mb(r['bytes_high'])} and their retry jitter: "
                         + "; ".join(f"{o['seconds']:,.2f} s at the "
                                     + ("1 s queries" if o["query_s"] is None else
                                        f"~{o['query_s']:g} s query" if o["query_s"] else "first refusal")
                                     + f" ({o['probability']:.0%})" for o in r["outcomes"]))
    conc = "all at once" if e["concurrency"] is None else f"at most {e['concurrency']} per broker"
    if e["total_seconds"] is None:
        lines.append(f"total: cannot finish ({conc}): a move never catches up with its ingest")
    else:
        lines.append(f"total: {secs(e, 'total_seconds')} ({conc}), {mb(e['bytes'])} to move")
    md = e["model"]
    how = (f"held-out error {md['error_pct']:+.1f} %" if md["validated"]
           else f"not validated: {md['why_not_validated']}")
    basis = (f"calibrated on this cluster {md['calibration'].get('calibrated_at', '?')} (`bench calibrate`)"
             if md.get("calibrated") else "from this harness's runs, not calibrated on this cluster")
    lines.append(f"model: {e['system']} {md['formula']} from {md['source']} (n = {md['n']}, commit "
                 f"{str(md['commit'] or '?')[:10]}; {basis}; {how}; band +/-{md['band_pct']:.0f} %)")
    imp = e.get("impact") or {}
    if imp:
        parts = []
        if "unavailable_seconds" in imp:
            u = imp["unavailable_seconds"]
            parts.append(f"unavailable {u['median']:.2f} s median, {u['max']:.2f} s max")
        if "p99_during_move_ms" in imp:
            p = imp["p99_during_move_ms"]
            parts.append(f"p99 ack during a move {p['median']:,.0f} ms median, {p['max']:,.0f} ms max")
        n = max(v["n"] for v in imp.values())
        lines.append(f"clients, as measured in the model's runs (n <= {n}): " + "; ".join(parts))
    else:
        lines.append("clients: no measured moves beside the model (its aggregate's moves and latency tables)")
    return "\n".join(lines) + "\n"
