"""Scenario model: what system to build, what load to apply, what to do to it, what to check.

A scenario is a YAML file validated into frozen pydantic models. Unknown fields are rejected
(a typo must never silently fall back to a default), and every error names the file and the dotted
path of the bad field, e.g. ``reassign-one.yaml: workload.produce_rate_msgs_per_s: must be > 0``.
Dotted paths are the same ones ``--set`` and ``matrix`` use; list items are addressed by index
(``actions.0.to``).

Conventions the runner relies on:

* Brokers are numbered ``1..system.brokers``; ``add_broker_and_rebalance`` adds the next free id
  (or ``broker`` if given) — see :meth:`Scenario.added_broker_ids`.
* An action's ``action_id`` (used in history events) is its 0-based index in ``actions``; actions
  are listed in time order.
* Faults come in pairs (:data:`FAULT_RECOVERY`): a broker is killed before it is restarted and
  paused before it is resumed, the controller killed before it is restarted, the object store
  (only for a system whose profile has one) stopped before it is started.
"""

from __future__ import annotations

import copy
import os
import itertools
import re
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bench.history.names import NODE_CLIENT, NODE_CONTROLLER, NODE_OBJSTORE, broker_node
from bench.units import parse_bytes, rate_bits
from systems.core.config import ConfigError
from systems.core.config import check as check_config
from systems.core.profile import SystemProfile
from systems.registry import PROFILES


class ScenarioError(ValueError):
    """Invalid scenario. ``errors`` holds ``(dotted_path, reason)`` pairs; the message has one
    ``<file>: <path>: <reason>`` line per error."""

    def __init__(self, message: str, errors: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)


# Strict numbers: YAML gives typed scalars, so a bool or a quoted string in a numeric field is a
# mistake, not something to coerce.
Int = Annotated[int, Field(strict=True)]
Float = Annotated[float, Field(strict=True)]
Bytes = Annotated[int, BeforeValidator(parse_bytes), Field(strict=True)]
BrokerId = Annotated[int, Field(strict=True, ge=1)]
MIN_SEGMENT_BYTES = 1 << 20  # Kafka 4.0's floor for segment.bytes (KIP-1030)


def _as_config_str(value: Any) -> Any:
    # Broker configs are strings on the wire; YAML turns `true`/`1048576` into bool/int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


ConfigValue = Annotated[str, BeforeValidator(_as_config_str)]


def _err(where: str, reason: str) -> PydanticCustomError:
    """A validation error whose path is ``<validator location>.<where>``."""
    return PydanticCustomError("scenario", "{where}: {reason}", {"where": where, "reason": reason})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------
# Sections

