import re
from pathlib import Path

import pytest
import yaml

from bench.scenario import (
    ScenarioError,
    expand,
    load_scenario,
    parse_scenario,
    split_repetition,
)

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "workloads" / "scenarios").glob("*.yaml"))
REASSIGN_ONE = next(p for p in SCENARIOS if p.name == "reassign-one.yaml")


def minimal(**changes):
    """A small valid scenario as a raw dict; ``changes`` replace whole sections."""
    data = {
        "name": "t",
        "system": {"kind": "replication", "brokers": 3},
        "workload": {
            "topics": [{"name": "hot", "partitions": 2, "replication_factor": 1}],
            "message_bytes": "4KiB",
            "produce_rate_msgs_per_s": 100,
            "duration_s": 30,
        },
        "actions": [{"at_s": 5, "kind": "reassign", "topic": "hot", "partition": 0, "to": [2]}],
    }
    data.update(changes)
    return data


def error_of(data, overrides=()):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "x.yaml", overrides)
    return info.value


def test_builtin_scenarios_exist():
    assert {p.name for p in SCENARIOS} >= {
        "reassign-one.yaml", "scale-out.yaml", "drain.yaml", "broker-loss.yaml", "sweep.yaml"}


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_builtin_scenario_loads_and_expands(path):
    sc = load_scenario(path)
    assert sc.name == path.stem
    runs = expand(sc)
    assert runs
    ids = [rid for rid, _ in runs]
    assert len(set(ids)) == len(ids)
    n = 1
    for values in sc.matrix.values():
        n *= len(values)
    assert len(runs) == n * sc.repetitions
    for rid, run in runs:
        assert re.fullmatch(r"[A-Za-z0-9._=+-]+", rid), rid
        assert rid.startswith(sc.name)
        assert run.matrix == {}
        # Kept small enough for a quick run on a laptop; users scale up with --set. sweep-shared is
        # the measurement of large partitions (up to 4 GiB) for the shared model's checks,
        # tiered-move the 1 GiB partition of tiered storage's move (on 1gbit links), link-steps
        # partitions whose copy at 1gbit lasts about a second (the link check's held-out move);
        # calibrate sixteen moves one after another (the throttled copy's take about 75 s);
        # tiered-tail two of Kafka's 30 s upload intervals and two segment rolls at its lowest rate;
        # shared-tail fifteen moves one after another (the upload handoff's 64 MiB ones ~6 s each);
        # calibrate-cluster six throttled moves (at 4 MB/s about 25 s; the load ends after them).
        assert run.workload.duration_s <= {"calibrate": 100, "tiered-tail": 80, "shared-tail": 90,
                                           "calibrate-cluster": 90}.get(sc.name, 60)
        # shared-open 100,000 objects of one 1,000-byte record each (the open cost's held-out level);
        # shared-tail-large tails just under AutoMQ's 512 MiB upload threshold (not in make bench)
        large = {"sweep-shared": 4 * 2**30, "tiered-move": 2**30, "link-steps": 96 * 2**20, "shared-open": 10**8,
                 "shared-tail-large": 500 * 2**20}
        assert max(run.prefill_bytes_of(t.name) for t in run.workload.topics) <= large.get(sc.name, 64 * 2**20)


def test_reassign_one_matrix_run_ids_and_values():
    runs = dict(expand(load_scenario(REASSIGN_ONE)))
    rid = "reassign-one__system.kind=shared__prefill.bytes_per_partition=64MiB"
    assert rid in runs
    assert runs[rid].system.kind == "shared"
    assert runs[rid].prefill.bytes_per_partition == 64 * 2**20
    assert runs[rid].network.link_rate == "100mbit" and runs[rid].system.move_budget_of_link == 0.5
    assert len(runs) == 12  # three systems x four sizes: what the models' held-out size check needs


def test_unknown_field_is_rejected_with_its_path():
    data = minimal()
    data["workload"]["produce_rate"] = 5
    err = error_of(data)
    assert "x.yaml: workload.produce_rate: unknown field" in str(err)
    assert "produce_rate_msgs_per_s" in str(err)  # the hint lists the allowed names
    assert err.errors[0][0] == "workload.produce_rate"


def test_negative_rate_is_rejected():
    data = minimal()
    data["workload"]["produce_rate_msgs_per_s"] = -5
    assert "x.yaml: workload.produce_rate_msgs_per_s: must be > 0" in str(error_of(data))


def test_negative_rate_message_names_the_file(tmp_path):
    path = tmp_path / "reassign-one.yaml"
    path.write_text(REASSIGN_ONE.read_text())
    with pytest.raises(ScenarioError, match=r"^reassign-one\.yaml: workload\.produce_rate_msgs_per_s: must be > 0"):
        load_scenario(path, ["workload.produce_rate_msgs_per_s=-1"])


def test_reassign_to_nonexistent_broker_is_rejected():
    data = minimal()
    data["actions"][0]["to"] = [9]
    assert "x.yaml: actions.0.to: broker 9 does not exist" in str(error_of(data))


