"""Matrix expansion: a scenario's ``matrix`` (dotted path -> values) run as its cartesian product,
``repetitions`` times, each run named by its id (``name__key=value__...``, ``..__rep=K``)."""
from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from bench.scenario.errors import errors_of, raise_errors
from bench.scenario.model import Scenario
from bench.scenario.paths import set_path

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "+".join(_fmt_value(x) for x in v)
    if isinstance(v, dict):
        return "+".join(f"{k}={_fmt_value(x)}" for k, x in v.items())
    return str(v)


def run_id_for(name: str, assignments: Sequence[tuple[str, Any]]) -> str:
    """``name__key=value__...`` made safe for a file name."""
    raw = "__".join([name, *(f"{k}={_fmt_value(v)}" for k, v in assignments)])
    return _UNSAFE.sub("-", raw).strip("-")


REPETITION_KEY = "rep"


def split_repetition(run_id: str) -> tuple[str, int]:
    """``(config id, repetition)`` of a run id: ``x__rep=2`` -> ``("x", 2)``; ``x`` -> ``("x", 1)``."""
    head, sep, tail = run_id.rpartition(f"__{REPETITION_KEY}=")
    if sep and tail.isdigit():
        return head, int(tail)
    return run_id, 1


def _expand_matrix(scenario: Scenario, source: str) -> list[tuple[str, Scenario]]:
    base = scenario.resolved()
    base["matrix"] = {}
    if not scenario.matrix:
        return [(run_id_for(scenario.name, ()), Scenario.model_validate(base))]
    keys = list(scenario.matrix)
    out: list[tuple[str, Scenario]] = []
    used: set[str] = set()
    for combo in itertools.product(*(scenario.matrix[k] for k in keys)):
        assignments = list(zip(keys, combo))
        run_id = run_id_for(scenario.name, assignments)
        if run_id in used:  # two values that sanitise alike: keep ids unique
            run_id = f"{run_id}__{len(out)}"
        used.add(run_id)
        data = copy.deepcopy(base)
        try:
            for k, v in assignments:
                set_path(data, k, copy.deepcopy(v))
        except KeyError as exc:
            raise_errors(source, [(f"matrix.{k}", f"cannot apply: {exc.args[0]}")])
        try:
            out.append((run_id, Scenario.model_validate(data)))
        except ValidationError as exc:
            where = ", ".join(f"{k}={_fmt_value(v)}" for k, v in assignments)
            raise_errors(source, errors_of(exc, Scenario), prefix=f"matrix run [{where}]: ")
    return out


def expand(scenario: Scenario, source: str | None = None) -> list[tuple[str, Scenario]]:
    """Cartesian product of ``scenario.matrix`` -> ``[(run_id, Scenario)]`` in matrix order (first
    key varies slowest), ``repetitions`` rounds of it. Each scenario is re-validated (a bad
    combination is a ScenarioError naming ``source``, default the scenario's name) and has an empty
    matrix; its ``name`` stays the base name. Without a matrix: one run whose id is the name."""
    source = scenario.name if source is None else source
    configs = _expand_matrix(scenario, source)
    if scenario.repetitions == 1:
        return configs
    # Rounds: every configuration once, then again; a slow drift of the machine then shows as
    # spread within each configuration instead of as a difference between configurations.
    return [(run_id_for(run_id, [(REPETITION_KEY, k)]), sc) for k in range(1, scenario.repetitions + 1)
            for run_id, sc in configs]
