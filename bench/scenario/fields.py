"""The field types every section of a scenario uses.

Numbers are strict: YAML gives typed scalars, so a bool or a quoted string in a numeric field is a
mistake, not something to coerce. Every model is frozen and refuses unknown fields (a typo must
never silently fall back to a default).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from bench.latency import canonical
from bench.units import parse_bytes, rate_bits

Float = Annotated[float, Field(strict=True)]
Bytes = Annotated[int, BeforeValidator(parse_bytes), Field(strict=True)]
BrokerId = Annotated[int, Field(strict=True, ge=1)]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # scenario and consumer-set names


def _as_config_str(value: Any) -> Any:
    # Broker configs are strings on the wire; YAML turns `true`/`1048576` into bool/int.
    # (Its name shows in error paths of a union such as a client setting: keep it.)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


ConfigValue = Annotated[str, BeforeValidator(_as_config_str)]


def _tc_rate(value: Any) -> Any:
    # Checked here so a bad rate is reported with the file and field before anything starts.
    if value is not None:
        rate_bits(value)  # ValueError naming the bad rate
    return value


TcRate = Annotated[str, BeforeValidator(_tc_rate)]


def _latency(value: Any) -> Any:
    # Checked and written one way ("20ms", {"p50": "30ms", ...}): bench/latency.py.
    return canonical(value)


# A time to first byte: "20ms", or percentiles {p50: 30ms, p90: 60ms, p99: 150ms}.
Latency = Annotated[Union[str, dict[str, str]], BeforeValidator(_latency)]


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
