"""Progress and ETA of moves (bench/run/move_progress.py): the tracker's arithmetic on fixed
observations (the CLI on a real throttled copy move: tests/systems/test_move_progress.py)."""
from __future__ import annotations

from bench.run.move_progress import Observation, Tracker, describe

TP = ("t", 0)


def _obs(ts, size4, lag4, *, leader_size=100_000, start=0, end=1000, isr=(1, 2, 3)):
    return Observation(ts=ts, ongoing={TP: {"replicas": [4, 2, 3], "adding": [4], "removing": [1]}},
                       leaders={TP: 1}, isr={TP: list(isr)},
                       sizes={TP: {1: leader_size, **({} if size4 is None else {4: size4})}},
                       lags={TP: {1: 0, **({} if size4 is None else {4: lag4})}}, offsets={TP: (start, end)})


def test_tracker_rate_and_eta():
    """Remaining = the new replica's offset lag x the leader's bytes per offset; rate and ETA over
    the window; a replica not created yet owes the leader's whole local log."""
    tr = Tracker(window_s=5.0)
    (p,) = tr.update(_obs(100.0, None, 0))
    assert (p.done_bytes, p.remaining_bytes, p.to_move_bytes, p.rate_bytes_per_s) == (0, 100_000, 100_000, None)
    (p,) = tr.update(_obs(102.0, 20_000, 800))  # 100 B per offset: 80,000 B to go
    assert (p.done_bytes, p.remaining_bytes) == (20_000, 80_000)
    assert p.rate_bytes_per_s == 10_000 and p.eta_s == 80_000 / 10_000
    # Tiered storage: the replica started at offset 600 of 1000, so its lag, not the leader's
    # size, is what is left: 100 offsets x 100 B.
    (p,) = tr.update(_obs(104.0, 30_000, 100))
    assert (p.done_bytes, p.remaining_bytes, p.to_move_bytes) == (30_000, 10_000, 40_000)
    # Not gaining (ingest as fast as the copy): no ETA.
    tr2 = Tracker(window_s=5.0)
    tr2.update(_obs(0.0, 10_000, 500))
    (p,) = tr2.update(_obs(1.0, 20_000, 500, leader_size=110_000, end=1100))
    assert p.rate_bytes_per_s == 10_000 and p.eta_s is None and "not gaining" in describe(p)
    # The window: only the last 5 s count.
    tr3 = Tracker(window_s=5.0)
    for i, (size, lag) in enumerate([(0, 1000), (1000, 990), (2000, 980), (50_000, 500), (60_000, 400),
                                     (70_000, 300), (80_000, 200), (90_000, 100)]):
        (p,) = tr3.update(_obs(float(i * 2), size, lag))
    assert p.rate_bytes_per_s == (90_000 - 60_000) / 6  # base: the newest sample >= 5 s old (t=8)
    # Records of mixed sizes (large prefill records first): 9 of the 10 60 kB records copied, 991 of
    # 1000 offsets to go; the leader's bytes less the replica's bound the lag's average.
    (p,) = Tracker().update(_obs(0.0, 54_000, 991))
    assert p.remaining_bytes == 100_000 - 54_000
    # Handover (shared storage): nothing copied.
    (h,) = Tracker(copies=False).update(_obs(0.0, None, 0))
    assert h.to_move_bytes is None and "no data copied" in describe(h)


class ConfigsAdmin:
    """DescribeConfigs as kafka-python returns it: each config a dict of its data."""

    def __init__(self, configs: dict[str, str]) -> None:
        self.configs = configs

    def describe_cluster(self):
        return {"brokers": [{"broker_id": 2}, {"broker_id": 1}]}

    def describe_configs(self, resources, config_filter="all"):
        (r,) = resources
        assert r.name == "1"  # the lowest-numbered broker
        return {"broker": {"1": {k: {"value": v, "read_only": False} for k, v in self.configs.items()}}}


def test_the_system_of_a_cluster_from_its_brokers_configs_as_kafka_python_returns_them():
    from bench.run.move_progress import broker_configs, system_of
    from systems.shared.settings import DEFAULTS

    tiered = broker_configs(ConfigsAdmin({"remote.log.storage.system.enable": "true", "num.network.threads": "3"}))
    assert tiered["remote.log.storage.system.enable"] == "true" and system_of(tiered) == "tiered"
    assert system_of(broker_configs(ConfigsAdmin({"num.network.threads": "3"}))) == "replication"
    shared = broker_configs(ConfigsAdmin({k: str(v) for k, v in DEFAULTS.items()}))
    assert system_of(shared) == "shared"