def test_shared_reassign_to_two_brokers_is_rejected():
    data = minimal(system={"kind": "shared", "brokers": 3})
    data["actions"][0]["to"] = [2, 3]
    msg = str(error_of(data))
    assert "x.yaml: actions.0.to: shared system" in msg and "exactly one broker" in msg
    # The same plan is fine for the replication system (a replica set).
    data["system"]["kind"] = "replication"
    assert parse_scenario(data).actions[0].to == [2, 3]


def test_shared_two_brokers_caught_inside_a_matrix():
    data = minimal(matrix={"system.kind": ["replication", "shared"]})
    data["actions"][0]["to"] = [2, 3]
    msg = str(error_of(data))
    assert "matrix run [system.kind=shared]" in msg and "actions.0.to" in msg


@pytest.mark.parametrize(
    "patch, path, fragment",
    [
        (lambda d: d["actions"][0].update(partition=2), "actions.0.partition", "partitions 0..1"),
        (lambda d: d["actions"][0].update(topic="cold"), "actions.0.topic", "unknown topic"),
        (lambda d: d["actions"][0].update(at_s=30), "actions.0.at_s", "duration_s"),
        (lambda d: d["actions"][0].update(broker=1), "actions.0.broker", "not used by action kind reassign"),
        (lambda d: d["actions"][0].pop("to"), "actions.0.to", "required"),
        (lambda d: d["system"].update(kind="copy"), "system.kind", "unknown system 'copy' (systems: replication, tiered, shared, external)"),
        (lambda d: d["system"].update(brokers=0), "system.brokers", "must be >= 1"),
        (lambda d: d["system"].update(brokers=True), "system.brokers", "integer"),
        (lambda d: d["workload"].update(message_bytes="4k"), "workload.message_bytes", "byte size"),
        (lambda d: d["workload"]["topics"][0].update(replication_factor=4),
         "workload.topics.0.replication_factor", "exceeds system.brokers"),
        (lambda d: d["workload"].update(shape={"kind": "burst", "burst_every_s": 5, "burst_factor": 3}),
         "workload.shape.burst_s", "required for shape kind burst"),
        (lambda d: d.update(checks={"safety": False}), "checks.safety", "cannot be disabled"),
        (lambda d: d.update(prefill={"topics": ["nope"]}), "prefill.topics.0", "unknown topic"),
        (lambda d: d.update(matrix={"system.kindd": ["shared"]}), "matrix.system.kindd", "no field"),
    ],
)
def test_field_errors_name_the_path(patch, path, fragment):
    data = minimal()
    patch(data)
    err = error_of(data)
    assert f"x.yaml: {path}: " in str(err), str(err)
    assert fragment in str(err), str(err)


def test_broker_lifecycle_rules():
    add = {"at_s": 1, "kind": "add_broker_and_rebalance"}
    to4 = {"at_s": 2, "kind": "reassign", "topic": "hot", "partition": 0, "to": [4]}
    sc = parse_scenario(minimal(actions=[add, to4]))
    assert sc.added_broker_ids() == {0: 4}
    # Broker 4 only exists after the add.
    assert "actions.0.to: broker 4 does not exist" in str(error_of(minimal(actions=[dict(to4, at_s=0), add])))
    kill = {"at_s": 1, "kind": "kill_broker", "broker": 2}
    restart = {"at_s": 2, "kind": "restart_broker", "broker": 2}
    parse_scenario(minimal(actions=[kill, restart]))
    assert "actions.0.broker: broker 2 is not dead" in str(error_of(minimal(actions=[restart])))
    assert "actions.1.broker: broker 2 is already dead" in str(error_of(minimal(actions=[kill, dict(kill, at_s=2)])))
    assert "actions.1.at_s: actions must be listed in time order" in str(
        error_of(minimal(actions=[kill | {"at_s": 3}, restart])))


def test_move_set_accepts_kafka_plan_entries():
    plan = {"at_s": 1, "kind": "move_set", "partitions": [
        {"topic": "hot", "partition": 0, "replicas": [2]},
        {"topic": "hot", "partition": 1, "to": [3]},
    ]}
    sc = parse_scenario(minimal(actions=[plan]))
    assert [(m.topic, m.partition, m.to) for m in sc.actions[0].moves()] == [("hot", 0, [2]), ("hot", 1, [3])]


def test_set_overrides(tmp_path):
    sc = load_scenario(REASSIGN_ONE, [
        "workload.produce_rate_msgs_per_s=1000",
        "prefill.topics=[hot]",
        "system.kind=shared",  # pins the system.kind matrix axis
        "system.extra.log.segment.bytes=1048576",  # config names keep their dots
        "actions.0.by=2",
        "checks.max_move_seconds=5",
    ])
    assert sc.workload.produce_rate_msgs_per_s == 1000
    assert sc.prefill.topics == ["hot"]
    assert sc.system.kind == "shared"
    assert sc.system.extra == {"log.segment.bytes": "1048576"}
    assert sc.actions[0].moves(sc.placement())[0].to == [2]  # shared: hot-0 on [1] -> [2]
    assert sc.checks.max_move_seconds == 5
    assert list(sc.matrix) == ["prefill.bytes_per_partition"]
    assert [rid for rid, _ in expand(sc)] == [
        "reassign-one__prefill.bytes_per_partition=1MiB",
        "reassign-one__prefill.bytes_per_partition=8MiB",
        "reassign-one__prefill.bytes_per_partition=32MiB",
        "reassign-one__prefill.bytes_per_partition=64MiB",
    ]
    both = load_scenario(REASSIGN_ONE, ["system.kind=shared", "prefill.bytes_per_partition=1GiB"])
    assert both.matrix == {} and both.prefill.bytes_per_partition == 2**30
    assert [rid for rid, _ in expand(both)] == ["reassign-one"]
    # --set can replace the matrix as well.
    sc = load_scenario(REASSIGN_ONE, ["matrix={}", "matrix.workload.producers=[1,2]"])
    assert [run.workload.producers for _, run in expand(sc)] == [1, 2]
    with pytest.raises(ScenarioError, match="expected key.path=value"):
        load_scenario(REASSIGN_ONE, ["workload.producers"])
    with pytest.raises(ScenarioError, match=r"actions\.5\.to: cannot --set: actions is a list of 1"):
        load_scenario(REASSIGN_ONE, ["actions.5.to=[2]"])
    with pytest.raises(ScenarioError, match=r"workload\.bogus: unknown field"):
        load_scenario(REASSIGN_ONE, ["workload.bogus=1"])


