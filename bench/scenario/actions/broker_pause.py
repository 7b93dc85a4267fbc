"""A broker frozen (SIGSTOP: its sockets stay open, nothing answers) and thawed (SIGCONT): split
brain when the cluster replaces it meanwhile."""
from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from bench.scenario.actions.spec import FAULT_SHADE, BrokerAction, Needs, TimelineState, broker_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ClusterControl


class PauseBroker(BrokerAction):
    kind = "pause_broker"
    description = "Freeze a broker (SIGSTOP): its sockets stay open but nothing answers."
    recovery = "resume_broker"
    needs = Needs(command=True)
    shade = FAULT_SHADE

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker in st.dead or broker in st.paused:
            raise broker_error(at, f"broker {broker} is already {'dead' if broker in st.dead else 'paused'}")
        st.paused.add(broker)

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.signal_broker(self.kind, a.broker, signal.SIGSTOP)


class ResumeBroker(BrokerAction):
    kind = "resume_broker"
    description = "Let a paused broker run again (SIGCONT)."
    needs = Needs(command=True)

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker not in st.paused:
            raise broker_error(at, f"broker {broker} is not paused (pause it first)")
        st.paused.discard(broker)

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.signal_broker(self.kind, a.broker, signal.SIGCONT)


SPECS = (PauseBroker(), ResumeBroker())
