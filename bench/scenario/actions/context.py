"""What an action acts through, as the scenario layer sees it: a run's :class:`ActionContext` and
the cluster's :class:`ClusterControl`. ``bench/run`` implements both (the launched cluster,
``bench/run/cluster.py``, and a cluster the harness does not start, ``bench/run/external.py``,
each implement ``ClusterControl``; ``bench/run/timeline.py`` the context), so this layer never
imports the runner."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from bench.scenario.actions.plans import Metadata, Plan

if TYPE_CHECKING:
    from bench.scenario.actions import Action


class ClusterControl(Protocol):
    """The operations actions carry out on a cluster. A method the cluster cannot do (a link on a
    cluster without emulated links, a process of a cluster the harness does not start) raises;
    the scenario validator refuses such actions before a run starts (the specs' ``needs``)."""

    # True: the harness started the cluster's processes (it can kill, pause, restart and add
    # brokers, shape links, and it keeps the processes' journals). False: a cluster someone else
    # runs, acted on only through the Kafka protocol and the scenario's shell commands.
    launched: bool

    def broker_ids(self) -> list[int]: ...

    def start_broker(self, bid: int, timeout: float = 60.0) -> Any: ...

    def signal_broker(self, kind: str, bid: int, sig: int) -> None:
        """Action ``kind`` on broker ``bid``'s process: the signal ``sig`` to its PID on a cluster
        the harness starts (SIGKILL: returns once the process is gone), the shell command
        ``system.commands.<kind>`` on one it does not. A new fault that is a signal to a broker
        needs no new method here."""

    def restart_broker(self, bid: int, timeout: float = 60.0) -> Any: ...

    def kill_controller(self) -> None: ...

    def restart_controller(self, timeout: float = 60.0) -> Any: ...

    def stop_object_store(self) -> None: ...

    def start_object_store(self, timeout: float = 60.0) -> None: ...

    def isolate_broker(self, bid: int) -> None: ...

    def heal_broker(self, bid: int) -> None: ...

    def link_rate(self, node: str) -> str | None:
        """The rate of node ``node``'s link now (None: no such link)."""

    def set_link_rate(self, node: str, rate: str) -> None: ...


class ActionContext(Protocol):
    """One run as its actions see it."""

    cluster: ClusterControl

    def event(self, name: str, detail: dict[str, Any], *, ts: float | None = None) -> None:
        """Append an event to the run's history."""

    def finish(self, i: int, a: Action, detail: str, **fields: Any) -> None:
        """Action ``i`` is done: its ``action_end`` (ok, with ``fields``) and its live status."""

    def metadata(self) -> Metadata:
        """Every partition's leader and replicas as a client sees them now."""

    def moving(self) -> dict[int, dict[tuple[str, int], set[int]]]:
        """Moves still running: action id -> {partition: its source and target brokers}."""

    def partitions(self) -> list[tuple[str, int]]:
        """Every partition of the workload."""

    def added_broker(self, i: int) -> int:
        """The id of the broker action ``i`` adds."""

    def carry_out(self, i: int, a: Action, plan: Plan, start: dict[str, Any]) -> None:
        """Request the plan's moves (admin API) and watch them to the end; ``start`` is added to
        the action's ``action_start``."""
