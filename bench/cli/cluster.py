"""`python -m bench cluster start|status|stop|clean`: a cluster of one system by hand."""
from __future__ import annotations

import json

from bench.run.cluster import Cluster, clean
from systems.core.process import alive
from systems.registry import NAMES as SYSTEMS


def _kv(items: list[str]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise SystemExit(f"--config expects key=value, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = v
    return out


def cmd_cluster(args) -> int:
    if args.action == "start":
        c = Cluster(args.system, args.brokers, args.dir, _kv(args.config), link_rate=args.link_rate,
                    object_store_link_rate=args.object_store_link_rate, client_link_rate=args.client_link_rate)
        c.start(timeout=args.timeout)
        print(f"cluster up: {args.system}, {args.brokers} broker(s)")
        if c.network is not None:
            n = c.network.to_dict()
            print(f"network: {n['subnet']} (namespaces {n['switch'][:-2]}*), links: "
                  + ", ".join(f"{k} {v['link_rate']}" for k, v in n["nodes"].items()))
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
    return 2


def add_parser(sub) -> None:
    cl = sub.add_parser("cluster", help="start, inspect or stop a cluster")
    cl.add_argument("action", choices=["start", "status", "stop", "clean"],
                    help="start a cluster in DIR; show its processes; stop them (safe to repeat); clean: stop "
                         "what is left of it and remove its network, even after kill -9 of the harness")
    cl.add_argument("--dir", required=True, help="directory for the cluster's state, data and logs (clean: also "
                                                 "a run directory of `bench run`)")
    cl.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help="the system under test")
    cl.add_argument("--brokers", type=int, default=3, help="number of brokers (default: 3)")
    cl.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    cl.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for every process to serve (default: 60)")
    cl.add_argument("--json", action="store_true", help="status as JSON")
    cl.add_argument("--link-rate", metavar="RATE",
                    help="run every node in its own network namespace on a link of this rate, shaped both "
                         "ways (tc syntax: 100mbit, 1gbit; needs root or CAP_NET_ADMIN)")
    cl.add_argument("--object-store-link-rate", metavar="RATE", help="the object store's link (default: --link-rate)")
    cl.add_argument("--client-link-rate", metavar="RATE",
                    help="the link of this (root) namespace, where load and clients run (default: --link-rate)")
    cl.set_defaults(func=cmd_cluster)

