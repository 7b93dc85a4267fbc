"""The scenario's actions: the registry of action kinds (:data:`SPECS`, one spec object per kind;
what a spec is: ``bench/scenario/actions/spec.py``), the :class:`Action` model every kind shares,
the tables other layers read (all derived from the registry), and the timeline's validation.

A new action kind is one spec (a module here, or a class in one, listed in :data:`SPECS`) and, if it
acts on processes, one method on the cluster-control implementations (``bench/run/cluster.py``,
``bench/run/external.py``; the interface: ``bench/scenario/actions/context.py``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import Field, model_validator

from bench.scenario.actions import broker_kill, broker_pause, controller_kill, links, moves, object_store
from bench.scenario.actions.links import LINK_NODES
from bench.scenario.actions.plans import PartitionMove
from bench.scenario.actions.spec import ActionSpec, TimelineState
from bench.scenario.errors import field_error
from bench.scenario.fields import BrokerId, Float, Model, TcRate

# In this order the kinds are listed in messages and system.commands' fields.
SPECS: dict[str, ActionSpec] = {s.kind: s for s in (
    *moves.SPECS, *broker_kill.SPECS, *broker_pause.SPECS, *controller_kill.SPECS, *object_store.SPECS,
    *links.SPECS)}

ActionKind = Literal[tuple(SPECS)]
MOVE_ACTIONS = frozenset(k for k, s in SPECS.items() if s.is_move)
# Each fault and the action that undoes it; a fault's outage window runs until recovery
# (bench/check/moves.py: check_unavailable_seconds).
FAULT_RECOVERY: dict[str, str] = {k: s.recovery for k, s in SPECS.items() if s.recovery is not None}
FAULT_ACTIONS = frozenset(FAULT_RECOVERY)
RECOVERY_ACTIONS = frozenset(FAULT_RECOVERY.values())
# Actions on the emulated network (they need network.link_rate).
NETWORK_ACTIONS = frozenset(k for k, s in SPECS.items() if s.needs.links)
# The actions a cluster the harness does not start takes as a shell command (system.commands).
COMMAND_FIELDS = tuple(k for k, s in SPECS.items() if s.needs.command)


class Action(Model):
    at_s: Annotated[Float, Field(ge=0)]
    kind: ActionKind
    # Start at at_s or once every earlier move has finished, whichever is later: moves one after
    # another on one cluster without a schedule padded for the slowest system.
    after_moves: bool = False
    topic: Optional[str] = None
    partition: Optional[Annotated[int, Field(strict=True, ge=0)]] = None
    to: Optional[Annotated[list[BrokerId], Field(min_length=1)]] = None
    # reassign: swap one broker of the partition's current replicas for another, the usual
    # production move ([1,2,3] -> [4,2,3] at replication factor 3, [1] -> [4] at 1).
    replace: Optional[BrokerId] = None
    by: Optional[BrokerId] = None
    broker: Optional[BrokerId] = None
    partitions: Optional[Annotated[list[PartitionMove], Field(min_length=1)]] = None
    node: Optional[Literal[LINK_NODES]] = None
    rate: Optional[TcRate] = None
    # Max partition moves in flight per broker (as source or target); the rest wait for a slot.
    concurrency: Optional[Annotated[int, Field(strict=True, ge=1)]] = None

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Action:
        spec = self.spec
        allowed = spec.required | spec.optional
        for f in type(self).model_fields:
            if f in ("at_s", "kind", "after_moves"):
                continue
            given = getattr(self, f) is not None
            if f in spec.required and not given:
                raise field_error(f, f"required for action kind {self.kind}")
            if f not in allowed and given:
                raise field_error(f, f"not used by action kind {self.kind}")
        spec.check_fields(self)
        return self

    @property
    def spec(self) -> ActionSpec:
        return SPECS[self.kind]

    @property
    def link_node(self) -> str | None:
        """The launcher's name of the node whose link a network action changes."""
        return self.spec.link_node(self)

    def moves(self, placement: dict[str, dict[int, list[int]]] | None = None) -> list[PartitionMove]:
        """Explicit partition moves of this action (reassign / move_set); empty otherwise. A
        ``replace`` move is resolved against ``placement`` (topic -> partition -> replicas)."""
        return self.spec.moves(self, placement)


def validate_actions(actions: list[Action], st: TimelineState, *, duration_s: float, launched: bool,
                     commands: Any, has_links: bool) -> None:
    """Every action in time order, within the load, what its kind needs there, then its own rules
    against the state the earlier ones left (raises field_error naming ``actions.<i>.<field>``)."""
    prev_at = 0.0
    for i, a in enumerate(actions):
        at = f"actions.{i}"
        if a.at_s >= duration_s:
            raise field_error(f"{at}.at_s", f"must be < workload.duration_s ({duration_s})")
        if a.at_s < prev_at:
            raise field_error(f"{at}.at_s", f"actions must be listed in time order ({a.at_s} < {prev_at})")
        prev_at = a.at_s
        spec = a.spec
        if not launched:
            if spec.needs.command and getattr(commands, a.kind, None) is None:
                raise field_error(f"{at}.kind", f"{a.kind}: needs system.commands.{a.kind} (a shell command; "
                                                f"{{broker}} is the broker id); system {st.system_kind!r} is a "
                                                f"cluster it does not start")
            if spec.needs.launched:
                raise field_error(f"{at}.kind", spec.refusal_unlaunched(st.system_kind))
        if spec.needs.links and not has_links:
            raise field_error(f"{at}.kind", f"{a.kind}: needs network.link_rate (it acts on the emulated links)")
        if spec.needs.object_store and not st.has_object_store:
            raise field_error(f"{at}.kind", f"{a.kind}: system {st.system_kind!r} has no object store")
        spec.validate(a, at, i, st)


__all__ = [
    "Action", "ActionKind", "COMMAND_FIELDS", "FAULT_ACTIONS", "FAULT_RECOVERY", "LINK_NODES", "MOVE_ACTIONS",
    "NETWORK_ACTIONS", "PartitionMove", "RECOVERY_ACTIONS", "SPECS", "TimelineState", "validate_actions",
]
