"""Benchmarks of moves are harness runs.

A benchmark builds a scenario whose timeline moves one partition round-robin between the brokers
under a light Locust load (:func:`round_robin`), runs it through the runner with the
``run_scenario`` fixture (tests/conftest.py) and reads its figures from the run's summary.json
(:func:`moves_of`): ``move_seconds`` (request -> first ack on the new owner, the one definition),
the move's ``phases`` and bytes moved. The safety checkers judge the same run: a benchmark whose
run lost, duplicated or reordered an acknowledged write fails.

pytest-benchmark's own clock would time the whole run (cluster start, prefill, verification), so
these benchmarks time their rounds with :data:`CLOCK`: one round per move, each as long as the
move's move_seconds; the median the regression gate compares is then the median move.
"""
from __future__ import annotations

import itertools
from typing import Any

MiB = 1 << 20
TOPIC = "moved"


def round_robin(name: str, system: str, brokers: int, partition_bytes: int, moves: int, every_s: float, *,
                first_s: float = 5.0, rate: float = 300.0, message_bytes: int = 1000,
                **system_fields: Any) -> dict[str, Any]:
    """A scenario (as a YAML file's dict): partition 0 of topic ``moved`` (on broker 1 at the
    start, ``partition_bytes`` prefilled) moved ``moves`` times, to broker 2, 3, ..., 1, ...,
    one move every ``every_s`` from ``first_s``, while one producer writes ``rate`` msgs/s of
    ``message_bytes`` to it; ``system_fields`` go to the scenario's ``system`` section."""
    return {
        "name": name,
        "system": {"kind": system, "brokers": brokers, **system_fields},
        "workload": {"topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 1}],
                     "message_bytes": message_bytes, "produce_rate_msgs_per_s": rate, "producers": 1,
                     "duration_s": first_s + moves * every_s},
        "prefill": {"bytes_per_partition": partition_bytes},
        "actions": [{"at_s": first_s + i * every_s, "kind": "reassign", "topic": TOPIC, "partition": 0,
                     "to": [1 + (i + 1) % brokers]} for i in range(moves)],
    }


def moves_of(run: tuple[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``moves`` of one run's summary, after asserting that the run completed, every check
    passed, every move was measured and each move was served before the next one was requested
    (else the timeline's ``every_s`` is too short for this machine)."""
    run_dir, s = run
    assert not s.get("error"), f"{run_dir}: {s.get('error')}"
    checks = s["checks"]
    assert checks["valid"] is True, f"{run_dir}: failed {checks['failed']}, unknown {checks['unknown']}"
    moves = s["moves"]
    assert moves and all(m["move_seconds"] is not None for m in moves), f"{run_dir}: {moves}"
    for a, b in itertools.pairwise(moves):
        assert a["request_ts"] + a["move_seconds"] < b["request_ts"], \
            f"{run_dir}: move {a['action_id']} still running at the next request; raise every_s"
    return moves


class MeasuredClock:
    """A pytest-benchmark timer (``@pytest.mark.benchmark(timer=CLOCK)``) that stands still except
    when a round adds a duration the harness measured."""

    __name__ = "MeasuredClock"  # pytest-benchmark names the timer in its saved results

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def rounds(self, benchmark, durations: list[float]) -> None:
        """One benchmark round per duration, each lasting exactly that duration."""
        it = iter(durations)

        def one() -> None:
            self.now += next(it)

        benchmark.pedantic(one, rounds=len(durations), iterations=1)


CLOCK = MeasuredClock()
