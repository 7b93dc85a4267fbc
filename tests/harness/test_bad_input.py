"""Every bad input a newcomer meets first gets, within 5 s, one message that names the problem
(the broker id, topic-partition, address, setting or file) and no traceback (issue 17).

Each test runs the command as a user does (`python -m bench ...` in a subprocess) and times it
with time.monotonic(): the bound is a correctness bound (a user must not wait 30 s for "unable
to bootstrap"), not a benchmark. The reassignment cases share one cluster."""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic

from tests.support.clients import admin, create_topics
from tests.support.clusters import FAST, start_cluster

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 5.0


def bench(*args: str, timeout: float = 30) -> tuple[str, str, int, float]:
    """(stdout, stderr, exit code, seconds) of `python -m bench ARGS`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return r.stdout, r.stderr, r.returncode, time.monotonic() - t0


def answered(out: str, err: str, rc: int, took: float, *needles: str) -> str:
    """The command failed within the bound, without a traceback, saying every needle."""
    text = out + err
    assert rc != 0, text
    assert took < BOUND_S, f"took {took:.1f} s: {text}"
    assert "Traceback" not in text, text
    for n in needles:
        assert n in text, f"{n!r} not in: {text}"
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(tmp_path: Path, partitions: list[dict]) -> str:
    path = tmp_path / f"plan-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


# -- settings ------------------------------------------------------------------------------------

@pytest.mark.parametrize("setting, needles", [
    ("broker.session.timeout.ms=abc", ["broker.session.timeout.ms", "'abc'", "must be an integer"]),
    ("unclean.leader.election.enable=maybe", ["unclean.leader.election.enable", "true or false"]),
    ("broker.sesion.timeout.ms=3000", ["unknown setting 'broker.sesion.timeout.ms'",
                                      "did you mean 'broker.session.timeout.ms'?"]),
    ("broker.session.timeout.ms", ["--config expects key=value", "'broker.session.timeout.ms'"]),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, setting, needles):
    d = tmp_path / "c"
    out, err, rc, took = bench("cluster", "start", "--dir", str(d), "--brokers", "1", "--config", setting)
    answered(out, err, rc, took, *needles)
    assert len((out + err).strip().splitlines()) == 1, out + err
    assert not (d / "cluster.json").exists()  # refused before anything started


# -- bootstrap addresses -------------------------------------------------------------------------

@pytest.mark.parametrize("address, needles", [
    ("nonsense", ["'nonsense' is not host:port", "e.g. 127.0.0.1:9092"]),
    ("127.0.0.1:99999", ["'127.0.0.1:99999'", "port 99999 is not in 1..65535"]),
    ("127.0.0.1:9092,nonsense", ["'nonsense' (in '127.0.0.1:9092,nonsense') is not host:port"]),
])
def test_malformed_bootstrap(address, needles):
    answered(*bench("reassign", "--bootstrap-server", address, "--list"), "--bootstrap-server", *needles)


def test_closed_port_bootstrap():
    addr = f"127.0.0.1:{free_port()}"
    answered(*bench("reassign", "--bootstrap-server", addr, "--list"),
             f"no broker reachable at {addr}", f"tried {addr} (TCP connect to 127.0.0.1: connection refused)")


def test_silent_bootstrap():
    """A port that accepts connections but never answers in Kafka's protocol."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel completes the handshakes; nobody ever reads
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
        answered(*bench("reassign", "--bootstrap-server", addr, "--list"),
                 f"no Kafka answer from {addr}", "TCP connection opened", "ApiVersions")


# -- scenario files ------------------------------------------------------------------------------

def test_broken_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nsystem: {kind: replication\nworkload: [\n")
    text = answered(*bench("run", str(path), "--results", str(tmp_path / "r"), "--no-progress"),
                    f"{path}, line 3, column 9", "expected ',' or '}'", "flow mapping at line 2, column 9")
    assert "<unicode string>" not in text


def test_binary_scenario_names_the_file(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00name")
    answered(*bench("run", str(path), "--results", str(tmp_path / "r"), "--no-progress"),
             f"{path} is not UTF-8 text")


# -- help ----------------------------------------------------------------------------------------

def test_every_option_of_every_command_has_help():
    from bench.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(" ".join([*path, name]))
                    walk(sub, [*path, name])
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(" ".join([*path, *(action.option_strings or [action.dest])]))

    walk(build_parser(), ["bench"])
    assert not missing, f"no help text: {missing}"


# -- reassignments: one cluster for all ----------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory, "replication", 3, FAST)
    try:
        create_topics(c.bootstrap, [NewTopic("t", num_partitions=-1, replication_factor=-1,
                                             replica_assignments={0: [1], 1: [2]})])
        yield c
    finally:
        c.stop()


def test_execute_to_unknown_broker_names_it(cluster, tmp_path):
    p = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2, 9]}])
    answered(*bench("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", p, "--execute",
                    "--throttle", "1000000"),
             "Unknown broker id 9 (in the replicas [2, 9] of t-0)", "the cluster's brokers are 1, 2, 3")


@pytest.mark.parametrize("partition, needle", [
    ({"topic": "nope", "partition": 0, "replicas": [1]}, "nope-0 (Unable to find a topic named nope.)"),
    ({"topic": "t", "partition": 7, "replicas": [1]}, "t-7 (Unable to find partition t:7; topic t has partitions 0..1)"),
])
def test_execute_unknown_topic_or_partition(cluster, tmp_path, partition, needle):
    p = plan(tmp_path, [partition])
    answered(*bench("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", p, "--execute"),
             needle)


@pytest.mark.parametrize("replicas, needle", [
    ([1, 1], "t-0: duplicate replicas in [1, 1]"),
    ([], "t-0: the replica list must not be empty"),
])
def test_execute_bad_replica_list(cluster, tmp_path, replicas, needle):
    p = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": replicas}])
    answered(*bench("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", p, "--execute"),
             needle)


@pytest.mark.parametrize("partition, needle", [
    ({"topic": "t", "partition": 0}, "t-0: NoReassignmentInProgressError: No partition reassignment is in progress."),
    ({"topic": "nope", "partition": 0}, "nope-0: UnknownTopicOrPartitionError: Unable to find a topic named nope."),
    ({"topic": "t", "partition": 7}, "t-7: UnknownTopicOrPartitionError: Unable to find partition t:7."),
])
def test_cancel_answers_name_the_partition(cluster, tmp_path, partition, needle):
    """What the controller answers (Kafka's words), printed with the topic-partition."""
    p = plan(tmp_path, [partition])
    answered(*bench("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", p, "--cancel"),
             f"Error cancelling {needle}")


def test_controller_messages_are_kafkas(cluster):
    """AlterPartitionReassignments answered by the controller itself (what any Kafka client sees):
    ReplicationControlManager's messages, naming the broker; nothing changes."""
    from bench.cli.reassign import alter_reassignments

    a = admin(cluster.bootstrap)
    try:
        t0 = time.monotonic()
        res = alter_reassignments(a, {TopicPartition("t", 0): [9, 1], TopicPartition("t", 1): [3, 2, 3]})
        assert time.monotonic() - t0 < BOUND_S
        assert {(tp.partition, err[0].__name__, err[1]) for tp, err in res.items()} == {
            (0, "InvalidReplicationAssignmentError",
             "The manual partition assignment includes broker 9, but no such broker is registered."),
            (1, "InvalidReplicationAssignmentError",
             "The manual partition assignment includes the broker 3 more than once.")}
        assert a.list_partition_reassignments() == {}
    finally:
        a.close()
