"""Finding stored runs: every run directory (one holding ``summary.json`` and a history) under the
given roots, as a :class:`StoredRun` with its configuration (what groups its repetitions)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.check.view import HistoryView
from bench.scenario import OWN_SETTINGS
from bench.units import fmt_num, format_bytes, parse_bytes, rate_bits
from systems.registry import PROFILES

UNKNOWN = "unknown"  # a provenance or configuration fact a summary does not carry


@dataclass
class StoredRun:
    idx: int
    run_key: str  # run dir relative to its results root: unique and traceable
    run_dir: Path
    summary: dict[str, Any]
    history_files: list[Path]
    scenario: Any = None
    config_key: str = ""  # what groups repetitions: summary.json's config_id, else config_label
    config_label: str = ""
    # a cluster the harness did not start, counted as the system its brokers' configs match
    # (`bench calibrate`: the cluster's own moves fit that system's model); None: as it ran
    as_system: str | None = None
    # Filled by the aggregation:
    stats: dict[str, Any] = field(default_factory=dict)
    view: HistoryView | None = None

    @property
    def system(self) -> str:
        if self.as_system:
            return self.as_system
        s = self.summary.get("system")
        if not s and self.scenario is not None:
            s = self.scenario.system.kind
        return str(s or "unknown")

    def param(self, name: str) -> Any:
        p = self.summary.get("params") or {}
        if p.get(name) is not None:
            return p[name]
        sc = self.scenario
        if sc is None:
            return None
        if name == "prefill_bytes_per_partition":
            return sc.prefill.bytes_per_partition
        if name in ("message_bytes", "produce_rate_msgs_per_s"):
            return getattr(sc.workload, name)
        return getattr(sc.system, name, None)  # brokers and the systems' settings

    @property
    def bandwidth(self) -> Any:
        """The run's cap on a move's bytes/s: the settings its profile names (throttle, object-store
        cap, the move budget's mechanism) and, on emulated links, the links a move crosses (the
        brokers'; the object store's for a system with one), whichever is lowest (None:
        uncapped, on loopback)."""
        return self.bandwidth_at((self.summary.get("params") or {}).get("link_rate"))

    def bandwidth_at(self, link_rate: Any) -> Any:
        """:attr:`bandwidth` with the brokers' links at ``link_rate`` (a move's, see :meth:`link_at`)."""
        caps = [self.settings_cap] if self.settings_cap is not None else []
        for rate in (link_rate, (self.summary.get("params") or {}).get("object_store_link_rate")):
            if rate:
                caps.append(rate_bits(rate) / 8)
        return min(caps) if caps else None

    @property
    def settings_cap(self) -> float | None:
        """The lowest of the caps on a move's bytes/s the run sets (its profile's throttle or
        object-store cap and the move budget's mechanism; None: none set), links aside."""
        p = PROFILES.get(self.system)
        caps = [float(self.param(n)) for n in ({p.bandwidth_param, p.move_budget} - {None} if p is not None else ())
                if self.param(n)]
        return min(caps) if caps else None

    def link_at(self, ts: float, brokers: Any = ()) -> Any:
        """The emulated link rate of ``brokers`` (all when empty) in force at ``ts``
        (:meth:`HistoryView.link_rate_at`); the run's ``link_rate`` without a history."""
        base = (self.summary.get("params") or {}).get("link_rate")
        if base is None or self.view is None:
            return base
        return self.view.link_rate_at(ts, base, brokers or range(1, int(self.param("brokers") or 0) + 1))


def span_phases(system: str) -> set[str]:
    """The move phases a system times from the request (its profile's ``request_phase``): each
    holds the phases the move went through before it."""
    p = PROFILES.get(system)
    return {phase for _, phase in p.journal.request_phase.values()} if p is not None else set()


def history_files(run_dir: Path) -> list[Path]:
    """The compacted history, else the part files of a run still in progress / crashed."""
    h = run_dir / "history.parquet"
    if h.is_file():
        return [h]
    parts = run_dir / "history.parquet.parts"
    if parts.is_dir():
        return sorted(parts.glob("part-*.parquet"))
    return []