def test_yaml_problems(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: a\nname: b\n")
    with pytest.raises(ScenarioError, match="dup.yaml: <file>: invalid YAML.*duplicate key 'name'"):
        load_scenario(dup)
    with pytest.raises(ScenarioError, match="missing.yaml: <file>: cannot read"):
        load_scenario(tmp_path / "missing.yaml")


def test_to_yaml_round_trips():
    sc = load_scenario(REASSIGN_ONE)
    again = parse_scenario(yaml.safe_load(sc.to_yaml()))
    assert again == sc
    assert again.resolved()["system"]["wal_batch_interval_ms"] is None  # the system's own default


def test_models_are_frozen():
    sc = load_scenario(REASSIGN_ONE)
    with pytest.raises(Exception):
        sc.system.brokers = 5


@pytest.mark.parametrize("network, needle", [
    ({"link_rate": "fast"}, "x.yaml: network.link_rate: link rate 'fast' is not a tc rate"),
    ({"link_rate": "10kbit"}, "x.yaml: network.link_rate: link rate '10kbit' is below 1mbit"),
    ({"link_rate": "100mbit", "client_link_rate": "1 gbit"}, "x.yaml: network.client_link_rate: link rate '1 gbit'"),
    ({"client_link_rate": "1gbit"}, "x.yaml: network.client_link_rate: needs network.link_rate"),
])
def test_network_section_rejected(network, needle):
    assert needle in str(error_of(minimal(network=network)))


def test_network_section_accepted_and_in_matrix():
    sc = parse_scenario(minimal(system={"kind": "shared", "brokers": 2},
                                network={"link_rate": "100mbit", "object_store_link_rate": "1gbit"}), "x.yaml")
    assert (sc.network.link_rate, sc.network.object_store_link_rate, sc.network.client_link_rate) == \
        ("100mbit", "1gbit", None)
    sc = parse_scenario(minimal(matrix={"network.link_rate": ["100mbit", "400mbit"]}), "x.yaml")
    assert [s.network.link_rate for _, s in expand(sc)] == ["100mbit", "400mbit"]
    with pytest.raises(ScenarioError, match=re.escape("network.link_rate: link rate 'x'")):
        expand(parse_scenario(minimal(matrix={"network.link_rate": ["x"]}), "x.yaml"))


def test_added_broker_accepted_on_links():
    sc = parse_scenario(minimal(network={"link_rate": "100mbit"},
                                actions=[{"at_s": 5, "kind": "add_broker_and_rebalance"}]), "x.yaml")
    assert sc.added_broker_ids() == {0: 4}


LINK = {"link_rate": "100mbit"}


@pytest.mark.parametrize("changes, needle", [
    ({"actions": [{"at_s": 5, "kind": "isolate_broker", "broker": 1}]},
     "actions.0.kind: isolate_broker: needs network.link_rate"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "heal_broker", "broker": 1}]},
     "actions.0.broker: broker 1 is not isolated (isolate it first)"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "isolate_broker", "broker": 1},
                                   {"at_s": 6, "kind": "isolate_broker", "broker": 1}]},
     "actions.1.broker: broker 1 is already isolated"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "isolate_broker", "broker": 7}]},
     "actions.0.broker: broker 7 does not exist"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "broker": 1}]},
     "actions.0.rate: required for action kind set_link_rate"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "rate": "10mbit"}]},
     "set_link_rate: give either broker"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "rate": "10mbit", "broker": 1,
                                    "node": "client"}]},
     "set_link_rate: give either broker"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "rate": "fast", "broker": 1}]},
     "actions.0.rate: link rate 'fast' is not a tc rate"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "rate": "10mbit", "node": "objstore"}]},
     "actions.0.node: system 'replication' has no object store"),
    ({"network": LINK, "actions": [{"at_s": 5, "kind": "set_link_rate", "rate": "10mbit", "node": "switch"}]},
     "actions.0.node"),
    ({"system": {"kind": "replication", "brokers": 3, "replication_throttle_of_link": 0.5}},
     "system.replication_throttle_of_link: needs network.link_rate"),
    ({"network": LINK, "system": {"kind": "replication", "brokers": 3, "replication_throttle_of_link": 0.5,
                                  "replication_throttle_bytes_per_s": "4MiB"}},
     "either in bytes/s or as a share of the link, not both"),
    ({"network": LINK, "system": {"kind": "replication", "brokers": 3, "replication_throttle_of_link": 1.5}},
     "system.replication_throttle_of_link"),
])
def test_network_actions_rejected(changes, needle):
    assert needle in str(error_of(minimal(**changes)))


