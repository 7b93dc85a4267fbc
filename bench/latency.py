"""Object-store latency, as a scenario writes it and as the delaying proxy draws it
(bench/run/objstore_proxy.py).

A latency is a time to first byte: how long after the last byte of a request the first byte of
its response may reach the client. Two forms:

- fixed: ``"20ms"`` (also ``"0.02s"``, ``"500us"``); ``"0ms"`` (or the number 0) means no
  emulation at all (no proxy);
- a distribution given by percentiles: ``{p50: 30ms, p90: 60ms, p99: 150ms}`` in YAML, or
  ``"p50=30ms,p90=60ms,p99=150ms"`` on a command line.

A distribution is drawn per request by inverting its CDF (:meth:`Latency.quantile` of a uniform
u in [0, 1)):
- between two given percentiles: linear interpolation of the value;
- below the lowest given percentile: that percentile's value (a floor: give ``p1`` or ``p10`` to
  shape the fast side);
- above the highest given percentile (below p100): an exponential tail that continues the last
  segment, P(X > v) = (1 - q_k) exp(-(v - v_k) / theta) with theta = (v_k - v_{k-1}) /
  ln((1 - q_{k-1}) / (1 - q_k)), so that the tail passes through both of the last two points.
  {p90: 60ms, p99: 150ms} gives theta = 39 ms: p99.9 ~ 240 ms, p99.99 ~ 330 ms. A draw is capped
  at MAX_S. With p100 given there is no tail.
"""
from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_S = 60.0  # longer than any object store answers; also the cap of a tail draw
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|µs|ms|s)\s*$", re.IGNORECASE)
_UNIT_S = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_PERCENTILE = re.compile(r"^\s*p([0-9]+(?:\.[0-9]+)?)\s*$", re.IGNORECASE)


def parse_duration(value: Any) -> float:
    """``"20ms"``, ``"1.5s"``, ``"500us"``, or the number 0 -> seconds; ValueError otherwise (a
    bare number other than 0 has no unit to read it in)."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 20ms, got {value!r}")
    if isinstance(value, (int, float)):
        if value == 0:
            return 0.0
        raise ValueError(f"give a unit: {value!r} is not a duration (write {value}ms or {value}s)")
    if not isinstance(value, str):
        raise ValueError(f"must be a duration such as 20ms, got {value!r}")
    m = _DURATION.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a duration such as 20ms, 1.5s or 500us")
    s = float(m.group(1)) * _UNIT_S[m.group(2).lower()]
    if s > MAX_S:
        raise ValueError(f"{value!r} is above {MAX_S:g}s: not an object store's latency")
    return s


def format_duration(seconds: float) -> str:
    """Seconds -> ``"20ms"``, ``"0.5ms"``, ``"1500ms"`` (milliseconds: how latencies are read)."""
    ms = round(seconds * 1000, 6)
    return f"{ms:g}ms"


@dataclass(frozen=True)
class Latency:
    """A fixed latency (one point at q = 1) or a distribution ((quantile, seconds) ascending)."""

    points: tuple[tuple[float, float], ...]

    @property
    def fixed(self) -> float | None:
        """The latency in seconds if it is fixed, else None."""
        return self.points[0][1] if len(self.points) == 1 else None

    @property
    def zero(self) -> bool:
        """True: no latency at all (nothing to emulate)."""
        return all(v == 0 for _, v in self.points)

    @property
    def median_s(self) -> float:
        return self.quantile(0.5)

    def value(self) -> str | dict[str, str]:
        """As a scenario stores it: ``"20ms"`` or ``{"p50": "30ms", ...}`` by ascending percentile."""
        if self.fixed is not None:
            return format_duration(self.fixed)
        return {f"p{q * 100:g}": format_duration(v) for q, v in self.points}

    @property
    def text(self) -> str:
        """One string, for command lines, params and tables: ``20ms`` or ``p50=30ms,p90=60ms``."""
        v = self.value()
        return v if isinstance(v, str) else ",".join(f"{k}={d}" for k, d in v.items())

    @property
    def tail_theta_s(self) -> float | None:
        """The exponential tail's scale above the highest given percentile (None: no tail)."""
        if len(self.points) < 2 or self.points[-1][0] >= 1.0:
            return None
        (q0, v0), (q1, v1) = self.points[-2], self.points[-1]
        return (v1 - v0) / math.log((1 - q0) / (1 - q1))

    def quantile(self, u: float) -> float:
        """The inverse CDF at u in [0, 1): the latency a uniform draw u maps to (seconds)."""
        pts = self.points
        if len(pts) == 1 or u <= pts[0][0]:
            return pts[0][1]
        for (q0, v0), (q1, v1) in zip(pts, pts[1:]):
            if u <= q1:
                return v0 + (v1 - v0) * (u - q0) / (q1 - q0)
        qk, vk = pts[-1]
        theta = self.tail_theta_s
        if not theta:
            return vk
        return min(MAX_S, vk + theta * math.log((1 - qk) / max(1 - u, 1e-300)))

    def sampler(self, rng: random.Random | None = None) -> Callable[[], float]:
        """A function drawing one latency (seconds) per call."""
        fixed = self.fixed
        if fixed is not None:
            return lambda: fixed
        r = rng or random.Random()
        return lambda: self.quantile(r.random())


