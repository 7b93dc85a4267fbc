"""The scenario's ``system`` section: which system, how many brokers, its settings, and, for a
cluster the harness does not start, where it is and how to act on it.

The settings are the systems' own: each profile (``systems/*/profile.py``) declares the scenario
settings it reads (``ScenarioSetting``: name, type, bounds, doc), and :class:`System` is built
from the common fields and the union of those declarations, flat as in YAML
(``system.segment_bytes``, ``--set system.segment_bytes=16MiB``, a matrix key). A scenario that
names two systems (a matrix over ``system.kind``) may set what only one of them reads: the other is
not given it. A profile with ``only_own_settings`` (a cluster configured by whoever runs it)
refuses the rest.
"""
from __future__ import annotations

import re
import string
import typing
from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, create_model, field_validator, model_validator

from bench.scenario.actions import COMMAND_FIELDS
from bench.scenario.errors import field_error
from bench.scenario.fields import Bytes, ConfigValue, Float, Model
from systems.core.config import ConfigError
from systems.core.config import check as check_config
from systems.core.profile import ScenarioSetting, SystemProfile
from systems.registry import PROFILES

_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvRef(Model):
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


def _check_template(v: str | None) -> str | None:
    if v is None:
        return v
    if not v.strip():
        raise ValueError("empty command")
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(v) if f is not None}
    except ValueError as exc:
        raise ValueError(f"bad template: {exc}") from None
    if names - {"broker"}:
        raise ValueError(f"unknown placeholder(s) {sorted(names - {'broker'})}: only {{broker}} is filled in")
    return v


Command = Annotated[Optional[str], BeforeValidator(_check_template)]

# One field per action kind that takes a shell command (its spec's needs.command), then the timeout.
Commands = create_model(
    "Commands", __base__=Model, __module__=__name__,
    **{kind: (Command, None) for kind in COMMAND_FIELDS},
    timeout_s=(Annotated[Float, Field(gt=0)], 120.0),
)
Commands.__doc__ = """Shell commands the harness runs to act on a cluster it does not start (``{broker}`` is the
    broker id); a fault action without its command is refused. A command must return when the act
    is done (a restart may return before the broker serves: the harness then waits until clients
    see it in the metadata)."""


# -- the systems' settings ------------------------------------------------------------------------

def _collect_settings() -> dict[str, ScenarioSetting]:
    # By system name, each setting where it first appears: a stable order (field order in the
    # scenario model, its error messages and stored scenario.yaml) whatever order the registry lists.
    out: dict[str, ScenarioSetting] = {}
    for name in sorted(PROFILES):
        for st in PROFILES[name].scenario_settings:
            if out.setdefault(st.name, st) != st:
                raise ValueError(f"scenario setting {st.name!r} declared twice, differently (system {name!r}): "
                                 f"declare it once and import it")
    return out


SETTINGS: dict[str, ScenarioSetting] = _collect_settings()
# Every system setting one system may read and another ignore, with its default (unset).
SYSTEM_SETTING_DEFAULTS: dict[str, Any] = {**{name: None for name in SETTINGS}, "extra": {}}
# The settings only one system reads (a bandwidth cap two systems share is a param of its own): a
# run's params carry their values so configurations that differ in them are never pooled.
OWN_SETTINGS: tuple[str, ...] = tuple(
    name for name in SETTINGS if sum(st.name == name for p in PROFILES.values() for st in p.scenario_settings) == 1)
# Settings given as a share of the brokers' link: setting -> its declaration (share_target: the
# bytes/s setting it becomes on a system).
LINK_SHARES: dict[str, ScenarioSetting] = {n: st for n, st in SETTINGS.items() if st.type == "share_of_link"}


def share_target(st: ScenarioSetting, profile: SystemProfile) -> str | None:
    """The bytes/s setting a share of the link becomes on a system: the one it names, else (the
    common move budget) the system's own mechanism, its profile's ``move_budget``; None: that
    system does not read it."""
    if st.name not in {x.name for x in profile.scenario_settings}:
        return None
    return st.gives or profile.move_budget

_VALUE_TYPES: dict[str, Any] = {
    "bytes": Bytes, "bytes_per_s": Bytes, "milliseconds": Float, "share_of_link": Float,
    "bool": Annotated[bool, Field(strict=True)],
}


def _field(st: ScenarioSetting) -> tuple[Any, Any]:
    if st.type == "choice":
        return Optional[Literal[st.choices]], Field(default=None, description=st.doc)
    bounds = {k: v for k in ("gt", "ge", "le") if (v := getattr(st, k)) is not None}
    value = Annotated[_VALUE_TYPES[st.type], Field(**bounds)] if bounds else _VALUE_TYPES[st.type]
    return Optional[value], Field(default=None, description=st.doc)


