"""The report's and summary.md's tables: for each, its title, note, header and row builder (the
units bench/report/sections.py lists in order). Rows come from the aggregate's tables; nothing here
computes a figure the aggregate has not."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

from bench.analysis import cost
from bench.analysis.aggregate.discovery import UNKNOWN, setting_text
from bench.check.host import MIN_SAMPLES, SATURATED_BUSY_PCT, STEAL_NOTICE_PCT
from bench.check.metrics import MOVE_METRICS, MoveMetric
from bench.check.safety import VERDICTS, verdict_counts
from bench.check.summary import current_configuration, upgrade_summary
from bench.history.names import OBJSTORE_REQUEST_KINDS
from bench.check.windows import PHASES
from bench.scenario.scale import STANDS_FOR
from bench.history.names import EVENT_LEADER_CHANGE
from bench.report.format import (
    MISSING, cfg_spread, commit_label, count_text, fmt_num, fmt_range, fmt_spread, label, runs_of, short, systems_of,
)
from bench.units import format_bytes
from systems.registry import PROFILES
from workloads.messages import PRODUCER_LINGER_MS


SPREAD_NOTE = ("Figures per configuration: median (min–max) over its runs' moves, faults or runs (runs: how many); "
               "one value when all agree. Produce latency p99 of the first moved (else faulted) partitions, pooled "
               "from the raw samples of all the runs: before the action, and during it (a move: request to its "
               "end; a fault: until the next action, its recovery). Producer unavailable s: a run's longest time "
               "any partition went without an ack over the whole load.")


RESULT_HEAD = ["configuration", "runs", "move s", "unavailable s (move)", "outage s (fault)", "recovery s",
               "producer unavailable s", "p99 before (ms)", "p99 during (ms)", "lost", "duplicated", "verdicts"]


def result_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per configuration: its moves', faults' and producers' figures with their spread."""
    return [[c["config_label"] or c["config_key"], runs_of(c), cfg_spread(c, "move_seconds"),
             cfg_spread(c, "unavailable_seconds"), cfg_spread(c, "outage_seconds"), cfg_spread(c, "recovery_seconds"),
             cfg_spread(c, "producer_unavailable_seconds"), fmt_num(c["before_p99_ms"]), fmt_num(c["during_p99_ms"]),
             count_text(c["lost_count"]), count_text(c["duplicated_count"]),
             ", ".join(f"{c[f'valid_{v}']} {v}" for v in VERDICTS)] for c in configs]


BYTES_HEAD = ["configuration", "runs", "partition at the request", "leader's bytes to copy (tiered start)",
              "bytes moved", "of which partition at the request", "of which written during the move"]


def bytes_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    """``leader's bytes to copy``: what a tiered leader told the new replica to copy at the
    request (the local tail after the last tiered offset or from its local log start); – where
    the new replica copied the whole log (no such answer)."""
    return [[c["config_label"] or c["config_key"], runs_of(c), cfg_spread(c, "partition_bytes", format_bytes),
             cfg_spread(c, "copy_bytes_at_request", format_bytes),
             cfg_spread(c, "bytes_moved", format_bytes), cfg_spread(c, "bytes_moved_at_request", format_bytes),
             cfg_spread(c, "bytes_moved_during_move", format_bytes)] for c in configs if c["moves"]]


MORE_MOVES_TITLE = "More move figures per configuration"
MORE_MOVES_NOTE = ("The per-move metrics declared in bench/check/metrics.py that no other table shows: median "
                   "(min–max) over each configuration's moves.")


def more_move_metrics() -> list[MoveMetric]:
    """The declared per-move metrics this table shows (those no table of their own shows)."""
    return [m for m in MOVE_METRICS if m.report_column]


def more_moves_head() -> list[str]:
    return ["configuration", "runs", *[m.label for m in more_move_metrics()]]


def more_moves_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    metrics = more_move_metrics()
    return [[c["config_label"] or c["config_key"], runs_of(c),
             *[cfg_spread(c, m.name, format_bytes if m.fmt == "bytes" else fmt_num) for m in metrics]]
            for c in configs if c["moves"]]


PROTOCOL_HEAD = ["configuration", "runs", "move_seconds (first ack on the new owner)", "a client sees a target lead",
                 "reassignment no longer listed", "journal: move complete", "bytes moved (journal)",
                 "added replicas' size (DescribeLogDirs)"]


PROTOCOL_NOTE = (
    "Each move as the Kafka protocol alone shows it, the view the harness has of any cluster it does not "
    "start, beside the brokers' own journal where there is one (seconds from the request; medians, min-max "
    "over runs). The protocol view's resolution is one poll: Metadata every {metadata:g} s, "
    "ListPartitionReassignments every {reassignments:g} s, DescribeLogDirs every {log_dirs:g} s. "
    "'-': not seen that way (a cluster that completes a move within one poll, or does not list it as "
    "a reassignment; no journal outside the harness's own systems).")


PROTOCOL_TITLE = "Moves as the Kafka protocol shows them"


def protocol_note() -> str:
    from bench.history.names import LOG_DIRS_EVERY, POLL_INTERVAL_S, PROTOCOL_POLL_S

    return PROTOCOL_NOTE.format(metadata=POLL_INTERVAL_S, reassignments=PROTOCOL_POLL_S,
                                log_dirs=PROTOCOL_POLL_S * LOG_DIRS_EVERY)


