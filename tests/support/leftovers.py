"""What a test session's clusters left behind on the machine: network namespaces and links named
``rb<cluster id>-...`` (bench/run/network.py). Other sessions may run clusters on the same machine
at the same time (other worktrees, a benchmark); their networks are told apart by the processes
still using them: a cluster's processes name its directory on their command line, and the cluster
id is the hash of that directory."""
from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from bench.run.network import PREFIX, cluster_id
from tests.support.clients import network_names

ID_LEN = len(PREFIX) + 6  # "rb" + 6 hex digits of the directory's hash


def _live_cluster_dirs() -> dict[str, str]:
    """Cluster id -> directory, for every directory (or its parent) a running process names."""
    out: dict[str, str] = {}
    for p in psutil.process_iter(["cmdline"]):
        for arg in p.info["cmdline"] or []:
            path = arg.split("=", 1)[-1]
            if path.startswith("/"):
                for d in (path, os.path.dirname(path)):
                    out[f"{PREFIX}{cluster_id(d)}"] = d
    return out


def _ours(names: list[str], roots: list[Path]) -> list[str]:
    """The names not explained by a cluster of another session still running."""
    live = _live_cluster_dirs()
    foreign = {cid for cid, d in live.items()
               if not any(Path(d).is_relative_to(r) for r in roots)}
    return [n for n in names if n[:ID_LEN] not in foreign]


def networks_left(before: set[str], roots: list[Path], settle_s: float = 5.0) -> list[str]:
    """Network objects made since ``before`` by clusters whose directories are under ``roots``
    (or by no running process at all), still there ``settle_s`` after a first look (another
    session's cluster may be between its network and its processes)."""
    left = _ours(sorted(set(network_names(PREFIX)) - before), roots)
    if left:
        time.sleep(settle_s)
        now = set(network_names(PREFIX))
        left = _ours([n for n in left if n in now], roots)
    return left
