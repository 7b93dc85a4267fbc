"""Was the host saturated? The one rule, applied to a run's load window and to each move's window.

Everything in a run shares one machine (here 2 cores): the brokers, the controller, the object
store, the load generator, the verifying consumer, the harness, and whatever else runs on it. A
move timed while the machine had no CPU to spare measures the machine, not the system. So:

**A window is saturated when the host's mean CPU busy share over it exceeds**
:data:`SATURATED_BUSY_PCT` **(90 % of all cores).** The mean is over the once-a-second host
samples overlapping the window, each weighted by its seconds inside it (a sample is itself the
mean over the second before it), so it estimates the share of the window's CPU time that was
used. With fewer than :data:`MIN_SAMPLES` (2) overlapping samples the answer is unknown (None):
one sample is one second that may lie mostly outside the window.

Why a mean over the window rather than any single sample above the line: a move is delayed by the
CPU it did not get over its whole span; a one-second spike (a JVM's garbage collection, the JIT,
a Python process starting) is absorbed by the queues a system has, and on a 2-core host nearly
every window of a few seconds holds one, so "any sample" would flag nearly every move and say
nothing. A mean above 90 % leaves less than a tenth of the cores (0.2 of one core here) idle on
average across the whole window: the processes were waiting for a CPU for most of it. The peak
sample is reported beside the mean, for a reader who wants to see the spikes.

Samples: ``host_sample`` events (bench/history/names.py; bench/run/observe.py ``host_busy``: busy
= not idle and not waiting for I/O, psutil.cpu_percent's definition, every process on the host).
A history from before them has only cpu_sample's ``_machine`` key (psutil.cpu_percent(None) of
the sampler's thread, the same definition): each of those covers the time since the previous
cpu_sample; the first one covers an unknown interval and is left out. A history with neither is
unknown. Pure functions of a history's events: the aggregate's events-only view gives the same
answers as the full history.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from bench.check.view import HistoryView, hashable
from bench.history.names import (EVENT_CPU_SAMPLE, EVENT_HOST_SAMPLE, EVENT_LOAD_FINISHED, EVENT_LOAD_STARTED,
                                 EVENT_RUN_START)

SATURATED_BUSY_PCT = 90.0  # a window above this mean busy share of all cores is saturated
MIN_SAMPLES = 2  # fewer host samples overlapping a window: unknown
# A run's mean steal above this is named wherever its host is: a virtual machine whose hypervisor
# serves other guests gives the run less CPU than it had (27 % was seen on this project's VM).
STEAL_NOTICE_PCT = 5.0
SOURCE_HOST = EVENT_HOST_SAMPLE  # where a run's host samples came from
SOURCE_MACHINE = f"{EVENT_CPU_SAMPLE}._machine"  # a history from before host_sample
MACHINE_KEY = "_machine"

RULE = (f"a window is saturated when the host's mean CPU busy share (all cores, every process) over its "
        f"once-a-second samples, each weighted by its seconds inside, exceeds {SATURATED_BUSY_PCT:g} %; "
        f"unknown with fewer than {MIN_SAMPLES} samples")


@dataclass(frozen=True)
class HostSample:
    start: float  # the sample covers (start, end]
    end: float
    busy_pct: float


_CACHE: weakref.WeakKeyDictionary[HistoryView, tuple[list[HostSample], str | None]] = weakref.WeakKeyDictionary()


def host_samples(v: HistoryView) -> tuple[list[HostSample], str | None]:
    """The run's host samples in time order and where they came from (:data:`SOURCE_HOST`,
    :data:`SOURCE_MACHINE`, or None: the history has none)."""
    if v in _CACHE:
        return _CACHE[v]
    out: list[HostSample] = []
    for e in sorted(v.events_named(EVENT_HOST_SAMPLE), key=lambda e: e.ts):
        busy, dt = e.detail.get("busy_pct"), e.detail.get("interval_s")
        if isinstance(busy, (int, float)) and isinstance(dt, (int, float)) and dt > 0:
            out.append(HostSample(e.ts - float(dt), e.ts, float(busy)))
    source: str | None = SOURCE_HOST if out else None
    if not out:
        prev = None
        for e in sorted(v.events_named(EVENT_CPU_SAMPLE), key=lambda e: e.ts):
            busy = e.detail.get(MACHINE_KEY)
            if prev is not None and isinstance(busy, (int, float)) and e.ts > prev:
                out.append(HostSample(prev, e.ts, float(busy)))
            prev = e.ts
        source = SOURCE_MACHINE if out else None
    _CACHE[v] = (out, source)
    return out, source


def is_saturated(mean_busy_pct: float | None, samples: int) -> bool | None:
    """The rule: True above :data:`SATURATED_BUSY_PCT`, False at or below, None (unknown) with
    fewer than :data:`MIN_SAMPLES` samples."""
    if mean_busy_pct is None or samples < MIN_SAMPLES:
        return None
    return mean_busy_pct > SATURATED_BUSY_PCT


def host_window(samples: list[HostSample], lo: float | None, hi: float | None,
                source: str | None = SOURCE_HOST) -> dict[str, Any]:
    """The host over [lo, hi]: ``{busy_mean_pct, busy_peak_pct, samples, saturated, reason}``;
    the mean weights each overlapping sample by its seconds inside the window (equal weights for
    a window of no length), the peak is the busiest overlapping sample; ``saturated`` by
    :func:`is_saturated`, ``reason`` says why it is unknown (else None)."""
    out: dict[str, Any] = {"busy_mean_pct": None, "busy_peak_pct": None, "samples": 0, "saturated": None}
    if lo is None or hi is None or hi < lo:
        return {**out, "reason": "no window"}
    inside = [(s, min(s.end, hi) - max(s.start, lo)) for s in samples if s.end > lo and s.start < hi]
    if not inside and samples and lo == hi:  # an instant: the sample that holds it
        inside = [(s, 0.0) for s in samples if s.start <= lo <= s.end][:1]
    if not inside:
        why = "no host samples in the history" if not samples or source is None else "no host sample in the window"
        return {**out, "reason": why}
    total = sum(w for _, w in inside)
    mean = (sum(s.busy_pct * w for s, w in inside) / total if total > 0
            else sum(s.busy_pct for s, _ in inside) / len(inside))
    n = len(inside)
    sat = is_saturated(mean, n)
    return {"busy_mean_pct": round(mean, 1), "busy_peak_pct": round(max(s.busy_pct for s, _ in inside), 1),
            "samples": n, "saturated": sat,
            "reason": None if sat is not None else f"{n} host sample(s) in the window, {MIN_SAMPLES} needed"}


def load_window(v: HistoryView, samples: list[HostSample]) -> tuple[float | None, float | None]:
    """A run's load window from its events: load_started to load_finished (without them, the
    samples' span: they are taken during the load only)."""
    started = v.events_named(EVENT_LOAD_STARTED)
    finished = v.events_named(EVENT_LOAD_FINISHED)
    lo = min(e.ts for e in started) if started else (samples[0].start if samples else None)
    hi = max(e.ts for e in finished) if finished else (samples[-1].end if samples else None)
    return lo, hi


