"""Locust consumer users: every message is read through a real Kafka client (confluent-kafka /
librdkafka ``Consumer``) in a consumer group (``subscribe``; the coordinator assigns partitions
and the members rebalance) or, without a group, on partitions assigned by hand. Every message
read is reported through Locust's request event (``request_type="consume"``, ``name=<topic>``,
response time = the record's CreateTime, set by the producer client, to now; the harness's own
end-to-end latency joins each delivery to its send call instead, see bench/check/consumers.py).

Two ways to use it:

* **The harness** (``bench/run/load.py``: ``drive_consumers``) drives it as a library; it sets
  ``environment.kafka_history`` and every message read becomes a history ``deliver`` row (with
  the group and member), which the checkers join to the ``send`` rows for end-to-end latency and
  at-least-once delivery per group.
* **By hand**, with Locust's own command line and web UI, against a running cluster
  (``python -m bench cluster start ...``; README, "Load by hand: Locust")::

      locust -f workloads/kafka_consume.py --kafka-bootstrap 127.0.0.1:PORT --kafka-topics events \\
          --kafka-start earliest --headless -u 2 -t 10s

  As in workloads/kafka_produce.py: a missing topic is created first, an unreachable cluster stops
  the run at once with one line, ``-u``/``-t`` (default ``--kafka-members`` x ``--kafka-groups``,
  ``--kafka-duration-s``) set the consumers (split over the groups) and the run time, the options
  appear in the web UI's form and in ``python -m workloads -f workloads/kafka_consume.py --help``.

Offsets (group mode): the member stores a message's offset only after it has been recorded,
and librdkafka's auto-commit commits stored offsets (``enable.auto.offset.store=false``): a
member that dies re-reads from the last commit, never skips (at least once).
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

if __package__ in (None, ""):  # `locust -f workloads/kafka_consume.py`: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gevent
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition
from locust import LoadTestShape, User, events

import workloads.cli as _cli  # noqa: E402
from workloads.messages import parse_headers  # noqa: E402
from workloads.topics import parse_topics  # noqa: E402

OPTION_DEFAULTS: dict[str, Any] = {
    **_cli.COMMON_DEFAULTS,  # kafka_bootstrap, kafka_topics, kafka_duration_s, ...
    "kafka_group": "locust-consumers",  # "" = no group: partitions split over the members by hand
    "kafka_members": 1,  # consumer users per group
    "kafka_groups": 1,  # groups (ids <kafka_group>-<n> when more than one)
    "kafka_start": "latest",  # where a group without committed offsets starts: earliest | latest
    "kafka_consumer_config": "",  # JSON object of extra librdkafka settings
}


@events.init_command_line_parser.add_listener
def _add_options(parser) -> None:
    g = parser.add_argument_group("kafka consumer (workloads/kafka_consume.py)")
    # Shared with workloads/kafka_produce.py: registered once when both files are loaded.
    _cli.add_common_options(parser, g)
    add = _cli.add_option
    add(g, "--kafka-group", env_var="KAFKA_GROUP", default=OPTION_DEFAULTS["kafka_group"],
        help="consumer group id (empty: no group, partitions split over the members by hand)")
    add(g, "--kafka-groups", env_var="KAFKA_GROUPS", type=int, default=OPTION_DEFAULTS["kafka_groups"],
        help="number of groups (ids GROUP-0, GROUP-1, ... when more than one); the users are split over them")
    # In the web UI the form's own "Number of users" sets it (-u/--users on the command line).
    add(g, "--kafka-members", env_var="KAFKA_MEMBERS", type=int, default=OPTION_DEFAULTS["kafka_members"], web=False,
        help="consumer users per group, unless -u/--users is given (then -u / --kafka-groups)")
    add(g, "--kafka-start", env_var="KAFKA_START", choices=["earliest", "latest"],
        default=OPTION_DEFAULTS["kafka_start"], help="where a group without committed offsets starts")
    add(g, "--kafka-consumer-config", env_var="KAFKA_CONSUMER_CONFIG",
        default=OPTION_DEFAULTS["kafka_consumer_config"], help="JSON object of extra librdkafka settings")


def default_users(o) -> int:
    """Consumer users when -u is not given: ``--kafka-members`` x ``--kafka-groups``."""
    return max(1, int(o.kafka_members)) * max(1, int(o.kafka_groups))


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    _cli.on_init(environment, default_users)


def options(**overrides: Any):
    """A parsed-options namespace for library use (defaults + overrides, same dests as the CLI)."""
    from argparse import Namespace

    unknown = set(overrides) - set(OPTION_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown kafka consumer option(s): {sorted(unknown)}")
    return Namespace(**{**OPTION_DEFAULTS, **overrides})


class ConsumeError(Exception):
    """A consumer error as reported to Locust."""


_user_seq = iter(range(1 << 30))
_active: list["KafkaConsumerUser"] = []


class KafkaConsumerUser(User):
    """One consumer: ``consume(timeout=0)`` on gevent (never a blocking call), records every
    message, stores its offset once recorded.

    The harness may set ``environment.kafka_consumers``: a list of ``{group, member, set, topics,
    partitions, start, assign, wait_for_go}`` (one per user, in spawn order; ``assign`` = [(topic,
    partition, start offset)] for a member that reads by hand instead of joining ``group``;
    ``wait_for_go``: keep the partitions paused until ``environment.kafka_go`` is set). Without it the options say: ``--kafka-groups`` groups of
    ``--kafka-members`` members each.
    """

    tick_s = 0.005
    batch = 500

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        o = self.environment.parsed_options or options()
        self.o = o
        self.index = next(_user_seq)
        self.consumer: Consumer | None = None
        self.failed = False
        self.member = f"u{self.index}"
        try:
            self._start(o)
        except Exception as exc:
            # Not retried, not a traceback per user: a consumer that cannot start ends the run.
            self.failed = True
            _cli.stop_run(self.environment, f"consumer {self.member} cannot start: {_cli.describe(exc)}")

    def _own_plan(self, o) -> dict:
        """Without the harness's plan: the users split over ``--kafka-groups`` groups (Locust's -u,
        else ``--kafka-members`` each); without a group id, each member reads its share of the
        partitions (found by the preflight) from ``--kafka-start``."""
        groups = max(1, int(o.kafka_groups))
        users = getattr(o, "num_users", None) or max(1, int(o.kafka_members)) * groups
        members = max(1, math.ceil(int(users) / groups))
        g, k = self.index // members % groups, self.index % members
        group = o.kafka_group if groups <= 1 or not o.kafka_group else f"{o.kafka_group}-{g}"
        topics = [t for t, _, _ in parse_topics(o.kafka_topics)]
        me = {"group": group or None, "member": f"m{k}", "topics": topics, "assign": None}
        if not group:
            known = getattr(self.environment, "kafka_partitions", None) or {}
            start = OFFSET_BEGINNING if o.kafka_start == "earliest" else OFFSET_END
            tps = [(t, p) for t in topics for p in range(int(known.get(t) or 0))]
            me["assign"] = [(t, p, start) for i, (t, p) in enumerate(tps) if i % members == k]
        return me

    def _start(self, o) -> None:
        plan = getattr(self.environment, "kafka_consumers", None)
        me = plan[self.index % len(plan)] if plan is not None else self._own_plan(o)
        self.group_id, self.member, self.topics = me["group"], me["member"], list(me["topics"])
        self.set_name = me.get("set")
        # By hand (`assign`): the member never joins its group (the id only labels its rows) and
        # commits nothing.
        self.joins = self.group_id is not None and me.get("assign") is None
        conf = {"bootstrap.servers": o.kafka_bootstrap, "client.id": f"locust-{self.group_id or 'assign'}-{self.member}",
                "enable.auto.commit": self.joins, "enable.auto.offset.store": False,
                "auto.offset.reset": o.kafka_start, "enable.partition.eof": False,
                "group.id": self.group_id or f"locust-assign-{os.getpid()}"}
        if o.kafka_consumer_config:
            import json

            conf.update(json.loads(o.kafka_consumer_config))
        self.sink = getattr(self.environment, "kafka_history", None)
        self.rows: list[dict] = []
        self.assigned: set[tuple[str, int]] = set()
        self.assignments = 0  # assignments received (a member that got one, even empty, has joined)
        self.next_offset: dict[tuple[str, int], int] = {}  # per partition: last delivered offset + 1
        self.delivered = 0
        self.delivered_bytes = 0
        self.errors = 0
        self.consumer = Consumer(conf)
        # A catch-up reader waits with its partitions paused until the harness says go (the load
        # started), so its catch-up overlaps the load and the actions.
        self.go = getattr(self.environment, "kafka_go", None) if me.get("wait_for_go") else None
        if self.joins:
            self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                    on_lost=self._on_revoke)
        else:
            start = me.get("assign") or []
            self.consumer.assign([TopicPartition(t, p, off) for t, p, off in start])
            if self.go is not None and start:
                self.consumer.pause([TopicPartition(t, p) for t, p, _ in start])
            self.assigned = {(t, p) for t, p, _ in start}
            self.assignments = 1
        _active.append(self)

    def _on_assign(self, consumer, partitions) -> None:
        if self.go is not None:
            consumer.assign(partitions)
            consumer.pause(partitions)
        self.assigned |= {(tp.topic, tp.partition) for tp in partitions}
        self.assignments += 1
        self._event("assigned", partitions)

    def _on_revoke(self, consumer, partitions) -> None:
        self.assigned -= {(tp.topic, tp.partition) for tp in partitions}
        self._event("revoked", partitions)

    def _event(self, what: str, partitions) -> None:
        if self.sink is not None:
            self.rows.append({"kind": "event", "ts": time.time(), "event": f"consumer_{what}",
                              "detail": {"group": self.group_id, "member": self.member,
                                         "partitions": [[tp.topic, tp.partition] for tp in partitions]}})

    def tick(self) -> None:
        if self.consumer is None or self.failed:  # closed, or it could not start / failed: the run is ending
            gevent.sleep(0.1)
            return
        try:
            self._tick()
        except Exception as exc:
            # A bug or an unexpected client error: one line and the run ends, never a loop of tracebacks.
            self.failed = True
            _cli.stop_run(self.environment, f"consumer {self.member}: {_cli.describe(exc)}")

    def _tick(self) -> None:
        c = self.consumer
        if self.go is not None and self.go.is_set():
            self.go = None
            c.resume([TopicPartition(t, p) for t, p in sorted(self.assigned)])
        msgs = c.consume(self.batch, 0)
        now = time.time()
        last: dict[tuple[str, int], Any] = {}
        for m in msgs:
            err = m.error()
            if err is not None:
                self.errors += 1
                if err.code() != KafkaError._PARTITION_EOF:
                    self.environment.events.request.fire(
                        request_type="consume", name=m.topic() or "-", response_time=0.0, response_length=0,
                        exception=ConsumeError(f"{err.name()}: {err.str()}"), context={"group": self.group_id})
                continue
            tp = (m.topic(), m.partition())
            msg_id, producer = parse_headers(m.headers())
            size = len(m.value() or b"")
            _, ts_ms = m.timestamp()  # CreateTime, ms: set by the producer client
            self.environment.events.request.fire(
                request_type="consume", name=tp[0], response_time=max(0.0, now * 1000.0 - ts_ms) if ts_ms > 0 else 0.0,
                response_length=size, exception=None, context={"group": self.group_id})
            if self.sink is not None:
                self.rows.append({"kind": "deliver", "ts": now, "msg_id": msg_id, "producer": producer,
                                  "topic": tp[0], "partition": tp[1], "outcome": "ok", "offset": m.offset(),
                                  "size_bytes": size, "group": self.group_id, "member": self.member,
                                  "record_ts": ts_ms / 1000.0 if ts_ms > 0 else None})
            self.next_offset[tp] = m.offset() + 1
            self.delivered += 1
            self.delivered_bytes += size
            last[tp] = m
        self._hand_over()
        if self.joins:
            for m in last.values():  # recorded: now it may be committed
                try:
                    c.store_offsets(message=m)
                except Exception:  # revoked meanwhile: the next owner re-reads it (at least once)
                    pass
        if not msgs:
            gevent.sleep(self.tick_s)
        else:
            gevent.sleep(0)

    tasks = [tick]

    def _hand_over(self) -> None:
        if self.rows and self.sink is not None:
            rows, self.rows = self.rows, []
            self.sink.extend(rows)

    def close(self) -> None:
        """Leave the group (committing what was stored) and close the client."""
        c, self.consumer = self.consumer, None
        if c is None:
            return
        self._hand_over()
        try:
            c.close()
        except Exception:
            pass
        self._hand_over()
        if self in _active:
            _active.remove(self)

    def on_stop(self) -> None:
        self.close()


class ConsumerShape(LoadTestShape):
    """All consumers at once: Locust's -u / -r / -t or the web UI's fields (``use_common_options``),
    defaulting to ``--kafka-members`` x ``--kafka-groups`` and ``--kafka-duration-s`` (0 = until
    stopped)."""

    use_common_options = True

    def tick(self):
        o = getattr(self.runner.environment, "parsed_options", None) or options()
        users, spawn_rate, duration = _cli.run_settings(o, default_users)
        if duration and self.get_run_time() >= duration and not _cli.preflight_running(self):
            return None
        return (users, spawn_rate)
