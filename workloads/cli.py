"""What Locust's own command line and web UI need from the Kafka locustfiles
(``workloads/kafka_produce.py``, ``workloads/kafka_consume.py``); the harness (bench/run/load.py)
drives the same users as a library and uses none of this.

* **Options** are registered so that they appear in ``--help`` (through ``python -m workloads``,
  see ``workloads/__main__.py``) and in the web UI's start form: Locust puts an option in the form
  only if its argparse action carries ``include_in_web_ui``, which ``LocustArgumentParser.add_argument``
  sets but an argument group's ``add_argument`` does not (locust issue #2560); :func:`add_option`
  sets it, so the options keep their own group in ``--help`` and still reach the form.
* **Locust's -u / -r / -t** (and the form's user count, spawn rate and run time): the shapes set
  ``use_common_options`` and read them (:func:`run_settings`); ``--kafka-users`` /
  ``--kafka-duration-s`` are their defaults. Locust's **-H/--host** (the form's Host field) is the
  system under test, so it is the bootstrap too: given, it replaces ``--kafka-bootstrap``.
* **Preflight** at test start (:func:`ensure_topics`): the cluster is reached within a few seconds,
  and every topic of ``--kafka-topics`` exists with the partitions it names, created if missing.
  If not, the run stops at once with one line (exit code 1).
* **Any error in a user** stops the run with one line (:func:`stop_run`) instead of being retried
  in a loop.
"""
from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust import events

from workloads.topics import parse_topics

log = logging.getLogger("kafka")

CONNECT_TIMEOUT_S = 5.0  # reaching the cluster (given up after 2 s when every broker refused)
CREATE_TIMEOUT_S = 10.0  # a created topic's partitions all have a leader

COMMON_DEFAULTS: dict[str, Any] = {
    "kafka_bootstrap": "127.0.0.1:9092",
    "kafka_topics": "events",
    "kafka_duration_s": 0.0,  # 0 = until stopped (Locust's -t/--run-time takes precedence)
    "kafka_create_topics": True,  # a missing topic is created (preflight, Locust's command line only)
    "kafka_replication_factor": -1,  # of a created topic; -1 = the cluster's default.replication.factor
}


class SetupError(Exception):
    """The cluster or a topic is not as the options say: the run cannot start."""


def describe(exc: BaseException) -> str:
    """An exception in one line: a SetupError's message, a Kafka error's name and text."""
    if isinstance(exc, SetupError):
        return str(exc)
    err = exc.args[0] if exc.args else None
    if hasattr(err, "name") and hasattr(err, "str"):  # confluent_kafka.KafkaError
        return f"{err.name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def add_option(group, *flags: str, web: bool = True, **kw: Any):
    """``group.add_argument`` that also marks the option for the web UI's form (see the module
    docstring)."""
    action = group.add_argument(*flags, **kw)
    action.include_in_web_ui = web
    action.is_secret = False
    action.is_required = False
    action.is_multiple = False
    return action


def _has_option(parser, flag: str) -> bool:
    return any(flag in a.option_strings for a in parser._actions)


def add_common_options(parser, group) -> None:
    """The options both locustfiles take, registered once when both are loaded."""
    if not _has_option(parser, "--kafka-bootstrap"):
        add_option(group, "--kafka-bootstrap", env_var="KAFKA_BOOTSTRAP", default=COMMON_DEFAULTS["kafka_bootstrap"],
                   help="bootstrap servers host:port[,host:port]")
    if not _has_option(parser, "--kafka-topics"):
        add_option(group, "--kafka-topics", env_var="KAFKA_TOPICS", default=COMMON_DEFAULTS["kafka_topics"],
                   help="topics: name[:partitions[:producers]],... A topic that does not exist is created with "
                        "these partitions (without: the cluster's num.partitions)")
    if not _has_option(parser, "--kafka-duration-s"):
        add_option(group, "--kafka-duration-s", env_var="KAFKA_DURATION_S", type=float, web=False,
                   default=COMMON_DEFAULTS["kafka_duration_s"],
                   help="stop after this many seconds (0 = until stopped); -t/--run-time takes precedence")
    if not _has_option(parser, "--kafka-create-topics"):
        import argparse

        add_option(group, "--kafka-create-topics", env_var="KAFKA_CREATE_TOPICS", action=argparse.BooleanOptionalAction,
                   default=COMMON_DEFAULTS["kafka_create_topics"],
                   help="create a topic of --kafka-topics that does not exist (--no-kafka-create-topics: stop "
                        "instead)")
    if not _has_option(parser, "--kafka-replication-factor"):
        add_option(group, "--kafka-replication-factor", env_var="KAFKA_REPLICATION_FACTOR", type=int,
                   default=COMMON_DEFAULTS["kafka_replication_factor"],
                   help="replication factor of a created topic (-1: the cluster's default.replication.factor)")


