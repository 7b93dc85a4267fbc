"""The architecture rules of DESIGN.md and docs/architecture.md, checked on the source: no import
cycle between modules, layers that import only downwards (`systems/` never imports the harness),
outside the profile registry no harness file compares a system's name (the harness asks the
system's profile instead), no private name imported across modules, short harness modules, and a
results loader that starts no Spark."""
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


# The harness's layers, top to bottom: a module may import its own layer and those below it
# (DESIGN.md: follow the data). bench.results (the aggregate's tables as DataFrames) belongs to the
# analysis layer; bench.units, bench.latency (value parsers), bench.paths and the package root are utilities every
# layer may use; workloads/
# and systems/ lie below the harness.
LAYERS = ("bench.cli", "bench.report", "bench.analysis", "bench.run", "bench.check", "bench.scenario",
          "bench.history", "workloads", "systems")
LAYER_OF = {"bench.results": "bench.analysis", "bench.__main__": "bench.cli"}
UTILITIES = ("bench", "bench.units", "bench.latency", "bench.paths")


def _layer(module: str) -> int | None:
    if module in UTILITIES:
        return None
    module = next((v for k, v in LAYER_OF.items() if module == k or module.startswith(k + ".")), module)
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")), None)


def test_layers_import_only_downwards():
    modules = _modules()
    bad = []
    for m, p in modules.items():
        mine = _layer(m)
        for d in _imports(m, p, modules):
            theirs = _layer(d)
            if mine is not None and theirs is not None and theirs < mine:
                bad.append(f"{m} ({LAYERS[mine]}) imports {d} ({LAYERS[theirs]}, a layer above it)")
            if m in UTILITIES and d.startswith("bench.") and d not in UTILITIES:
                bad.append(f"{m} is a utility but imports {d}")
    assert not bad, "\n".join(bad)


def test_results_loads_no_spark():
    """`bench.results` reads the aggregate's Parquet tables for a notebook: no JVM, no Spark."""
    import subprocess
    import sys

    code = "import bench.results, sys; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


MAX_LINES = 800


def test_no_module_over_800_lines_unless_it_says_why():
    """A harness module a newcomer must read whole stays short; a longer one says in its docstring
    why (a line containing "longer than 800 lines because"). The systems under test are exempt: a
    broker's request handlers are long by nature, and a newcomer to the harness never edits them."""
    long = []
    for pkg in ("bench",):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            text = f.read_text()
            if text.count("\n") > MAX_LINES and "longer than 800 lines because" not in (ast.get_docstring(ast.parse(text)) or ""):
                long.append(f"{f.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not long, "\n".join(long)


def test_no_private_name_imported_across_modules():
    """A name another module needs is public (or moves to where it is used)."""
    offenders = []
    for pkg in (*PACKAGES, "tests"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith((*PACKAGES, "tests")):
                    offenders += [f"{f.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                                  if a.name.startswith("_") and not a.name.startswith("__")]
    assert not offenders, "\n".join(offenders)
