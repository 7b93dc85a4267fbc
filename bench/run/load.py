"""Load for a run: prefill, the Locust producer process, and the verifying consumer.

* :func:`prefill` (runs in the runner's process) writes ``bytes_per_partition`` into each partition
  before the measurement, fast: 64 KiB records, big batches, ``acks=all`` (so every in-sync replica holds the prefill when the load starts), no idempotence. Prefill
  records carry a ``prefill`` header and no ``id``, so the verifying consumer reads them as
  ``msg_id -1`` (ignored by the checkers, counted per partition).
* ``python -m bench.run.load SPEC.json [--wait-for-go]`` (started by the runner as its own process, so
  Locust's gevent monkey-patching never touches the runner, its threads or its cluster control; with
  ``--wait-for-go`` it is started during the prefill, prints ``{"event": "ready"}`` and waits for the
  runner's SIGUSR2 before its users start) drives Locust as a
  library: an :class:`~locust.env.Environment` with :class:`workloads.kafka_produce.KafkaProducerUser`
  and a rate shape, a ``LocalRunner``; every send attempt becomes a ``send`` row in its own
  history file (``SPEC.history_path``), which the runner merges into the run's history. It prints
  one JSON object per line on stdout: ``{"event": "started", "ts"}`` when the users start (the
  run's time zero for actions), ``{"event": "progress", ...}`` every 0.5 s and
  ``{"event": "finished", ...}`` (with Locust's own request stats) at the end. After
  ``duration_s`` it stops sending, waits up to ``drain_s`` for outstanding acks, purges the rest
  (reported as fail/info) and exits. SIGUSR1 (the runner: the actions are done,
  ``workload.end_after_actions_s``) ends it the same way before ``duration_s`` (``finished``'s
  ``after_actions``); SIGTERM/SIGINT end it early (drain 2 s).
* ``python -m bench.run.load CONSUMERS.json`` (a spec with ``members``) runs the workload's
  consumers the same way, in a process of their own (:func:`drive_consumers`): every message a
  member reads becomes a ``deliver`` row. The runner commits each group's start offsets first
  (:func:`commit_offsets`) and starts the producers once every group has its partitions.
* :func:`verify` (runner's process) reads every partition from offset 0 to its high watermark
  after the load, as ``read`` rows.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.run import clients
from workloads.messages import PREFILL_HEADER, PREFILL_RECORD_BYTES, parse_headers

PREFILL_BATCH_BYTES = 1_000_000  # the producer's batch.size: big batches, a fast prefill
PREFILL_MIN_BYTES_PER_S = 4e6  # bound of a prefill: 300 s + its bytes at this rate


class LoadError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Prefill


def prefill(bootstrap: str, tps: Iterable[tuple[str, int]], bytes_per_partition: int | Mapping[tuple[str, int], int],
            *, record_bytes: int = PREFILL_RECORD_BYTES, batch_bytes: int = PREFILL_BATCH_BYTES,
            timeout_s: float | None = None, client: Mapping[str, Any] | None = None, connections: int = 1,
            ) -> dict[tuple[str, int], dict]:
    """Write ``bytes_per_partition`` value bytes (one number, or one per (topic, partition)) into
    each (topic, partition), through ``connections`` producers (records dealt round-robin: a
    broker handles one request per connection at a time, so many small batches need several).
    Returns per partition ``{bytes, messages, first_offset, last_offset}``. Raises LoadError on any failed record or if it does not finish within
    ``timeout_s`` (default: 300 s plus the bytes at ``PREFILL_MIN_BYTES_PER_S``, so GiB prefills
    stay bounded without failing)."""
    from confluent_kafka import Producer

    tps = list(tps)
    sizes = ({tp: int(bytes_per_partition.get(tp, 0)) for tp in tps} if isinstance(bytes_per_partition, Mapping)
             else dict.fromkeys(tps, int(bytes_per_partition)))
    if timeout_s is None:
        timeout_s = 300.0 + sum(sizes.values()) / PREFILL_MIN_BYTES_PER_S
    out = {tp: {"bytes": 0, "messages": 0, "first_offset": None, "last_offset": None} for tp in tps}
    sizes = {tp: n for tp, n in sizes.items() if n > 0}
    if not sizes:
        return out
    errors: list[str] = []
    producers = [Producer(clients.librdkafka(bootstrap, {
        "acks": "all", "enable.idempotence": False, "linger.ms": 20, "batch.size": batch_bytes,
        "batch.num.messages": 100_000, "queue.buffering.max.kbytes": 512 * 1024 // connections,
        "message.max.bytes": 1_000_000, "compression.type": "none", "message.timeout.ms": int(timeout_s * 1000),
        # librdkafka's default (1,000,000) lets thousands of small batches wait in a broker's queue
        # until request.timeout.ms fails them (and a non-idempotent retry may duplicate them)
        "max.in.flight.requests.per.connection": 100, "client.id": "prefill"}, client)) for _ in range(connections)]
    filler = bytes(range(256)) * (record_bytes // 256 + 1)

    def cb(err, msg):
        if err is not None:
            errors.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")
            return
        rec = out[(msg.topic(), msg.partition())]
        rec["bytes"] += len(msg.value())
        rec["messages"] += 1
        off = msg.offset()
        rec["first_offset"] = off if rec["first_offset"] is None else min(rec["first_offset"], off)
        rec["last_offset"] = off if rec["last_offset"] is None else max(rec["last_offset"], off)

    deadline = time.monotonic() + timeout_s
    # Interleave partitions so all of them fill in parallel.
    remaining = dict(sizes)
    headers = [(PREFILL_HEADER, b"1")]
    sent = 0
    while remaining:
        for tp in list(remaining):
            n = min(record_bytes, remaining[tp])
            p = producers[sent % connections]
            while True:
                try:
                    p.produce(tp[0], value=filler[:n], partition=tp[1], headers=headers, on_delivery=cb)
                    break
                except BufferError:
                    for q in producers:
                        q.poll(0.05 / connections)
                    if time.monotonic() > deadline:
                        raise LoadError(f"prefill did not finish within {timeout_s:.0f}s")
            sent += 1
            remaining[tp] -= n
            if remaining[tp] <= 0:
                del remaining[tp]
        for q in producers:
            q.poll(0)
        if errors:
            break
    # Short flushes: a signal's handler (bench/run/ending.py) runs only between them, so SIGTERM
    # stops a long prefill at once instead of when librdkafka's flush returns.
    left = sum(len(q) for q in producers)
    while left and not errors and time.monotonic() < deadline:
        left = sum(q.flush(min(0.5 / connections, max(0.0, deadline - time.monotonic()))) for q in producers)
    if errors:
        raise LoadError(f"prefill failed: {errors[0]} ({len(errors)} failed record(s))")
    if left:
        raise LoadError(f"prefill: {left} record(s) not acknowledged within {timeout_s:.0f}s")
    return out


# --------------------------------------------------------------------------------------------
# Verifying consumer


def verify(bootstrap: str, tps: Iterable[tuple[str, int]], on_rows: Callable[[list[dict]], None], *,
           timeout_s: float = 120.0, group: str = "bench-verify",
           client: Mapping[str, Any] | None = None) -> dict[tuple[str, int], dict]:
    """Read every partition from offset 0 to the high watermark it has now; ``on_rows`` gets
    batches of ``read`` rows (harness messages with their id and the CRC-32 of their value;
    prefill records as msg_id -1 are only counted). librdkafka checks every batch's CRC. Returns per partition ``{high_watermark, read, prefill_read, complete,
    error}``; bounded by ``timeout_s`` (a partition that cannot be read is reported incomplete)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    tps = list(tps)
    c = Consumer(clients.librdkafka(bootstrap, {
        "group.id": group, "enable.auto.commit": False, "enable.partition.eof": True,
        "auto.offset.reset": "earliest", "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024, "client.id": "verify",
        "check.crcs": True}, client))  # librdkafka checks each batch's CRC (off by default)
    stats = {tp: {"high_watermark": None, "read": 0, "prefill_read": 0, "complete": False, "error": None}
             for tp in tps}
    deadline = time.monotonic() + timeout_s
    try:
        for tp in tps:
            while True:
                try:
                    _, hi = c.get_watermark_offsets(TopicPartition(tp[0], tp[1]), timeout=5, cached=False)
                    stats[tp]["high_watermark"] = hi
                    break
                except Exception as exc:  # offline partition: retry until the deadline
                    stats[tp]["error"] = f"watermark: {exc}"
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
        unread = {tp for tp in tps if stats[tp]["high_watermark"] is not None}
        for tp in unread:
            stats[tp]["error"] = None
            if stats[tp]["high_watermark"] == 0:
                stats[tp]["complete"] = True
        unread = {tp for tp in unread if not stats[tp]["complete"]}
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in unread])
        pos = {tp: -1 for tp in unread}
        while unread and time.monotonic() < deadline:
            rows: list[dict] = []
            for m in c.consume(5000, 0.5):
                err = m.error()
                tp = (m.topic(), m.partition())
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF and tp in stats:
                        stats[tp]["error"] = err.str()
                    continue
                off = m.offset()
                st = stats.get(tp)
                if st is None:
                    continue
                msg_id, producer = parse_headers(m.headers())
                st["read"] += 1
                if msg_id < 0:
                    st["prefill_read"] += 1
                else:
                    value = m.value() or b""
                    rows.append({"kind": "read", "ts": time.time(), "msg_id": msg_id, "producer": producer,
                                 "topic": tp[0], "partition": tp[1], "outcome": "ok", "offset": off,
                                 "size_bytes": len(value), "digest": zlib.crc32(value)})
                pos[tp] = max(pos.get(tp, -1), off)
                if tp in unread and off + 1 >= st["high_watermark"]:
                    st["complete"] = True
                    unread.discard(tp)
            if rows:
                on_rows(rows)
        for tp in unread:
            stats[tp]["error"] = stats[tp]["error"] or f"timed out at offset {pos.get(tp)}"
    finally:
        c.close()
    return stats


