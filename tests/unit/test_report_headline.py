"""The report's headline from model.json's ``headline`` (hand-written here): a table per case,
links x systems; a projection that did not pass its validation never shows a number."""
from __future__ import annotations

import re

from bench.report import build_report, headline_cell
from test_results_load import small_tables, write_aggregate

VALIDATED = {"case": "partition", "title": "One partition ingesting 100 MB/s: one day is 8.2 TB",
             "system": "replication", "system_label": "replication copy (Kafka)", "link_gbit_s": 1.0,
             "status": "validated", "value_s": 91800.0, "value_text": "25.5 h", "bytes_moved": 8.2e12,
             "error_pct": 4.1, "validations": ["size", "throttle"], "reason": None,
             "basis": "t = c + B / (e x T - r), c = 0.5 s, e = 0.9, B = 8.2 TB, T = 125 MB/s, r = 100 MB/s"}
# A not-validated entry that still carries a value: the report must not show it.
NOT_VALIDATED = {**VALIDATED, "system": "shared", "system_label": "shared storage (AutoMQ-style)",
                 "status": "not validated", "value_s": 7.77, "value_text": "7.77 s", "bytes_moved": 5.5e8,
                 "error_pct": 61.0, "validations": ["size"], "reason": "held-out error 61 % above the 25 % target",
                 "basis": "t = c + tail / U + open(objects)"}


def _report(tmp_path, model):
    # no model_fit row: the model figure's columns are the model's business, not the headline's
    agg = write_aggregate(tmp_path / "agg", small_tables(fits=False), model)
    out = build_report(agg, tmp_path / "rep")
    return out["markdown"].read_text(), out["html"].read_text()


def test_headline_opens_the_report_and_never_shows_a_number_not_validated(tmp_path):
    entries = [VALIDATED, NOT_VALIDATED,
               {**VALIDATED, "link_gbit_s": 10.0, "value_s": 9180.0, "value_text": "2.55 h", "error_pct": -3.2},
               {**VALIDATED, "case": "cluster", "title": "A 20-broker cluster rebalanced", "value_text": "3.1 d"},
               {**VALIDATED, "case": "cluster", "title": "A 20-broker cluster rebalanced", "link_gbit_s": 10.0,
                "status": "infeasible", "value_s": None, "value_text": None, "reason": "300 MB/s >= 125 MB/s"}]
    md, html = _report(tmp_path, {"notes": {}, "headline": entries, "leaves_out": "It leaves out replication."})
    # After the title and the synthetic-runs banner, before everything else.
    sections = re.findall(r"^## (.+)$", md, re.M)
    assert sections[0] == "Headline" and sections[1] == "Provenance"
    assert md.index("SYNTHETIC") < md.index("## Headline")
    head = md.split("## Headline", 1)[1].split("\n## ", 1)[0]
    # one short table: a row per case and link, a column per system; reasons under it, not in it
    rows = [r for r in head.splitlines() if r.startswith("|")]
    assert rows == ["| case | replication copy (Kafka) | shared storage (AutoMQ-style) |", "|---|---|---|",
                    "| 8.2 TB partition @ 1 Gbit/s | 25.5 h | not validated |",
                    "| 8.2 TB partition @ 10 Gbit/s | 2.55 h | – |",
                    "| cluster scale-out @ 1 Gbit/s | 3.1 d | – |",
                    "| cluster scale-out @ 10 Gbit/s | infeasible | – |"]
    notes = head.split("### Why each cell reads as it does", 1)[1]
    assert ("- **shared storage (AutoMQ-style)**, 8.2 TB partition @ 1 Gbit/s: not validated: held-out error 61 % "
            "above the 25 % target.") in notes
    assert "- **replication copy (Kafka)**, cluster scale-out @ 10 Gbit/s: infeasible: 300 MB/s >= 125 MB/s." in notes
    assert ("replication copy (Kafka), 8.2 TB partition @ 1 Gbit/s: t = c + B / (e x T - r), c = 0.5 s, e = 0.9, "
            "B = 8.2 TB, T = 125 MB/s, r = 100 MB/s.") in head
    assert "What \"hours at 1 Gbps\" leaves out." in head
    # The not-validated entry's value (and its bytes) appear nowhere, in neither format.
    for text in (md, html):
        assert "7.77" not in text and "550 MB" not in text
    assert "<h2>Headline</h2>" in html and "<td class=''>not validated</td>" in html and "<td class=''>infeasible</td>" in html
    assert html.index("<h2>Headline</h2>") < html.index("<h2>Provenance</h2>")
    # The old line from the projection table is gone; the measured lines stay, further down.
    assert "Projected 8.2 TB move" not in md
    assert "## Measured at a glance" in md and "measured move(s)" in md


def test_an_aggregate_without_headline_says_it_predates_it(tmp_path):
    md, html = _report(tmp_path, {"notes": {}})
    head = md.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert "predates the headline" in head and "python -m bench aggregate" in head and "|" not in head
    assert "predates the headline" in html
    md, _ = _report(tmp_path / "empty", {"notes": {}, "headline": []})
    assert "lists no headline case" in md.split("## Headline", 1)[1].split("\n## ", 1)[0]


def test_headline_cell():
    assert headline_cell(VALIDATED) == "25.5 h"
    assert headline_cell({**VALIDATED, "value_text": None}) == "25.5 h"
    assert headline_cell(NOT_VALIDATED) == "not validated"
    assert headline_cell({**NOT_VALIDATED, "reason": "extrapolation: the move's rate ..."}) == \
        "not validated (extrapolation)"
    assert headline_cell({**NOT_VALIDATED, "status": "infeasible"}) == "infeasible"
