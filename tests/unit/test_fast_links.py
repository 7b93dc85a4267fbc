"""Prefill on raised links: every slower link runs at the client link's rate, and is slowed back
only once what the prefill left in flight has drained (no namespaces: a fake network)."""
from __future__ import annotations

from pathlib import Path

from bench.run import observe, runner
from bench.run.runner import Run
from bench.scenario import load_scenario

SWEEP_SHARED = Path(__file__).resolve().parents[2] / "workloads" / "scenarios" / "sweep-shared.yaml"


class FakeNetwork:
    def __init__(self):
        self.rates = {"broker-1": "100mbit", "controller": "100mbit", "objstore": "1gbit", "client": "1gbit"}


class FakeCluster:
    def __init__(self):
        self.network = FakeNetwork()
        self.calls: list[tuple[str, str]] = []

    def set_link_rate(self, name, rate):
        self.calls.append((name, rate))
        self.network.rates[name] = rate


def test_prefill_links_raised_then_restored_after_quiet(tmp_path, monkeypatch):
    sc = load_scenario(SWEEP_SHARED)
    run = Run("x", sc, tmp_path)
    run.cluster = FakeCluster()
    # broker-1 still uploads 5 MB/s for 3 samples (above a tenth of 100mbit), then idles.
    sent = iter([0, 5_000_000, 10_000_000, 15_000_000, 15_000_100, 15_000_200, 15_000_300])
    samples = []

    def link_bytes(_net):
        n = next(sent)
        samples.append(n)
        return {"broker-1": (n, 0), "controller": (0, 0)}

    monkeypatch.setattr(observe, "link_bytes", link_bytes)
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    with run._fast_links():
        assert run.cluster.network.rates["broker-1"] == "1gbit"
        assert run.cluster.network.rates["objstore"] == "1gbit"
        assert ("objstore", "1gbit") not in run.cluster.calls  # already as fast
    assert len(samples) == 6  # 3 busy seconds, then 2 quiet ones in a row
    assert run.cluster.network.rates == {"broker-1": "100mbit", "controller": "100mbit",
                                         "objstore": "1gbit", "client": "1gbit"}


def test_no_network_no_change(tmp_path):
    run = Run("x", load_scenario(SWEEP_SHARED), tmp_path)
    with run._fast_links():
        pass  # no cluster network: nothing to raise, nothing to wait for
