"""A run's verdict counts how it ended: a run ended by an error, a signal, a failed action or a
failed harness thread, or with no end at all, is never `pass` (bench/check/outcome.py)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.check.outcome import run_verdict
from bench.check.summary import build_summary
from bench.history.store import SCHEMA
from tests.support.synthetic import SynthRun, build_history


@pytest.fixture(scope="module")
def history() -> pa.Table:
    table, _ = build_history(SynthRun("replication", duration_s=12.0, move_at_s=4.0, rate_msgs_per_s=50.0))
    return table


def _events(table: pa.Table, drop: str | None = None, add: list[tuple[str, dict]] = ()) -> pa.Table:
    """The history without its `drop` events and with `add` appended at its last timestamp."""
    if drop:
        table = table.filter(pc.invert(pc.fill_null(pc.equal(table["event"], drop), False)))
    ts = pc.max(table["ts"]).as_py()
    rows = [{"kind": "event", "ts": ts, "msg_id": -1, "partition": -1, "event": name,
             "detail": json.dumps(detail)} for name, detail in add]
    return pa.concat_tables([table, pa.Table.from_pylist(rows, schema=SCHEMA)]) if rows else table


def test_a_completed_run_with_valid_checks_passes(history):
    s = build_summary(history, None)
    assert s["checks"]["valid"] is True and s["problems"] == []
    assert s["verdict"] == run_verdict(s) == "pass"


@pytest.mark.parametrize("drop, add, says", [
    ("run_end", [("run_end", {"completed": False, "error": "RuntimeError: boom", "ended": "crashed: RuntimeError: boom"})],
     "error: RuntimeError: boom"),
    ("run_end", [("run_end", {"completed": False, "error": None, "ended": "interrupted: SIGINT"})],
     "ended: interrupted: SIGINT"),
    ("run_end", [], "no run_end event"),
    (None, [("harness_error", {"thread": "sampler", "error": "OSError: gone"})], "harness error in sampler"),
    (None, [("action_end", {"action_id": 1, "action": "reassign", "ok": False, "error": "rejected"})],
     "action 1 (reassign) failed: rejected"),
])
def test_a_run_ended_by_an_error_or_early_is_never_a_pass(history, drop, add, says):
    s = build_summary(_events(history, drop, add), None)
    assert s["checks"]["valid"] is True  # the checks alone would pass it
    assert s["verdict"] == run_verdict(s) == "unknown", s["problems"]
    assert any(p.startswith(says) for p in s["problems"]), s["problems"]


def test_a_failed_check_fails_however_the_run_ended(history):
    reads = pc.equal(history["kind"], "read")
    first_read = pc.index(reads, True).as_py()
    lossy = pa.concat_tables([history.slice(0, first_read), history.slice(first_read + 1)])
    s = build_summary(_events(lossy, "run_end", [("run_end", {"completed": False, "ended": "interrupted: SIGTERM"})]),
                      None)
    assert s["checks"]["lost_writes"]["lost_count"] == 1
    assert s["verdict"] == run_verdict(s) == "fail"


def test_summaries_written_before_problems_are_judged_on_their_end_fields():
    ok = {"checks": {"valid": True}}
    assert run_verdict({**ok, "completed": True}) == "pass"
    assert run_verdict({**ok, "ended": "completed"}) == "pass"
    assert run_verdict({**ok, "completed": False, "error": "KeyboardInterrupt: SIGINT"}) == "unknown"
    assert run_verdict(ok) == "unknown"  # nothing says it completed
    assert run_verdict({"checks": {"valid": False}, "completed": True}) == "fail"
    assert run_verdict({"checks": {"valid": "unknown"}, "completed": True}) == "unknown"
