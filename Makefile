# Everything goes through the project's virtualenv; the first use creates it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test bench report bench-throughput bench-network bench-gate bench-gate-quick clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The whole suite, integration tests with real clients included (benchmarks are skipped).
test: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -q

# The main job: both systems, reassign-one at two partition sizes and broker-loss,
# then the comparison table.
bench: $(STAMP)
	$(PY) -m bench suite default
	$(PY) -m bench aggregate results
	$(PY) -m bench report

# Spark aggregation of every run under results/, then the HTML + Markdown report.
report: $(STAMP)
	$(PY) -m bench aggregate results
	$(PY) -m bench report

# Broker throughput, replication and shared-storage benchmarks (pytest-benchmark), recorded in
# README; the move benchmarks are harness runs (tests/benchmarks/runs.py). About 6 minutes.
bench-throughput: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider tests/benchmarks/test_broker_throughput.py tests/benchmarks/test_replication_bench.py \
		tests/benchmarks/test_shared_bench.py --benchmark-only --benchmark-columns=median,min,max,rounds -q -s

# Moves, contention and the shared system's object-store bound on emulated links (issue 11's
# figures, docs/measurements/network.md); needs root or CAP_NET_ADMIN. About 12 minutes.
bench-network: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider tests/benchmarks/test_network_bench.py --benchmark-only \
		--benchmark-columns=median,min,max,rounds -q -s

# Regression gates: compare with the baseline saved in .benchmarks/, fail if a median is more
# than 35% slower (this 2-core machine's own run-to-run spread is up to ~30%).
# Re-baseline: the same command with --benchmark-save=gate instead of the compare options.
GATE = $(PY) -m pytest -p no:cacheprovider tests/benchmarks/test_gate.py --benchmark-only \
	--benchmark-storage=file://.benchmarks --benchmark-compare --benchmark-compare-fail=median:35% \
	--benchmark-columns=median,min,max,rounds -q

bench-gate: $(STAMP)
	$(GATE)

bench-gate-quick: $(STAMP)
	$(GATE) -k quick

clean:
	rm -rf $(VENV) results/*/ .pytest_cache
