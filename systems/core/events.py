"""Per-process event journal the harness reads: DIR/<process>/events.jsonl.

One JSON object per line with at least `ts` (unix seconds), `event` and the
emitting process (`broker` id or "controller"). Used for things the harness
must time or count that clients cannot see: ISR changes, reassignment progress
and bytes copied, move phase timings. Lines are flushed as written so a reader
(or a post-mortem after kill -9) sees them.
"""
from __future__ import annotations

import json
import os
import time


class EventLog:
    def __init__(self, path: str, source):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.path = path
        self.source = source
        self._f = open(path, "a", buffering=1)

    def emit(self, event: str, **fields) -> dict:
        rec = {"ts": time.time(), "event": event, "source": self.source, **fields}
        self._f.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
        return rec

    def close(self) -> None:
        self._f.close()


def read_events(cluster_dir: str) -> list[dict]:
    """All events of a cluster directory, ordered by time."""
    out = []
    for entry in sorted(os.listdir(cluster_dir)):
        path = os.path.join(cluster_dir, entry, "events.jsonl")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a torn last line after kill -9
    out.sort(key=lambda e: e["ts"])
    return out
