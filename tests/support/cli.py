"""The project's command line as a user runs it: ``python -m bench ...`` in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m bench ARGS`` from the project's root, output captured as text (rich tables
    unfolded to 300 columns)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300")
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
