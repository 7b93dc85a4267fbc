"""``python -m bench suite default`` (what ``make bench`` runs) and ``python -m bench suite full``:
every system the harness starts (systems/registry.py ``LAUNCHED``: replication copy, tiered storage,
shared storage) in its production configuration, scaled down 100x (each scenario's ``scale``,
docs/scale-model.md), under the same move budget (half a broker's link per move) and the same
client settings (linger.ms 5, the client's own default), every broker on its own 100mbit link and
the object store 30 ms away (p99 80 ms).

* ``default`` (about 15 minutes on 2 cores): ``calibrate`` under the move budget and without it
  (one cluster per system and setting, twelve partitions of several sizes and ingest rates moved
  one after another, the links stepped to 1gbit: every held-out axis of the move models, size,
  ingest, link and the link budget, from one run each), ``tiered-tail`` (tiered storage only: the
  untiered tail a new replica copies, sampled at three ingest rates, the bytes relation of its TB
  projection), ``shared-tail`` (shared storage only: fifteen partitions with 4, 16 and 64 MiB not
  yet uploaded under AutoMQ's 512 MiB upload threshold, moved one after another, once with each
  handoff: the held-out check of the tail the upload handoff's TB projection uploads at the close,
  and the snapshot handoff's moves beside it), ``drain`` (broker 1's partitions moved off it two at a time: the held-out check of
  the cluster cases), then ``consume-move`` (consumer groups across a move, then a broker killed
  under load and restarted), once each.
* ``full`` (about 55 minutes): the run-level suite, each configuration 3 times (``REPETITIONS``):
  ``reassign-one`` at four partition sizes (1, 8, 32 and 64 MiB), ``broker-loss``,
  ``consume-move``; the client setting's sensitivity (``reassign-one`` at 64 MiB and
  ``broker-loss`` at linger.ms 250 too: the report's "what batching does to each system" table);
  ``reassign-one`` at 64 MiB without the move budget.
* ``open`` (about 5 minutes; shared storage only): ``shared-open``, four partitions of about 1,000,
  3,000, 10,000 and 100,000 stream objects moved one after another: the held-out check of the
  per-object open cost (writing 100,000 objects takes ~3 minutes on 2 cores, so ``make bench``
  does not run it; aggregate its results with ``make bench``'s to check the TB projection's
  object count).

Runs land in the usual places (``results/<scenario>/<timestamp>/<run_id>/``); the suite also
writes ``results/suite-<name>/<timestamp>/suite.json`` listing them with the comparison table's rows.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from rich.console import Console

from bench.run import runner
from bench.run.move_estimate import EstimateFn
from bench.scenario import load_scenario, resolve_scenario
from systems.registry import LAUNCHED as NAMES
from systems.registry import PROFILES
from bench.check.summary import comparison_rows, print_comparison

REPETITIONS = 3  # runs per configuration: the least that gives a median and a spread

# The other linger.ms the sensitivity set runs at: what the load used before it took the client's
# default (before the load paced each partition, it stopped librdkafka's busy-poll against the
# shared system, docs/measurements/automq.md).
SENSITIVITY_LINGER_MS = 250
SENSITIVITY_SIZE = "64MiB"  # reassign-one's largest partition: the copy's longest move

class Entry(NamedTuple):
    """One scenario of a suite: its overrides, repetitions, and whether it is about its own system
    only (run when that one is chosen) rather than every chosen one (the system axis set from them)."""

    scenario: str
    overrides: list[str]
    repetitions: int
    own_system: bool = False


SUITES: dict[str, list[Entry]] = {
    "default": [
        Entry("calibrate", [], 1),  # its matrix: with and without the move budget
        Entry("tiered-tail", [], 1, own_system=True),  # what a new tiered replica copies: the bytes relation
        Entry("shared-tail", [], 1, own_system=True),  # the shared move by its unuploaded tail, both handoffs
        Entry("drain", [], 1),  # the cluster cases' held-out check: broker 1 drained, 2 moves at a time
        Entry("consume-move", [], 1),  # a move and a broker kill under load, consumer groups reading
    ],
    "full": [
        Entry("reassign-one", [], REPETITIONS),
        Entry("broker-loss", [], REPETITIONS),
        Entry("consume-move", [], REPETITIONS),
        # the client setting's sensitivity
        Entry("reassign-one", [f"matrix.prefill.bytes_per_partition=[{SENSITIVITY_SIZE}]",
                               f"matrix.workload.linger_ms=[{SENSITIVITY_LINGER_MS}]"], REPETITIONS),
        Entry("broker-loss", [f"matrix.workload.linger_ms=[{SENSITIVITY_LINGER_MS}]"], REPETITIONS),
        # every system without a move limit
        Entry("reassign-one", [f"matrix.prefill.bytes_per_partition=[{SENSITIVITY_SIZE}]",
                               "matrix.system.move_budget_of_link=[null]"], REPETITIONS),
    ],
    "open": [
        Entry("shared-open", [], 1, own_system=True),  # the open cost to 100,000 objects: its held-out check
    ],
}


def run_suite(name: str, *, results_root: str | Path = runner.DEFAULT_RESULTS, systems: str = ",".join(NAMES),
              progress: bool = True, estimates: EstimateFn | None = None) -> int:
    console = Console(stderr=True)
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in NAMES]
    if unknown or not chosen:
        console.print(f"[red]--systems: unknown system(s) {unknown or chosen} (systems: {', '.join(NAMES)})[/red]")
        return 2
    scenarios = []
    for ref, overrides, reps, own_system in SUITES[name]:
        path = resolve_scenario(ref)
        if own_system:
            sc = load_scenario(path, [*overrides, f"repetitions={reps}"])
            if sc.system.kind not in chosen:
                continue
        else:
            sc = load_scenario(path, [*overrides, f"matrix.system.kind=[{', '.join(chosen)}]", f"repetitions={reps}"])
        scenarios.append(sc)  # all validated before anything starts
    ts = runner.timestamp()
    started = time.time()
    done: list[tuple[str, dict]] = []
    for sc in scenarios:
        out = runner.run_scenario(sc, results_root=results_root, progress=progress, estimates=estimates)
        done.extend((str(d), s) for d, s in out)
    suite_dir = Path(results_root) / f"suite-{name}" / ts
    suite_dir.mkdir(parents=True, exist_ok=True)
    (suite_dir / "suite.json").write_text(json.dumps(
        {"suite": name, "systems": chosen, "runs": [d for d, _ in done],
         # wall time of the runs, first cluster start to last summary (not the install or the aggregation)
         "seconds": round(time.time() - started, 1), "rows": comparison_rows(done)},
        indent=2, default=str) + "\n")
    print_comparison(done, title=f"suite {name}: move time vs partition bytes "
                                 f"({' vs '.join(PROFILES[s].short for s in chosen)})")
    failed = [d for d, s in done if s.get("checks", {}).get("valid") is False or s.get("error")]
    if failed:
        console.print(f"[red]{len(failed)} run(s) failed or had failing checks:[/red] " + ", ".join(failed))
        return 1
    return 0
