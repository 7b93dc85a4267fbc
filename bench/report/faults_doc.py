"""The fault suite's section of ``docs/faults.md``, regenerated from stored run summaries.

    python -m bench faults-doc [RESULTS ...] [--out docs/faults.md] [--stdout]

The suite is the scenario files ``workloads/scenarios/faults/*.yaml`` (built-in names
``faults/<stem>``). Every ``summary.json`` under the given result roots (default ``results``)
whose scenario is one of them counts as a run. Per (scenario, system): runs, acked, lost,
duplicated, reordered (sums over runs, from the checkers), the verdict, the measured outage (per
run the worst ``outages[].unavailable_seconds``; median and max across runs) and what happened
(the fault landed mid-move, how and after how long the affected partitions recovered, the move's
``move_seconds``). The section from ``## Fault suite`` to the next ``## `` heading is replaced;
the rest of the file is kept as written.
"""
from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.analysis.aggregate.discovery import provenance_of
from bench.check.outcome import run_ending_problems, run_verdict
from bench.check.safety import safety_counts, verdict_counts
from bench.report.format import commit_label
from bench.scenario import FAULT_RECOVERY, builtin_scenarios, expand, load_scenario
from bench.scenario.actions import SPECS
from systems.registry import NAMES as SYSTEMS
from bench.paths import ROOT

DOC = ROOT / "docs" / "faults.md"
HEADING = "## Fault suite"
BUNDLE_FILES = "docs/measurements/bundles/faults/files"  # the runs behind the section, in the repository


def suite() -> list[dict[str, Any]]:
    """The fault scenarios in file order: builtin name, scenario name, description, systems."""
    out = []
    for key, path in builtin_scenarios().items():
        if not key.startswith("faults/"):
            continue
        sc = load_scenario(path)
        systems = sorted({s.system.kind for _, s in expand(sc)}, key=SYSTEMS.index)
        out.append({"key": key, "name": sc.name, "description": sc.description, "systems": systems})
    return out


def find_runs(roots: Iterable[Path | str], names: set[str]) -> list[tuple[Path, dict[str, Any]]]:
    """(run directory, summary) of every stored run of a scenario in ``names``."""
    runs, seen = [], set()
    for root in roots:
        for p in sorted(Path(root).rglob("summary.json")):
            if p.resolve() in seen:  # overlapping roots
                continue
            seen.add(p.resolve())
            try:
                s = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(s, dict) and s.get("scenario") in names:
                runs.append((p.parent, s))
    return runs


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shown(d: Path) -> str:
    """A run directory as the doc names it: relative to the repository when inside it."""
    d = d.resolve()
    return str(d.relative_to(ROOT)) if d.is_relative_to(ROOT) else str(d)


def _run_facts(s: dict[str, Any]) -> dict[str, Any]:
    checks = s.get("checks") or {}
    outs = [o for o in s.get("outages") or [] if _num(o.get("unavailable_seconds"))]
    worst = max(outs, key=lambda o: o["unavailable_seconds"], default=None)
    moves = s.get("moves") or []
    return {
        "acked": (s.get("producer") or {}).get("acked") or 0,
        # None when the check could not count (no reads): never counted as 0
        **safety_counts(checks, ("lost", "duplicated", "corrupted", "reordered")),
        "verdict": run_verdict(s),
        "problems": run_ending_problems(s),
        "failed": checks.get("failed") or [],
        "outage": worst["unavailable_seconds"] if worst else None,
        "recovered_by": (f"failover to broker {worst['new_leader']}" if worst.get("new_leader") is not None
                         else worst.get("recovered_by")) if worst else None,
        "recovery_seconds": worst.get("recovery_seconds") if worst else None,
        "first_ack_seconds": worst.get("first_ack_seconds") if worst else None,
        "mid_move": any(o.get("during_moves") for o in s.get("outages") or []),
        "move_seconds": max((m["move_seconds"] for m in moves if _num(m.get("move_seconds"))), default=None)
        if moves and all(_num(m.get("move_seconds")) for m in moves) else None,
        "moves": len(moves),
    }