# Fields only a cluster the harness does not start reads.
UNLAUNCHED_FIELDS = ("bootstrap", "commands", "topic_prefix", "existing_topics", "label")


def reads(profile: SystemProfile) -> frozenset[str]:
    """The `system` fields a system reads besides kind, brokers and client (for a cluster the
    harness does not start: where it is and how to act on it too)."""
    own = {st.name for st in profile.scenario_settings}
    return frozenset(own | (set() if profile.launched else set(UNLAUNCHED_FIELDS)))


MAX_BROKERS = 1000  # a scenario's brokers (system.brokers)


class _SystemRules(Model):
    """The rules of the system section; :data:`System` adds the settings and the remaining fields."""

    kind: str  # a registered system (systems/registry.py)
    # The validator and the runner walk every broker id: a bound keeps a typo from exhausting memory
    # (far above what one machine starts; an external cluster names the brokers it uses). Left out
    # for a cluster the harness does not start: its brokers, from Metadata when it is reached
    # (Scenario.for_cluster).
    brokers: Optional[Annotated[int, Field(strict=True, ge=1, le=MAX_BROKERS)]] = None

    @field_validator("client", check_fields=False)
    @classmethod
    def _client(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key in LOCKED_CLIENT_SETTINGS:
                raise field_error(key, f"cannot be set: {LOCKED_CLIENT_SETTINGS[key]}")
        return v

    @field_validator("bootstrap", check_fields=False)
    @classmethod
    def _bootstrap(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for addr in v.split(","):
            m = _BOOTSTRAP_RE.match(addr.strip())
            if m is None or not 0 < int(m.group(2)) < 65536:
                raise ValueError(f"{addr.strip()!r} is not host:port (bootstrap: host:port[,host:port...])")
        return v

    @field_validator("topic_prefix", check_fields=False)
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
    def _fits_profile(self) -> _SystemRules:
        prof = self.profile
        if prof.launched:
            if self.brokers is None:
                raise field_error("brokers", f"required for system kind {self.kind!r} (how many brokers the "
                                             "harness starts)")
            for f in UNLAUNCHED_FIELDS:
                if getattr(self, f) is not None:
                    raise field_error(f, f"only for a cluster the harness does not start (system kind "
                                         f"{' or '.join(n for n, p in PROFILES.items() if not p.launched)}); "
                                         f"{self.kind!r} is started by the harness")
            # A key some system knows: a two-system scenario sets keys only one of them reads (the
            # other is not given them, bench/run/runner.py: broker_config); a typo no system knows.
            try:
                check_config(self.extra, {k: v for p in PROFILES.values() if p.launched
                                          for k, v in p.config_defaults.items()})
            except ConfigError as e:
                raise field_error("extra", str(e)) from None
        elif self.bootstrap is None:
            raise field_error("bootstrap", f"required for system kind {self.kind!r} (host:port[,host:port...])")
        values = self.model_dump()
        for p in PROFILES.values():
            for f, why in p.check_settings(values):
                raise field_error(f, why)
        if prof.only_own_settings:
            own = reads(prof)
            for f, default in SYSTEM_SETTING_DEFAULTS.items():
                if f not in own and getattr(self, f) != default:
                    raise field_error(f, f"not a setting of system {self.kind!r}, which is configured by whoever "
                                         f"runs it (it reads: {', '.join(sorted(own))})")
        return self


System = create_model(
    "System", __base__=_SystemRules, __module__=__name__,
    **{name: _field(st) for name, st in SETTINGS.items()},
    extra=(dict[str, ConfigValue], Field(default_factory=dict)),  # raw broker configs
    # Settings passed unchanged to every Kafka client the harness creates (librdkafka / Java names:
    # security.protocol, sasl.mechanism, ssl.ca.location, client.id, linger.ms, ...); a value may
    # be {env: NAME}. bench/run/clients.py applies them.
    client=(dict[str, ClientValue], Field(default_factory=dict)),
    # A cluster the harness does not start (profile.launched false): where it is, how to act on
    # it, which topics are the harness's.
    bootstrap=(Optional[str], None),
    commands=(Optional[Commands], None),
    topic_prefix=(Optional[str], None),  # default "bench."; every topic of the run gets it
    existing_topics=(Optional[Literal["refuse", "replace"]], None),  # default refuse
    label=(Optional[str], None),  # what the report calls the cluster ("Apache Kafka 3.9, 3 x m5.large")
)
System.__doc__ = """The system under test: common fields, then every profile's scenario settings
    (:data:`SETTINGS`), then the raw broker configs, client settings and, for a cluster the
    harness does not start, where it is and how to act on it."""
