"""The workload's consumers during a run (scenario section ``consumers``): where each group
starts, the Locust consumer process (``python -m bench.run.load`` with a consumer spec, see
:func:`bench.run.load.drive_consumers`), and its end.

Order in a run: after the prefill, each group's start offsets are committed (``tail``: the high
watermark; ``catch_up``: ``start_lag_bytes`` behind it, in prefill records), the consumer process
starts and reports ``ready`` once every group has all its partitions assigned; only then do the
producers start, so every acked message of the load is one each group must deliver. Catch-up
readers keep their partitions paused until the load has started (SIGUSR2), so their catch-up
runs while the load produces and the actions happen. After the load (and the moves), SIGUSR1 asks the consumers to read on up to the high watermarks and leave.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.run import clients
from bench.run.load import commit_offsets, high_watermarks, json_lines, stop_child
from bench.scenario import Scenario

READY_TIMEOUT_S = 60.0  # every group joined and assigned
DRAIN_S = 60.0  # after the load: read on up to the high watermarks for at most this long
# finish(): the drain, plus reading the high watermarks (30 s at most) and the members' close
FINISH_TIMEOUT_S = DRAIN_S + 60.0
# The process leaves by itself this long after the load should have ended (a runner gone by kill -9)
ORPHAN_SLACK_S = 600.0


class ConsumerError(RuntimeError):
    pass


def group_id(sc: Scenario, label: str, index: int) -> str:
    # The topic prefix keeps a run's groups apart from an external cluster's own.
    return f"{sc.topic_prefix}{label}-{index}"


def plan(sc: Scenario, hw: dict[tuple[str, int], int], prefilled: dict[tuple[str, int], dict]) -> dict[str, Any]:
    """Per group: its set, mode, start offsets and members (one entry per Locust user)."""
    groups: dict[str, dict[str, Any]] = {}
    members: list[dict[str, Any]] = []
    for cs in sc.consumers:
        topics = sc.consumer_topics(cs)
        tps = [(t, p) for t, p in sc.partitions() if t in topics]
        start = {}
        for tp in tps:
            if cs.mode == "tail":
                start[tp] = hw[tp]
                continue
            pre = prefilled.get(tp) or {}
            first = int(pre.get("first_offset") or 0)
            if cs.start_lag_bytes is None or not pre.get("messages"):
                start[tp] = first
            else:
                record = pre["bytes"] / pre["messages"]
                start[tp] = max(first, hw[tp] - math.ceil(cs.start_lag_bytes / record))
        for g in range(cs.groups):
            gid = group_id(sc, cs.label, g)
            groups[gid] = {"set": cs.label, "mode": cs.mode, "assignment": cs.assignment, "members": cs.members,
                           "topics": topics, "start": {f"{t}-{p}": off for (t, p), off in start.items()},
                           "backlog": {f"{t}-{p}": hw[(t, p)] - start[(t, p)] for t, p in tps}}
            for m in range(cs.members):
                mine = tps[m::cs.members] if cs.assignment == "assign" else None
                members.append({"group": gid, "member": f"m{m}", "set": cs.label, "topics": topics,
                                "wait_for_go": cs.mode == "catch_up",
                                "partitions": [list(tp) for tp in (mine if mine is not None else tps)],
                                "start": [[t, p, start[(t, p)]] for t, p in tps],
                                "assign": None if mine is None else [[t, p, start[(t, p)]] for t, p in mine]})
    return {"groups": groups, "members": members}


class ConsumerProcess:
    """The Locust consumer process of one run, stopped by its PID."""

    def __init__(self, sc: Scenario, bootstrap: str, run_dir: Path, logs: Path, root: Path,
                 on_event: Callable[[str, dict[str, Any], float], None]) -> None:
        self.sc, self.bootstrap, self.dir, self.logs, self.root = sc, bootstrap, run_dir, logs, root
        self.on_event = on_event
        self.proc: subprocess.Popen | None = None
        self.ready = threading.Event()
        self.finished: dict[str, Any] | None = None
        self.error: str | None = None
        self.plan: dict[str, Any] = {}

    @property
    def history_path(self) -> Path:
        return self.dir / ".history-consume.parquet"

    def start(self, cluster: Any, prefilled: dict[tuple[str, int], dict], stop: threading.Event) -> dict[str, Any]:
        """Commit the groups' start offsets, start the process, wait for ``ready`` (bounded).
        ``cluster``: told the groups' ids (a cluster the harness did not start deletes them at
        stop)."""
        sc = self.sc
        tps = sorted({(t, p) for cs in sc.consumers for t, p in sc.partitions() if t in sc.consumer_topics(cs)})
        hw = high_watermarks(self.bootstrap, tps, client=sc.system.client)
        self.plan = plan(sc, hw, prefilled)
        cluster.prepare_groups(list(self.plan["groups"]))
        for gid, g in self.plan["groups"].items():
            if g["assignment"] == "group":
                offsets = {(t, int(p)): off for (t, p), off in
                           ((k.rsplit("-", 1), off) for k, off in g["start"].items())}
                commit_offsets(self.bootstrap, gid, offsets, client=sc.system.client)
        spec = {"bootstrap": self.bootstrap, "history_path": str(self.history_path), "members": self.plan["members"],
                "client": clients.plain(sc.system.client), "drain_s": DRAIN_S, "ready_timeout_s": READY_TIMEOUT_S,
                "max_s": READY_TIMEOUT_S + sc.workload.duration_s + FINISH_TIMEOUT_S + ORPHAN_SLACK_S}
        spec_path = self.logs / "consume-spec.json"
        spec_path.write_text(json.dumps(spec, indent=2))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = str(self.root) + os.pathsep + env.get("PYTHONPATH", "")
        err = open(self.logs / "consume.log", "ab")
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "bench.run.load", str(spec_path)], cwd=self.root,
                                         stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        finally:
            err.close()
        reader = threading.Thread(target=self._read, name="consume-reader", daemon=True)
        reader.start()
        deadline = time.time() + READY_TIMEOUT_S + 15
        while not self.ready.is_set():
            if self.proc.poll() is not None:
                raise ConsumerError(f"consumer process exited with code {self.proc.returncode} before it was "
                                    f"ready: {self.error or 'see ' + str(self.logs / 'consume.log')}")
            if time.time() > deadline or stop.is_set():
                raise ConsumerError(f"consumers not ready within {READY_TIMEOUT_S:.0f} s")
            self.ready.wait(0.1)
        return self.plan

    def _read(self) -> None:
        for msg in json_lines(self.proc.stdout, self.logs / "consume.jsonl"):
            ev = msg.get("event")
            if ev == "ready":
                self.on_event("ready", {**msg, "groups": self.plan["groups"]}, float(msg["ts"]))
                self.ready.set()
            elif ev == "error":
                self.error = msg.get("error")
            elif ev == "finished":
                self.finished = msg
                self.on_event("finished", msg, float(msg["ts"]))

    def _signal(self, sig: int) -> bool:
        p = self.proc
        if p is None or p.poll() is not None:
            return False
        try:
            os.kill(p.pid, sig)
            return True
        except ProcessLookupError:  # exited since the poll
            return False

    def go(self) -> None:
        """The load started: catch-up readers start reading."""
        self._signal(signal.SIGUSR2)

    def finish(self, timeout_s: float = FINISH_TIMEOUT_S) -> str | None:
        """Read on up to the high watermarks, then leave (bounded). None if all went well, else
        what went wrong (the run's history keeps whatever was delivered)."""
        p = self.proc
        if self._signal(signal.SIGUSR1):
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.stop()
                return f"the consumer process did not finish within {timeout_s:.0f} s (stopped)"
        if p is not None and p.returncode not in (0, None):
            return (f"the consumer process exited with code {p.returncode}: "
                    f"{(self.finished or {}).get('error') or self.error or 'see ' + str(self.logs / 'consume.log')}")
        if self.finished is None:
            return "the consumer process ended without its finished line"
        return None

    def stop(self) -> None:
        stop_child(self.proc)
