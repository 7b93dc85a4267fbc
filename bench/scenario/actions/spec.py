"""What one action kind is (as Jepsen's nemesis packages a fault: what it does, when it is allowed,
what heals it, how plots mark it): an :class:`ActionSpec` subclass, one instance per kind in the
registry (``bench/scenario/actions/__init__.py``).

A spec says

* its fields: ``required`` and ``optional`` names of the action's fields (besides ``at_s`` and
  ``kind``), and :meth:`ActionSpec.check_fields` for rules between them;
* ``recovery``: for a fault, the action that undoes it (its outage window runs until then);
* ``needs``: a cluster the harness starts, a shell command on one it does not, the emulated links,
  an object store (:class:`Needs`; checked for every kind alike);
* :meth:`ActionSpec.validate`: its rules against the cluster as the timeline has left it so far
  (:class:`TimelineState`: brokers existing, dead, paused, isolated; controller dead; object store
  stopped; the initial placement), updating that state;
* :meth:`ActionSpec.execute`: what it does at run time, through an
  :class:`~bench.scenario.actions.context.ActionContext`;
* ``description`` (one line for the docs), :meth:`ActionSpec.label` and ``shade`` (how figures
  mark it on a time axis).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from bench.history.names import EVENT_ACTION_START
from bench.scenario.actions.plans import Metadata, PartitionMove, partitions_on
from bench.scenario.errors import field_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ActionContext, ClusterControl


@dataclass(frozen=True)
class Needs:
    """What an action kind needs of the scenario's cluster."""

    launched: bool = False  # a cluster the harness starts (it acts on its processes or links)
    command: bool = False  # on a cluster the harness does not start: system.commands.<kind>
    links: bool = False  # the emulated links (network.link_rate)
    object_store: bool = False  # a system whose profile has an object store


@dataclass(frozen=True)
class Shade:
    """How figures mark an action on a time axis: ``span`` shades it from start to end (a move),
    ``line`` draws a dotted line where it starts (a fault)."""

    style: Literal["span", "line"]
    color: str


MOVE_SHADE = Shade("span", "#f4d03f")
FAULT_SHADE = Shade("line", "#c0392b")


class TimelineState:
    """The cluster as the scenario's actions leave it, action after action (what the validator
    checks each action against). ``placement``: topic -> partition -> replicas, at the start and then
    as each move leaves them (empty while the replication factor is the cluster's, unknown until it
    is asked)."""

    def __init__(self, *, brokers: int, topics: dict[str, int], placement: dict[str, dict[int, list[int]]],
                 known_rf: bool, max_rf: int, added: dict[int, int], system_kind: str, single_owner: bool,
                 has_object_store: bool) -> None:
        self.exists = set(range(1, brokers + 1))
        self.dead: set[int] = set()
        self.paused: set[int] = set()
        self.isolated: set[int] = set()
        self.controller_dead = False
        self.store_stopped = False
        self.topics = topics  # name -> partitions
        self.placement = placement
        self.known_rf = known_rf
        self.max_rf = max_rf
        self.added = added  # action index -> the broker id it adds
        self.system_kind = system_kind
        self.single_owner = single_owner
        self.has_object_store = has_object_store

    def check_broker(self, at: str, broker: int) -> None:
        if broker not in self.exists:
            raise field_error(f"{at}.broker", f"broker {broker} does not exist (brokers: {sorted(self.exists)})")

    def check_topic(self, at: str, topic: str) -> int:
        if topic not in self.topics:
            raise field_error(f"{at}.topic", f"unknown topic {topic!r} (not in workload.topics)")
        return self.topics[topic]

    def check_move(self, at: str, topic: str, partition: int, to: list[int]) -> None:
        n = self.check_topic(at, topic)
        if partition >= n:
            raise field_error(f"{at}.partition", f"topic {topic!r} has partitions 0..{n - 1}, not {partition}")
        missing = [b for b in to if b not in self.exists]
        if missing:
            raise field_error(f"{at}.to", f"broker {missing[0]} does not exist (brokers: {sorted(self.exists)})")
        if len(set(to)) != len(to):
            raise field_error(f"{at}.to", "lists a broker more than once")
        if self.single_owner and len(to) != 1:
            raise field_error(f"{at}.to", f"{self.system_kind} system: a partition is owned by exactly one broker; "
                                          f"give one target broker, not {len(to)}")
        if self.known_rf:  # later actions see the partition where this one left it
            self.placement.setdefault(topic, {})[partition] = list(to)


