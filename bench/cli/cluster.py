"""`python -m bench cluster start|status|stop`: a cluster of one system by hand."""
from __future__ import annotations

import json

from bench.run.cluster import Cluster
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
        c = Cluster(args.system, args.brokers, args.dir, _kv(args.config))
        c.start(timeout=args.timeout)
        print(f"cluster up: {args.system}, {args.brokers} broker(s)")
        print(f"bootstrap: {c.bootstrap}")
        print(f"state: {c.state_path}  logs: {c.logs_dir}")
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
            print(f"  broker {bid:<4} {p.host}:{p.port}  pid {p.pid}  {state}")
        return 0 if all(st["processes"].values()) else 1
    if args.action == "stop":
        c.stop()
        print("cluster stopped")
        return 0
    return 2


def add_parser(sub) -> None:
    cl = sub.add_parser("cluster", help="start, inspect or stop a cluster")
    cl.add_argument("action", choices=["start", "status", "stop"],
                    help="start a cluster in DIR; show its processes; stop them (safe to repeat)")
    cl.add_argument("--dir", required=True, help="directory for the cluster's state, data and logs")
    cl.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help="the system under test")
    cl.add_argument("--brokers", type=int, default=3, help="number of brokers (default: 3)")
    cl.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    cl.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for every process to serve (default: 60)")
    cl.add_argument("--json", action="store_true", help="status as JSON")
    cl.set_defaults(func=cmd_cluster)

