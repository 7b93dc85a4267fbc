"""Safety checkers: lost acknowledged writes, duplicates, reordering, unseen and unexpected reads."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from bench.check.view import (
    FAIL, INFO, OK, EXAMPLES, HistoryView, isin_sorted, sorted_runs, tp_name, tp_of, uniq, as_view,
)
from bench.history.names import EVENT_PREFILL, EVENT_VERIFY


VERDICTS = ("pass", "fail", "unknown")  # a checker's valid True / False / "unknown", in words
# What each safety check counts, by the count's own name (its result's ``<name>_count``)
COUNTED_BY = {"lost": "lost_writes", "duplicated": "duplicates", "corrupted": "corrupted",
              "reordered": "reordering", "lost_prefill": "lost_prefill"}


def safety_counts(checks: dict[str, Any], names=("lost", "duplicated", "corrupted")) -> dict[str, Any]:
    """{name: count} of a summary's ``checks``; None where the check could not count (never 0)."""
    return {n: (checks.get(COUNTED_BY[n]) or {}).get(f"{n}_count") for n in names}


def verdict(valid: Any) -> str:
    """A checker's ``valid`` in words: pass (True), fail (False), else unknown (never a pass)."""
    return "pass" if valid is True else "fail" if valid is False else "unknown"


def verdict_counts(verdicts: Any) -> str:
    """``5 pass, 0 fail, 1 unknown``: each verdict (a word) counted under its own."""
    vs = list(verdicts)
    return ", ".join(f"{vs.count(v)} {v}" for v in VERDICTS)


