"""`python -m bench figures`: the README's and docs' measured figures from extracts of stored runs.

    python -m bench figures collect SOURCE [SOURCE ...] --as NAME [--dir docs/measurements]
    python -m bench figures [--check] [--file README.md ...] [--dir docs/measurements]

``collect`` writes docs/measurements/NAME.json from run summaries (a results root, a scenario's
run directory, or a suite directory such as results/suite-default/<timestamp>) or from one
pytest-benchmark JSON file. Without a subcommand every ``<!-- figures:NAME begin/end -->`` block
of the files is rendered from its extract; ``--check`` only compares and exits 1 naming the
blocks that differ. See bench/report/blocks.py.
"""
from __future__ import annotations

import sys
from pathlib import Path


def cmd_figures(args) -> int:
    from bench.report import blocks as fig

    try:
        if args.figures_command == "collect":
            out = fig.collect(args.sources, args.name, Path(args.dir),
                              args.extra.split(",") if args.extra else None)
            print(f"wrote {out}; now `python -m bench figures` to update the blocks that quote it")
            return 0
        files = [Path(f) for f in args.file] if args.file else None  # README.md and docs/ pages with blocks
        stale = fig.figures(files, Path(args.dir), check=args.check)
    except fig.FiguresError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for s in stale:
        print(f"{'stale' if args.check else 'updated'}: {s}", file=sys.stderr if args.check else sys.stdout)
    if args.check and stale:
        print("run `python -m bench figures` to regenerate them", file=sys.stderr)
        return 1
    if not stale:
        print("figures up to date")
    return 0


def add_parser(sub) -> None:
    from bench.report.blocks import MEASUREMENTS

    f = sub.add_parser("figures", help="render the README's figure blocks from docs/measurements/*.json "
                                       "(collect: make such an extract from stored runs)")
    f.add_argument("--check", action="store_true", help="only compare; exit 1 naming every stale block")
    f.add_argument("--file", action="append", metavar="FILE", help="file with figure blocks (default: README.md and every docs/**/*.md holding one)")
    f.add_argument("--dir", default=str(MEASUREMENTS), help="where the extracts are (default: docs/measurements)")
    f.set_defaults(func=cmd_figures, figures_command=None)
    fs = f.add_subparsers(dest="figures_command")
    c = fs.add_parser("collect", help="extract a stored run set (or a pytest-benchmark JSON) into NAME.json")
    c.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="results root, run or suite directory, or one pytest-benchmark JSON file")
    c.add_argument("--as", dest="name", required=True, help="the extract's name (docs/measurements/NAME.json)")
    c.add_argument("--dir", default=str(MEASUREMENTS), help="where to write it (default: docs/measurements)")
    c.add_argument("--extra", metavar="PATTERN,...",
                   help="benchmark JSON: keep only these extra_info keys (fnmatch; nested keys as outer.key)")
