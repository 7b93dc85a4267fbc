"""kill -9 of a broker, and its restart (on its old port: clients keep their bootstrap list)."""
from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from bench.scenario.actions.spec import FAULT_SHADE, BrokerAction, Needs, TimelineState, broker_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ClusterControl


class KillBroker(BrokerAction):
    kind = "kill_broker"
    description = "kill -9 a broker's process (on a cluster the harness does not start: system.commands.kill_broker)."
    recovery = "restart_broker"
    needs = Needs(command=True)
    shade = FAULT_SHADE

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker in st.dead:
            raise broker_error(at, f"broker {broker} is already dead")
        st.dead.add(broker)
        st.paused.discard(broker)  # kill -9 of a frozen process is a kill

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.signal_broker(self.kind, a.broker, signal.SIGKILL)


class RestartBroker(BrokerAction):
    kind = "restart_broker"
    description = "Start a killed broker again on its old port; done when clients can reach it again."
    needs = Needs(command=True)

    def change(self, broker: int, at: str, st: TimelineState) -> None:
        if broker not in st.dead:
            raise broker_error(at, f"broker {broker} is not dead (kill it first)")
        st.dead.discard(broker)

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.restart_broker(a.broker, timeout=60)


SPECS = (KillBroker(), RestartBroker())