def discover_runs(roots: Sequence[str | os.PathLike[str]], external_as_profile: bool = False
                  ) -> tuple[list[StoredRun], list[str]]:
    """Every run dir (holding summary.json) under ``roots``. -> (runs, warnings).
    ``external_as_profile``: a run on a cluster the harness did not start counts as the system its
    brokers' configs match (its summary's ``external_cluster.behaves_as``)."""
    runs: list[StoredRun] = []
    warnings: list[str] = []
    seen: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            warnings.append(f"{root}: does not exist")
            continue
        found = [root / "summary.json"] if (root / "summary.json").is_file() else sorted(root.rglob("summary.json"))
        for sj in found:
            d = sj.parent.resolve()
            if d in seen or "aggregate" in sj.relative_to(root).parts[:1]:
                continue
            seen.add(d)
            try:
                summary = json.loads(sj.read_text(encoding="utf-8"))
                if not isinstance(summary, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                warnings.append(f"{sj}: unreadable summary ({exc}); run skipped")
                continue
            files = history_files(sj.parent)
            if not files:
                warnings.append(f"{sj.parent}: no history.parquet; run skipped")
                continue
            key = d.name if d == root.resolve() else d.relative_to(root.resolve()).as_posix()
            run = StoredRun(len(runs), key, sj.parent, summary, files)
            if external_as_profile:
                run.as_system = (summary.get("external_cluster") or {}).get("behaves_as")
            run.scenario = _load_scenario(sj.parent / "scenario.yaml", warnings)
            run.config_label = config_key(run)
            run.config_key = str(summary.get("config_id") or run.config_label)
            runs.append(run)
    # A configuration is one system's, on one cluster: the same scenario run with system.kind
    # pinned by --set (not a matrix axis) on two systems, or against two clusters the harness did
    # not start, has one config_id; what tells them apart joins the key then.
    identities: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        identities[r.config_key].add(_identity(r))
    for r in runs:
        if len(identities[r.config_key]) > 1:
            r.config_key = f"{r.config_key} [{_identity(r)}]"
    keys = [r.run_key for r in runs]
    if len(set(keys)) != len(keys):  # same relative path under two roots: use full paths
        for r in runs:
            r.run_key = r.run_dir.resolve().as_posix()
    return runs, warnings


def _load_scenario(path: Path, warnings: list[str]) -> Any:
    if not path.is_file():
        return None
    from bench.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        warnings.append(f"{path}: {str(exc).splitlines()[0]} (scenario ignored)")
        return None


def _fmt_b(v: Any, per_s: bool = False) -> str:
    if v is None:
        return "none"
    try:
        return format_bytes(parse_bytes(v), exact=True) + "/s" * per_s  # exact: never merge two sizes
    except (TypeError, ValueError):
        return str(v)


def _identity(run: StoredRun) -> str:
    """The system, and for a cluster the harness did not start, which one (its label, else its
    bootstrap address)."""
    c = run.summary.get("configuration") or {}
    p = PROFILES.get(run.system)
    own = c.get("label") if c.get("label") and (p is None or c["label"] != p.label) else None
    where = c.get("bootstrap") and (own or c["bootstrap"].split(",")[0])
    return f"{run.system} at {where}" if where else run.system


def config_key(run: StoredRun) -> str:
    """A configuration described for people (scenario, system and sweep parameters); it groups
    repetitions of runs whose summary names no ``config_id``."""
    name = str(run.summary.get("scenario") or (run.scenario.name if run.scenario else "?"))
    parts = [f"prefill {_fmt_b(run.param('prefill_bytes_per_partition'))}"]
    p = PROFILES.get(run.system)
    if p is not None and p.bandwidth_param:
        parts.append(f"{p.bandwidth_label} {_fmt_b(run.param(p.bandwidth_param), per_s=True)}")
    link = (run.summary.get("params") or {}).get("link_rate")
    if link:
        parts.append(f"link {link}")
    parts += [f"msg {_fmt_b(run.param('message_bytes'))}", f"rate {run.param('produce_rate_msgs_per_s')}/s",
              f"brokers {run.param('brokers')}"]
    # the system's own settings the scenario set (tiered-move's KIP-1023 and KIP-405 runs differ only there)
    params = run.summary.get("params") or {}
    parts += [setting_text(k, params[k]) for k in OWN_SETTINGS if params.get(k) is not None]
    return f"{name} {_identity(run)}: " + ", ".join(parts)




def setting_text(key: str, value: Any) -> str:
    """``segment_bytes`` 4194304 -> ``segment 4 MiB``; ``wal_batch_interval_ms`` 100 -> ``wal batch
    interval 100 ms`` (a configuration's label, and the report's "the system's own settings")."""
    name = key.replace("_", " ")
    if isinstance(value, bool) or value is None:
        return f"{name} {str(value).lower()}"
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{name.removesuffix(' bytes')} {format_bytes(value)}"
    if key.endswith("_ms") and isinstance(value, (int, float)):
        return f"{name.removesuffix(' ms')} {fmt_num(value)} ms"
    return f"{name}: {value}"


def provenance_of(summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json's ``provenance`` ({} for a summary written before it existed)."""
    p = summary.get("provenance")
    return p if isinstance(p, dict) else {}


def machine_label(machine: Any) -> str:
    """``2 cores, 23.5 GiB, kernel 6.18.44, Python 3.11.7`` (unknown parts left out)."""
    if not isinstance(machine, dict) or not machine:
        return UNKNOWN
    parts = []
    if machine.get("cpus") is not None:
        parts.append(f"{machine['cpus']} cores")
    if isinstance(machine.get("mem_gib"), (int, float)):
        parts.append(f"{fmt_num(machine['mem_gib'])} GiB")
    if machine.get("kernel"):
        parts.append(f"kernel {machine['kernel']}")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    return ", ".join(parts) or UNKNOWN


__all__ = ["UNKNOWN", "StoredRun", "config_key", "discover_runs", "history_files", "machine_label", "provenance_of",
           "setting_text", "span_phases"]
