"""The live display of a run on the terminal (rich): phase, load, actions, leaders, fed with the
run's state; and each run's verdict line when it ends. (Not a move's progress: that is
move_progress.py.)"""
from __future__ import annotations

import time
from pathlib import Path

from bench.run.state import RunState
from bench.scenario import Scenario


class LiveDisplay:
    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.live = None
        self.title = ""
        self.sc: Scenario | None = None
        self._last = 0.0

    def begin(self, title: str, sc: Scenario) -> None:
        from rich.live import Live

        self.title, self.sc = title, sc
        self.live = Live(self._render(None), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self, st: RunState | None):
        from rich.table import Table

        t = Table(title=self.title, show_header=False, expand=False)
        t.add_column("k", style="bold")
        t.add_column("v")
        if st is None:
            t.add_row("phase", "starting")
            return t
        t.add_row("system", f"{st.sc.system.kind}, {st.sc.system.brokers} broker(s)")
        t.add_row("phase", st.phase)
        ld = st.load
        if st.load_started:
            el = min(time.time() - st.load_started, st.sc.workload.duration_s)
            t.add_row("load", f"{el:5.1f} / {st.sc.workload.duration_s:.0f} s")
        if ld:
            p99 = ld.get("p99_ms")
            t.add_row("producer", f"sent {ld['sent']}  acked {ld['acked']}  failed {ld['failed']}  "
                                  f"info {ld['info']}  {ld['rate']:.0f} msg/s (target {ld['target_rate']:.0f})  "
                                  f"p99 {p99:.1f} ms" if p99 is not None else
                                  f"sent {ld['sent']}  acked {ld['acked']}  {ld['rate']:.0f} msg/s")
        for a in st.actions:
            t.add_row(f"action {a.action_id}", f"t={a.at_s:g}s {a.kind}: {a.status} {a.detail}")
        with st.lock:
            md = dict(st.metadata)
        leaders = " ".join(f"{t_}-{p}:{m['leader']}" for (t_, p), m in sorted(md.items())[:12])
        if leaders:
            t.add_row("leaders", leaders)
        return t

    def update(self, st: RunState) -> None:
        now = time.time()
        if self.live is not None and now - self._last >= 0.2:
            self._last = now
            self.live.update(self._render(st))

    def end(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def print_result(self, run_dir: Path, summary: dict) -> None:
        checks = summary.get("checks", {})
        verdict = checks.get("valid")
        color = {True: "green", False: "red"}.get(verdict, "yellow")
        moves = ", ".join(f"{m['topic']}-{m['partition']} {m['move_seconds']:.2f}s" if isinstance(
            m.get("move_seconds"), (int, float)) else f"{m['topic']}-{m['partition']} ?" for m in summary.get("moves", []))
        self.console.print(f"[{color}]checks valid={verdict}[/{color}] failed={checks.get('failed')} "
                           f"moves: {moves or '-'}  -> {run_dir}")

    def close(self) -> None:
        self.end()
