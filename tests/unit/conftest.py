"""tests/unit: tests that start nothing - no broker, cluster, object store, Locust, Spark or
`python -m bench` process, no socket to a broker - and run in seconds. A test that needs one of
those belongs in tests/systems or tests/harness; the guard below says so instead of letting a
unit test start one."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.folders import mark_folder

HERE = Path(__file__).parent
# Programs and python -m modules of the project's own processes (the load, the brokers, the object
# store, Spark's JVM): a unit test starting one is in the wrong folder.
PROGRAMS = {"weed", "java", "locust", "kcat", "spark-submit"}
MODULES = ("bench", "systems", "workloads", "locust")


def pytest_collection_modifyitems(items):
    mark_folder(items, HERE, "unit")


def _project_process(args) -> bool:
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    argv = [os.fsdecode(a) for a in argv]
    if not argv:
        return False
    if os.path.basename(argv[0].split()[0]) in PROGRAMS:
        return True
    return any(a == "-m" and i + 1 < len(argv) and argv[i + 1].split(".")[0] in MODULES for i, a in enumerate(argv))


@pytest.fixture(autouse=True)
def starts_no_project_process(monkeypatch):
    real = subprocess.Popen._execute_child

    def guarded(self, args, *a, **kw):
        if _project_process(args):
            raise AssertionError(f"a unit test started {args!r}: move it to tests/systems or tests/harness")
        return real(self, args, *a, **kw)

    # Popen cleans up (pipes, file descriptors) when starting the child fails.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", guarded)
