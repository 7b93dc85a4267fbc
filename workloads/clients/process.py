"""A producer of another library in its own process, speaking JSON lines on stdin / stdout (the
Locust user never waits on it: a reader greenlet collects its answers).

The contract (kafka_python_driver.py, kafkajs/producer.js, sarama/producer.go implement it):

* in: ``{"op": "config", "bootstrap", "client_id", "linger_ms", "message_timeout_ms", "body_b64",
  "stamp", "settings"}`` first; then ``{"op": "send", "id", "topic", "partition", "producer"}``
  (the driver builds the value: the id's low ``stamp`` bytes, big-endian, then the body; headers
  ``id`` and ``p``); ``{"op": "flush", "timeout_ms"}``; ``{"op": "close"}`` (or end of input).
* out: ``{"event": "ready", "library", "version", "settings"}`` once connected, or
  ``{"event": "fatal", "error"}`` and a non-zero exit; per send ``{"event": "ack", "id",
  "partition", "offset", "ts"}`` or ``{"event": "error", "id", "partition", "error": "<TYPE>:
  <message>", "written": false | null, "ts"}`` (``false``: certainly never reached a broker);
  ``{"event": "stats", "retries", "errors": {type: n}}`` (cumulative, what the library lets
  one count); ``{"event": "flushed", "outstanding"}`` after a flush, its unanswered sends first
  reported as errors.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gevent

from workloads.clients.base import Delivery, Done, Driver, DriverConfig, DriverError

HERE = Path(__file__).resolve().parent
READY_TIMEOUT_S = 60.0


def command(library: str) -> list[str]:
    """The driver's command line; builds or installs the library on first use (one line on stderr
    says so): kafkajs with ``npm ci`` from its lock file, sarama with Debian's Go and package
    (``sarama/build.sh``). Raises DriverError with what to do when that cannot be done."""
    if library == "kafka-python":
        return [sys.executable, str(HERE / "kafka_python_driver.py")]
    if library == "kafkajs":
        d = HERE / "kafkajs"
        if not (d / "node_modules" / "kafkajs" / "package.json").is_file():
            _run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], d, "installing kafkajs (npm ci, pinned by "
                 "workloads/clients/kafkajs/package-lock.json)", "Node.js and npm (apt-get install nodejs npm)")
        return ["node", str(d / "producer.js")]
    if library == "sarama":
        out = HERE / "sarama" / "bin" / "sarama-producer"
        src = HERE / "sarama" / "producer.go"
        if not out.is_file() or out.stat().st_mtime < src.stat().st_mtime:
            _run(["bash", str(HERE / "sarama" / "build.sh"), str(out)], HERE / "sarama",
                 "building the sarama driver (Debian's golang-go and golang-github-shopify-sarama-dev)",
                 "Debian's golang-go and golang-github-shopify-sarama-dev")
        return [str(out)]
    raise DriverError(f"no process driver for {library!r}")


def _run(cmd: list[str], cwd: Path, what: str, needs: str) -> None:
    print(f"client library: {what} ...", file=sys.stderr, flush=True)
    try:
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DriverError(f"{what} failed ({exc}); it needs {needs}") from exc
    if r.returncode != 0:
        tail = " | ".join(r.stdout.strip().splitlines()[-3:])
        raise DriverError(f"{what} failed (exit {r.returncode}: {tail}); it needs {needs}")


class ProcessDriver(Driver):
    def __init__(self, library: str, conf: DriverConfig):
        self.library = library
        self.bootstrap = conf.bootstrap
        self.pending: dict[int, tuple[Done, int]] = {}  # id -> (done, partition)
        self.answers: list[dict[str, Any]] = []
        self.out: list[bytes] = []
        self.info: dict[str, Any] = {"library": library}
        self.stats: dict[str, Any] = {}
        self.fatal: str | None = None
        self.flushed = False
        self.proc = subprocess.Popen(command(library), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=str(HERE), env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._write({"op": "config", "bootstrap": conf.bootstrap, "client_id": conf.client_id,
                     "linger_ms": conf.linger_ms, "message_timeout_ms": conf.message_timeout_ms,
                     "body_b64": base64.b64encode(conf.body).decode(), "stamp": conf.stamp,
                     "settings": conf.settings})
        self._flush_out()
        self.reader = gevent.spawn(self._read)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "version" not in self.info and self.fatal is None and time.monotonic() < deadline:
            gevent.sleep(0.02)
        if "version" not in self.info:
            why = self.fatal or f"no ready line within {READY_TIMEOUT_S:g} s"
            self.close()
            raise DriverError(f"{library} producer {conf.client_id}: {why}")

    def _write(self, obj: dict[str, Any]) -> None:
        self.out.append(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def _flush_out(self) -> None:
        if self.out and self.proc.poll() is None:
            data, self.out = b"".join(self.out), []
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the process is gone: _read reports it

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                print(f"{self.library} driver: not a JSON line: {line[:200]!r}", file=sys.stderr)
                continue
            kind = ev.get("event")
            if kind == "ready":
                self.info = {k: ev.get(k) for k in ("library", "version", "settings")}
            elif kind == "fatal":
                self.fatal = str(ev.get("error"))
            elif kind == "stats":
                self.stats = {"retries": ev.get("retries"), "errors": ev.get("errors") or {}}
            elif kind == "flushed":
                self.flushed = True
            else:
                self.answers.append(ev)
        rc = self.proc.wait()
        if self.fatal is None and (rc != 0 or self.pending):
            self.fatal = f"the {self.library} driver exited (code {rc})"

    def send(self, msg_id: int, topic: str, partition: int, producer: str, value: bytes,
             headers: list[tuple[str, bytes]], done: Done, key: bytes | None = None) -> str | None:
        if self.fatal is not None:
            return f"{self.library} driver: {self.fatal}"
        self.pending[msg_id] = (done, partition)
        self._write({"op": "send", "id": msg_id, "topic": topic, "partition": partition, "producer": producer})
        return None

    def serve(self) -> None:
        self._flush_out()
        answers, self.answers = self.answers, []
        for ev in answers:
            entry = self.pending.pop(ev.get("id"), None)
            if entry is None:
                continue
            done, part = entry
            if ev.get("event") == "ack":
                done(Delivery("ok", int(ev.get("partition", part)), ev.get("offset"), float(ev["ts"]), None))
            else:
                done(Delivery("fail" if ev.get("written") is False else "info", int(ev.get("partition", part)),
                              None, None, str(ev.get("error"))))
        if self.fatal is not None and self.reader.dead:
            self._give_up(f"{self.library} driver: {self.fatal}")

    def _give_up(self, why: str) -> None:
        pending, self.pending = self.pending, {}
        for done, part in pending.values():
            done(Delivery("info", part, None, None, why))

    def broken(self) -> str | None:
        return f"{self.library} driver: {self.fatal}" if self.fatal is not None and self.reader.dead else None

    def outstanding(self) -> int:
        return len(self.pending) + len(self.answers)

    def purge(self) -> None:
        self._write({"op": "flush", "timeout_ms": 0})
        self._flush_out()
        deadline = time.monotonic() + 5
        while not self.flushed and not self.reader.dead and time.monotonic() < deadline:
            gevent.sleep(0.01)
        self.serve()
        self._give_up("not answered by the client at the end of the drain")

    def partitions(self, topic: str) -> int:
        # The library's own metadata is in its process: ask once with librdkafka's admin client.
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        return len(t.partitions) if t is not None and t.error is None else 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self._write({"op": "close"})
            self._flush_out()
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def describe(self) -> dict[str, Any]:
        return {**self.info, **self.stats}
