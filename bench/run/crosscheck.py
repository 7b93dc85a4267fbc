"""Does the protocol-only driver measure what the built-in one does? For each of the harness's own
systems and each scenario: the built-in runs (the harness starts the cluster and reads its
journals), then the same scenario against a cluster started with ``python -m bench cluster start``
as an external system (bootstrap address and kill / restart commands only), then per
configuration the medians of move_seconds and of the faults' unavailable_seconds side by side.

Both sides write the prefill at the links' own rates and start the load right after it (the
built-in runs with ``prefill.fast_links: false``): the harness cannot shape or watch the links of a
cluster it does not start, and the state at a move (a shared broker's un-uploaded tail) depends on
how the prefill went.

A pair agrees when the verdicts are the same and the medians differ by at most 10 %, or by at most
the external view's time resolution (its metadata poll): the only thing the external driver
cannot see that the built-in one can is the brokers' own record of the leader change.

    python -m bench crosscheck [--scenarios reassign-one,broker-loss] [--repetitions 3]
                               [--set KEY=VALUE ...] [--out results/crosscheck/<ts>]
    python -m bench crosscheck --from results/crosscheck/<ts> [--scenarios ...]   # compare stored runs again
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.check.outcome import run_verdict
from bench.history.names import POLL_INTERVAL_S
from bench.run import runner
from bench.run.move_progress import THROTTLE_KEYS
from bench.scenario import load_scenario, resolve_scenario, to_external
from systems.registry import LAUNCHED

TOLERANCE = 0.10
DEFAULT_SCENARIOS = ("reassign-one", "broker-loss")


def _bench(*args: str, timeout: float = 180) -> str:
    res = subprocess.run([sys.executable, "-m", "bench", *args], cwd=runner.ROOT, capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        raise runner.RunError(f"bench {' '.join(args)} exited {res.returncode}: {res.stderr.strip()[-500:]}")
    return res.stdout


def _cluster_start(sc, cluster_dir: Path) -> str:
    """``bench cluster start`` with the built-in run's links and settings; its bootstrap."""
    cfg = {k: v for k, v in runner.broker_config(sc).items() if k not in THROTTLE_KEYS}  # the run sets those
    args = ["cluster", "start", "--dir", str(cluster_dir), "--system", sc.system.kind,
            "--brokers", str(sc.system.brokers)]
    for k, v in cfg.items():
        args += ["--config", f"{k}={v}"]
    net = sc.network
    for flag, rate in (("--link-rate", net.link_rate), ("--object-store-link-rate", net.object_store_link_rate),
                       ("--client-link-rate", net.client_link_rate)):
        if rate:
            args += [flag, rate]
    if sc.object_store_latency() not in (None, "0ms"):
        args += ["--object-store-latency", sc.object_store_latency()]
    out = _bench(*args)
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("bootstrap:"))


def _measures(summary: dict[str, Any]) -> dict[str, Any]:
    moves = [m["move_seconds"] for m in summary.get("moves", [])]
    outs = [o["unavailable_seconds"] for o in summary.get("outages", [])]
    return {"valid": {"pass": True, "fail": False}.get(run_verdict(summary), "unknown"),
            "move_seconds": max(moves) if moves and None not in moves else None,
            "unavailable_seconds": max(outs) if outs and None not in outs else None}


def _median(xs: list[Any]) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def compare(builtin: list[dict], external: list[dict]) -> dict[str, Any]:
    """Per configuration (run id without repetition): verdicts and medians of both, and whether
    they agree."""
    def group(runs: list[dict]) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for s in runs:
            out.setdefault(str(s.get("config_id") or s.get("run_id")), []).append(s)
        return out

    b, e = group(builtin), group(external)
    rows = []
    for cfg in sorted(set(b) | set(e)):
        mb, me = [_measures(s) for s in b.get(cfg, [])], [_measures(s) for s in e.get(cfg, [])]
        row: dict[str, Any] = {"config": cfg, "runs": [len(mb), len(me)],
                               "verdicts": [sorted({str(m["valid"]) for m in mb}), sorted({str(m["valid"]) for m in me})]}
        agree = row["verdicts"][0] == row["verdicts"][1] and bool(mb) and bool(me)
        for key in ("move_seconds", "unavailable_seconds"):
            x, y = _median([m[key] for m in mb]), _median([m[key] for m in me])
            if x is None and y is None:
                continue
            ok = x is not None and y is not None and abs(y - x) <= max(TOLERANCE * x, POLL_INTERVAL_S)
            row[key] = {"built_in": x, "as_external": y, "ratio": (y / x if x and y is not None else None),
                        "agrees": ok}
            agree = agree and ok
        row["agrees"] = agree
        rows.append(row)
    return {"tolerance": TOLERANCE, "resolution_s": POLL_INTERVAL_S, "configs": rows,
            "agrees": bool(rows) and all(r["agrees"] for r in rows)}


