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
