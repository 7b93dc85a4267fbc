"""`python -m bench cluster start|status|stop|clean|kill-broker|restart-broker`: a cluster of one
system by hand. kill-broker and restart-broker are what an `external` scenario's `commands` call
for our own systems (`python -m bench cluster kill-broker --dir D --broker {broker}`)."""
from __future__ import annotations

import json
import sys

from bench.run.cluster import Cluster, ClusterError, clean
from systems.core.config import ConfigError, check
from systems.core.process import alive
from systems.registry import LAUNCHED as SYSTEMS
from systems.registry import profile


def _kv(items: list[str]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise SystemExit(f"--config expects key=value, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = v
    return out


def production_defaults(system: str, brokers: int) -> dict[str, str]:
    """A cluster started by hand gets its system's production configuration as the defaults for
    new topics (the harness's own runs set them per topic), never above the broker count: what a
    scenario run against it as an external cluster reads back."""
    p = profile(system)
    rf = min(p.replication_factor, brokers)
    return {"default.replication.factor": str(rf), "min.insync.replicas": str(min(p.min_insync_replicas, rf))}


def topic_defaults_lines(system: str, config: dict[str, str], given: dict[str, str]) -> list[str]:
    """What ``cluster start`` says about the defaults new topics get: the values, where each came
    from (the system's production configuration or --config), and how to change them. With
    min.insync.replicas above 1 a topic created with replication factor 1 refuses acks=all
    writes (NOT_ENOUGH_REPLICAS): Kafka's answer, said here before it reads as a broken cluster."""
    keys = ("default.replication.factor", "min.insync.replicas")
    where = {k: "--config" if k in given else f"{system}'s production configuration" for k in keys}
    out = ["topic defaults: " + ", ".join(f"{k}={config[k]} ({where[k]})" for k in keys)]
    try:
        min_isr = int(config["min.insync.replicas"])
    except ValueError:
        min_isr = 1
    if min_isr > 1:
        out.append(f"  a topic created with replication factor below {min_isr} refuses acks=all writes "
                   f"(NOT_ENOUGH_REPLICAS: min.insync.replicas={min_isr}); create topics with replication factor "
                   f">= {min_isr} (or leave it to the default), or start with --config min.insync.replicas=1")
    else:
        out.append("  change them with --config default.replication.factor=N --config min.insync.replicas=N")
    return out


def _broker(c: Cluster, bid: int | None) -> int:
    if bid is None:
        raise ClusterError("--broker is required")
    if bid not in c.brokers:
        raise ClusterError(f"no broker {bid} in {c.dir} (brokers: {', '.join(map(str, sorted(c.brokers)))})")
    return bid


def cmd_cluster(args) -> int:
    if args.action == "start":
        try:
            # Refused before anything starts: a misspelt key must not become a silent default.
            check(_kv(args.config), profile(args.system))
        except ConfigError as e:
            print(f"error: --config {e}", file=sys.stderr)
            return 2
        given = _kv(args.config)
        config = {**production_defaults(args.system, args.brokers), **given}
        c = Cluster(args.system, args.brokers, args.dir, config, link_rate=args.link_rate,
                    object_store_link_rate=args.object_store_link_rate, client_link_rate=args.client_link_rate,
                    object_store_latency=args.object_store_latency)
        c.start(timeout=args.timeout)
        print(f"cluster up: {args.system}, {args.brokers} broker(s)")
        for line in topic_defaults_lines(args.system, config, given):
            print(line)
        if c.network is not None:
            n = c.network.to_dict()
            print(f"network: {n['subnet']} (namespaces {n['switch'][:-2]}*), links: "
                  + ", ".join(f"{k} {v['link_rate']}" for k, v in n["nodes"].items()))
        if c.object_store_proxy is not None:
            print(f"object store: {c.object_store_info.get('endpoint')} behind a latency proxy on "
                  f"{c.config['s3.endpoint']} ({c.object_store_latency.text} to first byte; "
                  f"`python -m bench objstore-probe --dir {args.dir}` measures it)")
        print(f"bootstrap: {c.bootstrap}")
        print(f"state: {c.state_path}  logs: {c.logs_dir}")
        return 0
    if args.action == "clean":
        removed = clean(args.dir)
        print(f"cleaned {args.dir}: " + (f"removed {', '.join(removed)}" if removed else "no network objects left"))
        return 0
    c = Cluster.load(args.dir)
    if args.action == "status":
        st = c.status()
        if args.json:
            print(json.dumps({**c.to_dict(), "status": st}, indent=2))
            return 0
        print(f"system {c.system}  bootstrap {c.bootstrap}")
        fenced = {b["id"]: b["fenced"] for b in st.get("controller", {}).get("brokers", [])}
        ctl = c.controller
        print(f"  controller  {ctl.host}:{ctl.port}  pid {ctl.pid}  {'up' if st['processes']['controller'] else 'DOWN'}")
        if c.object_store is not None:
            o = c.object_store
            up = alive(o.pid, c.dir) if o.pid else True
            print(f"  object store {o.host}:{o.port}  pid {o.pid}  {'up' if up else 'DOWN'}")
        if c.object_store_proxy is not None:
            x = c.object_store_proxy
            print(f"  latency proxy {x.host}:{x.port}  pid {x.pid}  {'up' if c.proxy_running() else 'DOWN'}  "
                  f"{c.object_store_latency.text} to first byte")
        for bid, p in sorted(c.brokers.items()):
            up = st["processes"][f"broker-{bid}"]
            state = "DOWN" if not up else ("fenced" if fenced.get(bid, True) else "serving")
            rate = f"  link {c.network.rates[f'broker-{bid}']}" if c.network else ""
            print(f"  broker {bid:<4} {p.host}:{p.port}  pid {p.pid}  {state}{rate}")
        return 0 if all(st["processes"].values()) else 1
    if args.action == "stop":
        c.stop()
        print("cluster stopped")
        return 0
    if args.action == "kill-broker":
        bid = _broker(c, args.broker)
        pid = c.brokers[bid].pid
        if not alive(pid, c.dir):
            print(f"broker {bid} is not running (pid {pid})")
            return 0
        c.kill_broker(bid)  # SIGKILL, only while the PID is still this cluster's broker
        print(f"broker {bid} killed (SIGKILL, pid {pid})")
        return 0
    if args.action == "restart-broker":
        bid = _broker(c, args.broker)
        p = c.restart_broker(bid, timeout=args.timeout)  # waits until registered and unfenced
        print(f"broker {bid} serving again on {p.host}:{p.port} (pid {p.pid})")
        return 0
    return 2


def add_parser(sub) -> None:
    cl = sub.add_parser("cluster", help="start, inspect or stop a cluster")
    cl.add_argument("action", choices=["start", "status", "stop", "clean", "kill-broker", "restart-broker"],
                    help="start a cluster in DIR; show its processes; stop them (safe to repeat); clean: stop "
                         "what is left of it and remove its network, even after kill -9 of the harness; "
                         "kill-broker: SIGKILL broker --broker (only if its PID is still the process this cluster "
                         "started); restart-broker: start it again on its old port (in its namespace, if any) and "
                         "wait until it is registered and unfenced")
    cl.add_argument("--dir", required=True, help="directory for the cluster's state, data and logs (clean: also "
                                                 "a run directory of `bench run`)")
    cl.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help="the system under test")
    cl.add_argument("--brokers", type=int, default=3, metavar="N", help="number of brokers (default: 3)")
    cl.add_argument("--config", action="append", metavar="KEY=VALUE",
                    help="broker/controller setting under Kafka's name (repeatable); an unknown key or a bad "
                         "value is refused before anything starts (exit code 2)")
    cl.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="seconds to wait for every process to serve (start), or for the restarted broker to be "
                         "registered and unfenced (restart-broker) (default: 60)")
    cl.add_argument("--json", action="store_true", help="status as JSON")
    cl.add_argument("--broker", type=int, metavar="ID", help="kill-broker / restart-broker: the broker's id")
    cl.add_argument("--link-rate", metavar="RATE",
                    help="run every node in its own network namespace on a link of this rate, shaped both "
                         "ways (tc syntax: 100mbit, 1gbit; needs root or CAP_NET_ADMIN)")
    cl.add_argument("--object-store-link-rate", metavar="RATE", help="the object store's link (default: --link-rate)")
    cl.add_argument("--client-link-rate", metavar="RATE",
                    help="the link of this (root) namespace, where load and clients run (default: --link-rate)")
    cl.add_argument("--object-store-latency", metavar="LATENCY",
                    help="a far object store: every node's request gets its response's first byte this long after "
                         "its last byte, from a delaying proxy next to the store (a system with an object store): "
                         "20ms, or percentiles p50=30ms,p90=60ms,p99=150ms (0ms: none; the scenario's "
                         "network.object_store_latency)")
    cl.set_defaults(func=cmd_cluster)

