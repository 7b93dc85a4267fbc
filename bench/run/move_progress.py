"""Progress of ongoing partition moves, from the Kafka protocol only (so it works on any
Kafka-compatible cluster): what `bench reassign --verify/--list/--watch` prints and what a run
records as ``move_progress`` events. One definition for both.

Per moving partition (ListPartitionReassignments):

* **Copy moves** (the replicas being added fetch the log from the leader): *bytes done* is the
  size of the adding replicas' logs (DescribeLogDirs ``partition_size``); *bytes remaining* is
  each adding replica's ``offset_lag`` (the leader's high watermark minus its log end) times the
  leader's bytes per offset (its DescribeLogDirs size over its local offsets, ListOffsets
  EARLIEST_LOCAL to LATEST), at most the leader's bytes less the replica's (records of mixed
  sizes make the average wrong; that bound is exact for a copy from the log start). A replica not created yet, or one that reports no lag while not in
  the ISR (Apache Kafka reports a follower's lag against its own high watermark, so ~0), counts
  the leader's local bytes minus its own as remaining. *Bytes to move* = done + remaining, so it
  grows with the ingest the move has to catch up with. With tiered storage the adding replica
  starts at the leader's last tiered offset, so its lag, not the leader's size, is the work.
* **Handover moves** (shared storage: no broker copies the log): nothing is copied between
  brokers; the row names the move's phase as the protocol shows it (the source still leads:
  closing; no leader: the target opening).

Rate and ETA: the rate is bytes done per second over the last ``window_s`` seconds of samples;
the ETA is bytes remaining over the rate at which *remaining* fell in that window (net of the
ingest the move has to catch up with), so it is None while the move is not gaining ground.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

TP = tuple[str, int]
# A broker's replication quotas (KIP-73, dynamic broker configs): the leader's rate caps what a
# move's new replicas copy from it, the follower's what they fetch.
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@dataclass
class Observation:
    """One poll of the cluster, as the protocol reports it."""

    ts: float
    ongoing: dict[TP, dict[str, list[int]]]  # {replicas, adding, removing}
    leaders: dict[TP, int] = field(default_factory=dict)
    isr: dict[TP, list[int]] = field(default_factory=dict)
    sizes: dict[TP, dict[int, int]] = field(default_factory=dict)  # broker -> partition_size
    lags: dict[TP, dict[int, int]] = field(default_factory=dict)  # broker -> offset_lag
    offsets: dict[TP, tuple[int, int]] = field(default_factory=dict)  # leader: (local start, end)


@dataclass
class PartitionProgress:
    topic: str
    partition: int
    target: list[int]
    adding: list[int]
    removing: list[int]
    copies: bool  # False: a handover, nothing copied between brokers
    phase: str
    to_move_bytes: int | None = None
    done_bytes: int | None = None
    remaining_bytes: int | None = None
    rate_bytes_per_s: float | None = None
    eta_s: float | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_eta(s: float | None) -> str:
    if s is None:
        return "unknown (not gaining)"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def describe(p: PartitionProgress) -> str:
    """One line under Kafka's 'is still in progress' line."""
    head = f"target {p.target}, adding {p.adding}, removing {p.removing}"
    if not p.copies:
        return f"{head}: handover, no data copied between brokers ({p.phase})"
    if not p.adding:
        return f"{head}: nothing to copy ({p.phase})"
    pct = f" ({100 * p.done_bytes / p.to_move_bytes:.1f} %)" if p.to_move_bytes else ""
    rate = f"{_fmt_bytes(p.rate_bytes_per_s)}/s" if p.rate_bytes_per_s is not None else "rate ?"
    eta = fmt_eta(p.eta_s) if p.rate_bytes_per_s is not None else "? (needs two samples)"
    return (f"{head}: {_fmt_bytes(p.done_bytes)} of {_fmt_bytes(p.to_move_bytes)} copied{pct}, "
            f"{_fmt_bytes(p.remaining_bytes)} to go, {rate}, ETA {eta}")