def protocol_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    return [[c["config_label"] or c["config_key"], runs_of(c), cfg_spread(c, "move_seconds"),
             cfg_spread(c, "protocol_leader_change_seconds"), cfg_spread(c, "protocol_reassignment_seconds"),
             cfg_spread(c, "journal_complete_seconds"), cfg_spread(c, "bytes_moved", format_bytes),
             cfg_spread(c, "protocol_target_bytes", format_bytes)] for c in configs if c["moves"]]


ESTIMATE_TITLE = "Estimates before each move against what it took"

ESTIMATE_NOTE = (
    "Before each move's request the run estimated it as `bench reassign --estimate` does on any cluster (one "
    "code path, bench/run/move_estimate.py): the moved partition's size and ingest from two DescribeLogDirs "
    "samples {window:g} s apart, the brokers' throttles, the emulated link, and a move-time model from runs "
    "stored *before* this one (its commit in the last column; never the run's own moves). Error = (estimate - "
    "move_seconds) / move_seconds: + the estimate was long, - short. Band: the model's own error band, as "
    "--estimate prints it. Of an outcome: within 15 % of the estimate or of one of the times it listed (a "
    "handover lands at the first of the producers' leader queries after its election: the estimate lists each "
    "query the unknown tail and the retry jitter may make it, with its chance). Moves an action made alone only: a move of a drain or a rebalance counts from the "
    "action's request, its wait for a free slot included (summary.json's actions set the action's total "
    "estimate beside its time).")

ESTIMATE_HEAD = ["configuration", "moves estimated", "estimate s", "move_seconds", "error (median)",
                 "|error| median / max", "inside its band", "within ±15 %", "within ±15 % of an outcome",
                 "model commit"]


def near_an_outcome(m: dict[str, Any]) -> bool:
    """The move took within 15 % of its estimate, or of one of the outcomes the estimate listed (a
    handover: each client query it may land at)."""
    outs = json.loads(m.get("estimate_outcomes_json") or "null") or []
    return abs(m["estimate_error_pct"]) <= 15 or any(
        abs(o["seconds"] - m["move_seconds"]) <= 0.15 * m["move_seconds"] for o in outs)


def estimate_rows(moves: list[dict[str, Any]], configs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per configuration, its moves' estimates beside their times (the moves table's estimate
    columns); configurations whose runs made no estimate are left out."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in moves:
        if m.get("estimate_error_pct") is not None:
            by[m["config_key"]].append(m)
    out = []
    for c in configs:
        ms = by.get(c["config_key"])
        if not ms:
            continue
        errs = [m["estimate_error_pct"] for m in ms]
        absd = sorted(abs(e) for e in errs)
        inside = sum(1 for m in ms if m.get("estimate_seconds_low") is not None
                     and m["estimate_seconds_low"] <= m["move_seconds"] <= m["estimate_seconds_high"])
        commits = sorted({str(m.get("estimate_model_commit") or "?")[:10] for m in ms})
        out.append([c["config_label"] or c["config_key"], len(ms),
                    fmt_spread([m["estimate_seconds"] for m in ms]), fmt_spread([m["move_seconds"] for m in ms]),
                    f"{statistics.median(errs):+.1f} %", f"{statistics.median(absd):.1f} % / {absd[-1]:.1f} %",
                    f"{inside} of {len(ms)}", f"{sum(1 for e in absd if e <= 15)} of {len(ms)}",
                    f"{sum(1 for m in ms if near_an_outcome(m))} of {len(ms)}", ", ".join(commits)])
    return out


def estimate_note() -> str:
    from bench.run.move_estimate import RUN_WINDOW_S

    return ESTIMATE_NOTE.format(window=RUN_WINDOW_S)


COST_TITLE = "What a move costs"

COST_HEAD = ["configuration", "moves", "bytes between brokers", "bytes to/from object storage",
             "requests PUT / GET / LIST / HEAD / DELETE", "transfer", "requests", "cost per move (max)"]

HEADLINE_COST_TITLE = "What the headline cases cost"

HEADLINE_COST_NOTE = ("Each headline case priced with the table above: a copying system's projected bytes between "
                      "brokers (known only where the case's time is validated), the object-store requests per move "
                      "measured on that system's moves (the median of the configurations above; a kind that grows "
                      "with the tail a close uploads, PUTs one per upload part, at the case's tail, fitted on the "
                      "moves and said how far beyond them) times the case's moves (the cluster case's simulated "
                      "moves). A case the network cannot carry is not priced.")

HEADLINE_COST_HEAD = ["case", "system", "link", "moves", "bytes between brokers",
                      "requests PUT / GET / LIST / HEAD / DELETE", "cost", "requests rest on / why not priced"]


def cost_note(prices: cost.Prices) -> str:
    return (f"Medians over each configuration's single-partition moves of the bytes the move sent between "
            f"brokers (the receiving brokers' counters) and the object-store requests its close and open "
            f"made (counted by the brokers' S3 client under the move's own tag, apart from the WAL's uploads "
            f"and readers' GETs beside it), priced with {prices.cite()}. "
            f"{cost.ZONES_NOTE} "
            f"Prices: {prices.cross_zone_per_gb:g} {prices.currency} per GB crossing a zone; per 1,000 requests "
            + ", ".join(f"{k.upper()} {v:g}" for k, v in prices.requests_per_1000.items())
            + f". {prices.note} The headline cases below are priced from the same moves. Not in these "
            "figures: storage held during the move (GB-months), and an SDK call's own retries (each call "
            "counts once). A close's flush of the WAL to object storage counts as the move's, although the "
            "next upload round would have made it anyway.")


