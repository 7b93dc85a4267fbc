"""Cluster launcher: a controller and N brokers as OS processes on 127.0.0.1, or, with a link
rate, each in its own network namespace on a shaped link (bench/run/network.py).

`Cluster.start()` waits until every broker is registered and unfenced, then
writes DIR/cluster.json (bootstrap, and id/host/port/pid of every process);
`Cluster.load(DIR)` gives the same object back from another process, so
`stop` works from the CLI. Processes are stopped by PID only, and a PID is
only signalled if it is still the process this launcher started (its command
line names this cluster's directory). With a network, `stop` also removes it, and
`cluster.json` records every node's namespace, address and link rate.

With an object-store latency (`object_store_latency`, bench/latency.py) a delaying proxy
(bench/run/objstore_proxy.py) runs next to the object store - in its namespace with links, else
on 127.0.0.1 - and the nodes get the proxy's endpoint as `s3.endpoint`; it is started and stopped
with the object store (so the objstore-down fault still refuses connections) and recorded in
cluster.json (`object_store_proxy`).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from dataclasses import asdict

from bench.history.names import NODE_CLIENT, NODE_CONTROLLER, NODE_OBJSTORE, NODE_OBJSTORE_PROXY, broker_node
from bench.latency import Latency, emulated
from bench.run import network as net
from bench.run.network import Network, NetworkError
from systems.core import process
from systems.core.process import Proc, ProcessError, alive
from systems.core.profile import ServiceContext, ServiceHandle
from systems.core.rpc import RpcError, RpcUnavailable, call_sync
from systems.registry import UnknownSystem, profile

HOST = "127.0.0.1"


class ClusterError(Exception):
    """The cluster could not be started or reached; the message says why."""


class Cluster:
    """A cluster this launcher starts; also the cluster-control interface actions use
    (bench/scenario/actions/context.py: ClusterControl)."""

    launched = True  # its processes are the harness's: it kills, pauses, restarts, adds; it keeps journals

    def __init__(self, system: str, brokers: int, directory: str, config: dict | None = None,
                 controller_config: dict | None = None, link_rate: str | None = None,
                 object_store_link_rate: str | None = None, client_link_rate: str | None = None,
                 object_store_latency: str | dict | None = None):
        try:
            self.profile = profile(system)
        except UnknownSystem as e:
            raise ClusterError(str(e)) from None
        if not self.profile.launched:
            raise ClusterError(f"system {system!r} is a cluster someone else runs: the harness does not start it "
                               f"(name its bootstrap in the scenario's system section)")
        if brokers < 1:
            raise ClusterError("a cluster needs at least one broker")
        self.system = system
        self.n_brokers = brokers
        self.dir = os.path.abspath(directory)
        self.config = dict(config or {})
        self.controller_config = dict(controller_config or {})
        self.controller: Proc | None = None
        self.brokers: dict[int, Proc] = {}
        self.object_store: Proc | None = None  # the profile's object store, if it started one
        self.object_store_info: dict = {}
        self._object_store_handle: ServiceHandle | None = None
        # the latency the nodes see from the object store (None: none emulated) and its proxy
        self.object_store_latency: Latency | None = None
        self.object_store_proxy: Proc | None = None
        if object_store_latency is not None:
            try:
                self.object_store_latency = emulated(object_store_latency)
            except ValueError as e:
                raise ClusterError(f"--object-store-latency: {e}") from None
            if self.object_store_latency is not None and self.profile.object_store is None:
                raise ClusterError(f"--object-store-latency: system {system!r} has no object store")
            secure = str(self.config.get("s3.secure", "")).lower() in ("1", "true", "yes")
            if self.object_store_latency is not None and secure:
                raise ClusterError("--object-store-latency needs a plain-HTTP object store (s3.secure=true: the "
                                   "nodes would check the store's TLS certificate against the proxy's address)")
        self.network: Network | None = None
        if link_rate is None and (object_store_link_rate or client_link_rate):
            raise ClusterError("--object-store-link-rate and --client-link-rate need --link-rate")
        if link_rate is not None:
            nodes = [NODE_CONTROLLER, *(broker_node(b) for b in range(1, brokers + 1))]
            rates = {n: link_rate for n in nodes}
            rates[NODE_CLIENT] = client_link_rate or link_rate
            if self.profile.object_store is not None:
                nodes.append(NODE_OBJSTORE)
                rates[NODE_OBJSTORE] = object_store_link_rate or link_rate
            try:
                self.network = Network(self.dir, nodes, rates)
            except NetworkError as e:
                raise ClusterError(str(e)) from None

    # -- paths ----------------------------------------------------------------
    @property
    def logs_dir(self) -> str:
        return os.path.join(self.dir, "logs")

    @property
    def state_path(self) -> str:
        return os.path.join(self.dir, "cluster.json")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{p.host}:{p.port}" for _, p in sorted(self.brokers.items()))

    def host(self, name: str) -> str:
        """The address node `name` binds and advertises."""
        return self.network.node_address(name) if self.network else HOST

    # -- process control --------------------------------------------------------
    def _spawn(self, name: str, args: list[str], port_file: str, timeout: float,
               node: str | None = None) -> tuple[int, int, str]:
        """Start process `name` in node `node`'s namespace (default: its own)."""
        log_path = os.path.join(self.logs_dir, f"{name}.log")
        prefix = self.network.exec_prefix(node or name) if self.network else ()
        try:
            pid, port = process.spawn_module(args, log_path=log_path, cwd=self.dir, port_file=port_file,
                                             timeout=timeout, name=name, prefix=prefix)
        except ProcessError as e:
            raise ClusterError(str(e)) from None
        # For an operator's own tools (`kill -9 $(cat DIR/run/broker-2.pid)`), as a service's pid file.
        with open(os.path.join(self.dir, "run", f"{name}.pid"), "w") as f:
            f.write(f"{pid}\n")
        return pid, port, log_path

    def _controller_args(self, port: int = 0) -> list[str]:
        d = os.path.join(self.dir, "controller")
        args = ["systems.core.controller", "--dir", d, "--host", self.host("controller"), "--port", str(port),
                "--port-file", os.path.join(self.dir, "run", "controller.port"),
                "--config", json.dumps({**self.config, **self.controller_config})]
        if self.profile.controller_extension:
            args += ["--extension", self.profile.controller_extension]
        return args

    def _broker_args(self, bid: int, port: int = 0) -> list[str]:
        return ["systems.core.broker", "--id", str(bid), "--backend", self.profile.backend,
                "--dir", os.path.join(self.dir, f"broker-{bid}"), "--controller",
                f"{self.controller.host}:{self.controller.port}", "--host", self.host(broker_node(bid)),
                "--port", str(port),
                "--port-file", os.path.join(self.dir, "run", f"broker-{bid}.port"),
                "--config", json.dumps(self.config)]

    def start(self, timeout: float = 60.0) -> "Cluster":
        if os.path.exists(self.state_path):
            other = Cluster.load(self.dir)
            if any(other.status()["processes"].values()) or other.object_store_running() or other.proxy_running():
                raise ClusterError(f"a cluster is already running in {self.dir}; stop it first")
            if other.network is not None:  # left behind by a harness that was killed
                other.network.destroy()
        os.makedirs(os.path.join(self.dir, "run"), exist_ok=True)
        try:
            if self.network is not None:
                self.network.create()
                self.save()  # from here on cluster.json names the network, for stop and clean
            self.start_object_store(timeout)
            self.start_controller(timeout)
            self._start_brokers(list(range(1, self.n_brokers + 1)), timeout)
            self.wait_ready(timeout)
            self.check_routes()
        except NetworkError as e:
            self.stop()
            raise ClusterError(str(e)) from None
        except BaseException:
            self.stop()
            raise
        return self

    def start_controller(self, timeout: float = 60.0, port: int = 0) -> Proc:
        args = self._controller_args(port)
        pid, port, log_path = self._spawn("controller", args, os.path.join(self.dir, "run", "controller.port"),
                                          timeout)
        self.controller = Proc(0, self.host("controller"), port, pid, log_path, args)
        self.save()
        return self.controller

    def start_broker(self, bid: int, timeout: float = 60.0, wait: bool = True, port: int = 0) -> Proc:
        name = broker_node(bid)
        if self.network is not None and name not in self.network.nodes:
            # a broker added at run time gets the same link as the brokers started with the cluster
            try:
                self.network.add_node(name)
            except NetworkError as e:
                raise ClusterError(str(e)) from None
            self.save()
        args = self._broker_args(bid, port)
        pid, port, log_path = self._spawn(name, args, os.path.join(self.dir, "run", f"broker-{bid}.port"),
                                          timeout)
        self.brokers[bid] = Proc(bid, self.host(name), port, pid, log_path, args)
        self.save()
        if wait:
            self.wait_ready(timeout, [bid])
        return self.brokers[bid]

    def _start_brokers(self, ids: list[int], timeout: float) -> None:
        """Start the brokers ``ids`` at once, each on a port of its choosing: their Python
        start-ups (~0.5 s each, mostly imports) overlap instead of following one another. Every
        broker that did start is recorded (so ``stop`` finds it) before the first failure is
        raised."""
        started: dict[int, Proc] = {}
        errors: list[BaseException] = []
        lock = threading.Lock()

        def one(bid: int) -> None:
            name = broker_node(bid)
            args = self._broker_args(bid)
            try:
                pid, port, log_path = self._spawn(name, args, os.path.join(self.dir, "run", f"broker-{bid}.port"),
                                                  timeout)
            except BaseException as e:  # noqa: BLE001 - raised below, after the others are recorded
                with lock:
                    errors.append(e)
                return
            with lock:
                started[bid] = Proc(bid, self.host(name), port, pid, log_path, args)

        threads = [threading.Thread(target=one, args=(bid,), name=f"start-broker-{bid}", daemon=True) for bid in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.brokers.update(sorted(started.items()))
        self.save()
        if errors:
            raise errors[0]

    def check_routes(self) -> None:
        """Traffic from this (root) namespace to every broker must leave through the cluster's
        own client link; NetworkError otherwise."""
        if self.network is None:
            return
        for p in self.brokers.values():
            self.network.check_route(p.host)

    def describe(self) -> dict:
        return call_sync(self.controller.host, self.controller.port, "describe", timeout=5)

    def wait_ready(self, timeout: float = 60.0, ids: list[int] | None = None) -> None:
        """Wait until the given brokers (default: all) are registered and unfenced."""
        ids = list(self.brokers) if ids is None else ids
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                d = self.describe()
                state = {b["id"]: b for b in d["brokers"]}
                missing = [i for i in ids if i not in state or state[i]["fenced"]
                           or state[i]["port"] != self.brokers[i].port]
                if not missing:
                    return
                last = f"brokers not serving yet: {missing}"
            except (RpcUnavailable, RpcError, OSError) as e:
                last = f"controller not answering: {e}"
            for i in ids:
                p = self.brokers[i]
                if not alive(p.pid, self.dir):
                    raise ClusterError(f"broker {i} died during start-up; last lines of {p.log}:\n{process.tail(p.log)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"cluster not ready after {timeout:.0f}s: {last}")
            time.sleep(0.1)

    def signal_broker(self, kind: str, bid: int, sig: int) -> None:
        """``sig`` to the broker's process, only while its PID is still this cluster's broker
        (SIGKILL: returns once it is gone); ``kind`` names the action for the error."""
        p = self.brokers[bid]
        if not process.send_signal(p.pid, self.dir, sig):
            if sig == signal.SIGKILL:
                return  # already gone: killed
            raise ClusterError(f"{kind.replace('_', ' ')}: broker {bid} is not running (pid {p.pid})")
        if sig == signal.SIGKILL:
            process.wait_gone(p.pid, self.dir)

    def kill_broker(self, bid: int) -> None:
        self.signal_broker("kill_broker", bid, signal.SIGKILL)

    def restart_broker(self, bid: int, timeout: float = 60.0) -> Proc:
        """Start a stopped broker again on its old port (clients keep their bootstrap list)."""
        old = self.brokers[bid]
        if alive(old.pid, self.dir):
            raise ClusterError(f"broker {bid} is still running (pid {old.pid})")
        return self.start_broker(bid, timeout=timeout, port=old.port)


    def _link(self, name: str) -> Network:
        if self.network is None:
            raise ClusterError(f"{name} has no link of its own: the cluster runs without --link-rate")
        return self.network

    def isolate_broker(self, bid: int) -> None:
        """Cut the broker's link (its process keeps running): no controller, peers, object store
        or clients."""
        self._link(broker_node(bid)).set_up(broker_node(bid), False)

    def heal_broker(self, bid: int) -> None:
        self._link(broker_node(bid)).set_up(broker_node(bid), True)

    def link_rate(self, name: str) -> str | None:
        """The rate of node `name`'s link now (None: no emulated links)."""
        return self.network.rates.get(name) if self.network is not None else None

    def set_link_rate(self, name: str, rate: str) -> None:
        """Change the rate of one node's link (`broker-N`, `controller`, `objstore`, `client`)
        while traffic flows."""
        try:
            self._link(name).set_rate(name, rate)
        except NetworkError as e:
            raise ClusterError(str(e)) from None
        self.save()

    def kill_controller(self, sig: int = signal.SIGKILL) -> None:
        if process.send_signal(self.controller.pid, self.dir, sig) and sig == signal.SIGKILL:
            process.wait_gone(self.controller.pid, self.dir)

    def restart_controller(self, timeout: float = 60.0) -> Proc:
        if alive(self.controller.pid, self.dir):
            raise ClusterError("controller is still running")
        return self.start_controller(timeout, port=self.controller.port)

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process by its PID, SIGTERM then SIGKILL after ``grace`` seconds: the
        brokers first, all at once (a shared broker's clean close still reaches the controller
        and the object store), then the controller, then the object store and its proxy (so no
        client of the store is still connected when the proxy counts what is left open); then
        remove the network. Safe to repeat."""
        _stop_all([p.pid for p in self.brokers.values()], self.dir, grace)
        _stop_all([self.controller.pid] if self.controller else [], self.dir, grace)
        self.stop_object_store(grace)
        if self.network is not None:
            self.network.destroy()

    def extra_processes(self) -> list[Proc]:
        """Processes besides controller and brokers (the profile's services)."""
        return [self.object_store] if self.object_store is not None else []

    def processes(self) -> list[tuple[str, int]]:
        """(name, pid) of every process of the cluster (the runner samples their CPU and memory)."""
        out = [(NODE_CONTROLLER, self.controller.pid)] if self.controller is not None else []
        out += [(broker_node(b), p.pid) for b, p in sorted(self.brokers.items())]
        out += [(f"extra-{p.id}", p.pid) for p in self.extra_processes()]
        if self.object_store_proxy is not None:
            out.append((NODE_OBJSTORE_PROXY, self.object_store_proxy.pid))
        return out

    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def prepare_topics(self, names: list[str]) -> None:
        """Nothing to check: a cluster this launcher started for the run holds no other topics."""

    def prepare_groups(self, ids: list[str]) -> None:
        """Nothing to clean up later: the cluster goes with the run."""

    # -- the profile's object store --------------------------------------------------------------
    def start_object_store(self, timeout: float = 60.0) -> None:
        """Start the profile's object store (or take the configured endpoint), then its latency
        proxy, if any. A restart reuses their ports, the store's data and credentials."""
        svc = self.profile.object_store
        if svc is None:
            return
        if self.object_store_latency is not None and self.object_store_info.get("endpoint"):
            # A restart: the service is told its own endpoint (the nodes' is the proxy's).
            self.config["s3.endpoint"] = self.object_store_info["endpoint"]
        ctx = ServiceContext(dir=self.dir, logs_dir=self.logs_dir, host=self.host(NODE_OBJSTORE), config=self.config,
                             previous=self.object_store_info, timeout=timeout)
        # The service starts its own process: from a thread inside the object store's namespace,
        # so the process (and the launcher's readiness check) live there.
        handle = self.network.run_in(NODE_OBJSTORE, lambda: svc.start(ctx)) if self.network else svc.start(ctx)
        self._object_store_handle = handle
        self.config.update(handle.config)
        self.object_store = handle.proc
        self.object_store_info = handle.info
        self.save()
        if self.object_store_latency is not None:
            self._start_proxy(timeout)

    @property
    def proxy_port_file(self) -> str:
        return os.path.join(self.dir, "run", f"{NODE_OBJSTORE_PROXY}.port")

    @property
    def proxy_stats_file(self) -> str:
        """The proxy's counters (bench/run/objstore_proxy.py), rewritten every second."""
        return os.path.join(self.dir, "run", f"{NODE_OBJSTORE_PROXY}.stats.json")

    def _start_proxy(self, timeout: float) -> None:
        """The delaying proxy next to the object store, on its old port after a restart; the
        nodes' `s3.endpoint` becomes the proxy's."""
        upstream = self.object_store_info.get("endpoint")
        if not upstream:
            raise ClusterError("the object store named no endpoint: nothing to put a latency in front of")
        host = self.host(NODE_OBJSTORE)
        port = self.object_store_proxy.port if self.object_store_proxy is not None else 0
        args = ["bench.run.objstore_proxy", "--listen", f"{host}:{port}", "--upstream", upstream,
                "--latency", self.object_store_latency.text, "--port-file", self.proxy_port_file,
                "--stats-file", self.proxy_stats_file]
        pid, port, log_path = self._spawn(NODE_OBJSTORE_PROXY, args, self.proxy_port_file, min(timeout, 30),
                                          node=NODE_OBJSTORE)
        self.object_store_proxy = Proc(0, host, port, pid, log_path, args)
        self.config["s3.endpoint"] = f"{host}:{port}"
        self.save()

    def _stop_proxy(self, grace: float) -> None:
        if self.object_store_proxy is not None:
            process.stop(self.object_store_proxy.pid, self.dir, grace)

    def proxy_running(self) -> bool:
        return self.object_store_proxy is not None and alive(self.object_store_proxy.pid, self.dir)

    def stop_object_store(self, grace: float = 10.0) -> None:
        """Stop the latency proxy (new connections are refused, open ones closed, as by a stopped
        store), then the object store."""
        self._stop_proxy(grace)
        if self._object_store_handle is not None:
            self._object_store_handle.stop()
            self._object_store_handle = None
        elif self.object_store is not None:  # started by another process (cluster.json)
            process.stop(self.object_store.pid, self.dir, grace)

    def object_store_running(self) -> bool:
        return self.object_store is not None and alive(self.object_store.pid, self.dir)

    def status(self) -> dict:
        procs = {}
        if self.controller is not None:
            procs["controller"] = alive(self.controller.pid, self.dir)
        for bid, p in sorted(self.brokers.items()):
            procs[broker_node(bid)] = alive(p.pid, self.dir)
        out = {"processes": procs}
        if procs.get("controller"):
            try:
                out["controller"] = self.describe()
            except (RpcUnavailable, RpcError, OSError) as e:
                out["controller_error"] = str(e)
        return out

    # -- persistence ------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"system": self.system, "dir": self.dir, "bootstrap": self.bootstrap, "config": self.config,
                "controller_config": self.controller_config, "n_brokers": self.n_brokers,
                "controller": asdict(self.controller) if self.controller else None,
                "brokers": [asdict(p) for _, p in sorted(self.brokers.items())],
                "object_store": asdict(self.object_store) if self.object_store else None,
                "object_store_info": self.object_store_info,
                "object_store_latency": self.object_store_latency.value() if self.object_store_latency else None,
                "object_store_proxy": asdict(self.object_store_proxy) if self.object_store_proxy else None,
                "network": self.network.to_dict() if self.network else None}

    def save(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
        os.replace(tmp, self.state_path)

    @classmethod
    def load(cls, directory: str) -> "Cluster":
        path = os.path.join(os.path.abspath(directory), "cluster.json")
        try:
            with open(path) as f:
                d = json.load(f)
        except FileNotFoundError:
            raise ClusterError(f"no cluster.json in {directory}: nothing was started there") from None
        c = cls.__new__(cls)
        c.system, c.dir, c.n_brokers = d["system"], d["dir"], d["n_brokers"]
        try:
            c.profile = profile(c.system)
        except UnknownSystem as e:
            raise ClusterError(f"{path}: {e}") from None
        c._object_store_handle = None
        c.config, c.controller_config = d["config"], d.get("controller_config", {})
        c.controller = Proc(**d["controller"]) if d["controller"] else None
        c.brokers = {p["id"]: Proc(**p) for p in d["brokers"]}
        c.object_store = Proc(**d["object_store"]) if d.get("object_store") else None
        c.object_store_info = d.get("object_store_info") or {}
        c.object_store_latency = emulated(d.get("object_store_latency"))
        c.object_store_proxy = Proc(**d["object_store_proxy"]) if d.get("object_store_proxy") else None
        c.network = Network.from_dict(c.dir, d["network"]) if d.get("network") else None
        return c

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _stop_all(pids: list[int], marker: str, grace: float) -> None:
    """Stop several processes at once, each only while its PID is still ours (its command line
    names ``marker``): SIGCONT (a paused one would never see the SIGTERM) and SIGTERM to each,
    then SIGKILL to those still running ``grace`` seconds later (as ``process.stop``, for many)."""
    running = [pid for pid in pids if process.send_signal(pid, marker, signal.SIGCONT)]
    for pid in running:
        process.send_signal(pid, marker, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = [pid for pid in running if not process.wait_gone(pid, marker, max(0.0, deadline - time.monotonic()))]
    for pid in left:
        process.send_signal(pid, marker, signal.SIGKILL)
    for pid in left:
        process.wait_gone(pid, marker, 5.0)


RUN_POINTER = "cluster.path"  # in a run directory: the cluster directory the run works in


def clean(directory: str, grace: float = 5.0) -> list[str]:
    """Remove what a cluster in `directory` left behind, even after kill -9 of the harness or
    without cluster.json: its processes (by the PIDs in cluster.json and those inside its
    namespaces or whose command line names the directory, each only while it still does), then
    its network objects (by name). Safe to repeat. -> the network names removed.

    `directory` may also be a run directory of `python -m bench run`: then the run's own
    processes (the load) go too, and the cluster directory it names (RUN_POINTER) is cleaned
    and, being the run's temporary copy, removed."""
    d = os.path.abspath(directory)
    pointer = os.path.join(d, RUN_POINTER)
    cluster_dir = None
    if not os.path.exists(os.path.join(d, "cluster.json")) and os.path.isfile(pointer):
        with open(pointer) as f:
            cluster_dir = f.read().strip()
    # Processes a harness killed mid-start never recorded: read them before stop() removes the
    # namespaces that show them.
    unrecorded = {pid: d for pid in [*net.pids(d), *process.find(d)]}
    if cluster_dir:
        unrecorded.update({pid: cluster_dir for pid in [*net.pids(cluster_dir), *process.find(cluster_dir)]})
    for target in filter(None, (d, cluster_dir)):
        try:
            Cluster.load(target).stop(grace)
        except (ClusterError, NetworkError, OSError, ValueError, KeyError, TypeError):
            pass  # no or unreadable cluster.json: nothing to stop by PID; the names still go below
    for pid, marker in sorted(unrecorded.items()):
        process.stop(pid, marker, grace)
    removed = net.clean(d)
    if cluster_dir:
        removed += net.clean(cluster_dir)
        shutil.rmtree(cluster_dir, ignore_errors=True)
    return removed
