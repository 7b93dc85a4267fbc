"""Reading scenarios: YAML files (duplicate keys and aliases refused), ``--set`` overrides, the
built-in scenarios (``workloads/scenarios``), and a scenario pointed at a cluster the harness does
not start (:func:`to_external`)."""
from __future__ import annotations

import copy
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from bench.latency import parse_latency
from bench.scenario.errors import ScenarioError, raise_errors
from bench.scenario.matrix import expand
from bench.scenario.model import Scenario
from bench.scenario.paths import set_path
from bench.scenario.system import LINK_SHARES, SYSTEM_SETTING_DEFAULTS, reads, share_target
from systems.registry import PROFILES


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML silently keeps the last one) and
    aliases: a scenario is plain data, and nested aliases expand exponentially."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed in scenario files",
                                              event.start_mark)
        return super().compose_node(parent, index)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_problem(exc: yaml.YAMLError, path: str | Path) -> str:
    """One line for a YAML error, naming the file (PyYAML names a string it parsed
    ``<unicode string>``) and the line and column of the problem and of its context."""
    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"{path}: {exc}"
    mark = exc.problem_mark or exc.context_mark
    head = f"{path}, {at(mark)}" if mark is not None else str(path)
    what = exc.problem or exc.context or "unreadable"
    ctx = ""
    if exc.context and exc.problem:
        ctx = f" ({exc.context}" + (f" at {at(exc.context_mark)}" if exc.context_mark is not None else "") + ")"
    return f"{head}: {what}{ctx}"


def _parse_value(text: str) -> Any:
    # YAML scalar semantics, so `--set system.kind=shared`, `...=64MiB`, `...=true`, `...=[2]` work.
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader) if text.strip() else None
    except yaml.YAMLError:
        return text  # e.g. an unbalanced quote: keep the literal text and let validation judge


def apply_overrides(data: dict[str, Any], overrides: Iterable[str], source: str = "<scenario>") -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides to a raw scenario dict (copy returned).

    Overriding a path that is also a matrix axis pins it: that axis is removed from the matrix.
    """
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise_errors(source, [(f"--set {item}", "expected key.path=value")])
        try:
            set_path(data, key, _parse_value(text))
        except KeyError as exc:
            raise_errors(source, [(key, f"cannot --set: {exc.args[0]}")])
        matrix = data.get("matrix")
        if isinstance(matrix, dict) and key in matrix and not key.startswith("matrix."):
            del matrix[key]
    return data


def parse_scenario(
    data: Any, source: str = "<scenario>", overrides: Iterable[str] = (), *, check_matrix: bool = True
) -> Scenario:
    """Validate a raw scenario mapping (e.g. a stored ``scenario.yaml`` already loaded).

    With ``check_matrix`` every matrix combination is validated too, so a bad combination is
    reported before anything runs.
    """
    if not isinstance(data, dict):
        raise_errors(source, [("<top>", f"must be a mapping of sections, got {type(data).__name__}")])
    data = apply_overrides(data, overrides, source)
    scenario = Scenario.parse(data, source)
    if check_matrix:
        expand(scenario, source)
    return scenario


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override, validate. ``name`` defaults to the file's stem."""
    path = Path(path)
    source = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise_errors(source, [("<file>", f"cannot read {path}: {exc.strerror or exc}")])
    except UnicodeDecodeError as exc:
        raise_errors(source, [("<file>", f"{path} is not UTF-8 text (byte {exc.start})")])
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise_errors(source, [("<file>", f"invalid YAML: {yaml_problem(exc, path)}")])
    if data is None:
        data = {}
    if isinstance(data, dict) and "name" not in data:
        data = {"name": path.stem, **data}
    return parse_scenario(data, source, overrides)


