"""Evidence bundles: what an extract was made from, kept in the repository so that anyone can
re-derive it (``python -m bench figures --check``) and, where the runs are still on disk,
re-check the runs themselves (``python -m bench figures verify``).

A bundle is ``docs/measurements/bundles/NAME/``:

- ``files/``: the inputs ``bench figures collect`` read, at their paths relative to the inputs'
  common folder: each run's ``summary.json`` and resolved ``scenario.yaml`` (its provenance is in
  the summary), a suite's ``suite.json``, an aggregate's ``model.json`` and ``runs.csv``, a
  crosscheck's ``crosscheck.json``, a pytest-benchmark file. Never a history: those stay with the
  runs (hundreds of MB); their sha256 is recorded instead.
- ``manifest.json``: the extract's name and kind; ``sources`` as given to collect (absolute, and
  as paths under ``files/``); the commit every input was made on (and ``dirty``); per file under
  ``files/`` its sha256 and size; per run directory its run id, where it was (``origin``), the
  sha256 and size of its ``history.parquet`` and ``summary.json`` there.

The extract (``docs/measurements/NAME.json``) names its bundle and commit. ``--check`` hashes
every bundled file against the manifest (a file added, removed or edited fails), re-runs collect
on the bundled inputs and compares the result with the extract byte for byte, then renders every
figure block from its extract (bench/report/blocks.py).
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

BUNDLES = "bundles"
MANIFEST = "manifest.json"
RUN_FILES = ("summary.json", "scenario.yaml", "soak.json")  # what a run directory contributes (those it has)


class EvidenceError(Exception):
    """A bundle that cannot be made, read or trusted; the message says which and why."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- which files an extract rests on ------------------------------------------------------------

def _run_dirs_of_aggregate(model_json: Path) -> list[Path]:
    """The run directories an aggregate read: its ``runs.csv`` (written beside model.json)."""
    table = model_json.parent / "runs.csv"
    if not table.is_file():
        raise EvidenceError(f"{table}: missing; the aggregate's runs table names the runs model.json rests on")
    with open(table, newline="") as f:
        return [Path(r["run_dir"]) for r in csv.DictReader(f) if r.get("run_dir")]


def inputs(kind: str, sources: list[Path], run_dirs: list[Path]) -> tuple[list[Path], list[Path]]:
    """(files to bundle, run directories) for an extract of ``kind`` made from ``sources``;
    ``run_dirs``: the runs a runs/crosscheck extract read (blocks.find_summaries)."""
    files: list[Path] = []
    if kind in ("runs", "soak", "chaos"):
        files += [s / "suite.json" for s in sources if (s / "suite.json").is_file()]
    elif kind == "model":
        files += [sources[0], sources[0].parent / "runs.csv"]
        run_dirs = _run_dirs_of_aggregate(sources[0])
    else:  # crosscheck, benchmark: the files given
        files += sources
    for d in run_dirs:
        files += [d / n for n in RUN_FILES if (d / n).is_file()]
    return files, run_dirs


def commit_of(summaries: list[dict[str, Any]], benchmark: dict[str, Any] | None = None) -> list[tuple[Any, Any]]:
    """(commit, dirty) of every input: each run's provenance, or a benchmark file's commit_info."""
    if benchmark is not None:
        ci = benchmark.get("commit_info") or {}
        return [(ci.get("id"), ci.get("dirty"))]
    out = []
    for s in summaries:
        g = (s.get("provenance") or {}).get("git") or {}
        out.append((g.get("commit") or s.get("git_commit"), g.get("dirty")))
    return out


def one_clean_commit(pairs: list[tuple[Any, Any]], allow_dirty: bool, allow_mixed: bool) -> tuple[str | None, bool]:
    """The one commit of the inputs, refusing (EvidenceError) a dirty tree (or one that did not
    say) unless ``allow_dirty``, and more than one commit unless ``allow_mixed``."""
    commits = sorted({str(c) for c, _ in pairs if c})
    dirty = [c for c, d in pairs if d is not False]
    if not commits:
        raise EvidenceError("the inputs record no commit: nothing to tie the figures to")
    if len(commits) > 1 and not allow_mixed:
        raise EvidenceError(f"the inputs come from {len(commits)} commits ({', '.join(c[:12] for c in commits)}): "
                            "figures must come from runs of one commit (--allow-mixed to bundle them anyway)")
    if dirty and not allow_dirty:
        raise EvidenceError(f"{len(dirty)} of {len(pairs)} inputs ran on a dirty (or unrecorded) tree: "
                            "commit, re-run and collect again (--allow-dirty to bundle them anyway)")
    return (commits[0] if len(commits) == 1 else None), bool(dirty)


# -- writing -------------------------------------------------------------------------------------

def _common_root(paths: list[Path]) -> Path:
    """The deepest folder holding every path (a folder given as a source included)."""
    return Path(os.path.commonpath([str(p.resolve() if p.is_dir() else p.resolve().parent) for p in paths]))


