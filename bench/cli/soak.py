"""`python -m bench soak`: a long run at a steady load with a move every few minutes, watching
the brokers' memory and file descriptors and the object store's objects.

A harness run (the runner, its Locust load, its checkers) of a scenario built from the flags: a
cluster of `--system` (`--brokers`, `--config` settings), one topic `soak` of `--partitions`, and
for `--minutes` one idempotent acks=all producer at `--rate` messages/s of `--message-bytes`
spread over the partitions; every `--move-every-minutes` one partition moves to the next broker
(partition after partition); afterwards the verifying consumer reads everything back and the
safety checkers judge every acknowledged write. The runner samples the resident memory (RSS) and
open file descriptors of every process once a second (`rss_sample`, `fd_sample` events) and,
where the system has an object store, counts its objects and bytes per key group every 30 s
(`objstore_census`); the samples are also written to DIR/soak.jsonl.

Judged after a warm-up (`--warmup-minutes`, default a third of the run, at least one minute: a
30-minute soak is judged on its last 20; the shared system's tail cache fills during it), per
process: baseline = median of the first minute after the warm-up, final = median of the last
minute. The run passes if every broker's RSS grows less than `--max-growth-pct` (10 %), every
broker's open file descriptors grow by less than `--max-fd-growth` (the larger of 20 and 10 %),
the object store keeps at most 1.25 bytes per acknowledged byte and that ratio grows less than
10 % (nothing kept that the data does not need: no WAL objects left behind, no orphaned
uploads), the run ended as it should
(verdict pass: every check valid, no error, every move ended ok), and no send failed or ended
unknown. The verdict, the numbers and the load achieved go to DIR/soak.json and stdout; the exit
code is 0 on pass, 1 on fail. DIR is a run directory like any other (`python -m bench analyze
DIR`). Not part of CI.

    python -m bench soak --minutes 30 --system shared
    python -m bench soak --minutes 3 --warmup-minutes 1 --system replication --dir /tmp/soak1
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.history.names import EVENT_FD_SAMPLE, EVENT_LOAD_STARTED, EVENT_OBJSTORE_CENSUS, EVENT_RSS_SAMPLE
from systems.registry import LAUNCHED as SYSTEMS

MiB = 1 << 20


CENSUS_EVERY_S = 30.0


def moves(args) -> list[dict[str, Any]]:
    """A move every --move-every-minutes from the first one on: partition after partition, each to
    the broker after the one it is on (the runner's round-robin placement puts soak-p on broker
    1 + p % brokers), so no move is to where the partition already is."""
    every = args.move_every_minutes * 60
    if every <= 0:
        return []
    out, k, t = [], 0, every
    while t < args.minutes * 60 - 60:  # a minute left for the last move under load
        p, times = k % args.partitions, k // args.partitions
        out.append({"at_s": round(t, 3), "kind": "reassign", "topic": "soak", "partition": p,
                    "to": [1 + (p + times + 1) % args.brokers]})
        k, t = k + 1, t + every
    return out


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
        "checks": {"objstore_census_s": CENSUS_EVERY_S},
        "actions": moves(args),
    }


SAMPLES = {EVENT_RSS_SAMPLE: "rss", EVENT_FD_SAMPLE: "fds", EVENT_OBJSTORE_CENSUS: "objstore"}


def samples_of(run_dir: Path) -> list[dict]:
    """The run's samples as {"t": seconds since the load started, "rss" | "fds" | "objstore":
    {name: value}}, in time order; a census also has "acked_bytes", the bytes acknowledged so far."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from bench.history.store import read_history

    table = read_history(run_dir / "history.parquet")
    wanted = pc.fill_null(pc.is_in(table["event"], value_set=pa.array([EVENT_LOAD_STARTED, *SAMPLES])), False)
    rows = table.filter(wanted).select(["ts", "event", "detail"]).to_pylist()
    t0 = next((r["ts"] for r in rows if r["event"] == EVENT_LOAD_STARTED), None)
    if t0 is None:
        return []
    ok = table.filter(pc.fill_null(pc.and_(pc.equal(table["kind"], "send"), pc.equal(table["outcome"], "ok")), False))
    ack = ok["ack_ts"].to_numpy(zero_copy_only=False)
    order = np.argsort(ack)
    ack, size = ack[order], np.cumsum(pc.fill_null(ok["size_bytes"], 0).to_numpy(zero_copy_only=False)[order])
    out = []
    for r in rows:
        if r["event"] not in SAMPLES:
            continue
        s = {"t": round(r["ts"] - t0, 2), SAMPLES[r["event"]]: json.loads(r["detail"])}
        if r["event"] == EVENT_OBJSTORE_CENSUS:
            i = int(np.searchsorted(ack, r["ts"], side="right"))
            s["acked_bytes"] = int(size[i - 1]) if i else 0
        out.append(s)
    return out


