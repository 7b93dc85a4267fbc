"""The move models in words: the headline (projections from validated models only), the fitted
models, their held-out checks and the projection table, as Markdown (summary.md and the report;
the report's HTML renders the same Markdown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.analysis import model as mdl
from bench.report.format import MISSING, fmt_error_pct, fmt_num, html_table, label, md_inline, md_table, pm, systems_of
from bench.units import format_bytes
from systems.registry import PROFILES


def _opens_objects(family: str | None) -> bool:
    """Whether a fitted model's family has a per-object open cost (its fit table shows it)."""
    fam = mdl.FAMILIES.get(family or "")
    return fam is not None and fam.opens_objects


def model_markdown(tables: dict[str, list[dict[str, Any]]], notes: dict[str, str] | None = None,
                   headline: list[dict[str, Any]] | None = None) -> str:
    """Headline, model fits, held-out checks and projection as Markdown (summary.md and the report)."""
    parts = []
    if headline is not None:
        parts += ["### Headline (projections from validated models)", ""]
        parts.append(md_table(["case", "system", "link", "projection", "held-out error", "rests on"], [
            [h["case"], h["system"], f"{h['link_gbit_s']:g} Gbit/s",
             h["value_text"] if h["status"] == "validated" else f"not validated: {h['reason']}",
             MISSING if h.get("error_pct") is None else f"≤ {h['error_pct']:.1f} %",
             ", ".join(h.get("validations") or []) or MISSING] for h in headline]) if headline else "No model to project.")
        parts += [""] + sorted({f"- {h['title']}: {h['system']}: {h['basis']}" for h in headline}) + [""]
    parts += ["### Fitted models", ""]
    if tables["model_fit"]:
        parts.append(md_table(
            ["system", "formula", "fixed cost c (s)", "efficiency", "open per object (ms)", "R²", "RMSE (s)", "n",
             "validated"],
            [[m["system"], m["formula"], pm(m["fixed_s"], m["fixed_se"]),
              pm(m["efficiency"], m["efficiency_se"]) if m["efficiency_fitted"] else "1 (held)",
              pm(m["open_per_object_s"] * 1000, None if m["open_per_object_se"] is None
                 else m["open_per_object_se"] * 1000) if _opens_objects(m["family"]) else MISSING,
              fmt_num(m["r2"]), fmt_num(m["rmse_s"]), m["n"],
              "yes" if m.get("validated") else f"no: {m.get('validation_reason')}"] for m in tables["model_fit"]]))
        parts += [""] + [f"- **{m['system']}** rests on {m['n']} move(s) of runs {m['runs']}"
                         + (f" ({m['host_note']})" if m.get("host_note") else "") + f". {m['assumptions']}"
                         for m in tables["model_fit"]]
    for s, n in (notes or {}).items():
        parts.append(f"- **{s}**: not fitted ({n}).")
    parts += ["", "### Held-out checks", "",
              "Fitted on the smaller values of one axis (the other settings equal), predicting the held-out "
              "value's moves from their inputs at the request; error of the median move.", ""]
    if tables["model_validation"]:
        parts.append(md_table(
            ["system", "axis", "held out", "status", "measured (s)", "predicted (s)", "error", "target", "fitted on"],
            [[v["system"], v["axis"], v.get("label") or MISSING,
              v["status"] + (f" ({v['reason']})" if v.get("reason") else ""), fmt_num(v.get("measured_s")),
              fmt_num(v.get("predicted_s")), fmt_error_pct(v.get("error_pct")),
              MISSING if v.get("target_pct") is None else f"±{v['target_pct']:g} %",
              f"{v.get('n_train') or 0} moves" + (f" ({v['family']})" if v.get("family") else "")]
             for v in tables["model_validation"]]))
    else:
        parts.append("No measured moves to validate.")
    parts += ["", "### Projection: a partition ingesting 100 MB/s", ""]
    proj = tables["projection"]
    if proj:
        systems = [s for s in PROFILES if any(p["system"] == s for p in proj)]
        keys = sorted({(p["link_gbit_s"], p["partition_bytes"], p["size_label"]) for p in proj})
        rows = []
        for gbit, _, lbl in keys:
            row = [f"{gbit:g} Gbit/s", lbl]
            for s in systems:
                p = next((x for x in proj if x["system"] == s and x["link_gbit_s"] == gbit and x["size_label"] == lbl), None)
                row += [p["move_time"] if p else MISSING,
                        format_bytes(p["bytes_moved"]) if p and p["bytes_moved"] is not None else MISSING]
            rows.append(row)
        parts.append(md_table(["link", "partition"] + [f"{s} {c}" for s in systems for c in ("move time", "bytes moved")],
                              rows))
        parts += ["", "Basis:"] + sorted({f"- {p['system']} @ {p['link_gbit_s']:g} Gbit/s: {p['basis']}" for p in proj})
        parts.append("- 1 Gbit/s = 125 MB/s; sizes are decimal (1 TB = 10^12 bytes); the fitted fixed cost and "
                     "efficiency are assumed to hold at the link speed; disks, CPU and the object store keep up.")
    else:
        parts.append("No model could be fitted: no measured moves.")
    return "\n".join(parts) + "\n"


