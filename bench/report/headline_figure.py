"""The headline's figure: the answer at a glance (bench/report/model_text.py renders the table and
the notes beside it). From the aggregate's tables and model.json, never a raw history."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from bench.analysis import model as mdl
from bench.analysis.aggregate.fits import model_move
from bench.report.figures import Figure, byte_ticks, pyplot, png_bytes, time_ticks
from bench.report.format import color as system_color
from bench.report.format import short as system_short
from bench.report.format import short_runs, systems_of


def fig_headline(t, model: dict[str, Any]) -> Figure | None:
    """The answer at a glance: left, time to move against partition size (measured moves at their
    conditions; each model at the article's conditions over a 10 Gbit/s link out to 10 TB, solid
    with its held-out error band where validated, dotted where not); right, each system's link
    budget for the article's partition, the infeasible region shaded."""
    from bench.analysis import projection as pj

    fits = {m["system"]: mdl.MoveModel.from_row(m) for m in t.get("model_fit") or []}
    if not fits:
        return None
    plt = pyplot()
    validation = model.get("validation") or []
    valid = model.get("validity") or {}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    moves = [m for m in t["moves"] if m["move_seconds"] is not None and m["partition_bytes"] and model_move(m)]
    gbit = 10.0
    sizes = [1e9 * (1e13 / 1e9) ** (i / 60) for i in range(61)]
    systems = systems_of(moves + [{"system": s} for s in fits])
    statuses = []
    for system in systems:
        color = system_color(system)
        ms = [m for m in moves if m["system"] == system]
        groups: dict[float, list[float]] = defaultdict(list)
        for m in ms:  # one marker per nominal size: the median of its moves
            groups[float(f"{m['partition_bytes']:.1g}")].append(m)
        pts = sorted((statistics.median(x["partition_bytes"] for x in g), statistics.median(x["move_seconds"] for x in g))
                     for g in groups.values())
        if pts:
            ax.scatter([x for x, _ in pts], [y for _, y in pts], color=color, s=30, zorder=3, marker="o",
                       label=f"{system_short(system)}: measured (median per size, its run's link)")
        m = fits.get(system)
        if m is None:
            continue
        v = pj.Validity(**valid[system]) if system in valid else pj.Validity(False, None, [], "no validity")
        budget = pj.article_budget(m, gbit * mdl.GBIT_BYTES_PER_S)
        if budget.infeasible:
            statuses.append(f"{system_short(system)}: infeasible at {gbit:g} Gbit/s")
            continue
        ys, ok, band = [], [], []
        for size in sizes:
            row = pj.partition_case(system, m, v, gbit, size, "", validation)
            y = m.kind.partition_case(m, budget.cap(None), size, "", pj.ARTICLE_INGEST)[0]
            ys.append(y if math.isfinite(y) else float("nan"))
            ok.append(row["status"] == "validated")
            errs = [abs(d["error_pct"]) for d in row["validity"].values() if d.get("error_pct") is not None]
            band.append(max(errs) / 100 if errs else 0.0)
        solid = [y if o else float("nan") for y, o in zip(ys, ok)]
        dotted = [y if not o else float("nan") for y, o in zip(ys, ok)]
        if any(ok):
            ax.plot(sizes, solid, color=color, lw=2.2, label=f"{system_short(system)} @ {gbit:g} Gbit/s: validated "
                                                               "(band: held-out error)")
            ax.fill_between(sizes, [y * (1 - b) if o else float("nan") for y, b, o in zip(ys, band, ok)],
                            [y * (1 + b) if o else float("nan") for y, b, o in zip(ys, band, ok)], color=color,
                            alpha=0.15)
        if not all(ok):
            ax.plot(sizes, dotted, color=color, lw=1.4, ls=":",
                    label=f"{system_short(system)} @ {gbit:g} Gbit/s: NOT validated (model only)")
        statuses.append(f"{system_short(system)}: {'validated' if all(ok) else 'not validated'} at {gbit:g} Gbit/s")
    ax.axvline(pj.ARTICLE_BYTES, color="#555", lw=0.8, ls="--")
    ax.text(pj.ARTICLE_BYTES, ax.get_ylim()[1], " 8.2 TB", va="top", ha="left", fontsize=8, color="#555")
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo = min([x for x, *_ in ((m["partition_bytes"],) for m in moves)] + [1e9]) / 2
    ax.set_xlim(lo, 2e13)
    byte_ticks(ax.xaxis, lo, 2e13, log=True)
    y0, y1 = ax.get_ylim()
    time_ticks(ax, y0, y1)
    ax.set_xlabel("partition size (log)")
    ax.set_ylabel("time to move (log)")
    ax.set_title(f"Time to move one partition (100 MB/s ingest; lines at {gbit:g} Gbit/s)")
    ax.legend(fontsize=7, loc="upper left")
    # Right: what a broker's link carries before the move, per system
    links = [0.5 * (40 / 0.5) ** (i / 80) for i in range(81)]
    top = 0.0
    for system in systems:
        m = fits.get(system)
        if m is None:
            continue
        steady = pj.article_budget(m, mdl.GBIT_BYTES_PER_S).steady
        left = [g * mdl.GBIT_BYTES_PER_S - steady for g in links]
        bx.plot(links, [x / 1e6 if x > 0 else float("nan") for x in left], color=system_color(system), lw=1.8,
                label=f"{system_short(system)}: link less {steady / 1e6:,.0f} MB/s steady")
        edge = steady / mdl.GBIT_BYTES_PER_S
        bx.axvspan(links[0], edge, color="#c0392b", alpha=0.10)
        bx.axvline(edge, color=system_color(system), lw=1.0, ls="-.")
        top = max(top, max(left) / 1e6)
    bx.axvspan(links[0], links[0], color="#c0392b", alpha=0.25,
               label="infeasible: steady traffic >= link\n(darker: for more systems)")
    for g in pj.HEADLINE_LINKS_GBIT:
        bx.axvline(g, color="#888", lw=0.7, ls="--")
        bx.text(g, top, f" {g:g} Gbit/s", fontsize=7, va="top", color="#555")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlim(links[0], links[-1])
    bx.set_xticks([0.5, 1, 2, 5, 10, 25])
    bx.set_xticklabels(["0.5", "1", "2", "5", "10", "25"])
    bx.set_xlabel("broker link (Gbit/s, log)")
    bx.set_ylabel("left for a move (MB/s, log)")
    bx.set_title("Link budget of the partition's sender")
    bx.legend(fontsize=7, loc="lower right")
    runs = sorted({r for m in fits.values() for r in m.runs})
    cap = ("Left: dots are measured single-partition moves (median per size, at their runs' scaled-down links); "
           f"lines are each system's fitted model for the article's partition (100 MB/s ingest, production replication "
           f"factor, one consumer group) over a {gbit:g} Gbit/s link, with what the link leaves after the steady "
           "traffic: solid with the held-out error as a band where every axis it rests on is checked and within its "
           "extrapolation bound, dotted where not (a model's number, not a result). Right: what the sender's link "
           "leaves for a move after replication, uploads and reads of that partition; left of each system's shaded "
           "edge the steady traffic alone fills the link (infeasible: no move time exists). "
           + "; ".join(statuses) + ". Models fitted on " + short_runs(runs, limit=2)
           + " (every run: the Model section).")
    return Figure("headline", "The answer: time to move against partition size, and what the link leaves",
                  png_bytes(fig), cap, runs)


__all__ = ["fig_headline"]
