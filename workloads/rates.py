"""Target produce rate of the load shapes over time (no Locust import: usable anywhere, e.g. by
tests that must not trigger gevent's monkey-patching)."""
from __future__ import annotations


def rate_at(kind: str, t: float, rate: float, *, ramp_s: float | None = None,
            burst_every_s: float | None = None, burst_factor: float | None = None,
            burst_s: float | None = None) -> float:
    """Total target rate (msgs/s) at ``t`` seconds into the load.

    * ``steady``: ``rate``.
    * ``ramp``: linear from 0 to ``rate`` over ``ramp_s``, then ``rate``.
    * ``burst``: ``rate``, but ``rate * burst_factor`` during the first ``burst_s`` of every
      ``burst_every_s`` period after the first period (so the load starts at base rate).
    """
    if t < 0:
        return 0.0
    if kind == "steady":
        return rate
    if kind == "ramp":
        if not ramp_s or t >= ramp_s:
            return rate
        return rate * t / ramp_s
    if kind == "burst":
        if not burst_every_s or not burst_factor or not burst_s:
            return rate
        k, into = divmod(t, burst_every_s)
        return rate * burst_factor if k >= 1 and into < burst_s else rate
    raise ValueError(f"unknown shape kind {kind!r} (steady, ramp, burst)")
