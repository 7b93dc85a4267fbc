"""The tiered copy's measured bytes relation (KIP-1023's untiered tail): its rows from sampled
events, its walk-forward check, and the projection that rests on it instead of an assumption."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from bench.analysis import model as mdl
from bench.analysis import projection
from bench.analysis.aggregate.fits import untiered_relations, untiered_steady
from bench.analysis.aggregate.rows import untiered_rows
from bench.check.view import Event
from bench.history.names import EVENT_UNTIERED
from tests.unit.test_projection import production_tiered

MiB = 1 << 20
S = 10 * MiB


def _row(rho, mean_segments, *, key="r1", version="abc", seg=S, interval=30.0, steady=120.0, part=0):
    ingest = rho * seg / interval
    return {"run_key": key, "system": "tiered", "config_key": "cfg", "version": version, "topic": f"t{rho}",
            "partition": part, "segment_bytes": float(seg), "upload_interval_s": interval,
            "ingest_bytes_per_s": ingest, "backlog_segments": rho, "samples": 120, "steady_seconds": steady,
            "mean_bytes": mean_segments * seg, "max_bytes": 2 * mean_segments * seg, "p95_bytes": 1.8 * mean_segments * seg}


def _levels(a=0.5, b=0.5, rhos=(0.7, 1.4, 2.9), version="abc"):
    return [_row(r, a + b * r, version=version, part=k) for r in rhos for k in range(3)]


def test_the_relation_recovers_a_linear_tail_in_segments():
    rel = mdl.fit_untiered(_levels(0.45, 0.6))
    assert rel["a"] == pytest.approx(0.45) and rel["b"] == pytest.approx(0.6)
    assert rel["backlog"] == [0.7, 2.9] and rel["version"] == "abc"
    # at the article's partition: 100 MB/s, 1 GiB segments, 30 s tasks
    assert mdl.untiered_tail(rel, 2**30, 100e6, 30.0) == pytest.approx(2**30 * 0.45 + 0.6 * 100e6 * 30)


def test_a_fit_with_a_row_at_the_held_out_backlog_or_of_another_commit_is_refused():
    with pytest.raises(mdl.FitRefused, match="held-out"):
        mdl.fit_untiered(_levels(), held_out=2.9)
    with pytest.raises(mdl.FitRefused, match="code versions"):
        mdl.fit_untiered(_levels(rhos=(0.7,)) + _levels(rhos=(1.4,), version="def"))
    with pytest.raises(ValueError, match="need 2"):
        mdl.fit_untiered(_levels(rhos=(0.7,)))


def _tiered_model(version="abc"):
    m = mdl.fit_model([p for p in production_tiered() if p.link_demand < 1], "tiered")
    return replace(m, version=version)


def test_the_check_holds_out_the_highest_backlog_and_attaches_the_relation():
    m = _tiered_model()
    models, checks = untiered_relations(_levels(0.5, 0.5), {"tiered": m})
    (c,) = checks
    assert c["status"] == "ok" and c["axis"] == "untiered" and c["held_out"] == {"untiered": 2.9}
    assert c["error_pct"] == pytest.approx(0.0, abs=1e-6) and c["train_values"] == [0.7, 1.4]
    assert c["n_train"] == 6 and c["n_test"] == 3 and c["fit"]["version"] == "abc"
    assert models["tiered"].untiered["b"] == pytest.approx(0.5)
    # a tail that bends away from the line above the fitted backlogs fails the check
    bent = _levels(0.5, 0.5, rhos=(0.7, 1.4)) + [_row(2.9, 3.0, part=k) for k in range(3)]
    _, (c,) = untiered_relations(bent, {"tiered": m})
    assert c["status"] == "failed" and c["error_pct"] < -30


def test_rows_of_another_commit_or_too_short_a_window_do_not_count():
    m = _tiered_model("abc")
    models, (c,) = untiered_relations(_levels(version="def"), {"tiered": m})
    assert c["status"] == "insufficient" and "another" in c["reason"] and models["tiered"].untiered is None
    # 60 s of a 250 kB/s partition holds two upload intervals but not two segment rolls (84 s)
    assert not untiered_steady(_row(0.7, 0.85, steady=60.0))
    assert untiered_steady(_row(0.7, 0.85, steady=90.0)) and untiered_steady(_row(1.4, 1.2, steady=60.0))


def test_the_headline_rests_on_the_measured_relation_not_the_assumption():
    m = _tiered_model()
    val = mdl.validate(production_tiered(), "tiered")
    val = [dict(v, fit=dict(v.get("fit") or {}, version="abc")) for v in val]
    models, checks = untiered_relations(_levels(0.5, 0.5), {"tiered": m})
    v = projection.validity("tiered", val)
    assert v.validated, v.reason
    before = projection.partition_case("tiered", m, v, 10.0, 8.2e12, "8.2 TB", val)
    assert before["status"] == "not validated" and "assumption" in before["reason"]
    after = projection.partition_case("tiered", models["tiered"], v, 10.0, 8.2e12, "8.2 TB", val + checks)
    assert after["status"] == "validated", after["reason"]
    assert after["validity"]["untiered"]["within"] and after["validity"]["untiered"]["factor"] < 1
    assert "measured" in after["basis"] and "0.5 + 0.5" in after["basis"]
    # the copy is the relation's mean: half a segment + half of 30 s of ingest
    assert models["tiered"].kind.partition_case(models["tiered"], 1e9, 8.2e12, "8.2 TB", 100e6)[4]["bytes"] == \
        pytest.approx(0.5 * 2**30 + 0.5 * 100e6 * 30)
    # without a passing check of the relation, its axis is not checked: not validated
    failed = [dict(checks[0], status="failed")]
    nv = projection.partition_case("tiered", models["tiered"], v, 10.0, 8.2e12, "8.2 TB", val + failed)
    assert nv["status"] == "not validated" and "segments" in nv["reason"]


def _run(events, *, load=(100.0, 200.0), interval=30.0, ingest=250_000.0):
    sc = SimpleNamespace(nominal_ingest_of=lambda topic: ingest)
    view = SimpleNamespace(events_named=lambda name: [e for e in events if e.event == name])
    return SimpleNamespace(run_key="run1", system="tiered", config_key="cfg", scenario=sc, view=view,
                           stats={"load_start": load[0], "load_end": load[1]},
                           summary={"provenance": {"git": {"commit": "abc", "dirty": False}}})


def _sample(ts, untiered, last=5, local=4 * S):
    return Event(EVENT_UNTIERED, ts, None, None, {
        "segment_bytes": S, "upload_interval_s": 30.0,
        "partitions": {"a1-0": {"leader": 1, "end": 100, "local_start": 0, "last_tiered": last,
                                "local_bytes": local, "untiered_bytes": untiered}}})


def test_rows_take_the_steady_window_from_the_first_upload_after_the_load_start():
    # three segments untiered at the load's start: steady from the first task's upload (at 131 s)
    ev = [_sample(101.0, 3 * S, last=-1), _sample(110.0, 3 * S + MiB, last=-1), _sample(131.0, 2 * MiB),
          _sample(160.0, 4 * MiB), _sample(199.0, 6 * MiB), _sample(230.0, 999 * S)]
    (row,) = untiered_rows([_run(ev)])
    assert row["topic"] == "a1" and row["partition"] == 0 and row["version"] == "abc"
    assert row["samples"] == 3 and row["mean_bytes"] == pytest.approx(4 * MiB) and row["max_bytes"] == 6 * MiB
    assert row["steady_seconds"] == pytest.approx(69.0)
    assert row["backlog_segments"] == pytest.approx(250_000 * 30 / S)
    assert untiered_rows([_run([])]) == []
    # at most a segment untiered at the load's start (the active one): steady at once
    one = [_sample(101.0, S // 2, local=S // 2), _sample(150.0, S, local=S)]
    (row,) = untiered_rows([_run(one)])
    assert row["samples"] == 2 and row["steady_seconds"] == pytest.approx(100.0)


def test_untiered_bytes_count_a_prefill_s_large_records_at_their_size():
    from bench.run.observe import untiered_bytes

    pre = {"bytes": 64 * 64 * 1024, "messages": 64, "first_offset": 0, "last_offset": 63}  # 4 MiB, 64 KiB each
    local = pre["bytes"] + 1000 * 4200  # then 1000 load records of 4.2 kB
    # the last 100 load records untiered: 420 kB, not 100 x the log's mean (8.3 kB)
    assert untiered_bytes(local, 0, 1064, 963, pre) == 420_000
    # the prefill's last 4 records and every load record untiered
    assert untiered_bytes(local, 0, 1064, 59, pre) == 4 * 65536 + 4_200_000
    assert untiered_bytes(local, 0, 1064, -1, pre) == local  # nothing tiered: the whole local log
    assert untiered_bytes(10_000, 0, 100, 49, None) == 5_000  # no prefill: the log's mean
