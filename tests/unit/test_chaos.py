"""Randomized schedules (bench/scenario/chaos.py): a function of the seed alone, only faults that
apply to the system, each fault healed before the next, every action one the validator takes."""
from __future__ import annotations

import pytest
import yaml

from bench.scenario import FAULT_RECOVERY, ScenarioError
from bench.scenario.chaos import END_MARGIN_S, draw, fault_kinds
from bench.scenario.loading import load_scenario
from bench.cli import main


def test_a_schedule_is_a_function_of_the_seed():
    assert draw("shared", 5, 4) == draw("shared", 5, 4)
    assert draw("shared", 5, 4)["actions"] != draw("shared", 6, 4)["actions"]
    assert draw("shared", 5, 4)["name"] == "chaos-shared-seed5"


@pytest.mark.parametrize("system", ["replication", "tiered", "shared"])
def test_faults_apply_to_the_system_and_each_is_healed_before_the_next(system):
    kinds = fault_kinds(system)
    assert ("stop_object_store" in kinds) == (system != "replication")
    assert {"kill_broker", "pause_broker", "kill_controller", "isolate_broker"} <= set(kinds)
    seen: set[str] = set()
    for seed in range(4):
        doc = draw(system, seed, 6)
        acts = doc["actions"]
        assert [a["at_s"] for a in acts] == sorted(a["at_s"] for a in acts)
        assert acts[-1]["at_s"] <= 6 * 60 - END_MARGIN_S
        open_fault = None
        for a in acts:
            seen.add(a["kind"])
            if a["kind"] in FAULT_RECOVERY:
                assert open_fault is None, (seed, a)  # one fault at a time
                open_fault = a
            elif open_fault and a["kind"] == FAULT_RECOVERY[open_fault["kind"]]:
                assert a.get("broker") == open_fault.get("broker")
                open_fault = None
            elif open_fault and open_fault.get("broker"):  # a move while a broker is out never targets it
                out = open_fault["broker"]
                targets = [a.get("to")] + [m["to"] for m in a.get("partitions") or []]
                assert all(out not in (t or []) for t in targets), (seed, a)
                if a["kind"] == "drain_broker":
                    assert a.get("to") and out not in a["to"], (seed, a)
        assert open_fault is None
    assert {"reassign", "move_set", "drain_broker"} <= seen and seen & set(kinds)


def test_too_short_a_run_is_refused():
    with pytest.raises(ScenarioError, match="at least"):
        draw("replication", 1, 0.5)


def test_the_cli_writes_a_schedule_that_replays(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["chaos", "--system", "tiered", "--seed", "2", "--minutes", "3", "--draw-only", "--results", str(tmp_path)])
    assert e.value.code == 0
    f = tmp_path / "chaos" / "chaos-tiered-seed2-3min.yaml"
    assert f"replay:   python -m bench run {f}" in capsys.readouterr().out
    assert yaml.safe_load(f.read_text()) == draw("tiered", 2, 3)
    sc = load_scenario(f)
    assert sc.name == "chaos-tiered-seed2" and sc.system.kind == "tiered" and len(sc.actions) >= 3