def run_host(v: HistoryView | None) -> dict[str, Any]:
    """summary.json's ``host``: :func:`host_window` over the run's load window, with the window,
    the samples above the line, the rule's threshold and where the samples came from (unknown
    without a history: an older summary read alone)."""
    if v is None:
        return {**host_window([], None, None, None), "reason": "no history to read host samples from",
                "samples_over_threshold": None, "run_processes_pct": None, "cpu_pressure_mean_pct": None,
                "steal_mean_pct": None,
                "from_ts": None, "to_ts": None,
                "threshold_pct": SATURATED_BUSY_PCT, "source": None}
    samples, source = host_samples(v)
    lo, hi = load_window(v, samples)
    w = host_window(samples, lo, hi, source)
    over = sum(1 for s in samples if s.busy_pct > SATURATED_BUSY_PCT
               and lo is not None and hi is not None and s.end > lo and s.start < hi)
    return {**w, "samples_over_threshold": over if w["samples"] else None,
            "run_processes_pct": run_processes_pct(v, lo, hi), "cpu_pressure_mean_pct": cpu_pressure(v, lo, hi),
            "steal_mean_pct": sample_mean(v, "steal_pct", lo, hi),
            "from_ts": lo, "to_ts": hi,
            "threshold_pct": SATURATED_BUSY_PCT, "source": source}