def _money(x: Any, currency: str) -> str:
    if x is None:
        return MISSING
    return f"{x:.6f} {currency}" if x < 0.01 else f"{x:,.2f} {currency}"


def _reqs(r: dict[str, Any] | None) -> str:
    return MISSING if r is None else " / ".join(fmt_num(r[k]) for k in OBJSTORE_REQUEST_KINDS)


def cost_rows(prices: cost.Prices, moves: list[dict[str, Any]], configs: list[dict[str, Any]]) -> list[list[Any]]:
    by = cost.cost_by_config(prices, moves)
    return [[c["config_label"] or c["config_key"], x["moves"], format_bytes(x["inter_broker_bytes"]),
             format_bytes(x["objstore_bytes"]), _reqs(x["requests"]), _money(x["transfer"], prices.currency),
             _money(x["requests_cost"], prices.currency),
             f"{_money(x['total'], prices.currency)} ({_money(x['total_max'], prices.currency)})"]
            for c in configs if (x := by.get(c["config_key"]))]


def headline_cost_rows(prices: cost.Prices, moves: list[dict[str, Any]], headline: list[dict[str, Any]]
                       ) -> list[list[Any]]:
    rows = cost.headline_costs(prices, headline, cost.cost_by_config(prices, moves))
    return [[r["case"], r["system"], f"{r['link_gbit_s']:g} Gbit/s", fmt_num(r["moves"]),
             format_bytes(r["inter_broker_bytes"]) if r["inter_broker_bytes"] is not None else MISSING,
             _reqs(r["requests"]), _money(r["total"], prices.currency), r["why"] or r["requests_basis"] or ""]
            for r in rows]


CONSUMERS_TITLE = "Consumers across moves and faults"


CONSUMERS_HEAD = ["configuration", "action", "runs", "end-to-end p50 ms (before / during / after)",
                  "end-to-end p99 ms (before / during / after)", "longest gap without a delivery (s)",
                  "catch-up read MB/s (before / during / after)", "not delivered (whole runs)"]


CONSUMERS_NOTE = (
    "What the workload's consumer groups felt (scenario section `consumers`; medians over runs, min-max in "
    "brackets). End-to-end latency: from the producer's send call to a message's first delivery to a `tail` "
    "group, on the action's partitions, windows by send time as for produce latency; it includes the "
    "producers' batching (linger.ms) and the time until a message is readable: on the copy and tiered systems "
    "once every in-sync replica has it (the high watermark), on the shared system once its WAL write is durable "
    "in object storage. Gap: the longest time a tail group got no message of those partitions, from 1 s before the action "
    "to 5 s after its end (a fault: after the producers' first ack past recovery). Catch-up: the backlog "
    "bytes per second a `catch_up` group (started behind, reading while the load produces) read in each "
    "window, the mean over catch-up groups. Not delivered: acked messages and backlog records some group never "
    "got, over the whole of the configuration's runs (at least once, per group: must be 0).")


