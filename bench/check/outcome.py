"""A run's verdict: its checks' verdict, and how the run ended.

`pass` needs all of: every check valid, the run completed (``run_end`` says so: not interrupted,
not crashed, not cut short), no harness thread failed, and every action of the scenario ran to an
``ok`` end. A run that fails a check is `fail` however it ended; a run whose checks pass but that
did not end that way is `unknown` (its checks saw only part of what it was to do), with the
reasons in ``problems``. Every place that says pass/fail/unknown of a run (figures, aggregate,
`bench runs`, the report, crosscheck, the faults page) uses :func:`run_verdict`.
"""
from __future__ import annotations

from typing import Any

from bench.check.safety import verdict
from bench.history.names import EVENT_ACTION_END, EVENT_ACTION_START, EVENT_HARNESS_ERROR, EVENT_RUN_END

COMPLETED = "completed"  # bench.run.ending's word for a run that ran to its end


def run_problems(v: Any, scenario: Any = None) -> list[str]:
    """What kept a run from ending as planned, from its history's events (empty: nothing)."""
    out: list[str] = []
    end = v.events_named(EVENT_RUN_END)
    if not end:
        out.append("no run_end event (the run was killed or is still running)")
    else:
        d = end[0].detail
        ended = d.get("ended") or (COMPLETED if d.get("completed") else None)
        if d.get("error"):
            out.append(f"error: {d['error']}")
        elif ended != COMPLETED:
            out.append(f"ended: {ended or 'not completed'}")
    for e in v.events_named(EVENT_HARNESS_ERROR):
        out.append(f"harness error in {e.detail.get('thread')}: {e.detail.get('error')}")
    started = {e.detail.get("action_id") for e in v.events_named(EVENT_ACTION_START)}
    ended_ok: set[Any] = set()
    for e in v.events_named(EVENT_ACTION_END):
        d = e.detail
        if d.get("ok") is False:
            why = d.get("error") or d.get("errors") or "not ok"
            out.append(f"action {d.get('action_id')} ({d.get('action')}) failed: {why}")
        ended_ok.add(d.get("action_id"))
    n = len(getattr(scenario, "actions", None) or [])
    for i in range(n):
        if i not in ended_ok:
            kind = scenario.actions[i].kind
            out.append(f"action {i} ({kind}) {'did not finish' if i in started else 'never ran'}")
    return out


def run_verdict(summary: dict[str, Any]) -> str:
    """pass / fail / unknown of a run's summary (module docstring). A summary written before
    ``problems`` existed is judged on its ``completed`` / ``error`` / ``ended``."""
    word = verdict((summary.get("checks") or {}).get("valid"))
    if word != "pass":
        return word
    return "unknown" if run_ending_problems(summary) else "pass"


def run_ending_problems(summary: dict[str, Any]) -> list[str]:
    """The summary's ``problems``, or for an older summary what its end fields say."""
    if "problems" in summary:
        return list(summary.get("problems") or [])
    if summary.get("error"):
        return [f"error: {summary['error']}"]
    ended = summary.get("ended") or (COMPLETED if summary.get("completed") else None)
    return [] if ended == COMPLETED else [f"ended: {ended or 'not completed'}"]
