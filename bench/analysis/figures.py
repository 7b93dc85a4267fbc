"""Compatibility re-export until issue 27 is integrated: the figure blocks live in
bench/report/blocks.py (remove this module with the last importer)."""
from bench.report.blocks import *  # noqa: F401,F403
from bench.report.blocks import BLOCK, MEASUREMENTS, FiguresError, block_files, collect, figures, load_cpu_per_1000, render  # noqa: F401