def _windows(samples: list[dict], key: str, warmup_s: float, window_s: float) -> tuple[list[dict], list[dict]]:
    mine = [s for s in samples if key in s]
    end = mine[-1]["t"] if mine else 0.0
    window_s = min(window_s, max(1.0, (end - warmup_s) / 3))  # short runs: thirds of what is left
    return ([s for s in mine if warmup_s <= s["t"] < warmup_s + window_s],
            [s for s in mine if s["t"] > end - window_s])


def judge(samples: list[dict], warmup_s: float, window_s: float = 60.0, key: str = "rss") -> dict:
    """Per process: baseline (median of the first window after the warm-up), final (median of the
    last window), growth. ``key`` "rss" (MiB, growth_pct) or "fds" (counts, growth)."""
    base_w, last_w = _windows(samples, key, warmup_s, window_s)
    mine = [s for s in samples if key in s]
    names = sorted({n for s in mine for n in s[key]})
    out = {}
    for n in names:
        base = [s[key][n] for s in base_w if s[key].get(n)]
        last = [s[key][n] for s in last_w if s[key].get(n)]
        allv = [s[key][n] for s in mine if s[key].get(n)]
        if not base or not last:
            out[n] = {"error": "no samples in the baseline or final window"}
            continue
        b, f = statistics.median(base), statistics.median(last)
        if key == "rss":
            out[n] = {"start_mib": round(allv[0] / MiB, 1), "baseline_mib": round(b / MiB, 1),
                      "final_mib": round(f / MiB, 1), "peak_mib": round(max(allv) / MiB, 1),
                      "growth_pct": round((f / b - 1) * 100, 2)}
        else:
            out[n] = {"start": allv[0], "baseline": b, "final": f, "peak": max(allv), "growth": f - b}
    return out


MAX_BYTES_PER_ACKED_BYTE = 1.25  # the records' own framing and indexes; a copy left behind makes it ~2


def judge_objstore(samples: list[dict], warmup_s: float) -> dict | None:
    """The object store at the first census after the warm-up and at the last: objects and bytes
    per key group, and the store's bytes per acknowledged byte. ``ok``: that ratio grew less than
    10 % (growth_pct) and ends at most :data:`MAX_BYTES_PER_ACKED_BYTE` (a WAL object kept after
    its bytes went into a stream object, or an orphaned upload, is a second copy). None without
    censuses."""
    cs = [s for s in samples if "objstore" in s]
    if not cs:
        return None
    base = next((s for s in cs if s["t"] >= warmup_s), cs[-1])
    last = cs[-1]

    def total(s):
        return sum(g["bytes"] for g in s["objstore"].values())

    def per_acked(s):
        return total(s) / s["acked_bytes"] if s["acked_bytes"] else None

    b, f = per_acked(base), per_acked(last)
    return {"censuses": len(cs), "baseline_t": base["t"], "final_t": last["t"],
            "groups": {g: {"baseline": base["objstore"].get(g), "final": last["objstore"].get(g)}
                       for g in sorted(set(base["objstore"]) | set(last["objstore"]))},
            "bytes_per_acked_byte": {"baseline": round(b, 4) if b else None, "final": round(f, 4) if f else None},
            "growth_pct": round((f / b - 1) * 100, 2) if b and f else None,
            "ok": bool(b and f and f / b - 1 < 0.10 and f <= MAX_BYTES_PER_ACKED_BYTE)}


