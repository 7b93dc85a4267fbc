"""A cluster's own network: every node (controller, brokers, object store) in a network namespace
on a shaped link to a bridge, and the root namespace (load, consumer, admin clients) on a shaped
client link to the same bridge.

Layout, for a cluster whose directory hashes to id `abc123` (names fit Linux's 15 characters):
- namespace `rbabc123-sw` holds the bridge `rbabc123-br` (the switch; it has no address);
- per node a namespace `rbabc123-<tag>` (`ctl`, `b1`, `b2`, ..., `os`) with `lo` up and the veth
  `rbabc123-<tag>`, whose peer `rbabc123-<tag>p` is a port of the bridge;
- the client veth `rbabc123-cl` in the root namespace (address .1), peer `rbabc123-clp` on the
  bridge; the root namespace reaches the cluster's /24 through it and nothing else.
Every veth end carries a tbf qdisc, so each link is shaped in both directions: the node-side end
shapes what the node sends, the bridge-side end what it receives.

Addresses: a /24 of the benchmarking range 198.18.0.0/15 (RFC 2544), chosen from the id and
checked against the root namespace's addresses and routes. Everything is found again by name, so
`clean(dir)` works from cluster.json alone or without it (after kill -9 of the harness).
"""
from __future__ import annotations

import ctypes
import hashlib
import ipaddress
import os
import re
import subprocess
import threading

from bench import units
from bench.history.names import BROKER_NODE_PREFIX, NODE_CLIENT, NODE_CONTROLLER, NODE_OBJSTORE

PREFIX = "rb"
RANGE = ipaddress.ip_network("198.18.0.0/15")
_CLONE_NEWNET = 0x40000000
# node -> (its tag in link and namespace names, its host number in the /24); brokers: bN, 10 + N
_FIXED = {NODE_CLIENT: ("cl", 1), NODE_CONTROLLER: ("ctl", 2), NODE_OBJSTORE: ("os", 3)}


class NetworkError(Exception):
    """The cluster's network could not be built, checked or removed; the message says why."""


def rate_bits(rate: str) -> float:
    """tc's rate syntax -> bits per second (bench.units.rate_bits); NetworkError if not a rate."""
    try:
        return units.rate_bits(rate)
    except ValueError as e:
        raise NetworkError(str(e)) from None


def tbf_args(rate: str) -> list[str]:
    """tbf settings for `rate`.

    burst: the bucket must hold at least one GSO super-packet (64 KiB: veth hands TCP's
    segmentation-offloaded packets to the qdisc whole, and a smaller bucket makes tbf split each
    one) and enough for the qdisc's timer granularity at high rates: 2 ms of the rate (250 KB at
    1gbit, 2.5 MB at 10gbit). At 100mbit 64 KiB is 5 ms of line time, a short burst.
    latency: 20 ms of queue at the rate before tbf drops, like a switch port's buffer; long
    enough that TCP keeps the link full, short enough that a full link shows up as added
    latency of tens of ms rather than seconds.
    """
    bits = rate_bits(rate)
    burst = max(64 * 1024, int(bits / 8 * 0.002))
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "20ms"]


def cluster_id(cluster_dir: str) -> str:
    return hashlib.sha256(os.path.abspath(cluster_dir).encode()).hexdigest()[:6]


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except FileNotFoundError:
        raise NetworkError(f"{cmd[0]} not found (iproute2 is needed for --link-rate)") from None
    except subprocess.TimeoutExpired:
        raise NetworkError(f"{' '.join(cmd)} did not finish within 20 s") from None
    if check and r.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r


def _root_links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    # "7: rbabc123-cl@if6: <...>" -> "rbabc123-cl"
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def pids(cluster_dir: str) -> list[int]:
    """PIDs of processes inside this cluster's namespaces (also ones a killed harness started
    but never recorded)."""
    stem = f"{PREFIX}{cluster_id(cluster_dir)}-"
    out = []
    for ns in _namespaces():
        if ns.startswith(stem):
            out += [int(p) for p in _run(["ip", "netns", "pids", ns], check=False).stdout.split()]
    return out


def clean(cluster_dir: str) -> list[str]:
    """Remove every namespace and root-namespace link named after this cluster's id (nothing
    else); safe to repeat. Processes still inside a namespace keep it alive until they exit, so
    stop them first. -> the names removed."""
    stem = f"{PREFIX}{cluster_id(cluster_dir)}-"
    removed = []
    for link in _root_links():
        if link.startswith(stem):
            _run(["ip", "link", "del", link], check=False)
            removed.append(link)
    for ns in _namespaces():
        if ns.startswith(stem):
            _run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    return removed