def test_network_actions_and_link_share_accepted():
    sc = parse_scenario(minimal(
        system={"kind": "replication", "brokers": 3, "replication_throttle_of_link": 0.5},
        network={"link_rate": "100mbit"},
        actions=[{"at_s": 5, "kind": "isolate_broker", "broker": 2},
                 {"at_s": 6, "kind": "set_link_rate", "node": "client", "rate": "1gbit"},
                 {"at_s": 7, "kind": "set_link_rate", "broker": 3, "rate": "20mbit"},
                 {"at_s": 8, "kind": "heal_broker", "broker": 2}]), "x.yaml")
    assert [a.link_node for a in sc.actions] == ["broker-2", "client", "broker-3", "broker-2"]
    # half of 100mbit, in bytes/s: what the replication profile turns into Kafka's throttle
    assert sc.settings()["replication_throttle_bytes_per_s"] == 6_250_000
    assert "replication_throttle_of_link" not in sc.settings()
    assert parse_scenario(minimal(), "x.yaml").settings()["replication_throttle_bytes_per_s"] is None


def test_production_defaults_per_system():
    """A topic without a replication factor gets its system's production default; the usual move
    replaces one replica: [1,2,3] -> [4,2,3] for the copy system, [1] -> [4] for shared storage."""
    runs = dict(expand(load_scenario(REASSIGN_ONE)))
    copy = runs["reassign-one__system.kind=replication__prefill.bytes_per_partition=8MiB"]
    shared = runs["reassign-one__system.kind=shared__prefill.bytes_per_partition=8MiB"]
    hot = copy.workload.topic("hot")
    assert hot.replication_factor is None
    assert (copy.replication_factor(hot), copy.min_insync_replicas(hot)) == (3, 2)
    assert (shared.replication_factor(hot), shared.min_insync_replicas(hot)) == (1, 1)
    assert copy.placement()["hot"][0] == [1, 2, 3] and shared.placement()["hot"][0] == [1]
    assert copy.actions[0].moves(copy.placement())[0].to == [4, 2, 3]
    assert shared.actions[0].moves(shared.placement())[0].to == [4]
    # At run time the move is resolved against the replicas the client sees then.
    assert copy.actions[0].moves({"hot": {0: [2, 1, 3]}})[0].to == [2, 4, 3]


@pytest.mark.parametrize("action, path, fragment", [
    ({"replace": 4, "by": 3}, "actions.0.replace", "holds no replica"),
    ({"replace": 1, "by": 2}, "actions.0.by", "already holds a replica"),
    ({"replace": 1}, "actions.0.by", "go together"),
    ({"replace": 1, "by": 1}, "actions.0.by", "by itself"),
    ({"replace": 1, "by": 4, "to": [4]}, "actions.0.to", "not both"),
])
def test_replace_move_errors(action, path, fragment):
    data = minimal()
    data["system"]["brokers"] = 4
    data["workload"]["topics"][0]["replication_factor"] = 2  # hot-0 on [1, 2]
    data["actions"] = [{"at_s": 1, "kind": "reassign", "topic": "hot", "partition": 0, **action}]
    err = error_of(data)
    assert f"x.yaml: {path}: " in str(err) and fragment in str(err), str(err)


def test_a_partition_moved_again_is_checked_where_the_earlier_move_left_it():
    data = minimal()
    data["system"]["brokers"] = 4
    data["workload"]["topics"][0]["replication_factor"] = 2  # hot-0 on [1, 2]
    there = {"at_s": 1, "kind": "reassign", "topic": "hot", "partition": 0, "replace": 1, "by": 4}
    back = {"at_s": 1, "after_moves": True, "kind": "reassign", "topic": "hot", "partition": 0, "replace": 4, "by": 1}
    data["actions"] = [there, back, dict(there, after_moves=True)]
    assert len(parse_scenario(data, "x.yaml").actions) == 3
    data["actions"] = [there, dict(there, after_moves=True)]  # broker 1 left hot-0 with the first move
    err = error_of(data)
    assert "actions.1.replace: broker 1 holds no replica of hot-0 (its replicas then: [4, 2])" in str(err), str(err)


def test_default_replication_factor_must_fit_the_brokers():
    data = minimal()
    data["system"]["brokers"] = 2
    data["workload"]["topics"][0].pop("replication_factor", None)
    data["actions"] = []
    err = error_of(data)
    assert "workload.topics.0.replication_factor: 3 (replication's default) exceeds system.brokers (2)" in str(err)


