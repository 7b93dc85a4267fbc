"""The README's and docs' measured figures (figure blocks), reproduced from small extracts of
stored runs.

    python -m bench figures collect SOURCE [SOURCE ...] --as NAME   # -> docs/measurements/NAME.json
    python -m bench figures                                         # rewrite every figure block
    python -m bench figures --check                                 # exit 1 naming every stale block

An extract is a small JSON file kept in the repository, made from one of three sources:

- **runs**: run summaries (``summary.json``) under SOURCE (a results root, a scenario's run
  directory, or a suite directory whose ``suite.json`` lists its runs). Per configuration
  (``config_id``, or the run id of a summary written before repetitions existed) the extract
  keeps the run ids, each run's provenance and only the metrics the README quotes, and pools
  the repetitions into median, min, max and n.
- **model**: an aggregate's ``model.json`` (``results/aggregate/model.json``): the fitted models,
  every held-out check (its runs on both sides) and the headline; rendered as the checks and
  the headline with their validation errors.
- **crosscheck**: a ``bench crosscheck`` directory's ``crosscheck.json``: per scenario, system and
  configuration the built-in and the external (protocol-only) medians and whether they agree,
  with the provenance of the runs under that directory.
- **benchmark**: a pytest-benchmark JSON file (``--benchmark-json`` or a saved baseline in
  ``.benchmarks/``): its commit_info, machine, and per benchmark the median, min, max, rounds
  and its scalar extra_info.

README.md and the pages under docs/ (:func:`block_files`) hold one block per extract between
``<!-- figures:NAME begin -->`` and ``<!-- figures:NAME end -->``; rendering replaces what is between the markers with what the
extract says and nothing else, so a figure in a block always has a stored run behind it.
"""
from __future__ import annotations

import fnmatch
import json
import math
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.check.outcome import run_verdict
from bench.check.safety import safety_counts
from bench.report import evidence
from bench.check.summary import load_cpu_s_per_1000
from bench.report.model_text import check_unit, check_values
from bench.paths import MEASUREMENTS, ROOT

BLOCK = re.compile(r"(<!-- figures:(?P<name>[A-Za-z0-9._-]+) begin -->\n)(?P<body>.*?)(<!-- figures:(?P=name) end -->)",
                   re.DOTALL)
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class FiguresError(Exception):
    pass


