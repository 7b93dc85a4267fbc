"""The Kafka locustfiles under Locust's own command line and web UI, as a Locust user runs them:
the README's commands verbatim (taken from README.md between ``<!-- locust-example:NAME -->``
markers, so the two cannot drift), a missing topic, an unreachable bootstrap, the web UI's start
form. Every Locust process runs in a subprocess (importing Locust here would monkey-patch pytest
with gevent), in a session of its own, and is stopped by its process group's id; every wait is
bounded."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support import cli

ROOT = str(cli.ROOT)
VENV_BIN = os.path.dirname(sys.executable)
LOCUST = os.path.join(VENV_BIN, "locust")
README_DIR = "/tmp/locust-demo"  # the README's cluster directory: replaced by a temp dir


def readme_block(name: str) -> str:
    """The shell commands of the README's ``locust-example:NAME`` block."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"<!-- locust-example:{name} -->\s*```sh\n(.*?)```\s*<!-- /locust-example:{name} -->", text, re.DOTALL)
    assert m, f"README.md has no locust-example:{name} block"
    return m.group(1)


def localize(commands: str, cluster_dir: str | None = None) -> str:
    """The README's commands with only the virtualenv's path (and the cluster's directory) replaced."""
    out = commands.replace(".venv/bin/", VENV_BIN + "/")
    if cluster_dir is not None:
        out = out.replace(README_DIR, cluster_dir)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv: list[str], timeout: float, env: dict | None = None) -> tuple[int, str, float]:
    """Run to completion (its whole process group killed by id past ``timeout``): (rc, output, seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env={**os.environ, **(env or {})})
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate(timeout=10)
        pytest.fail(f"{' '.join(argv)[:200]} did not end within {timeout} s; output ends:\n{out[-3000:]}")
    return p.returncode, out, time.monotonic() - t0


def errors(out: str) -> list[str]:
    return [line for line in out.splitlines() if "/ERROR/" in line]


def stats_rows(out: str, kind: str) -> list[str]:
    """The rows of Locust's stats tables for request type ``kind``."""
    return [line for line in out.splitlines() if line.startswith(f"{kind} ") and "%) |" in line]


@pytest.mark.slow
def test_readme_headless_commands_run_verbatim_and_end_by_themselves(tmp_path):
    """The README's commands against the cluster they start: the producer run creates its topic,
    prints the stats table with produce rows and no failures, and ends after -t; so does the
    consumer run (consume rows); all small output, no traceback."""
    from bench.run.cluster import Cluster

    cluster_dir = str(tmp_path / "cluster")
    script = localize(readme_block("headless"), cluster_dir)
    try:
        rc, out, took = run(["bash", "-e", "-x", "-c", script], timeout=90)
    finally:
        if os.path.exists(os.path.join(cluster_dir, "cluster.json")):
            Cluster.load(cluster_dir).stop()  # by PID; a no-op after the README's own stop
    assert rc == 0, out[-3000:]
    assert len(out) < 200_000 and "Traceback" not in out, out[-3000:]
    # bash -x marks each command with "+ ": split the output per command.
    parts = re.split(r"^\+ ", out, flags=re.MULTILINE)
    # `cluster start` says which topic defaults it applied and what they mean for an RF-1 topic
    start = next(p for p in parts if p.split("\n", 1)[0].endswith("cluster start --system replication --brokers 3 "
                                                                   f"--dir {cluster_dir}"))
    assert ("topic defaults: default.replication.factor=3 (replication's production configuration), "
            "min.insync.replicas=2 (replication's production configuration)") in start, start
    assert "NOT_ENOUGH_REPLICAS" in start and "--config min.insync.replicas=1" in start, start
    produce = next(p for p in parts if p.startswith(LOCUST + " -f workloads/kafka_produce.py"))
    consume = next(p for p in parts if p.startswith(LOCUST + " -f workloads/kafka_consume.py"))
    assert "created topic events" in produce and "3 partition(s)" in produce, produce[-3000:]
    assert "Type     Name" in produce and "# reqs" in produce
    rows = stats_rows(produce, "produce")
    assert rows and all(" 0(0.00%)" in r for r in rows), "\n".join(rows)
    final = rows[-1].split()
    assert final[1] == "events" and int(final[2]) > 500, rows[-1]  # 5 s at 200/s
    assert "Shutting down (exit code 0)" in produce and "Shutting down (exit code 0)" in consume
    assert "Type     Name" in consume and stats_rows(consume, "consume"), consume[-3000:]
    assert not errors(out), errors(out)
    assert took < 75, f"the README's commands took {took:.0f} s"


def test_missing_topic_created_or_one_line(make_cluster):
    """A topic that does not exist: with --no-kafka-create-topics the run stops at once with one
    line; by default it is created with the partitions --kafka-topics names and the run goes on.
    A producer that cannot start (a bad librdkafka setting) ends the run in one line too."""
    from confluent_kafka.admin import AdminClient

    c = make_cluster(brokers=1)
    base = [LOCUST, "-f", "workloads/kafka_produce.py", "--kafka-bootstrap", c.bootstrap, "--headless"]

    rc, out, took = run(base + ["--kafka-topics", "absent:2", "--no-kafka-create-topics", "-t", "30s"], timeout=30)
    assert rc == 1 and took < 10, out[-2000:]
    assert [e.split("/ERROR/", 1)[1] for e in errors(out)] == \
        [f"kafka: topic absent does not exist at {c.bootstrap} (not created: --no-kafka-create-topics)"]
    assert "Traceback" not in out and len(out) < 20_000

    rc, out, took = run(base + ["--kafka-topics", "fresh:2", "--kafka-rate", "50", "-t", "2s"], timeout=30)
    assert rc == 0 and not errors(out), out[-2000:]
    assert "created topic fresh" in out and stats_rows(out, "produce"), out[-2000:]
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(timeout=10)
    assert len(md.topics["fresh"].partitions) == 2
    assert len(md.topics["fresh"].partitions[0].replicas) == 1  # the cluster's default.replication.factor

    rc, out, took = run(base + ["--kafka-topics", "fresh", "--kafka-producer-config", '{"no.such.setting": 1}',
                                "-u", "3", "-t", "30s"], timeout=30)
    assert rc == 1 and took < 10, out[-2000:]
    [line] = errors(out)
    assert "cannot start" in line and "no.such.setting" in line, line
    assert "Traceback" not in out and len(out) < 20_000


