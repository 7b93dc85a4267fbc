"""``summary.md``, written beside the aggregate's tables by ``bench aggregate``: the sections of
:data:`bench.report.sections.SUMMARY` (the report's units, configurations in the aggregate's
order), every run and every fault, and the timings."""

from __future__ import annotations

from typing import Any

from bench.report.format import fmt_num
from bench.report.sections import SUMMARY, View, render_markdown


def summary_markdown(res: Any) -> str:
    """``res``: a :class:`bench.analysis.aggregate.AggregateResult`."""
    t = res.tables
    lines = ["# Aggregate of reassignment runs", "",
             f"{len(res.runs)} run(s) of {len(t['configs'])} configuration(s); tables in this directory "
             "(Parquet + CSV). Quantiles from raw samples.", ""]
    if res.warnings:
        lines += ["Warnings:"] + [f"- {w}" for w in res.warnings] + [""]
    v = View(t, t["configs"], t["move_links"], str, {}, res.models.get("notes"),
             (res.models.get("projection") or {}).get("headline"))
    lines += render_markdown(SUMMARY, v)
    lines += ["", "Timings (s): " + ", ".join(f"{k} {fmt_num(x)}" for k, x in res.timings.items())]
    return "\n".join(lines) + "\n"


def write_summary(res: Any) -> None:
    """summary.md into the aggregate's folder."""
    res.out_dir.mkdir(parents=True, exist_ok=True)
    (res.out_dir / "summary.md").write_text(summary_markdown(res), encoding="utf-8")


__all__ = ["summary_markdown", "write_summary"]