def block_files(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/**/*.md holding a figure block (the default files to render)."""
    candidates = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [f for f in candidates if f.is_file() and BLOCK.search(f.read_text(encoding="utf-8"))]


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _spread(xs: Iterable[Any]) -> dict[str, Any] | None:
    xs = [float(x) for x in xs if _num(x)]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


# -- runs: summaries -> per-configuration figures ---------------------------------------------

def find_summaries(sources: Iterable[Path | str]) -> list[tuple[Path, dict[str, Any]]]:
    """(run directory, summary) of every run under the sources, each once, in source order. A
    suite directory (``suite.json`` with ``runs``) names its runs as paths from the directory the
    suite ran in, ``results/<scenario>/...``; they are looked up there or next to the suite."""
    dirs: list[Path] = []
    for src in map(Path, sources):
        if not src.exists():
            raise FiguresError(f"{src}: no such file or directory")
        suite = src / "suite.json"
        if suite.is_file():
            root = src.resolve().parents[1]  # <root>/suite-<name>/<ts>
            for r in json.loads(suite.read_text()).get("runs") or []:
                p = Path(r)
                # as written, else its tail (<scenario>/<ts>/<run_id>) under the suite's root
                tails = [root / Path(*p.parts[k:]) for k in range(1, len(p.parts))]
                dirs.append(next((d for d in [p, *tails] if d.is_dir()), p))
        else:
            dirs += [p.parent for p in sorted(src.rglob("summary.json"))]
    out, seen = [], set()
    for d in dirs:
        if d.resolve() in seen:
            continue
        seen.add(d.resolve())
        p = d / "summary.json"
        if not p.is_file():
            raise FiguresError(f"{d}: no summary.json")
        out.append((d, json.loads(p.read_text())))
    if not out:
        raise FiguresError(f"no run summaries under {', '.join(map(str, sources))}")
    return out


def provenance_facts(s: dict[str, Any]) -> dict[str, Any]:
    """date, machine {cpus, mem_gib, kernel}, commit, dirty, links_emulated of a summary, from its
    ``provenance`` or, in a summary written before that existed, ``git_commit`` / ``machine`` /
    ``started_at`` (dirty unknown: None)."""
    p = s.get("provenance")
    if p:
        m, g = p.get("machine") or {}, p.get("git") or {}
        return {"date": p.get("date"), "machine": {k: m.get(k) for k in ("cpus", "mem_gib", "kernel")},
                "commit": g.get("commit"), "dirty": g.get("dirty"), "links_emulated": p.get("links_emulated")}
    m = s.get("machine") or {}
    kernel = re.match(r"Linux-([^-]+(?:-[^-]+)*?)-x86_64", m.get("platform") or "")
    return {"date": s.get("started_at"),
            "machine": {"cpus": m.get("cpus"), "mem_gib": m.get("mem_gib"), "kernel": kernel[1] if kernel else None},
            "commit": s.get("git_commit"), "dirty": None,
            "links_emulated": (s.get("params") or {}).get("link_rate") is not None}


def _median(xs: list[Any]) -> float | None:
    xs = [x for x in xs if _num(x)]
    return statistics.median(xs) if xs else None


def _moved(m: dict[str, Any]) -> float | None:
    """A move's bytes between brokers and to object storage; None where no journal counted them
    (a cluster the harness did not start)."""
    ib, ob = m.get("bytes_moved_inter_broker"), m.get("bytes_moved_objstore")
    return None if ib is None and ob is None else (ib or 0) + (ob or 0)


def run_metrics(s: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run that the README quotes (None where the run has none)."""
    moves = s.get("moves") or []
    checks = s.get("checks") or {}
    lat = {a.get("action_id"): a for a in (checks.get("latency") or {}).get("actions") or []}
    during = [((lat.get(m.get("action_id")) or {}).get("all") or {}).get("during", {}).get("p99_ms") for m in moves]
    moved = [_moved(m) for m in moves]
    move_ids = {m.get("action_id") for m in moves}
    cons = [a for a in ((s.get("consumers") or {}).get("actions") or []) if a.get("action_id") in move_ids]
    return {
        "move_seconds": _median([m.get("move_seconds") for m in moves]),
        "partition_bytes": _median([m.get("partition_bytes") for m in moves]),
        # what the leader told a new replica to copy (tiered storage: the local tail; else null)
        "copy_bytes_at_request": _median([m.get("copy_bytes_at_request") for m in moves]),
        "bytes_moved": _median(moved),
        "unavailable_seconds": max((m["unavailable_seconds"] for m in moves if _num(m.get("unavailable_seconds"))),
                                   default=None),
        "p99_during_move_ms": max((x for x in during if _num(x)), default=None),
        "outage_seconds": max((o["unavailable_seconds"] for o in s.get("outages") or []
                               if _num(o.get("unavailable_seconds"))), default=None),
        "produce_p99_ms": ((s.get("producer") or {}).get("latency_ms") or {}).get("p99"),
        "acked": (s.get("producer") or {}).get("acked"),
        "acked_msgs_per_s": (s.get("producer") or {}).get("rate_msgs_per_s"),
        "load_cpu_percent": (s.get("cpu") or {}).get("load"),
        "load_cpu_s_per_1000_msgs": load_cpu_s_per_1000(s.get("cpu"), s.get("producer")),
        # consumer groups during the moves (summary.json's consumers; bench/check/consumers.py)
        "e2e_p99_during_move_ms": max((x for a in cons if _num(x := ((a.get("end_to_end_ms") or {})
                                                                   .get("during") or {}).get("p99_ms"))), default=None),
        "consumer_gap_seconds": max((a["gap_seconds"] for a in cons if _num(a.get("gap_seconds"))), default=None),
        "catch_up_during_move_bytes_per_s": _median([(a.get("catch_up_bytes_per_s") or {}).get("during") for a in cons]),
        # acked messages lost (by partition), duplicated, corrupted: None where the check could not count
        **safety_counts(checks),
        # the estimate made before each move and its error against move_seconds (runs that made
        # estimates only: a summary from before them derives as it did)
        **({"estimate_seconds": _median([m.get("estimate_seconds") for m in moves]),
            "estimate_error_pct": _median([m.get("estimate_error_pct") for m in moves])}
           if any("estimate_seconds" in m or "estimate_error" in m for m in moves) else {}),
        # what the load's producers met at the brokers during each move (bench/check/client_view.py;
        # summaries from before those counts derive as they did)
        **({"client_errors_per_move": _median([sum(m["client_errors"].values()) for m in moves
                                               if isinstance(m.get("client_errors"), dict)]),
            "client_metadata_per_move": _median([m.get("client_metadata_requests") for m in moves])}
           if any("client_errors" in m for m in moves) else {}),
        # when the cluster elected the new owner and when the producers' query found it (summaries
        # from before those times derive as they did)
        **({"elect_seconds": _median([m.get("elect_seconds") for m in moves]),
            "client_leader_query_seconds": _median([m.get("client_leader_query_seconds") for m in moves])}
           if any("elect_seconds" in m for m in moves) else {}),
    }


def move_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per move of a run with several (``calibrate``): partition, link, time, bytes."""
    moves = s.get("moves") or []
    if len(moves) < 2:
        return []
    return [{"partition": f"{m.get('topic')}-{m.get('partition')}", "link": m.get("link_rate_at_request"),
             "partition_bytes": m.get("partition_bytes"), "move_seconds": m.get("move_seconds"),
             "bytes_moved": _moved(m)}
            for m in moves]


def collect_runs(sources: Iterable[Path | str]) -> dict[str, Any]:
    """The ``runs`` extract of every summary under the sources (see the module's docstring)."""
    sources = list(sources)
    configs: dict[str, dict[str, Any]] = {}
    for run_dir, s in find_summaries(sources):
        key = s.get("config_id") or s.get("run_id")
        c = configs.setdefault(key, {
            "config_id": key, "scenario": s.get("scenario"), "system": s.get("system"),
            "prefill_bytes_per_partition": (s.get("params") or {}).get("prefill_bytes_per_partition"),
            "replication_factor": ((s.get("configuration") or {}).get("replication_factor")
                                   or (s.get("params") or {}).get("replication_factor")),
            "runs": []})
        c["runs"].append({"run_id": s.get("run_id"), "repetition": s.get("repetition", 1),
                          "verdict": run_verdict(s), "provenance": provenance_facts(s),
                          "metrics": run_metrics(s), **({"moves": mv} if (mv := move_rows(s)) else {})})
    for c in configs.values():
        c["runs"].sort(key=lambda r: r["repetition"] or 0)
        keys = list(dict.fromkeys(k for r in c["runs"] for k in r["metrics"]))  # a run may lack one (no such move)
        c["figures"] = {k: _spread(r["metrics"].get(k) for r in c["runs"]) for k in keys}
        c["verdicts"] = {v: sum(r["verdict"] == v for r in c["runs"]) for v in ("pass", "fail", "unknown")}
    suites = [json.loads((Path(p) / "suite.json").read_text()) for p in sources if (Path(p) / "suite.json").is_file()]
    secs = [s["seconds"] for s in suites if _num(s.get("seconds"))]
    return {"kind": "runs", "sources": [_shown(p) for p in sources], "configurations": list(configs.values()),
            **({"suite_seconds": sum(secs)} if secs else {})}


# -- benchmark: pytest-benchmark JSON -> its figures -------------------------------------------

def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars of a (nested) extra_info as ``key`` / ``outer.key``; lists are left out."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif _num(v) or isinstance(v, str):
            out[f"{prefix}{k}"] = v
    return out


def collect_benchmark(path: Path | str, extra: list[str] | None = None) -> dict[str, Any]:
    """The ``benchmark`` extract of a pytest-benchmark JSON file; ``extra``: fnmatch patterns of
    the (flattened) extra_info keys to keep, default all."""
    d = json.loads(Path(path).read_text())
    if not isinstance(d, dict) or "benchmarks" not in d:
        raise FiguresError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks')")
    ci, mi = d.get("commit_info") or {}, d.get("machine_info") or {}
    cpu = mi.get("cpu") or {}
    return {
        "kind": "benchmark", "sources": [_shown(Path(path))],
        "provenance": {"date": d.get("datetime"), "commit": ci.get("id"), "dirty": ci.get("dirty"),
                       "machine": {"cpus": cpu.get("count"), "cpu": cpu.get("brand_raw"), "kernel": mi.get("release"),
                                   "python": mi.get("python_version")}},
        "benchmarks": [{"name": b["name"], "rounds": b["stats"]["rounds"],
                        **{k: b["stats"][k] for k in ("median", "min", "max")},
                        "extra_info": {k: v for k, v in _flat(b.get("extra_info") or {}).items()
                                       if extra is None or any(fnmatch.fnmatchcase(k, x) for x in extra)}}
                       for b in d["benchmarks"]],
    }


MODEL_FIT_KEYS = ("system", "formula", "fixed_s", "fixed_se", "efficiency", "efficiency_se", "open_per_object_s",
                  "open_objects_max", "n", "runs")
CHECK_KEYS = ("system", "axis", "label", "status", "reason", "error_pct", "max_abs_error_pct", "target_pct",
              "measured_s", "predicted_s", "measured_bytes", "predicted_bytes", "n_train", "n_test", "train_runs",
              "test_runs", "family")
HEADLINE_KEYS = ("case", "title", "system", "link_gbit_s", "status", "value_s", "value_text", "error_pct",
                 "validations", "reason", "basis", "validity_text", "version")


def collect_model(path: Path | str) -> dict[str, Any]:
    """The ``model`` extract of an aggregate's model.json."""
    d = json.loads(Path(path).read_text())
    if not isinstance(d, dict) or "validation" not in d or "headline" not in d:
        raise FiguresError(f"{path}: not an aggregate's model.json with held-out checks and a headline "
                           "(python -m bench aggregate writes it)")
    return {"kind": "model", "sources": [_shown(Path(path))],
            "models": [{k: m.get(k) for k in MODEL_FIT_KEYS} for m in (d.get("models") or {}).values()],
            "checks": [{k: v.get(k) for k in CHECK_KEYS} for v in d["validation"]],
            "headline": [{k: h.get(k) for k in HEADLINE_KEYS} for h in d["headline"]],
            "grid_points": (d.get("grid") or {}).get("points")}


def collect_crosscheck(paths: list[Path | str]) -> dict[str, Any]:
    """The ``crosscheck`` extract of one or more ``bench crosscheck`` outputs (their
    crosscheck.json), rows in the order given."""
    rows, provs, agrees, first = [], [], True, None
    for path in map(Path, paths):
        d = json.loads(path.read_text())
        if not isinstance(d, dict) or "scenarios" not in d:
            raise FiguresError(f"{path}: not a crosscheck.json (python -m bench crosscheck writes it)")
        for scenario, per in d["scenarios"].items():
            for system, cmp in per.items():
                first = first or cmp
                rows += [{"scenario": scenario, "system": system, **r} for r in cmp["configs"]]
        agrees = agrees and bool(d.get("agrees"))
        provs += [provenance_facts(s) for _, s in find_summaries([path.parent / sc for sc in d["scenarios"]])]
    return {"kind": "crosscheck", "sources": [_shown(Path(p)) for p in paths], "tolerance": first["tolerance"],
            "resolution_s": first["resolution_s"], "agrees": agrees, "rows": rows, "provenance": provs}


def _rounded(x: Any) -> Any:
    """Floats to 6 significant digits: what a figure can show, in a smaller file."""
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def _shown(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def soak_dirs(sources: Iterable[Path]) -> list[Path]:
    """Run directories of soaks (a ``soak.json`` beside the summary) under the sources."""
    return sorted({p.parent for s in sources if s.is_dir()
                   for p in ([s / "soak.json"] if (s / "soak.json").is_file() else s.rglob("soak.json"))})


def collect_soak(sources: list[Path]) -> dict[str, Any]:
    """The ``soak`` extract: per soak run its judgement (soak.json: memory, open files, the object
    store) beside its summary's safety counts and verdict."""
    runs = []
    for d in soak_dirs(sources):
        k, s = json.loads((d / "soak.json").read_text()), json.loads((d / "summary.json").read_text())
        checks = s.get("checks") or {}
        brokers = {n: v for n, v in (k.get("file_descriptors") or {}).items() if n.startswith("broker-")}
        store = k.get("object_store") or {}
        runs.append({
            "run_id": s.get("run_id"), "system": k.get("system"), "config": k.get("config") or {},
            "minutes": k.get("minutes"),
            "judged_minutes": round((k["minutes"] * 60 - k["warmup_s"]) / 60, 2) if _num(k.get("warmup_s")) else None,
            "rate_msgs_per_s": k.get("rate_msgs_per_s"), "moves": k.get("moves"), "acked": k.get("acked"),
            "failed": k.get("failed"), "unknown": k.get("unknown"),
            **safety_counts(checks),
            "max_broker_rss_growth_pct": k.get("max_broker_growth_pct"),
            "max_broker_fd_growth": max((v.get("growth") for v in brokers.values() if _num(v.get("growth"))),
                                        default=None),
            "objstore_bytes_per_acked_byte": store.get("bytes_per_acked_byte"),
            "objstore_growth_pct": store.get("growth_pct"),
            "objstore_objects": {g: [(v.get("baseline") or {}).get("objects"), (v.get("final") or {}).get("objects")]
                                 for g, v in (store.get("groups") or {}).items()},
            "run_verdict": run_verdict(s), "verdict": k.get("verdict"), "provenance": provenance_facts(s)})
    if not runs:
        raise FiguresError(f"no soak runs (soak.json) under {', '.join(map(str, sources))}")
    return {"kind": "soak", "sources": [_shown(p) for p in sources], "runs": runs}


CHAOS_PREFIX = "chaos-"  # bench/scenario/chaos.py names its scenarios chaos-<system>-seed<N>
CHAOS_COUNTS = ("lost", "duplicated", "corrupted", "reordered", "lost_prefill")


def collect_chaos(found: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The ``chaos`` extract: per randomized-schedule run its schedule (actions by kind, from its
    scenario.yaml), what was acked and every safety count, and its verdict with what kept it from
    a pass."""
    import yaml

    runs = []
    for d, s in found:
        sc = yaml.safe_load((d / "scenario.yaml").read_text()) or {}
        kinds: dict[str, int] = {}
        for a in sc.get("actions") or []:
            kinds[a.get("kind")] = kinds.get(a.get("kind"), 0) + 1
        checks = s.get("checks") or {}
        runs.append({
            "run_id": s.get("run_id"), "scenario": s.get("scenario"), "system": s.get("system"),
            "seed": int(str(s.get("scenario")).rsplit("seed", 1)[-1]) if "seed" in str(s.get("scenario")) else None,
            "minutes": round(float((sc.get("workload") or {}).get("duration_s") or 0) / 60, 2),
            "actions": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], str(kv[0])))),
            "acked": (s.get("producer") or {}).get("acked"), **safety_counts(checks, CHAOS_COUNTS),
            "verdict": run_verdict(s), "problems": list(s.get("problems") or []),
            "unknown_checks": list(checks.get("unknown") or []), "provenance": provenance_facts(s)})
    runs.sort(key=lambda r: (str(r["system"]), r["seed"] or 0))
    return {"kind": "chaos", "sources": [], "runs": runs}


def derive(sources: list[Path], extra: list[str] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """(the extract of ``sources``, the run directories it read): a model extract of an
    aggregate's model.json, a crosscheck extract of crosscheck.json files, a benchmark extract of
    one other ``.json`` file, a soak extract of soak runs (``soak.json``), else a runs extract of
    the summaries under the sources."""
    if len(sources) == 1 and sources[0].is_file() and sources[0].name == "model.json":
        return collect_model(sources[0]), []
    if all(p.is_file() and p.name == "crosscheck.json" for p in sources):
        dirs = [d for p in sources for d, _ in find_summaries([p.parent / sc for sc in
                                                               json.loads(p.read_text()).get("scenarios") or {}])]
        return collect_crosscheck(sources), dirs
    if len(sources) == 1 and sources[0].is_file() and sources[0].suffix == ".json":
        return collect_benchmark(sources[0], extra), []
    if soak_dirs(sources):
        return collect_soak(sources), soak_dirs(sources)
    found = find_summaries(sources)
    if found and all(str(s.get("scenario") or "").startswith(CHAOS_PREFIX) for _, s in found):
        return {**collect_chaos(found), "sources": [_shown(p) for p in sources]}, [d for d, _ in found]
    return collect_runs(sources), [d for d, _ in found]


def _text(extract: dict[str, Any]) -> str:
    return json.dumps(_rounded(extract), indent=1) + "\n"


def collect(sources: list[Path | str], name: str, out_dir: Path = MEASUREMENTS, extra: list[str] | None = None,
            *, allow_dirty: bool = False, allow_mixed: bool = False) -> Path:
    """Write the extract NAME.json into ``out_dir`` and its evidence bundle (bench/report/evidence.py)
    into ``out_dir/bundles/NAME``, refusing inputs of a dirty tree or of more than one commit
    unless allowed."""
    if not _NAME.match(name):
        raise FiguresError(f"--as {name!r}: use letters, digits, '.', '_' and '-'")
    srcs = [Path(p) for p in sources]
    for p in srcs:
        if not p.exists():
            raise FiguresError(f"{p}: no such file or directory")
    extract, run_dirs = derive(srcs, extra)
    try:
        files, run_dirs = evidence.inputs(extract["kind"], srcs, run_dirs)
        bench_json = json.loads(srcs[0].read_text()) if extract["kind"] == "benchmark" else None
        summaries = [json.loads((d / "summary.json").read_text()) for d in run_dirs]
        commit, dirty = evidence.one_clean_commit(evidence.commit_of(summaries, bench_json), allow_dirty, allow_mixed)
        manifest = evidence.write_bundle(out_dir, name, extract["kind"], srcs, files, run_dirs, commit, dirty,
                                         extract["sources"])
    except (evidence.EvidenceError, OSError, ValueError) as e:
        raise FiguresError(str(e)) from None
    if extra is not None:
        manifest["extra"] = extra
        (evidence.bundle_dir(out_dir, name) / evidence.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    # the manifest's own hash: an edit of what --check does not re-derive (a history's sha256) shows too
    manifest_sha = evidence.sha256(evidence.bundle_dir(out_dir, name) / evidence.MANIFEST)
    extract.update(bundle=f"{evidence.BUNDLES}/{name}", commit=commit, dirty=dirty, manifest_sha256=manifest_sha)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.json"
    out.write_text(_text(extract))
    return out


def rederive(name: str, measurements: Path = MEASUREMENTS) -> list[str]:
    """What differs between the extract NAME.json and what its bundle gives now: files whose
    sha256 is not the manifest's, or an extract that collect on the bundled inputs would not
    write byte for byte, or an extract that names no bundle (nothing to re-derive it from)."""
    path = measurements / f"{name}.json"
    try:
        text = path.read_text()
        e = json.loads(text)
    except (OSError, ValueError) as exc:
        return [f"{_shown(path)}: unreadable ({exc})"]
    if not isinstance(e, dict) or not e.get("bundle"):
        return [f"{_shown(path)}: no evidence bundle to re-derive it from (python -m bench figures collect "
                "its runs, or delete it and the blocks that quote it)"]
    bundle = measurements / e["bundle"]
    try:
        manifest = evidence.read_manifest(bundle)
    except evidence.EvidenceError as exc:
        return [str(exc)]
    problems = [f"{_shown(bundle)}/files/{p}" for p in evidence.file_problems(bundle, manifest)]
    if problems:
        return problems
    try:
        again, _ = derive(evidence.bundled_sources(bundle, manifest), manifest.get("extra"))
    except (FiguresError, OSError, ValueError, KeyError) as exc:
        return [f"{_shown(bundle)}: collect on the bundled inputs failed: {exc}"]
    again["sources"] = [s["given"] for s in manifest["sources"]]
    again.update(bundle=e["bundle"], commit=manifest.get("commit"), dirty=manifest.get("dirty"),
                 manifest_sha256=evidence.sha256(bundle / evidence.MANIFEST))
    if _text(again) != text:
        return [f"{_shown(path)}: not what its bundle {e['bundle']} gives (python -m bench figures collect again, "
                "or restore the file)"]
    return []


def extract_names(measurements: Path = MEASUREMENTS) -> list[str]:
    return sorted(p.stem for p in measurements.glob("*.json"))


# -- rendering ----------------------------------------------------------------------------------

def fmt(x: Any) -> str:
    """A figure for a reader: three significant digits (all digits from 100 up), thousands
    separated, never exponent notation."""
    if not _num(x):
        return "-"
    a = abs(x)
    if a >= 100 or a == 0 or isinstance(x, int):
        return f"{x:,.0f}"
    return f"{x:,.{max(0, 2 - math.floor(math.log10(a)))}f}"


def _cell(sp: dict[str, Any] | None, scale: float = 1.0) -> str:
    if not sp:
        return "-"
    med = fmt(sp["median"] * scale)
    sep = " to " if sp["min"] < 0 else "-"  # a signed error: "-2.6 (-2.6 to -1.5)"
    return med if sp["n"] == 1 or sp["min"] == sp["max"] else \
        f"{med} ({fmt(sp['min'] * scale)}{sep}{fmt(sp['max'] * scale)})"


def _machine(m: dict[str, Any]) -> str:
    parts = [f"{m['cpus']} cores" if m.get("cpus") else None, m.get("cpu"),
             f"{m['mem_gib']:.1f} GiB" if _num(m.get("mem_gib")) else None,
             f"kernel {m['kernel']}" if m.get("kernel") else None,
             f"Python {m['python']}" if m.get("python") else None]
    return ", ".join(x for x in parts if x) or "unknown"


def _provenance_line(provs: list[dict[str, Any]], n_runs: int | None = None) -> str:
    dates = sorted({str(p.get("date"))[:10] for p in provs if p.get("date")})
    commits = sorted({(p.get("commit") or "?")[:10] + {True: " (dirty)", False: "", None: " (dirty: unknown)"}[
        p.get("dirty")] for p in provs})
    machines = sorted({_machine(p.get("machine") or {}) for p in provs})
    parts = []
    if n_runs is not None:
        parts.append(f"{n_runs} run(s)")
    parts.append(" to ".join(dict.fromkeys([dates[0], dates[-1]])) if dates else "date unknown")
    parts.append("commit " + ", ".join(f"`{c}`" for c in commits))
    parts.append("machine: " + "; ".join(machines))
    links = {p.get("links_emulated") for p in provs if "links_emulated" in p}
    if links:
        # None: a cluster the harness did not start, whose links it neither shaped nor knows
        parts.append("links emulated" if links == {True} else "no emulated links" if links == {False}
                     else "the cluster's own links (not started by the harness)" if links == {None}
                     else "links emulated where the harness started the cluster" if links == {True, None}
                     else "some runs on emulated links")
    return "; ".join(parts)


# (column, metric, scale) of the runs table; a column no configuration has a value for is left out
# (a throughput run has no move, a suite without faults no outage).
RUN_COLUMNS = [
    ("move_seconds", "move_seconds", 1.0),
    ("estimate before the move s", "estimate_seconds", 1.0),
    ("estimate error %", "estimate_error_pct", 1.0),
    ("to copy at request MB", "copy_bytes_at_request", 1e-6),
    ("bytes moved MB", "bytes_moved", 1e-6),
    ("unavailable s", "unavailable_seconds", 1.0),
    ("p99 ack during move ms", "p99_during_move_ms", 1.0),
    ("outage s", "outage_seconds", 1.0),
    ("e2e p99 during move ms", "e2e_p99_during_move_ms", 1.0),
    ("consumer gap s", "consumer_gap_seconds", 1.0),
    ("catch-up MB/s during move", "catch_up_during_move_bytes_per_s", 1e-6),
    ("produce errors per move", "client_errors_per_move", 1.0),
    ("Metadata requests per move", "client_metadata_per_move", 1.0),
    ("elected s", "elect_seconds", 1.0),
    ("producers' leader query s", "client_leader_query_seconds", 1.0),
    ("acked msgs/s", "acked_msgs_per_s", 1.0),
    ("produce p99 ms", "produce_p99_ms", 1.0),
    ("load CPU %", "load_cpu_percent", 1.0),
    ("load CPU s / 1,000 msgs", "load_cpu_s_per_1000_msgs", 1.0),
]


SAFETY_COUNTS = ("lost", "duplicated", "corrupted")


def _safety_cell(runs: list[dict[str, Any]]) -> str:
    """``0 / 0 / 0``: acked messages lost, duplicated, corrupted, summed over the runs (``?`` where
    a run could not count)."""
    def total(k):
        xs = [r["metrics"].get(k) for r in runs]
        return "?" if any(not _num(x) for x in xs) else fmt(sum(xs))
    return " / ".join(total(k) for k in SAFETY_COUNTS)


def render_runs(name: str, e: dict[str, Any]) -> str:
    configs = e["configurations"]
    cols = [c for c in RUN_COLUMNS if any((k["figures"].get(c[1]) or None) for k in configs)]
    # extracts collected before the counts were kept have no such column
    safety = any(k in r["metrics"] for c in configs for r in c["runs"] for k in SAFETY_COUNTS)
    lines = ["| scenario | system | partition | runs (pass/fail/unknown) | "
             + ("lost / duplicated / corrupted (all runs) | " if safety else "") + " | ".join(c[0] for c in cols) + " |",
             "|---|---|---:|---|" + ("---|" if safety else "") + "---:|" * len(cols)]
    provs = []
    for c in configs:
        f, v = c["figures"], c["verdicts"]
        pre = c.get("prefill_bytes_per_partition")
        rf = f", RF {c['replication_factor']}" if c.get("replication_factor") else ""
        cells = [_cell(f.get(key), scale) for _, key, scale in cols]
        # The configuration's matrix settings other than the system and the size (own columns).
        shown = [kv for kv in str(c.get("config_id") or "").split("__")[1:]
                 if not kv.startswith(("system.kind=", "prefill.bytes_per_partition="))]
        scenario = f"{c['scenario']} ({', '.join(shown)})" if shown else c["scenario"]
        lines.append(f"| {scenario} | {c['system']}{rf} | {f'{pre / 2**20:g} MiB' if _num(pre) and pre else '-'} | "
                     f"{len(c['runs'])} ({v['pass']}/{v['fail']}/{v['unknown']}) | "
                     + (f"{_safety_cell(c['runs'])} | " if safety else "") + " | ".join(cells) + " |")
        provs += [r["provenance"] for r in c["runs"]]
    n = sum(len(c["runs"]) for c in configs)
    unknown = safety and any("?" in _safety_cell(c["runs"]) for c in configs)
    return "\n".join(lines + [
        "",
        (f"Median (min-max) over each configuration's runs. "
         + ("`?`: a run made before that checker existed (corrupted: the CRC read-back) could not count. "
            if unknown else "") + f"{_provenance_line(provs, n)}"
         + (f"; the suite's runs took {e['suite_seconds'] / 60:.0f} min (first cluster start to last summary)"
            if _num(e.get("suite_seconds")) else "") + f". Run ids: `docs/measurements/{name}.json`."),
    ] + _render_moves(configs)) + "\n"


def _matrix_label(key: str, value: str) -> str:
    """A matrix value as a column head: the move budget as "budget 0.5" / "no budget", any other
    setting by its last name ("handoff snapshot")."""
    if key.endswith("move_budget_of_link"):
        return "no budget" if value == "null" else f"budget {value}"
    return f"{key.rsplit('.', 1)[-1]} {value}"


def _render_moves(configs: list[dict[str, Any]]) -> list[str]:
    """The moves of multi-move runs (calibrate, drain), one table per scenario, one row per move, one
    column per configuration: move_seconds (median of its runs) and the partition's bytes at the
    request."""
    multi = [c for c in configs if any(r.get("moves") for r in c["runs"])]
    if not multi:
        return []
    lines = ["", "Each move of the multi-move runs: move_seconds (bytes in the partition at the request), median of "
                 "the configuration's runs; the link in force at the request. Moves of one action (drain) all "
                 "count from its request: a move's time includes its wait for a free slot (2 per broker)."]
    for scenario in dict.fromkeys(c.get("scenario") for c in multi):
        order: list[tuple[str, Any]] = []
        cells: dict[tuple[str, Any], dict[str, str]] = {}
        heads = []
        for c in (c for c in multi if c.get("scenario") == scenario):
            shown = [kv.split("=", 1) for kv in str(c.get("config_id") or "").split("__")[1:]
                     if not kv.startswith("system.kind=")]
            head = f"{c['system']}" + (f" ({', '.join(_matrix_label(k, v) for k, v in shown)})" if shown else "")
            heads.append(head)
            by: dict[tuple[str, Any], list[dict[str, Any]]] = {}
            for r in c["runs"]:
                seen: dict[Any, int] = {}
                for m in r.get("moves") or []:  # a partition moved again is a row of its own: "i2-0 #2"
                    seen[m["partition"]] = n = seen.get(m["partition"], 0) + 1
                    label = m["partition"] if n == 1 else f"{m['partition']} #{n}"
                    by.setdefault((label, m.get("link")), []).append(m)
            for k, ms in by.items():
                if k not in order:
                    order.append(k)
                t, b = _median([m["move_seconds"] for m in ms]), _median([m["partition_bytes"] for m in ms])
                cells.setdefault(k, {})[head] = f"{fmt(t)} s ({fmt(b / 1e6)} MB)" if _num(t) and _num(b) else "-"
        lines += ["", f"`{scenario}`:", "", "| move | link | " + " | ".join(heads) + " |",
                  "|---|---|" + "---:|" * len(heads)]
        for k in order:
            lines.append(f"| {k[0]} | {k[1] or '-'} | " + " | ".join(cells[k].get(h, "-") for h in heads) + " |")
    return lines


def render_benchmark(name: str, e: dict[str, Any]) -> str:
    lines = ["| benchmark | median | min-max | rounds | extra_info |", "|---|---:|---|---:|---|"]
    for b in e["benchmarks"]:
        extra = ", ".join(f"{k} {fmt(v) if _num(v) else v}" for k, v in b["extra_info"].items())
        lines.append(f"| `{b['name']}` | {fmt(b['median'])} | {fmt(b['min'])}-{fmt(b['max'])} | {b['rounds']} | "
                     f"{extra} |")
    return "\n".join(lines + [
        "",
        (f"Median and min-max of the rounds, in seconds. "
         f"{_provenance_line([e['provenance']])}. From `docs/measurements/{name}.json`."),
    ]) + "\n"


def _pct(x: Any) -> str:
    return "-" if not _num(x) else f"{x:+.1f} %"


def render_model(name: str, e: dict[str, Any]) -> str:
    lines = ["| case | system | link | projection | held-out error | checks it rests on |", "|---|---|---:|---|---:|---|"]
    for h in e["headline"]:
        value = h["value_text"] if h["status"] == "validated" else f"{h['status']}: {h['reason']}"
        if h.get("validity_text"):
            value += f" (validity: {h['validity_text']})"
        err = "-" if not _num(h["error_pct"]) else "≤ " + fmt(h["error_pct"]) + " %"
        lines.append(f"| {h['case']} | {h['system']} | {h['link_gbit_s']:g} Gbit/s | {value} | {err} | "
                     f"{', '.join(h.get('validations') or []) or '-'} |")
    lines += ["", "| system | check | held out | status | measured | predicted | error | target | fitted on |",
              "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for c in e["checks"]:
        target = "-" if not _num(c["target_pct"]) else "±" + fmt(c["target_pct"]) + " %"
        meas, pred = check_values(c)
        lines.append(f"| {c['system']} | {c['axis']} | {c.get('label') or '-'} | {c['status']} | {meas} | "
                     f"{pred} | {_pct(c['error_pct'])} | {target} | {c.get('n_train') or 0} {check_unit(c)} |")
    models = "; ".join(f"{m['system']}: {m['formula']} (n = {m['n']})" for m in e["models"])
    titles = "; ".join(sorted({f"{h['case']}: {h['title']}" for h in e["headline"]}))
    return "\n".join(lines + [
        "",
        (f"Models: {models}. Cases: {titles}. Projection grid: {fmt(e.get('grid_points'))} points. "
         f"Runs on each side of every check: `docs/measurements/{name}.json`."),
    ]) + "\n"


def render_crosscheck(name: str, e: dict[str, Any]) -> str:
    lines = ["| scenario | system | configuration | runs built-in / external | verdicts | move s built-in / external "
             "| unavailable s built-in / external | agree |", "|---|---|---|---|---|---|---|---|"]

    def pair(r: dict[str, Any], key: str) -> str:
        v = r.get(key)
        if not v:
            return "-"
        ratio = f" (x{fmt(v['ratio'])})" if _num(v.get("ratio")) else ""
        return f"{fmt(v['built_in'])} / {fmt(v['as_external'])}{ratio}"

    for r in e["rows"]:
        config = r["config"].removeprefix(r["scenario"]).strip("_") or "-"
        verdicts = " / ".join(",".join(v) for v in r["verdicts"])
        lines.append(f"| {r['scenario']} | {r['system']} | {config} | {r['runs'][0]} / {r['runs'][1]} | {verdicts} | "
                     f"{pair(r, 'move_seconds')} | {pair(r, 'unavailable_seconds')} | {'yes' if r['agrees'] else '**no**'} |")
    return "\n".join(lines + [
        "",
        (f"Medians over each side's runs; agree = same verdicts and medians within {e['tolerance']:.0%} or "
         f"{fmt(e['resolution_s'])} s (the metadata poll). {_provenance_line(e['provenance'], len(e['provenance']))}. "
         f"Source: `docs/measurements/{name}.json`."),
    ]) + "\n"


def render_soak(name: str, e: dict[str, Any]) -> str:
    lines = ["| system | minutes (judged) | msgs/s | moves | acked msgs | lost / duplicated / corrupted | "
             "broker RSS growth, max | broker open files growth, max | object store objects (start - end) | "
             "object store bytes per acked byte (start - end) | verdict |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|---|---|"]
    for r in e["runs"]:
        ob = r.get("objstore_bytes_per_acked_byte") or {}
        store = f"{fmt(ob.get('baseline'))} - {fmt(ob.get('final'))}" if ob else "no object store"
        counts = list((r.get("objstore_objects") or {}).values())
        objects = (f"{fmt(sum(c[0] or 0 for c in counts))} - {fmt(sum(c[1] or 0 for c in counts))}"
                   if counts else "no object store")
        settings = ", ".join(f"{k}={v}" for k, v in (r.get("config") or {}).items())
        lines.append(f"| {r['system']}{f' ({settings})' if settings else ''} | {fmt(r['minutes'])} "
                     f"({fmt(r['judged_minutes'])}) | {fmt(r.get('rate_msgs_per_s'))} | {r['moves']} | "
                     f"{fmt(r['acked'])} | {r['lost']} / {r['duplicated']} / {r['corrupted']} | "
                     f"{_pct(r['max_broker_rss_growth_pct'])} | {fmt(r['max_broker_fd_growth'])} | {objects} | {store} | "
                     f"{r['verdict']} (run: {r['run_verdict']}) |")
    return "\n".join(lines + ["", (f"Judged after the warm-up: growth = median of the last minute against the first "
                                   f"minute after it (`python -m bench soak`, [faults.md](faults.md)). "
                                   f"{_provenance_line([r['provenance'] for r in e['runs']], len(e['runs']))}. "
                                   f"Source: `docs/measurements/{name}.json`.")]) + "\n"


def render_chaos(name: str, e: dict[str, Any]) -> str:
    lines = ["| system | seed | minutes | actions | acked msgs | lost / duplicated / corrupted / reordered / "
             "prefill lost | verdict |", "|---|---:|---:|---|---:|---|---|"]
    for r in e["runs"]:
        acts = ", ".join(f"{n} {k}" for k, n in r["actions"].items())
        counts = " / ".join("?" if r[k] is None else fmt(r[k]) for k in CHAOS_COUNTS)
        why = "; ".join([p.splitlines()[0] for p in r["problems"]]
                        + ([f"checks without a verdict: {', '.join(r['unknown_checks'])}"] if r["unknown_checks"] else []))
        lines.append(f"| {r['system']} | {r['seed']} | {fmt(r['minutes'])} | {acts} | {fmt(r['acked'])} | {counts} | "
                     f"{r['verdict']}{f' ({why})' if why and r['verdict'] != 'pass' else ''} |")
    return "\n".join(lines + ["", (f"One run per seed; each schedule replays from the run's own `scenario.yaml` "
                                   f"(bundled): `python -m bench run <it>`. "
                                   f"{_provenance_line([r['provenance'] for r in e['runs']], len(e['runs']))}. "
                                   f"Source: `docs/measurements/{name}.json`.")]) + "\n"


RENDERERS = {"runs": render_runs, "benchmark": render_benchmark, "model": render_model,
             "crosscheck": render_crosscheck, "soak": render_soak, "chaos": render_chaos}


def render(name: str, measurements: Path = MEASUREMENTS) -> str:
    path = measurements / f"{name}.json"
    if not path.is_file():
        raise FiguresError(f"figures:{name}: no extract {_shown(path)} (python -m bench figures collect ... --as {name})")
    e = json.loads(path.read_text())
    return RENDERERS[e["kind"]](name, e)


def rewrite(text: str, measurements: Path = MEASUREMENTS) -> tuple[str, list[str]]:
    """``text`` with every figure block rendered from its extract, and the names of the blocks
    that changed."""
    changed: list[str] = []

    def one(m: re.Match) -> str:
        body = render(m["name"], measurements)
        if body != m["body"]:
            changed.append(m["name"])
        return m[1] + body + m[4]

    return BLOCK.sub(one, text), changed


def figures(files: list[Path] | None = None, measurements: Path = MEASUREMENTS, check: bool = False) -> list[str]:
    """Render (or with ``check`` only compare) the figure blocks of ``files`` (default:
    :func:`block_files`); returns ``file: block`` for every block that differed."""
    stale = []
    for f in block_files() if files is None else files:
        old = f.read_text()
        new, changed = rewrite(old, measurements)
        stale += [f"{_shown(f)}: figures:{n}" for n in changed]
        if changed and not check:
            f.write_text(new)
    return stale
