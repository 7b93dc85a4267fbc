"""Bad input that is not a wire frame: reassignment plans and scenario files.

What tests/systems/test_replication.py::test_bad_plans_change_nothing (against a cluster) and
tests/unit/test_scenario.py / tests/harness/test_runner.py already cover is not repeated: malformed JSON,
empty / unknown / duplicate replicas on the wire, unknown topics, field errors with their path,
unknown builtin scenarios. Added here, without a cluster:

- every structural plan error `bench.reassign.load_plan` and `run` refuse before connecting,
  each with a message naming the file and the entry (the CLI's exit code 1 + `error:`:
  tests/harness/test_cli_refusals.py);
- a hypothesis run over random plan documents and over mutated builtin scenario files: the only
  outcomes are a valid plan/scenario or PlanError/ScenarioError (never another exception);
- two problems found while writing this (bool broker ids, YAML alias bombs), now refused.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.cli.reassign import PlanError, load_plan, run
from bench.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "workloads" / "scenarios").glob("*.yaml"))


def _plan(tmp_path, doc, raw: bool = False) -> str:
    p = tmp_path / f"plan-{time.monotonic_ns()}.json"
    p.write_text(doc if raw else json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("doc,needle", [
    ([], 'expected {"version":1,"partitions":[...]}'),
    ({"version": 1}, 'expected {"version":1,"partitions":[...]}'),
    ({"version": 1, "partitions": {"topic": "t"}}, 'expected {"version":1,"partitions":[...]}'),
    ({"version": 2, "partitions": []}, "unsupported plan version 2"),
    ({"version": 1, "partitions": ["t-0"]}, "partitions[0]: expected an object"),
    ({"version": 1, "partitions": [{"partition": 0, "replicas": [1]}]}, "partitions[0]: 'topic' must be"),
    ({"version": 1, "partitions": [{"topic": "", "partition": 0, "replicas": [1]}]}, "'topic' must be"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, "'partition' must be"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}, "'partition' must be"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": "1,2"}]}, "'replicas' must be"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, "2"]}]}, "'replicas' must be"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                   {"topic": "t", "partition": 0, "replicas": [2]}]}, "appears twice"),
])
def test_structural_plan_errors(tmp_path, doc, needle):
    path = _plan(tmp_path, doc)
    with pytest.raises(PlanError) as e:
        load_plan(path)
    assert needle in str(e.value) and path in str(e.value), str(e.value)


def test_unreadable_plans(tmp_path):
    with pytest.raises(PlanError, match="cannot read .*missing.json"):
        load_plan(str(tmp_path / "missing.json"))
    with pytest.raises(PlanError, match="not valid JSON: .* line 2 column"):
        load_plan(_plan(tmp_path, '{"version": 1,\n "partitions": [,]}', raw=True))
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(_plan(tmp_path, "\xff\xfe garbage", raw=True))


def _args(**kw):
    base = dict(bootstrap_server="127.0.0.1:1", reassignment_json_file=None, estimate=False, execute=False,
                verify=False, cancel=False, list=False, generate=False, throttle=None, additional=False,
                topics_to_move_json_file=None, broker_list=None, link=None, concurrency=None, model=None,
                system=None, json=False, window=3.0, client_ack_ms=None, producers=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("replicas,throttle,needle", [
    (None, None, "must not be empty"),
    ([], None, "must not be empty"),
    ([1, 1], None, "duplicate replicas"),
    ([1], 0, "--throttle must be a positive"),
    ([1], -5, "--throttle must be a positive"),
])
def test_execute_refuses_before_connecting(tmp_path, replicas, throttle, needle):
    # The bootstrap address is closed: reaching the network would be a different error.
    path = _plan(tmp_path, {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": replicas}]})
    with pytest.raises(PlanError, match=needle):
        run(_args(reassignment_json_file=path, execute=True, throttle=throttle))


@pytest.mark.parametrize("kw,needle", [
    (dict(link="fast"), "--link: link rate 'fast' is not a tc rate"),
    (dict(concurrency=0), "--concurrency must be at least 1"),
    (dict(throttle=-1), "--throttle must be a positive"),
    (dict(client_ack_ms=0), "--client-ack-ms must be a positive"),
    (dict(producers=0), "--producers must be at least 1"),
    (dict(client_ack_ms=-3.0), "--client-ack-ms must be a positive"),
])
def test_estimate_refuses_before_connecting(tmp_path, kw, needle):
    path = _plan(tmp_path, {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2]}]})
    with pytest.raises(PlanError, match=needle):
        run(_args(reassignment_json_file=path, estimate=True, **kw))


def test_verbs_are_checked(tmp_path):
    with pytest.raises(PlanError, match="exactly one of"):
        run(_args(execute=True, verify=True))
    with pytest.raises(PlanError, match="exactly one of"):
        run(_args())
    with pytest.raises(PlanError, match="needs --reassignment-json-file"):
        run(_args(verify=True))
    with pytest.raises(PlanError, match="--generate needs"):
        run(_args(generate=True))


json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 5) | st.text(max_size=4),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                               st.sampled_from(["version", "partitions", "topic", "partition", "replicas", "x"]),
                               kids, max_size=4), max_leaves=12)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(doc=json_values)
def test_random_plan_documents_only_plan_errors(tmp_path_factory, doc):
    path = tmp_path_factory.getbasetemp() / "random-plan.json"
    path.write_text(json.dumps(doc))
    try:
        plan = load_plan(str(path))
    except PlanError:
        return
    for p in plan:
        assert isinstance(p["topic"], str) and p["topic"]
        assert isinstance(p["partition"], int) and p["partition"] >= 0
        assert p["replicas"] is None or all(isinstance(r, int) for r in p["replicas"])


@st.composite
def mutated_scenarios(draw):
    text = draw(st.sampled_from(SCENARIOS)).read_text()
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "dup", "swap", "chars", "value"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "chars":
            s = lines[i]
            k = draw(st.integers(0, len(s)))
            lines[i] = s[:k] + draw(st.text(alphabet=":-[]{}&*!|>'\"#% \t0123456789abc", max_size=4)) + s[k + 1:]
        else:
            if ":" in lines[i]:
                key = lines[i].split(":", 1)[0]
                lines[i] = key + ": " + draw(st.sampled_from(["-1", "0", "1e309", "null", "[]", "{}", "true",
                                                              "'64XiB'", "99999999999999999999", "[1, 1]",
                                                              "shared", "~", "!!binary aGk="]))
        if not lines:
            lines = [""]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(text=mutated_scenarios())
def test_mutated_scenario_files_only_scenario_errors(tmp_path_factory, text):
    path = tmp_path_factory.getbasetemp() / "mutated.yaml"
    path.write_text(text)
    try:
        load_scenario(path)
    except ScenarioError as e:
        msg = str(e)
        assert msg.startswith("mutated.yaml: ") and e.errors, msg  # file, then the path of each error


# -- found while writing these (fixed) ----------------------------------------------------------

def test_boolean_broker_ids_are_refused(tmp_path):
    path = _plan(tmp_path, {"version": 1, "partitions": [{"topic": "t", "partition": False, "replicas": [True]}]})
    with pytest.raises(PlanError):
        load_plan(path)


def test_yaml_alias_bomb_in_matrix_is_refused_quickly(tmp_path):
    inner = "&a0 [1,1,1,1,1,1,1,1,1]"
    for i in range(1, 5):
        inner = f"&a{i} [" + ",".join([inner] + [f"*a{i - 1}"] * 8) + "]"
    base = (ROOT / "workloads" / "scenarios" / "reassign-one.yaml").read_text().split("matrix:")[0]
    path = tmp_path / "bomb.yaml"
    path.write_text(base + f"matrix:\n  workload.duration_s: [{inner}]\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert len(str(e.value)) < 2000, f"{len(str(e.value))} characters of error"