def run(args) -> int:
    from bench.cli.runs import run_estimates, sigterm_as_interrupt
    from bench.run.runner import DEFAULT_RESULTS, run_scenario, timestamp
    from bench.scenario import parse_scenario

    duration = args.minutes * 60
    warmup = args.warmup_minutes * 60 if args.warmup_minutes is not None else max(60.0, duration / 3)
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
    [(run_dir, summary)] = run_scenario(sc, out_dir=directory, progress=not args.no_progress,
                                        estimates=run_estimates(DEFAULT_RESULTS))
    samples = samples_of(run_dir)
    (run_dir / "soak.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    mem = judge(samples, warmup) if samples else {}
    fds = judge(samples, warmup, key="fds") if samples else {}
    store = judge_objstore(samples, warmup)
    brokers = {n: v for n, v in mem.items() if n.startswith("broker-")}
    worst = max((v.get("growth_pct", float("inf")) for v in brokers.values()), default=float("inf"))
    fd_worst = max((v.get("growth", float("inf")) - max(args.max_fd_growth, 0.1 * v.get("baseline", 0))
                    for n, v in fds.items() if n.startswith("broker-")), default=float("inf"))
    store_ok = store is None or store["ok"]
    prod = summary.get("producer") or {}
    failed, unknown = prod.get("failed"), prod.get("info")
    safety = (summary.get("checks") or {}).get("valid")
    ok = (summary.get("verdict") == "pass" and worst < args.max_growth_pct and fd_worst < 0 and store_ok
          and failed == 0 and unknown == 0)
    out = {"system": args.system, "brokers": args.brokers, "minutes": args.minutes, "warmup_s": warmup,
           "rate_msgs_per_s": args.rate, "message_bytes": args.message_bytes, "partitions": args.partitions,
           "config": config, "run_dir": str(run_dir), "error": summary.get("error"),
           "sent": prod.get("sent"), "acked": prod.get("acked"), "failed": failed, "unknown": unknown,
           "consumed": (summary.get("verify") or {}).get("read"), "safety_checks": safety,
           "achieved_msgs_per_s": round(prod["acked"] / duration, 1) if prod.get("acked") is not None else None,
           "samples": len(samples), "memory": mem, "file_descriptors": fds, "object_store": store,
           "moves": len(moves(args)), "run_verdict": summary.get("verdict"), "problems": summary.get("problems"),
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
    print(f"\n{'open fds':<12} {'start':>8} {'baseline':>9} {'final':>8} {'peak':>8} {'growth':>8}")
    for n, v in fds.items():
        if "error" not in v:
            print(f"{n:<12} {v['start']:>8} {v['baseline']:>9g} {v['final']:>8g} {v['peak']:>8} {v['growth']:>+8g}")
    if store is not None:
        print(f"\nobject store ({store['censuses']} censuses), baseline at {store['baseline_t']:.0f} s, "
              f"final at {store['final_t']:.0f} s:")
        for g, v in store["groups"].items():
            b, f = v["baseline"] or {"objects": 0, "bytes": 0}, v["final"] or {"objects": 0, "bytes": 0}
            print(f"  {g:<28} {b['objects']:>7} -> {f['objects']:>7} objects  {b['bytes'] / MiB:>9.1f} -> "
                  f"{f['bytes'] / MiB:>9.1f} MiB")
        bp = store["bytes_per_acked_byte"]
        print(f"  bytes stored per acked byte {bp['baseline']} -> {bp['final']} (growth {store['growth_pct']} %, "
              f"limits 10 % and {MAX_BYTES_PER_ACKED_BYTE:g})")
    if summary.get("problems"):
        print(f"run: {'; '.join(summary['problems'])}")
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
                   help="not judged; default a third of the run, at least 1")
    p.add_argument("--system", default=SYSTEMS[0], choices=SYSTEMS, help=f"default {SYSTEMS[0]}")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default: 3)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic soak (default: 6)")
    p.add_argument("--rate", type=float, default=1000.0, help="messages per second (all partitions)")
    p.add_argument("--message-bytes", type=int, default=1024, help="bytes per message (default: 1024)")
    p.add_argument("--max-growth-pct", type=float, default=10.0,
                   help="the run fails if a broker's memory grows this much or more after the warm-up (default: 10)")
    p.add_argument("--max-fd-growth", type=int, default=20,
                   help="the run fails if a broker's open files grow by more than this or 10 %% (default: 20)")
    p.add_argument("--move-every-minutes", type=float, default=3.0,
                   help="a partition moves this often (default: 3; 0: no moves)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    p.add_argument("--dir", help="run directory (default results/soak/<time>)")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.set_defaults(func=run)