# -- Locust's command line ---------------------------------------------------------------------


def is_cli(environment) -> bool:
    """Run by Locust's command line (``locust -f ...`` / ``python -m workloads``), not by the harness."""
    return bool(getattr(environment, "kafka_cli", False))


def on_init(environment, default_users: Callable[[Any], int]) -> None:
    """Locust's init event (fired by its command line only): check the options that can be checked
    without the cluster (one line and exit code 1 if wrong), and let Locust's -u / -r / -t default to the
    Kafka options, so that the web UI's form shows what will run."""
    o = environment.parsed_options
    if o is None or not hasattr(o, "headless"):
        return
    environment.kafka_cli = True
    try:
        parse_topics(o.kafka_topics)
    except ValueError as exc:
        raise SystemExit(f"error: --kafka-topics {o.kafka_topics!r}: expected name[:partitions[:producers]],... "
                         f"({exc})") from None
    for name in ("kafka_producer_config", "kafka_consumer_config"):
        value = getattr(o, name, None)
        if value:
            import json

            try:
                if not isinstance(json.loads(value), dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                raise SystemExit(f"error: --{name.replace('_', '-')} {value!r}: {exc}") from None
    # Locust's Host (-H, the form's Host field) is the system under test: here the bootstrap.
    if environment.host:
        o.kafka_bootstrap = environment.host
    environment.host = environment.kafka_host = o.kafka_bootstrap
    if o.num_users is None:
        o.num_users = default_users(o)
    if o.spawn_rate is None:
        o.spawn_rate = float(o.num_users)  # every user at once: the rate, not the user count, is shaped
    if not o.run_time and float(o.kafka_duration_s or 0) > 0:
        o.run_time = math.ceil(float(o.kafka_duration_s))


def run_settings(o, default_users: Callable[[Any], int]) -> tuple[int, float, float | None]:
    """(users, spawn rate, run seconds or None = until stopped): Locust's -u / -r / -t or the web
    UI's fields when given, else the Kafka options (the harness's library use has only those)."""
    users = getattr(o, "num_users", None)
    users = max(1, int(users if users is not None else default_users(o)))
    spawn = getattr(o, "spawn_rate", None)
    spawn = float(spawn) if spawn else float(users)
    run_s = getattr(o, "run_time", None) or float(getattr(o, "kafka_duration_s", 0) or 0)
    return users, spawn, (float(run_s) if run_s else None)


def preflight_running(shape) -> bool:
    """The preflight is still at work: a shape holds its users (and its end) until it is done."""
    return bool(getattr(getattr(shape.runner, "environment", None), "kafka_preflight", False))


def stop_run(environment, message: str) -> None:
    """An error a user cannot recover from: log it in one line (once per run), exit code 1, and
    stop the run as Locust does at its end (quit when headless, stop in the web UI; in the
    harness's library use the runner stops and the load process reports ``error``)."""
    if getattr(environment, "kafka_error", None) is not None:
        return
    environment.kafka_error = message
    log.error(message)
    if environment.process_exit_code is None:
        environment.process_exit_code = 1
    runner = environment.runner
    if runner is not None:
        headless = bool(getattr(environment.parsed_options, "headless", False))
        gevent.spawn(runner.quit if headless else runner.stop)


@events.test_start.add_listener
def _preflight(environment, **_kw) -> None:
    """Before the users start (Locust's command line only, not on workers): the cluster reachable
    and the topics there (created if missing); else the run stops with the one line of
    :class:`SetupError`. The partition counts found are what the users produce to."""
    from locust.runners import WorkerRunner

    if not is_cli(environment) or isinstance(environment.runner, WorkerRunner):
        return
    if getattr(environment, "kafka_error", None) is not None and environment.process_exit_code == 1:
        environment.process_exit_code = None  # a new start in the web UI: the last run's error is over
    environment.kafka_error = None
    _sync_host(environment)
    environment.kafka_preflight = True
    try:
        # In a thread of gevent's pool: the web UI and the stats printer keep running meanwhile.
        found, error = gevent.get_hub().threadpool.apply(_ensure_topics_or_error, (environment.parsed_options,))
    finally:
        environment.kafka_preflight = False
    if error is None:
        environment.kafka_partitions = found
        if environment.shape_class is not None:
            environment.shape_class.reset_time()  # the run time counts from here, when the users start
        return
    stop_run(environment, error)
    # Out of the greenlet that would spawn the users, without a traceback (GreenletExit is not an
    # error to gevent; Locust's StopTest would be printed with two).
    raise gevent.GreenletExit()


def _sync_host(environment) -> None:
    """The web UI's form has both Host and the Kafka Bootstrap field, both showing the bootstrap:
    the one that was edited since the last start wins (Host if both)."""
    o = environment.parsed_options
    host = (environment.host or "").strip()
    if host and host != environment.kafka_host:
        o.kafka_bootstrap = host
    environment.host = environment.kafka_host = o.kafka_bootstrap


def _ensure_topics_or_error(o) -> tuple[dict[str, int] | None, str | None]:
    try:
        return ensure_topics(o), None
    except SetupError as exc:
        return None, str(exc)
    except Exception as exc:  # anything unexpected: still one line
        return None, f"preflight at {o.kafka_bootstrap}: {type(exc).__name__}: {exc}"


# -- the cluster and its topics ------------------------------------------------------------------


def ensure_topics(o) -> dict[str, int]:
    """Reach the cluster at ``o.kafka_bootstrap`` and make sure every topic of ``o.kafka_topics``
    exists with at least the partitions it names: a missing one is created (``o.kafka_create_topics``)
    with those partitions (else the cluster's num.partitions) and ``o.kafka_replication_factor``
    (-1: the cluster's default.replication.factor), and waited for until every partition has a
    leader. Returns {topic: partitions to use}. :class:`SetupError` (one line) when not possible."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    boot = o.kafka_bootstrap
    try:
        specs = parse_topics(o.kafka_topics)
    except ValueError as exc:
        raise SetupError(f"--kafka-topics {o.kafka_topics!r}: {exc}") from None
    errors: list = []
    try:
        admin = AdminClient({"bootstrap.servers": boot, "log_level": 0, "error_cb": errors.append,
                             "client.id": "locust-preflight"})
    except KafkaException as exc:
        raise SetupError(f"--kafka-bootstrap {boot!r}: {exc.args[0].str()}") from None
    t0 = time.monotonic()
    md = None
    while md is None:
        try:
            md = admin.list_topics(timeout=1.0)
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            waited = time.monotonic() - t0
            down = any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors)
            if waited >= CONNECT_TIMEOUT_S or (down and waited >= 2.0):
                seen = [re.sub(r" \(after \d+ms in state \w+\)", "", e.str())
                        for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
                why = "; ".join(dict.fromkeys(seen)) or exc.args[0].str()
                raise SetupError(f"cannot reach the Kafka cluster at {boot} (--kafka-bootstrap) within "
                                 f"{waited:.0f} s: {why}") from None
    out: dict[str, int] = {}
    missing: list[tuple[str, int | None]] = []
    for name, want, _ in specs:
        t = md.topics.get(name)
        if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            if name not in dict(missing):
                missing.append((name, want))
            continue
        if t.error is not None:
            raise SetupError(f"topic {name} at {boot}: {t.error.name()}: {t.error.str()}")
        have = len(t.partitions)
        if want is not None and want > have:
            raise SetupError(f"topic {name} at {boot} has {have} partition(s), --kafka-topics asks for {want} "
                             f"(name it {name}:{have}, or another topic)")
        out[name] = want or have
    if not missing:
        return out
    names = ", ".join(n for n, _ in missing)
    if not o.kafka_create_topics:
        what = f"topic {names} does" if len(missing) == 1 else f"topics {names} do"
        raise SetupError(f"{what} not exist at {boot} (not created: --no-kafka-create-topics)")
    rf = int(o.kafka_replication_factor)
    futures = admin.create_topics([NewTopic(n, num_partitions=p or -1, replication_factor=rf) for n, p in missing],
                                  request_timeout=CONNECT_TIMEOUT_S)
    for name, fut in futures.items():
        try:
            fut.result(timeout=CONNECT_TIMEOUT_S + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise SetupError(f"cannot create topic {name} at {boot}: {err.name()}: {err.str()}") from None
        except Exception as exc:  # concurrent.futures.TimeoutError
            raise SetupError(f"cannot create topic {name} at {boot}: no answer within "
                             f"{CONNECT_TIMEOUT_S + 5:.0f} s ({type(exc).__name__})") from None
    deadline = time.monotonic() + CREATE_TIMEOUT_S
    while True:
        try:
            md = admin.list_topics(timeout=1.0)
        except KafkaException:
            md = None
        ready = {}
        for name, want in missing:
            t = md.topics.get(name) if md is not None else None
            if t is not None and t.error is None and t.partitions and \
                    all(p.leader >= 0 for p in t.partitions.values()) and len(t.partitions) >= (want or 1):
                ready[name] = t
        if len(ready) == len(missing):
            break
        if time.monotonic() > deadline:
            late = ", ".join(n for n, _ in missing if n not in ready)
            raise SetupError(f"topic(s) {late} created at {boot} but without a leader for every partition "
                             f"after {CREATE_TIMEOUT_S:.0f} s")
        time.sleep(0.2)
    for name, want in missing:
        t = ready[name]
        out[name] = want or len(t.partitions)
        log.info("created topic %s at %s: %d partition(s), replication factor %d", name, boot, len(t.partitions),
                 len(next(iter(t.partitions.values())).replicas))
    return out