HEADLINE_CASES = ("partition", "cluster")  # the order the cases are shown in (others after, by name)


HEADLINE_NOTE = ("Projected time of each case per link and system, from the move-time models fitted on the runs "
                 "below. A time is shown only where the model passed the held-out checks it rests on (fit on "
                 "smaller runs, predict a larger one; error: the largest |error| of those checks); otherwise the "
                 "cell says why it is not validated.")


NO_HEADLINE = ("This aggregate predates the headline (its model.json has no `headline`): run "
               "`python -m bench aggregate` again to get it.")


EMPTY_HEADLINE = "The aggregate's model.json lists no headline case (no model could be projected)."


@dataclass
class HeadlineCase:
    title: str
    head: list[str]
    rows: list[list[str]]
    basis: list[str]


def headline_cell(e: dict[str, Any]) -> str:
    """``25.5 h (validated, held-out error 4.1 %)``, or ``not validated: <reason>``: a projection
    that did not pass its validation never shows a number."""
    if e.get("status") != "validated":
        return "not validated: " + (e.get("reason") or "no reason given")
    value = e.get("value_text") or (mdl.human_seconds(e["value_s"]) if e.get("value_s") is not None else MISSING)
    err = e.get("error_pct")
    return f"{value} (validated" + ("" if err is None else f", held-out error {abs(err):.1f} %") + ")"


def headline_cases(model: dict[str, Any]) -> list[HeadlineCase] | None:
    """model.json's ``headline`` as one table per case: rows = links, columns = systems (registry
    order). None: the aggregate predates the headline."""
    entries = model.get("headline")
    if entries is None:
        return None
    present = {e.get("case") for e in entries}
    cases = [c for c in HEADLINE_CASES if c in present] + sorted(str(c) for c in present - set(HEADLINE_CASES))
    out = []
    for case in cases:
        es = [e for e in entries if e.get("case") == case]
        systems = systems_of(es)
        label = {e["system"]: e.get("system_label") or label(e["system"]) for e in es}
        links = sorted({float(e["link_gbit_s"]) for e in es})
        cell = {(e["system"], float(e["link_gbit_s"])): e for e in es}
        rows = [[f"{g:g} Gbit/s"] + [headline_cell(cell[(s, g)]) if (s, g) in cell else MISSING for s in systems]
                for g in links]
        basis = []
        for s in systems:
            for g in links:
                e = cell.get((s, g))
                if e is None:
                    continue
                line = f"**{label[s]}** @ {g:g} Gbit/s: {e.get('basis') or MISSING}"
                if e.get("status") == "validated" and e.get("bytes_moved") is not None:
                    line += f"; {format_bytes(e['bytes_moved'])} moved"
                if e.get("validations"):
                    line += "; held-out checks: " + ", ".join(e["validations"])
                basis.append(line + ".")
        out.append(HeadlineCase(es[0].get("title") or str(case), ["link"] + [label[s] for s in systems], rows, basis))
    return out


def headline_markdown(model: dict[str, Any]) -> list[str]:
    cases = headline_cases(model)
    lines = ["## Headline", ""]
    if cases is None:
        return lines + [NO_HEADLINE, ""]
    if not cases:
        return lines + [EMPTY_HEADLINE, ""]
    lines += [HEADLINE_NOTE, ""]
    for c in cases:
        lines += [f"### {c.title}", "", md_table(c.head, c.rows), ""] + [f"- {b}" for b in c.basis] + [""]
    return lines


def headline_html(model: dict[str, Any]) -> str:
    cases = headline_cases(model)
    if cases is None:
        return f"<h2>Headline</h2><p>{md_inline(NO_HEADLINE)}</p>"
    if not cases:
        return f"<h2>Headline</h2><p>{md_inline(EMPTY_HEADLINE)}</p>"
    return (f"<h2>Headline</h2><p>{md_inline(HEADLINE_NOTE)}</p>"
            + "".join(f"<h3>{md_inline(c.title)}</h3>" + html_table(c.head, c.rows)
                      + "<ul>" + "".join(f"<li>{md_inline(b)}</li>" for b in c.basis) + "</ul>" for c in cases))



__all__ = ["EMPTY_HEADLINE", "HEADLINE_NOTE", "NO_HEADLINE", "HeadlineCase", "headline_cases", "headline_cell",
           "headline_html", "headline_markdown", "model_markdown"]
