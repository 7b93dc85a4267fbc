"""The kafka-python producer as a process speaking the load's JSON-lines contract
(workloads/clients/process.py). Its own process, not the Locust one: kafka-python runs a sender
thread, which gevent's monkey-patching would turn into a greenlet sharing the load's loop.

Settings: ``acks='all'`` and ``enable_idempotence=True`` (kafka-python's names), ``linger_ms``
and ``delivery_timeout_ms`` from the harness (the same for every library); everything else is
kafka-python's own default (retries, ``retry_backoff_ms``, ``metadata_max_age_ms``, ...), unless
the config's ``settings`` names it (kafka-python's names; an unknown one is refused).
"""
from __future__ import annotations

import base64
import json
import sys
import threading
import time
from importlib.metadata import version

_out_lock = threading.Lock()


def emit(obj: dict) -> None:
    line = json.dumps(obj, separators=(",", ":")) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def fatal(msg: str, code: int = 1) -> None:
    emit({"event": "fatal", "error": msg})
    sys.exit(code)


def error_name(exc: BaseException) -> str:
    """Kafka's name for a broker error (kafka-python's ``message``: NOT_LEADER_OR_FOLLOWER, ...),
    else the exception's class."""
    msg = getattr(exc, "message", None)
    return msg if isinstance(msg, str) and msg.isupper() else type(exc).__name__


def main() -> None:
    from kafka import KafkaProducer

    try:
        conf = json.loads(sys.stdin.readline() or "{}")
    except ValueError as exc:
        fatal(f"the first line is not a JSON config: {exc}", 2)
    if conf.get("op") != "config":
        fatal("the first line must be the config", 2)
    body = base64.b64decode(conf["body_b64"])
    stamp = int(conf["stamp"])
    settings = {"bootstrap_servers": conf["bootstrap"].split(","), "client_id": conf["client_id"], "acks": "all",
                "enable_idempotence": True, "linger_ms": int(conf["linger_ms"]),
                "delivery_timeout_ms": int(conf["message_timeout_ms"])}
    extra = conf.get("settings") or {}
    unknown = sorted(set(extra) - set(KafkaProducer.DEFAULT_CONFIG))
    if unknown:
        fatal(f"unknown kafka-python producer setting(s): {', '.join(unknown)}", 2)
    settings.update(extra)
    try:
        producer = KafkaProducer(**settings)  # bootstraps (raises if no broker answers)
    except Exception as exc:  # its own errors and a bad setting's TypeError / ValueError alike
        fatal(f"kafka-python producer cannot start at {conf['bootstrap']}: {exc}")
    shown = {k: producer.config[k] for k in ("acks", "enable_idempotence", "retries", "retry_backoff_ms",
                                             "delivery_timeout_ms", "request_timeout_ms", "linger_ms", "batch_size",
                                             "max_in_flight_requests_per_connection", "metadata_max_age_ms",
                                             "reconnect_backoff_ms") if k in producer.config}
    emit({"event": "ready", "library": "kafka-python", "version": version("kafka-python"),
          "settings": {k: "infinite" if v == float("inf") else v for k, v in shown.items()}})  # plain JSON

    outstanding: dict[int, int] = {}  # id -> partition
    lock = threading.Lock()
    answered = threading.Condition(lock)
    accepting = True

    def answer(msg_id: int, obj: dict) -> None:
        with lock:
            if outstanding.pop(msg_id, None) is None:
                return  # already reported (purged at a flush)
            answered.notify_all()
        emit(obj)

    # kafka-python's Future.add_callback(f, *args) calls f(*args, value)
    def on_ack(msg_id: int, md) -> None:
        answer(msg_id, {"event": "ack", "id": msg_id, "partition": md.partition, "offset": md.offset, "ts": time.time()})

    def on_error(msg_id: int, partition: int, exc: BaseException) -> None:
        answer(msg_id, {"event": "error", "id": msg_id, "partition": partition, "ts": time.time(), "written": None,
                        "error": f"{error_name(exc)}: {exc}"})

    def stats() -> None:  # kafka-python's own count of retried batches
        last = None
        while True:
            time.sleep(1.0)
            m = producer.metrics().get("producer-metrics", {})
            retries = m.get("record-retry-total")
            if retries is not None and retries != last:
                emit({"event": "stats", "retries": int(retries), "errors": {}})
                last = retries

    threading.Thread(target=stats, daemon=True).start()
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
        except ValueError:
            fatal(f"not a JSON line: {line[:200]!r}", 2)
        op = cmd.get("op")
        if op == "send":
            msg_id, part = int(cmd["id"]), int(cmd["partition"])
            if not accepting:
                emit({"event": "error", "id": msg_id, "partition": part, "ts": time.time(), "written": False,
                      "error": "CLOSED: the producer is flushing"})
                continue
            value = msg_id.to_bytes(8, "big")[8 - stamp:] + body
            with lock:
                outstanding[msg_id] = part
            try:
                fut = producer.send(cmd["topic"], value=value, partition=part,
                                    headers=[("id", str(msg_id).encode()), ("p", str(cmd["producer"]).encode())])
            except Exception as exc:  # refused before it was queued: never sent
                with lock:
                    outstanding.pop(msg_id, None)
                emit({"event": "error", "id": msg_id, "partition": part, "ts": time.time(), "written": False,
                      "error": f"{error_name(exc)}: {exc}"})
                continue
            fut.add_callback(on_ack, msg_id)
            fut.add_errback(on_error, msg_id, part)
        elif op == "flush":
            accepting = False
            deadline = time.monotonic() + int(cmd.get("timeout_ms", 0)) / 1000.0
            with lock:
                while outstanding and time.monotonic() < deadline:
                    answered.wait(min(0.1, max(0.0, deadline - time.monotonic())))
                left, purged = dict(outstanding), len(outstanding)
                outstanding.clear()
            for msg_id, part in left.items():
                emit({"event": "error", "id": msg_id, "partition": part, "ts": time.time(), "written": None,
                      "error": "PURGED: not answered within the drain"})
            emit({"event": "flushed", "outstanding": purged})
        elif op == "close":
            break
        else:
            fatal(f"unknown op {op!r}", 2)
    producer.close(timeout=5)


if __name__ == "__main__":
    main()