def consumer_rows(consumers: list[dict[str, Any]], configs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per configuration and action (id): the consumers table's figures, medians (min-max) over runs."""
    labels = {c["config_key"]: c["config_label"] or c["config_key"] for c in configs}
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for x in consumers:
        by[(x["config_key"], x["action_id"])].append(x)
    order = {c["config_key"]: i for i, c in enumerate(configs)}

    def spread(xs: list[dict[str, Any]], name: str, scale: float = 1.0) -> str:
        known = [float(x[name]) * scale for x in xs if x.get(name) is not None]
        return fmt_range(statistics.median(known), min(known, default=None), max(known, default=None)) if known else MISSING

    rows = []
    for (ck, aid), xs in sorted(by.items(), key=lambda kv: (order.get(kv[0][0], 1 << 30), kv[0][0], kv[0][1])):
        rows.append([labels.get(ck, ck), f"{xs[0]['action']} (#{aid})", str(len(xs)),
                     " / ".join(spread(xs, f"e2e_{ph}_p50_ms") for ph in PHASES),
                     " / ".join(spread(xs, f"e2e_{ph}_p99_ms") for ph in PHASES),
                     spread(xs, "gap_seconds"),
                     " / ".join(spread(xs, f"catch_up_{ph}_bytes_per_s", 1e-6) for ph in PHASES),
                     str(sum(int(x["missing"] or 0) for x in xs))])
    return rows


CONFIG_HEAD = ["system", "configurations", "runs", "replication factor", "min.insync.replicas", "producers",
               "an acknowledgement means", "move budget", "links (broker / client / object store)",
               "the system's own settings", "scale model (bytes / rates)"]


CONFIG_NOTE = ("What each system ran with: every system gets the same producers (librdkafka, idempotent, the acks "
               "and linger.ms shown; an ack's latency includes up to linger.ms of batching), load and links; what an "
               "acknowledgement promises differs and is stated here, as are the settings only one system has "
               "(its profile's, effective values). linger.ms is 5 unless a configuration says otherwise: the "
               "client's own default, librdkafka's since v1.5.0 (raised from 0.5 ms) and the Kafka Java producer's "
               "since 4.0 (KIP-1030, raised from 0), chosen for no system. Move budget: the operator's rule, the same "
               "for every system, that a move's traffic gets at most that share of a broker's link, and the "
               "mechanism each system caps its move traffic with (the copy and tiered systems' replication "
               "throttle, the shared system's cap on the forced upload of the move's tail); none: no move limit. "
               "Object store latency: the time to first byte of every request to the object store, emulated by a "
               "delaying proxy (0ms: none); the default suite's p50=30ms,p99=80ms is S3 Standard's within one "
               "region as Quickwit measured GETs from EC2 ('S3 Express speculations', 2023: 'around up to 30ms', "
               "'80ms is rather common' in the tail), used for PUTs too.")


def move_budget_text(conf: dict[str, Any]) -> str:
    """A configuration's move budget in words: ``half the link per move: 5.96 MiB/s, the
    replication throttle (...)`` or ``none`` (an older configuration: its replication throttle,
    bench.check.summary.current_configuration)."""
    x = current_configuration(conf)
    rate, rule = x.get("move_budget_bytes_per_s"), x.get("move_budget_rule")
    if rule is None and rate is None:
        return UNKNOWN
    if not rate:
        return "none"
    return f"{rule}: {format_bytes(rate)}/s" + (f", {x['move_budget_mechanism']}" if x.get("move_budget_mechanism") else "")


def own_settings_text(conf: dict[str, Any]) -> str:
    """The configuration's ``system_settings`` (the profile's describe()) in words (a configuration
    from an older summary in the current shape: bench.check.summary.upgrade_summary)."""
    own = upgrade_summary({"configuration": conf})["configuration"]["system_settings"]
    return ", ".join(setting_text(k, v) for k, v in own.items()) if own else "none"


def producer_settings(conf: dict[str, Any]) -> str:
    out = f"acks={conf.get('acks', UNKNOWN)}"
    return out + (f", linger.ms={conf['linger_ms']}" if conf.get("linger_ms") is not None else "")


def configuration_rows(configs: list[dict[str, Any]], label=str) -> list[list[Any]]:
    """"Configurations compared": one row per system and distinct configuration (summary.json's
    ``configuration``), naming the scenarios that ran it; unknown for summaries without one."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in configs:
        groups[(c["system"], c.get("configuration") or "")].append(c)
    order = {s: i for i, s in enumerate(PROFILES)}
    rows = []
    for (system, cj), cs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0])):
        x = json.loads(cj) if cj else {}

        def get(k: str) -> Any:
            return x.get(k, UNKNOWN) if x else UNKNOWN

        def none_as(v: Any, text: str) -> Any:
            return text if v is None else v

        budget = move_budget_text(x) if x else UNKNOWN
        links = " / ".join(str(none_as(get(k), "none")) for k in ("link_rate", "client_link_rate", "object_store_link_rate"))
        if links == " / ".join([UNKNOWN] * 3):
            links = UNKNOWN
        if x.get("object_store_latency"):  # the object store's time to first byte (0ms: none emulated)
            links += f"; object store latency {x['object_store_latency']}"
        scen = sorted({c["scenario"] or "?" for c in cs})
        rows.append([label(system), ", ".join(scen) + f" ({len(cs)} configuration{'s' * (len(cs) != 1)})",
                     sum(c["runs"] for c in cs), get("replication_factor"), none_as(get("min_insync_replicas"), "n/a"),
                     producer_settings(x) if x else UNKNOWN, get("ack_meaning"), budget, links,
                     own_settings_text(x) if x else UNKNOWN, scale_text(x) if x else UNKNOWN])
    return rows


def _factor(f: Any) -> str:
    """A factor as people say it: ``1/100``, ``1/102``, ``1``, ``0``."""
    if f is None:
        return MISSING
    if f == 0:
        return "0"
    return f"1/{1 / f:.3g}" if f < 1 else fmt_num(f)


def scale_text(conf: dict[str, Any]) -> str:
    """The configuration's scale model in a cell: ``1/100 / 1/100`` (and the settings that break
    it), or ``not declared``."""
    sc = current_configuration(conf).get("scale")
    if not sc:
        return "not declared"
    broken = sc.get("breaks") or []
    return f"{_factor(sc['bytes'])} / {_factor(sc['rate'])}" + (
        f"; broken by {', '.join(broken)}" if broken else "")


SCALE_TITLE = "Scale model: each scaled setting against production's"
SCALE_HEAD = ["system", "configurations", "setting", "value run", "production value", "source", "factor (declared)",
              "scaling"]


def scale_note(configs: list[dict[str, Any]]) -> str:
    tols = sorted({sc["tolerance"] for c in configs if (sc := _scale_of(c))})
    return ("A scenario that declares a scale model (`scale: {bytes, rate}`) says it is a production cluster scaled "
            "down: sizes by the bytes factor, rates by the rate factor, time-like settings (timeouts, linger.ms, the "
            "object store's latency) unchanged, so that a transfer-bound time, bytes over rate, is the production one "
            "(docs/scale-model.md). Per setting of each system: the value run, the production value and where it "
            "comes from, and the factor between them; a factor further than the tolerance ("
            + ", ".join(f"±{t:.0%}" for t in tols) + ") from the declared one breaks the scaling. The partitions' "
            "size and the ingest have no production default: they show what the run stands for. What does not scale "
            "(CPU per byte, per-request costs, object counts) is in docs/scale-model.md.")


def _scale_of(c: dict[str, Any]) -> dict[str, Any] | None:
    return current_configuration(json.loads(c["configuration"])).get("scale") if c.get("configuration") else None


def _scaled_value(v: Any, dimension: str) -> str:
    if v is None:
        return MISSING
    if dimension == "bytes":
        return format_bytes(v)
    if dimension == "rate":
        return f"{fmt_num(v / 1e6)} MB/s"
    return f"{fmt_num(v)} ms"


def scale_rows(configs: list[dict[str, Any]], label=str) -> list[list[Any]]:
    """One row per system and scaled setting with its value, the scenarios that ran it alike."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for c in configs:
        sc = _scale_of(c)
        for r in (sc or {}).get("settings") or []:
            key = (c["system"], r["setting"], r["dimension"], r["value"], r["production"], r["source"], r["factor"],
                   r["declared"], r["breaks"], sc["tolerance"])
            if (c["scenario"] or "?") not in groups[key]:
                groups[key].append(c["scenario"] or "?")
    order = {s: i for i, s in enumerate(PROFILES)}
    rows = []
    for key, scen in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][0])):
        system, setting, dim, value, prod, source, factor, declared, breaks, tol = key
        stands_for = source == STANDS_FOR
        dev = None if factor is None or not declared else factor / declared - 1
        verdict = ("stands for" if stands_for else MISSING if dev is None else
                   f"BREAKS ({dev:+.1%}, tolerance ±{tol:.0%})" if breaks else f"ok ({dev:+.1%})")
        rows.append([label(system), ", ".join(sorted(scen)), setting, _scaled_value(value, dim),
                     _scaled_value(prod, dim), source, f"{_factor(factor)} ({_factor(declared)})", verdict])
    return rows