def test_repetitions_expand_in_rounds():
    sc = load_scenario(REASSIGN_ONE, ["repetitions=2", "matrix.prefill.bytes_per_partition=[16MiB]"])
    ids = [rid for rid, _ in expand(sc)]
    assert ids == [f"reassign-one__system.kind={s}__prefill.bytes_per_partition=16MiB__rep={k}"
                   for k in (1, 2) for s in ("replication", "tiered", "shared")]
    assert split_repetition(ids[5]) == ("reassign-one__system.kind=shared__prefill.bytes_per_partition=16MiB", 2)
    assert split_repetition("reassign-one") == ("reassign-one", 1)
    with pytest.raises(ScenarioError, match="matrix key must be a dotted path"):
        load_scenario(REASSIGN_ONE, ["matrix.repetitions=[1,2]"])


def test_configuration_states_each_systems_terms():
    """The report's configurations table: each system's production settings, its acknowledgement,
    the throttle rule (copy only) and the shared system's effective WAL settings."""
    from bench.check.summary import configuration_of
    from systems.shared.settings import DEFAULTS

    runs = dict(expand(load_scenario(REASSIGN_ONE)))
    copy = configuration_of(runs["reassign-one__system.kind=replication__prefill.bytes_per_partition=8MiB"])
    shared = configuration_of(runs["reassign-one__system.kind=shared__prefill.bytes_per_partition=8MiB"])
    assert (copy["replication_factor"], copy["min_insync_replicas"], copy["acks"]) == (3, 2, "all")
    assert copy["throttle_bytes_per_s"] == 6_250_000 and copy["throttle_rule"].startswith("50% of a broker's 100mbit")
    assert copy["object_store_link_rate"] is None and copy["wal_batch_interval_ms"] is None
    assert (shared["replication_factor"], shared["min_insync_replicas"], shared["throttle_bytes_per_s"]) == (1, None, None)
    assert shared["wal_batch_interval_ms"] == DEFAULTS["wal.batch.interval.ms"]
    assert shared["wal_upload_threshold_bytes"] == 5 * 2**20  # AutoMQ's 512 MiB at the scale model's 1/100
    assert shared["object_store_link_rate"] == "1gbit" and "WAL object" in shared["ack_meaning"]
    assert copy["ack_meaning"] != shared["ack_meaning"]
    assert copy["acks"] == shared["acks"] == "all" and copy["linger_ms"] == shared["linger_ms"] == 5  # one client
    # one move budget, each system's own mechanism
    assert copy["move_budget_bytes_per_s"] == shared["move_budget_bytes_per_s"] == 6_250_000
    assert copy["move_budget_rule"] == shared["move_budget_rule"] == "half the link per move"
    assert "replication throttle" in copy["move_budget_mechanism"]
    assert "forced upload" in shared["move_budget_mechanism"]


def test_one_move_budget_becomes_each_systems_mechanism():
    """system.move_budget_of_link: the replication throttle on the copy and tiered systems, the cap
    on the forced upload of the move's tail on the shared one (not its other uploads); in the run's
    params and configuration, "none" without it; refused where it makes no sense."""
    from bench.check.summary import configuration_of, params_of
    from bench.run.runner import broker_config, topic_configs

    def runs(*overrides):
        return {sc.system.kind: sc for _, sc in expand(load_scenario(REASSIGN_ONE, [
            "matrix.prefill.bytes_per_partition=[64MiB]", *overrides]))}

    budget = runs()
    copy, tiered, shared = budget["replication"], budget["tiered"], budget["shared"]
    for sc in (copy, tiered):
        cfg = broker_config(sc)
        assert cfg["leader.replication.throttled.rate"] == cfg["follower.replication.throttled.rate"] == "6250000"
        assert topic_configs(sc, sc.workload.topics[0])["leader.replication.throttled.replicas"] == "*"
        assert params_of(sc)["replication_throttle_bytes_per_s"] == 6_250_000
    cfg = broker_config(shared)
    assert cfg["shared.move.upload.bytes.per.s"] == "6250000"
    assert not any(k in cfg for k in ("s3.upload.bytes.per.s", "s3.bandwidth.bytes.per.s",
                                      "leader.replication.throttled.rate"))
    p = params_of(shared)
    assert p["move_budget_of_link"] == 0.5 and p["move_upload_bytes_per_s"] == 6_250_000
    assert p["replication_throttle_bytes_per_s"] is None
    unlimited = runs("matrix.system.move_budget_of_link=[null]")
    for kind, sc in unlimited.items():
        conf = configuration_of(sc)
        assert (conf["move_budget_bytes_per_s"], conf["move_budget_rule"], conf["move_budget_mechanism"]) == \
            (None, "none", None), kind
        assert "throttled.rate" not in str(broker_config(sc)) and "move.upload" not in str(broker_config(sc))
    assert configuration_of(runs("system.move_budget_of_link=0.25")["replication"])["move_budget_rule"] == \
        "a quarter the link per move"
    with pytest.raises(ScenarioError, match="system.move_budget_of_link: is the replication throttle"):
        load_scenario(REASSIGN_ONE, ["system.replication_throttle_of_link=0.5"])
    with pytest.raises(ScenarioError, match="system.move_budget_of_link: is the move upload cap"):
        load_scenario(REASSIGN_ONE, ["system.move_upload_bytes_per_s=1MiB"])
    with pytest.raises(ScenarioError, match="system.move_budget_of_link: needs network.link_rate"):
        load_scenario(REASSIGN_ONE, ["network.link_rate=null", "network.client_link_rate=null",
                                     "network.object_store_link_rate=null"])
    with pytest.raises(ScenarioError, match="system.move_budget_of_link"):
        load_scenario(REASSIGN_ONE, ["system.move_budget_of_link=1.5"])


