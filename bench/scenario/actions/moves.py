"""Moves: partitions change brokers through the Kafka admin API (AlterPartitionReassignments), as an
operator's tool would. Each kind makes a plan; the run carries it out (``ActionContext.carry_out``:
request, watch until the client sees every target replica set with a leader in it)."""
from __future__ import annotations

import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any

from bench.history.names import EVENT_BROKER_STARTED, EVENT_BROKER_STARTING
from bench.scenario.actions.plans import PartitionMove, Plan, drain_plan, rebalance_plan
from bench.scenario.actions.spec import MOVE_SHADE, ActionSpec, Needs, TimelineState, event_base
from bench.scenario.errors import field_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ActionContext


class MoveSpec(ActionSpec):
    is_move = True
    shade = MOVE_SHADE

    @abstractmethod
    def plan(self, ctx: ActionContext, i: int, a: Action) -> Plan:
        """The partitions to move and where (at run time, from the cluster as it is then)."""

    def start_fields(self, plan: Plan) -> dict[str, Any]:
        """What the action_start carries besides its plan's partitions."""
        return {}

    def execute(self, ctx: ActionContext, i: int, a: Action) -> None:
        plan = self.plan(ctx, i, a)
        ctx.carry_out(i, a, plan, self.start_fields(plan))

    def explicit_plan(self, ctx: ActionContext, a: Action) -> Plan:
        """The action's own moves; a ``replace`` resolved against the replicas the client sees now."""
        current: dict[str, dict[int, list[int]]] = {}
        for (t, p), m in ctx.metadata().items():
            current.setdefault(t, {})[p] = list(m.get("replicas") or ())
        return [(m.topic, m.partition, list(m.to)) for m in self.moves(a, current)]


class Reassign(MoveSpec):
    kind = "reassign"
    description = ("Move one partition to a new replica list (`to`), or swap one of its replicas for another "
                   "broker (`replace` + `by`, the usual production move).")
    required = frozenset({"topic", "partition"})  # and either `to` or `replace` + `by`
    optional = frozenset({"to", "replace", "by"})

    def check_fields(self, a: Action) -> None:
        if a.to is None and a.replace is None:
            raise field_error("to", "required for action kind reassign (the new replica list), unless "
                                    "`replace` + `by` swap one broker for another")
        if a.to is not None and a.replace is not None:
            raise field_error("to", "reassign: give either `to` or `replace` + `by`, not both")
        if (a.replace is None) != (a.by is None):
            raise field_error("by" if a.by is None else "replace", "reassign: `replace` and `by` go together")
        if a.replace is not None and a.replace == a.by:
            raise field_error("by", f"replaces broker {a.replace} by itself")

    def moves(self, a: Action, placement: dict[str, dict[int, list[int]]] | None) -> list[PartitionMove]:
        to = a.to
        if to is None:
            current = (placement or {}).get(a.topic, {}).get(a.partition)
            if current is None:
                raise ValueError(f"reassign {a.topic}-{a.partition}: replicas unknown")
            to = [a.by if b == a.replace else b for b in current]
        return [PartitionMove(topic=a.topic, partition=a.partition, to=to)]

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if a.replace is not None and not st.known_rf:
            # The replicas are known once the cluster's replication factor is (for_cluster).
            st.check_move(at, a.topic, a.partition, [a.by])
            return
        if a.replace is not None:
            st.check_topic(at, a.topic)
            current = st.placement[a.topic].get(a.partition, [])
            if a.replace not in current:
                raise field_error(f"{at}.replace", f"broker {a.replace} holds no replica of {a.topic}-{a.partition} "
                                                   f"(its replicas then: {current})")
            if a.by in current:
                raise field_error(f"{at}.by", f"broker {a.by} already holds a replica of {a.topic}-{a.partition}")
        st.check_move(at, a.topic, a.partition, self.moves(a, st.placement)[0].to)

    def plan(self, ctx: ActionContext, i: int, a: Action) -> Plan:
        return self.explicit_plan(ctx, a)

    def start_fields(self, plan: Plan) -> dict[str, Any]:
        return {"topic": plan[0][0], "partition": plan[0][1], "to": plan[0][2]}


class MoveSet(MoveSpec):
    kind = "move_set"
    description = ("Move several partitions in one plan (entries as in a kafka-reassign-partitions plan), "
                   "at most `concurrency` moves in flight per broker.")
    required = frozenset({"partitions"})
    # concurrency: moves in flight per broker (Cruise Control's
    # num.concurrent.partition.movements.per.broker); default: the whole plan in one request.
    optional = frozenset({"concurrency"})

    def moves(self, a: Action, placement: dict[str, dict[int, list[int]]] | None) -> list[PartitionMove]:
        return list(a.partitions or ())

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        seen: set[tuple[str, int]] = set()
        for j, m in enumerate(a.partitions):
            st.check_move(f"{at}.partitions.{j}", m.topic, m.partition, m.to)
            if (m.topic, m.partition) in seen:
                raise field_error(f"{at}.partitions.{j}", f"{m.topic}-{m.partition} is moved twice")
            seen.add((m.topic, m.partition))

    def plan(self, ctx: ActionContext, i: int, a: Action) -> Plan:
        return self.explicit_plan(ctx, a)


class AddBrokerAndRebalance(MoveSpec):
    kind = "add_broker_and_rebalance"
    description = ("Start a new broker (the next free id, or `broker`), then move replicas from the most "
                   "loaded brokers onto it until it holds its share.")
    optional = frozenset({"broker", "concurrency"})
    needs = Needs(launched=True)
    adds_broker = True

    def refusal_unlaunched(self, system_kind: str) -> str:
        return (f"{self.kind}: starts a broker, which the harness cannot do on a cluster it does not start "
                f"(system {system_kind!r}); use move_set or drain_broker")

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        new = st.added[i]
        if new in st.exists:
            raise field_error(f"{at}.broker", f"broker {new} already exists")
        st.exists.add(new)

    def plan(self, ctx: ActionContext, i: int, a: Action) -> Plan:
        base = event_base(i, a)
        new = ctx.added_broker(i)
        t0 = time.time()
        ctx.event(EVENT_BROKER_STARTING, {**base, "broker": new})
        ctx.cluster.start_broker(new, timeout=60)
        ctx.event(EVENT_BROKER_STARTED, {**base, "broker": new, "seconds": time.time() - t0})
        return rebalance_plan(ctx.metadata(), ctx.cluster.broker_ids(), new)


class DrainBroker(MoveSpec):
    kind = "drain_broker"
    description = "Move every replica off a broker onto the other brokers (or onto `to`)."
    required = frozenset({"broker"})
    optional = frozenset({"to", "concurrency"})  # to default: every other broker

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        st.check_broker(at, a.broker)
        targets = a.to if a.to is not None else sorted(st.exists - {a.broker})
        for b in targets:
            if b not in st.exists:
                raise field_error(f"{at}.to", f"broker {b} does not exist (brokers: {sorted(st.exists)})")
        if a.broker in targets:
            raise field_error(f"{at}.to", f"cannot drain broker {a.broker} onto itself")
        if len(set(targets)) < st.max_rf:
            raise field_error(f"{at}.to", f"{len(set(targets))} target broker(s) cannot hold "
                                          f"replication factor {st.max_rf}")

    def plan(self, ctx: ActionContext, i: int, a: Action) -> Plan:
        return drain_plan(ctx.metadata(), ctx.cluster.broker_ids(), a.broker, a.to)


SPECS = (Reassign(), MoveSet(), AddBrokerAndRebalance(), DrainBroker())
