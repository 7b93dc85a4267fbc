"""Locust producer users: every message goes through a real Kafka client (``acks=all``,
idempotence on): librdkafka (confluent-kafka) by default, or kafka-python, kafkajs or sarama
(``--kafka-client-library``, a scenario's ``workload.client_library``: workloads/clients/), and
every send is reported through Locust's request event (``request_type="produce"``,
``name=<topic>``, response time = send -> delivery report).

Two ways to use it:

* **The harness** (``bench/run/load.py``) drives it as a library with a ``LocalRunner``; it sets
  ``environment.kafka_history`` (anything with ``extend(rows)``, e.g. a
  :class:`bench.history.HistoryWriter`) and every send attempt becomes a history ``send`` row.
* **By hand**, with Locust's own command line and web UI, against a running cluster
  (``python -m bench cluster start ...``; README, "Load by hand: Locust")::

      locust -f workloads/kafka_produce.py --kafka-bootstrap 127.0.0.1:PORT --kafka-topics events:3 \\
          --kafka-rate 200 --headless -u 2 -t 10s

  A topic of ``--kafka-topics`` that does not exist is created first (with the partitions it
  names; ``--kafka-replication-factor``, default the cluster's); an unreachable cluster or a topic
  that cannot be used stops the run at once with one line (exit code 1). ``-u``/``-r``/``-t`` set
  the producers, their spawn rate and the run time (defaults ``--kafka-users``, all at once,
  ``--kafka-duration-s``); the shape (``ScenarioShape``) paces them to ``--kafka-rate`` over time
  (``--kafka-shape``). Every ``--kafka-*`` option can also be given as an environment variable
  (``KAFKA_BOOTSTRAP``, ``KAFKA_TOPICS``, ``KAFKA_RATE``, ...) and appears in the web UI's start
  form (no ``--headless``; ``--kafka-users`` and ``--kafka-duration-s`` as the form's own users
  and run time). ``locust -f ... --help`` does not list them (Locust prints its help
  before it imports the locustfile); ``python -m workloads -f workloads/kafka_produce.py --help``
  does (workloads/__main__.py).

Messages: the value is ``message_bytes`` of filler; headers ``id`` (the message id, unique per
process - per run under the harness's distributed master, workloads/distributed.py - and
increasing in send order per producer) and ``p`` (the producer's name) let the
verifying consumer join reads to sends. Prefill records (``bench/run/load.py``) carry a ``prefill``
header and no ``id``.

Outcome of a send (Jepsen): ``ok`` with a delivery report without error; ``fail`` only when the
message certainly never reached a broker or was definitively rejected (local queue full, purged
from the local queue, too large, invalid); ``info`` (unknown) for everything else, e.g. a message
timeout.
"""
from __future__ import annotations

import itertools
import os
import random
import time
import zlib
from typing import Any

import sys

if __package__ in (None, ""):  # `locust -f workloads/kafka_produce.py`: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gevent
from locust import User, events
from locust.env import Environment

import workloads.cli as _cli
import workloads.clients as _clients
import workloads.distributed as _dist
import workloads.shapes as _shapes  # module import: keeps shape classes out of this namespace

from workloads.messages import (  # noqa: E402,F401
    ID_HEADER, PREFILL_HEADER, PRODUCER_ACKS, PRODUCER_HEADER, PRODUCER_LINGER_MS,
)
from workloads.pacing import PartitionPacer, round_size  # noqa: E402
from workloads.topics import parse_topics, topic_of_user  # noqa: E402

