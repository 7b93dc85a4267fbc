"""`python -m bench chaos`: a randomized schedule of moves and faults under load, drawn from a
seed, run as an ordinary scenario and checked (bench/scenario/chaos.py says how it is drawn).

    python -m bench chaos --system shared --seed 1 --minutes 10
    python -m bench chaos --system tiered --seed 7 --minutes 2 --draw-only

The drawn scenario is written before the run to RESULTS/chaos/chaos-SYSTEM-seedN-Mmin.yaml, so a
failure replays with `python -m bench run FILE`; the run itself goes where `bench run` puts it
(RESULTS/chaos-SYSTEM-seedN/<time>). Exit 1 if a safety check failed (acked writes lost,
duplicated, corrupted, reordered), as `bench run`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from systems.registry import LAUNCHED as SYSTEMS


def run(args) -> int:
    from bench.run import runner
    from bench.scenario import ScenarioError
    from bench.scenario.chaos import draw
    from bench.scenario.loading import load_scenario

    try:
        doc = draw(args.system, args.seed, args.minutes)
    except ScenarioError as e:
        raise SystemExit(f"error: {e}") from None
    out = Path(args.results) / "chaos" / f"{doc['name']}-{args.minutes:g}min.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# drawn by python -m bench chaos --system {args.system} --seed {args.seed} "
                   f"--minutes {args.minutes:g}\n" + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    kinds = [a["kind"] for a in doc["actions"]]
    print(f"chaos: {args.system}, seed {args.seed}, {args.minutes:g} min: {len(kinds)} actions "
          f"({', '.join(f'{kinds.count(k)} {k}' for k in dict.fromkeys(kinds))})\n"
          f"schedule: {out}\nreplay:   python -m bench run {out}", flush=True)
    if args.draw_only:
        return 0
    from bench.cli.runs import run_estimates, sigterm_as_interrupt
    from bench.check.safety import safety_counts
    from bench.check.summary import print_comparison

    sc = load_scenario(out)  # what a replay loads
    sigterm_as_interrupt()
    results = runner.run_scenario(sc, results_root=args.results, progress=not args.no_progress,
                                  estimates=run_estimates(args.results))
    print_comparison([(str(d), s) for d, s in results], title=sc.name)
    for _, s in results:
        c = s.get("checks") or {}
        counts = safety_counts(c, ("lost", "duplicated", "corrupted", "reordered", "lost_prefill"))
        print("acked writes: " + ", ".join(f"{n.replace('_', ' ')} {'?' if v is None else v}"
                                           for n, v in counts.items())
              + f"; verdict {s.get('verdict')}" + (f" ({'; '.join(s['problems'])})" if s.get("problems") else "")
              + (f", unknown checks: {', '.join(c['unknown'])}" if c.get("unknown") else ""))
    return 1 if any(s["checks"]["valid"] is False for _, s in results) else 0


def add_parser(sub) -> None:
    p = sub.add_parser("chaos", help="randomized moves and faults under load from a seed, run and checked",
                       description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--system", required=True, choices=SYSTEMS, help="the system to run (its applicable faults are drawn)")
    p.add_argument("--seed", type=int, required=True, help="the schedule is a function of the seed alone")
    p.add_argument("--minutes", type=float, default=10.0, help="length of the load (default: 10)")
    p.add_argument("--results", default="results", help="results root (default: results)")
    p.add_argument("--no-progress", action="store_true", help="no live display")
    p.add_argument("--draw-only", action="store_true", help="write the schedule and stop (nothing runs)")
    p.set_defaults(func=run)
