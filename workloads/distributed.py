"""Locust's distributed mode for the producers: the harness's load process is the master
(``bench/run/load.py``, scenario ``load.workers`` / ``load.remote_workers``) and each worker runs
this project's locustfile with Locust's own command line, on this machine or another::

    locust -f workloads/kafka_produce.py --worker --master-host HOST --master-port PORT

A worker asks to join (``bench_join``, once its handlers are registered: a message that came
before would be dropped) and learns that it serves the harness from the master's answer,
``bench_hello``; it answers ``bench_ready`` with its PID. A plain Locust master logs the join as
an unknown message and never answers: the worker then runs as Locust runs it. From the hello on:

* its message ids start at ``worker_index << 40`` (Locust's own 0-based worker index) and its
  producers are named ``w{index}.p{j}``, so ids and names are unique across workers; with
  producers per topic, producer ``j`` takes the topic of user ``index + workers * j`` of the
  workload (users are dealt to workers round-robin);
* every send reaches the master twice, in ``bench_sends`` messages every 0.2 s: when it is
  attempted (``attempts``) and with its outcome (``rows``), attempts first. The master writes the
  outcomes into the run's history; a send whose outcome never came (its worker died) is written
  as ``info`` (it may have been written), never as ``ok``;
* the rate per user is the master's shape rate over the workload's users (``bench_rate``, every
  0.25 s), so shapes follow the master's clock, whoever runs how many users;
* ``bench_drain``: stop sending, wait for the acks (then purge what is left), flush, and answer
  ``bench_drained`` with the count purged.
"""
from __future__ import annotations

import os
from typing import Any

import gevent

JOIN, HELLO, READY, RATE, SENDS, DRAIN, DRAINED = ("bench_join", "bench_hello", "bench_ready", "bench_rate",
                                                   "bench_sends", "bench_drain", "bench_drained")
ID_BITS = 40  # a worker's message ids: [index << 40, (index + 1) << 40)
FLUSH_S = 0.2


def producer_name(worker: int | None, j: int) -> str:
    return f"p{j}" if worker is None else f"w{worker}.p{j}"


class Forwarder:
    """A worker's history sink (the users' ``environment.kafka_history``): attempts and outcome
    rows, sent to the master every :data:`FLUSH_S`."""

    def __init__(self, runner: Any, index: int) -> None:
        self.runner, self.index = runner, index
        self.attempts: list[dict] = []
        self.rows: list[dict] = []
        self._loop = gevent.spawn(self._run)

    def attempt(self, row: dict) -> None:
        self.attempts.append(row)

    def extend(self, rows: list[dict]) -> None:
        self.rows.extend(rows)

    def flush(self) -> None:
        if self.attempts or self.rows:
            attempts, rows, self.attempts, self.rows = self.attempts, self.rows, [], []
            self.runner.send_message(SENDS, {"worker": self.index, "attempts": attempts, "rows": rows})

    def _run(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            self.flush()


def on_worker_init(environment: Any, kp: Any) -> None:
    """Locust's init event on a worker (``workloads/kafka_produce.py`` registers it, ``kp`` being
    that module as Locust loaded it): answer the harness's master, if it is one."""
    from locust.runners import WorkerRunner

    runner = environment.runner
    if not isinstance(runner, WorkerRunner):
        return
    state: dict[str, Any] = {}

    def hello(msg: Any, **_kw: Any) -> None:
        users = max(1, int(msg.data["users"]))
        kp.serve_master(runner.worker_index, int(msg.data["workers"]), users)
        state["users"] = users
        environment.kafka_rate_per_user = float(msg.data["rate"]) / users
        environment.kafka_history = state["sink"] = Forwarder(runner, runner.worker_index)
        runner.send_message(READY, {"pid": os.getpid()})  # which process is which worker

    def rate(msg: Any, **_kw: Any) -> None:
        if "users" in state:
            environment.kafka_rate_per_user = float(msg.data["rate"]) / state["users"]

    def drain(msg: Any, **_kw: Any) -> None:
        purged = kp.drain_all(float(msg.data["timeout_s"]))
        sink = state.get("sink")
        if sink is not None:
            sink.flush()
        runner.send_message(DRAINED, {"worker": runner.worker_index, "purged": purged})

    runner.register_message(HELLO, hello)
    runner.register_message(RATE, rate)
    runner.register_message(DRAIN, drain, concurrent=True)  # it waits for acks: not on the receive loop
    runner.send_message(JOIN, {"pid": os.getpid()})
