"""`python -m bench ...`: the harness's command line."""
from __future__ import annotations

import argparse
import json
import sys

from bench.cli import reassign, soak
from bench.cli import runs as run_cli
from bench.run.cluster import Cluster, ClusterError
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


def cmd_aggregate(args) -> int:
    """Spark aggregation of run directories (bench/analysis/aggregate.py)."""
    from bench.analysis.aggregate import AggregateError, aggregate

    roots = args.results or ["results"]
    try:
        res = aggregate(roots, args.out, master=args.spark_master, quantiles=args.quantiles)
    except AggregateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    moves = sum(1 for m in res.tables["moves"] if m["move_seconds"] is not None)
    print(f"aggregated {len(res.runs)} run(s), {moves} measured move(s) in {res.timings['total_s']:.1f} s")
    print(f"tables, model.json and summary.md in {res.out_dir}/")
    return 0


def cmd_report(args) -> int:
    """HTML + Markdown report from the aggregate tables (bench/analysis/report.py)."""
    from bench.analysis.report import ReportError, build_report

    try:
        out = build_report(args.aggregate, args.out)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"report: {out['html']}  (Markdown twin: {out['markdown']}, figures: {out['figures']}/)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description="partition reassignment benchmark harness")
    sub = p.add_subparsers(dest="command", required=True)

    cl = sub.add_parser("cluster", help="start, inspect or stop a cluster")
    cl.add_argument("action", choices=["start", "status", "stop"])
    cl.add_argument("--dir", required=True, help="directory for the cluster's state, data and logs")
    cl.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help="the system under test")
    cl.add_argument("--brokers", type=int, default=3)
    cl.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    cl.add_argument("--timeout", type=float, default=60.0)
    cl.add_argument("--json", action="store_true", help="status as JSON")
    cl.set_defaults(func=cmd_cluster)

    ag = sub.add_parser("aggregate", help="Spark aggregation of run directories, models, TB projection")
    ag.add_argument("results", nargs="*", metavar="RESULTS_DIR",
                    help="run directories or roots to search for them (default: results)")
    ag.add_argument("--spark-master", default=None, metavar="URL", help="Spark master (default: local[*])")
    ag.add_argument("--out", default="results/aggregate", help="output directory (default: results/aggregate)")
    ag.add_argument("--quantiles", choices=["exact", "approx"], default="exact",
                    help="exact: Spark percentile (default); approx: percentile_approx, accuracy 100000")
    ag.set_defaults(func=cmd_aggregate)

    rp = sub.add_parser("report", help="HTML + Markdown comparison report from the aggregate")
    rp.add_argument("--aggregate", default="results/aggregate", help="aggregate directory (default: results/aggregate)")
    rp.add_argument("--out", default="results/report", help="output directory (default: results/report)")
    rp.set_defaults(func=cmd_report)

    reassign.add_parser(sub)
    run_cli.add_parsers(sub)
    soak.add_parser(sub)
    return p


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    try:
        sys.exit(args.func(args))
    except (ClusterError, reassign.PlanError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # run/analyze/list/suite: scenario and run errors as clear messages
        code = run_cli.handle_errors(e)
        if code is None:
            raise
        sys.exit(code)
    except KeyboardInterrupt:
        sys.exit(130)
