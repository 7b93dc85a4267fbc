"""Record the regression gates' baseline: `make bench-gate-baseline` (python -m tests.benchmarks.baseline).

A baseline is only worth comparing against if one can say what was measured, so this:

1. refuses to run when tracked files differ from HEAD (`git status --porcelain
   --untracked-files=no`; pytest-benchmark's own `dirty` flag is `git describe --dirty`, which
   looks at the same files);
2. runs every gate (tests/benchmarks/test_gate.py, quick and full) with `--benchmark-save=gate`;
   pytest-benchmark stores commit_info (commit, dirty) and machine_info (cores, CPU, kernel,
   Python) in the file;
3. keeps the new file only if every gate passed and it says commit = HEAD, dirty = false; then
   removes the older baselines (`--benchmark-compare` compares with the newest) and refreshes
   the README's gate figures (docs/measurements/gate.json, `python -m bench figures`).

Commit what it changed: the new .benchmarks/ file, the removed old one, docs/measurements/gate.json
and README.md.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / ".benchmarks"
PATTERN = "*/*_gate.json"
# The extra_info the README's gate block quotes (python -m bench figures collect --extra).
README_EXTRA = ["mb_per_cpu_s_median", "rows_per_s_median", "throttle_bytes_per_s",
                "move_time_over_bytes_per_throttle_median", "size_ratio_1GiB_over_64MiB", "over_replication"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def verify(path: Path, head: str) -> list[str]:
    """What is wrong with a saved baseline (empty: nothing)."""
    d = json.loads(path.read_text())
    ci, mi = d.get("commit_info") or {}, d.get("machine_info") or {}
    problems = []
    if ci.get("id") != head:
        problems.append(f"commit_info.id {ci.get('id')} is not HEAD {head}")
    if ci.get("dirty") is not False:
        problems.append(f"commit_info.dirty is {ci.get('dirty')}")
    if not (mi.get("cpu") or {}).get("count") or not mi.get("release"):
        problems.append("machine_info lacks the core count or kernel release")
    if not d.get("benchmarks"):
        problems.append("no benchmarks in it")
    return problems


def main(pytest_args: list[str]) -> int:
    changed = git("status", "--porcelain", "--untracked-files=no")
    if changed:
        print("refusing to record a baseline: tracked files differ from HEAD (commit first):\n" + changed,
              file=sys.stderr)
        return 1
    head = git("rev-parse", "HEAD")
    before = set(STORE.glob(PATTERN))
    rc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/benchmarks/test_gate.py",
                         "--benchmark-only", f"--benchmark-storage=file://{STORE}", "--benchmark-save=gate",
                         *pytest_args], cwd=ROOT, check=False).returncode
    new = sorted(set(STORE.glob(PATTERN)) - before)
    if rc != 0 or len(new) != 1:
        for p in new:
            p.unlink()
        print(f"no baseline recorded: pytest exited {rc} (a baseline must come from a run whose gates pass)",
              file=sys.stderr)
        return rc or 1
    problems = verify(new[0], head)
    if problems:
        new[0].unlink()
        print("no baseline recorded: " + "; ".join(problems), file=sys.stderr)
        return 1
    for p in before:
        p.unlink()
    from bench.report import blocks

    blocks.collect([new[0]], "gate", extra=README_EXTRA)
    blocks.figures()
    print(f"baseline {new[0].relative_to(ROOT)}: commit {head}, clean; removed "
          f"{', '.join(str(p.relative_to(ROOT)) for p in sorted(before)) or 'no older baseline'}; "
          f"docs/measurements/gate.json and the docs block that quotes it refreshed. Commit them.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
