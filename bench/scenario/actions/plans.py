"""What a move does: a plan, ``[(topic, partition, target replicas)]``.

A ``reassign`` or ``move_set`` names its moves (:class:`PartitionMove`); the actions whose
partitions are only known at run time plan them from the cluster's metadata as the client sees it
(``{(topic, partition): {leader, replicas, isr}}``)."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, Field

from bench.scenario.fields import BrokerId, Model

Metadata = dict[tuple[str, int], dict[str, Any]]
Plan = list[tuple[str, int, list[int]]]


class PartitionMove(Model):
    """One entry of a ``move_set``. ``replicas`` is accepted for ``to`` so entries can be pasted
    from a kafka-reassign-partitions plan."""

    topic: str
    partition: Annotated[int, Field(strict=True, ge=0)]
    to: Annotated[list[BrokerId], Field(min_length=1, validation_alias=AliasChoices("to", "replicas"))]


def rebalance_plan(md: Metadata, brokers: list[int], new: int) -> Plan:
    """Move replicas from the most loaded brokers to the new one until it holds its share
    (total replicas // live brokers)."""
    load: dict[int, list[tuple[str, int]]] = {b: [] for b in brokers}
    for tp, m in sorted(md.items()):
        for r in m["replicas"]:
            load.setdefault(r, []).append(tp)
    total = sum(len(v) for v in load.values())
    share = total // max(1, len(load))
    plan: dict[tuple[str, int], list[int]] = {}
    while len([tp for tp in plan if new in plan[tp]]) + len(load.get(new, [])) < share:
        donor = max((b for b in load if b != new), key=lambda b: (len(load[b]), -b))
        cands = [tp for tp in load[donor] if new not in plan.get(tp, md[tp]["replicas"])]
        if not cands:
            break
        tp = cands[0]
        cur = plan.get(tp, list(md[tp]["replicas"]))
        plan[tp] = [new if r == donor else r for r in cur]
        load[donor].remove(tp)
    return [(t, p, to) for (t, p), to in sorted(plan.items())]


def drain_plan(md: Metadata, brokers: list[int], broker: int, to: list[int] | None) -> Plan:
    """Move every replica off `broker`, each to the least loaded target (default: every other
    broker) that does not hold the partition yet."""
    targets = list(to) if to else sorted(b for b in brokers if b != broker)
    load = {b: sum(1 for m in md.values() if b in m["replicas"]) for b in targets}
    plan = []
    for tp, m in sorted(md.items()):
        if broker not in m["replicas"]:
            continue
        choices = [b for b in targets if b not in m["replicas"]]
        if not choices:
            continue
        b = min(choices, key=lambda x: (load[x], x))
        load[b] += 1
        plan.append((tp[0], tp[1], [b if r == broker else r for r in m["replicas"]]))
    return plan


def partitions_on(md: Metadata, broker: int) -> list[tuple[str, int]]:
    """Partitions with a replica on (or led by) `broker`."""
    return sorted(tp for tp, m in md.items() if broker in m["replicas"] or m["leader"] == broker)
