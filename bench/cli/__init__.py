"""`python -m bench ...`: the harness's command line."""
from __future__ import annotations

import argparse
import signal
import sys

from bench.cli import cluster as cluster_cli
from bench.cli import calibrate, chaos, figures, objstore, reassign, soak, spark
from bench.cli import runs as run_cli
from bench.run.cluster import ClusterError


def cmd_aggregate(args) -> int:
    """Spark aggregation of run directories (bench/analysis/aggregate/), and its summary.md
    (bench/report/summary.py)."""
    from bench.analysis.aggregate import AggregateError, aggregate
    from bench.report.summary import write_summary

    roots = args.results or ["results"]
    try:
        res = aggregate(roots, args.out, master=args.spark_master, quantiles=args.quantiles,
                        pool_versions=args.pool_versions)
    except AggregateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_summary(res)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    moves = sum(1 for m in res.tables["moves"] if m["move_seconds"] is not None)
    print(f"aggregated {len(res.runs)} run(s), {moves} measured move(s) in {res.timings['total_s']:.1f} s")
    checks = res.models.get("validation") or []
    if checks:
        print("held-out checks: " + ", ".join(f"{s} {n}" for s, n in sorted(
            {s: sum(1 for v in checks if v["status"] == s) for s in ("ok", "failed", "inconclusive", "insufficient")}.items())))
    for h in (res.models.get("projection") or {}).get("headline", []):
        what = (f"{h['value_text']} (held-out error <= {h['error_pct']:.1f} %)" if h["status"] == "validated"
                else f"not validated: {h['reason']}")
        print(f"  {h['case']}, {h['system']} @ {h['link_gbit_s']:g} Gbit/s: {what}")
    print(f"tables, model.json and summary.md in {res.out_dir}/")
    return 0


def cmd_report(args) -> int:
    """HTML + Markdown report from the aggregate tables (bench/report/)."""
    from bench.report import ReportError, build_report

    try:
        out = build_report(args.aggregate, args.out, args.prices)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"report: {out['html']}  (Markdown twin: {out['markdown']}, figures: {out['figures']}/)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description="partition reassignment benchmark harness")
    sub = p.add_subparsers(dest="command", required=True)

    cluster_cli.add_parser(sub)

    ag = sub.add_parser("aggregate", help="Spark aggregation of run directories, models, TB projection")
    ag.add_argument("results", nargs="*", metavar="RESULTS_DIR",
                    help="run directories or roots to search for them (default: results)")
    ag.add_argument("--spark-master", default=None, metavar="URL", help="Spark master (default: local[*])")
    ag.add_argument("--out", default="results/aggregate", help="output directory (default: results/aggregate)")
    ag.add_argument("--pool-versions", action="store_true",
                    help="let a move model rest on runs of more than one code version (commit, or a dirty tree); "
                         "by default each fit and held-out check uses one")
    ag.add_argument("--quantiles", choices=["exact", "approx"], default="exact",
                    help="exact: Spark percentile (default); approx: percentile_approx, accuracy 100000")
    ag.set_defaults(func=cmd_aggregate)

    rp = sub.add_parser("report", help="HTML + Markdown comparison report from the aggregate")
    rp.add_argument("--aggregate", default="results/aggregate", help="aggregate directory (default: results/aggregate)")
    rp.add_argument("--out", default="results/report", help="output directory (default: results/report)")
    rp.add_argument("--prices", metavar="FILE", default=None,
                    help="price table a move's cost is priced with (YAML; default: AWS us-east-1 list prices, "
                         "bench/analysis/prices/aws-us-east-1.yaml, its sources and date inside)")
    rp.set_defaults(func=cmd_report)

    reassign.add_parser(sub)
    calibrate.add_parser(sub)
    run_cli.add_parsers(sub)
    soak.add_parser(sub)
    chaos.add_parser(sub)
    figures.add_parser(sub)
    objstore.add_parser(sub)
    spark.add_parser(sub)
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
    except KeyboardInterrupt as e:  # 128 + the signal's number, as a shell reports it (Ctrl-C: 130)
        name = e.args[0] if e.args and isinstance(e.args[0], str) else "SIGINT"
        sys.exit(128 + int(getattr(signal, name, signal.SIGINT)))
