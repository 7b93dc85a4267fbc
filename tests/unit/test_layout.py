"""The architecture rules of DESIGN.md, checked on the source: no import cycle between modules,
`systems/` never imports the harness, and outside the profile registry no harness file compares a
system's name (the harness asks the system's profile instead)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from systems.registry import NAMES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bench", "systems", "workloads")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules imported by `name` (module level and inside functions alike)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def test_no_import_cycle():
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    # A package's __init__ importing its own submodules is how packages re-export: not a cycle.
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not (d.startswith(m + ".") and modules[m].name == "__init__.py")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_systems_never_import_the_harness():
    modules = _modules()
    bad = [(m, d) for m, p in modules.items() if m.startswith("systems")
           for d in _imports(m, p, modules) if d.split(".")[0] == "bench"]
    assert not bad, bad


def test_harness_never_compares_a_system_name():
    """String literals naming a system, outside docstrings and comments, only in the registry."""
    names = "|".join(re.escape(n) for n in NAMES)
    offenders = []
    for f in sorted((ROOT / "bench").rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and re.fullmatch(names, node.value)):
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not offenders, "ask the system's profile instead:\n" + "\n".join(offenders)


def test_scenario_layer_never_imports_the_runner():
    """bench/scenario (and what it stands on, bench/history) act through protocols that bench/run
    implements (bench/scenario/actions/context.py); they import no layer above them."""
    modules = _modules()
    above = ("bench.run", "bench.check", "bench.analysis", "bench.report", "bench.cli")
    bad = [(m, d) for m, p in modules.items() if m.split(".")[:2] in (["bench", "scenario"], ["bench", "history"])
           for d in _imports(m, p, modules) if d.startswith(above)]
    assert not bad, bad


def test_no_private_name_imported_across_modules():
    """A name another module needs is public (or moves to where it is used). Checked for the
    packages issue 27 cleaned; the integrator widens it."""
    offenders = []
    for pkg in ("bench/scenario", "bench/run", "bench/history"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGES):
                    offenders += [f"{f.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                                  if a.name.startswith("_") and not a.name.startswith("__")]
    assert not offenders, "\n".join(offenders)
