"""`python -m bench soak`: a long run at a steady load, watching the brokers' memory.

Starts a cluster (`--system replication|shared`; shared starts its embedded SeaweedFS), creates
one topic, then for `--minutes` runs an idempotent acks=all confluent-kafka producer at
`--rate` messages/s of `--message-bytes` spread over the partitions, and a consumer reading
everything back. Every `--sample-s` seconds the RSS of each broker and of the controller is
sampled (psutil) into DIR/soak.jsonl.

Memory growth is judged after a warm-up (`--warmup-minutes`, default a fifth of the run, at least
one minute; the shared system's tail cache, `log.cache.bytes`, fills during it): per process,
baseline = median RSS of the first minute after the warm-up, final = median RSS of the last
minute, growth = final / baseline - 1. The run passes if every broker grows less than
`--max-growth-pct` (10 %) and no message failed; the verdict, the numbers and the load achieved go
to DIR/soak.json and stdout; the exit code is 0 on pass, 1 on fail. Not part of CI.

    python -m bench soak --minutes 30 --system shared
    python -m bench soak --minutes 3 --warmup-minutes 1 --system replication --dir /tmp/soak1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time

import psutil

from bench.run.cluster import Cluster

MiB = 1 << 20


class _Load:
    """Producer at a fixed rate + a consumer reading everything, each in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, size: int):
        from confluent_kafka import Consumer, Producer, TopicPartition
        self.topic, self.partitions, self.rate, self.size = topic, partitions, rate, size
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak", "enable.auto.commit": False,
                                  "fetch.max.bytes": 52428800})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.sent = self.acked = self.failed = self.consumed = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]
        self._value = os.urandom(size)

    def _cb(self, err, msg):
        if err is None:
            self.acked += 1
        else:
            self.failed += 1
            if len(self.errors) < 10:
                self.errors.append(str(err))

    def _produce(self):
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due and not self._stop.is_set():
                try:
                    self.producer.produce(self.topic, self._value, partition=self.sent % self.partitions,
                                          on_delivery=self._cb)
                    self.sent += 1
                except BufferError:
                    break
            self.producer.poll(0.005)

    def _consume(self):
        while not self._stop.is_set():
            for m in self.consumer.consume(10000, 0.5):
                if m.error() is None:
                    self.consumed += 1

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(10)
        left = self.producer.flush(120)
        self.consumer.close()
        return left


def _rss(pid: int) -> int | None:
    try:
        return psutil.Process(pid).memory_info().rss
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


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
    directory = os.path.abspath(args.dir or os.path.join("results", time.strftime("soak-%Y%m%dT%H%M%S")))
    os.makedirs(directory, exist_ok=True)
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
    c = Cluster(args.system, args.brokers, os.path.join(directory, "cluster"), config)
    print(f"soak: {args.system}, {args.brokers} brokers, {args.rate:g} msgs/s x {args.message_bytes} B "
          f"over {args.partitions} partitions for {args.minutes:g} min (warm-up {warmup / 60:g} min); dir {directory}",
          flush=True)
    c.start(timeout=90)
    samples: list[dict] = []
    load = None
    left = None
    try:
        from kafka.admin import KafkaAdminClient, NewTopic
        a = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=30000)
        try:
            a.create_topics([NewTopic("soak", args.partitions, 1)])
        finally:
            a.close()
        load = _Load(c.bootstrap, "soak", args.partitions, args.rate, args.message_bytes).start()
        pids = {f"broker-{b}": p.pid for b, p in c.brokers.items()}
        pids["controller"] = c.controller.pid
        t0 = time.monotonic()
        next_report = 0.0
        with open(os.path.join(directory, "soak.jsonl"), "w") as log:
            while (t := time.monotonic() - t0) < duration:
                s = {"t": round(t, 2), "rss": {n: _rss(pid) for n, pid in pids.items()},
                     "acked": load.acked, "failed": load.failed, "consumed": load.consumed}
                samples.append(s)
                log.write(json.dumps(s) + "\n")
                log.flush()
                dead = [n for n, v in s["rss"].items() if v is None]
                if dead:
                    raise SystemExit(f"soak: {', '.join(dead)} died; see {c.logs_dir}")
                if t >= next_report:
                    rss = " ".join(f"{n}={v / MiB:.0f}MiB" for n, v in s["rss"].items())
                    print(f"  t={t:6.0f}s acked={load.acked} consumed={load.consumed} failed={load.failed} {rss}",
                          flush=True)
                    next_report += 60
                time.sleep(args.sample_s)
        left = load.stop()
    finally:
        if load is not None and left is None:
            load.stop()
        c.stop()
    mem = judge(samples, warmup)
    brokers = {n: v for n, v in mem.items() if n.startswith("broker-")}
    worst = max((v.get("growth_pct", float("inf")) for v in brokers.values()), default=float("inf"))
    ok = worst < args.max_growth_pct and load.failed == 0 and left == 0
    summary = {"system": args.system, "brokers": args.brokers, "minutes": args.minutes, "warmup_s": warmup,
               "rate_msgs_per_s": args.rate, "message_bytes": args.message_bytes, "partitions": args.partitions,
               "config": config, "sent": load.sent, "acked": load.acked, "failed": load.failed,
               "consumed": load.consumed, "errors": load.errors,
               "achieved_msgs_per_s": round(load.acked / duration, 1), "samples": len(samples), "memory": mem,
               "max_broker_growth_pct": worst, "max_growth_pct_allowed": args.max_growth_pct,
               "verdict": "pass" if ok else "fail"}
    with open(os.path.join(directory, "soak.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"\n{'process':<12} {'start':>8} {'baseline':>9} {'final':>8} {'peak':>8} {'growth':>8}")
    for n, v in mem.items():
        if "error" in v:
            print(f"{n:<12} {v['error']}")
        else:
            print(f"{n:<12} {v['start_mib']:>7.0f}M {v['baseline_mib']:>8.0f}M {v['final_mib']:>7.0f}M "
                  f"{v['peak_mib']:>7.0f}M {v['growth_pct']:>7.2f}%")
    print(f"acked {load.acked} ({summary['achieved_msgs_per_s']} msgs/s), failed {load.failed}, "
          f"consumed {load.consumed}; max broker growth after warm-up {worst:.2f}% "
          f"(limit {args.max_growth_pct:g}%): {summary['verdict'].upper()}  -> {directory}/soak.json")
    return 0 if ok else 1


def add_parser(sub) -> None:
    p = sub.add_parser("soak", help="long steady-load run sampling broker memory (not CI)",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--warmup-minutes", type=float, default=None,
                   help="not judged; default a fifth of the run, at least 1")
    p.add_argument("--system", default="replication", choices=["replication", "shared"])
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--rate", type=float, default=1000.0, help="messages per second (all partitions)")
    p.add_argument("--message-bytes", type=int, default=1024)
    p.add_argument("--sample-s", type=float, default=2.0)
    p.add_argument("--max-growth-pct", type=float, default=10.0)
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="broker/controller setting")
    p.add_argument("--dir", help="run directory (default results/soak-<time>)")
    p.set_defaults(func=run)