def event_base(i: int, a: Action) -> dict[str, Any]:
    """The fields every action_start / action_end of action ``i`` carries."""
    return {"action_id": i, "action": a.kind, "at_s": a.at_s}


class ActionSpec(ABC):
    kind: ClassVar[str]
    description: ClassVar[str]  # one line, for the docs
    required: ClassVar[frozenset[str]] = frozenset()
    optional: ClassVar[frozenset[str]] = frozenset()
    recovery: ClassVar[str | None] = None  # a fault: the action kind that undoes it
    needs: ClassVar[Needs] = Needs()
    shade: ClassVar[Shade | None] = None
    is_move: ClassVar[bool] = False  # moves partitions (its window: request to the last move seen)
    adds_broker: ClassVar[bool] = False

    def check_fields(self, a: Action) -> None:
        """Rules between this kind's fields, beyond required / optional (raise field_error)."""

    def refusal_unlaunched(self, system_kind: str) -> str:
        """Why a cluster the harness does not start cannot have this action (``needs.launched``)."""
        return (f"{self.kind}: acts on processes or links of a cluster the harness starts itself; "
                f"system {system_kind!r} is a cluster it does not start")

    @abstractmethod
    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        """Check action ``i`` (path ``at``) against the state the earlier actions left; update it."""

    @abstractmethod
    def execute(self, ctx: ActionContext, i: int, a: Action) -> None:
        """Carry out action ``i`` between its action_start and action_end."""

    def moves(self, a: Action, placement: dict[str, dict[int, list[int]]] | None) -> list[PartitionMove]:
        """The partition moves the action names itself (empty for a plan made at run time)."""
        return []

    def link_node(self, a: Action) -> str | None:
        """The launcher's name of the node whose link the action changes, if any."""
        return None

    def label(self, a: Action) -> str:
        """What the live display and figures call the action ("kill broker 2")."""
        return a.kind.replace("_", " ") + (f" {a.broker}" if a.broker is not None else "")


class ProcessAction(ActionSpec):
    """A fault or a recovery on the cluster's processes or links: :meth:`act` on the cluster,
    between action_start and action_end (a restart's action_end is when it serves again). A
    fault's action_start names the partitions it affects (the checkers' outage window is per
    affected partition); a recovery only names its broker, if any."""

    @abstractmethod
    def act(self, cluster: ClusterControl, a: Action) -> None:
        """What the action does to the cluster."""

    def execute(self, ctx: ActionContext, i: int, a: Action) -> None:
        who = {"broker": a.broker} if a.broker is not None else {}
        start = dict(event_base(i, a), **who)
        if self.recovery is not None:
            start["partitions"] = [{"topic": t, "partition": p} for t, p in affected_partitions(ctx, a.broker)]
        ctx.event(EVENT_ACTION_START, start)
        self.act(ctx.cluster, a)
        ctx.finish(i, a, self.label(a), **who)


def affected_partitions(ctx: ActionContext, broker: int | None) -> list[tuple[str, int]]:
    """A broker fault affects the partitions with a replica on (or led by) the broker, as the
    client sees them now, and those a running move takes from it or brings to it (mid-move the
    metadata may show neither the closing source nor the target that does not serve yet); every
    partition depends on the controller and the object store."""
    if broker is None:
        return ctx.partitions()
    moving = {tp for plan in ctx.moving().values() for tp, brokers in plan.items() if broker in brokers}
    md: Metadata = ctx.metadata()
    return sorted(set(partitions_on(md, broker)) | moving)


class BrokerAction(ProcessAction):
    """A fault or recovery of one existing broker (``broker``)."""

    required: ClassVar[frozenset[str]] = frozenset({"broker"})

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        st.check_broker(at, a.broker)
        self.change(a.broker, at, st)

    @abstractmethod
    def change(self, broker: int, at: str, st: TimelineState) -> None:
        """Check the action against the broker's state so far and update it."""


def broker_error(at: str, reason: str) -> Exception:
    return field_error(f"{at}.broker", reason)


def kind_error(at: str, reason: str) -> Exception:
    return field_error(f"{at}.kind", reason)

