"""`python -m bench spark start|status|stop`: a Spark standalone cluster on this machine for
`bench aggregate --spark-master` (bench/analysis/aggregate/standalone.py)."""
from __future__ import annotations

import json
import sys
import time

from bench.analysis.aggregate.standalone import SparkCluster, SparkClusterError, start

DEFAULT_DIR = "results/spark"


def cmd_spark(args) -> int:
    try:
        if args.action == "start":
            t0 = time.monotonic()
            c = start(args.dir, args.workers, args.cores, args.memory, args.timeout)
            took = time.monotonic() - t0
            print(f"Spark standalone up in {took:.1f} s: master {c.master_url}, {args.workers} worker(s) of "
                  f"{c.cores_per_worker} core(s) and {c.memory_per_worker} (status page {c.ui_url})")
            print(f"  python -m bench aggregate --spark-master {c.master_url}")
            print(f"  python -m bench spark stop --dir {args.dir}")
            return 0
        c = SparkCluster.load(args.dir)
        if args.action == "stop":
            c.stop()
            print(f"stopped the Spark cluster of {args.dir} ({len(c.processes)} process(es))")
            return 0
        running = c.running()
        status = {"master": c.master_url, "status_page": c.ui_url, "alive_workers": c.alive_workers(),
                  "processes": [{"role": p.role, "pid": p.pid, "running": running[p.role], "log": p.log}
                                for p in c.processes]}
        if args.json:
            print(json.dumps(status, indent=1))
        else:
            print(f"master {c.master_url}: {status['alive_workers'] if status['alive_workers'] is not None else 'no answer'} "
                  f"worker(s) alive")
            for p in status["processes"]:
                print(f"  {p['role']}: pid {p['pid']} {'running' if p['running'] else 'not running'} (log {p['log']})")
        return 0 if all(running.values()) else 1
    except SparkClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def add_parser(sub) -> None:
    sp = sub.add_parser("spark", help="start, inspect or stop a Spark standalone cluster on this machine")
    sp.add_argument("action", choices=["start", "status", "stop"],
                    help="start: a master and --workers workers, up when every worker is alive; status: each "
                         "process and the workers the master counts (exit 1 if one is gone); stop: every "
                         "process, by PID")
    sp.add_argument("--dir", default=DEFAULT_DIR, help=f"the cluster's state and logs (default: {DEFAULT_DIR})")
    sp.add_argument("--workers", type=int, default=2, metavar="N", help="start: workers (default: 2)")
    sp.add_argument("--cores", type=int, default=1, metavar="N", help="start: cores per worker (default: 1)")
    sp.add_argument("--memory", default="2g", metavar="SIZE", help="start: memory per worker (default: 2g)")
    sp.add_argument("--timeout", type=float, default=90.0, metavar="SECONDS",
                    help="start: how long to wait for every worker (default: 90)")
    sp.add_argument("--json", action="store_true", help="status as JSON")
    sp.set_defaults(func=cmd_spark)
