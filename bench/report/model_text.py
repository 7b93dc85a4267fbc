"""The move models in words: the headline (projections from validated models only), the fitted
models, their held-out checks and the projection table, as Markdown (summary.md and the report;
the report's HTML renders the same Markdown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.analysis import model as mdl
from bench.report.format import (
    MISSING, fmt_error_pct, fmt_num, label, md_inline, md_table, md_to_html, pm, systems_of,
)
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
             h["value_text"] if h["status"] == "validated" else f"{h['status']}: {h['reason']}",
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
            ["system", "axis", "held out", "status", "measured", "predicted", "error", "target", "fitted on"],
            [[v["system"], v["axis"], v.get("label") or MISSING,
              v["status"] + (f" ({v['reason']})" if v.get("reason") else ""), *check_values(v),
              fmt_error_pct(v.get("error_pct")),
              MISSING if v.get("target_pct") is None else f"±{v['target_pct']:g} %",
              f"{v.get('n_train') or 0} {check_unit(v)}" + (f" ({v['family']})" if v.get("family") else "")]
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
CASE_WORDS = {"partition": "8.2 TB partition", "cluster": "cluster scale-out"}


HEADLINE_NOTE = ("Each cell: the projected time, only where the model passed every held-out check it rests on and "
                 "no axis lies beyond its extrapolation bound; `infeasible` where the partition's steady traffic alone "
                 "fills the sender's link (no move time exists); `not validated` otherwise. Why, the validity domain "
                 "and the formula of every cell are in the notes under the table.")


NO_HEADLINE = ("This aggregate predates the headline (its model.json has no `headline`): run "
               "`python -m bench aggregate` again to get it.")


EMPTY_HEADLINE = "The aggregate's model.json lists no headline case (no model could be projected)."


@dataclass
class HeadlineCase:
    title: str
    head: list[str]
    rows: list[list[str]]
    basis: list[str]


def check_values(v: dict[str, Any]) -> tuple[str, str]:
    """A held-out check's measured and predicted value with its unit: seconds of a move, or bytes
    of the untiered tail (axis ``untiered``)."""
    if v.get("measured_bytes") is not None or v.get("predicted_bytes") is not None:
        return tuple(MISSING if v.get(k) is None else format_bytes(v[k])  # type: ignore[return-value]
                     for k in ("measured_bytes", "predicted_bytes"))
    return tuple(MISSING if v.get(k) is None else f"{fmt_num(v[k])} s"  # type: ignore[return-value]
                 for k in ("measured_s", "predicted_s"))


def check_unit(v: dict[str, Any]) -> str:
    """What a check was fitted on: moves, sampled partitions (the untiered tail) or opens."""
    return {"untiered": "partitions", "objects": "opens"}.get(v.get("axis"), "moves")


def headline_cell(e: dict[str, Any]) -> str:
    """``2.7 h``, ``infeasible`` or ``not validated`` (``not validated (extrapolation)`` when an axis
    lies beyond its bound): a projection that did not pass its validation never shows a number;
    the reasons go under the table (:func:`headline_notes`)."""
    status = e.get("status")
    if status == "infeasible":
        return "infeasible"
    if status != "validated":
        return "not validated" + (" (extrapolation)" if (e.get("reason") or "").startswith("extrapolation") else "")
    return e.get("value_text") or (mdl.human_seconds(e["value_s"]) if e.get("value_s") is not None else MISSING)


def headline_table(model: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The one short table: a row per case and link, a column per system (registry order)."""
    entries = model.get("headline")
    if not entries:
        return None
    systems = systems_of(entries)
    names = {e["system"]: e.get("system_label") or label(e["system"]) for e in entries}
    present = {e.get("case") for e in entries}
    cases = [c for c in HEADLINE_CASES if c in present] + sorted(str(c) for c in present - set(HEADLINE_CASES))
    cell = {(e.get("case"), e["system"], float(e["link_gbit_s"])): e for e in entries}
    rows = []
    for case in cases:
        for g in sorted({float(e["link_gbit_s"]) for e in entries if e.get("case") == case}):
            rows.append([f"{CASE_WORDS.get(case, case)} @ {g:g} Gbit/s"]
                        + [headline_cell(cell[(case, s, g)]) if (case, s, g) in cell else MISSING for s in systems])
    return ["case"] + [names[s] for s in systems], rows