def scale_undeclared(configs: list[dict[str, Any]]) -> str:
    none = sorted({c["scenario"] or "?" for c in configs if c.get("configuration") and not _scale_of(c)})
    return (f"Declaring no scale model (not checked): {', '.join(none)}." if none else
            "Every configuration declares a scale model.")


SENSITIVITY_TITLE = "What batching does to each system: linger.ms"
SENSITIVITY_HEAD = ["configuration", "system", "linger.ms", "runs", "move s", "unavailable s (move) / outage s (fault)",
                    "p99 before (ms)", "p99 during (ms)", "load CPU s per 1,000 msgs"]
# A system makes the client spin when the load process spends at least this many times the CPU per
# acked message against it that it spends against every other system at the same linger.ms.
SPIN_RATIO = 1.5


def _linger(c: dict[str, Any]) -> Any:
    return json.loads(c["params"]).get("linger_ms")


def linger_groups(configs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Configurations (configs-table rows) that differ only in the producers' linger.ms, their other
    params equal, where a group has at least two lingers; each group in linger order."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for c in configs:
        params = json.loads(c["params"]) if c.get("params") else {}
        if params.get("linger_ms") is None:
            continue
        rest = {k: v for k, v in params.items() if "linger" not in k}  # linger_ms and a workload.linger_ms axis
        groups[(c["scenario"] or "", c["system"], json.dumps(rest, sort_keys=True, default=str))].append(c)
    order = {name: i for i, name in enumerate(PROFILES)}
    out = [sorted(cs, key=_linger) for cs in groups.values() if len({_linger(c) for c in cs}) >= 2]
    return sorted(out, key=lambda cs: (cs[0]["scenario"] or "", cs[0].get("prefill_bytes_per_partition") or 0,
                                       order.get(cs[0]["system"], len(order))))


def sensitivity_rows(configs: list[dict[str, Any]], label=str) -> list[list[Any]]:
    rows = []
    for group in linger_groups(configs):
        for c in group:
            size = c.get("prefill_bytes_per_partition")
            rows.append([f"{c['scenario']}" + (f", {format_bytes(size)} partitions" if size else ""), label(c["system"]),
                         fmt_num(_linger(c)), runs_of(c), cfg_spread(c, "move_seconds"),
                         cfg_spread(c, "unavailable_seconds") if c["moves"] else cfg_spread(c, "outage_seconds"),
                         fmt_num(c.get("before_p99_ms")), fmt_num(c.get("during_p99_ms")),
                         cfg_spread(c, "load_cpu_s_per_1000_msgs")])
    return rows


def load_cpu_by_linger(configs: list[dict[str, Any]]) -> dict[Any, dict[str, float]]:
    """linger.ms -> system -> the median over that system's configurations of the sensitivity set of
    their median load CPU s per 1,000 acked messages."""
    per: dict[tuple, list[float]] = defaultdict(list)
    for group in linger_groups(configs):
        for c in group:
            if c.get("load_cpu_s_per_1000_msgs_median") is not None:
                per[(_linger(c), c["system"])].append(float(c["load_cpu_s_per_1000_msgs_median"]))
    out: dict[Any, dict[str, float]] = defaultdict(dict)
    for (linger, system), xs in per.items():
        out[linger][system] = statistics.median(xs)
    return dict(out)


def sensitivity_note(configs: list[dict[str, Any]], label=str) -> str:
    """What the table is, then what the measured load CPU says: a system against which the client
    spends at least SPIN_RATIO times the CPU per message it spends against every other system at the
    default linger.ms is named, with the measured ratios (and those at the other lingers)."""
    text = (f"The same configurations at two settings of the producers' linger.ms, nothing else changed: the "
            f"default {PRODUCER_LINGER_MS} ms (the client's own default) and the others shown. Medians (min–max) "
            "over each configuration's runs, as in the results table; load CPU: the load process's CPU seconds "
            "per 1,000 acked messages (summary.json producer.load_cpu_s_per_1000_msgs).")
    cpu = load_cpu_by_linger(configs)
    at = cpu.get(PRODUCER_LINGER_MS) or {}
    if len(at) < 2:
        return text
    others = sorted(x for x in cpu if x != PRODUCER_LINGER_MS)

    def ratios(system: str, linger: Any) -> str:
        here = cpu.get(linger) or {}
        return ", ".join(f"{here[system] / here[o]:.1f}x {label(o)}'s ({fmt_num(here[o])})"
                         for o in here if o != system and here.get(system) and here[o])

    spin = [s for s in at if all(at[s] >= SPIN_RATIO * at[o] for o in at if o != s)]
    for system in spin:
        then = "; ".join(f"at linger.ms={fmt_num(x)}: {ratios(system, x)}" for x in others
                         if (cpu[x].get(system) and len(cpu[x]) > 1))
        text += (f" At linger.ms={PRODUCER_LINGER_MS} the client spins against {label(system)}: the load process "
                 f"spent {fmt_num(at[system])} s per 1,000 messages against it, {ratios(system, PRODUCER_LINGER_MS)}"
                 + (f" ({then})" if then else "") +
                 ". Its acks come later; an idempotent librdkafka producer keeps one request in flight per "
                 "partition and its broker thread busy-polls while a ready batch waits (docs/measurements/automq.md; "
                 "workload.pace_partitions avoids it in runs that measure no move); "
                 "on a machine the brokers share, that CPU is theirs too.")
    if not spin:
        high = max(at, key=at.get)
        text += (f" At linger.ms={PRODUCER_LINGER_MS} no system made the load process spend {SPIN_RATIO:g}x or more "
                 f"the CPU per message it spent against every other: the most costly, {label(high)}, "
                 f"{ratios(high, PRODUCER_LINGER_MS)}.")
    return text


def provenance_lines(runs: list[dict[str, Any]]) -> list[str]:
    """Where and from what the runs came: machine(s), date(s), commit(s), versions, links; a fact
    a summary does not carry counts as unknown."""
    def tally(values: list[Any]) -> str:
        seen: dict[str, int] = defaultdict(int)
        for v in values:
            seen[UNKNOWN if v in (None, "") else str(v)] += 1
        if len(seen) == 1:
            return next(iter(seen))
        return "; ".join(f"{v} ({n} run{'s' * (n != 1)})" for v, n in sorted(seen.items()))

    # ISO-8601 UTC to the minute: "2026-11-23 23:52"
    dates = sorted(str(r["date"])[:16].replace("T", " ") for r in runs if r.get("date"))
    no_date = len(runs) - len(dates)
    date = (UNKNOWN if not dates else dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}")
    if dates and no_date:
        date += f" ({no_date} run{'s' * (no_date != 1)} unknown)"
    versions = []
    for r in runs:
        v = json.loads(r["versions"]) if r.get("versions") else None
        versions.append(", ".join(f"{k} {x if x is not None else UNKNOWN}" for k, x in v.items()) if v else None)
    links = ["yes" if r.get("links_emulated") else "no" if r.get("links_emulated") is False else None for r in runs]
    return [f"Machine: {tally([r.get('machine') if r.get('machine') != UNKNOWN else None for r in runs])}.",
            f"Date (UTC): {date}.",
            f"Git commit: {tally([commit_label(r.get('git_commit'), r.get('git_dirty')) if r.get('git_commit') else None for r in runs])}.",
            f"Versions: {tally(versions)}.",
            f"Links emulated (per-node NICs in network namespaces): {tally(links)}."]


def recovery_label(o: dict[str, Any]) -> str:
    """How a fault ended, for a table: the recovery action ("restart broker", "resume broker",
    ...), or a failover to the broker a client saw lead."""
    by = o.get("recovered_by")
    if by is None:
        return "not recovered"
    if by == EVENT_LEADER_CHANGE:
        return "failover" + (f" to {o['new_leader']}" if o.get("new_leader") is not None else "")
    return str(by).replace("_", " ")


LINK_FILL_HEAD = ["system", "run", "partition", "move s", "source tx", "target rx", "object store rx, tx"]


LINK_FILL_NOTE = ("How full each link was during a move, as a share of the link's rate: mean (peak) of the "
                  "once-a-second link samples overlapping [request, request + move_seconds] (no move_seconds: "
                  "until the action's end), each weighted by its seconds inside. For several source or target "
                  "brokers, the busiest. tx = sent by the node, rx = received.")


NO_LINKS = "No run on emulated links (no link_sample events): nothing to show."


def _fill(x: dict[str, Any] | None, way: str) -> str:
    if x is None or x.get(f"{way}_mean_utilisation") is None:
        return MISSING
    return f"{x[f'{way}_mean_utilisation']:.0%} ({x[f'{way}_peak_utilisation']:.0%})"


def _busiest(xs: list[dict[str, Any]], role: str, way: str) -> dict[str, Any] | None:
    return max((x for x in xs if x["role"] == role and x[f"{way}_mean_utilisation"] is not None),
               key=lambda x: x[f"{way}_mean_utilisation"], default=None)


def link_fill_rows(move_links: list[dict[str, Any]], label=str) -> list[list[Any]]:
    """One row per move for the "link fill during moves" table (summary.md and the report), from
    the move_links table, in its order; ``label`` names a system."""
    per: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for x in move_links:
        per[(x["run_key"], x["from_ts"], x["action_id"], x["topic"], x["partition"])].append(x)
    rows = []
    for (run_key, *_), xs in per.items():
        src, dst, obj = _busiest(xs, "source", "tx"), _busiest(xs, "target", "rx"), _busiest(xs, "objstore", "rx")
        x0 = xs[0]
        rows.append([label(x0["system"]), run_key, format_bytes(x0["partition_bytes"]), fmt_num(x0["move_seconds"]),
                     f"{src['node']} {_fill(src, 'tx')}" if src else MISSING,
                     f"{dst['node']} {_fill(dst, 'rx')}" if dst else MISSING,
                     f"{_fill(obj, 'rx')}, {_fill(obj, 'tx')}" if obj else MISSING])
    return rows


SAFETY_COLS = ("valid", "lost_writes", "duplicates", "corrupted", "reordering", "unexpected", "lost_prefill")


SAFETY_NOTE = ("Each check's verdict per run: pass, fail, or unknown (the check could not decide, e.g. no reads "
               "to compare with; never counted as a pass). Verdict: every checker of the run together, and pass only for a run "
               "that completed with no error and every action ended ok (else unknown, saying how it ended). Corrupted: "
               "a message read back whose value's CRC-32 differs from the one sent. Lost prefill: "
               "the verifying consumer read back fewer prefill records than were written (counted per partition; "
               "with tiered storage most of the prefill is read from object storage).")


SAFETY_HEAD = ["run", "system", "verdict", "lost writes", "duplicates", "corrupted", "reordering", "unexpected",
               "lost prefill", "failed checks / how it ended"]


def safety_rows(t) -> list[list[str]]:
    return [[r["run_key"], label(r["system"]), *[r.get(c) or "unknown" for c in SAFETY_COLS],
             r["failed_checks"] or r.get("problems") or ""]
            for r in t["runs"]]


def safety_counts(t) -> list[str]:
    """Per column: ``valid: 5 pass, 0 fail, 1 unknown``."""
    return [f"{h}: {verdict_counts(r.get(c) or 'unknown' for r in t['runs'])}"
            for h, c in zip(SAFETY_HEAD[2:], SAFETY_COLS)]


FAULT_HEAD = ["scenario", "system", "fault", "broker", "outage s", "recovered by", "recovery s", "runs"]


FAULT_NOTE = ("Outage: the worst affected partition's longest time without a produce ack, from 1 s before the fault "
              "to its first ack after recovery. Recovery: the paired recovery action's end (restart, resume, ...) "
              "or the first failover a client saw, whichever came first; recovery s counts from the fault.")


def fault_rows(t) -> tuple[list[list[Any]], list[str]]:
    """One row per fault of a configuration (its runs pooled: the median and range of their
    outages), as summary.json's ``outages`` define them. -> (rows, run keys)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for o in t["outages"]:
        groups[(o["config_key"], o["action_id"])].append(o)
    order = {s: i for i, s in enumerate(systems_of(t["outages"]))}
    rows = []
    for (_, aid), os_ in sorted(groups.items(), key=lambda kv: (kv[1][0]["scenario"] or "",
                                                                 order[kv[1][0]["system"]], kv[0])):
        o0 = os_[0]
        rows.append([o0["scenario"] or MISSING, label(o0["system"]), o0["action"],
                     MISSING if o0["broker"] is None else o0["broker"],
                     fmt_spread([o["unavailable_seconds"] for o in os_]),
                     ", ".join(sorted({recovery_label(o) for o in os_})),
                     fmt_spread([o["recovery_seconds"] for o in os_]), len(os_)])
    return rows, [o["run_key"] for o in t["outages"]]


MEASURED_HEAD = "Measured at a glance"


def measured_lines(t) -> list[str]:
    """Measured moves per system, the held-out checks and the safety verdicts, one line each."""
    out = []
    for system in systems_of(t["moves"]):
        mine = [m for m in t["moves"] if m["system"] == system]
        ms = [m["move_seconds"] for m in mine if m["move_seconds"] is not None]
        if ms:
            sizes = [m["partition_bytes"] for m in mine if m["partition_bytes"]]
            copied = [m["copy_bytes_at_request"] for m in mine if m.get("copy_bytes_at_request") is not None]
            out.append(f"**{label(system)}**: {len(ms)} measured move(s) in {len({m['run_key'] for m in mine})} "
                       f"run(s), move_seconds median {fmt_spread(ms)} s for partitions of "
                       f"{format_bytes(min(sizes)) if sizes else MISSING}–{format_bytes(max(sizes)) if sizes else MISSING}"
                       + (f"; {len(copied)} of them copied only the tail their leader named, "
                          f"{format_bytes(min(copied))}–{format_bytes(max(copied))}" if copied else "") + ".")
    checks: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for v in t["model_validation"]:
        if v.get("error_pct") is not None:
            checks[(v["system"], v["axis"])].append(v)
    for (system, axis), vs in checks.items():
        worst = max(vs, key=lambda v: abs(v["error_pct"]))
        failed = sum(1 for v in vs if v["status"] == "failed")
        unsure = sum(1 for v in vs if v["status"] == "inconclusive")
        out.append(f"Held-out {axis} check{'s' if len(vs) > 1 else ''} of the {short(system)} model: {len(vs)} "
                   f"({failed} failed{f', {unsure} inconclusive' if unsure else ''}); the largest error at {worst['label']}: predicted {fmt_num(worst['predicted_s'])} s "
                   f"vs measured {fmt_num(worst['measured_s'])} s, {worst['error_pct']:+.1f} % "
                   f"(target ±{fmt_num(worst['target_pct'])} %).")
    out += host_lines(t)
    bad = [r["run_key"] for r in t["runs"] if r["valid"] == "fail"]
    out.append(f"Safety verdicts over {len(t['runs'])} run(s): {verdict_counts(r['valid'] or 'unknown' for r in t['runs'])}"
               + (f"; failed: {', '.join(bad)}" if bad else "") + ".")
    return out



# --------------------------------------------------------------------------------------------
# The host's CPU: saturated runs and moves (bench/check/host.py)

HOST_TITLE = "Host CPU: saturated runs and moves"
HOST_NOTE = (f"Every process of a run shares one host. A window is saturated when the host's mean CPU busy share "
             f"(all cores, every process on the machine, the harness's or not) over its once-a-second samples, each "
             f"weighted by its seconds inside, exceeds {SATURATED_BUSY_PCT:g} %: a move timed then measured the "
             f"host, not the system, and the move models leave it out. Unknown: fewer than {MIN_SAMPLES} samples "
             f"in the window (a move shorter than about a second), or a run from before host samples. A run's "
             f"window is its load; a move's, its request to the first ack on the new owner. Busy %: median "
             f"(min–max) over the configuration's runs (load) or moves (mean and peak sample in each move's window); "
             f"of it the run's processes: the load, consumers, harness and cluster processes' share of the host "
             f"(the rest was other work on the machine); steal: the hypervisor's share, CPU it gave other guests "
             f"of a virtual machine while this one had work (busy to the rule: noisy neighbours).")
HOST_HEAD = ["configuration", "runs", "host busy % (load)", "of it the run's processes %", "of it steal %",
             "loads saturated", "moves",
             "saturated moves",
             "share of moves", "unknown", "host busy % (moves, mean)", "host busy % (moves, peak)"]


def _share(n: int, of: int) -> str:
    return f"{100.0 * n / of:.0f} %" if of else MISSING


def host_rows(configs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per configuration: the host over its runs' load windows and its moves' windows; counts of
    the saturated ones (configs table, bench/analysis/aggregate/configs.py host_counts)."""
    rows = []
    for c in configs:
        sat, unk = c.get("moves_host_saturated"), c.get("moves_host_unknown")
        rows.append([c["config_label"] or c["config_key"], runs_of(c), cfg_spread(c, "load_host_busy_mean_pct"),
                     cfg_spread(c, "load_run_processes_pct"), cfg_spread(c, "load_steal_pct"),
                     count_text(c.get("runs_host_saturated")), c["moves"],
                     count_text(sat),
                     _share(sat, c["moves"]) if sat is not None else MISSING, count_text(unk),
                     cfg_spread(c, "host_busy_mean_pct"), cfg_spread(c, "host_busy_peak_pct")])
    return rows


def host_lines(t) -> list[str]:
    """"Measured at a glance": the share of saturated moves over all moves (per system beside it)
    and the saturated load windows."""
    moves, runs = t["moves"], t["runs"]
    if not moves and not runs:
        return []
    sat = [m for m in moves if m.get("host_saturated")]
    unk = [m for m in moves if m.get("host_saturated") is None]
    per = "; ".join(f"{short(s)} {sum(1 for m in sat if m['system'] == s)} of "
                    f"{sum(1 for m in moves if m['system'] == s)}" for s in systems_of(moves))
    loads = sum(1 for r in runs if r.get("host_saturated"))
    loads_unk = sum(1 for r in runs if r.get("host_saturated") is None)
    return [f"Host saturated (mean CPU busy > {SATURATED_BUSY_PCT:g} % of all cores over the window): "
            f"{len(sat)} of {len(moves)} moves ({_share(len(sat), len(moves))})"
            + (f", {len(unk)} unknown" if unk else "") + (f" ({per})" if per else "")
            + f"; {loads} of {len(runs)} runs' load windows" + (f", {loads_unk} unknown" if loads_unk else "")
            + ". The move models leave the saturated moves out." + _steal_text(runs)]


def _steal_text(runs: list[dict[str, Any]]) -> str:
    """The runs whose host lost CPU to its hypervisor (steal >= STEAL_NOTICE_PCT), if any."""
    hit = [r["host_steal_pct"] for r in runs if isinstance(r.get("host_steal_pct"), (int, float))
           and r["host_steal_pct"] >= STEAL_NOTICE_PCT]
    if not hit:
        return ""
    return (f" In {len(hit)} of {len(runs)} runs the hypervisor took {STEAL_NOTICE_PCT:g} % or more of the CPU "
            f"for other guests (steal, up to {max(hit):.0f} %): those runs shared the machine; run again when it "
            f"is quiet.")


__all__ = [
    "BYTES_HEAD", "CONFIG_HEAD", "CONFIG_NOTE", "CONSUMERS_HEAD", "CONSUMERS_NOTE", "CONSUMERS_TITLE", "FAULT_HEAD",
    "FAULT_NOTE", "HOST_HEAD", "HOST_NOTE", "HOST_TITLE", "LINK_FILL_HEAD", "LINK_FILL_NOTE", "MEASURED_HEAD",
    "NO_LINKS", "PROTOCOL_HEAD", "PROTOCOL_NOTE",
    "PROTOCOL_TITLE", "RESULT_HEAD", "SAFETY_HEAD", "SAFETY_NOTE", "SENSITIVITY_HEAD", "SENSITIVITY_TITLE", "SPIN_RATIO",
    "SCALE_HEAD", "SCALE_TITLE", "SPREAD_NOTE", "bytes_rows", "configuration_rows", "scale_note", "scale_rows",
    "scale_text", "scale_undeclared", "linger_groups", "load_cpu_by_linger", "move_budget_text",
    "sensitivity_note", "sensitivity_rows", "host_lines", "host_rows",
    "consumer_rows", "fault_rows", "link_fill_rows", "measured_lines", "own_settings_text", "producer_settings",
    "protocol_note", "protocol_rows", "provenance_lines", "recovery_label", "result_rows", "safety_counts",
    "safety_rows",
]
