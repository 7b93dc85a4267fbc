"""`python -m bench calibrate --bootstrap-server HOST:PORT`: a move-time model of a running cluster,
fitted on a few small, bounded moves of its own.

It runs the scenario `calibrate-cluster` (workloads/scenarios/calibrate-cluster.yaml) against the
cluster as `kind: external` (topics named `bench.calibrate.*`, deleted at the end; nothing else read,
written or changed but the throttle, which is put back), then aggregates those runs alone with the
cluster counted as the system its brokers' configs match, so the model is fitted, and checked on
held-out moves, on this cluster's moves only. The aggregate and `calibration.json` go to
`RESULTS/calibration/<cluster id>/`; `bench reassign --estimate` on that cluster (and a run's
estimates before each move) use that model before any other, and say so.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.cli.runs import external_scenario, sigterm_as_interrupt
from bench.scenario import ScenarioError, load_scenario, resolve_scenario
from bench.units import format_bytes, parse_bytes

SCENARIO = "calibrate-cluster"


def cmd_calibrate(args) -> int:
    from bench.analysis.aggregate import AggregateError, aggregate
    from bench.analysis.estimate import CALIBRATION_FILE, CALIBRATIONS, calibration_key
    from bench.run import clients, runner
    from bench.run.external import ExternalCluster
    from bench.run.provenance import git_state

    sets = list(args.set or [])
    if args.throttle:
        try:
            low = parse_bytes(args.throttle)
        except ValueError as e:
            raise ScenarioError(f"--throttle {args.throttle}: {e}") from None
        if low <= 0:
            raise ScenarioError(f"--throttle {args.throttle}: must be > 0 bytes/s")
        sets.append(f"matrix.system.replication_throttle_bytes_per_s=[{low},{2 * low},{3 * low}]")
    sc = load_scenario(resolve_scenario(args.scenario), sets)  # validated before anything starts
    sc = external_scenario(sc, argparse.Namespace(external=args.bootstrap_server, client=args.client,
                                                  client_env=args.client_env, command=None, label=args.label))
    try:
        clients.resolve(sc.system.client)
    except clients.ClientSettingError as e:
        raise ScenarioError(str(e)) from None
    probe = ExternalCluster(sc.system, sc.topic_prefix)
    try:
        facts = probe.connect()
    finally:
        probe.stop()
    key = calibration_key(facts.get("cluster_id"), args.bootstrap_server)
    out = Path(args.results) / "calibration" / key
    print(f"cluster at {args.bootstrap_server} (id {facts.get('cluster_id') or 'none'}): brokers "
          f"{sorted(int(b) for b in facts['brokers'])}, its configs those of the {facts['behaves_as']} system; "
          f"calibrating into {out}/", file=sys.stderr)
    sigterm_as_interrupt()
    results = runner.run_scenario(sc, results_root=out / "runs", progress=not args.no_progress)
    bad = [str(d) for d, s in results if s["checks"]["valid"] is not True or s.get("error")]
    if bad:
        print("error: calibration runs did not pass their checks, so no model was fitted:\n  " + "\n  ".join(bad),
              file=sys.stderr)
        return 1
    try:
        res = aggregate([d for d, _ in results], out / "aggregate", master=args.spark_master,
                        external_as_profile=True)
    except AggregateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    system = facts["behaves_as"]
    cal = {"cluster_id": facts.get("cluster_id"), "bootstrap": args.bootstrap_server, "behaves_as": system,
           "brokers": facts["brokers"], "calibrated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "scenario": sc.name, "runs": [str(d) for d, _ in results], "provenance": git_state()}
    (out / CALIBRATION_FILE).write_text(json.dumps(cal, indent=2) + "\n")
    model = res.models["models"].get(system)
    validity = ((res.models.get("projection") or {}).get("validity") or {}).get(system) or {}
    checks = [v for v in res.models.get("validation") or [] if v.get("system") == system]
    if model is None:
        why = (res.models.get("notes") or {}).get(system, "no moves to fit")
        print(f"error: no {system} model from the calibration's moves: {why}", file=sys.stderr)
        return 1
    moves = [m for m in res.tables["moves"] if m["move_seconds"] is not None]
    print(f"{len(moves)} moves measured ({', '.join(format_bytes(m['partition_bytes']) for m in moves[:8])}"
          f"{', ...' if len(moves) > 8 else ''})")
    print(f"model: {system} {model.formula()} (n = {model.n})")
    for axis in dict.fromkeys(v.get("axis") for v in checks):
        vs = [v for v in checks if v.get("axis") == axis]
        counts = ", ".join(f"{sum(1 for v in vs if v.get('status') == st)} {st}"
                           for st in dict.fromkeys(v.get("status") for v in vs))
        errs = [v["error_pct"] for v in vs if isinstance(v.get("error_pct"), (int, float))]
        worst = f"; worst {max(errs, key=abs):+.1f} % (target +/-{vs[0].get('target_pct'):g} %)" if errs else ""
        print(f"  held-out {axis}: {counts}{worst}")
    print("validated on held-out moves" if validity.get("validated")
          else f"not validated: {validity.get('reason') or 'no passing held-out check'}")
    default = Path(args.results).resolve() == CALIBRATIONS.parent  # where --estimate looks
    where = (f"`python -m bench reassign --bootstrap-server {args.bootstrap_server} ... --estimate` uses it on "
             "this cluster" if default else f"use it with `--estimate --model {out / 'aggregate' / 'model.json'}`")
    print(f"stored in {out}/ ({CALIBRATION_FILE}, aggregate/model.json); {where}")
    return 0


def add_parser(sub) -> None:
    c = sub.add_parser("calibrate", help="fit a move-time model on a running cluster from a few small moves of "
                                         "prefixed test topics (nothing else touched); --estimate then uses it")
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster to calibrate")
    c.add_argument("--client", action="append", metavar="KEY=VALUE",
                   help="a client setting (librdkafka's name), e.g. security.protocol=SASL_SSL; repeatable")
    c.add_argument("--client-env", action="append", metavar="KEY=ENV",
                   help="a client setting read from an environment variable (secrets); repeatable")
    c.add_argument("--throttle", metavar="B/S",
                   help="the lowest of the three replication throttles the moves run at (it, twice it and three "
                        "times it: the model's throttle check fits on two and predicts the third), e.g. 4MB "
                        "(default: the scenario's, 4, 8 and 12 MB/s)")
    c.add_argument("--scenario", default=SCENARIO, metavar="NAME|FILE",
                   help=f"the calibration's moves (default: {SCENARIO}, brokers 1-4)")
    c.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a scenario field; repeatable")
    c.add_argument("--label", default=None, help="the cluster's name in the runs' reports")
    c.add_argument("--results", default="results",
                   help="results root (default: results; the calibration goes to RESULTS/calibration/<cluster id>/)")
    c.add_argument("--spark-master", default=None, metavar="URL", help="Spark master for the fit (default: local[*])")
    c.add_argument("--no-progress", action="store_true", help="no live display")
    c.set_defaults(func=cmd_calibrate)
