"""Compatibility re-export until issue 27 is integrated: the report is bench/report/ (remove this
module with the last importer)."""
from bench.report import DEFAULT_REPORT, ReportError, build_report, headline_cases, headline_cell, load_tables  # noqa: F401
from bench.report.figures import phase_bars  # noqa: F401