class Network:
    """One cluster's namespaces, veths, bridge and tbf qdiscs. Node names are the launcher's:
    `controller`, `broker-N`, `objstore`; `client` is the root namespace's link."""

    def __init__(self, cluster_dir: str, nodes: list[str], rates: dict[str, str], subnet: str | None = None):
        self.id = cluster_id(cluster_dir)
        self.nodes = list(nodes)
        for n in [*self.nodes, NODE_CLIENT]:
            self._host_index(n)  # a known node with a place in the /24
            if n not in rates:
                raise NetworkError(f"no link rate for {n}")
            rate_bits(rates[n])
        self.rates = dict(rates)
        # the rate of a broker that joins later (add_node), whatever set_rate did to the others
        self.broker_rate = next((r for n, r in rates.items() if n.startswith(BROKER_NODE_PREFIX)), None)
        self.subnet = ipaddress.ip_network(subnet) if subnet else None
        # destroy() removes names only once they are known to be ours: after create() made the
        # switch, or when loaded from cluster.json. A create() that found the names taken (another
        # cluster, or one left behind) must not remove them.
        self.created = False

    # -- names and addresses ---------------------------------------------------------------------
    def tag(self, name: str) -> str:
        if name in _FIXED:
            return _FIXED[name][0]
        if name.startswith(BROKER_NODE_PREFIX):
            return "b" + name[len(BROKER_NODE_PREFIX):]
        raise NetworkError(f"unknown node {name!r}")

    @property
    def stem(self) -> str:
        return f"{PREFIX}{self.id}-"

    @property
    def switch(self) -> str:
        return self.stem + "sw"

    @property
    def bridge(self) -> str:
        return self.stem + "br"

    @property
    def client_link(self) -> str:
        return self.veth(NODE_CLIENT)

    def namespace(self, name: str) -> str:
        """The node's namespace (for `client`: the root namespace, "")."""
        return "" if name == NODE_CLIENT else self.stem + self.tag(name)

    def veth(self, name: str) -> str:
        return self.stem + self.tag(name)

    def _host_index(self, name: str) -> int:
        if name in _FIXED:
            return _FIXED[name][1]
        num = self.tag(name)[1:]  # "b7" -> "7"; tag() rejects unknown names
        if not num.isdigit() or not 1 <= int(num) <= 240:
            raise NetworkError(f"{name}: a cluster network holds brokers 1..240")
        return 10 + int(num)

    def node_address(self, name: str) -> str:
        if self.subnet is None:
            raise NetworkError("network not created yet")
        return str(self.subnet.network_address + self._host_index(name))

    def exec_prefix(self, name: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(name)]

    # -- building --------------------------------------------------------------------------------
    def _pick_subnet(self) -> ipaddress.IPv4Network:
        used = (_run(["ip", "-o", "-4", "addr", "show"]).stdout
                + _run(["ip", "-4", "route", "show", "table", "all"]).stdout)
        taken = set()
        for tok in re.findall(r"\d+\.\d+\.\d+\.\d+(?:/\d+)?", used):
            net = ipaddress.ip_network(tok, strict=False)
            if net.overlaps(RANGE):
                taken.add(net)
        subnets = list(RANGE.subnets(new_prefix=24))
        start = int(self.id, 16) % len(subnets)
        for i in range(len(subnets)):
            cand = subnets[(start + i) % len(subnets)]
            if not any(cand.overlaps(t) for t in taken):
                return cand
        raise NetworkError("every /24 of 198.18.0.0/15 is in use")

    def _netns_add(self, ns: str) -> None:
        r = _run(["ip", "netns", "add", ns], check=False)
        if r.returncode == 0:
            return
        err = r.stderr.strip()
        if "File exists" in err:
            raise NetworkError(f"namespace {ns} already exists (a cluster in this directory left it behind?): "
                               f"run `python -m bench cluster clean --dir DIR`")
        raise NetworkError(f"--link-rate needs root or CAP_NET_ADMIN (ip netns add failed: {err})")

    def _in(self, ns: str, *cmd: str) -> None:
        _run(["ip", "netns", "exec", ns, *cmd] if ns else list(cmd))

    def _shape(self, ns: str, dev: str, rate: str) -> None:
        self._in(ns, "tc", "qdisc", "replace", "dev", dev, "root", *tbf_args(rate))

    def create(self) -> "Network":
        """Build everything; on any failure remove what was built and raise NetworkError."""
        self._netns_add(self.switch)  # first: the permission check
        self.created = True
        try:
            self.subnet = self._pick_subnet()
            self._in(self.switch, "ip", "link", "add", self.bridge, "type", "bridge")
            self._in(self.switch, "ip", "link", "set", self.bridge, "up")
            for name in [*self.nodes, NODE_CLIENT]:
                self._add_link(name)
            for name in self.nodes:  # before any traffic, the harness's own included
                self.check_route(self.node_address(name))
        except BaseException:
            self.destroy()
            raise
        return self

    def _add_link(self, name: str) -> None:
        ns, dev, peer = self.namespace(name), self.veth(name), self.veth(name) + "p"
        plen = self.subnet.prefixlen
        if ns:
            self._netns_add(ns)
            self._in(ns, "ip", "link", "set", "lo", "up")
            _run(["ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", peer, "netns", self.switch])
        else:
            _run(["ip", "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", self.switch])
        self._in(ns, "ip", "addr", "add", f"{self.node_address(name)}/{plen}", "dev", dev)
        self._in(ns, "ip", "link", "set", dev, "up")
        self._in(self.switch, "ip", "link", "set", peer, "master", self.bridge, "up")
        self._shape(ns, dev, self.rates[name])
        self._shape(self.switch, peer, self.rates[name])

    def add_node(self, name: str) -> None:
        """A broker joins the running network (a scale-out) on a link like the others'."""
        if name in self.nodes:
            return
        self._host_index(name)
        self.rates[name] = self.broker_rate
        try:
            self._add_link(name)
        except BaseException:
            _run(["ip", "netns", "del", self.namespace(name)], check=False)
            del self.rates[name]
            raise
        self.nodes.append(name)
        self.check_route(self.node_address(name))

    def set_rate(self, name: str, rate: str) -> None:
        """Change one link's rate, both directions, while traffic flows."""
        rate_bits(rate)
        self._shape(self.namespace(name), self.veth(name), rate)
        self._shape(self.switch, self.veth(name) + "p", rate)
        self.rates[name] = rate

    def set_up(self, name: str, up: bool) -> None:
        """Plug (up) or pull (down) one node's cable at the switch: with the bridge-side end down
        the node loses carrier and everything it sends or is sent is dropped, silently, as with
        a cut cable; its process keeps running and its sockets stay open."""
        self._in(self.switch, "ip", "link", "set", self.veth(name) + "p", "up" if up else "down")

    def check_route(self, address: str) -> None:
        """The root namespace's route to `address` must leave through this cluster's client link."""
        out = _run(["ip", "-o", "route", "get", address]).stdout
        m = re.search(r"\bdev (\S+)", out)
        if not m or m.group(1) != self.client_link:
            raise NetworkError(f"route to {address} does not go through {self.client_link}: {out.strip()}")

    def destroy(self) -> None:
        """Remove this network's objects by name; safe to repeat."""
        if not self.created:
            return
        names = set(_namespaces())
        if self.client_link in _root_links():
            _run(["ip", "link", "del", self.client_link], check=False)
        for ns in [self.namespace(n) for n in self.nodes] + [self.switch]:
            if ns in names:
                _run(["ip", "netns", "del", ns], check=False)

    def run_in(self, name: str, fn):
        """fn() in a thread that joined the node's namespace: its sockets and the processes it
        starts live there (for a service whose launcher starts its own process). The namespace of
        a thread ends with the thread, so the caller's stays as it was."""
        result, error = [], []

        def body():
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(f"/run/netns/{self.namespace(name)}", os.O_RDONLY)
                try:
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        raise NetworkError(f"setns into {self.namespace(name)} failed: "
                                           f"{os.strerror(ctypes.get_errno())}")
                finally:
                    os.close(fd)
                result.append(fn())
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                error.append(e)

        t = threading.Thread(target=body, name=f"netns-{name}")
        t.start()
        t.join()
        if error:
            raise error[0]
        return result[0]

    # -- persistence -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"id": self.id, "subnet": str(self.subnet) if self.subnet else None, "switch": self.switch,
                "broker_link_rate": self.broker_rate,
                "client_link": self.client_link,
                "nodes": {n: {"namespace": self.namespace(n) or None, "address": self.node_address(n) if self.subnet else None,
                              "link_rate": self.rates[n]} for n in [*self.nodes, NODE_CLIENT]}}

    @classmethod
    def from_dict(cls, cluster_dir: str, d: dict) -> "Network":
        nodes = [n for n in d["nodes"] if n != NODE_CLIENT]
        n = cls(cluster_dir, nodes, {n: v["link_rate"] for n, v in d["nodes"].items()}, d.get("subnet"))
        n.broker_rate = d.get("broker_link_rate", n.broker_rate)
        n.created = True
        return n
