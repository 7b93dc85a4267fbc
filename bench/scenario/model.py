"""The scenario model: what system to build, what load to apply, what to do to it, what to check.

Sections: ``system`` (bench/scenario/system.py), ``workload`` (topics, message size, rate,
producers, duration, shape, linger.ms), ``load`` (where the producers run: Locust workers),
``prefill``, ``actions`` (bench/scenario/actions/),
``checks``, ``network`` (emulated links), ``consumers``, ``scale`` (the scale model it claims,
bench/scenario/scale.py), ``repetitions`` and ``matrix``. :class:`Scenario`
checks what crosses sections (replication factors against brokers, topics named in the prefill and
the consumers, the links a setting or an action needs, every action against the timeline before
it) and offers the runner its derived views (settings as the profile reads them, the initial
placement, the brokers actions add, the scenario on a cluster the harness does not start).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from bench.scenario.actions import FAULT_ACTIONS, RECOVERY_ACTIONS, Action, TimelineState, validate_actions
from bench.scenario.errors import ScenarioError, errors_of, field_error, raise_errors
from bench.latency import emulated, parse_latency
from bench.scenario.fields import NAME_RE, Bytes, Float, Latency, Model, TcRate
from bench.scenario.paths import missing_segment, split_path
from bench.scenario.system import LINK_SHARES, MAX_BROKERS, System, share_target
from bench.units import rate_bits
from systems.core.profile import SystemProfile
from workloads.messages import PREFILL_RECORD_BYTES, PRODUCER_LINGER_MS

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class Topic(Model):
    name: str
    # The placement lists every partition: bounded so that a typo cannot exhaust memory.
    partitions: Annotated[int, Field(strict=True, ge=1, le=100_000)]
    # None: the system's production default (its profile: replication 3, shared storage 1).
    replication_factor: Optional[Annotated[int, Field(strict=True, ge=1)]] = None
    # None: the topic is served by the workload's shared producer pool. Given (for every topic):
    # this many producers produce to this topic only (AutoMQ's producersPerTopicList).
    producers: Optional[Annotated[int, Field(strict=True, ge=1)]] = None
    # None: the system's production default, never above the replication factor.
    min_insync_replicas: Optional[Annotated[int, Field(strict=True, ge=1)]] = None
    # None: prefill.bytes_per_partition. Given: this topic's partitions are prefilled with this
    # many bytes instead (one cluster holding partitions of several sizes: one run, many sizes).
    prefill_bytes: Optional[Annotated[Bytes, Field(ge=0)]] = None

    @field_validator("name")
    @classmethod
    def _legal_name(cls, v: str) -> str:
        # Kafka's own rule (InvalidTopicException otherwise).
        if not _TOPIC_RE.match(v) or v in (".", ".."):
            raise ValueError("must be 1-249 characters of [A-Za-z0-9._-] (Kafka topic name rules)")
        return v


ShapeKind = Literal["steady", "ramp", "burst"]
_SHAPE_PARAMS = {
    "steady": (),
    "ramp": ("ramp_s",),
    "burst": ("burst_every_s", "burst_factor", "burst_s"),
}


class Shape(Model):
    """Load shape. ``ramp``: rate rises linearly from 0 to the target over ``ramp_s``.
    ``burst``: every ``burst_every_s`` the rate is multiplied by ``burst_factor`` for ``burst_s``."""

    kind: ShapeKind = "steady"
    ramp_s: Optional[Annotated[Float, Field(gt=0)]] = None
    burst_every_s: Optional[Annotated[Float, Field(gt=0)]] = None
    burst_factor: Optional[Annotated[Float, Field(gt=1)]] = None
    burst_s: Optional[Annotated[Float, Field(gt=0)]] = None

    @model_validator(mode="after")
    def _params_match_kind(self) -> Shape:
        wanted = _SHAPE_PARAMS[self.kind]
        for p in ("ramp_s", "burst_every_s", "burst_factor", "burst_s"):
            given = getattr(self, p) is not None
            if p in wanted and not given:
                raise field_error(p, f"required for shape kind {self.kind}")
            if p not in wanted and given:
                raise field_error(p, f"only applies to shape kind {'ramp' if p == 'ramp_s' else 'burst'}")
        if self.kind == "burst" and self.burst_s >= self.burst_every_s:
            raise field_error("burst_s", f"must be < burst_every_s ({self.burst_every_s})")
        return self


class Workload(Model):
    topics: Annotated[list[Topic], Field(min_length=1)]
    message_bytes: Annotated[Bytes, Field(gt=0)]
    key_distribution: Literal["none", "uniform", "zipf"] = "none"
    produce_rate_msgs_per_s: Annotated[Float, Field(gt=0)]
    producers: Annotated[int, Field(strict=True, ge=1)] = 1
    duration_s: Annotated[Float, Field(gt=0)]
    shape: Shape = Field(default_factory=Shape)
    # The load's producers' linger.ms, the same for every system: 5 ms by default, the client's
    # own default (librdkafka since v1.5.0, the Kafka Java producer since 4.0, KIP-1030;
    # workloads/messages.py). librdkafka's maximum is 900,000.
    linger_ms: Annotated[int, Field(strict=True, ge=0, le=900_000)] = PRODUCER_LINGER_MS
    # Pace each partition's sends (workloads/pacing.py): one request's worth in the client at a
    # time, so librdkafka's idempotent producer does not busy-poll while a slow acknowledgement is
    # awaited. For capacity runs without moves (automq-reassign's benchmark): it also holds a
    # partition's sends while a move's retries are unanswered, which is part of what a move's
    # client-side times measure, so runs that measure moves leave it off.
    pace_partitions: Annotated[bool, Field(strict=True)] = False
    # End the load this many seconds after the last action ended (every move done), if that comes
    # before duration_s, which stays the longest it runs: a run that measures its moves (calibrate)
    # does not idle through the time the slowest system's moves need. None: the load runs duration_s.
    end_after_actions_s: Optional[Annotated[Float, Field(ge=0)]] = None
    # The producers' client library (workloads/clients/): librdkafka (confluent-kafka, in the load
    # process), or kafka-python, kafkajs, sarama (a process per producer). Each idempotent with
    # acks=all and otherwise its own defaults; keyed sends and pace_partitions are librdkafka's.
    client_library: Literal["librdkafka", "kafka-python", "kafkajs", "sarama"] = "librdkafka"

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        seen: dict[str, int] = {}
        for i, t in enumerate(self.topics):
            if t.name in seen:
                raise field_error(f"topics.{i}.name", f"duplicate topic {t.name!r} (also topics.{seen[t.name]})")
            seen[t.name] = i
        per_topic = [t.producers is not None for t in self.topics]
        if any(per_topic):
            if not all(per_topic):
                raise field_error(f"topics.{per_topic.index(False)}.producers",
                                  "producers are per topic once one topic sets them: set them for every topic")
            total = sum(t.producers for t in self.topics)
            if self.producers != total:
                # workload.producers stays the number of producers the load process starts.
                raise field_error("producers", f"must be the sum of the topics' producers ({total})")
        if self.client_library != "librdkafka":
            for name, on in (("key_distribution", self.key_distribution != "none"), ("pace_partitions", self.pace_partitions)):
                if on:
                    raise field_error(name, f"is librdkafka's only (client_library is {self.client_library})")
        if self.shape.kind == "ramp" and self.shape.ramp_s > self.duration_s:
            raise field_error("shape.ramp_s", f"must be <= duration_s ({self.duration_s})")
        return self

    def topic(self, name: str) -> Topic | None:
        return next((t for t in self.topics if t.name == name), None)


class Prefill(Model):
    """Data written to each partition before the workload starts (the bytes a copy must move)."""

    bytes_per_partition: Annotated[Bytes, Field(ge=0)] = 0
    topics: Optional[list[str]] = None  # default: every workload topic
    # The prefill producer's batch.size. A copy later sends whole batches at line rate, so big
    # ones are bursts on a slow link; small ones make a slower prefill.
    batch_bytes: Annotated[Bytes, Field(ge=1024, le=16 * 1024 * 1024)] = 1_000_000
    # Each prefill record's value. A batch holds at least one record, so small records with a small
    # batch_bytes give many small batches (the shared system's objects: their count, not their
    # bytes, is what opening a partition walks).
    record_bytes: Annotated[Bytes, Field(ge=16, le=1_000_000)] = PREFILL_RECORD_BYTES
    # Producers (one connection each) the prefill writes through: a broker handles one request per
    # connection at a time, so 100,000 small batches into one partition need several.
    connections: Annotated[int, Field(strict=True, ge=1, le=32)] = 1
    # With emulated links: write the prefill with every link at the client link's rate (it lies
    # outside the measurement), then wait until the links are quiet before the load. False: at
    # the links' own rates, the load right after, as on a cluster whose links the harness does
    # not shape (what `bench crosscheck` compares with).
    fast_links: bool = True


class ConsumerSet(Model):
    """Consumers reading the workload's topics while it runs (workloads/kafka_consume.py):
    ``groups`` consumer groups of ``members`` members each. ``tail``: each group starts at the end
    of its partitions when the load starts and reads what is produced (end-to-end latency).
    ``catch_up``: it starts ``start_lag_bytes`` behind the end of each partition (default: at the
    start of the prefill) and reads the backlog while the load produces (catch-up throughput).
    ``assignment: assign`` splits the partitions over the members by hand, without a group."""

    name: Optional[str] = None  # default: the mode (unique names: set one when two sets share a mode)
    groups: Annotated[int, Field(strict=True, ge=1, le=16)] = 1
    members: Annotated[int, Field(strict=True, ge=1, le=16)] = 1
    mode: Literal["tail", "catch_up"] = "tail"
    start_lag_bytes: Optional[Annotated[Bytes, Field(ge=0)]] = None
    assignment: Literal["group", "assign"] = "group"
    topics: Optional[list[str]] = None  # default: every workload topic

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError("must start with a letter or digit and use only [A-Za-z0-9._-]")
        return v

    @model_validator(mode="after")
    def _lag_for_catch_up(self) -> ConsumerSet:
        if self.start_lag_bytes is not None and self.mode != "catch_up":
            raise field_error("start_lag_bytes", "only applies to mode catch_up")
        return self

    @property
    def label(self) -> str:
        return self.name or self.mode


def _consumer_sets(v: Any) -> Any:
    # `consumers: {groups: 2, ...}` is one set; a list gives several.
    return [v] if isinstance(v, dict) else v


class Checks(Model):
    safety: bool = True  # lost writes, duplicates, reordering: always checked
    max_move_seconds: Optional[Annotated[Float, Field(gt=0)]] = None
    max_unavailable_seconds: Optional[Annotated[Float, Field(gt=0)]] = None
    # Whether the run's moves are points of the move models (their fits and held-out checks). False:
    # a configuration chosen to measure one term only (shared-open.yaml's 1 KiB objects, whose
    # uploads are bound by their PUT count, not the link), whose moves serve only the open-cost check.
    move_models: bool = True
    # Seconds between counts of the object store's objects and bytes per key group during the load
    # (objstore_census events; `bench soak` judges leaks on them). None: not counted (each count
    # LISTs the whole bucket).
    objstore_census_s: Optional[Annotated[Float, Field(gt=0)]] = None

    @field_validator("safety")
    @classmethod
    def _always(cls, v: bool) -> bool:
        if v is not True:
            raise ValueError("safety checks cannot be disabled")
        return v




class NetworkSection(Model):
    """Emulated links (bench/run/network.py): with a link rate every node runs in its own
    network namespace on a link shaped to that rate; the other two default to it. The object
    store's link exists only for a system that has one (one scenario serves every system).

    ``object_store_latency``: every request from a node to the object store gets its response's
    first byte this long after the request's last byte (a far store), fixed (``20ms``; ``0ms``:
    none) or drawn per request from percentiles (``{p50: 30ms, p90: 60ms, p99: 150ms}``,
    bench/latency.py). A delaying proxy next to the store emulates it (bench/run/objstore_proxy.py),
    with or without link_rate; a system without an object store ignores it."""
    link_rate: Optional[TcRate] = None
    object_store_link_rate: Optional[TcRate] = None
    client_link_rate: Optional[TcRate] = None
    object_store_latency: Optional[Latency] = None


class Scale(Model):
    """The scale model the scenario claims (bench/scenario/scale.py, docs/scale-model.md): it is a
    production cluster scaled down by ``bytes`` (partition sizes, segment.bytes, local retention,
    the upload threshold) and by ``rate`` (links, ingest, throttles); time-like settings
    (timeouts, linger.ms, the object store's latency) stay at production values. A scaled setting
    whose factor is more than ``tolerance`` (relative) from the declared one breaks the scaling,
    and the run says so."""

    bytes: Annotated[Float, Field(gt=0, le=1)]
    rate: Annotated[Float, Field(gt=0, le=1)]
    tolerance: Annotated[Float, Field(gt=0, lt=1)] = 0.05


class LoadSection(Model):
    """Where the producers run. ``workers`` 0: in the load process itself (Locust's local runner).
    Else the load process is a Locust master and starts this many workers on this machine
    (``locust -f workloads/kafka_produce.py --worker``), and waits for ``remote_workers`` more that
    the user starts elsewhere with the same command and ``--master-host``/``--master-port`` (the
    master binds ``master_host``, port ``master_port``, 0: a free one, printed when it listens).
    The workload's producers, rate and shape are split across the workers
    (workloads/distributed.py)."""

    workers: Annotated[int, Field(strict=True, ge=0, le=64)] = 0
    remote_workers: Annotated[int, Field(strict=True, ge=0, le=1000)] = 0
    master_host: str = "127.0.0.1"
    master_port: Annotated[int, Field(strict=True, ge=0, le=65535)] = 0
    connect_timeout_s: Annotated[Float, Field(gt=0, le=3600)] = 60.0  # every worker connected, or the run fails


DEFAULT_TOPIC_PREFIX = "bench."


_NOT_MATRIX = ("name", "matrix", "repetitions")


class Scenario(Model):
    name: str
    description: str = ""
    system: System
    workload: Workload
    prefill: Prefill = Field(default_factory=Prefill)
    actions: list[Action] = Field(default_factory=list)
    checks: Checks = Field(default_factory=Checks)
    network: NetworkSection = Field(default_factory=NetworkSection)
    consumers: Annotated[list[ConsumerSet], BeforeValidator(_consumer_sets)] = Field(default_factory=list)
    load: LoadSection = Field(default_factory=LoadSection)
    # None: the scenario claims no scale model (its settings are not checked against production's).
    scale: Optional[Scale] = None
    # Each configuration (matrix point) runs this many times; runs differ only in run id
    # (``..__rep=K``), so their spread is the measurement's noise.
    repetitions: Annotated[int, Field(strict=True, ge=1, le=100)] = 1
    # dotted path -> values; expand() runs the cartesian product.
    matrix: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _file_safe(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("must start with a letter or digit and use only [A-Za-z0-9._-]")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix_keys(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key in v:
            head = key.split(".", 1)[0]
            if head in _NOT_MATRIX or head not in cls.model_fields:
                raise field_error(key, f"matrix key must be a dotted path into "
                                       f"{', '.join(f for f in cls.model_fields if f not in _NOT_MATRIX)}")
        return v

    @model_validator(mode="after")
    def _cross_references(self) -> Scenario:
        wl, system = self.workload, self.system
        if wl.client_library != "librdkafka" and system.client:
            # system.client is in librdkafka's names: the other libraries would not read them alike
            raise field_error("system.client", f"is librdkafka's settings: the load's producers use "
                              f"{wl.client_library} (workload.client_library); run it without them")
        for i, t in enumerate(wl.topics):
            rf = self.replication_factor(t)
            if rf is not None and rf > self.brokers:
                given = "" if t.replication_factor is not None else f" ({system.kind}'s default)"
                raise field_error(f"workload.topics.{i}.replication_factor",
                                  f"{rf}{given} exceeds system.brokers ({system.brokers})")
            if rf is not None and t.min_insync_replicas is not None and t.min_insync_replicas > rf:
                raise field_error(f"workload.topics.{i}.min_insync_replicas", f"exceeds the replication factor ({rf})")
        for i, name in enumerate(self.prefill.topics or ()):
            if wl.topic(name) is None:
                raise field_error(f"prefill.topics.{i}", f"unknown topic {name!r} (not in workload.topics)")
        labels: dict[str, int] = {}
        for i, cs in enumerate(self.consumers):
            if cs.label in labels:
                raise field_error(f"consumers.{i}.name", f"{cs.label!r} also names consumers.{labels[cs.label]}: "
                                                         f"give each set its own name")
            labels[cs.label] = i
            for j, name in enumerate(cs.topics or ()):
                if wl.topic(name) is None:
                    raise field_error(f"consumers.{i}.topics.{j}", f"unknown topic {name!r} (not in workload.topics)")
            if cs.mode == "catch_up":
                empty = [t for t in self.consumer_topics(cs) if not self.prefill_bytes_of(t)]
                if empty:
                    raise field_error(f"consumers.{i}.mode", f"catch_up reads a backlog: topic {empty[0]!r} has no "
                                                             f"prefill (prefill.bytes_per_partition / prefill.topics)")

        workers = self.load.workers + self.load.remote_workers
        if workers > wl.producers:
            raise field_error("load.workers", f"{workers} Locust workers for {wl.producers} producer(s): a worker "
                                              f"without a producer sends nothing (set workload.producers >= {workers})")
        net = self.network
        if not system.profile.launched:
            for f in ("link_rate", "object_store_link_rate", "client_link_rate"):
                if getattr(net, f) is not None:
                    raise field_error(f"network.{f}", f"the links of a cluster the harness does not start are not the "
                                                      f"harness's to shape (system kind {system.kind!r})")
            if emulated(net.object_store_latency) is not None:
                raise field_error("network.object_store_latency",
                                  f"the object store of a cluster the harness does not start is as far as it is "
                                  f"(system kind {system.kind!r})")
        if net.link_rate is None:
            for f in ("object_store_link_rate", "client_link_rate"):
                if getattr(net, f) is not None:
                    raise field_error(f"network.{f}", "needs network.link_rate (the links exist only with it)")
        for name, st in LINK_SHARES.items():
            if getattr(system, name) is None:
                continue
            if net.link_rate is None:
                raise field_error(f"system.{name}", "needs network.link_rate (a share of the link)")
            target = st.gives or system.profile.move_budget
            if target is not None and getattr(system, target, None) is not None:
                raise field_error(f"system.{name}", f"give the {st.noun} either in bytes/s or as a share of the "
                                                    f"link, not both (system.{target})")

        rfs = [self.replication_factor(t) for t in wl.topics]
        known_rf = None not in rfs  # unknown until a cluster that sets it has been asked
        state = TimelineState(
            brokers=self.brokers, topics={t.name: t.partitions for t in wl.topics},
            placement=self.placement() if known_rf else {}, known_rf=known_rf, max_rf=max(rfs) if known_rf else 1,
            added=self.added_broker_ids(), system_kind=system.kind, single_owner=system.profile.single_owner,
            has_object_store=system.profile.object_store is not None)
        validate_actions(self.actions, state, duration_s=wl.duration_s, launched=system.profile.launched,
                         commands=system.commands, has_links=net.link_rate is not None)
        if wl.end_after_actions_s is not None and not self.actions:
            raise field_error("workload.end_after_actions_s", "ends the load after the actions: the scenario has none")
        faults = sorted({a.kind for a in self.actions} & (FAULT_ACTIONS | RECOVERY_ACTIONS))
        if wl.end_after_actions_s is not None and faults:
            # a fault's outage runs to the first ack after its recovery, which the action's end precedes
            raise field_error("workload.end_after_actions_s", f"cannot end the load after fault actions ({', '.join(faults)}): "
                                                              f"their outage is measured after them")
        resolved = self.resolved()
        for key in self.matrix:
            missing = missing_segment(resolved, split_path(key))
            if missing is not None:
                raise field_error(f"matrix.{key}", f"no field {missing!r} in the scenario")
        return self

    @classmethod
    def parse(cls, data: Any, source: str) -> Scenario:
        """Validate a raw scenario dict; ScenarioError naming ``source`` and each bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise_errors(source, errors_of(exc, cls))

    # -- helpers for the runner --------------------------------------------------------------

    @property
    def profile(self) -> SystemProfile:
        return self.system.profile

    def settings(self) -> dict[str, Any]:
        """The system section as the profile reads it, a setting given as a share of the link (the
        replication throttle, the move budget) turned into the bytes/s of the setting it gives."""
        s = self.system.model_dump()
        for name, st in LINK_SHARES.items():
            share = s.pop(name)
            target = share_target(st, self.profile)
            if share is not None and target is not None:
                s[target] = int(share * rate_bits(self.network.link_rate) / 8)
        return s

    def object_store_latency(self) -> str | None:
        """The object-store latency this run's system sees, as one string (``20ms``,
        ``p50=30ms,p90=60ms``; ``0ms``: none emulated), None for a system without an object store
        (or a cluster the harness does not start): what a run's params record."""
        if self.profile.object_store is None or not self.profile.launched:
            return None
        v = self.network.object_store_latency
        return "0ms" if v is None else parse_latency(v).text

    def replication_factor(self, topic: Topic) -> int | None:
        """A topic's replication factor: its own, else the system's production default (None: the
        cluster's default, not known before it is asked, see :meth:`for_cluster`)."""
        if topic.replication_factor is not None:
            return topic.replication_factor
        return self.system.profile.replication_factor

    def min_insync_replicas(self, topic: Topic) -> int | None:
        """The topic's own min.insync.replicas, else the system's production one, never above the
        topic's replication factor (None while either is unknown)."""
        rf = self.replication_factor(topic)
        mi = topic.min_insync_replicas if topic.min_insync_replicas is not None else \
            self.system.profile.min_insync_replicas
        return None if rf is None or mi is None else min(mi, rf)

    @property
    def brokers(self) -> int:
        """The scenario's brokers, 1..n: ``system.brokers``; for a cluster the harness does not start
        that leaves it out, the bound until the cluster is reached (:meth:`for_cluster` sets the
        cluster's and validates every action against them again)."""
        return self.system.brokers if self.system.brokers is not None else MAX_BROKERS

    def placement(self) -> dict[str, dict[int, list[int]]]:
        """The fixed initial placement the runner creates topics with: replicas round-robin from
        broker 1, partition after partition over all topics (hot-0 at replication factor 3 on
        four brokers: [1, 2, 3])."""
        n = self.brokers
        out: dict[str, dict[int, list[int]]] = {}
        j = 0
        for t in self.workload.topics:
            out[t.name] = {}
            for p in range(t.partitions):
                out[t.name][p] = [1 + (j + r) % n for r in range(self.replication_factor(t))]
                j += 1
        return out

    def for_cluster(self, brokers: Iterable[int], default_replication_factor: int,
                    min_insync_replicas: int) -> Scenario:
        """This scenario as it runs on a cluster the harness does not start: every topic named with
        :attr:`topic_prefix` (the harness creates and deletes only those), the cluster's
        ``default.replication.factor`` and ``min.insync.replicas`` where the scenario leaves them
        open, validated again (ScenarioError naming the field). The scenario's brokers
        1..system.brokers must all be brokers of the cluster; a scenario that leaves system.brokers
        out takes the cluster's, 1..n (Metadata)."""
        have = set(brokers)
        n = self.system.brokers
        if n is None:
            n = 0
            while n + 1 in have:
                n += 1
            if n == 0:
                raise ScenarioError(f"{self.name}: system.brokers: a scenario's brokers are 1..n, and the cluster has "
                                    f"no broker 1 (its ids: {sorted(have)})",
                                    [("system.brokers", "the cluster has no broker 1")])
        missing = sorted(set(range(1, n + 1)) - have)
        if missing:
            raise ScenarioError(f"{self.name}: system.brokers: the scenario uses brokers 1..{n}, "
                                f"the cluster has {sorted(have)} (no {missing})",
                                [("system.brokers", f"brokers {missing} not in the cluster")])
        prefix = self.topic_prefix
        data = self.resolved()
        for t in data["workload"]["topics"]:
            t["name"] = prefix + t["name"]
            if t["replication_factor"] is None:
                t["replication_factor"] = default_replication_factor
            if t["min_insync_replicas"] is None:
                t["min_insync_replicas"] = min(min_insync_replicas, t["replication_factor"])
        if data["prefill"]["topics"] is not None:
            data["prefill"]["topics"] = [prefix + n for n in data["prefill"]["topics"]]
        for a in data["actions"]:
            if a.get("topic") is not None:
                a["topic"] = prefix + a["topic"]
            for m in a.get("partitions") or ():
                m["topic"] = prefix + m["topic"]
        for cs in data["consumers"]:
            if cs.get("topics") is not None:
                cs["topics"] = [prefix + n for n in cs["topics"]]
        data["system"]["topic_prefix"] = prefix
        data["system"]["brokers"] = n
        data["system"]["existing_topics"] = self.system.existing_topics or "refuse"
        return Scenario.parse(data, f"{self.name} on the cluster at {self.system.bootstrap}")

    @property
    def topic_prefix(self) -> str:
        return self.system.topic_prefix if self.system.topic_prefix is not None else DEFAULT_TOPIC_PREFIX

    def added_broker_ids(self) -> dict[int, int]:
        """action index -> id of the broker that add_broker_and_rebalance action starts."""
        out: dict[int, int] = {}
        next_id = self.brokers + 1
        for i, a in enumerate(self.actions):
            if a.spec.adds_broker:
                out[i] = a.broker if a.broker is not None else next_id
                next_id = max(next_id, out[i] + 1)
        return out

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) of the workload."""
        return [(t.name, p) for t in self.workload.topics for p in range(t.partitions)]

    def consumer_topics(self, cs: ConsumerSet) -> list[str]:
        return list(cs.topics) if cs.topics else [t.name for t in self.workload.topics]

    def prefill_topics(self) -> list[str]:
        if self.prefill.topics is not None:
            return list(self.prefill.topics)
        return [t.name for t in self.workload.topics]

    def prefill_bytes_of(self, topic: str) -> int:
        """The bytes prefilled into each partition of ``topic``: its own ``prefill_bytes``, else
        ``prefill.bytes_per_partition`` (0: not prefilled, or not in ``prefill.topics``)."""
        t = self.workload.topic(topic)
        if t is None or topic not in self.prefill_topics():
            return 0
        return int(t.prefill_bytes if t.prefill_bytes is not None else self.prefill.bytes_per_partition)

    def nominal_ingest_of(self, topic: str) -> float | None:
        """The scenario's ingest into each partition of ``topic`` in bytes/s at the load's nominal
        rate: a topic with its own producers gets their share of the rate, spread over its
        partitions; otherwise the pool's rate spreads over every partition. None: unknown topic."""
        wl = self.workload
        t = wl.topic(topic)
        if t is None:
            return None
        rate = float(wl.produce_rate_msgs_per_s) * float(wl.message_bytes)
        if t.producers is not None:
            return rate * t.producers / wl.producers / t.partitions
        return rate / sum(x.partitions for x in wl.topics)

    def producers_of(self, topic: str) -> tuple[int, float] | None:
        """The producer clients writing to each partition of ``topic`` and the mean gap (s) between
        one producer's sends to one partition (its message rate spread over the partitions it
        writes: the keyless messages go to any of them): a topic with its own producers has them
        alone, otherwise every producer writes every topic. None: unknown topic."""
        wl = self.workload
        t = wl.topic(topic)
        if t is None:
            return None
        per_producer = float(wl.produce_rate_msgs_per_s) / wl.producers
        if t.producers is not None:
            return t.producers, t.partitions / per_producer if per_producer > 0 else math.inf
        parts = sum(x.partitions for x in wl.topics)
        return wl.producers, parts / per_producer if per_producer > 0 else math.inf

    def resolved(self) -> dict[str, Any]:
        """Plain dict with every default filled in (what a run stores next to its history)."""
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.resolved(), sort_keys=False, default_flow_style=None, width=100)
