"""`python -m bench soak`: a long run at a steady load, watching the brokers' memory.

A harness run (the runner, its Locust load, its checkers) of a scenario built from the flags: a
cluster of `--system` (`--brokers`, `--config` settings), one topic `soak` of `--partitions`, and
for `--minutes` one idempotent acks=all producer at `--rate` messages/s of `--message-bytes`
spread over the partitions; afterwards the verifying consumer reads everything back and the
safety checkers judge every acknowledged write. The runner samples the resident memory (RSS) of
every process once a second into the run's history (`rss_sample` events, with the CPU samples);
they are also written to DIR/soak.jsonl.

Memory growth is judged after a warm-up (`--warmup-minutes`, default a fifth of the run, at least
one minute; the shared system's tail cache, `log.cache.bytes`, fills during it): per process,
baseline = median RSS of the first minute after the warm-up, final = median RSS of the last
minute, growth = final / baseline - 1. The run passes if every broker grows less than
`--max-growth-pct` (10 %), no send failed or ended unknown, and the safety checks pass; the
verdict, the numbers and the load achieved go to DIR/soak.json and stdout; the exit code is 0 on
pass, 1 on fail. DIR is a run directory like any other (`python -m bench analyze DIR`). Not part
of CI.

    python -m bench soak --minutes 30 --system shared
    python -m bench soak --minutes 3 --warmup-minutes 1 --system replication --dir /tmp/soak1
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.history.names import EVENT_LOAD_STARTED, EVENT_RSS_SAMPLE
from systems.registry import LAUNCHED as SYSTEMS

MiB = 1 << 20


def scenario(args, config: dict[str, str]) -> dict[str, Any]:
    """The soak as a scenario (a dict as in a YAML file)."""
    return {
        "name": "soak",
        "description": f"{args.minutes:g} min of steady load watching memory (python -m bench soak)",
        "system": {"kind": args.system, "brokers": args.brokers, "extra": config},
        "workload": {"topics": [{"name": "soak", "partitions": args.partitions, "replication_factor": 1}],
                     "message_bytes": args.message_bytes, "key_distribution": "none",
                     "produce_rate_msgs_per_s": args.rate, "producers": 1, "duration_s": args.minutes * 60,
                     "shape": {"kind": "steady"}},
    }


def rss_samples(run_dir: Path) -> list[dict]:
    """The run's ``rss_sample`` events as {"t": seconds since the load started, "rss": {name:
    bytes}}, in time order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from bench.history.store import read_history

    table = read_history(run_dir / "history.parquet")
    wanted = pc.fill_null(pc.is_in(table["event"], value_set=pa.array([EVENT_LOAD_STARTED, EVENT_RSS_SAMPLE])), False)
    rows = table.filter(wanted).select(["ts", "event", "detail"]).to_pylist()
    t0 = next((r["ts"] for r in rows if r["event"] == EVENT_LOAD_STARTED), None)
    if t0 is None:
        return []
    return [{"t": round(r["ts"] - t0, 2), "rss": json.loads(r["detail"])} for r in rows if r["event"] == EVENT_RSS_SAMPLE]


def judge(samples: list[dict], warmup_s: float, window_s: float = 60.0) -> dict:
    """Per process: baseline (median of the first window after the warm-up), final (median of the
    last window), growth_pct. Samples: {"t": seconds since start, "rss": {name: bytes}}."""
    end = samples[-1]["t"]
    window_s = min(window_s, max(1.0, (end - warmup_s) / 3))  # short runs: thirds of what is left
    names = sorted({n for s in samples for n in s["rss"]})
    out = {}
    for n in names:
        base = [s["rss"][n] for s in samples if warmup_s <= s["t"] < warmup_s + window_s and s["rss"].get(n)]
        last = [s["rss"][n] for s in samples if s["t"] > end - window_s and s["rss"].get(n)]
        allv = [s["rss"][n] for s in samples if s["rss"].get(n)]
        if not base or not last:
            out[n] = {"error": "no samples in the baseline or final window"}
            continue
        b, f = statistics.median(base), statistics.median(last)
        out[n] = {"start_mib": round(allv[0] / MiB, 1), "baseline_mib": round(b / MiB, 1),
                  "final_mib": round(f / MiB, 1), "peak_mib": round(max(allv) / MiB, 1),
                  "growth_pct": round((f / b - 1) * 100, 2)}
    return out