class Tracker:
    """Turns a sequence of observations into per-partition progress with rate and ETA."""

    def __init__(self, copies: bool = True, window_s: float = 5.0) -> None:
        self.copies = copies
        self.window_s = window_s
        self._hist: dict[TP, deque[tuple[float, int, int]]] = {}  # (ts, done, remaining)

    @property
    def tracking(self) -> bool:
        """Some partition was moving at the last update."""
        return bool(self._hist)

    def update(self, obs: Observation) -> list[PartitionProgress]:
        out = []
        for tp in sorted(obs.ongoing):
            r = obs.ongoing[tp]
            # ListPartitionReassignments' replicas are the whole set while moving: target + removing.
            target = [b for b in r["replicas"] if b not in r["removing"]]
            p = PartitionProgress(tp[0], tp[1], target, list(r["adding"]), list(r["removing"]),
                                  copies=self.copies, phase=self._phase(obs, tp, r))
            if self.copies:
                self._copy_progress(obs, tp, p)
            out.append(p)
        for tp in set(self._hist) - set(obs.ongoing):
            del self._hist[tp]  # done (or cancelled): a later move of it starts afresh
        return out

    @staticmethod
    def _phase(obs: Observation, tp: TP, r: dict[str, list[int]]) -> str:
        leader = obs.leaders.get(tp)
        if not r["adding"]:
            return "removing replicas" if r["removing"] else "electing"
        if leader is not None and leader < 0:
            return "no leader: the target is taking over"
        if leader in r["removing"]:
            return f"broker {leader} still leads" + ("; closing its streams" if obs.sizes.get(tp) is None else "")
        return f"broker {leader} leads"

    def _copy_progress(self, obs: Observation, tp: TP, p: PartitionProgress) -> None:
        sizes, lags = obs.sizes.get(tp, {}), obs.lags.get(tp, {})
        leader = obs.leaders.get(tp)
        leader_size = sizes.get(leader) if leader is not None else None
        start, end = obs.offsets.get(tp, (None, None))
        per_offset = leader_size / (end - start) if leader_size and start is not None and end > start else None
        done = remaining = 0
        known = True
        for b in p.adding:
            size, lag = sizes.get(b), lags.get(b, 0)
            if size is None:  # not created there yet: all of the leader's local log is ahead of it
                rem = leader_size
            elif lag > 0 and per_offset is not None:
                # The lag is in offsets and the bytes per offset an average: a log of large prefill
                # records and then small ones would look nearly untouched while its large records
                # are copied. The leader's bytes less the replica's bound it (exact for a copy from
                # the log start); the lag keeps a tiered copy's estimate to the tail it copies.
                rem = int(lag * per_offset)
                if leader_size is not None:
                    rem = min(rem, max(leader_size - size, 0))
            elif b in obs.isr.get(tp, []):
                rem = 0
            else:
                rem = max(leader_size - size, 0) if leader_size is not None else None
            if rem is None:
                known = False
                continue
            done += size or 0
            remaining += rem
        if not known:
            return
        p.done_bytes, p.remaining_bytes, p.to_move_bytes = done, remaining, done + remaining
        h = self._hist.setdefault(tp, deque())
        h.append((obs.ts, done, remaining))
        while len(h) > 2 and obs.ts - h[1][0] >= self.window_s:
            h.popleft()  # keep the newest sample at least window_s old as the base
        t0, d0, r0 = h[0]
        dt = obs.ts - t0
        if dt <= 0:
            return
        p.rate_bytes_per_s = max(done - d0, 0) / dt
        gain = (r0 - remaining) / dt
        p.eta_s = remaining / gain if gain > 0 else (0.0 if remaining == 0 else None)


# -- reading the cluster --------------------------------------------------------------------

