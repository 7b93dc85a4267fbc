"""Actions on the emulated network (they need network.link_rate): a broker's link cut and restored
(its process keeps running: no controller, peers, object store or clients), and any link's rate
changed while traffic flows."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.history.names import EVENT_ACTION_START, NODE_CLIENT, NODE_CONTROLLER, NODE_OBJSTORE, broker_node
from bench.scenario.actions.spec import (
    FAULT_SHADE,
    ActionSpec,
    BrokerAction,
    Needs,
    TimelineState,
    broker_error,
    event_base,
)
from bench.scenario.errors import field_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ActionContext, ClusterControl

LINK_NODES = (NODE_CONTROLLER, NODE_OBJSTORE, NODE_CLIENT)  # set_link_rate's `node`; brokers go by `broker`
LINKS = Needs(launched=True, links=True)


class IsolateBroker(BrokerAction):
    kind = "isolate_broker"
    description = "Cut a broker's link: its process runs on, cut off from everyone (emulated links)."
    recovery = "heal_broker"
    needs = LINKS
    shade = FAULT_SHADE

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker in st.isolated:
            raise broker_error(at, f"broker {broker} is already isolated")
        st.isolated.add(broker)

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.isolate_broker(a.broker)

    def link_node(self, a: Action) -> str | None:
        return broker_node(a.broker)


class HealBroker(BrokerAction):
    kind = "heal_broker"
    description = "Restore an isolated broker's link."
    needs = LINKS

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker not in st.isolated:
            raise broker_error(at, f"broker {broker} is not isolated (isolate it first)")
        st.isolated.discard(broker)

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.heal_broker(a.broker)

    def link_node(self, a: Action) -> str | None:
        return broker_node(a.broker)


class SetLinkRate(ActionSpec):
    kind = "set_link_rate"
    description = ("Change the rate of one link (a broker's, or the controller's, the object store's or the "
                   "clients') while traffic flows.")
    required = frozenset({"rate"})
    optional = frozenset({"broker", "node"})  # exactly one of them
    needs = LINKS

    def check_fields(self, a: Action) -> None:
        if (a.broker is None) == (a.node is None):
            raise field_error("broker", "set_link_rate: give either broker (a broker's link) or node "
                                        f"({', '.join(LINK_NODES)}), not both or neither")

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if a.node == NODE_OBJSTORE and not st.has_object_store:
            raise field_error(f"{at}.node", f"system {st.system_kind!r} has no object store")
        if a.broker is not None:
            st.check_broker(at, a.broker)

    def link_node(self, a: Action) -> str | None:
        return a.node if a.node is not None else broker_node(a.broker)

    def execute(self, ctx: ActionContext, i: int, a: Action) -> None:
        # The link_sample events carry the rate in force at each sample.
        node = self.link_node(a)
        old = ctx.cluster.link_rate(node)
        ctx.event(EVENT_ACTION_START, {**event_base(i, a), "node": node, "rate": a.rate, "previous_rate": old})
        ctx.cluster.set_link_rate(node, a.rate)
        ctx.finish(i, a, f"{node} link {old} -> {a.rate}", node=node, rate=a.rate)

    def label(self, a: Action) -> str:
        return f"{self.link_node(a)} link -> {a.rate}"


SPECS = (IsolateBroker(), HealBroker(), SetLinkRate())
