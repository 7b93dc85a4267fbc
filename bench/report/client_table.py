"""The report's table of the load's client libraries during a move (``workload.client_library``,
workloads/clients/; the ``clients-move`` scenario)."""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from bench.report.format import MISSING, fmt_spread


CLIENTS_TITLE = "What each client library met during a move"

CLIENTS_NOTE = (
    "The load's producing library (`workload.client_library`, workloads/clients/), each idempotent with acks=all "
    "and otherwise its own defaults, on the same systems, partition, rate and move. Per system and library, over "
    "its single-partition moves: unavailable s = the moved partition's longest time without an ack; move s = "
    "request -> first ack on the new owner; errors = the produce answers with an error the brokers gave its "
    "producers for the moved partition while the move was unavailable to them (each one a request the client "
    "sent again), per move and by error over all moves; metadata = their Metadata requests in the same window "
    "(how often the library asked where partitions are); p99 = the produce latency's 99th percentile over "
    "the move's window (the run's worst action), median over runs; lost / duplicated = acknowledged messages the read-back "
    "did not find / found twice, over all runs. A library that cannot sustain the target rate against a system "
    "(acked msgs/s below it) measures its own backlog more than the move. Medians [min-max].")

CLIENTS_HEAD = ["system", "library", "runs (checks passed)", "acked msgs/s of target", "moves", "unavailable s", "move s",
                "errors per move",
                "errors by type (all moves)", "metadata per move", "p99 during ms", "lost / duplicated"]


def client_rows(moves: list[dict[str, Any]], latency: list[dict[str, Any]], runs: list[dict[str, Any]],
                label: Any = str) -> list[list[Any]]:
    """Per system and client library (the moves table's ``client_library``), shown when the moves
    were made under more than one library or under another than librdkafka."""
    libs = {m.get("client_library") or "librdkafka" for m in moves}
    if libs <= {"librdkafka"} or not moves:
        return []
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for m in moves:
        if m.get("partitions_in_action") == 1 and m.get("move_seconds") is not None:
            by[(m["system"], m.get("client_library") or "librdkafka")].append(m)
    run_of = {r["run_key"]: r for r in runs}
    p99 = defaultdict(list)
    for x in latency:
        if x.get("level") == "run" and x.get("scope") == "all" and x.get("phase") == "during" and x.get("p99_ms") is not None:
            p99[x["key"]].append(x["p99_ms"])
    out = []
    for (system, lib), ms in sorted(by.items()):
        keys = sorted({m["run_key"] for m in ms})
        rs = [run_of[k] for k in keys if k in run_of]
        passed = sum(1 for r in rs if r.get("valid") == "pass")
        types: dict[str, int] = defaultdict(int)
        for m in ms:
            for k, n in json.loads(m.get("client_errors_json") or "{}").items():
                types[k] += int(n)
        errs = [m["client_error_count"] for m in ms if m.get("client_error_count") is not None]
        meta = [m["client_metadata_requests"] for m in ms if m.get("client_metadata_requests") is not None]
        lat = [max(p99[k]) for k in keys if p99.get(k)]
        lost = sum(int(r.get("lost_count") or 0) for r in rs)
        dup = sum(int(r.get("duplicated_count") or 0) for r in rs)
        rates = [r["acked"] / (r["load_end"] - r["load_start"]) for r in rs
                 if r.get("acked") is not None and r.get("load_end") is not None and r.get("load_start") is not None
                 and r["load_end"] > r["load_start"]]
        target = next((r.get("produce_rate_msgs_per_s") for r in rs if r.get("produce_rate_msgs_per_s")), None)
        out.append([label(system), lib, f"{len(keys)} ({passed})",
                    (fmt_spread(rates) if rates else MISSING) + (f" of {target:g}" if target else ""), len(ms),
                    fmt_spread([m.get("unavailable_seconds") for m in ms if m.get("unavailable_seconds") is not None]),
                    fmt_spread([m["move_seconds"] for m in ms]), fmt_spread(errs) if errs else MISSING,
                    ", ".join(f"{k} {n}" for k, n in sorted(types.items(), key=lambda kv: -kv[1])) or "none",
                    fmt_spread(meta) if meta else MISSING, fmt_spread(lat) if lat else MISSING, f"{lost} / {dup}"])
    return out
