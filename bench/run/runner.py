"""The harness runner: one scenario (or each run of its matrix) end to end.

For each run: start a cluster, create the topics with a fixed placement, prefill (meanwhile the
Locust load process, ``bench/run/load.py``, gets ready), start the scenario's consumer groups
(``bench/run/consumers.py``) if any, release the load process, execute the actions at their
``at_s`` (seconds after the load started) while a metadata poller records leader changes as a
client sees them, stop the load (drain acks), read every partition back with a verifying
consumer, stop the cluster, translate the cluster's event journals
(``bench/history/journal.py``), write the history and run the checkers.

Run layout (the aggregation depends on it)::

    results/<scenario>/<timestamp>/             one run (no matrix, or a matrix of one)
    results/<scenario>/<timestamp>/<run_id>/    one directory per run of a matrix
        scenario.yaml       the resolved scenario of this run (matrix expanded)
        history.parquet     the run's history (bench/history/store.py), sorted by ts
        summary.json        bench/check/summary.py: run info, params, checks, moves, producer
        logs/               every process's log: controller.log, broker-N.log, object store,
                            load.log (Locust process stderr), load.jsonl (its progress lines),
                            load-spec.json (what it was asked to do), harness.log; with
                            consumers: consume.log, consume.jsonl, consume-spec.json
        cluster/            cluster.json and <process>/events.jsonl (the cluster's journals; the
                            cluster ran in a temporary directory, its data is not kept unless
                            --keep-data, then it is moved to cluster-data/); with an object-store
                            latency, objstore-proxy.stats.json (the proxy's requests and bytes)

``<timestamp>`` is UTC ``YYYYmmddTHHMMSSZ``. A matrix invocation also writes ``runs.json`` in
``results/<scenario>/<timestamp>/`` listing its runs.

Placement: partition ``i`` of the ``k``-th topic (counting all partitions of earlier topics, in
workload order) gets replicas ``[b(j), b(j+1), ...]`` where ``j`` = running partition index and
``b(j)`` = broker ``1 + j mod brokers``: the first partition lives on broker 1.

Time zero of the action timeline is the moment the load process reports that its users started.
The cluster is always stopped (also on Ctrl-C, SIGTERM and failure); the load process is stopped by
its PID. Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.check import summary as summary_mod
from bench.history.journal import MoveWindows, translate_all
from bench.history.names import (
    EVENT_CLUSTER_STARTED,
    EVENT_CONSUMERS_FINISHED,
    EVENT_CONSUMERS_READY,
    EVENT_EXTERNAL_CLUSTER,
    EVENT_HARNESS_ERROR,
    EVENT_JOURNAL_TRANSLATED,
    EVENT_LOAD_FINISHED,
    EVENT_LOAD_STARTED,
    EVENT_LOAD_WORKER_LOST,
    EVENT_LOAD_WORKERS,
    EVENT_PREFILL,
    EVENT_RUN_END,
    EVENT_RUN_ERROR,
    EVENT_RUN_START,
    EVENT_TOPICS_CREATED,
    EVENT_VERIFY,
)
from bench.history.store import SCHEMA, HistoryWriter, event_row, read_history
from bench.run import clients, ending, observe, provenance
from bench.run.cluster import RUN_POINTER, Cluster
from bench.run.consumers import ConsumerProcess
from bench.run.external import ExternalCluster
from bench.run.load import json_lines, prefill, stop_child, verify
from bench.run.network import rate_bits
from bench.run.live_display import LiveDisplay
from bench.run.state import RunState
from bench.run.move_estimate import EstimateFn, RunEstimator
from bench.run.timeline import MOVE_GRACE_S, run_timeline
from bench.scenario import Scenario, Topic, expand, get_path, split_repetition
from workloads import clients as load_clients
from workloads.clients.base import DriverError
from systems.core.config import known as config_keys
from bench.paths import ROOT

DEFAULT_RESULTS = ROOT / "results"

VERIFY_MIN_BYTES_PER_S = 4e6  # the verifying consumer's bound: 120 s + the partitions' bytes at this rate
# ... + their prefill records at this rate: a shared partition of 100,000 one-record objects is read
# back one object (two ranged GETs) at a time per fetch, ~400 records/s on 2 cores (shared-open.yaml)
VERIFY_MIN_RECORDS_PER_S = 250.0
DRAIN_S = 20.0  # load process: wait this long for outstanding acks after the load
# The partial histories merged into history.parquet: the runner's, the producers', the consumers'.
HISTORY_PARTS = (".history-runner.parquet", ".history-load.parquet", ".history-consume.parquet")

log = logging.getLogger("bench.run.runner")


class RunError(RuntimeError):
    """A run could not be carried out (the message says why; the run directory has the logs)."""


# --------------------------------------------------------------------------------------------
# Scenario -> cluster settings


def broker_config(sc: Scenario) -> dict[str, str]:
    """Kafka-named broker settings for the scenario's system section (the profile translates),
    with the raw ``system.extra`` settings this system knows (a two-system scenario may set some
    only the other reads)."""
    cfg = sc.profile.broker_settings(sc.settings())
    known = config_keys(sc.profile.config_defaults)
    cfg.update({k: v for k, v in sc.system.extra.items() if k in known})
    return cfg


def topic_configs(sc: Scenario, topic: Topic) -> dict[str, str]:
    cfg = sc.profile.topic_configs(sc.settings())
    # Always on the topic: a cluster's own default may be above the topic's replication factor.
    cfg["min.insync.replicas"] = str(sc.min_insync_replicas(topic))
    return cfg


def timestamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


# --------------------------------------------------------------------------------------------
# One run


class Run:
    def __init__(self, run_id: str, sc: Scenario, run_dir: Path, *, matrix: dict[str, Any] | None = None,
                 progress: Callable[[RunState], None] | None = None, keep_data: bool = False,
                 start_timeout_s: float = 90.0, estimates: EstimateFn | None = None) -> None:
        self.run_id = run_id
        self.config_id, self.repetition = split_repetition(run_id)
        self.sc = sc
        self.dir = Path(run_dir)
        self.matrix = dict(matrix or {})
        self.progress = progress
        self.keep_data = keep_data
        self.start_timeout_s = start_timeout_s
        self.state = RunState(run_id, sc)
        self.windows = MoveWindows()
        # The estimate before each move (bench/run/move_estimate.py), when the command gives one.
        self.estimates = estimates
        self.estimator: RunEstimator | None = None
        self.cluster: Cluster | ExternalCluster | None = None
        self.cluster_tmp: Path | None = None
        self.load_proc: subprocess.Popen | None = None
        self.consumers: ConsumerProcess | None = None
        self.prefilled: dict[tuple[str, int], dict] = {}
        self.history: HistoryWriter | None = None
        self.threads: list[threading.Thread] = []
        self._admin_client = None
        self._observer_client = None
        self._hist_lock = threading.Lock()

    # -- helpers -----------------------------------------------------------------------------

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    def event(self, name: str, detail: dict[str, Any] | None = None, *, ts: float | None = None,
              topic: str | None = None, partition: int = -1) -> None:
        self.history.append(event_row(name, time.time() if ts is None else ts, detail, topic=topic,
                                      partition=partition))

    def thread(self, target: Callable, name: str, *args: Any) -> threading.Thread:
        def body() -> None:
            try:
                target(*args)
            except Exception as exc:  # recorded, never silent
                log.exception("thread %s failed", name)
                try:
                    self.event(EVENT_HARNESS_ERROR, {"thread": name, "error": f"{type(exc).__name__}: {exc}"})
                except Exception:
                    pass

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        self.threads.append(t)
        return t

    def sleep_until(self, t: float) -> bool:
        """Sleep until wall time t; False if the run is stopping."""
        while not self.state.stop.is_set():
            left = t - time.time()
            if left <= 0:
                return True
            self.state.stop.wait(min(left, 0.2))
        return False

    # -- the run -----------------------------------------------------------------------------

    def execute(self) -> dict[str, Any]:
        if not self.sc.profile.launched:
            # Before anything is written: the cluster's brokers and defaults complete the scenario
            # (its topics get the run's prefix); an unreachable cluster fails here, fast.
            self.cluster = ExternalCluster(self.sc.system, self.sc.topic_prefix)
            try:
                facts = self.cluster.connect()
                self.sc = self.sc.for_cluster(self.cluster.broker_ids(),
                                              facts["defaults"]["default.replication.factor"],
                                              facts["defaults"]["min.insync.replicas"])
            except BaseException:
                self.cluster.stop()  # its admin client; nothing was created yet
                raise
            self.state = RunState(self.run_id, self.sc)
        sc = self.sc
        self.dir.mkdir(parents=True, exist_ok=False)
        self.logs.mkdir()
        (self.dir / "scenario.yaml").write_text(sc.to_yaml())
        ending.record_start(self.dir)  # so `bench list` tells a running run from a killed one
        handler = logging.FileHandler(self.logs / "harness.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("bench").addHandler(handler)
        logging.getLogger("bench").setLevel(logging.INFO)
        self.history = HistoryWriter(self.dir / ".history-runner.parquet", flush_interval_s=2.0)
        started = time.time()
        params = summary_mod.params_of(sc, self.matrix)
        configuration = summary_mod.configuration_of(sc)
        # Runs at different object-store latencies are different configurations (never pooled).
        params["object_store_latency"] = configuration["object_store_latency"] = sc.object_store_latency()
        self.event(EVENT_RUN_START, {"run_id": self.run_id, "scenario": sc.name, "system": sc.system.kind,
                                 "started_at": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).isoformat(),
                                 "provenance": provenance.collect(  # a cluster not started here: its links are not known
                                     links_emulated=sc.network.link_rate is not None if sc.profile.launched else None),
                                 "client_settings": clients.applied(sc.system.client),
                                 "configuration": configuration, "params": params,
                                 "matrix": self.matrix, "config_id": self.config_id,
                                 "repetition": self.repetition, "repetitions": sc.repetitions}, ts=started)
        error: BaseException | None = None
        ended = ending.COMPLETED
        try:
            self._run_body()
        except BaseException as exc:  # KeyboardInterrupt included: clean up, then re-raise
            error = exc = ending.as_interrupt(exc)
            self.state.stop.set()
            ended = ending.record_end(self.dir, exc)  # first: a second Ctrl-C in the teardown cannot lose it
            try:
                self.event(EVENT_RUN_ERROR, {"error": f"{type(exc).__name__}: {exc}"})
            except Exception:
                pass
        finally:
            self.state.stop.set()
            self._teardown()
        if error is None:
            ending.record_end(self.dir, None)
        finished = time.time()
        self.event(EVENT_RUN_END, {"finished_at": _dt.datetime.fromtimestamp(finished, _dt.timezone.utc).isoformat(),
                               "duration_s": round(finished - started, 3),
                               "completed": error is None,
                               "error": None if error is None else f"{type(error).__name__}: {error}",
                               "ended": ended},
                   ts=finished)
        self._finalize_history()
        logging.getLogger("bench").removeHandler(handler)
        handler.close()
        summary = summary_mod.write_summary(self.dir)
        if error is not None:
            raise error
        return summary

    def _run_body(self) -> None:
        sc, st = self.sc, self.state
        st.phase = "cluster start"
        self._notify()
        if self.cluster is None:
            # The cluster works in a short temporary directory (unix socket paths are limited to
            # ~107 bytes, and run directories can be deep); its logs and events are collected at
            # the end.
            self.cluster_tmp = Path(tempfile.mkdtemp(prefix="rb-", dir=os.environ.get("BENCH_CLUSTER_TMP")))
            # So `cluster clean --dir RUN_DIR` finds the cluster after a kill -9 of this process.
            (self.dir / RUN_POINTER).write_text(str(self.cluster_tmp) + "\n")
            # With a link rate the nodes run in their own namespaces; everything the runner starts
            # (load, verifying consumer, admin clients, poller) stays here and reaches them through
            # the client link, via cluster.bootstrap.
            self.cluster = Cluster(sc.system.kind, sc.system.brokers, str(self.cluster_tmp), broker_config(sc),
                                   link_rate=sc.network.link_rate,
                                   object_store_link_rate=sc.network.object_store_link_rate,
                                   client_link_rate=sc.network.client_link_rate,
                                   object_store_latency=(sc.network.object_store_latency
                                                         if sc.profile.object_store is not None else None))
        self.cluster.start(timeout=self.start_timeout_s)
        if not self.cluster.launched:
            self.event(EVENT_EXTERNAL_CLUSTER, {**self.cluster.facts(), "set": self.cluster.config})
        network = self.cluster.network.to_dict() if self.cluster.network else None
        self.event(EVENT_CLUSTER_STARTED, {"bootstrap": self.cluster.bootstrap, "config": self.cluster.config,
                                       "brokers": self.cluster.broker_ids(), "network": network})
        self._create_topics()
        self._start_poller()
        self._start_observer()
        self._wait_partitions(lambda m: m["leader"] >= 0, 30.0, "partitions without a leader")
        # The load process gets ready (Python, Locust: ~0.6 s of CPU) while the prefill runs and
        # the links settle; its users start only when it is released below.
        self._spawn_load()
        sizes = {(t, p): sc.prefill_bytes_of(t) for t, p in sc.partitions() if sc.prefill_bytes_of(t)}
        if sizes:
            st.phase = "prefill"
            self._notify()
            tps = list(sizes)
            t0 = time.time()
            with self._fast_links(when=sc.prefill.fast_links):
                res = prefill(self.cluster.bootstrap, tps, sizes,
                              batch_bytes=sc.prefill.batch_bytes, record_bytes=sc.prefill.record_bytes,
                              connections=sc.prefill.connections, client=sc.system.client)
                self.prefilled = res
                for (t, p), r in res.items():
                    self.event(EVENT_PREFILL, {**r, "topic": t, "partition": p, "seconds": time.time() - t0},
                               topic=t, partition=p)
                # The prefill is acked by leaders; the load starts with every replica in sync, so
                # followers catching up on the prefill neither delay acks=all nor overlap a move.
                st.phase = "prefill: followers in sync"
                self._notify()
                self._wait_partitions(lambda m: set(m["isr"]) == set(m["replicas"]), 180.0,
                                      "replicas not in sync after the prefill")
        if sc.consumers:
            st.phase = "consumers joining"
            self._notify()
            self.consumers = ConsumerProcess(sc, self.cluster.bootstrap, self.dir, self.logs, ROOT, self._consumer_event)
            self.consumers.start(self.cluster, self.prefilled, st.stop)
        st.phase = "load"
        self._notify()
        self._start_load()
        if self.consumers is not None:
            self.consumers.go()
        t_zero = st.load_started
        if self.estimates is not None and any(a.spec.is_move for a in sc.actions):
            link = sc.network.link_rate
            self.estimator = RunEstimator(
                self.estimates, lambda: clients.admin(self.cluster.bootstrap, sc.system.client, "bench-estimate"),
                {t for t, _ in sc.partitions()}, sc.system.kind if sc.profile.launched else None,
                rate_bits(link) / 8 if link else None, self.state.ack_between,
                {t: got[0] for t, _ in sc.partitions() if (got := sc.producers_of(t)) is not None})
        self.thread(run_timeline, "timeline", self, t_zero)
        self.thread(observe.sample_processes, "processes", self, t_zero + sc.workload.duration_s)
        if self.cluster.network is not None:
            self.thread(observe.sample_links, "links", self, self.cluster.network, t_zero + sc.workload.duration_s)
        load_end = t_zero + sc.workload.duration_s
        # Wait for the load process: duration + drain + slack.
        deadline = load_end + DRAIN_S + 30
        ending = False
        while self.load_proc.poll() is None:
            if time.time() > deadline:
                raise RunError(f"load process did not finish by its deadline (pid {self.load_proc.pid})")
            if st.stop.wait(0.2):
                raise RunError("run stopped")
            if not ending and self._actions_done_for(sc.workload.end_after_actions_s):
                ending = True  # our child, still running (polled above)
                log.info("every action done %.0f s ago: ending the load", sc.workload.end_after_actions_s)
                self.load_proc.send_signal(signal.SIGUSR1)
            self._notify()
        st.load_over.set()  # (already set by its "finished" line, unless it died without one)
        if self.load_proc.returncode != 0:
            raise RunError(f"load process exited with code {self.load_proc.returncode}; see {self.logs / 'load.log'}")
        st.phase = "waiting for moves"
        self._notify()
        t_moves = time.time() + MOVE_GRACE_S
        for a in st.actions:
            while a.status in ("pending", "running") and time.time() < t_moves and not st.stop.is_set():
                time.sleep(0.1)
                self._notify()
        if self.consumers is not None:
            st.phase = "consumers catching up"
            self._notify()
            problem = self.consumers.finish()
            if problem is not None:  # the delivery checker judges what was delivered; say why it stopped
                log.error("consumers: %s", problem)
                self.event(EVENT_HARNESS_ERROR, {"thread": "consumers", "error": problem})
        st.phase = "verify"
        self._notify()
        tps = sc.partitions()
        # Bounded; the whole partition is read back, so the bound grows with the prefill and with
        # what the load wrote (at its nominal rate: a 30-minute soak writes GBs).
        load_bytes = (sc.workload.produce_rate_msgs_per_s * sc.workload.duration_s
                      * (sc.workload.message_bytes or 0))
        timeout = (120.0 + (sum(sc.prefill_bytes_of(t) for t, _ in tps) + load_bytes) / VERIFY_MIN_BYTES_PER_S
                   + sum(int(r.get("messages") or 0) for r in self.prefilled.values()) / VERIFY_MIN_RECORDS_PER_S)
        with self._fast_links(settle=False):  # the cluster stops after it
            res = verify(self.cluster.bootstrap, tps, self.history.extend, timeout_s=timeout,
                         group=f"verify-{self.run_id}"[:200], client=sc.system.client)
        for (t, p), r in res.items():
            self.event(EVENT_VERIFY, {"topic": t, "partition": p, **r}, topic=t, partition=p)
        st.verify = {f"{t}-{p}": r for (t, p), r in res.items()}
        st.phase = "stopping"
        self._notify()

    @contextlib.contextmanager
    def _fast_links(self, settle: bool = True, when: bool = True):
        """Prefill and verify lie outside the measurement: the nodes' links run at the client
        link's rate meanwhile (a shared broker's 100mbit link carries each prefill byte twice, to
        its WAL and in the upload: 6 MB/s), and are back at their own rates before the load."""
        net = self.cluster.network if self.cluster is not None else None
        fast = self.sc.network.client_link_rate
        saved = {}
        if net is not None and fast is not None and when:
            saved = {n: r for n, r in net.rates.items() if rate_bits(r) < rate_bits(fast)}
        try:
            for n in saved:
                self.cluster.set_link_rate(n, fast)
            yield
            if saved and settle:
                self._wait_links_quiet(saved)
        finally:
            for n, r in saved.items():
                self.cluster.set_link_rate(n, r)

    def _wait_links_quiet(self, slow: dict[str, str], timeout_s: float = 180.0) -> None:
        """Until what the prefill left in flight (a shared broker's upload backlog) has drained:
        every link about to slow down carries under a tenth of its slow rate for 2 s running.
        Slowing a link under a full backlog starves its heartbeats (the broker gets fenced)."""
        net = self.cluster.network
        prev, quiet = observe.link_bytes(net), 0
        deadline = time.time() + timeout_s
        while quiet < 2 and time.time() < deadline and not self.state.stop.is_set():
            time.sleep(1.0)
            now = observe.link_bytes(net)
            busy = [n for n, r in slow.items() if n in now and n in prev
                    and max(now[n][0] - prev[n][0], now[n][1] - prev[n][1]) > rate_bits(r) / 8 / 10]
            quiet = 0 if busy else quiet + 1
            prev = now
        if quiet < 2:
            log.warning("links still busy after %.0fs; slowing them anyway", timeout_s)

    # -- cluster setup -----------------------------------------------------------------------

    def admin(self):
        if self._admin_client is None:
            self._admin_client = clients.admin(self.cluster.bootstrap, self.sc.system.client, "bench-runner")
        return self._admin_client

    def _create_topics(self) -> None:
        from kafka.admin import NewTopic

        plan = self.sc.placement()
        self.cluster.prepare_topics([t.name for t in self.sc.workload.topics])
        cfg = {t.name: topic_configs(self.sc, t) for t in self.sc.workload.topics}
        topics = [NewTopic(t.name, -1, -1, replica_assignments=plan[t.name], topic_configs=cfg[t.name])
                  for t in self.sc.workload.topics]
        res = self.admin().create_topics(topics, raise_errors=False)
        errs = [t for t in res.to_object()["topics"] if t["error_code"]] if hasattr(res, "to_object") else \
            [t for t in res["topics"] if t["error_code"]]
        if errs:
            raise RunError(f"create topics failed: {errs}")
        self.event(EVENT_TOPICS_CREATED, {"placement": {t: {str(p): r for p, r in v.items()} for t, v in plan.items()},
                                      "configs": cfg})

    def _wait_partitions(self, ready: Callable[[dict], bool], timeout: float, what: str) -> None:
        """Until every partition's metadata (as the poller last saw it) is ``ready``; RunError
        naming ``what`` and the first partitions that were not, after ``timeout`` seconds."""
        deadline = time.time() + timeout
        want = sorted(self.sc.partitions())
        behind: list[str] = []
        while time.time() < deadline:
            with self.state.lock:
                md = dict(self.state.metadata)
            behind = [f"{t}-{p}" for t, p in want if (t, p) not in md or not ready(md[(t, p)])]
            if not behind:
                return
            time.sleep(0.1)
        raise RunError(f"{what} {timeout:.0f}s on: {', '.join(behind[:5])}")

    # -- metadata poller ---------------------------------------------------------------------

    def _start_poller(self) -> None:
        from confluent_kafka.admin import AdminClient

        # librdkafka's own log lines (a killed broker's refused connections) go to harness.log.
        client = AdminClient(clients.librdkafka(self.cluster.bootstrap, {"client.id": "bench-poller",
                                                                         "socket.timeout.ms": 2000},
                                                self.sc.system.client), logger=logging.getLogger("bench.run.poller"))
        topics = [t.name for t in self.sc.workload.topics]
        self.thread(observe.poll_metadata, "poller", self, client, topics)

    def _start_observer(self) -> None:
        # Its own admin client: kafka-python's is not thread-safe and the timeline uses the runner's.
        self._observer_client = clients.admin(self.cluster.bootstrap, self.sc.system.client, "bench-observer",
                                              request_timeout_ms=5000)
        self.thread(observe.poll_protocol, "observer", self, self._observer_client,
                    [t.name for t in self.sc.workload.topics])

    # -- load process ------------------------------------------------------------------------

    def load_spec(self) -> dict[str, Any]:
        wl = self.sc.workload
        shape = {k: v for k, v in wl.shape.model_dump().items() if v is not None}
        return {"bootstrap": self.cluster.bootstrap,
                "topics": [{"name": t.name, "partitions": t.partitions, "producers": t.producers} for t in wl.topics],
                "message_bytes": wl.message_bytes, "rate": wl.produce_rate_msgs_per_s, "producers": wl.producers,
                "key_distribution": wl.key_distribution, "shape": shape, "duration_s": wl.duration_s,
                "linger_ms": wl.linger_ms, "pace_partitions": wl.pace_partitions,
                "client_library": wl.client_library,
                "drain_s": DRAIN_S, "history_path": str(self.dir / ".history-load.parquet"),
                "client": clients.plain(self.sc.system.client), "log_dir": str(self.logs),
                **self.sc.load.model_dump()}

    def _spawn_load(self) -> None:
        """Start the load process waiting for its go (``--wait-for-go``: nothing sent yet)."""
        spec_path = self.logs / "load-spec.json"
        spec_path.write_text(json.dumps(self.load_spec(), indent=2))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        err = open(self.logs / "load.log", "ab")
        try:
            self.load_proc = subprocess.Popen([sys.executable, "-m", "bench.run.load", str(spec_path), "--wait-for-go"],
                                              cwd=ROOT, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                              env=env, start_new_session=True)
        finally:
            err.close()
        self._load_ready, self._load_started = threading.Event(), threading.Event()
        self._load_reader = self.thread(self._read_load, "load-reader", self._load_ready, self._load_started)

    def _start_load(self) -> None:
        """Release the waiting load process (SIGUSR2) once it is ready; return when its users
        started (the run's time zero)."""
        deadline = time.time() + 60
        for what, ev in (("get ready", self._load_ready), ("start", self._load_started)):
            while not ev.is_set():
                if self.load_proc.poll() is not None:
                    self._load_reader.join(timeout=2)  # its output ended: every line it said is read
                    said = f": {self.state.load_error}" if self.state.load_error else f"; see {self.logs / 'load.log'}"
                    raise RunError(f"load process exited with code {self.load_proc.returncode} before starting{said}")
                if time.time() > deadline:
                    raise RunError(f"load process did not {what} within 60 s")
                ev.wait(0.05)
            if ev is self._load_ready:
                self.load_proc.send_signal(signal.SIGUSR2)  # our child, still running (polled above)

    def _actions_done_for(self, seconds: float | None) -> bool:
        """Every action has ended (each move done) ``seconds`` ago or more (False for None)."""
        st = self.state
        if seconds is None or st.moving or any(a.status in ("pending", "running") for a in st.actions):
            return False
        return time.time() >= max((a.ended or 0.0 for a in st.actions), default=0.0) + seconds

    def _consumer_event(self, what: str, detail: dict[str, Any], ts: float) -> None:
        self.event(EVENT_CONSUMERS_READY if what == "ready" else EVENT_CONSUMERS_FINISHED, detail, ts=ts)

    def _read_load(self, ready: threading.Event, started: threading.Event) -> None:
        for msg in json_lines(self.load_proc.stdout, self.logs / "load.jsonl"):
            ev = msg.get("event")
            if ev == "ready":
                ready.set()
            elif ev == "started":
                self.state.load_started = float(msg["ts"])
                self.event(EVENT_LOAD_STARTED, {"pid": self.load_proc.pid, "spec": self.load_spec()},
                           ts=float(msg["ts"]))
                started.set()
            elif ev == "progress":
                self.state.load = msg
                if isinstance(msg.get("p50_ms"), (int, float)):
                    with self.state.lock:
                        self.state.load_acks.append((float(msg["ts"]), float(msg["p50_ms"])))
            elif ev == "error":
                self.state.load_error = str(msg.get("error"))
            elif ev in ("workers", "worker_lost"):  # the load's Locust workers (load.workers)
                self.event(EVENT_LOAD_WORKERS if ev == "workers" else EVENT_LOAD_WORKER_LOST, msg, ts=float(msg["ts"]))
            elif ev == "finished":
                self.state.load_over.set()  # the samplers stop with the load (it may end before duration_s)
                self.state.load_finished = msg
                self.event(EVENT_LOAD_FINISHED, msg, ts=float(msg["ts"]))

    # -- teardown ----------------------------------------------------------------------------

    def _notify(self) -> None:
        if self.progress is not None:
            try:
                self.progress(self.state)
            except Exception:
                pass

    def _teardown(self) -> None:
        self.state.phase = "stopping"
        try:
            stop_child(self.load_proc)  # it drains for 2 s and writes its history
        except Exception:
            log.exception("stopping the load process")
        if self.consumers is not None:
            try:
                self.consumers.stop()
            except Exception:
                log.exception("stopping the consumer process")
        for t in self.threads:
            t.join(timeout=5)
        if self.estimator is not None:
            self.estimator.close()
        for c in (self._admin_client, self._observer_client):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception:
                log.exception("stopping the cluster")
            try:
                self._collect_cluster()
            except Exception:
                log.exception("collecting cluster logs/events")
        if self.cluster_tmp is not None and self.cluster_tmp.exists() and not self.keep_data:
            shutil.rmtree(self.cluster_tmp, ignore_errors=True)
        (self.dir / RUN_POINTER).unlink(missing_ok=True)  # stopped and collected: nothing to clean

    def _collect_cluster(self) -> None:
        """Journals -> history; logs -> run_dir/logs; events.jsonl and cluster.json ->
        run_dir/cluster/ (with the object-store latency proxy's counters); the temporary cluster
        directory is then removed (kept as run_dir/cluster-data with --keep-data)."""
        from systems.core.events import read_events

        if not self.cluster.launched:  # not started here: no journals, no logs of its own
            return
        cdir = Path(self.cluster.dir)
        if not cdir.is_dir():
            return
        recs = read_events(str(cdir))
        self.history.extend(translate_all(recs, self.sc.profile.journal, self.windows))
        self.event(EVENT_JOURNAL_TRANSLATED, {"records": len(recs), "move_windows": self.windows.to_list()})
        dest = self.dir / "cluster"
        dest.mkdir(exist_ok=True)
        for f in (cdir / "logs").glob("*"):
            if f.is_file():
                shutil.copy2(f, self.logs / f.name)
        if (cdir / "cluster.json").is_file():
            shutil.copy2(cdir / "cluster.json", dest / "cluster.json")
        stats = Path(self.cluster.proxy_stats_file)  # the latency proxy's counters: requests, latency added
        if stats.is_file():
            shutil.copy2(stats, dest / stats.name)
        for ev in cdir.glob("*/events.jsonl"):
            (dest / ev.parent.name).mkdir(exist_ok=True)
            shutil.copy2(ev, dest / ev.parent.name / "events.jsonl")
        if self.keep_data:
            shutil.move(str(cdir), str(self.dir / "cluster-data"))
        else:
            shutil.rmtree(cdir, ignore_errors=True)

    def _finalize_history(self) -> None:
        """Merge the runner's rows and the load process's sends into history.parquet (sorted by
        ts), then drop the two partial histories."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        self.history.close()
        tables = []
        for name in HISTORY_PARTS:
            path = self.dir / name
            try:
                tables.append(read_history(path))
            except FileNotFoundError:
                continue
        table = pa.concat_tables(tables) if tables else None
        if table is None:
            table = SCHEMA.empty_table()
        table = table.take(pc.sort_indices(table, sort_keys=[("ts", "ascending")]))
        tmp = self.dir / "history.parquet.tmp"
        pq.write_table(table, tmp, row_group_size=131_072)
        os.replace(tmp, self.dir / "history.parquet")
        for name in HISTORY_PARTS:
            path = self.dir / name
            if path.exists():
                path.unlink()
            parts = self.dir / (name + ".parts")
            if parts.exists():
                shutil.rmtree(parts)


# --------------------------------------------------------------------------------------------
# Entry points


def run_scenario(scenario: Scenario, *, results_root: Path | str = DEFAULT_RESULTS, progress: bool = True,
                 keep_data: bool = False, out_dir: Path | str | None = None,
                 estimates: EstimateFn | None = None) -> list[tuple[Path, dict]]:
    """Run every run of ``scenario`` (its matrix expanded). Returns [(run_dir, summary)].
    ``estimates``: what estimates each move before its request (bench/analysis/estimate.py
    RunModels; None: no estimates)."""
    runs = expand(scenario)
    # A load library driven in its own process is built or installed on its first use; here, before
    # anything is written or started, not inside a load's duration (a fresh Go build outlasts a short load).
    for lib in sorted({sc.workload.client_library for _, sc in runs}):
        try:
            load_clients.prepare(lib)
        except DriverError as exc:
            raise RunError(str(exc)) from None
    base = Path(out_dir) if out_dir is not None else Path(results_root) / scenario.name / timestamp()
    if base.exists() and any(base.iterdir()):
        raise RunError(f"{base} already exists")
    matrix_keys = list(scenario.matrix)
    out: list[tuple[Path, dict]] = []
    ui = LiveDisplay() if progress else None
    if len(runs) > 1:
        base.mkdir(parents=True, exist_ok=True)
        (base / "runs.json").write_text(json.dumps({"scenario": scenario.name, "runs": [r for r, _ in runs]},
                                                   indent=2))
    try:
        for n, (run_id, sc) in enumerate(runs, 1):
            run_dir = base if len(runs) == 1 else base / run_id
            resolved = sc.resolved()
            matrix = {k: get_path(resolved, k) for k in matrix_keys}
            if ui:
                ui.begin(f"[{n}/{len(runs)}] {run_id}", sc)
            try:
                summary = Run(run_id, sc, run_dir, matrix=matrix, progress=ui.update if ui else None,
                              keep_data=keep_data, estimates=estimates).execute()
            except Exception as exc:  # noqa: BLE001 - any failure of one run: record it, go on
                # This run failed (its directory holds what it got, logs included); go on.
                log.error("run %s failed: %s", run_id, exc)
                if ui:
                    ui.console.print(f"[red]run {run_id} failed: {exc}[/red]")
                try:
                    summary = json.loads((run_dir / "summary.json").read_text())
                except (OSError, ValueError):
                    summary = {"run_id": run_id, "scenario": sc.name, "system": sc.system.kind,
                               "error": f"{type(exc).__name__}: {exc}", "checks": {"valid": "unknown"}}
                summary.setdefault("error", f"{type(exc).__name__}: {exc}")
            finally:
                if ui:
                    ui.end()
            out.append((run_dir, summary))
            if ui:
                ui.print_result(run_dir, summary)
    finally:
        if ui:
            ui.close()
    return out