def write_bundle(out_dir: Path, name: str, kind: str, sources: list[Path], files: list[Path],
                 run_dirs: list[Path], commit: str | None, dirty: bool, shown_sources: list[str]) -> dict[str, Any]:
    """Copy ``files`` into ``out_dir/bundles/NAME/files`` (replacing what was there) and write the
    manifest; -> the manifest."""
    root = _common_root(files + list(sources))
    bundle = out_dir / BUNDLES / name
    if bundle.exists():
        shutil.rmtree(bundle)
    (bundle / "files").mkdir(parents=True)
    entries = {}
    for f in files:
        rel = f.resolve().relative_to(root).as_posix()
        dst = bundle / "files" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
        entries[rel] = {"sha256": sha256(dst), "bytes": dst.stat().st_size}
    runs = []
    for d in run_dirs:
        s = json.loads((d / "summary.json").read_text())
        h = d / "history.parquet"
        runs.append({"run_id": s.get("run_id"), "dir": d.resolve().relative_to(root).as_posix(),
                     "origin": str(d.resolve()),
                     "history_sha256": sha256(h) if h.is_file() else None,
                     "history_bytes": h.stat().st_size if h.is_file() else None,
                     "summary_sha256": sha256(d / "summary.json")})
    manifest = {"name": name, "kind": kind, "commit": commit, "dirty": dirty,
                "sources": [{"given": shown, "in_bundle": s.resolve().relative_to(root).as_posix()}
                            for shown, s in zip(shown_sources, sources)],
                "files": dict(sorted(entries.items())), "runs": runs,
                "bytes": sum(e["bytes"] for e in entries.values())}
    (bundle / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


# -- reading and checking ------------------------------------------------------------------------

def bundle_dir(measurements: Path, name: str) -> Path:
    return measurements / BUNDLES / name


def read_manifest(bundle: Path) -> dict[str, Any]:
    try:
        m = json.loads((bundle / MANIFEST).read_text())
    except FileNotFoundError:
        raise EvidenceError(f"{bundle}: no {MANIFEST}") from None
    except ValueError as e:
        raise EvidenceError(f"{bundle / MANIFEST}: not JSON ({e})") from None
    if not isinstance(m, dict) or not isinstance(m.get("files"), dict):
        raise EvidenceError(f"{bundle / MANIFEST}: not a bundle manifest")
    return m


def file_problems(bundle: Path, manifest: dict[str, Any]) -> list[str]:
    """Every bundled file whose sha256 is not the manifest's, and every file one of them lacks."""
    files = bundle / "files"
    have = {p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()} if files.is_dir() else set()
    out = []
    for rel, e in manifest["files"].items():
        if rel not in have:
            out.append(f"{rel}: missing")
        elif sha256(files / rel) != e.get("sha256"):
            out.append(f"{rel}: sha256 differs from the manifest (edited?)")
    out += [f"{rel}: not in the manifest" for rel in sorted(have - set(manifest["files"]))]
    return out


def bundled_sources(bundle: Path, manifest: dict[str, Any]) -> list[Path]:
    return [bundle / "files" / s["in_bundle"] for s in manifest.get("sources") or []]


def origin_of(run: dict[str, Any], results: Path | None) -> Path | None:
    """Where a bundled run's directory is on this machine: where it was, or its path in the bundle
    under ``results`` (a results root holding the same runs), if either exists."""
    cands = [Path(run["origin"])] if run.get("origin") else []
    if results is not None:
        parts = Path(run["dir"]).parts
        cands += [results / Path(*parts[k:]) for k in range(len(parts))]
    return next((c for c in cands if (c / "summary.json").is_file()), None)


def verify_bundle(bundle: Path, results: Path | None = None) -> list[dict[str, Any]]:
    """Per bundled run: whether its directory is on this machine (``found``), whether its history
    and summary there have the manifest's sha256, and whether the checkers re-run on that history
    (``bench analyze``) give the bundled summary again. -> one row per run."""
    from bench.check.summary import build_summary, dumps, load_run, upgrade_summary
    from bench.check.view import HistoryView

    manifest = read_manifest(bundle)
    rows = []
    for run in manifest.get("runs") or []:
        row: dict[str, Any] = {"run_id": run.get("run_id"), "dir": run.get("dir")}
        where = origin_of(run, results)
        row["found"] = str(where) if where else None
        if where is not None:
            h = where / "history.parquet"
            row["history"] = ("missing" if not h.is_file() else
                              "ok" if sha256(h) == run.get("history_sha256") else "differs")
            row["summary"] = "ok" if sha256(where / "summary.json") == run.get("summary_sha256") else "differs"
            try:
                table, sc = load_run(where)
                bundled = json.loads((bundle / "files" / run["dir"] / "summary.json").read_text())
                again = json.loads(dumps(build_summary(table, sc)))
                row["checks"] = "same" if upgrade_summary(bundled, HistoryView(table, sc)) == again else "differ"
                row["verdict"] = again.get("verdict")
            except Exception as e:  # noqa: BLE001 - reported per run, the others still checked
                row["checks"] = f"error: {type(e).__name__}: {e}"
        rows.append(row)
    return rows