def cpu_pressure(v: HistoryView, lo: float | None, hi: float | None) -> float | None:
    """The mean over [lo, hi]'s host samples of ``cpu_pressure_pct`` (the share of each second some
    runnable task waited for a CPU, the kernel's PSI): how much waiting the busy share meant.
    Reported, not part of the rule; None where the kernel has no PSI or the history predates it."""
    return sample_mean(v, "cpu_pressure_pct", lo, hi)


def sample_mean(v: HistoryView, key: str, lo: float | None, hi: float | None) -> float | None:
    """The mean of ``key`` over [lo, hi]'s host samples (None: no sample has it). ``steal_pct``:
    the share of the cores the hypervisor gave other guests while this one had work (counted as
    busy by the rule: a VM's noisy neighbours saturate it as surely as its own processes do)."""
    if lo is None or hi is None:
        return None
    xs = [float(e.detail[key]) for e in v.events_named(EVENT_HOST_SAMPLE)
          if lo < e.ts <= hi and isinstance(e.detail.get(key), (int, float))]
    return round(sum(xs) / len(xs), 1) if xs else None


def host_cpus(v: HistoryView) -> int | None:
    """The host's cores: from its host samples, else the run's provenance (run_start)."""
    for e in v.events_named(EVENT_HOST_SAMPLE):
        if isinstance(e.detail.get("cpus"), int) and e.detail["cpus"] > 0:
            return e.detail["cpus"]
    for e in v.events_named(EVENT_RUN_START):
        cpus = ((e.detail.get("provenance") or {}).get("machine") or {}).get("cpus")
        if isinstance(cpus, int) and cpus > 0:
            return cpus
    return None


def run_processes_pct(v: HistoryView, lo: float | None, hi: float | None) -> float | None:
    """The run's own processes' share of the host over [lo, hi] (%, 100 = every core): the sum of
    each cpu_sample's processes (load, consumers, harness, cluster; % of one core) over the cores,
    the mean over the samples. Beside the host's busy share it tells whose CPU it was: the run's,
    or other work on the machine."""
    cpus = host_cpus(v)
    if cpus is None or lo is None or hi is None:
        return None
    xs = [sum(float(x) for k, x in e.detail.items() if not k.startswith("_") and isinstance(x, (int, float))) / cpus
          for e in v.events_named(EVENT_CPU_SAMPLE) if lo < e.ts <= hi]
    return round(sum(xs) / len(xs), 1) if xs else None


def move_window(v: HistoryView, action_id: Any, request_ts: float | None, move_seconds: float | None
                ) -> tuple[float | None, float | None]:
    """A move's window: its request to the first ack on the new owner (request + move_seconds),
    else to its action's end (the window of the link fill, bench.check.moves.move_link_fill)."""
    if request_ts is None:
        return None, None
    if move_seconds is not None:
        return request_ts, request_ts + move_seconds
    a = next((a for a in v.actions if a.action_id == hashable(action_id)), None)
    return request_ts, (a.end if a is not None else None)


def move_host(v: HistoryView, action_id: Any, request_ts: float | None, move_seconds: float | None) -> dict[str, Any]:
    """:func:`host_window` over a move's window (:func:`move_window`)."""
    samples, source = host_samples(v)
    return host_window(samples, *move_window(v, action_id, request_ts, move_seconds), source)


__all__ = ["MIN_SAMPLES", "RULE", "SATURATED_BUSY_PCT", "SOURCE_HOST", "SOURCE_MACHINE", "HostSample", "cpu_pressure",
           "host_samples", "host_cpus", "host_window", "is_saturated", "load_window", "move_host", "move_window", "run_host",
           "run_processes_pct"]