def observe(admin, topics: set[str] | None = None, timeout_ms: int = 5000) -> Observation:
    """One observation of the cluster's ongoing moves (of `topics`, or all), with a kafka-python
    KafkaAdminClient: ListPartitionReassignments, Metadata (leader, ISR), DescribeLogDirs of every
    broker involved and ListOffsets of the leaders."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    ongoing_raw = admin.list_partition_reassignments(timeout_ms=timeout_ms)
    ts = time.time()
    ongoing = {(tp.topic, tp.partition): {"replicas": list(r.get("replicas") or []),
                                           "adding": list(r.get("adding_replicas") or []),
                                           "removing": list(r.get("removing_replicas") or [])}
               for tp, r in ongoing_raw.items() if topics is None or tp.topic in topics}
    obs = Observation(ts, ongoing)
    if not ongoing:
        return obs
    for t in admin.describe_topics(sorted({t for t, _ in ongoing})):
        for p in t.get("partitions", []):
            tp = (t["name"], p["partition_index"])
            if tp in ongoing:
                obs.leaders[tp] = p.get("leader_id", -1)
                obs.isr[tp] = list(p.get("isr_nodes") or [])
    brokers = sorted({b for tp, r in ongoing.items() for b in [*r["replicas"], *r["removing"]]}
                     | {b for b in obs.leaders.values() if b >= 0})
    sizes, lags = describe_log_dirs(admin, brokers, {t for t, _ in ongoing})
    for tp in ongoing:
        key = f"{tp[0]}-{tp[1]}"
        if key in sizes:
            obs.sizes[tp] = {int(b): v for b, v in sizes[key].items()}
            obs.lags[tp] = {int(b): v for b, v in lags[key].items()}
    led = [TopicPartition(*tp) for tp in ongoing if obs.leaders.get(tp, -1) >= 0]
    obs.offsets = leader_offsets(admin, led, OffsetSpec, timeout_ms)
    return obs


def leader_offsets(admin, tps: list, OffsetSpec, timeout_ms: int) -> dict[TP, tuple[int, int]]:
    """(local log start, high watermark) of each partition's leader. EARLIEST_LOCAL (ListOffsets
    v8) is the local start under tiered storage and the log start otherwise; a broker without v8
    gets EARLIEST. A partition whose leader does not answer is left out."""
    if not tps:
        return {}
    out: dict[TP, tuple[int, int]] = {}
    try:
        ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}, timeout_ms=timeout_ms)
        try:
            starts = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST_LOCAL for tp in tps}, timeout_ms=timeout_ms)
        except Exception:  # noqa: BLE001 - no ListOffsets v8: the log start is the local start
            starts = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps}, timeout_ms=timeout_ms)
    except Exception:  # noqa: BLE001 - a leader moving or down: this sample has no offsets
        return out
    for tp in tps:
        if tp in ends and tp in starts:
            out[(tp.topic, tp.partition)] = (starts[tp].offset, ends[tp].offset)
    return out


def describe_log_dirs(admin, brokers, topics: set[str]) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """DescribeLogDirs of each broker for `topics`: ({"topic-p": {broker: bytes}}, {...: {broker:
    offset lag}}); a broker that does not answer is left out."""
    sizes: dict[str, dict[str, int]] = {}
    lags: dict[str, dict[str, int]] = {}
    for b in brokers:
        try:
            res = admin.describe_log_dirs(topic_partitions=sorted(topics), brokers=[b])
        except Exception:  # noqa: BLE001 - that broker is down: the sample lacks it
            continue
        for entry in res:
            for d in entry.get("log_dirs", []):
                if d.get("error_code"):
                    continue
                for t in d.get("topics", []):
                    if t.get("name") not in topics:
                        continue
                    for p in t.get("partitions", []):
                        key = f"{t['name']}-{p['partition_index']}"
                        sizes.setdefault(key, {})[str(b)] = int(p.get("partition_size", 0))
                        lags.setdefault(key, {})[str(b)] = int(p.get("offset_lag", 0))
    return sizes, lags


def config_value(entry: Any) -> Any:
    """A DescribeConfigs entry's value (kafka-python gives each config as a dict of its data)."""
    return entry.get("value") if isinstance(entry, dict) else entry


def broker_configs(admin) -> dict[str, str]:
    """Every config of the lowest-numbered broker (DescribeConfigs): name -> value; {} when it does
    not answer."""
    from kafka.admin import ConfigResource, ConfigResourceType

    try:
        first = str(min(int(b["broker_id"]) for b in admin.describe_cluster()["brokers"]))
        res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, first)], config_filter="all")
        return {k: config_value(v) for k, v in res.get("broker", {}).get(first, {}).items()}
    except Exception:  # noqa: BLE001 - unknown
        return {}


def system_of(configs: dict[str, Any]) -> str:
    """Which system's profile a broker's configuration is (its own settings, e.g. the shared
    system's WAL in object storage, all among the broker's config keys; the profile with the most
    such keys); else the profile whose ``detected_by`` configs the broker has (a Kafka broker with
    tiered storage on); else the first launched system, the copy system (Kafka's own way)."""
    from systems.registry import LAUNCHED, PROFILES

    keys = set(configs)
    best = None
    for name, prof in PROFILES.items():
        own = set(prof.config_defaults)
        if own and own <= keys and (best is None or len(own) > len(PROFILES[best].config_defaults)):
            best = name
    if best:
        return best
    for name, prof in PROFILES.items():
        if prof.detected_by and all(str(configs.get(k, "")).lower() == v for k, v in prof.detected_by.items()):
            return name
    return LAUNCHED[0]


def moves_copy_data(admin) -> bool:
    """Whether this cluster's moves copy the log between brokers (its system's profile says)."""
    from systems.registry import PROFILES

    configs = broker_configs(admin)
    return not configs or PROFILES[system_of(configs)].copies_on_move