OPTION_DEFAULTS: dict[str, Any] = {
    **_cli.COMMON_DEFAULTS,  # kafka_bootstrap, kafka_topics (name[:partitions[:producers]],...), ...
    "kafka_message_bytes": 4096,
    "kafka_rate": 1000.0,  # total msgs/s over all users; 0 = as fast as the client queue takes
    "kafka_users": 1,
    "kafka_key_distribution": "none",  # none (round-robin partitions) | uniform | zipf
    "kafka_shape": "steady",
    "kafka_ramp_s": None,
    "kafka_burst_every_s": None,
    "kafka_burst_factor": None,
    "kafka_burst_s": None,
    "kafka_drain_s": 20.0,  # on stop: wait this long for outstanding acks, then purge
    "kafka_linger_ms": PRODUCER_LINGER_MS,  # the producers' linger.ms (workloads/messages.py: why 5)
    "kafka_pace_partitions": False,  # workloads/pacing.py
    "kafka_producer_config": "",  # JSON object of extra settings in the client library's own names
    "kafka_client_library": _clients.DEFAULT_LIBRARY,
}


@events.init_command_line_parser.add_listener
def _add_options(parser) -> None:
    g = parser.add_argument_group("kafka producer (workloads/kafka_produce.py)")
    _cli.add_common_options(parser, g)
    add = _cli.add_option
    add(g, "--kafka-message-bytes", env_var="KAFKA_MESSAGE_BYTES", type=int,
        default=OPTION_DEFAULTS["kafka_message_bytes"], help="size of each message's value")
    add(g, "--kafka-rate", env_var="KAFKA_RATE", type=float, default=OPTION_DEFAULTS["kafka_rate"],
        help="total target msgs/s over all users (0 = as fast as possible)")
    # In the web UI the form's own "Number of users" sets it (-u/--users on the command line).
    add(g, "--kafka-users", env_var="KAFKA_USERS", type=int, default=OPTION_DEFAULTS["kafka_users"], web=False,
        help="producer users, unless -u/--users is given (with producers per topic: their sum)")
    add(g, "--kafka-key-distribution", env_var="KAFKA_KEY_DISTRIBUTION", choices=["none", "uniform", "zipf"],
        default=OPTION_DEFAULTS["kafka_key_distribution"],
        help="none: no key, partitions round-robin; uniform / zipf: keys from 100,000 / 1,000 (zipf s=1.1)")
    add(g, "--kafka-shape", env_var="KAFKA_SHAPE", choices=["steady", "ramp", "burst"],
        default=OPTION_DEFAULTS["kafka_shape"], help="how --kafka-rate varies over time")
    for opt, env, what in (("ramp-s", "KAFKA_RAMP_S", "ramp: seconds from 0 to --kafka-rate"),
                           ("burst-every-s", "KAFKA_BURST_EVERY_S", "burst: period in seconds"),
                           ("burst-factor", "KAFKA_BURST_FACTOR", "burst: rate multiplier during a burst"),
                           ("burst-s", "KAFKA_BURST_S", "burst: seconds of each burst")):
        add(g, f"--kafka-{opt}", env_var=env, type=float, default=None, help=what)
    add(g, "--kafka-drain-s", env_var="KAFKA_DRAIN_S", type=float, default=OPTION_DEFAULTS["kafka_drain_s"],
        help="on stop: wait this long for outstanding acks, then purge")
    add(g, "--kafka-linger-ms", env_var="KAFKA_LINGER_MS", type=int, default=OPTION_DEFAULTS["kafka_linger_ms"],
        help="the producers' linger.ms (default 5: librdkafka's and Kafka 4.0's own default)")
    add(g, "--kafka-pace-partitions", env_var="KAFKA_PACE_PARTITIONS", action="store_true",
        default=OPTION_DEFAULTS["kafka_pace_partitions"],
        help="one request's worth per partition in the client at a time (workloads/pacing.py)")
    add(g, "--kafka-producer-config", env_var="KAFKA_PRODUCER_CONFIG",
        default=OPTION_DEFAULTS["kafka_producer_config"],
        help="JSON object of extra producer settings, in the client library's own names")
    add(g, "--kafka-client-library", env_var="KAFKA_CLIENT_LIBRARY", choices=list(_clients.LIBRARIES),
        default=OPTION_DEFAULTS["kafka_client_library"],
        help="the producing library (workloads/clients/; default librdkafka, in this process)")