def crosscheck(out: Path, scenarios: tuple[str, ...] = DEFAULT_SCENARIOS, repetitions: int = 3,
               overrides: tuple[str, ...] = (), systems: tuple[str, ...] = LAUNCHED, progress: bool = False,
               say=print) -> dict[str, Any]:
    result: dict[str, Any] = {"scenarios": {}}
    for name in scenarios:
        path = resolve_scenario(name)
        result["scenarios"][name] = {}
        for system in systems:
            # The prefill as on a cluster whose links the harness does not shape: at the links' own
            # rates, the load right after. Otherwise the state at the move differs between the two
            # sides (a shared broker's un-uploaded tail depends on when its upload timer last fired).
            sc = load_scenario(path, [*overrides, f"system.kind={system}", f"repetitions={repetitions}",
                                      "prefill.fast_links=false"])
            base = out / name / system
            say(f"{name} / {system}: built-in runs")
            builtin = runner.run_scenario(sc, out_dir=base / "built-in", progress=progress)
            cluster_dir = (base / "cluster").resolve()  # the commands run from wherever the runner does
            say(f"{name} / {system}: bench cluster start --dir {cluster_dir}")
            bootstrap = _cluster_start(sc, cluster_dir)
            try:
                # kill -9 from the shell, at once: `bench cluster kill-broker` would first spend half a
                # second starting Python, and a fault half a second late meets the producers' retry
                # timers in another phase than the built-in run's (the gap it causes differs by that).
                ext, notes = to_external(sc, bootstrap, label=f"{system} cluster (bench cluster start)", commands={
                    "kill_broker": f"kill -9 $(cat {cluster_dir}/run/broker-{{broker}}.pid)",
                    "restart_broker": f"{sys.executable} -m bench cluster restart-broker --dir {cluster_dir} "
                                      f"--broker {{broker}}"})
                say(f"{name} / {system}: as an external cluster at {bootstrap}")
                external = runner.run_scenario(ext, out_dir=base / "as-external", progress=progress)
            finally:
                _bench("cluster", "stop", "--dir", str(cluster_dir))
            cmp = compare([s for _, s in builtin], [s for _, s in external])
            cmp["notes"] = notes
            result["scenarios"][name][system] = cmp
    result["agrees"] = all(c["agrees"] for per in result["scenarios"].values() for c in per.values())
    (out / "crosscheck.json").write_text(json.dumps(result, indent=2))
    return result


def recompare(out: Path, scenarios: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The comparison again from the runs stored under ``out`` (only ``scenarios`` if given),
    written to ``out/crosscheck.json``: what ``crosscheck`` wrote, without running anything."""
    result: dict[str, Any] = {"scenarios": {}}
    for sdir in sorted(p for p in out.iterdir() if p.is_dir()):
        if scenarios and sdir.name not in scenarios:
            continue
        for system_dir in sorted(p for p in sdir.iterdir() if p.is_dir()):
            sides = [[json.loads(f.read_text()) for f in sorted((system_dir / side).rglob("summary.json"))]
                     for side in ("built-in", "as-external")]
            if all(sides):
                result["scenarios"].setdefault(sdir.name, {})[system_dir.name] = compare(*sides)
    if not result["scenarios"]:
        raise runner.RunError(f"no crosscheck runs under {out}")
    result["agrees"] = all(c["agrees"] for per in result["scenarios"].values() for c in per.values())
    (out / "crosscheck.json").write_text(json.dumps(result, indent=2))
    return result


def print_result(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"built-in vs external (protocol only): medians; agree = same verdicts and within "
                    f"{TOLERANCE:.0%} or {POLL_INTERVAL_S:g} s")
    for col in ("scenario", "system", "configuration", "runs", "verdicts", "move s built-in / external",
                "unavailable s built-in / external", "agree"):
        t.add_column(col, overflow="fold")

    def pair(r: dict, key: str) -> str:
        v = r.get(key)
        if not v:
            return "-"
        fmt = lambda x: "?" if x is None else f"{x:.2f}"  # noqa: E731
        ratio = f" (x{v['ratio']:.2f})" if v.get("ratio") else ""
        return f"{fmt(v['built_in'])} / {fmt(v['as_external'])}{ratio}"

    for name, per in result["scenarios"].items():
        for system, cmp in per.items():
            for r in cmp["configs"]:
                t.add_row(name, system, r["config"].removeprefix(name).strip("_") or "-",
                          f"{r['runs'][0]} / {r['runs'][1]}", f"{','.join(r['verdicts'][0])} / {','.join(r['verdicts'][1])}",
                          pair(r, "move_seconds"), pair(r, "unavailable_seconds"),
                          "[green]yes[/green]" if r["agrees"] else "[red]no[/red]")
    Console().print(t)
