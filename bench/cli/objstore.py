"""`python -m bench objstore-probe --dir CLUSTER_DIR`: small PUT/GET round trips to a running
cluster's object store, timed at the client, through the endpoint its nodes use (the latency
proxy's, with --object-store-latency) and directly (bench/run/objstore_probe.py). Exit code 1 if
the p50 through the nodes' endpoint is not within 10 % of the latency setting's p50."""
from __future__ import annotations

import json


def cmd_probe(args) -> int:
    from bench.run.objstore_probe import probe, render

    res = probe(args.dir, requests=args.requests, size=args.bytes, direct=not args.no_direct)
    print(json.dumps(res, indent=2) if args.json else render(res))
    return 1 if res.get("within_tolerance") is False else 0


def add_parser(sub) -> None:
    p = sub.add_parser("objstore-probe", help="time object-store round trips as a cluster's nodes see them")
    p.add_argument("--dir", required=True, help="the cluster's directory (bench cluster start --dir)")
    p.add_argument("--requests", type=int, default=100, metavar="N", help="PUTs, then as many GETs (default: 100)")
    p.add_argument("--bytes", type=int, default=1024, metavar="B", help="object size (default: 1024)")
    p.add_argument("--no-direct", action="store_true", help="skip the round trips straight to the store")
    p.add_argument("--json", action="store_true", help="the measurements as JSON")
    p.set_defaults(func=cmd_probe)
