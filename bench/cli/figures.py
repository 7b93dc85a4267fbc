"""`python -m bench figures`: the README's and docs' measured figures from extracts of stored runs.

    python -m bench figures collect SOURCE [SOURCE ...] --as NAME [--dir docs/measurements]
                                    [--allow-dirty] [--allow-mixed]
    python -m bench figures [--check] [--file README.md ...] [--dir docs/measurements]
    python -m bench figures verify [NAME ...] [--results DIR] [--dir docs/measurements]

``collect`` writes docs/measurements/NAME.json from run summaries (a results root, a scenario's
run directory, or a suite directory such as results/suite-default/<timestamp>), an aggregate's
model.json, crosscheck.json files or one pytest-benchmark JSON file, and its evidence bundle
docs/measurements/bundles/NAME (bench/report/evidence.py); it refuses inputs from a dirty tree or
from more than one commit unless told. Without a subcommand every
``<!-- figures:NAME begin/end -->`` block of the files is rendered from its extract; ``--check``
changes nothing: it re-derives every extract from its bundle and compares every block with its
extract, and exits 1 naming what differs. ``verify`` re-checks the runs behind the bundles where
they are still on disk: their histories' sha256 and the checkers re-run on them.
See bench/report/blocks.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.paths import MEASUREMENTS


def cmd_figures(args) -> int:
    from bench.report import blocks as fig

    try:
        if args.figures_command == "collect":
            out = fig.collect(args.sources, args.name, Path(args.dir),
                              args.extra.split(",") if args.extra else None,
                              allow_dirty=args.allow_dirty, allow_mixed=args.allow_mixed)
            e = json.loads(out.read_text())
            print(f"wrote {out} and its bundle {Path(args.dir) / e['bundle']} (commit {e['commit']}"
                  f"{', DIRTY' if e['dirty'] else ''}); now `python -m bench figures` to update the blocks that quote it")
            return 0
        if args.figures_command == "verify":
            return cmd_verify(args)
        measurements = Path(args.dir)
        wrong = [p for n in fig.extract_names(measurements) for p in fig.rederive(n, measurements)] \
            if args.check else []
        if args.check and measurements == MEASUREMENTS:
            from bench.report import faults_doc

            wrong += faults_doc.stale()  # docs/faults.md's table from the faults bundle
        files = [Path(f) for f in args.file] if args.file else None  # README.md and docs/ pages with blocks
        stale = fig.figures(files, measurements, check=args.check)
    except fig.FiguresError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for w in wrong:
        print(f"not re-derived: {w}", file=sys.stderr)
    for s in stale:
        print(f"{'stale' if args.check else 'updated'}: {s}", file=sys.stderr if args.check else sys.stdout)
    if args.check and (stale or wrong):
        if stale:
            print("run `python -m bench figures` to regenerate the blocks", file=sys.stderr)
        return 1
    if not stale and not wrong:
        names = fig.extract_names(measurements)
        print("figures up to date" + (f"; all {len(names)} extracts re-derived from their evidence bundles"
                                      if args.check else ""))
    return 0


def cmd_verify(args) -> int:
    from bench.report import blocks as fig
    from bench.report import evidence

    measurements = Path(args.dir)
    names = args.names or fig.extract_names(measurements)
    results = Path(args.results) if args.results else None
    bad = found = total = 0
    for n in names:
        e = json.loads((measurements / f"{n}.json").read_text())
        if not e.get("bundle"):
            print(f"{n}: no bundle", file=sys.stderr)
            bad += 1
            continue
        bundle = measurements / e["bundle"]
        problems = evidence.file_problems(bundle, evidence.read_manifest(bundle))
        rows = evidence.verify_bundle(bundle, results)
        here = [r for r in rows if r["found"]]
        wrong = [r for r in here if r.get("history") != "ok" or r.get("summary") != "ok" or r.get("checks") != "same"]
        total, found, bad = total + len(rows), found + len(here), bad + len(wrong) + len(problems)
        print(f"{n}: {len(rows)} run(s), {len(here)} on this machine, {len(here) - len(wrong)} re-checked "
              f"(history sha256, summary sha256, checkers re-run)"
              + (f"; bundle files: {'; '.join(problems)}" if problems else ""))
        for r in wrong:
            print(f"  {r['run_id']} at {r['found']}: history {r.get('history')}, summary {r.get('summary')}, "
                  f"checks {r.get('checks')}")
    print(f"{found} of {total} bundled runs found" + ("" if found else
          " (their results/ is not here: pass --results DIR where the runs are)"))
    return 1 if bad else 0


def add_parser(sub) -> None:
    f = sub.add_parser("figures", help="render the README's figure blocks from docs/measurements/*.json "
                                       "(collect: make such an extract from stored runs)")
    f.add_argument("--check", action="store_true", help="change nothing: re-derive every extract from its bundle, "
                                                        "compare every block with its extract; exit 1 naming what differs")
    f.add_argument("--file", action="append", metavar="FILE", help="file with figure blocks (default: README.md and every docs/**/*.md holding one)")
    f.add_argument("--dir", default=str(MEASUREMENTS), help="where the extracts are (default: docs/measurements)")
    f.set_defaults(func=cmd_figures, figures_command=None)
    fs = f.add_subparsers(dest="figures_command")
    c = fs.add_parser("collect", help="extract a stored run set (or a pytest-benchmark JSON) into NAME.json")
    c.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="results root, run or suite directory, or one pytest-benchmark JSON file")
    c.add_argument("--as", dest="name", required=True, help="the extract's name (docs/measurements/NAME.json)")
    c.add_argument("--dir", default=str(MEASUREMENTS), help="where to write it (default: docs/measurements)")
    c.add_argument("--allow-dirty", action="store_true",
                   help="bundle runs made on a dirty tree (refused by default; the extract says so)")
    c.add_argument("--allow-mixed", action="store_true",
                   help="bundle runs of more than one commit (refused by default; the extract names no commit)")
    v = fs.add_parser("verify", help="re-check the runs behind the bundles where they are on disk: history "
                                     "sha256 and the checkers re-run (bench analyze)")
    v.add_argument("names", nargs="*", metavar="NAME", help="extracts to verify (default: every bundled one)")
    v.add_argument("--results", metavar="DIR", help="a results root holding the runs (default: where they ran)")
    v.add_argument("--dir", default=str(MEASUREMENTS), help="where the extracts are (default: docs/measurements)")
    c.add_argument("--extra", metavar="PATTERN,...",
                   help="benchmark JSON: keep only these extra_info keys (fnmatch; nested keys as outer.key)")