def _commit(s: dict[str, Any]) -> str:
    git = provenance_of(s).get("git") or {}
    return commit_label(git.get("commit"), git.get("dirty"))


def _spread(xs: list[float]) -> str:
    """``median (min-max)`` over the runs, in seconds."""
    if not xs:
        return "-"
    med, lo, hi = statistics.median(xs), min(xs), max(xs)
    return f"{med:.2f}" if lo == hi else f"{med:.2f} ({lo:.2f}-{hi:.2f})"


def _happened(facts: list[dict[str, Any]]) -> str:
    """E.g. "mid-move 3/3; recovered by restart_broker after 10.6 s, first ack 11.1 s after the
    fault; move_seconds 17.35" (medians over the runs)."""
    n = len(facts)
    parts = []
    moved = any(f["moves"] for f in facts)
    if moved:
        parts.append(f"mid-move {sum(f['mid_move'] for f in facts)}/{n}")
    how = Counter(f["recovered_by"] or "nothing" for f in facts)
    for by, k in how.most_common():
        mine = [f for f in facts if (f["recovered_by"] or "nothing") == by]
        text = f"recovered by {by}"
        secs = [f["recovery_seconds"] for f in mine if _num(f["recovery_seconds"])]
        if secs:
            text += f" after {statistics.median(secs):.1f} s"
        first = [f["first_ack_seconds"] for f in mine if _num(f["first_ack_seconds"])]
        if first:
            text += f", first ack {statistics.median(first):.1f} s after the fault"
        parts.append(text + (f" ({k}/{n} runs)" if k < n else ""))
    if moved:
        done = [f["move_seconds"] for f in facts if f["move_seconds"] is not None]
        if done:
            parts.append(f"move_seconds {statistics.median(done):.2f}"
                         + (f" ({len(done)}/{n} completed)" if len(done) < n else ""))
        else:
            parts.append("move not completed")
    return "; ".join(parts)


def _short(problem: str, limit: int = 110) -> str:
    """A problem's first line, cut to ``limit`` characters, ``|`` escaped: one table cell."""
    line = str(problem).strip().splitlines()[0] if str(problem).strip() else ""
    line = line if len(line) <= limit else line[:limit - 3].rstrip() + "..."
    return line.replace("|", "\\|")


def _verdict(facts: list[dict[str, Any]]) -> str:
    """``3 pass, 0 fail, 0 unknown``, naming the checks that failed and why a run was not a pass
    although its checks were (how it ended: bench/check/outcome.py), with how many runs each."""
    text = verdict_counts(f["verdict"] for f in facts)
    failed = sorted({name for f in facts for name in f["failed"]})
    why = Counter(_short(p) for f in facts if f["verdict"] != "pass" for p in f["problems"])
    notes = ([f"failed: {', '.join(failed)}"] if failed else []) + [f"{p} ({k})" for p, k in why.most_common()]
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _total(xs: list[Any]) -> Any:
    """A sum over runs; unknown if any run could not count."""
    return "unknown" if any(x is None for x in xs) else sum(xs)


