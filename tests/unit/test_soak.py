"""The soak's memory verdict on hand-made RSS samples (the soak itself is a long harness run,
not part of `make test`)."""
from __future__ import annotations

from bench.cli.soak import MiB, judge


def samples(rss_of_t, seconds: int = 300) -> list[dict]:
    return [{"t": float(t), "rss": {"broker-1": rss_of_t(t), "controller": 50 * MiB}} for t in range(seconds)]


def test_flat_memory_does_not_grow():
    out = judge(samples(lambda t: 40 * MiB), warmup_s=60)
    assert out["broker-1"]["growth_pct"] == 0.0 and out["controller"]["growth_pct"] == 0.0


def test_growth_after_the_warmup_is_measured_from_its_first_window():
    # Fills during the warm-up (not counted), then grows 1 MiB a minute from 40 MiB.
    out = judge(samples(lambda t: (20 + t // 3) * MiB if t < 60 else 40 * MiB + (t - 60) * MiB // 60), warmup_s=60)
    b = out["broker-1"]
    assert b["baseline_mib"] == 40.5 and b["final_mib"] == 43.5 and b["growth_pct"] == 7.41
    assert b["peak_mib"] == 44.0


def test_a_process_without_samples_in_a_window_is_an_error_not_a_pass():
    s = samples(lambda t: 40 * MiB)
    for x in s[-70:]:
        del x["rss"]["broker-1"]  # died before the end
    assert "error" in judge(s, warmup_s=60)["broker-1"]


def test_open_files_are_judged_like_memory_in_counts():
    s = [{"t": float(t), "fds": {"broker-1": 100 + (t // 10 if t >= 60 else 0)}} for t in range(300)]
    b = judge(s, warmup_s=60, key="fds")["broker-1"]
    assert (b["baseline"], b["final"], b["growth"]) == (108.5, 126.5, 18.0) and b["peak"] == 129


def test_the_object_store_is_judged_on_bytes_kept_per_acked_byte():
    from bench.cli.soak import judge_objstore

    def census(t, wal_objects, data_bytes, acked):
        return {"t": t, "acked_bytes": acked,
                "objstore": {"c/wal": {"objects": wal_objects, "bytes": wal_objects * 1000},
                             "c/sso": {"objects": data_bytes // 10_000, "bytes": data_bytes}}}

    steady = [census(t, 5, 1000 * t, 1000 * t) for t in range(30, 300, 30)]
    ok = judge_objstore(steady, warmup_s=60)
    assert ok["baseline_t"] == 60 and ok["final_t"] == 270 and ok["ok"], ok
    leak = [census(t, t, 1000 * t, 1000 * t) for t in range(30, 300, 30)]  # WAL objects never deleted
    bad = judge_objstore(leak, warmup_s=60)
    assert not bad["ok"] and bad["bytes_per_acked_byte"]["final"] > 1.25
    growing = [census(t, t * t // 30, 1000 * t, 1000 * t) for t in range(30, 300, 30)]  # superlinear
    assert not judge_objstore(growing, warmup_s=60)["ok"]
    assert judge_objstore([], warmup_s=60) is None


def test_the_soak_moves_a_partition_every_few_minutes_never_to_where_it_is():
    from types import SimpleNamespace

    from bench.cli.soak import moves, scenario
    from bench.scenario import parse_scenario

    args = SimpleNamespace(minutes=30.0, move_every_minutes=3.0, partitions=6, brokers=3, system="shared",
                           message_bytes=1024, rate=1000.0)
    ms = moves(args)
    assert [m["at_s"] for m in ms] == [180.0 * k for k in range(1, 10)]
    owner = {p: 1 + p % 3 for p in range(6)}
    for m in ms:
        assert m["to"] != [owner[m["partition"]]]
        owner[m["partition"]] = m["to"][0]
    sc = parse_scenario(scenario(args, {}), "soak")
    assert len(sc.actions) == 9 and sc.checks.objstore_census_s == 30.0
