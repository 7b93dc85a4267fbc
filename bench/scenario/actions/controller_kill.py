"""kill -9 of the controller (every partition depends on it), and its restart."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.scenario.actions.spec import FAULT_SHADE, Needs, ProcessAction, TimelineState, kind_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ClusterControl


class KillController(ProcessAction):
    kind = "kill_controller"
    description = "kill -9 the controller; every partition depends on it."
    recovery = "restart_controller"
    needs = Needs(launched=True)
    shade = FAULT_SHADE

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if st.controller_dead:
            raise kind_error(at, "kill_controller: the controller is already dead")
        st.controller_dead = True

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.kill_controller()


class RestartController(ProcessAction):
    kind = "restart_controller"
    description = "Start the killed controller again on its old port."
    needs = Needs(launched=True)

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if not st.controller_dead:
            raise kind_error(at, "restart_controller: the controller is not dead (kill it first)")
        st.controller_dead = False

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.restart_controller(timeout=60)


SPECS = (KillController(), RestartController())
