"""The object store stopped and started again (a system whose profile has one; every partition
depends on it). A restart reuses its port, data and credentials."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.scenario.actions.spec import FAULT_SHADE, Needs, ProcessAction, TimelineState, kind_error

if TYPE_CHECKING:
    from bench.scenario.actions import Action
    from bench.scenario.actions.context import ClusterControl


class StopObjectStore(ProcessAction):
    kind = "stop_object_store"
    description = "Stop the object store (a system that has one); every partition depends on it."
    recovery = "start_object_store"
    needs = Needs(launched=True, object_store=True)
    shade = FAULT_SHADE

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if st.store_stopped:
            raise kind_error(at, "stop_object_store: the object store is already stopped")
        st.store_stopped = True

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.stop_object_store()


class StartObjectStore(ProcessAction):
    kind = "start_object_store"
    description = "Start the stopped object store again (same port, data and credentials)."
    needs = Needs(launched=True, object_store=True)

    def validate(self, a: Action, at: str, i: int, st: TimelineState) -> None:
        if not st.store_stopped:
            raise kind_error(at, "start_object_store: the object store is not stopped (stop it first)")
        st.store_stopped = False

    def act(self, cluster: ClusterControl, a: Action) -> None:
        cluster.start_object_store(timeout=60)


SPECS = (StopObjectStore(), StartObjectStore())