def _percentile(key: Any) -> float:
    m = _PERCENTILE.match(str(key))
    if not m:
        raise ValueError(f"{key!r} is not a percentile such as p50, p99 or p99.9")
    p = float(m.group(1))
    if not 0 < p <= 100:
        raise ValueError(f"{key!r}: a percentile is above p0 and at most p100")
    return p / 100


def parse_latency(value: Any) -> Latency:
    """A scenario's or a command line's latency -> :class:`Latency`; ValueError naming the
    problem. Accepts a duration (``"20ms"``, 0), a mapping percentile -> duration, or the
    command-line form ``"p50=30ms,p90=60ms"``."""
    if isinstance(value, Latency):
        return value
    if isinstance(value, str) and "=" in value:
        pairs = {}
        for part in value.split(","):
            k, sep, v = part.partition("=")
            if not sep:
                raise ValueError(f"{part!r}: expected pNN=DURATION, as in p50=30ms,p99=150ms")
            if k.strip() in pairs:
                raise ValueError(f"{k.strip()} given twice")
            pairs[k.strip()] = v.strip()
        value = pairs
    if isinstance(value, dict):
        if len(value) < 2:
            raise ValueError("a distribution needs at least two percentiles (one value is a fixed "
                             "latency: write it as 30ms)")
        pts = sorted((_percentile(k), k, v) for k, v in value.items())
        out = []
        for (q, k, v) in pts:
            try:
                s = parse_duration(v)
            except ValueError as e:
                raise ValueError(f"{k}: {e}") from None
            if out and q == out[-1][0]:
                raise ValueError(f"{k}: the same percentile given twice")
            if out and s < out[-1][1]:
                raise ValueError(f"{k}: {v} is below a lower percentile's value "
                                 f"({format_duration(out[-1][1])}): latency must not fall as the percentile rises")
            out.append((q, s))
        return Latency(tuple(out))
    return Latency(((1.0, parse_duration(value)),))


def canonical(value: Any) -> Any:
    """A scenario field's value, checked and written one way (``"20ms"``, ``{"p50": "30ms", ...}``);
    None stays None."""
    return None if value is None else parse_latency(value).value()


def emulated(value: Any) -> Latency | None:
    """The latency to emulate, None when there is none (absent or 0ms)."""
    if value is None:
        return None
    lat = parse_latency(value)
    return None if lat.zero else lat


__all__ = ["MAX_S", "Latency", "canonical", "emulated", "format_duration", "parse_duration", "parse_latency"]
