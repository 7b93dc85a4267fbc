"""`python -m bench ...`: the harness's command line."""
from __future__ import annotations

import argparse
import sys

from bench.cli import cluster as cluster_cli
from bench.cli import analysis, figures, objstore, reassign, soak
from bench.cli import runs as run_cli
from bench.run.cluster import ClusterError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description="partition reassignment benchmark harness")
    sub = p.add_subparsers(dest="command", required=True)

    cluster_cli.add_parser(sub)

    analysis.add_parsers(sub)
    reassign.add_parser(sub)
    run_cli.add_parsers(sub)
    soak.add_parser(sub)
    figures.add_parser(sub)
    objstore.add_parser(sub)
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
