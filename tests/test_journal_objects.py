"""The open's object count reaches the history's `open.*` move_phase rows (the n of open(n))."""
from __future__ import annotations

from bench.history.journal import MoveWindows, translate
from systems.core.profile import JournalMeaning
from systems.registry import profile


def _opened(**extra):
    return {"ts": 105.0, "event": "shared_partition_opened", "source": 4, "topic": "hot", "partition": 0,
            "open_ms": 30.0, "replay_ms": 12.0, "replay_bytes": 900, "recovery": "clean", **extra}


def test_open_phases_carry_objects():
    w = MoveWindows()
    w.add(0, [("hot", 0)], 100.0)
    rows = translate(_opened(data_objects=1024), profile("shared").journal, w)
    phases = {r["detail"]["phase"]: r["detail"] for r in rows if r["event"] == "move_phase"}
    assert set(phases) == {"open.open", "open.replay"}
    assert phases["open.open"]["objects"] == 1024 and phases["open.replay"]["objects"] == 1024
    assert phases["open.open"]["seconds"] == 0.03 and phases["open.open"]["action_id"] == 0


def test_close_phases_have_no_objects():
    rows = translate({"ts": 105.0, "event": "shared_partition_closed", "source": 1, "topic": "hot",
                      "partition": 0, "force_upload_ms": 120.0, "force_upload_bytes": 4096,
                      "data_objects": 1024}, profile("shared").journal)
    (ph,) = [r for r in rows if r["event"] == "move_phase"]
    assert "objects" not in ph["detail"]  # the close walks no object list


def test_generic_mapping_and_missing_count():
    # Any system may name its own count field; no count in the record: no `objects` on the row.
    meaning = JournalMeaning(phase_events={"opened": "open"}, phase_objects={"load_ms": "segments"})
    [_, ph] = translate({"ts": 1.0, "event": "opened", "load_ms": 5.0, "segments": 7}, meaning)
    assert ph["detail"]["phase"] == "open.load" and ph["detail"]["objects"] == 7
    [_, ph] = translate({"ts": 1.0, "event": "opened", "load_ms": 5.0}, meaning)
    assert "objects" not in ph["detail"]
    assert not [r for r in translate(_opened(), profile("shared").journal) if "objects" in r["detail"]]