def default_users(o) -> int:
    """Producer users when -u is not given: ``--kafka-users``, or the sum of the producers per topic."""
    topics = parse_topics(o.kafka_topics)
    if topics and topics[0][2] is not None:
        return sum(t[2] for t in topics)
    return max(1, int(o.kafka_users))


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    _cli.on_init(environment, default_users)
    # this module as Locust loaded it (by path: not necessarily the workloads.kafka_produce import)
    _dist.on_worker_init(environment, sys.modules[__name__])


def options(**overrides: Any):
    """A parsed-options namespace for library use (defaults + overrides, same dests as the CLI)."""
    from argparse import Namespace

    unknown = set(overrides) - set(OPTION_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown kafka option(s): {sorted(unknown)}")
    return Namespace(**{**OPTION_DEFAULTS, **overrides})


class ProduceError(Exception):
    """A failed / unknown send as reported to Locust."""


_ids = itertools.count()  # message ids: unique per process, increasing in send order
_user_seq = itertools.count()
_active: list["KafkaProducerUser"] = []
described: list[dict] = []  # each drained producer's client: library, version, settings, its own counts
# Locust worker of the harness's master (workloads/distributed.py): (index, workers, users), else None
_worker: tuple[int, int, int] | None = None


def serve_master(index: int, workers: int, users: int) -> None:
    """This process is worker ``index`` of ``workers`` under the harness's master, whose workload
    has ``users`` producers: its ids and producer names become its own (workloads/distributed.py)."""
    global _ids, _worker
    _worker = (index, workers, users)
    _ids = itertools.count(index << _dist.ID_BITS)


def _zipf_weights(n: int = 1000, s: float = 1.1) -> list[float]:
    acc, out = 0.0, []
    for k in range(1, n + 1):
        acc += 1.0 / k**s
        out.append(acc)
    return out


_ZIPF_KEYS = [str(k).encode() for k in range(1000)]
_ZIPF_CUM = _zipf_weights()


class KafkaProducerUser(User):
    """One idempotent producer, pacing itself to its share of the shape's rate.

    Pacing: every ``tick_s`` the user sends the messages it owes (credit accumulates at the
    current rate / user count, at most one second's worth), serves delivery reports with
    ``poll(0)`` (never a blocking call: this runs on gevent) and hands the history rows over.

    With ``--kafka-pace-partitions`` (a scenario's ``workload.pace_partitions``) round-robin sends
    (they name their partition) are paced per partition by :class:`workloads.pacing.PartitionPacer`:
    handed to the client at the end of a tick, only while none of the partition's earlier messages
    is unanswered, one request's worth at a time (why: that module). A message's latency still runs
    from its creation (``ts``). Keyed sends leave the partition to the client's partitioner and go
    to the client at once.
    """

    tick_s = 0.005
    max_queued = 50_000  # rate 0: keep at most this many messages in the client queue

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        o = self.environment.parsed_options
        if o is None:
            o = options()
        self.o = o
        self.client: _clients.Driver | None = None
        self.failed = False
        self.draining = False
        self.index = next(_user_seq)
        self.pname = _dist.producer_name(_worker[0] if _worker else None, self.index)
        # the workload's user this one is: users are dealt to the workers round-robin
        self.user = self.index if _worker is None else _worker[0] + _worker[1] * self.index
        try:
            self._start(o)
        except Exception as exc:
            # Not retried, not a traceback per user: a producer that cannot start ends the run.
            self.failed = True
            _cli.stop_run(self.environment, f"producer {self.pname} cannot start: {_cli.describe(exc)}")

    def _start(self, o) -> None:
        self.pname_b = self.pname.encode()
        payload = os.urandom(16) * (int(o.kafka_message_bytes) // 16) + os.urandom(int(o.kafka_message_bytes) % 16)
        self.size = len(payload)
        # each value starts with its message id (its low bytes if the value is shorter than 8), so
        # two messages never share a value and the read-back's CRC-32 names the message it holds
        self.stamp = min(8, self.size)
        self.body = payload[self.stamp:]
        # linger.ms: the scenario's workload.linger_ms, default 5 ms (the client's own default,
        # workloads/messages.py). What the client holds at once is bounded per partition (the
        # class's docstring: no busy-poll while an acknowledgement is awaited).
        import json

        library = getattr(o, "kafka_client_library", None) or _clients.DEFAULT_LIBRARY
        if library != "librdkafka" and (o.kafka_key_distribution != "none" or o.kafka_pace_partitions):
            raise _cli.SetupError(f"{library}: keyed sends and partition pacing are librdkafka's only")
        self.client = _clients.open_driver(library, _clients.DriverConfig(
            o.kafka_bootstrap, f"locust-{self.pname}", int(o.kafka_linger_ms), 60000, self.body, self.stamp,
            json.loads(o.kafka_producer_config) if o.kafka_producer_config else {}))
        self.sink = getattr(self.environment, "kafka_history", None)
        self.attempts = self.sink if hasattr(self.sink, "attempt") else None  # a worker's: to its master
        self.unsent: list = []
        self.rows: list[dict] = []
        self.stats = getattr(self.environment, "kafka_stats", None)
        topics = parse_topics(o.kafka_topics)
        own = topic_of_user(topics, self.user)
        if own is not None:
            topics = [topics[own]]
        known = getattr(self.environment, "kafka_partitions", None) or {}  # Locust's command line: preflight
        resolved = []
        for name, n, _ in topics:
            n = n or known.get(name)
            if n is None:
                n = self.client.partitions(name)  # once, at start
            if n <= 0:
                raise _cli.SetupError(f"topic {name} does not exist at {o.kafka_bootstrap}")
            resolved.append((name, n))
        self.topics = [t for t, _ in resolved]
        self.tps = [(t, p) for t, n in resolved for p in range(n)]
        self.rr = self.user  # spread users over partitions
        self.keyed = o.kafka_key_distribution != "none"
        self.zipf = o.kafka_key_distribution == "zipf"
        self.credit = 0.0
        self.last = time.monotonic()
        self.t0 = time.monotonic()
        self.pacer = (PartitionPacer(round_size(self.client.conf, self.size), self._produce)
                      if o.kafka_pace_partitions else None)
        _active.append(self)

    # -- sending ---------------------------------------------------------------------------

    def _rate(self) -> float:
        per_user = getattr(self.environment, "kafka_rate_per_user", None)  # a worker: its master's
        if per_user is not None:
            return per_user
        shape = self.environment.shape_class
        total = shape.rate_at() if hasattr(shape, "rate_at") else float(self.o.kafka_rate)
        users = max(1, self.environment.runner.user_count if self.environment.runner else 1)
        return total / users

    def _send_one(self) -> None:
        msg_id = next(_ids)
        self.rr += 1
        headers = [(ID_HEADER, str(msg_id).encode()), (PRODUCER_HEADER, self.pname_b)]
        ts = time.time()
        if self.keyed:
            topic = self.topics[self.rr % len(self.topics)]
            key = random.choices(_ZIPF_KEYS, cum_weights=_ZIPF_CUM)[0] if self.zipf else \
                str(random.randrange(100_000)).encode()
            kw = {"key": key}
        else:
            topic, part = self.tps[self.rr % len(self.tps)]
            kw = {"partition": part}

        tp = (topic, kw["partition"]) if "partition" in kw else None
        value = _clients.base.value_of(msg_id, self.body, self.stamp)
        digest = zlib.crc32(value)  # the history's digest: the verifying read-back compares its own

        def done(d: _clients.Delivery, msg_id=msg_id, ts=ts, topic=topic, tp=tp, digest=digest):
            self._record(msg_id, ts, topic, d.partition, d.outcome, d.ack_ts, d.offset, d.error, digest)
            if tp is not None and self.pacer is not None:
                self.pacer.answered(tp)

        if self.stats is not None:
            self.stats.produced += 1
        if self.attempts is not None:  # what the master writes as info if no outcome follows
            self.attempts.attempt({
                "kind": "send", "ts": ts, "msg_id": msg_id, "producer": self.pname, "topic": topic,
                "partition": kw.get("partition", -1), "ack_ts": None, "outcome": "info", "error": None,
                "offset": None, "size_bytes": self.size, "digest": digest})
        call = (msg_id, ts, topic, headers, kw, done, value, digest)
        if tp is not None and self.pacer is not None and not self.draining:
            self.pacer.hold(tp, call)  # to the client at the end of the tick, or when tp is answered
            return
        if self.attempts is not None:
            self.unsent.append(call)  # to the client once the master has its attempt (_tick)
            return
        self._produce(call)

    def _produce(self, call) -> bool:
        """One message to the client; False if it refused it (recorded as failed)."""
        msg_id, ts, topic, headers, kw, done, value, digest = call
        if self.client is None:
            return False
        if self.attempts is not None and self.attempts.attempts:
            # A worker: the master learns of a send before the cluster can, so a worker killed
            # now leaves no message in the log that its history does not name.
            self.attempts.flush()
        why = self.client.send(msg_id, topic, kw.get("partition", -1), self.pname, value, headers, done,
                               key=kw.get("key"))
        if why is not None:  # never enqueued: certainly not written
            self._record(msg_id, ts, topic, kw.get("partition", -1), "fail", None, None, why, digest)
            return False
        return True

    def _record(self, msg_id, ts, topic, partition, outcome, ack_ts, offset, error, digest) -> None:
        ok = outcome == "ok"
        self.environment.events.request.fire(
            request_type="produce", name=topic, response_time=((ack_ts or time.time()) - ts) * 1000.0,
            response_length=self.size if ok else 0, exception=None if ok else ProduceError(error),
            context={"outcome": outcome, "producer": self.pname})
        if self.sink is not None:
            self.rows.append({
                "kind": "send", "ts": ts, "msg_id": msg_id, "producer": self.pname, "topic": topic,
                "partition": -1 if partition is None else partition, "ack_ts": ack_ts, "outcome": outcome,
                "error": error, "offset": offset if ok else None, "size_bytes": self.size, "digest": digest,
            })
        if self.stats is not None:
            self.stats.record(outcome, ts, ack_ts, self.size)

    def _hand_over(self) -> None:
        if self.rows and self.sink is not None:
            rows, self.rows = self.rows, []
            self.sink.extend(rows)

    def tick(self) -> None:
        if self.client is None or self.failed:  # drained, or it could not start / failed: the run is ending
            gevent.sleep(0.1)
            return
        broken = self.client.broken()
        if broken is not None:  # its process died: every later send would fail; the run ends
            self.client.serve()  # what it had in flight becomes info
            self._hand_over()
            self.failed = True
            _cli.stop_run(self.environment, f"producer {self.pname}: {broken}")
            return
        try:
            self._tick()
        except Exception as exc:
            # A bug or an unexpected client error: one line and the run ends, never a loop of tracebacks.
            self.failed = True
            _cli.stop_run(self.environment, f"producer {self.pname}: {_cli.describe(exc)}")

    def _tick(self) -> None:
        p = self.client
        if not self.draining:
            now = time.monotonic()
            rate = self._rate()
            if rate > 0:
                owed = self.credit + rate * (now - self.last)
                self.credit = min(owed, max(rate, 1.0))  # fell > 1 s behind: skip, don't burst
                if self.stats is not None and owed > self.credit:
                    self.stats.skipped += int(owed - self.credit)
                n = int(self.credit)
                self.credit -= n
            else:
                n = max(0, min(1000, self.max_queued - p.outstanding() - (self.pacer.held_count() if self.pacer else 0)))
            self.last = now
            for i in range(n):
                self._send_one()
                if i % 200 == 199:
                    p.serve()
            if self.unsent:
                self.attempts.flush()
                calls, self.unsent = self.unsent, []
                for call in calls:
                    self._produce(call)
            if self.pacer is not None:
                self.pacer.release_idle()
        p.serve()
        self._hand_over()
        gevent.sleep(self.tick_s)

    tasks = [tick]

    # -- stopping --------------------------------------------------------------------------

    def drain(self, timeout_s: float) -> int:
        """Stop sending; wait up to ``timeout_s`` for outstanding delivery reports, then purge the
        rest (their reports arrive as purge errors: ``fail`` if never sent, ``info`` if in
        flight). Returns the number of messages purged."""
        self.draining = True
        p = self.client
        if p is None:
            return 0
        if self.pacer is not None:
            self.pacer.release_all()  # what the user holds goes to the client now, to be flushed
        deadline = time.monotonic() + timeout_s
        while p.outstanding() > 0 and time.monotonic() < deadline:
            p.serve()
            self._hand_over()
            gevent.sleep(0.01)
        left = p.outstanding()
        if left:
            p.purge()
            end = time.monotonic() + 5
            while p.outstanding() > 0 and time.monotonic() < end:
                p.serve()
                gevent.sleep(0.01)
        p.serve()
        self._hand_over()
        described.append(p.describe())
        p.close()
        self.client = None
        if self in _active:
            _active.remove(self)
        return left

    def on_stop(self) -> None:
        if self.client is not None:
            self.drain(float(self.o.kafka_drain_s))


def drain_all(timeout_s: float) -> int:
    """Drain every running producer user concurrently (see :meth:`KafkaProducerUser.drain`)."""
    users = list(_active)
    for u in users:
        u.draining = True
    jobs = [gevent.spawn(u.drain, timeout_s) for u in users]
    gevent.joinall(jobs, timeout=timeout_s + 10)
    return sum(j.value or 0 for j in jobs)


def client_report() -> dict | None:
    """The producers' client library as they ran it (the first's settings) and the sum of what
    each counted itself (retries, errors by type), where the library lets one count."""
    if not described:
        return None
    out = {k: described[0].get(k) for k in ("library", "version", "binding", "settings") if k in described[0]}
    retries = [d["retries"] for d in described if isinstance(d.get("retries"), int)]
    if retries:
        out["retries"] = sum(retries)
    errors: dict[str, int] = {}
    for d in described:
        for k, n in (d.get("errors") or {}).items():
            errors[k] = errors.get(k, 0) + int(n)
    if errors:
        out["errors"] = errors
    return out


def _number(v: Any) -> float | None:
    """An optional number option: None, or a string from the web UI's form ("" = not set)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    return float(v)


class ScenarioShape(_shapes.RateShape):
    """The shape ``locust -f`` picks up: ``--kafka-shape`` and ``--kafka-rate`` (with its ramp or
    burst settings) over time; users, spawn rate and run time from Locust's -u / -r / -t or the
    web UI's fields (``use_common_options``), defaulting to ``--kafka-users``, all at once and
    ``--kafka-duration-s``. Read again at every start (the web UI may have changed them)."""

    abstract = False
    use_common_options = True

    def __init__(self) -> None:
        super().__init__(0.0, None)
        self._configured = False

    def reset_time(self) -> None:  # Locust calls it when a run starts
        super().reset_time()
        self._configured = False

    def _configure(self) -> None:
        env: Environment | None = getattr(self.runner, "environment", None)
        o = getattr(env, "parsed_options", None) or options()
        self.kind = o.kafka_shape
        self.rate = float(o.kafka_rate)
        self.users, self.spawn_rate, self.duration_s = _cli.run_settings(o, default_users)
        self.params = {k: _number(v) for k, v in (("ramp_s", o.kafka_ramp_s), ("burst_every_s", o.kafka_burst_every_s),
                                                  ("burst_factor", o.kafka_burst_factor), ("burst_s", o.kafka_burst_s))
                       if _number(v) is not None}
        self._configured = True

    def rate_at(self, t: float | None = None) -> float:
        if not self._configured:
            self._configure()
        return super().rate_at(t)

    def tick(self):
        if not self._configured:
            self._configure()
        if _cli.preflight_running(self):
            return (self.users, self.spawn_rate)
        if super().tick() is None:
            return None
        return (self.users, self.spawn_rate)
