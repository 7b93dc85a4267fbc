"""The scale model: a scenario that declares ``scale: {bytes: 0.01, rate: 0.01}`` says it is a
production cluster scaled down by those factors, and this module checks the claim, setting by
setting (docs/scale-model.md says why such a run stands for the production one).

Each scaled setting has a production value and its source: the harness's own (the brokers' link,
the producers' linger.ms, the object store's latency, here) and each system's (its scenario
settings' ``production``, its ``scaled_configs`` and the cluster-wide ``COMMON_SCALED_CONFIGS``,
in systems/). A setting's factor is the run's value over the production value; its dimension
says which factor it should have: ``bytes`` the declared bytes factor, ``rate`` the rate factor,
``time`` 1 (time-like settings stay at production values: a transfer-bound time, bytes / rate,
is then the production one). A factor more than ``tolerance`` (relative) from the declared one
breaks the scaling, and the run says so (summary.json ``configuration.scale``, the report's scale
table). The partitions' sizes and the ingest have no production default: the run says what they
stand for (its value over the factor) and never breaks the scaling by them.
"""
from __future__ import annotations

from typing import Any

from bench.latency import emulated
from bench.units import rate_bits
from systems.core.config import DEFAULTS as CORE_DEFAULTS
from systems.core.profile import COMMON_SCALED_CONFIGS, Production, ScaledConfig

# The brokers' link in production: a 10 Gbit/s NIC, the projection's headline link
# (bench/analysis/projection.py HEADLINE_LINKS_GBIT) and a common cloud broker's (e.g. AWS
# m5.2xlarge, "up to 10 Gigabit").
LINK = Production(10e9 / 8, "a 10 Gbit/s broker NIC: the projection's headline link, e.g. AWS m5.2xlarge's "
                            "'up to 10 Gigabit'")
LINGER = Production(5, "the client's default linger.ms: librdkafka's since v1.5.0, the Kafka Java producer's "
                       "since 4.0 (KIP-1030)")
# The object store's time to first byte in one region (network.object_store_latency's p50).
OBJECT_STORE_P50_MS = Production(30, "Quickwit, 'S3 Express speculations' (2023): S3 Standard GET time to first "
                                     "byte from EC2 in the same region 'around up to 30ms'")
STANDS_FOR = "what the run stands for: its value over the factor"
_SETTING_DIMENSION = {"bytes": "bytes", "bytes_per_s": "rate", "milliseconds": "time"}


def _row(setting: str, dimension: str, value: Any, production: Production | None, declared: float,
         tolerance: float) -> dict[str, Any]:
    if production is None:  # a workload's size or rate: what it stands for, never a break
        return {"setting": setting, "dimension": dimension, "value": value,
                "production": None if value is None else value / declared, "source": STANDS_FOR,
                "factor": declared, "declared": declared, "breaks": False}
    factor = None if value is None else value / production.value
    breaks = factor is not None and abs(factor / declared - 1) > tolerance
    return {"setting": setting, "dimension": dimension, "value": value, "production": production.value,
            "source": production.source, "factor": factor, "declared": declared, "breaks": breaks}


def _config_value(sc: Any, c: ScaledConfig) -> float | None:
    v = sc.system.extra.get(c.key)
    if v is None:
        v = sc.profile.config_defaults.get(c.key, CORE_DEFAULTS.get(c.key))
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def scale_check(sc: Any) -> dict[str, Any] | None:
    """The scenario's declared scale and, per scaled setting of its system, the value run, the
    production value, its source, the factor and whether it breaks the scaling (None: the
    scenario declares no scale). Units: bytes, bytes/s, milliseconds."""
    scale = sc.scale
    if scale is None:
        return None
    declared = {"bytes": scale.bytes, "rate": scale.rate, "time": 1.0}
    tol = scale.tolerance
    prof, wl, net = sc.profile, sc.workload, sc.network
    rows = []

    def add(setting: str, dimension: str, value: Any, production: Production | None) -> None:
        rows.append(_row(setting, dimension, value, production, declared[dimension], tol))

    add("prefill (the largest partition's size)", "bytes", max(sc.prefill_bytes_of(t.name) for t in wl.topics), None)
    add("workload ingest per partition (bytes/s, the highest)", "rate",
        max(sc.nominal_ingest_of(t.name) or 0.0 for t in wl.topics), None)
    if net.link_rate is not None:
        add("network.link_rate (the brokers' links)", "rate", rate_bits(net.link_rate) / 8, LINK)
    add("workload.linger_ms (linger.ms)", "time", wl.linger_ms, LINGER)
    if prof.object_store is not None and prof.launched:
        lat = emulated(net.object_store_latency)
        add("network.object_store_latency (p50)", "time", 0.0 if lat is None else lat.median_s * 1000,
            OBJECT_STORE_P50_MS)
    settings = sc.settings()
    for st in prof.scenario_settings:
        if st.production is not None:
            add(f"system.{st.name}", _SETTING_DIMENSION[st.type], st.value(settings), st.production)
    for c in (*(COMMON_SCALED_CONFIGS if prof.launched else ()), *prof.scaled_configs):
        add(c.key, c.dimension, _config_value(sc, c), c.production)
    return {"bytes": scale.bytes, "rate": scale.rate, "tolerance": tol, "settings": rows,
            "breaks": [r["setting"] for r in rows if r["breaks"]]}


__all__ = ["LINGER", "LINK", "OBJECT_STORE_P50_MS", "STANDS_FOR", "scale_check"]