def rows(scenarios: list[dict[str, Any]], runs: list[tuple[Path, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per (scenario, system) with at least one run, in suite and registry order."""
    out = []
    for sc in scenarios:
        for system in sc["systems"]:
            mine = [(d, s) for d, s in runs if s.get("scenario") == sc["name"] and s.get("system") == system]
            if not mine:
                continue
            facts = [_run_facts(s) for _, s in mine]
            out.append({
                "scenario": sc["key"], "system": system, "runs": len(mine),
                "acked": sum(f["acked"] for f in facts),
                **{k: _total([f[k] for f in facts]) for k in ("lost", "duplicated", "corrupted", "reordered")},
                "verdict": _verdict(facts),
                "outage": _spread([f["outage"] for f in facts if f["outage"] is not None]),
                "happened": _happened(facts),
                "dirs": [_shown(d) for d, _ in mine],
                "commits": sorted({_commit(s) for _, s in mine}),
                "dates": sorted(str(s.get("started_at"))[:10] for _, s in mine),
            })
    return out


def fault_kinds() -> list[str]:
    """One bullet per fault kind and the action that undoes it, in the words of their specs."""
    return [f"- `{kind}` / `{rec}`: {SPECS[kind].description} {SPECS[rec].description}"
            for kind, rec in FAULT_RECOVERY.items()]


def render(scenarios: list[dict[str, Any]], table: list[dict[str, Any]]) -> str:
    lines = [
        f"{HEADING} (`workloads/scenarios/faults/`, run with `python -m bench run`)",
        "",
        "Each scenario is a file the harness runs like any other (`python -m bench run faults/<name>`):",
        "a cluster, an idempotent acks=all producer load (Locust, `bench/run/load.py`), a timeline of",
        "actions where a fault is one action and its recovery another (the action specs,",
        "`bench/scenario/actions/`):",
        "",
        *fault_kinds(),
        "",
        "Then a verifying consumer reads every partition back, and the checkers users run judge the run",
        "(`bench/check/`). Every node runs on its own emulated link (brokers and controller 100mbit, the",
        "clients and the object store 1gbit; docs/cluster.md, \"Emulated links\"). Most faults land 1 s into a move",
        "that is slowed on purpose so there is a middle to hit: the copy system copies under a replication",
        "throttle (a third of the link), the tiered system copies its local tail (segments large enough",
        "that the tail takes seconds) under the same throttle, the shared system has the whole prefill as",
        "its un-uploaded tail (`wal_upload_threshold_bytes: 512MiB`, no background upload) and uploads it",
        "at a capped 8 MB/s.",
        "Whether the fault did land mid-move",
        "is measured, not assumed: the move was requested before the fault and its first ack on the new",
        "owner came after it (`outages[].during_moves` in summary.json).",
        "",
        "**Safety** (every run): lost = acked messages not read back in the partition they were acked",
        "on, duplicated = messages read at more than one offset, corrupted = messages whose value read",
        "back has another CRC-32 than the one sent (the verifying consumer also has librdkafka check",
        "each batch's CRC), reordered = a producer's messages read out of send order (the checkers",
        "`lost_writes`, `duplicates`, `corrupted`, `reordering`). A run's verdict is pass only if every",
        "check is valid and the run ended as its scenario planned (bench/check/outcome.py): a run whose",
        "checks pass is `unknown` when, say, the fault left a move not completed to the broker it asked",
        "for (the shared system's `kill-target`: the controller gives the partition to another live",
        "broker); the verdict cell says why. \"unknown\" in a count column: a run could not count (its",
        "read-back did not reach the end), never 0. **Outage**: per fault action, the longest gap",
        "between acks on a partition it affected (the partitions on the faulted broker or moving to or",
        "from it; every partition for the controller and the object store), in a window from 1 s before",
        "the fault to the first ack after the partition recovered: the end of the paired recovery action",
        "or, for a broker fault, a client-seen leader change to another live broker (a failover),",
        "whichever came first. The table gives the worst affected partition per run, median (min-max) over",
        "the runs; \"recovered by\" says which of the two ended it, and after how long from the fault.",
        "",
        "| scenario | systems | fault |",
        "|---|---|---|",
    ]
    for sc in scenarios:
        lines.append(f"| `{sc['key']}` | {', '.join(sc['systems'])} | {sc['description']} |")
    lines += ["", ("| scenario | system | runs | acked | lost | duplicated | corrupted | reordered | verdict "
                   "| outage s, median (min-max) | what happened |"),
              "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for r in table:
        lines.append(f"| `{r['scenario']}` | {r['system']} | {r['runs']} | {r['acked']} | {r['lost']} | "
                     f"{r['duplicated']} | {r['corrupted']} | {r['reordered']} | {r['verdict']} | {r['outage']} | "
                     f"{r['happened']} |")
    if not table:
        lines.append("| (no stored runs of the fault suite) | | | | | | | | | | |")
    missing = [f"`{sc['key']}` ({system})" for sc in scenarios for system in sc["systems"]
               if not any(r["scenario"] == sc["key"] and r["system"] == system for r in table)]
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}."]
    commits = sorted({c for r in table for c in r["commits"]})
    dates = sorted({d for r in table for d in r["dates"]})
    lines += [
        "",
        "Reproduce (then collect the bundle and regenerate this section):",
        "",
        "```sh",
        "for s in workloads/scenarios/faults/*.yaml; do .venv/bin/python -m bench run $s --set repetitions=3 --results results/faults; done",
        ".venv/bin/python -m bench figures collect results/faults --as faults   # the evidence bundle",
        f".venv/bin/python -m bench faults-doc {BUNDLE_FILES}",
        "```",
        "",
        "The table is made from the evidence bundle `docs/measurements/bundles/faults/` (each run's",
        "`summary.json` and resolved `scenario.yaml`, the sha256 of its history; bench/report/evidence.py);",
        "`python -m bench figures --check` regenerates this section from the bundle and fails if it differs.",
        "",
    ]
    if table:
        lines += [(f"Runs: {sum(r['runs'] for r in table)}, {dates[0]} to {dates[-1]}, commit(s) "
                   f"{', '.join(f'`{c}`' for c in commits)}. Run directories:"), ""]
        for r in table:
            lines.append(f"- `{r['scenario']}` {r['system']}: " + ", ".join(f"`{d}`" for d in r["dirs"]))
        lines.append("")
    lines.append("`tests/harness/test_faults.py` (part of `make test`) runs a few of these files through the same runner")
    lines.append("and checkers and asserts 0 lost / duplicated / reordered, the fault mid-move, and an outage measured.")
    return "\n".join(lines) + "\n"


def replace_section(doc: str, section: str) -> str:
    """``doc`` with its fault-suite section (heading to the next ``## ``) replaced by
    ``section``; inserted after the title when it has none."""
    lines = doc.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if start is None:
        at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
        return "".join(lines[:at]) + ("\n" if at else "") + section + "\n" + "".join(lines[at:]).lstrip("\n")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rest = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + rest if rest else "")


def section_of(doc: str) -> str | None:
    """The fault-suite section of ``doc`` as :func:`render` writes it (None if it has none)."""
    lines = doc.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end]).rstrip("\n") + "\n"


def stale(doc: Path = DOC, bundle: Path = ROOT / BUNDLE_FILES) -> list[str]:
    """What differs between the section of ``doc`` and what the bundled runs render ([] without a
    bundle: nothing to re-derive it from)."""
    if not bundle.is_dir():
        return []
    want = generate([str(bundle)], out=None)
    have = section_of(doc.read_text()) if doc.is_file() else None
    return [] if have == want else [f"{doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc}: the fault "
                                    f"suite section is not what {BUNDLE_FILES} renders (python -m bench faults-doc "
                                    f"{BUNDLE_FILES})"]


def generate(roots: list[str], out: Path | None = DOC) -> str:
    """Render the section from the runs under ``roots``; write it into ``out`` (unless None)."""
    scenarios = suite()
    runs = find_runs(roots, {sc["name"] for sc in scenarios})
    section = render(scenarios, rows(scenarios, runs))
    if out is not None:
        old = out.read_text() if out.is_file() else "# Faults\n"
        out.write_text(replace_section(old, section))
    return section


def cmd_faults_doc(args) -> int:
    missing = [r for r in args.results if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(f"no such results directory: {', '.join(missing)}")
    section = generate(args.results, None if args.stdout else Path(args.out))
    if args.stdout:
        print(section, end="")
    else:
        print(f"wrote the fault suite section of {args.out}")
    return 0