def test_linger_is_a_workload_setting_recorded_with_the_run():
    """workload.linger_ms: 5 by default (the client's own), matrix-able, in params and
    configuration; a client setting linger.ms (applied last to every client) is what is recorded."""
    from bench.check.summary import configuration_of, params_of

    sc = load_scenario(REASSIGN_ONE, ["matrix.workload.linger_ms=[5, 250]", "matrix.system.kind=[shared]",
                                      "matrix.prefill.bytes_per_partition=[64MiB]"])
    (rid5, five), (rid250, slow) = expand(sc)
    assert rid250.endswith("__workload.linger_ms=250") and five.workload.linger_ms == 5
    assert (params_of(slow)["linger_ms"], configuration_of(slow)["linger_ms"]) == (250, 250)
    assert params_of(five)["linger_ms"] == 5
    own = load_scenario(REASSIGN_ONE, ["system.client={linger.ms: 20}"])
    assert configuration_of(expand(own)[0][1])["linger_ms"] == 20
    for bad in ("-1", "1.5", "1000000"):
        with pytest.raises(ScenarioError, match="workload.linger_ms"):
            load_scenario(REASSIGN_ONE, [f"workload.linger_ms={bad}"])


def test_the_suites_run_on_production_terms():
    """The suites' scenarios declare the scale model and keep it (but for the tiered remote log
    manager's interval, reported), set the object store's measured latency and the move budget,
    and keep the time-like settings (session timeouts, linger.ms) at production values; the full
    suite adds the sensitivity and no-limit sets as configurations of their own, the default one
    runs calibrate with and without the move budget."""
    from bench.run.suite import SUITES
    from bench.scenario import resolve_scenario
    from bench.scenario.scale import scale_check

    for name in ("reassign-one", "broker-loss", "consume-move", "calibrate", "drain"):
        for rid, sc in expand(load_scenario(resolve_scenario(name))):
            assert (sc.scale.bytes, sc.scale.rate) == (0.01, 0.01), rid
            assert sc.system.move_budget_of_link in (0.5, None) and sc.workload.linger_ms == 5, rid
            assert sc.network.object_store_latency == {"p50": "30ms", "p99": "80ms"}, rid
            assert not sc.system.extra, rid  # Kafka's session timeouts
            check = scale_check(sc)
            assert check["breaks"] == (["remote.log.manager.task.interval.ms"] if sc.system.kind == "tiered" else []), rid
    ids: dict[str, set[str]] = {}
    for suite, entries in SUITES.items():
        ids[suite] = set()
        for name, overrides, reps, _systems in entries:
            assert reps >= 1
            for rid, _ in expand(load_scenario(resolve_scenario(name), overrides)):
                assert rid not in ids[suite], rid  # every set a configuration of its own
                ids[suite].add(rid)
    full, default = ids["full"], ids["default"]
    assert "reassign-one__system.kind=shared__prefill.bytes_per_partition=64MiB__workload.linger_ms=250" in full
    assert "broker-loss__system.kind=tiered__workload.linger_ms=250" in full
    assert "reassign-one__system.kind=replication__prefill.bytes_per_partition=64MiB__system.move_budget_of_link=null" \
        in full
    assert {"calibrate__system.kind=tiered__system.move_budget_of_link=0.5",
            "calibrate__system.kind=tiered__system.move_budget_of_link=null"} <= default
    # the untiered tail is measured at Kafka's own upload interval: nothing breaks the scale model
    (_, tail), = expand(load_scenario(resolve_scenario("tiered-tail")))
    assert tail.system.kind == "tiered" and scale_check(tail)["breaks"] == []
    assert tail.network.object_store_latency == {"p50": "30ms", "p99": "80ms"}


@pytest.mark.parametrize("action, fragment", [
    ({"kind": "drain_broker", "broker": 1, "concurrency": 0}, "must be >= 1"),
    ({"kind": "drain_broker", "broker": 1, "concurrency": 1.5}, "integer"),
    ({"kind": "drain_broker", "broker": 1, "concurrency": "2"}, "integer"),
    ({"kind": "reassign", "topic": "hot", "partition": 0, "to": [2], "concurrency": 2},
     "not used by action kind reassign"),
    ({"kind": "kill_broker", "broker": 1, "concurrency": 2}, "not used by action kind kill_broker"),
])
def test_move_concurrency_errors_name_the_field(action, fragment):
    data = minimal()
    data["actions"] = [{"at_s": 1, **action}]
    err = error_of(data)
    assert "x.yaml: actions.0.concurrency: " in str(err) and fragment in str(err), str(err)


def test_move_concurrency_accepted_on_plan_actions():
    data = minimal()
    data["actions"] = [
        {"at_s": 1, "kind": "move_set", "concurrency": 1, "partitions": [{"topic": "hot", "partition": 1, "to": [3]}]},
        {"at_s": 2, "kind": "drain_broker", "broker": 1, "concurrency": 4},
        {"at_s": 3, "kind": "add_broker_and_rebalance", "concurrency": 2},
        {"at_s": 4, "kind": "drain_broker", "broker": 2},
    ]
    sc = parse_scenario(data, "x.yaml")
    assert [a.concurrency for a in sc.actions] == [1, 4, 2, None]  # None: the whole plan in one request


