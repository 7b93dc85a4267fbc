"""Presentation of the aggregate (bench/analysis/ only computes): the comparison report
(render.py: `python -m bench report`), summary.md (summary.py), both built from the units of
sections.py (tables.py, figures.py, model_text.py; number formatting in format.py); the README's
and docs' figure blocks (blocks.py: `python -m bench figures`) and the fault suite's doc
(faults_doc.py: `python -m bench faults-doc`)."""

from bench.report.model_text import headline_cases, headline_cell
from bench.report.render import DEFAULT_REPORT, ReportError, build_report, load_tables

__all__ = ["DEFAULT_REPORT", "ReportError", "build_report", "headline_cases", "headline_cell", "load_tables"]