# --------------------------------------------------------------------------------------------
# The Locust load process


class LiveStats:
    """Counters the producer users update per delivery report (for progress lines)."""

    def __init__(self) -> None:
        self.sent = self.acked = self.failed = self.info = 0
        self.produced = 0  # produce() calls (sent counts delivery outcomes)
        self.skipped = 0  # sends skipped because the user fell > 1 s behind its rate
        self.acked_bytes = 0
        self._lat: list[float] = []

    def record(self, outcome: str, ts: float, ack_ts: float | None, size: int) -> None:
        self.sent += 1
        if outcome == "ok":
            self.acked += 1
            self.acked_bytes += size
            self._lat.append((ack_ts - ts) * 1000.0)
        elif outcome == "fail":
            self.failed += 1
        else:
            self.info += 1

    def take_latencies(self) -> list[float]:
        lat, self._lat = self._lat, []
        return lat


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100.0 * len(s)) - 1))]


def json_lines(stream, copy_to) -> Iterator[dict[str, Any]]:
    """The JSON objects a load process prints (see :func:`_emit`), each line also appended to the
    file ``copy_to`` as it came (flushed: the file shows where a running load stands); other lines
    are copied and skipped."""
    with open(copy_to, "a") as out:
        for line in stream:
            text = line.decode(errors="replace").strip()
            if not text:
                continue
            out.write(text + "\n")
            out.flush()
            try:
                msg = json.loads(text)
            except ValueError:
                continue
            if isinstance(msg, dict):
                yield msg


