"""What a system under test tells the harness about itself (OpenMessaging Benchmark's driver idea):
one small object per system package, registered in `systems/registry.py`. The harness asks the
profile; it never branches on a system's name.

A profile declares the scenario settings its system reads (:class:`ScenarioSetting`); the harness
builds the scenario's `system` section from every profile's declarations. The values reach the
profile back as a plain mapping (the `system` section with defaults filled in), so `systems/`
never depends on the harness's scenario model.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Settings = Mapping[str, Any]
# What a scenario setting holds. bytes / bytes_per_s: a byte count (4096 or "64MiB", parsed by the
# harness); milliseconds: a number; bool: true or false; share_of_link: a number in (0, 1], a share
# of the brokers' emulated link (network.link_rate) that the harness turns into the bytes/s of the
# setting named by `gives` (None: the profile's `move_budget`, see MOVE_BUDGET_OF_LINK); choice: one
# of the setting's `choices`.
SettingType = Literal["bytes", "bytes_per_s", "milliseconds", "bool", "share_of_link", "choice"]


@dataclass(frozen=True)
class Production:
    """What a setting is in the production cluster a scaled-down run stands for (the scale model,
    bench/scenario/scale.py): its value in the setting's own unit (bytes, bytes/s, milliseconds)
    and where that value comes from."""

    value: float
    source: str


Dimension = Literal["bytes", "rate", "time"]  # scaled by the scale model's bytes factor, rate factor, or not


@dataclass(frozen=True)
class ScaledConfig:
    """A broker/controller config (not a scenario setting) the scale model checks: the run's value is
    the scenario's ``system.extra[key]``, else the system's default (``config_defaults``, or
    systems.core.config.DEFAULTS)."""

    key: str
    dimension: Dimension
    production: Production


# The cluster-wide configs every launched system shares, at Kafka's defaults in production.
COMMON_SCALED_CONFIGS = (
    ScaledConfig("broker.session.timeout.ms", "time",
                 Production(9000, "Kafka's default broker.session.timeout.ms (9 s): how long a dead broker "
                                  "keeps its partitions")),
    ScaledConfig("broker.heartbeat.interval.ms", "time",
                 Production(2000, "Kafka's default broker.heartbeat.interval.ms (2 s)")),
)


@dataclass(frozen=True)
class ScenarioSetting:
    """One setting of a scenario's `system` section that a system reads, flat in YAML
    (`system.<name>`, `--set system.<name>=...`, a matrix key `system.<name>`). Unset (None) means
    the system's own value, `default`, which the profile fills in with :meth:`value`. Two systems
    that read the same setting share one declaration (the profile of one imports the other's)."""

    name: str
    type: SettingType
    doc: str  # one line for the docs and the scenario model's field description
    gt: float | None = None  # bounds, checked when the scenario is read
    ge: float | None = None
    le: float | None = None
    default: Any = None  # the system's value when the scenario leaves the setting unset
    # share_of_link: the bytes/s setting the share is turned into (None: each system's own, its
    # profile's `move_budget`)
    gives: str | None = None
    noun: str = ""  # what messages call it ("throttle")
    # Its value in production and the source (bytes, bytes_per_s and milliseconds settings): what
    # the scale model compares a scaled run's value with. None: not a scaled setting.
    production: Production | None = None
    choices: tuple[str, ...] = ()  # a choice setting's values

    def value(self, s: Settings) -> Any:
        """The setting in the scenario's settings, else the system's default."""
        v = s.get(self.name)
        return self.default if v is None else v


# The operator's rule, one for every system: a move's traffic gets at most this share of a broker's
# link; the rest stays for produce, fetch, replication and uploads. Each system turns it into the
# bytes/s of its own mechanism, the scenario setting its profile names in `move_budget` (the copy
# and tiered systems' replication throttle, the shared system's cap on a move's forced upload).
MOVE_BUDGET_OF_LINK = ScenarioSetting(
    "move_budget_of_link", "share_of_link", gt=0, le=1, noun="move budget",
    doc="The most of a broker's link (network.link_rate) a move's traffic may take, the same rule for every "
        "system, each capping its own move traffic with it (the copy and tiered systems' replication throttle, "
        "the shared system's forced upload of the move's tail); unset: no move limit.")


@dataclass(frozen=True)
class Service:
    """An auxiliary process a system needs besides its controller and brokers (the object store).

    `start(ctx)` returns a `ServiceHandle`; `ctx` is a `ServiceContext`. A restart after `stop`
    reuses the port, data and credentials recorded in `ServiceHandle.info`."""

    name: str
    start: Callable[["ServiceContext"], "ServiceHandle"]


@dataclass
class ServiceContext:
    dir: str  # the cluster's directory
    logs_dir: str
    host: str
    config: dict[str, str]  # the cluster's broker/controller settings (a service may add to them)
    previous: dict[str, Any]  # the handle's `info` from an earlier start of this service, or {}
    timeout: float


@dataclass
class ServiceHandle:
    proc: Any  # systems.core.process.Proc, or None for an external endpoint nothing started
    info: dict[str, Any]  # recorded in cluster.json (never secrets)
    config: dict[str, str]  # settings every broker and the controller must get
    stop: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class JournalMeaning:
    """What a system's journal events (`systems/core/events.py`) mean for a move.

    - `move_complete`: journal event -> the field naming the new leader; the controller emits it
      when a move is complete (with `replicas` as fallback when the field is missing).
    - `request_phase`: journal event -> (field with seconds since the move request, phase name).
    - `phase_events`: journal event -> phase prefix; each `<name>_ms` field becomes a phase
      `<prefix>.<name>`.
    - `phase_bytes`: `<name>_ms` field -> the field with the bytes that phase moved to or from
      object storage (counted as the move's object-store bytes).
    - `phase_objects`: `<name>_ms` field -> the field with the number of stream objects that phase
      walked (the open's object list); the phase's history row gets it as `objects`, the `n` of
      the move model's open(n_objects) term.
    - `background_counters`: journal event -> counter name (bytes that are not a move's cost).
    - `copy_start`: journal event -> the field with the bytes a new replica has to copy, where the
      leader says a copy starts later than the log's start (tiered storage).
    - `refusal_start`: journal events at which the old owner starts refusing the partition's
      writes before its leader changes (a handover's close): the load's client queries for the new
      leader from its first refusal on, the origin of the handover model's client part.
    - `tail_phases`: the `<name>_ms` fields (of `phase_events`) whose phase carries the move's
      unuploaded tail: its bytes are the tail the old owner uploaded (the handover model's input).
    """

    move_complete: Mapping[str, str] = field(default_factory=dict)
    request_phase: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    phase_events: Mapping[str, str] = field(default_factory=dict)
    phase_bytes: Mapping[str, str] = field(default_factory=dict)
    phase_objects: Mapping[str, str] = field(default_factory=dict)
    background_counters: Mapping[str, str] = field(default_factory=dict)
    copy_start: Mapping[str, str] = field(default_factory=dict)
    tail_phases: frozenset[str] = frozenset()
    refusal_start: frozenset[str] = frozenset()

    def carries_tail(self, phase: str) -> bool:
        """Whether a ``move_phase`` named ``phase`` (``<prefix>.<name>``) is one of `tail_phases`."""
        return phase.rpartition(".")[2] + "_ms" in self.tail_phases


@dataclass(frozen=True)
class SystemProfile:
    name: str  # the scenario's `system.kind` and `--system`
    label: str  # for reports: "replication copy (Kafka)"
    short: str  # for axis ticks: "copy"
    color: str
    backend: str  # module exporting BACKEND, loaded by every broker
    controller_extension: str | None  # module passed to the controller as --extension
    move_model: str  # move-time model family (a module of bench/analysis/model/): "copy" | "tiered_copy" | "handover"
    # A move copies log bytes from broker to broker (False: ownership is handed over, the data
    # stays in object storage); what move progress counts as bytes to go (bench/run/move_progress.py).
    copies_on_move: bool
    bandwidth_param: str | None  # the scenario setting that caps a move's bytes/s (the move models' axis)
    bandwidth_label: str  # what that cap is called in reports
    single_owner: bool  # a move names exactly one target broker
    ack_meaning: str  # what an acknowledgement means (stated in the report)
    # Production defaults: a topic without its own replication factor gets this one, and
    # min.insync.replicas (never above the topic's replication factor). None: the cluster's own
    # (default.replication.factor / min.insync.replicas, read from it at run start).
    replication_factor: int | None
    min_insync_replicas: int | None
    broker_settings: Callable[[Settings], dict[str, str]]  # scenario settings -> Kafka-named settings
    topic_configs: Callable[[Settings], dict[str, str]]  # scenario settings -> topic configs
    journal: JournalMeaning = field(default_factory=JournalMeaning)
    # scenario settings -> the system's own settings the report's configurations table shows
    # (effective values, the system's defaults filled in)
    describe: Callable[[Settings], dict[str, Any]] = lambda s: {}
    object_store: Service | None = None  # None: the system has no object store
    # The system's own broker/controller settings (besides systems.core.config.DEFAULTS) with
    # their defaults: `systems.core.config.check(overrides, profile)` refuses any other key.
    config_defaults: Mapping[str, Any] = field(default_factory=dict)
    # Broker configs by which a Kafka cluster's brokers show they move as this system (bench reassign
    # --estimate reads them through DescribeConfigs); empty: only its own settings tell.
    detected_by: Mapping[str, str] = field(default_factory=dict)
    # False: a cluster someone else runs, reached at a bootstrap address (backend and
    # controller_extension unused); the harness never starts, stops or reconfigures its processes.
    launched: bool = True
    # The scenario's `system` settings this system reads (the scenario's `system` section has the
    # union over every profile).
    scenario_settings: tuple[ScenarioSetting, ...] = ()
    # True: the scenario refuses every setting this system does not read, naming them (a cluster
    # configured by whoever runs it). False: it accepts them (a two-system scenario sets what only
    # one of them reads; the other is not given them).
    only_own_settings: bool = False
    # scenario settings -> (setting, why) for each combination of this system's settings that
    # makes no sense; checked on every scenario that sets them.
    check_settings: Callable[[Settings], list[tuple[str, str]]] = lambda s: []
    # The bytes/s scenario setting a move budget (MOVE_BUDGET_OF_LINK, among `scenario_settings`)
    # becomes for this system, and what that mechanism is called in reports; None: no move budget.
    move_budget: str | None = None
    move_budget_label: str = ""
    # The broker config that caps a move's bytes/s on a running cluster (read by `bench reassign
    # --estimate` through DescribeConfigs): Kafka's leader replication throttle, unless the system
    # moves otherwise; unset on a broker: the move is capped by its link only.
    move_cap_config: str = "leader.replication.throttled.rate"
    # Broker configs (not scenario settings) with a production value the scale model checks
    # (besides COMMON_SCALED_CONFIGS and the scenario settings' own `production`).
    scaled_configs: tuple[ScaledConfig, ...] = ()
    # A system that uploads closed segments in the background (tiered storage): (scenario
    # settings, system.extra) -> its segment size (bytes) and upload task interval (s). The run
    # samples what a new replica would copy (the untiered tail, bench/run/observe.py) with them, the
    # relation a TB-scale projection of its copy rests on. None: nothing is tiered.
    tiering: Callable[[Settings, Mapping[str, Any]], dict[str, float]] | None = None
    # Scenario settings whose value the system's move model describes: a move run under another
    # value is another configuration (measured and reported beside it, not fitted or projected).
    model_settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def services(self) -> tuple[Service, ...]:
        return (self.object_store,) if self.object_store is not None else ()
