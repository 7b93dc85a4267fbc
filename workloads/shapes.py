"""Load shapes: steady, ramp, burst.

A shape is a total produce *rate* over time (messages/s, all users together), which is what a
Kafka workload is described by. Locust's :class:`LoadTestShape` controls a *user count*, so each
shape here does both: ``tick()`` keeps ``users`` producers running for ``duration_s`` (then ends
the test, unless ``hold`` is set, as when the harness ends the test itself after draining) and
``rate_at(t)`` is the total rate the producer users pace themselves to (each user sends
``rate_at(t) / user_count``).

This module defines no runnable shape class at import level on purpose: a locustfile that imports
it would otherwise get every shape as a candidate. ``workloads/kafka_produce.py`` exposes exactly
one (``ScenarioShape``) which picks the kind by option.
"""
from __future__ import annotations

from locust import LoadTestShape

from workloads.rates import rate_at


class RateShape(LoadTestShape):
    """Base of the rate shapes; see the module docstring."""

    abstract = True
    kind = "steady"

    def __init__(self, rate: float, duration_s: float | None, users: int = 1, *, hold: bool = False,
                 **params: float | None) -> None:
        super().__init__()
        self.rate = float(rate)
        self.duration_s = duration_s
        self.users = max(1, int(users))
        self.hold = hold
        self.params = {k: v for k, v in params.items() if v is not None}

    def rate_at(self, t: float | None = None) -> float:
        return rate_at(self.kind, self.get_run_time() if t is None else t, self.rate, **self.params)

    def tick(self):
        if not self.hold and self.duration_s is not None and self.get_run_time() >= self.duration_s:
            return None
        # Spawn every producer at once: the rate, not the user count, is what is shaped.
        return (self.users, float(self.users))


class SteadyShape(RateShape):
    abstract = True
    kind = "steady"


class RampShape(RateShape):
    abstract = True
    kind = "ramp"


class BurstShape(RateShape):
    abstract = True
    kind = "burst"


SHAPES: dict[str, type[RateShape]] = {"steady": SteadyShape, "ramp": RampShape, "burst": BurstShape}


def make_shape(kind: str, rate: float, duration_s: float | None, users: int = 1, *, hold: bool = False,
               **params: float | None) -> RateShape:
    try:
        cls = SHAPES[kind]
    except KeyError:
        raise ValueError(f"unknown shape kind {kind!r} (steady, ramp, burst)") from None
    return cls(rate, duration_s, users, hold=hold, **params)
