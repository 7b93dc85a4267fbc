"""The report's and summary.md's sections as units, and the one renderer of each unit to Markdown
and to HTML.

A :class:`Section` is a title and, all optional, a note, a table (header and rows), bullets or a
paragraph after it, a Markdown body, a text for when it is empty, and when it applies; every
callable takes the :class:`View` the document is rendered from. :data:`REPORT` and
:data:`SUMMARY` are the two documents' ordered lists: a new table or figure is one unit in the
list(s) that show it (figures: bench/report/figures.py ``FIGURES``).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.analysis.cost import Prices, load_prices
from bench.check.moves import BYTES_SPLIT_NOTE
from bench.check.safety import verdict_counts
from bench.report import client_table as ct
from bench.report import tables as tb
from bench.report.format import (
    MISSING, fmt_num, html_table, md_inline, md_table, md_to_html, repetition_text, short_runs,
)
from bench.report.model_text import headline_html, headline_markdown, model_markdown


@dataclass
class View:
    """What a document is rendered from: the aggregate's tables, in the order it shows them."""

    t: dict[str, list[dict[str, Any]]]
    configs: list[dict[str, Any]]  # the configs table, in the document's order
    move_links: list[dict[str, Any]]  # the move_links table, in the document's order
    label: Callable[[str], str] = str  # a system's name in the document's tables
    model: dict[str, Any] = field(default_factory=dict)  # model.json
    notes: dict[str, str] | None = None  # systems without a model, and why
    headline: list[dict[str, Any]] | None = None  # the headline inside the model section (summary.md)
    figures: list[Any] = field(default_factory=list)  # bench.report.figures.Figure
    headline_figure: Any = None  # the answer at a glance, the headline's (bench.report.figures.fig_headline)
    prices: Prices = field(default_factory=load_prices)  # what a move's bytes and requests cost (bench/analysis/cost.py)

    def headline_cases(self) -> list[dict[str, Any]]:
        return self.model.get("headline") or self.headline or []


Text = str | Callable[[View], str]


def _text(x: Text | None, v: View) -> str | None:
    return x(v) if callable(x) else x


def _head(head: list[str] | Callable[[View], list[str]], v: View) -> list[str]:
    return head(v) if callable(head) else head


def always(v: View) -> bool:
    return True


def has_moves(v: View) -> bool:
    return any(c["moves"] for c in v.configs)


@dataclass(frozen=True)
class Section:
    title: str
    note: Text | None = None
    head: list[str] | Callable[[View], list[str]] | None = None  # a table's header ...
    rows: Callable[[View], list[list[Any]]] | None = None  # ... and its rows
    bullets: Callable[[View], list[str]] | None = None  # after the table (or alone)
    paragraph: Callable[[View], str] | None = None  # after the table
    markdown: Callable[[View], str] | None = None  # the whole body, in Markdown (HTML: rendered from it)
    empty: Callable[[View], bool] | None = None  # when true, the body is `empty_text`
    empty_text: str = ""
    applies: Callable[[View], bool] = always
    verdict_cols: tuple[int, ...] = ()  # columns coloured by verdict (HTML)

    def to_markdown(self, v: View) -> list[str]:
        out = [f"## {self.title}", ""]
        if self.markdown is not None:
            return out + [self.markdown(v)]
        if self.empty is not None and self.empty(v):
            return out + [self.empty_text, ""]
        note = _text(self.note, v)
        if note is not None:
            out += [note, ""]
        if self.rows is not None:
            out += [md_table(_head(self.head, v), self.rows(v)), ""]
        if self.bullets is not None:
            out += [f"- {x}" for x in self.bullets(v)] + [""]
        if self.paragraph is not None:
            out += [self.paragraph(v), ""]
        return out

    def to_html(self, v: View) -> str:
        out = f"<h2>{self.title}</h2>"
        if self.markdown is not None:
            return out + md_to_html(self.markdown(v))
        if self.empty is not None and self.empty(v):
            return out + f"<p>{md_inline(self.empty_text)}</p>"
        note = _text(self.note, v)
        if note is not None:
            out += f"<p>{md_inline(note)}</p>"
        if self.rows is not None:
            out += html_table(_head(self.head, v), self.rows(v), verdict_cols=self.verdict_cols)
        if self.bullets is not None:
            out += "<ul>" + "".join(f"<li>{md_inline(x)}</li>" for x in self.bullets(v)) + "</ul>"
        if self.paragraph is not None:
            out += f"<p>{md_inline(self.paragraph(v))}</p>"
        return out