def test_tiered_settings_become_its_topic_configs():
    """system.segment_bytes / local_retention_bytes / follower_fetch_last_tiered_offset: the tiered
    profile turns them into Kafka's topic and broker configs; a throttle given as a share of the
    link applies to it as to the copy system (the profile says so, not the system's name)."""
    from bench.check.summary import configuration_of, params_of

    data = minimal(system={"kind": "tiered", "brokers": 3, "segment_bytes": "16MiB", "local_retention_bytes": "128MiB",
                           "follower_fetch_last_tiered_offset": False, "replication_throttle_of_link": 0.1},
                   network={"link_rate": "1gbit"})
    sc = parse_scenario(data, "x.yaml")
    s = sc.settings()
    topic = sc.profile.topic_configs(s)
    assert topic["segment.bytes"] == str(16 * 2**20) and topic["local.retention.bytes"] == str(128 * 2**20)
    assert topic["remote.storage.enable"] == "true" and topic["leader.replication.throttled.replicas"] == "*"
    broker = sc.profile.broker_settings(s)
    assert broker["leader.replication.throttled.rate"] == "12500000"
    assert broker["follower.replication.throttled.rate"] == "12500000"
    assert broker["follower.fetch.last.tiered.offset.enable"] == "false"
    p = params_of(sc)
    assert (p["segment_bytes"], p["local_retention_bytes"], p["follower_fetch_last_tiered_offset"]) == (
        16 * 2**20, 128 * 2**20, False)
    conf = configuration_of(sc)
    assert conf["system_settings"]["new_replica_starts_at"].endswith("(KIP-405)")
    # unset: the profile's defaults (4 MiB segments, 8 MiB local), and nothing in params
    dflt = parse_scenario(minimal(system={"kind": "tiered", "brokers": 3}), "x.yaml")
    assert dflt.profile.topic_configs(dflt.settings())["segment.bytes"] == str(4 * 2**20)
    assert "segment_bytes" not in params_of(dflt)
    # the copy system ignores them (a three-system matrix sets what one system reads)
    rep = parse_scenario(minimal(system={"kind": "replication", "brokers": 3, "segment_bytes": "16MiB"}), "x.yaml")
    assert "segment.bytes" not in rep.profile.topic_configs(rep.settings())


@pytest.mark.parametrize("system, path, fragment", [
    ({"segment_bytes": "512KiB"}, "system.segment_bytes", "must be >= 1048576"),
    ({"local_retention_bytes": 0}, "system.local_retention_bytes", "must be > 0"),
    ({"segment_bytes": "16MiB", "local_retention_bytes": "8MiB"}, "system.local_retention_bytes",
     "below system.segment_bytes"),
    ({"follower_fetch_last_tiered_offset": "yes"}, "system.follower_fetch_last_tiered_offset", "valid boolean"),
    ({"segment_bytes": "lots"}, "system.segment_bytes", ""),
])
def test_tiered_settings_are_validated(system, path, fragment):
    err = error_of(minimal(system={"kind": "tiered", "brokers": 3, **system}))
    assert f"x.yaml: {path}: " in str(err) and fragment in str(err), str(err)


def test_a_cluster_the_harness_does_not_start_refuses_tiered_settings():
    err = error_of(minimal(system={"kind": "external", "brokers": 3, "bootstrap": "h:9092", "segment_bytes": "16MiB"}))
    assert "system.segment_bytes: not a setting of system 'external'" in str(err)


def test_tiered_move_compares_kip_1023_with_kip_405():
    sc = load_scenario(next(p for p in SCENARIOS if p.name == "tiered-move.yaml"))
    runs = dict(expand(sc))
    assert [r.system.follower_fetch_last_tiered_offset for r in runs.values()] == [True, False]
    r = next(iter(runs.values()))
    assert r.system.kind == "tiered" and r.prefill.bytes_per_partition == 2**30
    assert r.settings()["replication_throttle_bytes_per_s"] == 12_500_000
    assert [c.mode for c in r.consumers] == ["catch_up"] and r.consumers[0].start_lag_bytes is None
    assert r.actions[0].replace == 1 and r.actions[0].by == 4


def test_system_section_is_built_from_the_profiles_declared_settings():
    """Each profile declares the scenario settings it reads (systems/*/profile.py); the `system`
    section has every one of them, flat, with its doc; OWN_SETTINGS are those one system reads."""
    from bench.scenario import OWN_SETTINGS, SETTINGS, System
    from systems.registry import PROFILES

    declared = {st.name: st for p in PROFILES.values() for st in p.scenario_settings}
    assert set(declared) == set(SETTINGS) and set(SETTINGS) < set(System.model_fields)
    for name, st in declared.items():
        assert System.model_fields[name].description == st.doc and System.model_fields[name].default is None
    readers = {n: [p.name for p in PROFILES.values() if any(st.name == n for st in p.scenario_settings)]
               for n in declared}
    assert set(OWN_SETTINGS) == {n for n, r in readers.items() if len(r) == 1}
    assert readers["replication_throttle_bytes_per_s"] == ["replication", "tiered", "external"]
    # the profiles fill in their own defaults where the scenario leaves a setting unset
    sc = parse_scenario(minimal(system={"kind": "tiered", "brokers": 3}), "x.yaml")
    assert sc.system.segment_bytes is None
    assert sc.profile.describe(sc.settings())["segment_bytes"] == declared["segment_bytes"].default


