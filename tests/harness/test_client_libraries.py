"""The load's producing library as a workload setting (``workload.client_library``,
workloads/clients/): each library's driver sends through the harness's runner to a real cluster,
every send reaches the run's history with its outcome, the verifying read-back finds every acked
one (the checkers), and a move's errors at the brokers and the client's Metadata requests are
counted per move. All three are slow (``make test-slow``): whole runs, and kafkajs (npm) and sarama
(Debian's Go) install or build on first use; kafka-python's client is in ``make test`` through
tests/systems/test_core_clients.py."""
from __future__ import annotations

import pyarrow.compute as pc
import pytest

from bench.history.store import read_history

pytestmark = pytest.mark.timeout(420)


def scenario(library: str) -> dict:
    return {
        "name": f"client-{library}",
        "system": {"kind": "shared", "brokers": 2},
        "workload": {"topics": [{"name": "c", "partitions": 1}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 200, "producers": 1, "duration_s": 9, "client_library": library},
        "actions": [{"at_s": 3, "kind": "reassign", "topic": "c", "partition": 0, "replace": 1, "by": 2}],
    }


def check_library(run_scenario, library: str) -> None:
    [(run_dir, s)] = run_scenario(scenario(library))
    c = s["checks"]
    assert s["error"] is None and c["valid"] is True, (run_dir, s["error"], c["failed"], c["unknown"])
    p = s["producer"]
    assert p["client"]["library"] == library and p["client"]["version"], p["client"]
    assert s["params"]["client_library"] == library
    assert p["acked"] > 1000 and p["failed"] == 0, p
    t = read_history(run_dir / "history.parquet")
    sends = t.filter(pc.fill_null(pc.equal(t["kind"], "send"), False))
    ok = sends.filter(pc.equal(sends["outcome"], "ok"))
    assert ok.num_rows == p["acked"] and pc.min(ok["offset"]).as_py() is not None
    [m] = s["moves"]
    assert m["move_seconds"] is not None
    # the brokers' count of what this library's producer met while the move was unavailable to it
    assert isinstance(m["client_errors"], dict) and m["client_metadata_requests"] >= 1, m
    # and when: every Metadata request up to the first ack, in order, from the request
    asked = m["client_metadata_seconds"]
    assert asked == sorted(asked) and all(0 <= x <= m["move_seconds"] for x in asked), m
    if m["client_refused_seconds"] is not None:
        assert 0 <= m["client_refused_seconds"] <= m["move_seconds"], m
    q = m["client_leader_query_seconds"]
    assert q is None or q in asked, m


@pytest.mark.slow
def test_kafka_python_produces_through_the_harness(run_scenario):
    check_library(run_scenario, "kafka-python")


@pytest.mark.slow
def test_kafkajs_produces_through_the_harness(run_scenario):
    check_library(run_scenario, "kafkajs")


@pytest.mark.slow
def test_sarama_produces_through_the_harness(run_scenario):
    check_library(run_scenario, "sarama")


def test_a_library_without_librdkafkas_features_is_refused_before_anything_runs():
    from bench.scenario.loading import parse_scenario
    from bench.scenario import ScenarioError

    for extra, where in (({"key_distribution": "zipf"}, "key_distribution"),
                         ({"pace_partitions": True}, "pace_partitions")):
        sc = scenario("kafkajs")
        sc["workload"].update(extra)
        with pytest.raises(ScenarioError, match=where):
            parse_scenario(sc)
    sc = scenario("sarama")
    sc["system"]["client"] = {"security.protocol": "SSL"}
    with pytest.raises(ScenarioError, match="system.client"):
        parse_scenario(sc)


def test_a_librarys_driver_is_built_before_any_cluster_starts_and_a_failed_build_stops_the_run(tmp_path, monkeypatch):
    """kafkajs and sarama install or build on first use; a run does that before its cluster and its
    load's clock start (a fresh machine's Go build outlasts a short load), and a build that cannot
    be done is the run's error, before anything is started."""
    from bench.run import runner
    from bench.scenario.loading import parse_scenario
    from workloads.clients.base import DriverError

    asked = []

    def prepare(library):
        asked.append(library)
        raise DriverError("building the sarama driver failed (exit 1); it needs Debian's golang-go")

    monkeypatch.setattr(runner.load_clients, "prepare", prepare)
    monkeypatch.setattr(runner, "Run", lambda *a, **k: pytest.fail("a run started before its driver was built"))
    with pytest.raises(runner.RunError, match="golang-go"):
        runner.run_scenario(parse_scenario(scenario("sarama")), results_root=tmp_path, progress=False)
    assert asked == ["sarama"]