class Headline:
    """The report's headline: one table per case (bench/report/model_text.py)."""

    def applies(self, v: View) -> bool:
        return True

    def to_markdown(self, v: View) -> list[str]:
        return headline_markdown(v.model, v.headline_figure)

    def to_html(self, v: View) -> str:
        return headline_html(v.model, v.headline_figure)


class Figures:
    """Every figure the document has (``View.figures``), in order: title, image, caption."""

    def applies(self, v: View) -> bool:
        return True

    def to_markdown(self, v: View) -> list[str]:
        out = []
        for f in v.figures:
            out += [f"## {f.title}", "", f"![{f.title}](figures/{f.name}.png)", "", f"*{f.caption}*", ""]
        return out

    def to_html(self, v: View) -> str:
        out = []
        for f in v.figures:
            b64 = base64.b64encode(f.png).decode("ascii")
            out.append(f"<h2>{html.escape(f.title)}</h2><figure><img alt='{html.escape(f.title)}' "
                       f"src='data:image/png;base64,{b64}'><figcaption>{md_inline(f.caption)}</figcaption></figure>")
        return "\n".join(out)


def render_markdown(sections: list[Any], v: View) -> list[str]:
    return [line for s in sections if s.applies(v) for line in s.to_markdown(v)]


def render_html(sections: list[Any], v: View) -> list[str]:
    return [h for s in sections if s.applies(v) and (h := s.to_html(v))]


# --------------------------------------------------------------------------------------------
# The units


PROVENANCE = Section("Provenance", bullets=lambda v: tb.provenance_lines(v.t["runs"]))
CONFIGURATIONS = Section("Configurations compared", note=tb.CONFIG_NOTE, head=tb.CONFIG_HEAD,
                         rows=lambda v: tb.configuration_rows(v.configs, v.label))
SCALE = Section(tb.SCALE_TITLE, note=lambda v: tb.scale_note(v.configs), head=tb.SCALE_HEAD,
                rows=lambda v: tb.scale_rows(v.configs, v.label), paragraph=lambda v: tb.scale_undeclared(v.configs),
                applies=lambda v: bool(tb.scale_rows(v.configs)))
MEASURED = Section(tb.MEASURED_HEAD, bullets=lambda v: tb.measured_lines(v.t))
SENSITIVITY = Section(tb.SENSITIVITY_TITLE, note=lambda v: tb.sensitivity_note(v.configs, v.label),
                      head=tb.SENSITIVITY_HEAD, rows=lambda v: tb.sensitivity_rows(v.configs, v.label),
                      applies=lambda v: bool(tb.linger_groups(v.configs)))
RESULTS = Section("Results per configuration", note=tb.SPREAD_NOTE, head=tb.RESULT_HEAD,
                  rows=lambda v: tb.result_rows(v.configs))
BYTES = Section("Bytes moved per configuration", note=BYTES_SPLIT_NOTE, head=tb.BYTES_HEAD,
                rows=lambda v: tb.bytes_rows(v.configs), applies=has_moves)
MORE_MOVES = Section(tb.MORE_MOVES_TITLE, note=tb.MORE_MOVES_NOTE, head=lambda v: tb.more_moves_head(),
                     rows=lambda v: tb.more_moves_rows(v.configs),
                     applies=lambda v: has_moves(v) and bool(tb.more_move_metrics()))
PROTOCOL = Section(tb.PROTOCOL_TITLE, note=lambda v: tb.protocol_note(), head=tb.PROTOCOL_HEAD,
                   rows=lambda v: tb.protocol_rows(v.configs), applies=has_moves)
ESTIMATES = Section(tb.ESTIMATE_TITLE, note=lambda v: tb.estimate_note(), head=tb.ESTIMATE_HEAD,
                    rows=lambda v: tb.estimate_rows(v.t["moves"], v.configs),
                    applies=lambda v: bool(tb.estimate_rows(v.t["moves"], v.configs)))
COSTS = Section(tb.COST_TITLE, note=lambda v: tb.cost_note(v.prices), head=tb.COST_HEAD,
                rows=lambda v: tb.cost_rows(v.prices, v.t["moves"], v.configs), applies=has_moves,
                empty=lambda v: not tb.cost_rows(v.prices, v.t["moves"], v.configs),
                empty_text="No move of these runs journaled its bytes and object-store requests (runs older than "
                           "the request counts, or a cluster without a journal the harness reads).")
HEADLINE_COSTS = Section(tb.HEADLINE_COST_TITLE, note=tb.HEADLINE_COST_NOTE, head=tb.HEADLINE_COST_HEAD,
                         rows=lambda v: tb.headline_cost_rows(v.prices, v.t["moves"], v.headline_cases()),
                         applies=lambda v: bool(v.headline_cases()))