def test_topics_carry_their_own_prefill_and_producers_their_share_of_the_rate():
    data = minimal()
    data["workload"]["topics"] = [{"name": "a", "partitions": 1, "producers": 1, "prefill_bytes": "4MiB"},
                                  {"name": "b", "partitions": 2, "producers": 3}]
    data["workload"]["producers"] = 4
    data["workload"]["produce_rate_msgs_per_s"] = 400
    data["prefill"] = {"bytes_per_partition": "1MiB", "topics": ["a", "b"]}
    data["actions"] = []
    sc = parse_scenario(data, "x.yaml")
    size = float(sc.workload.message_bytes)
    assert sc.prefill_bytes_of("a") == 4 * 2**20 and sc.prefill_bytes_of("b") == 2**20
    assert sc.nominal_ingest_of("a") == pytest.approx(100 * size)
    assert sc.nominal_ingest_of("b") == pytest.approx(150 * size)  # 3 of 4 producers over 2 partitions
    assert sc.nominal_ingest_of("nope") is None
    # who writes each partition, and how often one producer sends to it (100 msg/s each)
    assert sc.producers_of("a") == (1, pytest.approx(0.01)) and sc.producers_of("b") == (3, pytest.approx(0.02))
    assert sc.producers_of("nope") is None
    data["prefill"]["topics"] = ["b"]
    assert parse_scenario(data, "x.yaml").prefill_bytes_of("a") == 0  # not prefilled at all
    data["workload"]["topics"][0]["prefill_bytes"] = -1
    assert "workload.topics.0.prefill_bytes" in str(error_of(data))


def test_after_moves_is_a_field_of_every_action_kind():
    data = minimal()
    data["actions"] = [{"at_s": 1, "kind": "kill_broker", "broker": 1, "after_moves": True}]
    assert parse_scenario(data, "x.yaml").actions[0].after_moves
    data["actions"][0]["after_moves"] = "soon"
    assert "actions.0.after_moves" in str(error_of(data))


def test_the_load_ends_after_the_actions_only_when_there_are_actions():
    data = minimal()
    data["workload"]["end_after_actions_s"] = 3
    assert parse_scenario(data, "x.yaml").workload.end_after_actions_s == 3.0
    data["actions"] = []
    with pytest.raises(ScenarioError, match="workload.end_after_actions_s: ends the load after the actions"):
        parse_scenario(data, "x.yaml")
    data["workload"]["end_after_actions_s"] = -1
    with pytest.raises(ScenarioError, match="workload.end_after_actions_s"):
        parse_scenario(data, "x.yaml")
    # a fault's outage is measured after its recovery: the load may not end with the actions
    data = yaml.safe_load(next(p for p in SCENARIOS if p.name == "broker-loss.yaml").read_text())
    data["workload"]["end_after_actions_s"] = 3
    with pytest.raises(ScenarioError, match="cannot end the load after fault actions"):
        parse_scenario(data, "x.yaml")


def test_a_scenario_pointed_at_a_bootstrap_alone_takes_the_clusters_brokers():
    """kind external without system.brokers: parsed with its broker references unchecked, then
    checked against the brokers Metadata names when the cluster is reached (for_cluster)."""
    data = minimal(system={"kind": "external", "bootstrap": "h:9092"})
    data["actions"] = [{"at_s": 1, "kind": "reassign", "topic": "hot", "partition": 0, "to": [3]}]
    sc = parse_scenario(data, "x.yaml")
    assert sc.system.brokers is None
    ready = sc.for_cluster([1, 2, 3], 3, 2)
    assert ready.system.brokers == 3 and ready.actions[0].to == [3]
    with pytest.raises(ScenarioError, match=r"actions\.0\.to: broker 3 does not exist \(brokers: \[1, 2\]\)"):
        sc.for_cluster([1, 2], 1, 1)  # the move names a broker the cluster does not have
    with pytest.raises(ScenarioError, match=r"no broker 1 \(its ids: \[0, 2, 5\]\)"):
        sc.for_cluster([0, 2, 5], 3, 2)
    err = error_of(minimal(system={"kind": "replication"}))  # a cluster the harness starts: how many
    assert "system.brokers: required for system kind 'replication'" in str(err)


def test_load_workers_need_a_producer_each_and_the_cli_sets_them():
    data = minimal()
    data["load"] = {"workers": 2}
    err = error_of(data)
    assert "load.workers" in str(err) and "2 Locust workers for 1 producer(s)" in str(err)
    data["workload"]["producers"] = 2
    sc = parse_scenario(data, "x.yaml")
    assert sc.load.workers == 2 and sc.load.master_host == "127.0.0.1" and sc.load.connect_timeout_s == 60
    data["load"] = {"workers": -1}
    assert "load.workers" in str(error_of(data))
    data["load"] = {"workers": 1, "master": "x"}
    assert "load.master: unknown field" in str(error_of(data))