def run(args) -> int:
    from bench.cli.runs import sigterm_as_interrupt
    from bench.run.runner import DEFAULT_RESULTS, run_scenario, timestamp
    from bench.scenario import parse_scenario

    duration = args.minutes * 60
    warmup = args.warmup_minutes * 60 if args.warmup_minutes is not None else max(60.0, duration / 5)
    if warmup >= duration - 30:
        raise SystemExit(f"--warmup-minutes ({warmup / 60:g}) must leave at least 30 s of the "
                         f"{args.minutes:g}-minute run to judge")
    config = {}
    for kv in args.config or []:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"--config expects key=value, got {kv!r}")
        config[k] = v
    sc = parse_scenario(scenario(args, config), "soak")  # validated before anything starts
    directory = Path(args.dir).resolve() if args.dir else DEFAULT_RESULTS / "soak" / timestamp()
    print(f"soak: {args.system}, {args.brokers} brokers, {args.rate:g} msgs/s x {args.message_bytes} B "
          f"over {args.partitions} partitions for {args.minutes:g} min (warm-up {warmup / 60:g} min); dir {directory}",
          flush=True)
    sigterm_as_interrupt()
    [(run_dir, summary)] = run_scenario(sc, out_dir=directory, progress=not args.no_progress)
    samples = rss_samples(run_dir)
    (run_dir / "soak.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    mem = judge(samples, warmup) if samples else {}
    brokers = {n: v for n, v in mem.items() if n.startswith("broker-")}
    worst = max((v.get("growth_pct", float("inf")) for v in brokers.values()), default=float("inf"))
    prod = summary.get("producer") or {}
    failed, unknown = prod.get("failed"), prod.get("info")
    safety = (summary.get("checks") or {}).get("valid")
    ok = (not summary.get("error") and worst < args.max_growth_pct and failed == 0 and unknown == 0
          and safety is True)
    out = {"system": args.system, "brokers": args.brokers, "minutes": args.minutes, "warmup_s": warmup,
           "rate_msgs_per_s": args.rate, "message_bytes": args.message_bytes, "partitions": args.partitions,
           "config": config, "run_dir": str(run_dir), "error": summary.get("error"),
           "sent": prod.get("sent"), "acked": prod.get("acked"), "failed": failed, "unknown": unknown,
           "consumed": (summary.get("verify") or {}).get("read"), "safety_checks": safety,
           "achieved_msgs_per_s": round(prod["acked"] / duration, 1) if prod.get("acked") is not None else None,
           "samples": len(samples), "memory": mem,
           "max_broker_growth_pct": worst, "max_growth_pct_allowed": args.max_growth_pct,
           "verdict": "pass" if ok else "fail"}
    (run_dir / "soak.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n{'process':<12} {'start':>8} {'baseline':>9} {'final':>8} {'peak':>8} {'growth':>8}")
    for n, v in mem.items():
        if "error" in v:
            print(f"{n:<12} {v['error']}")
        else:
            print(f"{n:<12} {v['start_mib']:>7.0f}M {v['baseline_mib']:>8.0f}M {v['final_mib']:>7.0f}M "
                  f"{v['peak_mib']:>7.0f}M {v['growth_pct']:>7.2f}%")
    if summary.get("error"):
        print(f"run failed: {summary['error']}")
    print(f"acked {out['acked']} ({out['achieved_msgs_per_s']} msgs/s), failed {failed}, unknown {unknown}, "
          f"consumed {out['consumed']}, safety checks {safety}; max broker growth after warm-up {worst:.2f}% "
          f"(limit {args.max_growth_pct:g}%): {out['verdict'].upper()}  -> {run_dir}/soak.json")
    return 0 if ok else 1


def add_parser(sub) -> None:
    p = sub.add_parser("soak", help="long steady-load run sampling broker memory (not CI)",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="length of the run in minutes, warm-up included "
                   "(default: 30)")
    p.add_argument("--warmup-minutes", type=float, default=None,
                   help="not judged; default a fifth of the run, at least 1")
    p.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help=f"default {SYSTEMS[0]}")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default: 3)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic soak (default: 6)")
    p.add_argument("--rate", type=float, default=1000.0, help="messages per second (all partitions)")
    p.add_argument("--message-bytes", type=int, default=1024, help="bytes per message (default: 1024)")
    p.add_argument("--max-growth-pct", type=float, default=10.0,
                   help="the run fails if a broker's memory grows this much or more after the warm-up (default: 10)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    p.add_argument("--dir", help="run directory (default results/soak/<time>)")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.set_defaults(func=run)
