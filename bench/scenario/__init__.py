"""Scenarios: what system to build, what load to apply, what to do to it, what to check.

A scenario is a YAML file validated into frozen pydantic models. Unknown fields are rejected
(a typo must never silently fall back to a default), and every error names the file and the dotted
path of the bad field, e.g. ``reassign-one.yaml: workload.produce_rate_msgs_per_s: must be > 0``.
Dotted paths are the same ones ``--set`` and ``matrix`` use; list items are addressed by index
(``actions.0.to``).

Where things are:

* ``model.py``: the scenario and its sections (``Scenario``, ``Workload``, ...), and the checks
  that cross sections;
* ``system.py``: the ``system`` section, built from the systems' own declared settings
  (``systems/*/profile.py``);
* ``actions/``: one spec per action kind (fields, recovery, needs, validation, execution, how
  figures mark it) and their registry;
* ``loading.py``: YAML files, ``--set`` overrides, built-in scenarios, ``to_external``;
* ``matrix.py``: matrix expansion and run ids; ``paths.py``: dotted paths; ``errors.py``;
* ``scale.py``: the scale model a scenario declares, checked setting by setting.

Conventions the runner relies on:

* Brokers are numbered ``1..system.brokers``; ``add_broker_and_rebalance`` adds the next free id
  (or ``broker`` if given) — see :meth:`Scenario.added_broker_ids`.
* An action's ``action_id`` (used in history events) is its 0-based index in ``actions``; actions
  are listed in time order.
* Faults come in pairs (:data:`FAULT_RECOVERY`): a broker is killed before it is restarted and
  paused before it is resumed, the controller killed before it is restarted, the object store
  (only for a system whose profile has one) stopped before it is started.
"""
from __future__ import annotations

from bench.scenario.actions import (
    COMMAND_FIELDS,
    FAULT_ACTIONS,
    FAULT_RECOVERY,
    LINK_NODES,
    MOVE_ACTIONS,
    NETWORK_ACTIONS,
    RECOVERY_ACTIONS,
    SPECS,
    Action,
    ActionKind,
    PartitionMove,
)
from bench.scenario.errors import ScenarioError
from bench.scenario.fields import BrokerId, Bytes, ConfigValue, Float, TcRate
from bench.scenario.loading import (
    BUILTIN_DIR,
    apply_overrides,
    builtin_scenarios,
    load_scenario,
    parse_scenario,
    resolve_scenario,
    to_external,
    yaml_problem,
)
from bench.scenario.matrix import REPETITION_KEY, expand, run_id_for, split_repetition
from bench.scenario.model import (
    DEFAULT_TOPIC_PREFIX,
    Checks,
    ConsumerSet,
    NetworkSection,
    Prefill,
    Scale,
    Scenario,
    Shape,
    ShapeKind,
    Topic,
    Workload,
)
from bench.scenario.paths import get_path, set_path, split_path
from bench.scenario.system import (
    LOCKED_CLIENT_SETTINGS,
    OWN_SETTINGS,
    SETTINGS,
    SYSTEM_SETTING_DEFAULTS,
    ClientValue,
    Command,
    Commands,
    EnvRef,
    System,
)

__all__ = [
    "Action", "ActionKind", "BUILTIN_DIR", "BrokerId", "Bytes", "COMMAND_FIELDS", "Checks", "ClientValue",
    "Command", "Commands", "ConfigValue", "ConsumerSet", "DEFAULT_TOPIC_PREFIX", "EnvRef", "FAULT_ACTIONS",
    "FAULT_RECOVERY", "Float", "LINK_NODES", "LOCKED_CLIENT_SETTINGS", "MOVE_ACTIONS", "NETWORK_ACTIONS",
    "NetworkSection", "OWN_SETTINGS", "PartitionMove", "Prefill", "RECOVERY_ACTIONS", "REPETITION_KEY", "SETTINGS", "Scale",
    "SPECS", "SYSTEM_SETTING_DEFAULTS", "Scenario", "ScenarioError", "Shape", "ShapeKind", "System", "TcRate",
    "Topic", "Workload", "apply_overrides", "builtin_scenarios", "expand", "get_path", "load_scenario",
    "parse_scenario", "resolve_scenario", "run_id_for", "set_path", "split_path", "split_repetition",
    "to_external", "yaml_problem",
]
