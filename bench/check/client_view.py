"""A move as clients see it (summary.json's moves): through the Kafka protocol alone
(:func:`protocol_view`, on any cluster), and what the load's producers met at the brokers
(:func:`client_requests`, from the brokers' ``client_requests`` lines, systems/core/broker.py:
``client_errors``, ``client_metadata_requests``; the report's client-library table)."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bench.check.view import HistoryView, hashable, tp_of
from bench.history.names import (
    SOURCE_CLIENT,
    EVENT_CLIENT_REQUESTS, EVENT_LEADER_CHANGE, EVENT_LOG_DIRS, EVENT_REASSIGNMENT_CLEARED, EVENT_REASSIGNMENT_LISTED,
    LOG_DIRS_EVERY, POLL_INTERVAL_S, PRODUCER_CLIENT_PREFIX, PROTOCOL_POLL_S,
)


def producer_client_lines(table: pa.Table, v: Any) -> list[Any]:
    """The brokers' client_requests lines about the load's producers (their client ids: the
    prefix and the producer names of the history's sends)."""
    producers = {PRODUCER_CLIENT_PREFIX + str(x) for x in pc.unique(table.column("producer")).to_pylist() if x}
    return [e for e in v.events_named(EVENT_CLIENT_REQUESTS) if e.detail.get("client_id") in producers]


CLIENT_LINE_S = 0.25  # a broker's client_requests line covers its last 0.25 s


def client_requests(lines: list[Any], tp: tuple[str, int], req: float | None, secs: Any,
                    elect_ts: float | None = None) -> dict[str, Any]:
    """What the load's producers met at the brokers while a move was unavailable to them (request ->
    first ack on the new owner, and the broker's last counting interval after it): the produce
    answers with an error for the moved partition, by error (each one a request the client must
    send again), and their Metadata requests (how often they asked where partitions are). From the
    lines' times (older journals have none: then null): the first refusal
    (``client_refused_seconds``), each Metadata request up to the first ack
    (``client_metadata_seconds``) and the first of them at or after the new owner's election
    (``elect_ts``): the query that found the new leader (``client_leader_query_seconds``), all
    seconds from the request."""
    if req is None or not isinstance(secs, (int, float)):
        return {"client_errors": None, "client_metadata_requests": None}
    end = req + secs + CLIENT_LINE_S
    errs: dict[str, int] = {}
    meta = 0
    key = f"{tp[0]}-{tp[1]}"
    timed = False
    refused: list[float] = []
    asked: list[float] = []
    for e in lines:
        if req <= e.ts <= end:
            meta += int(e.detail.get("metadata") or 0)
            for name, n in ((e.detail.get("produce_errors") or {}).get(key) or {}).items():
                errs[name] = errs.get(name, 0) + int(n)
            if "metadata_ts" in e.detail:
                timed = True
                asked += [float(t) for t in e.detail.get("metadata_ts") or () if req <= float(t) <= req + secs]
                first = (e.detail.get("produce_error_ts") or {}).get(key)
                if isinstance(first, (int, float)) and first >= req:
                    refused.append(float(first))
    out: dict[str, Any] = {"client_errors": dict(sorted(errs.items())), "client_metadata_requests": meta}
    if timed:
        asked.sort()
        found = [t for t in asked if elect_ts is not None and t >= elect_ts]
        out.update({"client_refused_seconds": round(min(refused) - req, 4) if refused else None,
                    "client_metadata_seconds": [round(t - req, 4) for t in asked],
                    "client_leader_query_seconds": round(found[0] - req, 4) if found else None})
    return out


def protocol_view(v: HistoryView, aid: Any, tp: tuple[str, int], req: float | None, src: list[int] | None,
                  to: list[int] | None, journal_complete_ts: float | None) -> dict[str, Any] | None:
    """One move as the Kafka protocol alone shows it (bench/run/observe.py), to set beside the
    brokers' journals on the harness's own systems and to stand for them on any other cluster:

    * ``leader_change_seconds``: request -> the metadata poller first sees a target lead;
    * ``reassignment_seconds``: request -> ListPartitionReassignments no longer lists the partition
      (null if it never listed it: a move the cluster completes within one poll, or does not
      report as a reassignment);
    * ``target_bytes``: DescribeLogDirs size of each added replica at the first sample after the
      reassignment cleared (else after the leader change);
    * ``journal_complete_seconds``: the brokers' own move_complete, where a journal exists.

    Resolution: one poll of each (``resolution_s``). None for a move that was never requested."""
    if req is None:
        return None
    added = sorted(set(to or ()) - set(src or ()))
    lc = next((e for e in v.events_named(EVENT_LEADER_CHANGE)
               if e.ts >= req and tp_of(e) == tp and e.detail.get("source") == SOURCE_CLIENT
               and e.detail.get("leader") in (to or ())), None)
    listed = [e for e in v.events_named(EVENT_REASSIGNMENT_LISTED) if e.ts >= req - 1.0 and tp_of(e) == tp
              and hashable(e.action_id) in (aid, None)]
    cleared = next((e for e in v.events_named(EVENT_REASSIGNMENT_CLEARED) if e.ts >= req and tp_of(e) == tp
                    and hashable(e.action_id) in (aid, None)), None) if listed else None
    after = cleared.ts if cleared is not None else (lc.ts if lc is not None else None)
    target_bytes = None
    if after is not None and added:
        key = f"{tp[0]}-{tp[1]}"
        sample = next((e for e in v.events_named(EVENT_LOG_DIRS) if e.ts >= after
                       and all(str(b) in (e.detail.get("sizes") or {}).get(key, {}) for b in added)), None)
        if sample is not None:
            target_bytes = {str(b): sample.detail["sizes"][key][str(b)] for b in added}
    return {
        "leader_change_seconds": lc.ts - req if lc is not None else None,
        "reassignment_listed": bool(listed),
        "reassignment_seconds": cleared.ts - req if cleared is not None else None,
        "target_bytes": target_bytes,
        "journal_complete_seconds": journal_complete_ts - req if journal_complete_ts is not None else None,
        "resolution_s": {"metadata": POLL_INTERVAL_S, "reassignments": PROTOCOL_POLL_S,
                         "log_dirs": PROTOCOL_POLL_S * LOG_DIRS_EVERY},
    }