def stop_child(proc, grace_s: float = 15.0) -> None:
    """Stop a process the runner started (a load or consumer process) by its PID: SIGTERM (it
    leaves and writes its history), SIGKILL after ``grace_s``. Safe if it has already exited."""
    import signal
    import subprocess

    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class WorkerPool:
    """The load's Locust master and its workers (scenario ``load.workers`` on this machine,
    ``load.remote_workers`` started elsewhere with Locust's own ``--worker``; the protocol is
    :mod:`workloads.distributed`). Every worker's sends reach the run's history through the
    master: outcomes as they come, and at the end, every attempt without an outcome (its worker
    died, or never answered the drain) as ``info``."""

    def __init__(self, env: Any, spec: dict[str, Any], stats: LiveStats, shape: Any) -> None:
        import socket
        import subprocess

        import gevent
        from workloads import distributed as dist

        self.dist, self.stats, self.shape = dist, stats, shape
        self.users = max(1, int(spec["producers"]))
        self.local = int(spec.get("workers") or 0)
        self.expected = self.local + int(spec.get("remote_workers") or 0)
        host = spec.get("master_host") or "127.0.0.1"
        port = int(spec.get("master_port") or 0)
        if not port:
            with socket.socket() as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
        self.address = f"{host}:{port}"
        self.runner = env.create_master_runner(master_bind_host=host, master_bind_port=port)
        self.pending: dict[int, dict] = {}  # msg_id -> its attempt, until its outcome comes
        self.names: dict[int, str] = {}  # worker index -> Locust's client id
        self.pids: dict[int, int] = {}  # worker index -> its process (its own report)
        self.lost: dict[int, float] = {}  # worker index -> when it went missing
        self.drained: dict[int, int] = {}  # worker index -> sends it purged at the drain
        self.writer: Any = None
        self._early: list[dict] = []
        self.runner.register_message(dist.SENDS, self._sends)
        self.runner.register_message(dist.DRAINED, self._drained)
        self.runner.register_message(dist.READY, self._ready)
        self.runner.register_message(dist.JOIN, self._join)
        logs = Path(spec.get("log_dir") or Path(spec["history_path"]).parent)
        logs.mkdir(parents=True, exist_ok=True)
        root = Path(__file__).resolve().parents[2]
        self.procs = []
        for i in range(self.local):
            with open(logs / f"load-worker-{i}.log", "ab") as out:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "locust", "-f", str(root / "workloads" / "kafka_produce.py"), "--worker",
                     "--master-host", host, "--master-port", str(port), "--loglevel", "WARNING"],
                    cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))))
        wait_s = float(spec.get("connect_timeout_s") or 60.0)
        deadline = time.monotonic() + wait_s
        while len(self.pids) < self.expected:
            dead = [p.pid for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.runner.quit()  # the workers that did connect leave
                self.close()
                why = f"worker process(es) {dead} exited" if dead else f"not within {wait_s:g} s"
                raise LoadError(f"load workers: {len(self.pids)} of {self.expected} connected to the "
                                f"master at {self.address} ({why}; see {logs}/load-worker-*.log)")
            gevent.sleep(0.1)
        self._watch = gevent.spawn(self._watch_workers)

    def _join(self, msg: Any, **_kw: Any) -> None:
        self.names[self.runner.get_worker_index(msg.node_id)] = msg.node_id
        self.runner.send_message(self.dist.HELLO, {"workers": self.expected, "users": self.users,
                                                   "rate": self.shape.rate_at()}, client_id=msg.node_id)

    def _ready(self, msg: Any, **_kw: Any) -> None:
        self.pids[self.runner.get_worker_index(msg.node_id)] = int(msg.data["pid"])

    def _sends(self, msg: Any, **_kw: Any) -> None:
        for a in msg.data["attempts"]:
            self.pending[a["msg_id"]] = a
        self.stats.produced += len(msg.data["attempts"])
        rows = msg.data["rows"]
        for r in rows:
            self.pending.pop(r["msg_id"], None)
            self.stats.record(r["outcome"], r["ts"], r["ack_ts"], r["size_bytes"])
        if self.writer is None:
            self._early.extend(rows)
        else:
            self.writer.extend(rows)

    def _drained(self, msg: Any, **_kw: Any) -> None:
        self.drained[int(msg.data["worker"])] = int(msg.data["purged"] or 0)

    def start(self, writer: Any) -> None:
        """The load starts: outcomes go to ``writer``; the rate follows the master's shape."""
        import gevent

        self.writer = writer
        writer.extend(self._early)
        self._early = []
        self._rate = gevent.spawn(self._send_rate)

    def _send_rate(self) -> None:
        import gevent

        while True:
            self.runner.send_message(self.dist.RATE, {"rate": self.shape.rate_at()})
            gevent.sleep(0.25)

    def _watch_workers(self) -> None:
        """A worker Locust's heartbeats mark missing (3 s without one) is lost: reported once."""
        import gevent

        while True:
            gone = {self.runner.get_worker_index(c.id) for c in self.runner.clients.missing}
            for i in sorted(gone - set(self.lost)):
                self.lost[i] = time.time()
                _emit({"event": "worker_lost", "ts": self.lost[i], "worker": f"w{i}",
                       "client_id": self.names.get(i), "pending": self.pending_of(i)})
            gevent.sleep(0.2)

    def pending_of(self, worker: int) -> int:
        lo, hi = worker << self.dist.ID_BITS, (worker + 1) << self.dist.ID_BITS
        return sum(1 for m in self.pending if lo <= m < hi)

    def drain(self, timeout_s: float) -> int:
        """Every live worker stops sending, waits up to ``timeout_s`` for its acks and purges the
        rest; returns the sends purged."""
        import gevent

        self.runner.send_message(self.dist.DRAIN, {"timeout_s": timeout_s})
        end = time.monotonic() + timeout_s + 10
        while time.monotonic() < end:
            live = set(self.names) - set(self.lost)
            if live <= set(self.drained):
                break
            gevent.sleep(0.1)
        gevent.sleep(2 * self.dist.FLUSH_S)  # the last outcomes, sent with the drained answer
        return sum(self.drained.values())

    def close(self) -> dict[str, Any]:
        """Attempts without an outcome become ``info`` rows; the local workers are stopped (by
        PID). Returns the summary's ``workers``."""
        import subprocess

        for g in (getattr(self, "_watch", None), getattr(self, "_rate", None)):
            if g is not None:
                g.kill()
        unresolved = list(self.pending.values())
        for a in unresolved:
            w = a["msg_id"] >> self.dist.ID_BITS
            a["error"] = (f"worker w{w} lost before it reported this send's outcome" if w in self.lost
                          else f"worker w{w} reported no outcome for this send")
        if unresolved and self.writer is not None:
            self.writer.extend(unresolved)
        self.pending = {}
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        return {**self.describe(), "count": len(self.names), "lost": [f"w{i}" for i in sorted(self.lost)],
                "unresolved_info": len(unresolved), "purged": sum(self.drained.values())}

    def describe(self) -> dict[str, Any]:
        """The master and its workers: Locust's client id and the PID each reported."""
        return {"master": self.address, "expected": self.expected,
                "names": {f"w{i}": c for i, c in sorted(self.names.items())},
                "pids": {f"w{i}": p for i, p in sorted(self.pids.items())}}


def drive(spec: dict[str, Any], wait_for_go: bool = False) -> int:
    """Run the Locust producer load described by ``spec`` (see :func:`bench.runner.load_spec`).

    ``wait_for_go``: get ready (imports, Locust's environment: ~0.6 s of CPU), print ``ready``
    and start the users only on SIGUSR2, so the runner can start this process while it prefills
    and the load begins the moment it is released. Nothing touches the cluster or the history
    before the go; SIGTERM / SIGINT, or the runner gone, end the wait without a load."""
    import locust  # noqa: F401  (first: gevent monkey-patching)
    import gevent
    import signal

    from locust.env import Environment

    from bench.history.store import HistoryWriter, to_table
    from workloads import kafka_produce as kp
    from workloads.shapes import make_shape

    # pyarrow imports pandas at its first conversion (~0.5 s on 2 cores): done now, not at the
    # history's first flush, where it stalled every producer (the gevent loop) for half a second.
    to_table([])
    stats = LiveStats()
    # A topic's "producers" (the scenario's Topic.producers): its own users, producing to it only.
    topics = ",".join(f"{t['name']}:{t['partitions']}" + (f":{t['producers']}" if t.get("producers") else "")
                      for t in spec["topics"])
    opts = kp.options(
        kafka_bootstrap=spec["bootstrap"], kafka_topics=topics, kafka_message_bytes=spec["message_bytes"],
        kafka_rate=spec["rate"], kafka_users=spec["producers"], kafka_key_distribution=spec["key_distribution"],
        kafka_shape=spec["shape"]["kind"], kafka_duration_s=spec["duration_s"], kafka_drain_s=spec["drain_s"],
        kafka_producer_config=json.dumps(clients.resolve(spec.get("client"))),
        kafka_client_library=spec.get("client_library") or "librdkafka",
        **({"kafka_linger_ms": spec["linger_ms"]} if spec.get("linger_ms") is not None else {}),
        kafka_pace_partitions=bool(spec.get("pace_partitions")),
    )
    shape_params = {k: v for k, v in spec["shape"].items() if k != "kind"}
    shape = make_shape(spec["shape"]["kind"], spec["rate"], spec["duration_s"], spec["producers"], hold=True,
                       **shape_params)
    pool = None
    distributed = int(spec.get("workers") or 0) + int(spec.get("remote_workers") or 0) > 0
    if distributed:
        opts.headless, opts.enable_rebalancing = True, True  # a lost worker's users go to the others
    env = Environment(user_classes=[kp.KafkaProducerUser], shape_class=shape, parsed_options=opts,
                      events=locust.events)
    env.kafka_stats = stats
    if distributed:
        try:
            pool = WorkerPool(env, spec, stats, shape)
        except LoadError as exc:
            print(exc, file=sys.stderr)
            _emit({"event": "error", "ts": time.time(), "error": str(exc)})
            return 1
        runner = pool.runner
        _emit({"event": "workers", "ts": time.time(), **pool.describe()})
    else:
        runner = env.create_local_runner()
    from gevent.event import Event

    stop_early, go, end_now = Event(), Event(), Event()
    gevent.signal_handler(signal.SIGTERM, stop_early.set)
    gevent.signal_handler(signal.SIGINT, stop_early.set)
    # The runner's "the actions are done" (workload.end_after_actions_s): end as at duration_s.
    gevent.signal_handler(signal.SIGUSR1, end_now.set)
    if wait_for_go:
        gevent.signal_handler(signal.SIGUSR2, go.set)
        parent = os.getppid()
        _emit({"event": "ready", "ts": time.time()})
        while not go.is_set():
            if stop_early.is_set() or os.getppid() != parent:
                runner.quit()
                if pool is not None:
                    pool.close()
                return 0
            go.wait(0.1)
    writer = HistoryWriter(spec["history_path"], flush_interval_s=2.0)
    env.kafka_history = writer
    if pool is not None:
        pool.start(writer)

    def progress() -> None:
        last_t, last_acked = time.monotonic(), 0
        while True:
            gevent.sleep(0.5)
            now = time.monotonic()
            lat = stats.take_latencies()
            _emit({"event": "progress", "ts": time.time(), "t": now - t0, "users": runner.user_count,
                   "target_rate": shape.rate_at(), "produced": stats.produced,
                   "skipped": stats.skipped, "queued": stats.produced - stats.sent, "sent": stats.sent, "acked": stats.acked,
                   "failed": stats.failed, "info": stats.info,
                   "rate": (stats.acked - last_acked) / max(1e-6, now - last_t),
                   "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99)})
            last_t, last_acked = now, stats.acked

    t0 = time.monotonic()
    started = time.time()
    runner.start_shape()
    _emit({"event": "started", "ts": started})
    reporter = gevent.spawn(progress)
    end = t0 + float(spec["duration_s"])
    while time.monotonic() < end and not stop_early.is_set() and not end_now.is_set():
        stop_early.wait(min(0.2, max(0.0, end - time.monotonic())))
    early = stop_early.is_set()
    after_actions = end_now.is_set() and not early and time.monotonic() < end
    drain_s = 2.0 if early else float(spec["drain_s"])
    purged = pool.drain(drain_s) if pool is not None else kp.drain_all(drain_s)
    runner.quit()
    reporter.kill()
    workers = pool.close() if pool is not None else None
    writer.close()
    total = env.stats.total
    # error: what stopped the producers early, in one line (workloads/cli.py, stop_run), or None
    _emit({"event": "finished", "ts": time.time(), "early": early, "after_actions": after_actions, "purged": purged,
           "error": getattr(env, "kafka_error", None), "produced": stats.produced, "skipped": stats.skipped,
           "sent": stats.sent, "acked": stats.acked, "failed": stats.failed, "info": stats.info,
           "acked_bytes": stats.acked_bytes, "load_seconds": time.monotonic() - t0, "workers": workers,
           "client": kp.client_report(),
           "locust": {"num_requests": total.num_requests, "num_failures": total.num_failures,
                      "median_response_time_ms": total.median_response_time,
                      "p99_response_time_ms": total.get_response_time_percentile(0.99),
                      "avg_response_time_ms": total.avg_response_time,
                      "total_rps": total.total_rps}})
    return 0


# --------------------------------------------------------------------------------------------
# Workload consumers: where they start, and the Locust consumer process


def high_watermarks(bootstrap: str, tps: Iterable[tuple[str, int]], *, timeout_s: float = 30.0,
                    client: Mapping[str, Any] | None = None) -> dict[tuple[str, int], int]:
    """Each partition's high watermark now (LoadError naming the partition if one cannot be
    read within ``timeout_s``)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(clients.librdkafka(bootstrap, {"group.id": "bench-watermarks", "enable.auto.commit": False,
                                                "client.id": "bench-watermarks"}, client))
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for tp in tps:
            while True:
                try:
                    out[tp] = c.get_watermark_offsets(TopicPartition(*tp), timeout=5, cached=False)[1]
                    break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        raise LoadError(f"high watermark of {tp[0]}-{tp[1]}: {exc}") from None
                    time.sleep(0.5)
    finally:
        c.close()
    return out


def commit_offsets(bootstrap: str, group: str, offsets: Mapping[tuple[str, int], int], *,
                   client: Mapping[str, Any] | None = None) -> None:
    """Commit ``offsets`` for ``group`` before any member joins (a commit outside any generation,
    as Kafka's tools reset a group's offsets), so the group starts exactly there."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer(clients.librdkafka(bootstrap, {"group.id": group, "enable.auto.commit": False,
                                                "client.id": "bench-offsets"}, client))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                res = c.commit(offsets=[TopicPartition(t, p, off) for (t, p), off in offsets.items()],
                               asynchronous=False)
                bad = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in res or () if tp.error]
                if not bad:
                    return
                err = "; ".join(bad)
            except KafkaException as exc:
                err = str(exc)
            if time.monotonic() > deadline:
                raise LoadError(f"group {group}: committing its start offsets failed: {err}")
            time.sleep(0.5)
    finally:
        c.close()