def to_external(sc: Scenario, bootstrap: str, *, client: dict[str, Any] | None = None,
                commands: dict[str, Any] | None = None, label: str | None = None) -> tuple[Scenario, list[str]]:
    """A scenario (a built-in one, typically) pointed at a cluster the harness does not start,
    with the same load, prefill, actions and checks. Returns the scenario and notes naming what
    did not carry over: the emulated links and the systems' own settings (the cluster's operator
    sets those; each note says how, for a cluster started with ``bench cluster start``). A
    replication throttle carries over in bytes/s (given as a share of the link it is converted
    with the scenario's link rate); the harness sets it with IncrementalAlterConfigs. A matrix over
    ``system.kind`` collapses: every point runs once against the one cluster."""
    kind = next(n for n, p in PROFILES.items() if not p.launched)
    prof = PROFILES[kind]
    data = sc.resolved()
    notes: list[str] = []
    old = data["system"]
    new: dict[str, Any] = {"kind": kind, "brokers": old["brokers"], "bootstrap": bootstrap,
                           "client": {**old.get("client", {}), **(client or {})}}
    settings = sc.settings()  # a share of the link already in bytes/s
    carried = set()
    for st in prof.scenario_settings:
        if settings.get(st.name) is None:
            continue
        new[st.name] = settings[st.name]
        for share, share_st in LINK_SHARES.items():
            if share_target(share_st, sc.profile) == st.name and old[share] is not None:
                carried.add(share)
                notes.append(f"{share_st.noun} {old[share]:g} of the {sc.network.link_rate} link -> "
                             f"{settings[st.name]} bytes/s, set on the cluster's brokers with IncrementalAlterConfigs "
                             f"for the run")
    for share in LINK_SHARES:
        if old.get(share) is not None and share not in carried and share_target(LINK_SHARES[share], sc.profile):
            notes.append(f"system.{share}={old[share]:g} not applied: {sc.system.kind}'s mechanism for it is not "
                         f"the harness's to set on that cluster")
    if commands:
        new["commands"] = dict(commands)
    if label:
        new["label"] = label
    flags = []
    own = reads(prof)
    for f, default in SYSTEM_SETTING_DEFAULTS.items():
        if f in own or old.get(f) == default or f in LINK_SHARES:
            continue
        if f == "extra":
            flags += [f"--config {k}={v}" for k, v in old[f].items()]
        else:
            notes.append(f"system.{f}={old[f]} not applied: a setting of the system the cluster runs")
    if flags:
        notes.append(f"system.extra not applied (the cluster's own settings); a cluster started with "
                     f"`bench cluster start` gets them with: {' '.join(flags)}")
    net = {k: v for k, v in data.get("network", {}).items() if v is not None}
    if net:
        # a latency given by percentiles in its command-line form (p50=30ms,p90=60ms)
        opts = " ".join(f"--{k.replace('_', '-')} {parse_latency(v).text if isinstance(v, dict) else v}"
                        for k, v in net.items())
        notes.append(f"network not applied (the cluster's links are its own); a cluster started with "
                     f"`bench cluster start` gets the same links with: {opts}")
    data["system"] = new
    data["network"] = {}
    matrix = {}
    for key, values in data.get("matrix", {}).items():
        head = key.split(".")
        if key == "system.kind":
            notes.append(f"matrix system.kind {values} dropped: every point runs against the cluster at {bootstrap}")
        elif head[0] == "network" or (head[0] == "system" and head[1] not in own):
            notes.append(f"matrix {key} dropped: not the harness's to set on that cluster")
        else:
            matrix[key] = values
    data["matrix"] = matrix
    return parse_scenario(data, f"{sc.name} (as {kind})"), notes


# --------------------------------------------------------------------------------------------
# Built-in scenarios

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "workloads" / "scenarios"


def builtin_scenarios() -> dict[str, Path]:
    """Built-in name -> file: ``workloads/scenarios/X.yaml`` is ``X``, the fault suite's
    ``workloads/scenarios/faults/X.yaml`` is ``faults/X``."""
    out = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.yaml"))}
    out.update({f"faults/{p.stem}": p for p in sorted((BUILTIN_DIR / "faults").glob("*.yaml"))})
    return out


def resolve_scenario(ref: str) -> Path:
    """A path to a YAML file, or the name of a built-in scenario (``reassign-one``,
    ``faults/kill-source``)."""
    p = Path(ref)
    if p.is_file():
        return p
    builtin = builtin_scenarios()
    if ref in builtin:
        return builtin[ref]
    if ref.endswith((".yaml", ".yml")) or os.sep in ref:
        raise ScenarioError(f"{ref}: <file>: no such file")
    raise ScenarioError(f"{ref}: not a file and not a built-in scenario "
                        f"(built-in: {', '.join(builtin) or 'none'})")