BUGGY = """
import workloads.kafka_produce as kp


class BuggyProducer(kp.KafkaProducerUser):
    def _send_one(self):
        raise ZeroDivisionError("integer modulo by zero")


class Shape(kp.ScenarioShape):
    pass
"""


def test_an_error_while_sending_ends_the_run_in_one_line(make_cluster, tmp_path):
    """The loop the README's command once fell into (an exception on every send, 37,878 tracebacks):
    any error in a user's task now ends the run with one line and exit code 1."""
    c = make_cluster(brokers=1)
    f = tmp_path / "buggy.py"
    f.write_text(BUGGY)
    rc, out, took = run([LOCUST, "-f", str(f), "--kafka-bootstrap", c.bootstrap, "--kafka-topics", "t:1",
                         "--headless", "-u", "2", "-t", "60s"], timeout=30, env={"PYTHONPATH": ROOT})
    assert rc == 1 and took < 10, out[-2000:]
    [line] = errors(out)
    assert re.search(r"/ERROR/kafka: producer p\d+: ZeroDivisionError: integer modulo by zero$", line), line
    assert "Traceback" not in out and len(out) < 20_000


def test_unreachable_bootstrap_ends_fast_with_one_line():
    """Nothing listens at the bootstrap: one line naming the address and why, exit code 1, no
    flood, well before -t."""
    addr = f"127.0.0.1:{free_port()}"
    rc, out, took = run([LOCUST, "-f", "workloads/kafka_produce.py", "--kafka-bootstrap", addr, "--headless",
                         "-u", "2", "-t", "60s"], timeout=30)
    assert rc == 1 and took < 10, (took, out[-2000:])
    [line] = errors(out)
    assert f"cannot reach the Kafka cluster at {addr}" in line and "Connection refused" in line, line
    assert "Traceback" not in out and len(out) < 20_000, out[-2000:]


def _template_args(html: str) -> dict:
    i = html.index("window.templateArgs = ") + len("window.templateArgs = ")
    return json.JSONDecoder().raw_decode(html[i:])[0]


@pytest.mark.parametrize("which", ["produce", "consume"])
def test_web_ui_form_has_the_kafka_fields(which):
    """The web UI's page (the README's command for the producer) carries the Kafka options in
    ``extra_options``, which its start form renders under "Custom parameters"; Locust's own
    users / spawn rate / run time fields are shown (the shape reads them); the host is the bootstrap."""
    port = free_port()
    if which == "produce":
        cmd = ["bash", "-c", "exec " + localize(readme_block("web")).strip() + f" --web-port {port}"]
    else:
        cmd = [LOCUST, "-f", "workloads/kafka_consume.py", "--kafka-bootstrap", "127.0.0.1:1",
               "--web-host", "127.0.0.1", "--web-port", str(port)]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env={**os.environ, "BOOTSTRAP": "127.0.0.1:1"})
    try:
        deadline, html = time.monotonic() + 30, None
        while html is None:
            try:
                html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read().decode()
            except OSError:
                assert p.poll() is None, p.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "the web UI did not answer within 30 s"
                time.sleep(0.2)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    args = _template_args(html)
    extra = args["extra_options"]
    common = {"kafka_bootstrap", "kafka_topics", "kafka_create_topics", "kafka_replication_factor"}
    own = {"produce": {"kafka_rate", "kafka_message_bytes", "kafka_shape", "kafka_key_distribution",
                       "kafka_producer_config"},
           "consume": {"kafka_group", "kafka_groups", "kafka_start", "kafka_consumer_config"}}[which]
    assert common | own <= set(extra), sorted(extra)
    assert extra["kafka_bootstrap"]["default_value"] == "127.0.0.1:1" and extra["kafka_bootstrap"]["help_text"]
    if which == "produce":
        assert extra["kafka_shape"]["choices"] == ["steady", "ramp", "burst"]
    assert not args["hide_common_options"] and args["host"] == "127.0.0.1:1" and not args["missing_host_warning"]


def test_help_lists_the_kafka_options():
    """The README's help command lists the locustfile's options (``locust -f FILE --help`` cannot:
    Locust prints its help before importing the locustfile)."""
    rc, out, _ = run(["bash", "-c", localize(readme_block("help"))], timeout=60)
    assert rc == 0, out[-2000:]
    assert "kafka producer (workloads/kafka_produce.py):" in out
    for opt in ("--kafka-bootstrap", "--kafka-topics", "--kafka-rate", "--kafka-create-topics",
                "--kafka-replication-factor", "--users", "--run-time"):
        assert opt in out, opt
    rc, out, _ = run([sys.executable, "-m", "workloads", "-f", "workloads/kafka_consume.py", "--help"], timeout=60)
    assert rc == 0 and "--kafka-group" in out and "--kafka-start" in out, out[-2000:]