CLIENTS = Section(ct.CLIENTS_TITLE, note=ct.CLIENTS_NOTE, head=ct.CLIENTS_HEAD,
                  rows=lambda v: ct.client_rows(v.t["moves"], v.t["latency"], v.t["runs"], v.label),
                  applies=lambda v: bool(ct.client_rows(v.t["moves"], v.t["latency"], v.t["runs"], v.label)))
CONSUMERS = Section(tb.CONSUMERS_TITLE, note=tb.CONSUMERS_NOTE, head=tb.CONSUMERS_HEAD,
                    rows=lambda v: tb.consumer_rows(v.t["consumers"], v.configs),
                    applies=lambda v: bool(v.t.get("consumers")))
LINK_FILL = Section("Link fill during moves", note=tb.LINK_FILL_NOTE, head=tb.LINK_FILL_HEAD,
                    rows=lambda v: tb.link_fill_rows(v.move_links, v.label),
                    empty=lambda v: not v.t["move_links"], empty_text=tb.NO_LINKS)
SAFETY = Section("Safety verdicts", note=tb.SAFETY_NOTE, head=tb.SAFETY_HEAD, rows=lambda v: tb.safety_rows(v.t),
                 bullets=lambda v: tb.safety_counts(v.t), verdict_cols=(2, 3, 4, 5, 6, 7, 8))
FAULTS = Section("Fault outages", note=tb.FAULT_NOTE, head=tb.FAULT_HEAD, rows=lambda v: tb.fault_rows(v.t)[0],
                 paragraph=lambda v: f"From {short_runs(tb.fault_rows(v.t)[1])}.",
                 applies=lambda v: bool(v.t["outages"]))
HOST = Section(tb.HOST_TITLE, note=tb.HOST_NOTE, head=tb.HOST_HEAD, rows=lambda v: tb.host_rows(v.configs),
               applies=lambda v: bool(v.configs))
MODEL = Section("Model", markdown=lambda v: model_markdown(v.t, v.notes, v.headline))

# summary.md's own units: every run, and every fault of every run
RUNS_HEAD = ["run", "system", "repetition", "sends", "acked", "fail", "info", "p99 ms", "max move s",
             "max unavailable s", "verdict", "failed checks / how it ended"]
RUNS = Section("Runs", head=RUNS_HEAD, rows=lambda v: [
    [r["run_key"], r["system"], repetition_text(r), r["sends"], r["acked"], r["send_fail"], r["send_info"],
     fmt_num(r["latency_p99_ms"]), fmt_num(r["max_move_seconds"]), fmt_num(r["max_unavailable_seconds"]),
     r["valid"], r["failed_checks"] or r.get("problems") or ""] for r in v.t["runs"]],
    paragraph=lambda v: f"Verdicts: {verdict_counts(r['valid'] for r in v.t['runs'])}.")
OUTAGES_NOTE = ("Per fault action: the worst affected partition's time without an ack, from 1 s before the "
                "fault to its first ack after recovery (the paired recovery action's end, or a failover a "
                "client saw), as summary.json's `outages`.")
OUTAGES_HEAD = ["run", "system", "fault", "broker", "partitions", "outage s", "recovered by", "recovery s"]
OUTAGES = Section("Fault outages", note=OUTAGES_NOTE, head=OUTAGES_HEAD, rows=lambda v: [
    [o["run_key"], o["system"], o["action"], MISSING if o["broker"] is None else o["broker"], o["partitions"],
     fmt_num(o["unavailable_seconds"]), tb.recovery_label(o), fmt_num(o["recovery_seconds"])]
    for o in v.t["outages"]], applies=lambda v: bool(v.t["outages"]))
MODELS = Section("Models", markdown=lambda v: model_markdown(v.t, v.notes, v.headline))

# The two documents, in order.
REPORT = [Headline(), PROVENANCE, CONFIGURATIONS, SCALE, MEASURED, RESULTS, SENSITIVITY, BYTES, MORE_MOVES, PROTOCOL,
          ESTIMATES, COSTS, HEADLINE_COSTS, CLIENTS, CONSUMERS, Figures(), LINK_FILL, HOST, SAFETY, FAULTS, MODEL]
SUMMARY = [PROVENANCE, CONFIGURATIONS, SCALE, RESULTS, SENSITIVITY, BYTES, MORE_MOVES, ESTIMATES, COSTS, CLIENTS, CONSUMERS, RUNS, OUTAGES, LINK_FILL,
           HOST, MODELS]

__all__ = ["REPORT", "SUMMARY", "Figures", "Headline", "Section", "View", "render_html", "render_markdown"]
