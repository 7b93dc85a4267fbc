"""Journal translation: the open's object count reaches the history's `open.*` move_phase rows (the n of
open(n)); records about internal topics stay apart."""
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


def test_the_old_owners_close_start_becomes_the_moves_first_refusal():
    """A shared close starts with the old owner refusing the partition's writes: its journal's
    `shared_partition_closing` is the move's `writes_refused` (the origin of the client's leader
    queries in the handover model), attributed to the moving action."""
    w = MoveWindows()
    w.add(3, [("hot", 0)], 100.0)
    [row] = translate({"ts": 100.04, "event": "shared_partition_closing", "source": 1, "topic": "hot",
                       "partition": 0, "reason": "moved", "end_offset": 77}, profile("shared").journal, w)
    assert row["event"] == "writes_refused" and row["ts"] == 100.04 and row["detail"]["action_id"] == 3
    assert row["detail"]["journal_event"] == "shared_partition_closing" and row["detail"]["end_offset"] == 77
    [row] = translate({"ts": 100.04, "event": "shared_partition_closing", "source": 1, "topic": "hot",
                       "partition": 0}, profile("replication").journal, w)
    assert row["event"] == "shared_partition_closing"  # a system whose profile does not say so: kept as is


def test_generic_mapping_and_missing_count():
    # Any system may name its own count field; no count in the record: no `objects` on the row.
    meaning = JournalMeaning(phase_events={"opened": "open"}, phase_objects={"load_ms": "segments"})
    [_, ph] = translate({"ts": 1.0, "event": "opened", "load_ms": 5.0, "segments": 7}, meaning)
    assert ph["detail"]["phase"] == "open.load" and ph["detail"]["objects"] == 7
    [_, ph] = translate({"ts": 1.0, "event": "opened", "load_ms": 5.0}, meaning)
    assert "objects" not in ph["detail"]
    assert not [r for r in translate(_opened(), profile("shared").journal) if "objects" in r["detail"]]


def test_records_about_internal_topics_stay_out_of_the_checkers_sight():
    """The group coordinator's `__consumer_offsets` partitions change leaders and move bytes too;
    those records are kept as `internal_topic` events, never as leader changes or move costs."""
    w = MoveWindows()
    w.add(7, [("__consumer_offsets", 3)], 100.0)
    for rec in ({"ts": 101.0, "event": "leader_change", "source": "controller", "topic": "__consumer_offsets",
                 "partition": 3, "leader": 2},
                {"ts": 101.5, "event": "bytes_moved", "source": 2, "kind": "objstore", "bytes": 512,
                 "topic": "__consumer_offsets", "partition": 3}):
        [row] = translate(rec, profile("shared").journal, w)
        assert row["event"] == "internal_topic" and row["topic"] == "__consumer_offsets"
        assert row["detail"]["journal_event"] == rec["event"] and "action_id" not in row["detail"]
    [row] = translate({"ts": 102.0, "event": "group_rebalanced", "source": 2, "group": "g", "generation": 3},
                      profile("shared").journal)
    assert row["event"] == "group_rebalanced"  # the coordinator's own events are kept as they are


def test_a_leaders_tiered_start_becomes_the_moves_copy_start():
    """The tiered leader's answer to a new replica (the profile's copy_start event) is the history's
    copy_start, attributed to the move that moves the partition; its own name is kept."""
    w = MoveWindows()
    w.add(2, [("hot", 0)], 100.0)
    rec = {"ts": 100.4, "event": "tiered_copy_from", "source": 1, "topic": "hot", "partition": 0, "replica": 4,
           "offset": 2048, "bytes_to_copy": 3_145_728, "local_bytes": 8_388_608, "tiered_bytes": 60_000_000,
           "partition_bytes": 68_000_000}
    [row] = translate(rec, profile("tiered").journal, w)
    assert row["event"] == "copy_start" and (row["topic"], row["partition"]) == ("hot", 0)
    d = row["detail"]
    assert d["journal_event"] == "tiered_copy_from" and d["action_id"] == 2 and d["bytes_to_copy"] == 3_145_728
    # another system's profile does not read that event: kept as it is
    [row] = translate(rec, profile("replication").journal, w)
    assert row["event"] == "tiered_copy_from"
    # the replica's rebuild from object storage is a move phase with object-store bytes
    rows = translate({"ts": 100.6, "event": "tiered_replica_built", "source": 4, "topic": "hot", "partition": 0,
                      "from_offset": 2048, "start": "last_tiered_offset", "aux_state_ms": 40.0,
                      "aux_state_bytes": 5000, "log_start_offset": 0}, profile("tiered").journal, w)
    phases = [r["detail"] for r in rows if r["event"] == "move_phase"]
    counters = [r["detail"] for r in rows if r["event"] == "counter"]
    assert [(p["phase"], p["bytes"]) for p in phases] == [("tier.aux_state", 5000)]
    assert [(c["name"], c["value"]) for c in counters] == [("bytes_moved_objstore", 5000)]


def test_a_partition_moved_again_at_once_keeps_each_move_s_events():
    """Moves of one partition back to back (calibrate moves i2 there, back and again): the earlier
    move's completion, logged a fraction of a second before the next move's request, is its own."""
    w = MoveWindows()
    w.add(6, [("i2", 0)], 100.0)
    w.end(6, 103.6)
    w.add(7, [("i2", 0)], 103.7)  # requested 0.2 s after move 6's completion was logged
    assert w.action_for(("i2", 0), 103.5) == 6
    assert w.action_for(("i2", 0), 105.0) == 7  # inside both windows (6's grace): the later one
    assert w.action_for(("i2", 0), 99.5) == 6  # up to 1 s before a request (clock skew)
    assert w.action_for(("i2", 0), 98.0) is None