def headline_notes(model: dict[str, Any]) -> list[str]:
    """Under the table: per cell, why it is infeasible or not validated, or its validity domain,
    then the formula it rests on and the code version."""
    out = []
    for e in model.get("headline") or []:
        where = f"**{e.get('system_label') or e['system']}**, {CASE_WORDS.get(e.get('case'), e.get('case'))} @ " \
                f"{e['link_gbit_s']:g} Gbit/s"
        if e.get("status") == "validated":
            what = f"{e.get('value_text')}; {e.get('validity_text') or 'validity domain not recorded'}"
            if e.get("bytes_moved") is not None:
                what += f"; {format_bytes(e['bytes_moved'])} moved"
        else:
            what = f"{e.get('status')}: {e.get('reason') or 'no reason given'}"
            if e.get("validity_text"):
                what += f" (validity: {e['validity_text']})"
        out.append(f"{where}: {what}.")
    return out


def headline_bases(model: dict[str, Any]) -> list[str]:
    """Each system's formula and budget once per case and link (the arithmetic behind the cells)."""
    out = []
    for e in model.get("headline") or []:
        version = f" Code version: {e['version'][:12]}." if e.get("version") else ""
        out.append(f"{e.get('system_label') or e['system']}, {CASE_WORDS.get(e.get('case'), e.get('case'))} @ "
                   f"{e['link_gbit_s']:g} Gbit/s: {e.get('basis') or MISSING}.{version}")
    return out


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
        names = {e["system"]: e.get("system_label") or label(e["system"]) for e in es}
        links = sorted({float(e["link_gbit_s"]) for e in es})
        cell = {(e["system"], float(e["link_gbit_s"])): e for e in es}
        rows = [[f"{g:g} Gbit/s"] + [headline_cell(cell[(s, g)]) if (s, g) in cell else MISSING for s in systems]
                for g in links]
        out.append(HeadlineCase(es[0].get("title") or str(case), ["link"] + [names[s] for s in systems], rows,
                                headline_notes({"headline": es})))
    return out


def headline_markdown(model: dict[str, Any], figure: Any = None) -> list[str]:
    lines = ["## Headline", ""]
    if model.get("headline") is None:
        return lines + [NO_HEADLINE, ""]
    table = headline_table(model)
    if table is None:
        return lines + [EMPTY_HEADLINE, ""]
    if figure is not None:
        lines += [f"![{figure.title}](figures/{figure.name}.png)", "", f"*{figure.caption}*", ""]
    lines += [HEADLINE_NOTE, "", md_table(*table), ""]
    titles = sorted({f"{CASE_WORDS.get(e.get('case'), e.get('case'))}: {e.get('title')}" for e in model["headline"]})
    lines += [f"- {t}" for t in titles] + [""]
    if model.get("leaves_out"):
        lines += [f"**What \"hours at 1 Gbps\" leaves out.** {model['leaves_out']}", ""]
    lines += ["### Why each cell reads as it does", ""] + [f"- {n}" for n in headline_notes(model)] + [""]
    lines += ["### The arithmetic behind each cell", ""] + [f"- {b}" for b in headline_bases(model)] + [""]
    return lines


def headline_html(model: dict[str, Any], figure: Any = None) -> str:
    body = md_to_html("\n".join(headline_markdown(model, None)[2:]))  # the Markdown less its "## Headline"
    return "<h2>Headline</h2>" + (_figure_html(figure) if figure is not None else "") + body


def _figure_html(f: Any) -> str:
    import base64
    import html

    b64 = base64.b64encode(f.png).decode("ascii")
    return (f"<figure><img alt='{html.escape(f.title)}' src='data:image/png;base64,{b64}'>"
            f"<figcaption>{md_inline(f.caption)}</figcaption></figure>")


__all__ = ["EMPTY_HEADLINE", "HEADLINE_NOTE", "NO_HEADLINE", "HeadlineCase", "headline_bases", "headline_cases",
           "headline_cell", "headline_html", "headline_markdown", "headline_notes", "headline_table", "model_markdown"]