_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvRef(_Model):
    """A client setting read from an environment variable when a client is created, so a secret
    never enters a scenario file, a result or a log (``sasl.password: {env: KAFKA_PASSWORD}``)."""

    env: str

    @field_validator("env")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ENV_RE.match(v):
            raise ValueError("must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        return v


ClientValue = typing.Union[EnvRef, ConfigValue]
# What every comparison rests on: the same producer semantics on every system; the bootstrap comes
# from the system section.
LOCKED_CLIENT_SETTINGS = {
    "bootstrap.servers": "the harness sets it (system.bootstrap, or the cluster it starts)",
    "acks": "every system is measured with acks=all",
    "enable.idempotence": "every system is measured with idempotent producers",
}
_BOOTSTRAP_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")
COMMAND_FIELDS = ("kill_broker", "restart_broker", "pause_broker", "resume_broker")


def _check_template(v: str | None) -> str | None:
    if v is None:
        return v
    if not v.strip():
        raise ValueError("empty command")
    import string

    try:
        names = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
    except ValueError as exc:
        raise ValueError(f"bad template: {exc}") from None
    if names - {"broker"}:
        raise ValueError(f"unknown placeholder(s) {sorted(names - {'broker'})}: only {{broker}} is filled in")
    return v


Command = Annotated[Optional[str], BeforeValidator(_check_template)]


class Commands(_Model):
    """Shell commands the harness runs to act on a cluster it does not start (``{broker}`` is the
    broker id); a fault action without its command is refused. A command must return when the act
    is done (a restart may return before the broker serves: the harness then waits until clients
    see it in the metadata)."""

    kill_broker: Command = None
    restart_broker: Command = None
    pause_broker: Command = None
    resume_broker: Command = None
    timeout_s: Annotated[Float, Field(gt=0)] = 120.0


class System(_Model):
    kind: str  # a registered system (systems/registry.py)
    brokers: Annotated[int, Field(strict=True, ge=1)]
    # Cap on inter-broker replication traffic during a move (replication system only): an
    # operator's setting, either in bytes/s or as a share of the brokers' link rate (with
    # network.link_rate; Scenario.settings() turns it into bytes/s).
    replication_throttle_bytes_per_s: Optional[Annotated[Bytes, Field(gt=0)]] = None
    replication_throttle_of_link: Optional[Annotated[Float, Field(gt=0, le=1)]] = None
    # Cap on object-storage bandwidth (shared system only); None = unthrottled.
    objstore_bandwidth_bytes_per_s: Optional[Annotated[Bytes, Field(gt=0)]] = None
    # Shared system only; None = the system's own default (systems/shared/settings.py).
    wal_batch_interval_ms: Optional[Annotated[Float, Field(gt=0)]] = None
    wal_upload_threshold_bytes: Optional[Annotated[Bytes, Field(gt=0)]] = None
    # Tiered system only (its profile's topic_configs); None = the profile's default. Kafka's
    # topic configs segment.bytes and local.retention.bytes: closed segments go to object storage,
    # the leader keeps local.retention.bytes locally, a new replica copies only the local tail.
    segment_bytes: Optional[Annotated[Bytes, Field(ge=MIN_SEGMENT_BYTES)]] = None
    local_retention_bytes: Optional[Annotated[Bytes, Field(gt=0)]] = None
    # KIP-1023 (true: a new replica starts after the last tiered offset) or KIP-405 (false: at the
    # leader's local log start); None = the system's default.
    follower_fetch_last_tiered_offset: Optional[Annotated[bool, Field(strict=True)]] = None
    extra: dict[str, ConfigValue] = Field(default_factory=dict)  # raw broker configs
    # Settings passed unchanged to every Kafka client the harness creates (librdkafka / Java names:
    # security.protocol, sasl.mechanism, ssl.ca.location, client.id, linger.ms, ...); a value may
    # be {env: NAME}. bench/run/clients.py applies them.
    client: dict[str, ClientValue] = Field(default_factory=dict)
    # A cluster the harness does not start (profile.launched false): where it is, how to act on
    # it, which topics are the harness's.
    bootstrap: Optional[str] = None
    commands: Optional[Commands] = None
    topic_prefix: Optional[str] = None  # default "bench."; every topic of the run gets it
    existing_topics: Optional[Literal["refuse", "replace"]] = None  # default refuse
    label: Optional[str] = None  # what the report calls the cluster ("Apache Kafka 3.9, 3 x m5.large")

    @field_validator("client")
    @classmethod
    def _client(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key in LOCKED_CLIENT_SETTINGS:
                raise _err(key, f"cannot be set: {LOCKED_CLIENT_SETTINGS[key]}")
        return v

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for addr in v.split(","):
            m = _BOOTSTRAP_RE.match(addr.strip())
            if m is None or not 0 < int(m.group(2)) < 65536:
                raise ValueError(f"{addr.strip()!r} is not host:port (bootstrap: host:port[,host:port...])")
        return v

    @field_validator("topic_prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[A-Za-z0-9._-]{1,100}$", v):
            raise ValueError("must be 1-100 characters of [A-Za-z0-9._-] (the harness deletes only topics "
                             "with this prefix)")
        return v

    @field_validator("kind")
    @classmethod
    def _registered(cls, v: str) -> str:
        if v not in PROFILES:
            raise ValueError(f"unknown system {v!r} (systems: {', '.join(PROFILES)})")
        return v

    @property
    def profile(self) -> SystemProfile:
        return PROFILES[self.kind]

    @model_validator(mode="after")
    def _fits_profile(self) -> System:
        prof = self.profile
        if prof.launched:
            for f in _UNLAUNCHED_FIELDS:
                if getattr(self, f) is not None:
                    raise _err(f, f"only for a cluster the harness does not start (system kind "
                                  f"{' or '.join(n for n, p in PROFILES.items() if not p.launched)}); "
                                  f"{self.kind!r} is started by the harness")
            # A key some system knows: a two-system scenario sets keys only one of them reads (the
            # other is not given them, bench/run/runner.py: broker_config); a typo no system knows.
            try:
                check_config(self.extra, {k: v for p in PROFILES.values() if p.launched
                                          for k, v in p.config_defaults.items()})
            except ConfigError as e:
                raise _err("extra", str(e)) from None
        elif self.bootstrap is None:
            raise _err("bootstrap", f"required for system kind {self.kind!r} (host:port[,host:port...])")
        if self.local_retention_bytes is not None and self.local_retention_bytes < (self.segment_bytes or 0):
            # Kafka accepts it, but then the leader keeps only its active segment: say so rather
            # than measure a configuration nobody meant.
            raise _err("local_retention_bytes", f"{self.local_retention_bytes} is below system.segment_bytes "
                                                f"({self.segment_bytes}): the leader would keep less than one "
                                                f"closed segment locally; give at least one segment")
        if prof.settings is not None:
            for f, default in _SYSTEM_SETTINGS.items():
                if f not in prof.settings and getattr(self, f) != default:
                    raise _err(f, f"not a setting of system {self.kind!r}, which is configured by whoever runs it "
                                  f"(it reads: {', '.join(sorted(prof.settings))})")
        return self


# Fields only a cluster the harness does not start reads.
_UNLAUNCHED_FIELDS = ("bootstrap", "commands", "topic_prefix", "existing_topics", "label")
# The system settings one system may read and another ignore, with their defaults.
_SYSTEM_SETTINGS: dict[str, Any] = {
    "replication_throttle_bytes_per_s": None, "replication_throttle_of_link": None,
    "objstore_bandwidth_bytes_per_s": None, "wal_batch_interval_ms": None, "wal_upload_threshold_bytes": None,
    "segment_bytes": None, "local_retention_bytes": None, "follower_fetch_last_tiered_offset": None,
    "extra": {},
}
# The systems' own settings (each read by one system's profile, ignored by the others): a run's
# params carry their values so configurations that differ in them are never pooled.
OWN_SETTINGS = ("wal_batch_interval_ms", "wal_upload_threshold_bytes", "segment_bytes", "local_retention_bytes",
                "follower_fetch_last_tiered_offset")


_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class Topic(_Model):
    name: str
    partitions: Annotated[int, Field(strict=True, ge=1)]
    # None: the system's production default (its profile: replication 3, shared storage 1).
    replication_factor: Optional[Annotated[int, Field(strict=True, ge=1)]] = None
    # None: the topic is served by the workload's shared producer pool. Given (for every topic):
    # this many producers produce to this topic only (AutoMQ's producersPerTopicList).
    producers: Optional[Annotated[int, Field(strict=True, ge=1)]] = None
    # None: the system's production default, never above the replication factor.
    min_insync_replicas: Optional[Annotated[int, Field(strict=True, ge=1)]] = None

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


class Shape(_Model):
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
                raise _err(p, f"required for shape kind {self.kind}")
            if p not in wanted and given:
                raise _err(p, f"only applies to shape kind {'ramp' if p == 'ramp_s' else 'burst'}")
        if self.kind == "burst" and self.burst_s >= self.burst_every_s:
            raise _err("burst_s", f"must be < burst_every_s ({self.burst_every_s})")
        return self


class Workload(_Model):
    topics: Annotated[list[Topic], Field(min_length=1)]
    message_bytes: Annotated[Bytes, Field(gt=0)]
    key_distribution: Literal["none", "uniform", "zipf"] = "none"
    produce_rate_msgs_per_s: Annotated[Float, Field(gt=0)]
    producers: Annotated[int, Field(strict=True, ge=1)] = 1
    duration_s: Annotated[Float, Field(gt=0)]
    shape: Shape = Field(default_factory=Shape)

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        seen: dict[str, int] = {}
        for i, t in enumerate(self.topics):
            if t.name in seen:
                raise _err(f"topics.{i}.name", f"duplicate topic {t.name!r} (also topics.{seen[t.name]})")
            seen[t.name] = i
        per_topic = [t.producers is not None for t in self.topics]
        if any(per_topic):
            if not all(per_topic):
                raise _err(f"topics.{per_topic.index(False)}.producers",
                           "producers are per topic once one topic sets them: set them for every topic")
            total = sum(t.producers for t in self.topics)
            if self.producers != total:
                # workload.producers stays the number of producers the load process starts.
                raise _err("producers", f"must be the sum of the topics' producers ({total})")
        if self.shape.kind == "ramp" and self.shape.ramp_s > self.duration_s:
            raise _err("shape.ramp_s", f"must be <= duration_s ({self.duration_s})")
        return self

    def topic(self, name: str) -> Topic | None:
        return next((t for t in self.topics if t.name == name), None)


class Prefill(_Model):
    """Data written to each partition before the workload starts (the bytes a copy must move)."""

    bytes_per_partition: Annotated[Bytes, Field(ge=0)] = 0
    topics: Optional[list[str]] = None  # default: every workload topic
    # The prefill producer's batch.size. A copy later sends whole batches at line rate, so big
    # ones are bursts on a slow link; small ones make a slower prefill.
    batch_bytes: Annotated[Bytes, Field(ge=1024, le=16 * 1024 * 1024)] = 1_000_000
    # With emulated links: write the prefill with every link at the client link's rate (it lies
    # outside the measurement), then wait until the links are quiet before the load. False: at
    # the links' own rates, the load right after, as on a cluster whose links the harness does
    # not shape (what `bench crosscheck` compares with).
    fast_links: bool = True


ActionKind = Literal[
    "reassign", "move_set", "add_broker_and_rebalance", "drain_broker",
    "kill_broker", "restart_broker", "pause_broker", "resume_broker",
    "kill_controller", "restart_controller", "stop_object_store", "start_object_store",
    "isolate_broker", "heal_broker", "set_link_rate",
]
MOVE_ACTIONS = frozenset({"reassign", "move_set", "add_broker_and_rebalance", "drain_broker"})
# Each fault and the action that undoes it; a fault's outage window runs until recovery
# (bench/check/moves.py: check_unavailable_seconds).
FAULT_RECOVERY: dict[str, str] = {
    "kill_broker": "restart_broker",  # kill -9
    "pause_broker": "resume_broker",  # SIGSTOP / SIGCONT
    "kill_controller": "restart_controller",
    "stop_object_store": "start_object_store",
    "isolate_broker": "heal_broker",  # its link down: cut off from everyone, still running
}
# Actions on the emulated network (they need network.link_rate).
NETWORK_ACTIONS = frozenset({"isolate_broker", "heal_broker", "set_link_rate"})
LINK_NODES = (NODE_CONTROLLER, NODE_OBJSTORE, NODE_CLIENT)  # set_link_rate's `node`; brokers go by `broker`
FAULT_ACTIONS = frozenset(FAULT_RECOVERY)
RECOVERY_ACTIONS = frozenset(FAULT_RECOVERY.values())

# Per action kind: fields that must be set, and fields that may be set (besides at_s and kind).
_ACTION_REQUIRED: dict[str, frozenset[str]] = {
    "reassign": frozenset({"topic", "partition"}),  # and either `to` or `replace` + `by`
    "move_set": frozenset({"partitions"}),
    "add_broker_and_rebalance": frozenset(),
    "drain_broker": frozenset({"broker"}),
    "kill_broker": frozenset({"broker"}),
    "restart_broker": frozenset({"broker"}),
    "pause_broker": frozenset({"broker"}),
    "resume_broker": frozenset({"broker"}),
    "kill_controller": frozenset(),
    "restart_controller": frozenset(),
    "stop_object_store": frozenset(),
    "start_object_store": frozenset(),
    "isolate_broker": frozenset({"broker"}),
    "heal_broker": frozenset({"broker"}),
    "set_link_rate": frozenset({"rate"}),
}
_ACTION_OPTIONAL: dict[str, frozenset[str]] = {
    "reassign": frozenset({"to", "replace", "by"}),
    # concurrency: moves in flight per broker (Cruise Control's
    # num.concurrent.partition.movements.per.broker); default: the whole plan in one request.
    "move_set": frozenset({"concurrency"}),
    "add_broker_and_rebalance": frozenset({"broker", "concurrency"}),  # broker default: next free id
    "drain_broker": frozenset({"to", "concurrency"}),  # to default: every other broker
    "set_link_rate": frozenset({"broker", "node"}),  # exactly one of them
}
_ACTION_FIELDS = ("topic", "partition", "to", "replace", "by", "broker", "partitions", "node", "rate",
                  "concurrency")


def _tc_rate(value: Any) -> Any:
    # Checked here so a bad rate is reported with the file and field before anything starts.
    if value is not None:
        rate_bits(value)  # ValueError naming the bad rate
    return value


TcRate = Annotated[str, BeforeValidator(_tc_rate)]


class PartitionMove(_Model):
    """One entry of a ``move_set``. ``replicas`` is accepted for ``to`` so entries can be pasted
    from a kafka-reassign-partitions plan."""

    topic: str
    partition: Annotated[int, Field(strict=True, ge=0)]
    to: Annotated[list[BrokerId], Field(min_length=1, validation_alias=AliasChoices("to", "replicas"))]


class Action(_Model):
    at_s: Annotated[Float, Field(ge=0)]
    kind: ActionKind
    topic: Optional[str] = None
    partition: Optional[Annotated[int, Field(strict=True, ge=0)]] = None
    to: Optional[Annotated[list[BrokerId], Field(min_length=1)]] = None
    # reassign: swap one broker of the partition's current replicas for another, the usual
    # production move ([1,2,3] -> [4,2,3] at replication factor 3, [1] -> [4] at 1).
    replace: Optional[BrokerId] = None
    by: Optional[BrokerId] = None
    broker: Optional[BrokerId] = None
    partitions: Optional[Annotated[list[PartitionMove], Field(min_length=1)]] = None
    node: Optional[Literal[LINK_NODES]] = None
    rate: Optional[TcRate] = None
    # Max partition moves in flight per broker (as source or target); the rest wait for a slot.
    concurrency: Optional[Annotated[int, Field(strict=True, ge=1)]] = None

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Action:
        required = _ACTION_REQUIRED[self.kind]
        allowed = required | _ACTION_OPTIONAL.get(self.kind, frozenset())
        for f in _ACTION_FIELDS:
            given = getattr(self, f) is not None
            if f in required and not given:
                raise _err(f, f"required for action kind {self.kind}")
            if f not in allowed and given:
                raise _err(f, f"not used by action kind {self.kind}")
        if self.kind == "reassign":
            if self.to is None and self.replace is None:
                raise _err("to", "required for action kind reassign (the new replica list), unless "
                                 "`replace` + `by` swap one broker for another")
            if self.to is not None and self.replace is not None:
                raise _err("to", "reassign: give either `to` or `replace` + `by`, not both")
            if (self.replace is None) != (self.by is None):
                raise _err("by" if self.by is None else "replace", "reassign: `replace` and `by` go together")
            if self.replace is not None and self.replace == self.by:
                raise _err("by", f"replaces broker {self.replace} by itself")
        if self.kind == "set_link_rate" and (self.broker is None) == (self.node is None):
            raise _err("broker", "set_link_rate: give either broker (a broker's link) or node "
                                 f"({', '.join(LINK_NODES)}), not both or neither")
        return self

    @property
    def link_node(self) -> str | None:
        """The launcher's name of the node whose link a network action changes."""
        if self.kind not in NETWORK_ACTIONS:
            return None
        return self.node if self.node is not None else broker_node(self.broker)

    def moves(self, placement: dict[str, dict[int, list[int]]] | None = None) -> list[PartitionMove]:
        """Explicit partition moves of this action (reassign / move_set); empty otherwise. A
        ``replace`` move is resolved against ``placement`` (topic -> partition -> replicas)."""
        if self.kind == "reassign":
            to = self.to
            if to is None:
                current = (placement or {}).get(self.topic, {}).get(self.partition)
                if current is None:
                    raise ValueError(f"reassign {self.topic}-{self.partition}: replicas unknown")
                to = [self.by if b == self.replace else b for b in current]
            return [PartitionMove(topic=self.topic, partition=self.partition, to=to)]
        return list(self.partitions or ())


class ConsumerSet(_Model):
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
        if v is not None and not _NAME_RE.match(v):
            raise ValueError("must start with a letter or digit and use only [A-Za-z0-9._-]")
        return v

    @model_validator(mode="after")
    def _lag_for_catch_up(self) -> ConsumerSet:
        if self.start_lag_bytes is not None and self.mode != "catch_up":
            raise _err("start_lag_bytes", "only applies to mode catch_up")
        return self

    @property
    def label(self) -> str:
        return self.name or self.mode


def _consumer_sets(v: Any) -> Any:
    # `consumers: {groups: 2, ...}` is one set; a list gives several.
    return [v] if isinstance(v, dict) else v


class Checks(_Model):
    safety: bool = True  # lost writes, duplicates, reordering: always checked
    max_move_seconds: Optional[Annotated[Float, Field(gt=0)]] = None
    max_unavailable_seconds: Optional[Annotated[Float, Field(gt=0)]] = None

    @field_validator("safety")
    @classmethod
    def _always(cls, v: bool) -> bool:
        if v is not True:
            raise ValueError("safety checks cannot be disabled")
        return v




class NetworkSection(_Model):
    """Emulated links (bench/run/network.py): with a link rate every node runs in its own
    network namespace on a link shaped to that rate; the other two default to it. The object
    store's link exists only for a system that has one (one scenario serves every system)."""
    link_rate: Optional[TcRate] = None
    object_store_link_rate: Optional[TcRate] = None
    client_link_rate: Optional[TcRate] = None


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DEFAULT_TOPIC_PREFIX = "bench."


_NOT_MATRIX = ("name", "matrix", "repetitions")


class Scenario(_Model):
    name: str
    description: str = ""
    system: System
    workload: Workload
    prefill: Prefill = Field(default_factory=Prefill)
    actions: list[Action] = Field(default_factory=list)
    checks: Checks = Field(default_factory=Checks)
    network: NetworkSection = Field(default_factory=NetworkSection)
    consumers: Annotated[list[ConsumerSet], BeforeValidator(_consumer_sets)] = Field(default_factory=list)
    # Each configuration (matrix point) runs this many times; runs differ only in run id
    # (``..__rep=K``), so their spread is the measurement's noise.
    repetitions: Annotated[int, Field(strict=True, ge=1, le=100)] = 1
    # dotted path -> values; expand() runs the cartesian product.
    matrix: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _file_safe(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must start with a letter or digit and use only [A-Za-z0-9._-]")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix_keys(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key in v:
            head = key.split(".", 1)[0]
            if head in _NOT_MATRIX or head not in cls.model_fields:
                raise _err(key, f"matrix key must be a dotted path into "
                                f"{', '.join(f for f in cls.model_fields if f not in _NOT_MATRIX)}")
        return v

    @model_validator(mode="after")
    def _cross_references(self) -> Scenario:
        wl, system = self.workload, self.system
        for i, t in enumerate(wl.topics):
            rf = self.replication_factor(t)
            if rf is not None and rf > system.brokers:
                given = "" if t.replication_factor is not None else f" ({system.kind}'s default)"
                raise _err(f"workload.topics.{i}.replication_factor",
                           f"{rf}{given} exceeds system.brokers ({system.brokers})")
            if rf is not None and t.min_insync_replicas is not None and t.min_insync_replicas > rf:
                raise _err(f"workload.topics.{i}.min_insync_replicas", f"exceeds the replication factor ({rf})")
        for i, name in enumerate(self.prefill.topics or ()):
            if wl.topic(name) is None:
                raise _err(f"prefill.topics.{i}", f"unknown topic {name!r} (not in workload.topics)")
        labels: dict[str, int] = {}
        for i, cs in enumerate(self.consumers):
            if cs.label in labels:
                raise _err(f"consumers.{i}.name", f"{cs.label!r} also names consumers.{labels[cs.label]}: "
                                                  f"give each set its own name")
            labels[cs.label] = i
            for j, name in enumerate(cs.topics or ()):
                if wl.topic(name) is None:
                    raise _err(f"consumers.{i}.topics.{j}", f"unknown topic {name!r} (not in workload.topics)")
            if cs.mode == "catch_up":
                empty = [t for t in self.consumer_topics(cs)
                         if not self.prefill.bytes_per_partition or t not in self.prefill_topics()]
                if empty:
                    raise _err(f"consumers.{i}.mode", f"catch_up reads a backlog: topic {empty[0]!r} has no "
                                                      f"prefill (prefill.bytes_per_partition / prefill.topics)")

        net = self.network
        if not system.profile.launched:
            for f in ("link_rate", "object_store_link_rate", "client_link_rate"):
                if getattr(net, f) is not None:
                    raise _err(f"network.{f}", f"the links of a cluster the harness does not start are not the "
                                               f"harness's to shape (system kind {system.kind!r})")
        if net.link_rate is None:
            for f in ("object_store_link_rate", "client_link_rate"):
                if getattr(net, f) is not None:
                    raise _err(f"network.{f}", "needs network.link_rate (the links exist only with it)")
        if system.replication_throttle_of_link is not None:
            if net.link_rate is None:
                raise _err("system.replication_throttle_of_link", "needs network.link_rate (a share of the link)")
            if system.replication_throttle_bytes_per_s is not None:
                raise _err("system.replication_throttle_of_link",
                           "give the throttle either in bytes/s or as a share of the link, not both")

        exists = set(range(1, system.brokers + 1))
        dead: set[int] = set()
        paused: set[int] = set()
        isolated: set[int] = set()
        controller_dead = store_stopped = False
        prev_at = 0.0
        added = self.added_broker_ids()
        rfs = [self.replication_factor(t) for t in wl.topics]
        known_rf = None not in rfs  # unknown until a cluster that sets it has been asked
        max_rf = max(rfs) if known_rf else 1
        placement = self.placement() if known_rf else {}
        launched = system.profile.launched
        commands = system.commands or Commands()

        def check_move(path: str, topic: str, partition: int, to: list[int]) -> None:
            t = wl.topic(topic)
            if t is None:
                raise _err(f"{path}.topic", f"unknown topic {topic!r} (not in workload.topics)")
            if partition >= t.partitions:
                raise _err(f"{path}.partition",
                           f"topic {topic!r} has partitions 0..{t.partitions - 1}, not {partition}")
            missing = [b for b in to if b not in exists]
            if missing:
                raise _err(f"{path}.to", f"broker {missing[0]} does not exist (brokers: {sorted(exists)})")
            if len(set(to)) != len(to):
                raise _err(f"{path}.to", "lists a broker more than once")
            if system.profile.single_owner and len(to) != 1:
                raise _err(f"{path}.to", f"{system.kind} system: a partition is owned by exactly one broker; "
                                         f"give one target broker, not {len(to)}")

        for i, a in enumerate(self.actions):
            p = f"actions.{i}"
            if a.at_s >= wl.duration_s:
                raise _err(f"{p}.at_s", f"must be < workload.duration_s ({wl.duration_s})")
            if a.at_s < prev_at:
                raise _err(f"{p}.at_s", f"actions must be listed in time order ({a.at_s} < {prev_at})")
            prev_at = a.at_s
            if not launched and a.kind not in MOVE_ACTIONS and getattr(commands, a.kind, None) is None:
                how = (f"needs system.commands.{a.kind} (a shell command; {{broker}} is the broker id)"
                       if a.kind in COMMAND_FIELDS else
                       "acts on processes or links of a cluster the harness starts itself")
                raise _err(f"{p}.kind", f"{a.kind}: {how}; system {system.kind!r} is a cluster it does not start")
            if not launched and a.kind == "add_broker_and_rebalance":
                raise _err(f"{p}.kind", f"{a.kind}: starts a broker, which the harness cannot do on a cluster it "
                                        f"does not start (system {system.kind!r}); use move_set or drain_broker")
            if a.kind in NETWORK_ACTIONS and net.link_rate is None:
                raise _err(f"{p}.kind", f"{a.kind}: needs network.link_rate (it acts on the emulated links)")
            if a.kind == "set_link_rate":
                if a.node == NODE_OBJSTORE and system.profile.object_store is None:
                    raise _err(f"{p}.node", f"system {system.kind!r} has no object store")
                if a.broker is not None and a.broker not in exists:
                    raise _err(f"{p}.broker", f"broker {a.broker} does not exist (brokers: {sorted(exists)})")
            elif a.kind == "reassign":
                if a.replace is not None and not known_rf:
                    # The replicas are known once the cluster's replication factor is (for_cluster).
                    check_move(p, a.topic, a.partition, [a.by])
                    continue
                if a.replace is not None:
                    t = wl.topic(a.topic)
                    if t is None:
                        raise _err(f"{p}.topic", f"unknown topic {a.topic!r} (not in workload.topics)")
                    current = placement[a.topic].get(a.partition, [])
                    if a.replace not in current:
                        raise _err(f"{p}.replace", f"broker {a.replace} holds no replica of {a.topic}-{a.partition} "
                                                   f"(its replicas at the start: {current})")
                    if a.by in current:
                        raise _err(f"{p}.by", f"broker {a.by} already holds a replica of {a.topic}-{a.partition}")
                check_move(p, a.topic, a.partition, a.moves(placement)[0].to)
            elif a.kind == "move_set":
                seen: set[tuple[str, int]] = set()
                for j, m in enumerate(a.partitions):
                    check_move(f"{p}.partitions.{j}", m.topic, m.partition, m.to)
                    if (m.topic, m.partition) in seen:
                        raise _err(f"{p}.partitions.{j}", f"{m.topic}-{m.partition} is moved twice")
                    seen.add((m.topic, m.partition))
            elif a.kind == "add_broker_and_rebalance":
                new = added[i]
                if new in exists:
                    raise _err(f"{p}.broker", f"broker {new} already exists")
                exists.add(new)
            elif a.kind in ("kill_controller", "restart_controller"):
                if a.kind == "kill_controller" and controller_dead:
                    raise _err(f"{p}.kind", "kill_controller: the controller is already dead")
                if a.kind == "restart_controller" and not controller_dead:
                    raise _err(f"{p}.kind", "restart_controller: the controller is not dead (kill it first)")
                controller_dead = a.kind == "kill_controller"
            elif a.kind in ("stop_object_store", "start_object_store"):
                if system.profile.object_store is None:
                    raise _err(f"{p}.kind", f"{a.kind}: system {system.kind!r} has no object store")
                if a.kind == "stop_object_store" and store_stopped:
                    raise _err(f"{p}.kind", "stop_object_store: the object store is already stopped")
                if a.kind == "start_object_store" and not store_stopped:
                    raise _err(f"{p}.kind", "start_object_store: the object store is not stopped (stop it first)")
                store_stopped = a.kind == "stop_object_store"
            else:  # actions naming one existing broker
                if a.broker not in exists:
                    raise _err(f"{p}.broker", f"broker {a.broker} does not exist (brokers: {sorted(exists)})")
                if a.kind == "kill_broker":
                    if a.broker in dead:
                        raise _err(f"{p}.broker", f"broker {a.broker} is already dead")
                    dead.add(a.broker)
                    paused.discard(a.broker)  # kill -9 of a frozen process is a kill
                elif a.kind == "restart_broker":
                    if a.broker not in dead:
                        raise _err(f"{p}.broker", f"broker {a.broker} is not dead (kill it first)")
                    dead.discard(a.broker)
                elif a.kind == "pause_broker":
                    if a.broker in dead or a.broker in paused:
                        raise _err(f"{p}.broker", f"broker {a.broker} is already "
                                                  f"{'dead' if a.broker in dead else 'paused'}")
                    paused.add(a.broker)
                elif a.kind == "resume_broker":
                    if a.broker not in paused:
                        raise _err(f"{p}.broker", f"broker {a.broker} is not paused (pause it first)")
                    paused.discard(a.broker)
                elif a.kind == "isolate_broker":
                    if a.broker in isolated:
                        raise _err(f"{p}.broker", f"broker {a.broker} is already isolated")
                    isolated.add(a.broker)
                elif a.kind == "heal_broker":
                    if a.broker not in isolated:
                        raise _err(f"{p}.broker", f"broker {a.broker} is not isolated (isolate it first)")
                    isolated.discard(a.broker)
                elif a.kind == "drain_broker":
                    targets = a.to if a.to is not None else sorted(exists - {a.broker})
                    for b in targets:
                        if b not in exists:
                            raise _err(f"{p}.to", f"broker {b} does not exist (brokers: {sorted(exists)})")
                    if a.broker in targets:
                        raise _err(f"{p}.to", f"cannot drain broker {a.broker} onto itself")
                    if len(set(targets)) < max_rf:
                        raise _err(f"{p}.to", f"{len(set(targets))} target broker(s) cannot hold "
                                              f"replication factor {max_rf}")
        resolved = self.resolved()
        for key in self.matrix:
            missing = _missing_segment(resolved, _split_path(key))
            if missing is not None:
                raise _err(f"matrix.{key}", f"no field {missing!r} in the scenario")
        return self

    # -- helpers for the runner --------------------------------------------------------------

    @property
    def profile(self) -> SystemProfile:
        return self.system.profile

    def settings(self) -> dict[str, Any]:
        """The system section as the profile reads it, a throttle given as a share of the link
        turned into bytes/s."""
        s = self.system.model_dump()
        share = s.pop("replication_throttle_of_link")
        if share is not None:
            s["replication_throttle_bytes_per_s"] = int(share * rate_bits(self.network.link_rate) / 8)
        return s

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

    def placement(self) -> dict[str, dict[int, list[int]]]:
        """The fixed initial placement the runner creates topics with: replicas round-robin from
        broker 1, partition after partition over all topics (hot-0 at replication factor 3 on
        four brokers: [1, 2, 3])."""
        n = self.system.brokers
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
        1..system.brokers must all be brokers of the cluster."""
        have = set(brokers)
        missing = sorted(set(range(1, self.system.brokers + 1)) - have)
        if missing:
            raise ScenarioError(f"{self.name}: system.brokers: the scenario uses brokers 1..{self.system.brokers}, "
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
        data["system"]["existing_topics"] = self.system.existing_topics or "refuse"
        return parse_scenario(data, f"{self.name} on the cluster at {self.system.bootstrap}", check_matrix=False)

    @property
    def topic_prefix(self) -> str:
        return self.system.topic_prefix if self.system.topic_prefix is not None else DEFAULT_TOPIC_PREFIX

    def added_broker_ids(self) -> dict[int, int]:
        """action index -> id of the broker that add_broker_and_rebalance action starts."""
        out: dict[int, int] = {}
        next_id = self.system.brokers + 1
        for i, a in enumerate(self.actions):
            if a.kind == "add_broker_and_rebalance":
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

    def resolved(self) -> dict[str, Any]:
        """Plain dict with every default filled in (what a run stores next to its history)."""
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.resolved(), sort_keys=False, default_flow_style=None, width=100)


# --------------------------------------------------------------------------------------------
# Loading, overrides, errors


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML silently keeps the last one) and
    aliases: a scenario is plain data, and nested aliases expand exponentially."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed in scenario files",
                                              event.start_mark)
        return super().compose_node(parent, index)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

# Free-form maps: the rest of a dotted path is one key (Kafka config names contain dots).
_MAP_FIELDS = (("system", "extra"), ("matrix",))


def _split_path(path: str) -> list[str]:
    parts = path.split(".")
    for prefix in _MAP_FIELDS:
        n = len(prefix)
        if tuple(parts[:n]) == prefix and len(parts) > n:
            return [*parts[:n], ".".join(parts[n:])]
    return parts


def _missing_segment(data: Any, parts: Sequence[str]) -> str | None:
    """First segment of ``parts`` that does not exist in a resolved scenario dict, else None.
    New keys are allowed at the end of a free-form map (``system.extra.<config>``)."""
    node = data
    for depth, part in enumerate(parts):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, dict) and tuple(parts[:depth]) in _MAP_FIELDS and depth == len(parts) - 1:
            return None
        else:
            return ".".join(parts[: depth + 1])
    return None


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path`` in a raw scenario dict (creating missing mappings).
    Numeric segments index lists. Raises ``KeyError`` with a reason on a bad path."""
    parts = _split_path(path)
    if not path or any(p == "" for p in parts):
        raise KeyError("empty path segment")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = ".".join(parts[:depth]) or "<top>"
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise KeyError(f"{here} is a list of {len(node)}; {part!r} is not an index into it")
            idx: Any = int(part)
        elif isinstance(node, dict):
            idx = part
        else:
            raise KeyError(f"{here} is a {type(node).__name__}, not a section")
        if last:
            node[idx] = value
        else:
            if isinstance(node, dict) and node.get(idx) is None:
                node[idx] = {}
            node = node[idx]


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model class a validation error location points into (for 'allowed fields' hints)."""

    def inner_model(tp: Any) -> type[BaseModel] | None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        for arg in typing.get_args(tp):
            found = inner_model(arg)
            if found is not None:
                return found
        return None

    cls: type[BaseModel] | None = Scenario
    for part in loc:
        if cls is None:
            return None
        if isinstance(part, int):
            continue  # list index: same item model
        field = cls.model_fields.get(part)
        if field is None:
            return None
        cls = inner_model(field.annotation)
    return cls


def _reason(e: dict[str, Any]) -> str:
    typ, ctx, msg = e["type"], e.get("ctx") or {}, e["msg"]
    if typ == "missing":
        return "required"
    if typ == "extra_forbidden":
        model = _model_at(e["loc"][:-1])
        if model is not None:
            return f"unknown field (allowed: {', '.join(model.model_fields)})"
        return "unknown field"
    ops = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if typ in ops:
        bound = next(iter(ctx.values()))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"must be {ops[typ]} {bound} (got {e['input']!r})"
    if typ == "value_error":
        return str(ctx.get("error", msg.removeprefix("Value error, ")))
    if typ == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    reason = msg.replace("Input should be", "must be")
    inp = e.get("input")
    if isinstance(inp, (str, int, float, bool)) or inp is None:
        reason += f" (got {inp!r})"
    return reason


def _errors_of(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for e in exc.errors(include_url=False):
        loc = [str(p) for p in e["loc"]]
        if e["type"] == "scenario":
            ctx = e["ctx"]
            loc += [ctx["where"]]
            reason = ctx["reason"]
        else:
            reason = _reason(e)
        out.append((".".join(loc) or "<top>", reason))
    return out


def _raise(source: str, errors: list[tuple[str, str]], prefix: str = "") -> typing.NoReturn:
    lines = [f"{source}: {prefix}{path}: {reason}" for path, reason in errors]
    raise ScenarioError("\n".join(lines), errors)


def yaml_problem(exc: yaml.YAMLError, path: str | Path) -> str:
    """One line for a YAML error, naming the file (PyYAML names a string it parsed
    ``<unicode string>``) and the line and column of the problem and of its context."""
    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"{path}: {exc}"
    mark = exc.problem_mark or exc.context_mark
    head = f"{path}, {at(mark)}" if mark is not None else str(path)
    what = exc.problem or exc.context or "unreadable"
    ctx = ""
    if exc.context and exc.problem:
        ctx = f" ({exc.context}" + (f" at {at(exc.context_mark)}" if exc.context_mark is not None else "") + ")"
    return f"{head}: {what}{ctx}"


def _parse_value(text: str) -> Any:
    # YAML scalar semantics, so `--set system.kind=shared`, `...=64MiB`, `...=true`, `...=[2]` work.
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader) if text.strip() else None
    except yaml.YAMLError:
        return text  # e.g. an unbalanced quote: keep the literal text and let validation judge


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], source: str = "<scenario>") -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides to a raw scenario dict (copy returned).

    Overriding a path that is also a matrix axis pins it: that axis is removed from the matrix.
    """
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            _raise(source, [(f"--set {item}", "expected key.path=value")])
        try:
            set_path(data, key, _parse_value(text))
        except KeyError as exc:
            _raise(source, [(key, f"cannot --set: {exc.args[0]}")])
        matrix = data.get("matrix")
        if isinstance(matrix, dict) and key in matrix and not key.startswith("matrix."):
            del matrix[key]
    return data


def parse_scenario(
    data: Any, source: str = "<scenario>", overrides: Iterable[str] = (), *, check_matrix: bool = True
) -> Scenario:
    """Validate a raw scenario mapping (e.g. a stored ``scenario.yaml`` already loaded).

    With ``check_matrix`` every matrix combination is validated too, so a bad combination is
    reported before anything runs.
    """
    if not isinstance(data, dict):
        _raise(source, [("<top>", f"must be a mapping of sections, got {type(data).__name__}")])
    data = apply_overrides(data, overrides, source)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        _raise(source, _errors_of(exc))
    if check_matrix:
        _expand(scenario, source)
    return scenario


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override, validate. ``name`` defaults to the file's stem."""
    path = Path(path)
    source = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        _raise(source, [("<file>", f"cannot read {path}: {exc.strerror or exc}")])
    except UnicodeDecodeError as exc:
        _raise(source, [("<file>", f"{path} is not UTF-8 text (byte {exc.start})")])
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        _raise(source, [("<file>", f"invalid YAML: {yaml_problem(exc, path)}")])
    if data is None:
        data = {}
    if isinstance(data, dict) and "name" not in data:
        data = {"name": path.stem, **data}
    return parse_scenario(data, source, overrides)


def to_external(sc: Scenario, bootstrap: str, *, client: dict[str, Any] | None = None,
                commands: dict[str, Any] | None = None, label: str | None = None) -> tuple[Scenario, list[str]]:
    """A scenario (a built-in one, typically) pointed at a cluster the harness does not start,
    with the same load, prefill, actions and checks. Returns the scenario and notes naming what
    did not carry over: the emulated links and the systems' own settings (the cluster's operator
    sets those; each note says how, for a cluster started with ``bench cluster start``). A
    replication throttle carries over in bytes/s (given as a share of the link it is converted
    with the scenario's link rate); the harness sets it with IncrementalAlterConfigs. A matrix over
    ``system.kind`` collapses: every point runs once against the one cluster."""
    kind = next(n for n, p in PROFILES.items() if not p.launched)
    prof = PROFILES[kind]
    data = sc.resolved()
    notes: list[str] = []
    old = data["system"]
    new: dict[str, Any] = {"kind": kind, "brokers": old["brokers"], "bootstrap": bootstrap,
                           "client": {**old.get("client", {}), **(client or {})}}
    throttle = sc.settings()["replication_throttle_bytes_per_s"]
    if throttle is not None:
        new["replication_throttle_bytes_per_s"] = throttle
        if old["replication_throttle_of_link"] is not None:
            notes.append(f"replication throttle {old['replication_throttle_of_link']:g} of the "
                         f"{sc.network.link_rate} link -> {throttle} bytes/s, set on the cluster's brokers "
                         f"with IncrementalAlterConfigs for the run")
    if commands:
        new["commands"] = dict(commands)
    if label:
        new["label"] = label
    flags = []
    for f, default in _SYSTEM_SETTINGS.items():
        if f in prof.settings or old.get(f) == default or f == "replication_throttle_of_link":
            continue
        if f == "extra":
            flags += [f"--config {k}={v}" for k, v in old[f].items()]
        else:
            notes.append(f"system.{f}={old[f]} not applied: a setting of the system the cluster runs")
    if flags:
        notes.append(f"system.extra not applied (the cluster's own settings); a cluster started with "
                     f"`bench cluster start` gets them with: {' '.join(flags)}")
    net = {k: v for k, v in data.get("network", {}).items() if v is not None}
    if net:
        opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in net.items())
        notes.append(f"network not applied (the cluster's links are its own); a cluster started with "
                     f"`bench cluster start` gets the same links with: {opts}")
    data["system"] = new
    data["network"] = {}
    matrix = {}
    for key, values in data.get("matrix", {}).items():
        head = key.split(".")
        if key == "system.kind":
            notes.append(f"matrix system.kind {values} dropped: every point runs against the cluster at {bootstrap}")
        elif head[0] == "network" or (head[0] == "system" and head[1] not in prof.settings):
            notes.append(f"matrix {key} dropped: not the harness's to set on that cluster")
        else:
            matrix[key] = values
    data["matrix"] = matrix
    return parse_scenario(data, f"{sc.name} (as {kind})"), notes


# --------------------------------------------------------------------------------------------
# Built-in scenarios

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "workloads" / "scenarios"


def builtin_scenarios() -> dict[str, Path]:
    """Built-in name -> file: ``workloads/scenarios/X.yaml`` is ``X``, the fault suite's
    ``workloads/scenarios/faults/X.yaml`` is ``faults/X``."""
    out = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.yaml"))}
    out.update({f"faults/{p.stem}": p for p in sorted((BUILTIN_DIR / "faults").glob("*.yaml"))})
    return out


def resolve_scenario(ref: str) -> Path:
    """A path to a YAML file, or the name of a built-in scenario (``reassign-one``,
    ``faults/kill-source``)."""
    p = Path(ref)
    if p.is_file():
        return p
    builtin = builtin_scenarios()
    if ref in builtin:
        return builtin[ref]
    if ref.endswith((".yaml", ".yml")) or os.sep in ref:
        raise ScenarioError(f"{ref}: <file>: no such file")
    raise ScenarioError(f"{ref}: not a file and not a built-in scenario "
                        f"(built-in: {', '.join(builtin) or 'none'})")


# --------------------------------------------------------------------------------------------
# Matrix expansion

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "+".join(_fmt_value(x) for x in v)
    if isinstance(v, dict):
        return "+".join(f"{k}={_fmt_value(x)}" for k, x in v.items())
    return str(v)


def run_id_for(name: str, assignments: Sequence[tuple[str, Any]]) -> str:
    """``name__key=value__...`` made safe for a file name."""
    raw = "__".join([name, *(f"{k}={_fmt_value(v)}" for k, v in assignments)])
    return _UNSAFE.sub("-", raw).strip("-")


REPETITION_KEY = "rep"


def split_repetition(run_id: str) -> tuple[str, int]:
    """``(config id, repetition)`` of a run id: ``x__rep=2`` -> ``("x", 2)``; ``x`` -> ``("x", 1)``."""
    head, sep, tail = run_id.rpartition(f"__{REPETITION_KEY}=")
    if sep and tail.isdigit():
        return head, int(tail)
    return run_id, 1


def _expand(scenario: Scenario, source: str) -> list[tuple[str, Scenario]]:
    configs = _expand_matrix(scenario, source)
    if scenario.repetitions == 1:
        return configs
    # Rounds: every configuration once, then again; a slow drift of the machine then shows as
    # spread within each configuration instead of as a difference between configurations.
    return [(run_id_for(run_id, [(REPETITION_KEY, k)]), sc) for k in range(1, scenario.repetitions + 1)
            for run_id, sc in configs]


def _expand_matrix(scenario: Scenario, source: str) -> list[tuple[str, Scenario]]:
    base = scenario.resolved()
    base["matrix"] = {}
    if not scenario.matrix:
        return [(run_id_for(scenario.name, ()), Scenario.model_validate(base))]
    keys = list(scenario.matrix)
    out: list[tuple[str, Scenario]] = []
    used: set[str] = set()
    for combo in itertools.product(*(scenario.matrix[k] for k in keys)):
        assignments = list(zip(keys, combo))
        run_id = run_id_for(scenario.name, assignments)
        if run_id in used:  # two values that sanitise alike: keep ids unique
            run_id = f"{run_id}__{len(out)}"
        used.add(run_id)
        data = copy.deepcopy(base)
        try:
            for k, v in assignments:
                set_path(data, k, copy.deepcopy(v))
        except KeyError as exc:
            _raise(source, [(f"matrix.{k}", f"cannot apply: {exc.args[0]}")])
        try:
            out.append((run_id, Scenario.model_validate(data)))
        except ValidationError as exc:
            where = ", ".join(f"{k}={_fmt_value(v)}" for k, v in assignments)
            _raise(source, _errors_of(exc), prefix=f"matrix run [{where}]: ")
    return out


def expand(scenario: Scenario) -> list[tuple[str, Scenario]]:
    """Cartesian product of ``scenario.matrix`` -> ``[(run_id, Scenario)]`` in matrix order (first
    key varies slowest). Each scenario is re-validated and has an empty matrix; its ``name`` stays
    the base name. Without a matrix: one run whose id is the name."""
    return _expand(scenario, f"{scenario.name}")


__all__ = [
    "Action", "Checks", "FAULT_ACTIONS", "FAULT_RECOVERY", "LINK_NODES", "MOVE_ACTIONS", "NETWORK_ACTIONS",
    "PartitionMove", "Prefill", "RECOVERY_ACTIONS", "Scenario", "ScenarioError", "Shape", "System", "Topic", "Workload", "apply_overrides",
    "builtin_scenarios", "expand", "to_external", "split_repetition", "load_scenario", "parse_scenario", "resolve_scenario", "run_id_for", "set_path",
]