def check_lost_writes(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Lost writes: sends acknowledged as ok whose ``msg_id`` is never read in the partition it
    was acknowledged on (a copy read in another partition does not count: ``read_elsewhere_count``).

    valid False if any in a partition the verifying consumer read to its end (``verify`` events;
    every partition when the history has none); "unknown" if the only unread ones lie in partitions
    it did not read to the end (``unread_count``, ``unread_by_partition``: not a loss, a read-back
    cut short), or if the history has no reads at all (nothing to compare with; then no count
    either: an unknown check's counts are null, never 0). Reports counts, up to 20 example ids
    (lowest first) and lost counts per partition.
    """
    v = as_view(history, scenario)
    acked = uniq(v.s_id[v.s_out == OK])
    read_ids = v.read_ids
    out: dict[str, Any] = {"acked_count": int(acked.size), "read_count": int(read_ids.size)}
    if read_ids.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", **out}
    # read where it was acked: same topic and partition as the (acked) send row of its msg_id
    sidx = v.read_send_index
    hit = np.flatnonzero(sidx >= 0)
    same = (v.r_topic[hit] == v.s_topic[sidx[hit]]) & (v.r_part[hit] == v.s_part[sidx[hit]])
    missing = acked[~isin_sorted(acked, uniq(v.r_id[hit[same]]))]
    out["read_elsewhere_count"] = int(isin_sorted(missing, read_ids).sum())  # read, but in another partition
    cut_short = {tp_name(*tp) for e in v.events_named(EVENT_VERIFY)
                 if (tp := tp_of(e)) is not None and not e.detail.get("complete")}
    lost, by_partition, unread = missing, {}, {}
    if missing.size:
        rows = np.flatnonzero((v.s_out == OK) & isin_sorted(v.s_id, missing))
        rows = rows[np.argsort(v.s_id[rows], kind="stable")]
        rows = rows[sorted_runs(v.s_id[rows])[1]]  # one row per missing id, ascending
        names = np.array(["unknown" if t < 0 else tp_name(v.topics[t], int(p))
                          for t, p in zip(v.s_topic[rows].tolist(), v.s_part[rows].tolist())], dtype=object)
        in_cut = np.isin(names, sorted(cut_short)) if cut_short else np.zeros(names.size, dtype=bool)
        lost = v.s_id[rows][~in_cut]
        for which, into in ((~in_cut, by_partition), (in_cut, unread)):
            ks, cs = np.unique(names[which].astype(str), return_counts=True) if which.any() else ([], [])
            for k, c in sorted(zip(ks, cs), key=lambda kc: -kc[1])[:50]:
                into[str(k)] = int(c)
    out.update(lost_count=int(lost.size), lost_examples=lost[:EXAMPLES].tolist(), lost_by_partition=by_partition)
    if unread:
        out.update(unread_count=sum(unread.values()), unread_by_partition=unread)
    if lost.size == 0 and unread:
        return {"valid": "unknown", "reason": "acked writes not read back in partitions the verifying consumer "
                f"did not read to the end: {', '.join(sorted(unread)[:EXAMPLES])}", **out}
    return {"valid": lost.size == 0, **out}


def check_duplicates(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Duplicates: a ``msg_id`` read at more than one distinct (topic, partition, offset).

    valid False if any; "unknown" without reads. Examples list each duplicated id's positions.
    """
    v = as_view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "duplicated_count": None}
    pos = v.read_positions
    ids, starts, counts = sorted_runs(pos["id"])  # positions are sorted by msg_id
    dup = counts > 1
    examples = []
    for i in np.flatnonzero(dup)[:EXAMPLES]:
        s, c = starts[i], counts[i]
        examples.append({
            "msg_id": int(ids[i]),
            "positions": [
                {"topic": v.topics[t] if t >= 0 else None, "partition": int(p), "offset": int(o)}
                for t, p, o in zip(pos["topic"][s:s + c], pos["part"][s:s + c], pos["off"][s:s + c])
            ],
        })
    return {
        "valid": not dup.any(),
        "duplicated_count": int(dup.sum()),
        "extra_copies": int((counts[dup] - 1).sum()),
        "examples": examples,
    }


def check_reordering(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Reordering, per (topic, partition, producer), over acked messages only.

    Rule: take every message whose send was acked (outcome ok) and that was read; place it at the
    lowest offset it was read at in that partition (later copies are duplicates, reported by
    ``duplicates``); order by offset. Its ``msg_id`` must then be strictly increasing, because a
    producer assigns ids in send order and acked sends must appear in the log in that order. Each
    position where an id is lower than the id just before it (same topic, partition, producer) is
    one violation ("descent"). Messages whose producer is unknown are skipped and counted.
    valid False if any violation; "unknown" without reads.
    """
    v = as_view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "reordered_count": None}
    pos = v.read_positions
    # First occurrence (lowest offset) per (msg_id, topic, partition): rows are sorted that way.
    n = pos["id"].size
    first = np.ones(n, dtype=bool)
    first[1:] = ((pos["id"][1:] != pos["id"][:-1]) | (pos["topic"][1:] != pos["topic"][:-1])
                 | (pos["part"][1:] != pos["part"][:-1]))
    sidx = v.read_send_index[pos["row"]]
    has_send = sidx >= 0
    acked = np.zeros(n, dtype=bool)
    acked[has_send] = v.s_out[sidx[has_send]] == OK
    prod = v.s_prod[sidx] if v.s_prod.size else np.full(n, -1, dtype=np.int64)
    prod = np.where(has_send, prod, -1)
    prod = np.where(prod >= 0, prod, v.r_prod[pos["row"]])
    sel = first & acked
    unknown_producer = int((sel & (prod < 0)).sum())
    sel &= prod >= 0
    t, p, pr = pos["topic"][sel], pos["part"][sel], prod[sel]
    off, ids = pos["off"][sel], pos["id"][sel]
    order = np.lexsort((off, pr, p, t))
    t, p, pr, off, ids = t[order], p[order], pr[order], off[order], ids[order]
    same = np.zeros(ids.size, dtype=bool)
    same[1:] = (t[1:] == t[:-1]) & (p[1:] == p[:-1]) & (pr[1:] == pr[:-1])
    bad = np.zeros(ids.size, dtype=bool)
    bad[1:] = same[1:] & (ids[1:] < ids[:-1])
    examples = [
        {
            "topic": v.topics[t[i]] if t[i] >= 0 else None, "partition": int(p[i]),
            "producer": v.producers[pr[i]], "offset": int(off[i]), "msg_id": int(ids[i]),
            "prev_offset": int(off[i - 1]), "prev_msg_id": int(ids[i - 1]),
        }
        for i in np.flatnonzero(bad)[:EXAMPLES]
    ]
    return {
        "valid": not bad.any(),
        "reordered_count": int(bad.sum()),
        "checked_messages": int(ids.size),
        "skipped_unknown_producer": unknown_producer,
        "examples": examples,
    }


def check_unseen(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Indeterminate sends that were read anyway: sends with outcome info (unknown, e.g. a
    timeout) or fail whose ``msg_id`` was read. Reported, never a failure (valid True): an info
    send may or may not have been written, and clients report some errors (e.g. a message timed
    out in the client) after the broker already appended it. A high ``fail_read`` count still hints
    that the harness should classify that error as info.
    """
    v = as_view(history, scenario)
    read_ids = v.read_ids
    out: dict[str, Any] = {"valid": True}
    for name, code in (("info", INFO), ("fail", FAIL)):
        ids = uniq(v.s_id[v.s_out == code])
        seen = ids[isin_sorted(ids, read_ids)]
        out[f"{name}_total"] = int(ids.size)
        out[f"{name}_read"] = int(seen.size)
        out[f"{name}_read_examples"] = seen[:EXAMPLES].tolist()
    if read_ids.size == 0:
        out["note"] = "no reads in history"
    return out


def check_unexpected(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Unexpected reads: a harness message (``msg_id >= 0``) read but never sent in this run
    (corruption, or another run's data on a reused cluster). valid False if any; "unknown"
    without reads."""
    v = as_view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "unexpected_count": None}
    ids = uniq(v.r_id[v.read_send_index < 0])
    return {"valid": ids.size == 0, "unexpected_count": int(ids.size),
            "examples": ids[:EXAMPLES].tolist()}




def check_corrupted(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Corrupted reads: a harness message read back whose value's CRC-32 (``digest`` of the read
    row, taken by the verifying consumer, which also has librdkafka check each batch's CRC) is
    not the one its producer sent (``digest`` of the send row). The load stamps each value with
    its message id, so a value served for the wrong message differs too.

    valid False if any; "unknown" without reads; True with ``checked_count`` 0 (and a note) when
    no read has a send digest to compare with (a history from before digests)."""
    v = as_view(history, scenario)
    if v.r_id.size == 0:
        return {"valid": "unknown", "reason": "no reads in history", "corrupted_count": None}
    sidx = v.read_send_index
    both = np.flatnonzero((sidx >= 0) & (v.r_digest >= 0))
    both = both[v.s_digest[sidx[both]] >= 0]
    bad = both[v.r_digest[both] != v.s_digest[sidx[both]]]
    out: dict[str, Any] = {"valid": bad.size == 0, "corrupted_count": int(bad.size), "checked_count": int(both.size),
                           "examples": [{"msg_id": int(v.r_id[i]), "topic": v.topics[v.r_topic[i]] if v.r_topic[i] >= 0
                                         else None, "partition": int(v.r_part[i]), "offset": int(v.r_off[i])}
                                        for i in bad[:EXAMPLES]]}
    if both.size == 0:
        out["note"] = "no read with a digest on both sides: payloads not compared"
    return out


def check_lost_prefill(history: pa.Table | HistoryView, scenario: Any = None) -> dict[str, Any]:
    """Lost prefill: the prefill's records (acked, counted per partition by the ``prefill``
    events; not harness messages, so not tracked one by one) that the verifying consumer did not
    read back (``verify`` events' ``prefill_read``, reading each partition from offset 0). Where the
    prefill lives in object storage when the run ends (tiered storage: all but the local tail),
    this is the check that reads it. valid False if a completely read partition has fewer prefill
    records than were written; "unknown" if a prefilled partition was not read to its end; True
    without a prefill. Counts only: a duplicate prefill record would hide one lost."""
    v = as_view(history, scenario)
    written: dict[tuple[str, int], int] = {}
    for e in v.events_named(EVENT_PREFILL):
        tp, n = tp_of(e), e.detail.get("messages")
        if tp is not None and isinstance(n, int) and n > 0:
            written[tp] = written.get(tp, 0) + n
    if not written:
        return {"valid": True, "note": "no prefill", "prefill_messages": 0, "lost_prefill_count": 0}
    read = {tp_of(e): e.detail for e in v.events_named(EVENT_VERIFY) if tp_of(e) is not None}
    lost: dict[str, int] = {}
    unread = []
    for tp, n in sorted(written.items()):
        d = read.get(tp)
        if d is None or not d.get("complete") or not isinstance(d.get("prefill_read"), int):
            unread.append(f"{tp[0]}-{tp[1]}")
        elif d["prefill_read"] < n:
            lost[f"{tp[0]}-{tp[1]}"] = n - d["prefill_read"]
    out = {"prefill_messages": sum(written.values()),
           "prefill_read": sum(int(d.get("prefill_read") or 0) for tp, d in read.items() if tp in written),
           "lost_prefill_count": sum(lost.values()) if lost or not unread else None,
           "lost_by_partition": lost}
    if lost:
        return {"valid": False, **out}
    if unread:
        return {"valid": "unknown", "reason": f"not read to the end: {', '.join(unread[:EXAMPLES])}", **out}
    return {"valid": True, **out}
