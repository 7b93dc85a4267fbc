"""How the report and summary.md write numbers, spreads, tables and systems: the one number format
(:func:`~bench.units.fmt_num`), ``median (min–max)`` spreads, Markdown and HTML tables, run lists
and each system's label, short name and colour (its profile's)."""

from __future__ import annotations

import html
import os
import re
import statistics
from typing import Any

from bench.check.safety import VERDICTS
from bench.units import MISSING, fmt_num, format_bytes
from systems.registry import PROFILES

UNKNOWN_COLOR = "#7f8c8d"  # a system in stored results that no profile describes


def fmt_range(median: Any, lo: Any, hi: Any, fmt=fmt_num) -> str:
    """``median (min–max)``; the median alone when all values are equal (or there is one)."""
    if median is None:
        return MISSING
    if lo is None or hi is None or lo == hi:
        return fmt(median)
    return f"{fmt(median)} ({fmt(lo)}–{fmt(hi)})"


def fmt_spread(xs: list[Any], fmt=fmt_num) -> str:
    """The median (min–max) of several values; a missing one is counted, never a zero."""
    known = sorted(x for x in xs if x is not None)
    if not known:
        return MISSING
    text = fmt_range(statistics.median(known), known[0], known[-1], fmt)
    return text + (f", {len(xs) - len(known)} missing" if len(known) < len(xs) else "")


def cfg_spread(c: dict[str, Any], name: str, fmt=fmt_num) -> str:
    return fmt_range(c.get(f"{name}_median"), c.get(f"{name}_min"), c.get(f"{name}_max"), fmt)


def runs_of(c: dict[str, Any]) -> str:
    """``3`` or ``2 of 3`` (planned repetitions, when a run is missing)."""
    planned = c.get("repetitions")
    return f"{c['runs']} of {planned}" if planned and planned != c["runs"] else str(c["runs"])


def count_text(x: Any) -> str:
    return MISSING if x is None else str(x)



def pm(x: Any, se: Any) -> str:
    """``x ± se`` (``x`` alone without a standard error)."""
    return fmt_num(x) if se is None else f"{fmt_num(x)} ± {fmt_num(se)}"


def fmt_error_pct(x: Any) -> str:
    """A signed error in percent: ``+4.1 %``."""
    return MISSING if x is None else f"{x:+.1f} %"


def commit_label(commit: Any, dirty: Any) -> str:
    """``29ada24cecb0`` / ``29ada24cecb0 (dirty)`` / unknown."""
    if not commit:
        return "unknown"
    return str(commit)[:12] + (" (dirty)" if dirty else "" if dirty is False else " (dirty: unknown)")


def repetition_text(r: dict[str, Any]) -> str:
    """``2 of 3`` (a run's repetition)."""
    rep, of = r.get("repetition"), r.get("repetitions")
    return MISSING if rep is None else f"{rep} of {of}" if of else str(rep)


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)



def label(system: str) -> str:
    """A system's name for people (its profile's label)."""
    p = PROFILES.get(system)
    return p.label if p is not None else system


def short(system: str) -> str:
    p = PROFILES.get(system)
    return p.short if p is not None else system


def color(system: str) -> str:
    p = PROFILES.get(system)
    return p.color if p is not None else UNKNOWN_COLOR


def systems_of(rows: list[dict[str, Any]]) -> list[str]:
    """The systems in ``rows``: registered ones in registry order, then any others by name."""
    present = {r["system"] for r in rows}
    return [s for s in PROFILES if s in present] + sorted(present - set(PROFILES))


def short_runs(keys: list[str], limit: int = 40) -> str:
    keys = sorted(set(keys))
    if not keys:
        return "none"
    prefix = os.path.commonpath(keys) if len(keys) > 1 else ""
    if prefix and prefix != keys[0]:
        shown = [k[len(prefix):].lstrip("/") for k in keys]
        text = f"`{prefix}/` + " + ", ".join(f"`{k}`" for k in shown[:limit])
    else:
        text = ", ".join(f"`{k}`" for k in keys[:limit])
    if len(keys) > limit:
        text += f" and {len(keys) - limit} more"
    return f"{len(keys)} run(s): {text}"


def run_name(run_key: str) -> str:
    """A run's directory name, shortened in the middle to fit a figure label."""
    name = run_key.split("/")[-1]
    return name if len(name) <= 48 else name[:22] + "…" + name[-25:]


def md_inline(text: str) -> str:
    """Escape, then render `code` and **bold** spans of our own captions."""
    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", s)


VERDICT_CLASS = dict(zip(VERDICTS, ("ok", "bad", "unk")))


def html_table(head: list[str], rows: list[list[Any]], verdict_cols: tuple[int, ...] = ()) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = ""
            if i in verdict_cols:
                cls = VERDICT_CLASS.get(str(c), "unk")
            cells.append(f"<td class='{cls}'>{md_inline(str(c))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def md_to_html(md: str) -> str:
    """The small Markdown subset model_markdown emits: headings, tables, bullets, paragraphs."""
    out, table = [], []

    def flush():
        if table:
            head = [c.strip() for c in table[0].strip("|").split("|")]
            rows = [[c.strip() for c in r.strip("|").split("|")] for r in table[2:]]
            out.append(html_table(head, rows))
            table.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("### "):
            out.append(f"<h3>{md_inline(line[4:])}</h3>")
        elif line.startswith("- "):
            out.append(f"<li>{md_inline(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{md_inline(line)}</p>")
    flush()
    return "\n".join(out)


__all__ = ["MISSING", "VERDICT_CLASS", "cfg_spread", "color", "commit_label", "count_text", "fmt_error_pct", "fmt_num",
           "fmt_range", "fmt_spread", "format_bytes", "html_table", "label", "md_inline", "md_table", "md_to_html",
           "pm", "repetition_text", "run_name", "runs_of", "short", "short_runs", "systems_of"]