def drive_consumers(spec: dict[str, Any]) -> int:
    """Run the workload's consumers (``spec["members"]``: one ``{group, member, set, topics,
    partitions, start, assign, wait_for_go}`` per Locust user, see
    :class:`workloads.kafka_consume.KafkaConsumerUser`). Prints ``ready`` once every member has
    joined (its first assignment, even an empty one) and every group has all its partitions,
    ``progress`` every 0.5 s and ``finished``. SIGUSR2: go (the load started; paused catch-up
    readers start). SIGUSR1: finish - read on until every group has delivered up to the high
    watermarks of now (at most ``drain_s``), then leave the groups. SIGTERM / SIGINT, or the
    runner gone, or ``max_s`` passed: leave at once. Whatever happens, the members close and the
    history is written; an error is reported in ``finished``."""
    import locust  # noqa: F401  (first: gevent monkey-patching)
    import gevent
    import signal
    from gevent.event import Event

    from locust.env import Environment

    from bench.history.store import HistoryWriter, to_table
    from workloads import kafka_consume as kc

    to_table([])  # pyarrow's first conversion imports pandas: before the members start (see drive)
    parent = os.getppid()
    t0 = time.monotonic()
    give_up = t0 + float(spec.get("max_s", 3600))
    writer = HistoryWriter(spec["history_path"], flush_interval_s=2.0)
    members = spec["members"]
    # earliest: a member whose position is out of range re-reads (at least once), never skips
    opts = kc.options(kafka_bootstrap=spec["bootstrap"], kafka_start="earliest",
                      kafka_consumer_config=json.dumps(clients.resolve(spec.get("client"))))
    env = Environment(user_classes=[kc.KafkaConsumerUser], parsed_options=opts, events=locust.events)
    env.kafka_history = writer
    env.kafka_consumers = members
    runner = env.create_local_runner()
    finish, stop_now, go = Event(), Event(), Event()
    env.kafka_go = go
    go_ts: list[float] = []

    def on_go() -> None:
        go_ts.append(time.time())
        go.set()

    gevent.signal_handler(signal.SIGUSR2, on_go)
    gevent.signal_handler(signal.SIGUSR1, finish.set)
    gevent.signal_handler(signal.SIGTERM, stop_now.set)
    gevent.signal_handler(signal.SIGINT, stop_now.set)
    groups: dict[str, set[tuple[str, int]]] = {}
    start: dict[str, dict[tuple[str, int], int]] = {}
    for m in members:
        groups.setdefault(m["group"], set()).update((t, int(p)) for t, p in m["partitions"])
        start.setdefault(m["group"], {}).update({(t, int(p)): int(off) for t, p, off in m.get("start") or ()})

    def users() -> list:
        return list(kc._active)

    def orphaned() -> bool:
        return os.getppid() != parent or time.monotonic() > give_up

    def positions() -> dict[str, dict[tuple[str, int], int]]:
        # Where each group stands: its start offsets until a member delivered past them.
        out = {g: dict(st) for g, st in start.items()}
        for u in users():
            g = out.setdefault(u.group_id, {})
            for tp, off in u.next_offset.items():
                g[tp] = max(g.get(tp, -1), off)
        return out

    behind: dict[str, dict[str, int]] = {}
    error: str | None = None
    reporter = None
    try:
        runner.start(len(members), spawn_rate=len(members))
        deadline = t0 + float(spec.get("ready_timeout_s", 60))
        while True:
            us = users()
            assigned: dict[str, set] = {}
            for u in us:
                assigned.setdefault(u.group_id, set()).update(u.assigned)
            waiting = {g: sorted(want - assigned.get(g, set())) for g, want in groups.items()
                       if want - assigned.get(g, set())}
            joined = len(us) == len(members) and all(u.assignments > 0 for u in us)
            if not waiting and joined:
                break
            crashed = [e["msg"] for e in runner.exceptions.values()]
            if crashed or time.monotonic() > deadline or stop_now.is_set() or orphaned():
                why = (f"a consumer user failed: {crashed[0]}" if crashed else
                       f"partitions not assigned {waiting}" if waiting else
                       f"{sum(1 for u in us if u.assignments)} of {len(members)} members joined")
                _emit({"event": "error", "ts": time.time(), "error": f"consumers not ready: {why}"})
                return 1
            gevent.sleep(0.05)
        _emit({"event": "ready", "ts": time.time(), "seconds": time.monotonic() - t0})

        def progress() -> None:
            last_t, last_n = time.monotonic(), 0
            while True:
                gevent.sleep(0.5)
                now = time.monotonic()
                n = sum(u.delivered for u in users())
                _emit({"event": "progress", "ts": time.time(), "delivered": n,
                       "rate": (n - last_n) / max(1e-6, now - last_t)})
                last_t, last_n = now, n

        reporter = gevent.spawn(progress)
        while not finish.is_set() and not stop_now.is_set() and not orphaned():
            gevent.sleep(0.1)
        if finish.is_set() and not stop_now.is_set():
            # Everything acked so far is below these marks: read on until each group has it all.
            hw = high_watermarks(spec["bootstrap"], sorted(set().union(*groups.values())),
                                 client=spec.get("client"))
            end = time.monotonic() + float(spec["drain_s"])
            while True:
                pos = positions()
                behind = {g: {f"{t}-{p}": hw[(t, p)] - pos[g].get((t, p), 0) for t, p in sorted(want)
                              if pos[g].get((t, p), 0) < hw[(t, p)]} for g, want in groups.items()}
                behind = {g: b for g, b in behind.items() if b}
                if not behind or time.monotonic() > end or stop_now.is_set() or orphaned():
                    break
                gevent.sleep(0.1)
    except Exception as exc:  # reported in `finished`; the members still close, the history is written
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if reporter is not None:
            reporter.kill()
        delivered = sum(u.delivered for u in users())
        for u in users():
            u.close()
        runner.quit()
        writer.close()
    total = env.stats.total
    _emit({"event": "finished", "ts": time.time(), "delivered": delivered, "behind": behind,
           "go_ts": go_ts[0] if go_ts else None, "error": error,
           "caught_up": not behind and error is None and finish.is_set(), "early": stop_now.is_set(),
           # Locust's own stats: its response time is the record's CreateTime to delivery (ms, the
           # client's clock), not the checkers' end-to-end latency (send call to first delivery).
           "locust": {"num_requests": total.num_requests, "num_failures": total.num_failures,
                      "median_response_time_ms": total.median_response_time,
                      "p99_response_time_ms": total.get_response_time_percentile(0.99)}})
    return 0 if error is None else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    wait_for_go = "--wait-for-go" in argv  # producers only: start on SIGUSR2 (see drive)
    args = [a for a in argv if a != "--wait-for-go"]
    if len(args) != 1:
        print("usage: python -m bench.run.load SPEC.json [--wait-for-go]", file=sys.stderr)
        return 2
    with open(args[0]) as f:
        spec = json.load(f)
    # One spec per process: the producers', or the consumers' (spec["members"]).
    return drive_consumers(spec) if "members" in spec else drive(spec, wait_for_go)


if __name__ == "__main__":
    sys.exit(main())
