"""Randomized schedules, as Jepsen's nemesis draws them: a scenario of moves and faults under
load, drawn from a seed (``python -m bench chaos``).

The schedule is an ordinary scenario: the drawn file is written before the run, so any failure
replays with ``python -m bench run FILE``. From the seed (``random.Random(seed)``, nothing else):
episodes at exponentially distributed gaps (mean ``MEAN_GAP_S``) from ``START_S`` until
``END_MARGIN_S`` before the load ends, each one of

- a single move (``reassign`` of one partition to a random set of brokers),
- concurrent moves (``move_set`` of two or three partitions),
- a drain (``drain_broker``: every partition off one broker),
- a fault with its recovery ``FAULT_S`` later: every fault kind of the registry that applies to
  the system (kill -9 and restart of a broker, SIGSTOP/SIGCONT, kill and restart of the
  controller, the object store stopped and started where there is one, a broker isolated on the
  emulated network and healed), one fault at a time; moves may overlap it, but never target the
  broker it has out (a drain then names its targets without it).

Every drawn action is checked with the scenario validator (bench/scenario/actions: the cluster as
the timeline leaves it: dead, paused, isolated brokers, placement) before it is kept; one it
refuses is drawn again (``MAX_TRIES``), so a schedule never asks what the validator would refuse.
The cluster: 4 brokers, one topic ``chaos`` of 6 partitions (replication factor 3 where the
system replicates, 1 where a partition has one owner), 1 KiB messages at 300/s, 4 MiB prefilled
per partition, 100mbit links.
"""
from __future__ import annotations

import random
from typing import Any

from bench.scenario.actions import FAULT_RECOVERY, SPECS
from bench.scenario.errors import ScenarioError
from bench.scenario.loading import parse_scenario
from systems.registry import profile

START_S = 10.0  # the load settles first
END_MARGIN_S = 25.0  # the last recovery this long before the load ends: its outage can be measured
MEAN_GAP_S = 15.0
FAULT_S = (3.0, 12.0)  # a fault lasts this long (uniform), then its recovery
MAX_TRIES = 20
BROKERS, PARTITIONS, TOPIC = 4, 6, "chaos"
EPISODES = (("move", 0.30), ("concurrent", 0.15), ("drain", 0.10), ("fault", 0.45))


def base(system: str, seed: int, minutes: float) -> dict[str, Any]:
    """The scenario around the schedule (a dict as in a YAML file), no actions yet."""
    p = profile(system)
    rf = 1 if p.single_owner else 3
    return {
        "name": f"chaos-{system}-seed{seed}",
        "description": f"randomized moves and faults drawn from seed {seed}, {minutes:g} min "
                       f"(python -m bench chaos --system {system} --seed {seed} --minutes {minutes:g})",
        "system": {"kind": system, "brokers": BROKERS,
                   "extra": {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}},
        "workload": {"topics": [{"name": TOPIC, "partitions": PARTITIONS, "replication_factor": rf}],
                     "message_bytes": "1KiB", "produce_rate_msgs_per_s": 300, "duration_s": round(minutes * 60, 3)},
        "prefill": {"bytes_per_partition": "4MiB", "topics": [TOPIC]},
        "network": {"link_rate": "100mbit", "client_link_rate": "1gbit",
                    **({"object_store_link_rate": "1gbit"} if p.object_store is not None else {})},
        "actions": [],
    }


def fault_kinds(system: str) -> list[str]:
    """The fault kinds (with a recovery) whose needs the system and the chaos cluster meet."""
    p = profile(system)
    return [k for k in FAULT_RECOVERY if not (SPECS[k].needs.object_store and p.object_store is None)]


def _valid(doc: dict[str, Any]) -> bool:
    try:
        parse_scenario(doc, doc["name"])
        return True
    except ScenarioError:
        return False


def _draw_episode(rng: random.Random, kind: str, at: float, rf: int, faults: list[str],
                  down: int | None = None) -> list[dict[str, Any]]:
    """One episode at ``at``; ``down``: the broker a fault has out now, never a move's target (as an
    operator's tool, e.g. Cruise Control, excludes dead brokers as destinations; the shared system
    refuses them)."""
    brokers = list(range(1, BROKERS + 1))
    targets = [b for b in brokers if b != down]
    if kind == "move":
        return [{"at_s": at, "kind": "reassign", "topic": TOPIC, "partition": rng.randrange(PARTITIONS),
                 "to": sorted(rng.sample(targets, rf))}]
    if kind == "concurrent":
        parts = rng.sample(range(PARTITIONS), rng.choice((2, 3)))
        return [{"at_s": at, "kind": "move_set",
                 "partitions": [{"topic": TOPIC, "partition": q, "to": sorted(rng.sample(targets, rf))} for q in parts]}]
    if kind == "drain":
        broker = rng.choice(brokers)
        return [{"at_s": at, "kind": "drain_broker", "broker": broker,
                 **({"to": [b for b in targets if b != broker]} if down is not None else {})}]
    fault = rng.choice(faults)
    spec = SPECS[fault]
    fields = {"broker": rng.choice(brokers)} if "broker" in spec.required else {}
    back = round(at + rng.uniform(*FAULT_S), 1)
    return [{"at_s": at, "kind": fault, **fields}, {"at_s": back, "kind": FAULT_RECOVERY[fault], **fields}]


def draw(system: str, seed: int, minutes: float) -> dict[str, Any]:
    """The chaos scenario of ``system`` for ``seed`` and ``minutes`` (module docstring)."""
    if minutes * 60 < START_S + END_MARGIN_S + FAULT_S[1]:
        raise ScenarioError(f"--minutes {minutes:g}: a schedule needs at least "
                            f"{(START_S + END_MARGIN_S + FAULT_S[1]) / 60:.1f} min")
    doc = base(system, seed, minutes)
    rng = random.Random(seed)
    rf = doc["workload"]["topics"][0]["replication_factor"]
    faults = fault_kinds(system)
    end = minutes * 60 - END_MARGIN_S
    kinds, weights = zip(*EPISODES)
    t, fault_until, down = START_S, 0.0, None
    while True:
        t = round(t + min(40.0, max(3.0, rng.expovariate(1 / MEAN_GAP_S))), 1)
        if t >= end:
            break
        for _ in range(MAX_TRIES):
            kind = rng.choices(kinds, weights)[0]
            if kind == "fault" and (t < fault_until or not faults):
                continue  # one fault at a time
            new = _draw_episode(rng, kind, t, rf, faults, down if t < fault_until else None)
            if new[-1]["at_s"] > end:
                continue
            trial = {**doc, "actions": sorted(doc["actions"] + new, key=lambda a: a["at_s"])}
            if _valid(trial):
                doc = trial
                if kind == "fault":
                    fault_until, down = new[-1]["at_s"] + 2.0, new[0].get("broker")
                break
    if not doc["actions"]:
        raise ScenarioError(f"seed {seed}: no action fits {minutes:g} min")
    parse_scenario(doc, doc["name"])  # the whole schedule, once more: what the run will load
    return doc
