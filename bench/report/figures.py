"""The report's figures: one function per figure, each from the aggregate's tables (never a raw
history) to a :class:`Figure` (PNG, caption naming the runs it comes from). :data:`FIGURES` is
their order in the report."""

from __future__ import annotations

import io
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from bench.analysis import model as mdl
from bench.analysis.aggregate.fits import host_left_out, host_note, model_move
from bench.check.moves import BYTES_SPLIT_NOTE
from bench.history.names import BROKER_NODE_PREFIX, NODE_OBJSTORE
from bench.report.format import color as system_color
from bench.report.format import fmt_num, run_name, short_runs, systems_of
from bench.report.format import label as system_label
from bench.report.format import short as system_short
from bench.report.tables import NO_LINKS
from bench.scenario.actions.spec import FAULT_SHADE, MOVE_SHADE as MOVE_SPEC_SHADE
from bench.units import format_bytes
from systems.registry import PROFILES

MOVE_SHADE = MOVE_SPEC_SHADE.color  # how figures mark a move, as its action spec says


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    caption: str
    runs: list[str]


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
                         "figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()


def _empty(plt, msg: str):
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, msg, ha="center", va="center", fontsize=11)
    return fig


TIME_TICKS = [(0.01, "10 ms"), (0.1, "100 ms"), (1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"),
              (3600, "1 h"), (36000, "10 h"), (86400, "1 d"), (864000, "10 d"), (8640000, "100 d"),
              (31536000, "1 y"), (315360000, "10 y")]


def _nice_log_ticks(ax, axis: str, lo: float, hi: float, fmt) -> None:
    """Ticks at 1, 2, 5 x 10^k inside [lo, hi], labelled with ``fmt``; no minor labels."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    ticks = [m * 10**k for k in range(int(math.floor(math.log10(lo))) - 1, int(math.ceil(math.log10(hi))) + 1)
             for m in (1, 2, 5) if lo <= m * 10**k <= hi]
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(_fmt_obj(fmt))
    a.set_minor_formatter(NullFormatter())


def _fmt_obj(fmt):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(fmt)


def time_ticks(ax, lo: float, hi: float) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter

    ticks = [(v, lbl) for v, lbl in TIME_TICKS if lo <= v <= hi]
    ax.yaxis.set_major_locator(FixedLocator([v for v, _ in ticks]))
    ax.yaxis.set_major_formatter(_fmt_obj(lambda v, _p: dict(TIME_TICKS).get(v, mdl.human_seconds(v))))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _bytes_fmt(v, _pos=None) -> str:
    return format_bytes(v)


def byte_ticks(axis, lo: float, hi: float, log: bool) -> None:
    """A bytes axis ticked at powers of two (log scale) or at multiples of one (linear), so every
    label is a whole binary unit; at most about 8 ticks."""
    from matplotlib.ticker import FixedLocator, MultipleLocator, NullFormatter

    if log:
        ks = range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
        axis.set_major_locator(FixedLocator([2.0**k for k in ks][::max(1, math.ceil(len(ks) / 8))]))
        axis.set_minor_formatter(NullFormatter())
    else:
        axis.set_major_locator(MultipleLocator(2.0 ** math.ceil(math.log2(max(hi, 1) / 8))))
    axis.set_major_formatter(_fmt_obj(_bytes_fmt))


# --------------------------------------------------------------------------------------------
# Figures


def fig_move_time(t: dict[str, list[dict[str, Any]]]) -> Figure:
    plt = pyplot()

    # The single-partition moves the models rest on (a drain's or scale-out's moves wait for each
    # other: the cluster simulation's part, in the Model section's rebalance checks).
    moves = [m for m in t["moves"] if m["move_seconds"] is not None and m["partition_bytes"] and model_move(m)]
    runs = [m["run_key"] for m in moves]
    if not moves:
        return Figure("move_time_vs_bytes", "Move time vs partition size",
                      png_bytes(_empty(plt, "No measured single-partition move.")), "No measured single-partition move.", [])
    fits = {m["system"]: m for m in t["model_fit"]}
    fig, ax = plt.subplots(figsize=(8, 5))
    xs_all = [m["partition_bytes"] for m in moves]
    lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    markers = ["o", "s", "^", "D", "v", "P"]
    for system in systems_of(moves):
        ms = [m for m in moves if m["system"] == system]
        p = PROFILES.get(system)
        bws = sorted({m["bandwidth_bytes_per_s"] for m in ms}, key=lambda b: (b is None, b or 0))
        for i, bw in enumerate(bws):
            sel = [m for m in ms if m["bandwidth_bytes_per_s"] == bw]
            cap = ""
            if p is not None and p.bandwidth_param:
                cap = ", cap " + ("none" if bw is None else f"{format_bytes(bw)}/s")
            ax.scatter([m["partition_bytes"] for m in sel], [m["move_seconds"] for m in sel], s=36,
                       marker=markers[i % len(markers)], color=system_color(system), alpha=0.85, zorder=3,
                       label=f"{system_label(system)}{cap} (measured)")
            f = fits.get(system)
            if f is None:
                continue
            model = mdl.MoveModel.from_row(f)
            if bw is None:
                continue
            # The model's line for this cap at the group's median inputs at the request, as its
            # family draws it (copy: its ingest; tiered copy: its ingest and the local tail it
            # copies, at most the partition; handover: its tail and objects, which do not grow with
            # the size).
            ys, extra = mdl.family_of(system).curve(model, grid, sel, bw)
            ax.plot(grid, ys, color=system_color(system), lw=1.3, ls=["-", "--", ":", "-."][i % 4], alpha=0.8,
                    label=f"{system_short(system)} model{cap}{extra}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    byte_ticks(ax.xaxis, lo, hi, log=True)
    y0, y1 = ax.get_ylim()
    _nice_log_ticks(ax, "y", y0, y1, lambda v, _p: fmt_num(v))
    ax.set_xlabel("partition size when moved (bytes, log scale)")
    ax.set_ylabel("move_seconds (s, log scale)")
    ax.set_title("Move time vs partition size: measured moves and fitted models")
    ax.legend(loc="upper left", fontsize=8)
    cap = ("Each point is one single-partition move (request to first ack served by the new owner); the repetitions of "
           "a configuration move about the same size, so their spread is the vertical scatter at that size. Lines: each "
           "system's fitted model at that cap and the measured moves' median ingest, tail and objects (copy: "
           "c + B / (e x T - r); tiered: c + L / (e x T - r), L = the local tail the leader named, at most the "
           "partition: flat once the partition is larger than what stays local; shared: c + tail / (u x L) + open "
           "cost per object; a run's cap is the lowest of its replication throttle or object-store cap and the "
           "emulated links a move crosses). " + _left_out_text(t["moves"]) + "From " + short_runs(runs) + ".")
    return Figure("move_time_vs_bytes", "Move time vs partition size", png_bytes(fig), cap, runs)


def _left_out_text(moves: list[dict[str, Any]]) -> str:
    """Per system, the saturated moves the models and this figure leave out (none: nothing said)."""
    left = {s: c for s, c in host_left_out(moves).items() if c["saturated_left_out"] or c["host_unknown_kept"]}
    return "".join(f"{system_short(s)}: {host_note(c)}. " for s, c in left.items())


BYTES_COLORS = {"inter_broker": "#e67e22", "objstore": "#5dade2"}


def fig_bytes_moved(t) -> Figure:
    plt = pyplot()
    moves = [m for m in t["moves"] if m["bytes_moved"] is not None]
    runs = [m["run_key"] for m in moves]
    if not moves:
        return Figure("bytes_moved", "Bytes moved per move", png_bytes(_empty(plt, "No bytes_moved counters recorded.")),
                      "No bytes_moved counters recorded.", [])
    order = {s: i for i, s in enumerate(systems_of(moves))}
    moves.sort(key=lambda m: (order[m["system"]], m["partition_bytes"] or 0, m["config_key"] or "", m["run_key"]))
    fig, ax = plt.subplots(figsize=(max(7, 0.5 * len(moves) + 3), 4.8))
    x = list(range(len(moves)))
    for i, m in enumerate(moves):
        # The bytes' path colours the bar; hatched: the part written during the move.
        color = BYTES_COLORS["inter_broker" if (m["bytes_moved_inter_broker"] or 0) >= (m["bytes_moved_objstore"] or 0)
                             else "objstore"]
        at, during = m.get("bytes_moved_at_request"), m.get("bytes_moved_during_move")
        if at is None or during is None:  # no split known: the whole, outlined
            ax.bar(i, m["bytes_moved"], color="white", edgecolor=color, lw=1.5)
            continue
        ax.bar(i, at, color=color)
        ax.bar(i, during, bottom=at, color=color, alpha=0.45, hatch="//", edgecolor="black", lw=0)
    pb = [m["partition_bytes"] for m in moves]
    ax.scatter([i for i, b in zip(x, pb) if b], [b for b in pb if b], marker="_", s=300, color="black", zorder=3)
    top = max([m["bytes_moved"] for m in moves] + [b or 0 for b in pb]) * 1.15 or 1.0
    ax.set_ylim(0, top)
    byte_ticks(ax.yaxis, 0, top, log=False)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{system_short(m['system'])}\n{format_bytes(m['partition_bytes'])}\n{_rep_label(t, m['run_key'])}"
                        for m in moves], fontsize=7)
    ax.set_ylabel("bytes moved by the move")
    ax.set_title("Bytes moved per partition move: partition at the request + written during the move")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=BYTES_COLORS["inter_broker"], label="inter-broker copy: partition at the request"),
               Patch(color=BYTES_COLORS["objstore"], label="object storage (upload/read): partition at the request"),
               Patch(facecolor="#bbbbbb", hatch="//", edgecolor="black", label="written during the move"),
               Line2D([], [], color="black", marker="_", ls="", markersize=14, label="partition size at the request")]
    ax.legend(handles=handles, fontsize=8)
    cap = (BYTES_SPLIT_NOTE + " One bar per move (repetitions side by side); an outlined bar: no split known. "
           "From " + short_runs(runs) + ".")
    return Figure("bytes_moved", "Bytes moved per move", png_bytes(fig), cap, runs)


def _rep_label(t, run_key: str) -> str:
    """``rep 2/3`` for a repeated configuration's run, else ``run``."""
    r = next((x for x in t["runs"] if x["run_key"] == run_key), {})
    rep, of = r.get("repetition"), r.get("repetitions")
    return f"rep {rep}/{of}" if rep is not None and of else "run"


def _pick_timeline_runs(t, keys: set[str] | None = None) -> list[dict[str, Any]]:
    """One run per system (among ``keys``, if given): the one with the largest moved partition
    (the most telling)."""
    out = []
    for system in systems_of(t["moves"]):
        ms = [m for m in t["moves"] if m["system"] == system and m["move_seconds"] is not None
              and (keys is None or m["run_key"] in keys)]
        if not ms:
            continue
        best = max(ms, key=lambda m: (m["partition_bytes"] or 0, m["run_key"]))
        run = next((r for r in t["runs"] if r["run_key"] == best["run_key"]), None)
        if run is not None:
            out.append({"run": run, "move": best})
    return out


def _timeline_columns(t, picks: list[dict[str, Any]], rows: list[dict[str, Any]], p50: str, p99: str,
                      lat_label: str, lower: Callable[[Any, list[dict[str, Any]], list[float], str], None]):
    """The across-a-move figure both timelines share: per picked run a column, its latency
    quantiles per bin (``p50`` / ``p99`` columns of ``rows``) on top, ``lower(ax, bins, xs, color)``
    below; the move shaded, faults dotted. -> (figure, run keys)."""
    plt = pyplot()
    fig, axes = plt.subplots(2, len(picks), figsize=(6.5 * len(picks), 6.5), sharex="col", squeeze=False)
    runs = []
    for col, p in enumerate(picks):
        run, mv = p["run"], p["move"]
        runs.append(run["run_key"])
        tl = sorted((x for x in rows if x["run_key"] == run["run_key"]), key=lambda x: x["bin"])
        t0 = run["timeline_t0"]
        xs = [x["t_rel_s"] + x["bin_s"] / 2 for x in tl]
        a_lat, a_low = axes[0][col], axes[1][col]
        color = system_color(run["system"])
        a_lat.plot(xs, [x[p50] for x in tl], color=color, lw=1.2, label="p50")
        a_lat.plot(xs, [x[p99] for x in tl], color="black", lw=1.0, ls="--", label="p99")
        a_lat.set_yscale("log")
        a_lat.set_ylabel(lat_label)
        lats = [v for x in tl for v in (x[p50], x[p99]) if v]
        if lats:
            _nice_log_ticks(a_lat, "y", min(lats) / 1.2, max(lats) * 1.2, lambda v, _p: fmt_num(v))
        lower(a_low, tl, xs, color)
        a_low.set_xlabel(f"time since move request (s), bins of {tl[0]['bin_s'] if tl else '?'} s")
        end = (mv["first_ack_ts"] or mv["end_ts"] or mv["request_ts"]) - t0
        faults = [o for o in t["outages"] if o["run_key"] == run["run_key"]]
        for ax in (a_lat, a_low):
            ax.axvspan(mv["request_ts"] - t0, end, color=MOVE_SHADE, alpha=0.35,
                       label=f"move window ({mv['move_seconds']:.2f} s)")
            for i, o in enumerate(faults):
                ax.axvline(o["start_ts"] - t0, color=FAULT_SHADE.color, ls=":", lw=1.4,
                           label=_fault_name(o).replace("\n", " ") if i == 0 else None)
        a_lat.set_title(f"{system_label(run['system'])}\npartition {format_bytes(mv['partition_bytes'])}, "
                        f"run {run_name(run['run_key'])}", fontsize=9)
        a_lat.legend(fontsize=8, loc="upper right")
    return fig, runs


def fig_timeline(t) -> Figure:
    picks = _pick_timeline_runs(t)
    if not picks:
        plt = pyplot()
        return Figure("produce_timeline", "Produce latency and ack rate across a move",
                      png_bytes(_empty(plt, "No run with a measured move.")), "No run with a measured move.", [])

    def acks(ax, tl, xs, color) -> None:
        ax.plot(xs, [x["acks_per_s"] for x in tl], color=color, lw=1.2, label="acks/s (all partitions)")
        ax.set_ylabel("acked sends per second")
        ax.set_ylim(0, max([x["acks_per_s"] or 0 for x in tl] + [1.0]) * 1.15)  # room above a flat rate
        ax.legend(fontsize=8, loc="lower right")

    fig, runs = _timeline_columns(t, picks, t["timeline"], "p50_ms", "p99_ms", "produce latency (ms, log)", acks)
    fig.suptitle("Produce latency (p50/p99 per bin) and ack rate across a partition move", y=1.0)
    fig.tight_layout()
    cap = ("Shaded: from the move request to the first ack served by the new owner; dotted: a fault. Latency "
           "quantiles per time bin from raw samples. From " + short_runs(runs) + ".")
    return Figure("produce_timeline", "Produce latency and ack rate across a move", png_bytes(fig), cap, runs)


def fig_consumers(t) -> Figure | None:
    """Per system, one run with consumers and a measured move: the tail groups' end-to-end
    latency and the catch-up groups' read rate per time bin. None without such runs."""
    keys = {x["run_key"] for x in t.get("consumer_timeline") or []}
    picks = _pick_timeline_runs(t, keys) if keys else []
    if not picks:
        return None

    def catch_up(ax, tl, xs, color) -> None:
        cu = [(x["catch_up_bytes_per_s"] or 0.0) / 1e6 for x in tl]
        ax.plot(xs, cu, color=color, lw=1.2, label="catch-up groups' reads")
        ax.set_ylabel("catch-up read rate (MB/s)")
        ax.set_ylim(0, max(cu + [0.1]) * 1.15)
        ax.legend(fontsize=8, loc="upper right")

    fig, runs = _timeline_columns(t, picks, t["consumer_timeline"], "e2e_p50_ms", "e2e_p99_ms",
                                  "end-to-end latency, tail groups (ms, log)", catch_up)
    fig.suptitle("Consumers across a partition move: end-to-end latency and catch-up reads", y=1.0)
    fig.tight_layout()
    cap = ("Tail groups: latency from the send call to a message's first delivery, quantiles per bin of delivery "
           "time from raw samples. Catch-up groups: bytes delivered per second, summed over the catch-up groups and "
           "counting every delivery (the backlog first, then the live tail). Shaded: from the move request to the first ack served by the new owner; dotted: a fault. From "
           + short_runs(runs) + ".")
    return Figure("consumers_timeline", "Consumers across a move", png_bytes(fig), cap, runs)


NIC_COLORS = {"tx": "#e67e22", "rx": "#2e86c1"}
NIC_LABELS = {"tx": "sent (tx)", "rx": "received (rx)"}


def _pick_link_runs(t) -> list[dict[str, Any]]:
    """One run on emulated links per system: picked as fig_timeline picks, else (no measured move
    on links) its first run on links."""
    keys = {x["run_key"] for x in t["links"]}
    picked = {p["run"]["system"]: p["run"] for p in _pick_timeline_runs(t, keys)}
    runs = [r for r in t["runs"] if r["run_key"] in keys]
    return [picked.get(s) or min((r for r in runs if r["system"] == s), key=lambda r: r["run_key"])
            for s in systems_of(runs)]


def _nic_node(node: str) -> tuple[int, int] | None:
    """Sort key of a link the figure draws (brokers by id, then the object store), else None."""
    num = node[len(BROKER_NODE_PREFIX):]
    if node.startswith(BROKER_NODE_PREFIX) and num.isdigit():
        return (0, int(num))
    return (1, 0) if node == NODE_OBJSTORE else None


def _few(tps: set[str]) -> str:
    """Partitions for a label: named if one or two, else counted."""
    return ", ".join(sorted(tps)) if len(tps) <= 2 else f"{len(tps)} partitions"


def _what_moved(ms: list[dict[str, Any]]) -> str:
    return "move " + _few({f"{m['topic']}-{m['partition']}" for m in ms})


def fig_links(t) -> Figure:
    plt = pyplot()
    title = "NIC over time"
    picks = _pick_link_runs(t)
    if not picks:
        return Figure("links", title, png_bytes(_empty(plt, NO_LINKS)), NO_LINKS, [])
    keys = {r["run_key"] for r in picks}
    series: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for x in t["links"]:
        if x["run_key"] in keys and _nic_node(x["node"]) is not None:
            series[(x["run_key"], x["node"])].append(x)
    nodes = sorted({n for _, n in series}, key=_nic_node)
    if not nodes:
        return Figure("links", title, png_bytes(_empty(plt, NO_LINKS)), NO_LINKS, [])
    fig, axes = plt.subplots(len(nodes), len(picks), figsize=(6.5 * len(picks), 1.9 * len(nodes) + 1.2),
                             sharex="col", squeeze=False)
    from matplotlib.patches import Patch

    for col, run in enumerate(picks):
        rk = run["run_key"]
        ml = [m for m in t["move_links"] if m["run_key"] == rk]
        # One shaded span per move action (its partitions' windows together), each node's roles.
        spans: dict[str, list[dict[str, Any]]] = defaultdict(list)
        roles: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for m in ml:
            spans[m["action_id"]].append(m)
            if m["role"] != "objstore":
                roles[m["node"]][m["role"]].add(f"{m['topic']}-{m['partition']}")
        windows = sorted((min(m["from_ts"] for m in ms), max(m["to_ts"] for m in ms), _what_moved(ms))
                         for ms in spans.values())
        rows = {n: sorted(series[(rk, n)], key=lambda x: x["ts"]) for n in nodes}
        for i, node in enumerate(nodes):
            ax, xs = axes[i][col], rows[node]
            # Each row on its own scale: a fast object-store link must not flatten the brokers'.
            top = max([max(x["tx_bytes_per_s"] or 0, x["rx_bytes_per_s"] or 0, (x["rate_bits"] or 0) / 8)
                       for x in xs] + [1.0]) * 1.15
            if not xs:
                ax.text(0.5, 0.5, "no link in this run", transform=ax.transAxes, ha="center", va="center")
            else:
                # A sample holds over the second before it: steps that end at the sample.
                ts = [x["t_rel_s"] for x in xs]
                for way in ("tx", "rx"):
                    ax.step(ts, [x[f"{way}_bytes_per_s"] for x in xs], where="pre", color=NIC_COLORS[way], lw=1.2,
                            label=NIC_LABELS[way])
                ax.step(ts, [(x["rate_bits"] or 0) / 8 for x in xs], where="pre", color="black", ls="--", lw=1,
                        label="link rate")
            for lo, hi, what in windows:
                ax.axvspan(lo - run["load_start"], hi - run["load_start"], color=MOVE_SHADE, alpha=0.35)
                if i == 0:
                    ax.text((lo + hi) / 2 - run["load_start"], top, what, ha="center", va="bottom", fontsize=7)
            ax.set_ylim(0, top)
            byte_ticks(ax.yaxis, 0, top, log=False)
            ax.yaxis.set_major_formatter(_fmt_obj(lambda v, _p: f"{format_bytes(v)}/s"))
            ax.set_ylabel("\n".join([node] + [f"{role} of {_few(tps)}" for role, tps in sorted(roles[node].items())]),
                          fontsize=8)
            if not xs:
                ax.set_yticks([])  # no link: no scale to read
        name = run_name(rk)
        biggest = max((m["partition_bytes"] or 0 for m in ml), default=0)
        axes[0][col].set_title(f"{system_label(run['system'])}\n" + (f"partition {format_bytes(biggest)}, " if ml else "")
                               + f"run {name}", fontsize=9, pad=14)
        axes[-1][col].set_xlabel("time since load start (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:  # the first panel may have no link
        h, lb = ax.get_legend_handles_labels()
        if len(h) > len(handles):
            handles, labels = h, lb
    handles.append(Patch(color=MOVE_SHADE, alpha=0.35))
    labels.append("move (request to first ack on the new owner, else to the action's end)")
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.01))
    fig.suptitle("Bytes per second on each broker's and the object store's link", y=1.0)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    runs = [r["run_key"] for r in picks]
    cap = ("Per node, the bytes/s its link carried each second (kernel interface counters; sent = tx, "
           "received = rx): produce, replication and object-store traffic together. Dashed: the link's rate. "
           "Shaded: each move's window, as in the link fill table. One run per system (its largest measured move). "
           "From " + short_runs(runs) + ".")
    return Figure("links", title, png_bytes(fig), cap, runs)


def fig_unavailable(t) -> Figure:
    plt = pyplot()
    moves = [m for m in t["moves"] if m["unavailable_seconds"] is not None]
    faults = [o for o in t["outages"] if o["unavailable_seconds"] is not None]
    # One group per configuration and kind of window: its moves, or one fault action of its runs.
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for m in moves:
        groups[(m["system"], 0, m["config_key"], "")].append(m)
    for o in faults:
        groups[(o["system"], 1, o["config_key"], o["action"] + str(o["broker"]))].append(o)
    runs = [b["run_key"] for b in moves + faults]
    if not groups:
        return Figure("unavailable_seconds", "Unavailable seconds", png_bytes(_empty(plt, "No move or fault windows.")),
                      "No move or fault windows.", [])
    order = {s: i for i, s in enumerate(systems_of(moves + faults))}

    def size(xs):
        return statistics.median([x.get("partition_bytes") or 0 for x in xs])

    keys = sorted(groups, key=lambda k: (k[1], order[k[0]], size(groups[k]), k[2], k[3]))
    fig, ax = plt.subplots(figsize=(max(7, 0.75 * len(keys) + 3), 4.4))
    top = 0.0
    for i, k in enumerate(keys):
        ys = [x["unavailable_seconds"] for x in groups[k]]
        med, fault = statistics.median(ys), k[1] == 1
        ax.bar(i, med, color=system_color(k[0]), hatch="//" if fault else None, edgecolor="black" if fault else None,
               alpha=0.8)
        if len(ys) > 1:
            ax.errorbar(i, med, yerr=[[med - min(ys)], [max(ys) - med]], color="black", capsize=4, lw=1)
            ax.scatter([i] * len(ys), ys, s=12, color="black", zorder=3)
        top = max(top, *ys)
    ax.set_xticks(range(len(keys)))
    labels = []
    for k in keys:
        xs = groups[k]
        what = _fault_name(xs[0]) if k[1] else format_bytes(size(xs))
        labels.append(f"{system_short(k[0])}\n{what}\nn={len(xs)}")
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylim(0, top * 1.3 or 1.0)
    ax.set_ylabel("unavailable_seconds (s)")
    ax.set_title("Longest time a moved or faulted partition went without a produce ack")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=system_color(s), label=system_label(s)) for s in systems_of(moves + faults)]
    if faults:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="fault (until recovery)"))
    handles.append(Line2D([], [], color="black", marker="o", markersize=3, ls="",
                          label="each run (bar: median, whiskers: min–max)"))
    ax.legend(handles=handles, fontsize=8)
    cap = ("One bar per configuration: the median over its runs (n), whiskers min–max, dots the runs. Per move: "
           "the longest interval inside [request - 1 s, move end + 5 s] without an ack on the moved "
           "partition. Per fault (hatched): the worst affected partition's, inside [fault - 1 s, its first ack "
           "after recovery], however long (bench/check/). From " + short_runs(runs) + ".")
    return Figure("unavailable_seconds", "Unavailable seconds", png_bytes(fig), cap, runs)


def _fault_name(o: dict[str, Any]) -> str:
    """A bar label: "kill\\nbroker 1", "stop\\nobject store" (narrow enough for a bar)."""
    verb, _, what = o["action"].partition("_")
    return f"{verb}\n{what.replace('_', ' ')}" + (f" {o['broker']}" if o.get("broker") is not None else "")


def phase_bars(t) -> tuple[dict, dict, list[str], list[str]]:
    """Per move (run, action): the seconds of each part (to stack, in the order they happen) and
    of each span (a phase timed from the request that holds parts: drawn apart, never stacked).
    -> (parts, spans, part names, span names)."""
    parts: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    spans: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for p in t["phases"]:
        k = (p["run_key"], p["action_id"])
        (spans if p["span"] else parts)[k][p["phase"]] += p["seconds"]
    part_names = list(dict.fromkeys(p["phase"] for p in t["phases"] if not p["span"]))
    span_names = list(dict.fromkeys(p["phase"] for p in t["phases"] if p["span"]))
    return parts, spans, part_names, span_names


def fig_phases(t) -> Figure:
    plt = pyplot()
    rows = t["phases"]  # move actions' phases only (the aggregate leaves start-up and shutdown out)
    title = "Move phase breakdown"
    if not rows:
        return Figure("move_phases", title, png_bytes(_empty(plt, "No move_phase events of a move action recorded.")),
                      "No move_phase events of a move action recorded.", [])
    parts, spans, part_names, span_names = phase_bars(t)
    system_of = {(p["run_key"], p["action_id"]): p["system"] for p in rows}
    pbytes = {(m["run_key"], m["action_id"]): m["partition_bytes"] for m in t["moves"]}
    msecs: dict[tuple[str, str], float] = {}
    for m in t["moves"]:
        if m["move_seconds"] is not None:
            k = (m["run_key"], m["action_id"])
            msecs[k] = max(msecs.get(k, 0.0), m["move_seconds"])
    order = {s: i for i, s in enumerate(systems_of(rows))}
    keys = sorted(system_of, key=lambda k: (order[system_of[k]], pbytes.get(k) or 0, k))
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.45 * len(keys) + 1.5)))
    cmap = plt.get_cmap("tab10")
    left = [0.0] * len(keys)
    for i, ph in enumerate(part_names):
        vals = [parts[k].get(ph, 0.0) for k in keys]
        ax.barh(range(len(keys)), vals, left=left, color=cmap(i % 10), label=ph, height=0.6)
        left = [a + b for a, b in zip(left, vals)]
    markers = ["D", "v", "^", "s"]
    for i, ph in enumerate(span_names):
        ks = [j for j, k in enumerate(keys) if ph in spans[k]]
        ax.scatter([spans[keys[j]][ph] for j in ks], ks, marker=markers[i % len(markers)], color="black", s=40,
                   zorder=4, label=f"{ph} (from the request; holds the bars before it)")
    ks = [j for j, k in enumerate(keys) if k in msecs]
    if ks:
        ax.scatter([msecs[keys[j]] for j in ks], ks, marker="|", color="#c0392b", s=300, lw=2, zorder=4,
                   label="move_seconds (request to first ack on the new owner)")
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"{system_short(system_of[k])}: {run_name(k[0])} (action {k[1]}, "
                        f"{format_bytes(pbytes.get(k))})" for k in keys], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title("Where a move's time goes (the phases a system reports)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="phase")
    runs = [k[0] for k in keys]
    cap = ("Bars: the move_phase events of each move action, summed per phase and stacked in the order they "
           "happen (opens and closes at broker start-up and shutdown are no move's and are left out). Markers, "
           "never stacked: phases a system times from the request, which hold the phases before them, and "
           "move_seconds. From " + short_runs(runs) + ".")
    return Figure("move_phases", title, png_bytes(fig), cap, runs)


def fig_projection(t) -> Figure:
    """The projection table's validated rows: a partition ingesting 100 MB/s at each size and link."""
    plt = pyplot()
    proj = [p for p in t["projection"] if p["validated"]]
    if not proj:
        why = sorted({f"{system_short(p['system'])}: {p['reason']}" for p in t["projection"] if p.get("reason")})
        msg = "No validated model to project." + ("\n" + "\n".join(why) if why else "")
        return Figure("projection", "TB-scale projection", png_bytes(_empty(plt, msg)), msg.replace("\n", " "), [])
    sizes = sorted({(p["partition_bytes"], p["size_label"]) for p in proj})
    fig, ax = plt.subplots(figsize=(9, 4.8))
    systems = systems_of(proj)
    combos = sorted({(s, p["link_gbit_s"]) for p in proj for s in systems if p["system"] == s},
                    key=lambda c: (systems.index(c[0]), c[1]))
    width = 0.8 / len(combos)
    finite = [p["move_seconds"] for p in proj if p["move_seconds"] is not None]
    top = max(finite, default=1.0)
    for i, (s, g) in enumerate(combos):
        ys, texts = [], []
        for _, lbl in sizes:
            p = next((x for x in proj if x["system"] == s and x["link_gbit_s"] == g and x["size_label"] == lbl), None)
            never = bool(p and p["never"])
            ys.append(top * 3 if never else (p["move_seconds"] if p and p["move_seconds"] is not None else float("nan")))
            texts.append("never" if never else mdl.human_seconds(p["move_seconds"]) if p and p["move_seconds"] else "")
        xs = [j + (i - (len(combos) - 1) / 2) * width for j in range(len(sizes))]
        first = g == min(c[1] for c in combos if c[0] == s)
        bars = ax.bar(xs, ys, width, color=system_color(s), alpha=1.0 if first else 0.55, hatch=None if first else "//",
                      label=f"{system_label(s)} @ {g:g} Gbit/s")
        for b, y, txt in zip(bars, ys, texts):
            if y == y and txt:
                ax.text(b.get_x() + b.get_width() / 2, y * 1.15, txt, ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_yscale("log")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{lbl} partition" for _, lbl in sizes])
    ax.set_ylabel("projected move time (log scale)")
    ax.set_title("Projected move time of a partition ingesting 100 MB/s (validated models only)")
    ax.legend(fontsize=8, loc="upper left")
    ymin = min(finite, default=0.1)
    ax.set_ylim(ymin / 3, top * 100)
    time_ticks(ax, ymin / 3, top * 100)
    runs = sorted({r for p in proj for r in (p["based_on_runs"] or "").split(",") if r})
    skipped = sorted({f"{system_short(p['system'])} ({p['reason']})" for p in t["projection"] if not p["validated"]})
    cap = ("Model projections (not measurements), only from models that passed their held-out checks; a bar at the "
           "top marked never: the ingest outruns the copy. " + "; ".join(sorted({
               f"{p['system']} @ {p['link_gbit_s']:g} Gbit/s: {p['basis']}" for p in proj if p["size_label"] == "8.2 TB"}))
           + (". Not validated, not shown: " + "; ".join(skipped) if skipped else "")
           + ". Fitted on " + short_runs(runs) + ".")
    return Figure("projection", "TB-scale projection", png_bytes(fig), cap, runs)


def fig_rebalance(t) -> Figure:
    """Simulated cluster rebalances (validated models only): time to rebalance against brokers."""
    plt = pyplot()
    sims = [r for r in t.get("rebalance") or [] if r["validated"] and not r["headline"]]
    if not sims:
        msg = "No validated cluster simulation (a system's model and its rebalance check must pass)."
        return Figure("rebalance", "Cluster rebalance (simulated)", png_bytes(_empty(plt, msg)), msg, [])
    runs = sorted({r for f in t["model_fit"] if f["system"] in {x["system"] for x in sims}
                   for r in (f["runs"] or "").split(",") if r})
    fig, ax = plt.subplots(figsize=(9, 4.8))
    total = max(r["total_bytes"] for r in sims)
    styles = {1.0: "-", 10.0: "--", 25.0: ":"}
    for s in systems_of(sims):
        for g in sorted({r["link_gbit_s"] for r in sims}):
            pts = sorted((r["brokers"], r["rebalance_seconds"]) for r in sims
                         if r["system"] == s and r["link_gbit_s"] == g and r["total_bytes"] == total
                         and r["concurrency"] == max(x["concurrency"] for x in sims))
            pts = [(b, y) for b, y in pts if y is not None and math.isfinite(y)]
            if pts:
                ax.plot([b for b, _ in pts], [y for _, y in pts], marker="o", color=system_color(s), ls=styles.get(g, "-."),
                        label=f"{system_label(s)} @ {g:g} Gbit/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("brokers before the scale-out (+10 %)")
    ax.set_ylabel("time to rebalance (log scale)")
    y0, y1 = ax.get_ylim()
    time_ticks(ax, y0, y1)
    ax.set_title(f"Simulated scale-out of a cluster holding {total / 1e15:g} PB (validated models only)"
                 if total >= 1e15 else f"Simulated scale-out of a cluster holding {total / 1e12:g} TB (validated models only)")
    ax.legend(fontsize=8)
    cap = ("Cruise-Control-style execution simulated per cluster (bench/analysis/rebalance.py, on Spark): lognormal "
           "partition sizes, replicas move to the new brokers until each holds its share, "
           f"{max(x['concurrency'] for x in sims)} concurrent moves per broker, the copy and tiered systems throttled "
           "to 50 % of each link (the tiered one copying only what is not tiered: at most a 1 GiB segment + 30 s of "
           "ingest, KIP-1023), the shared system uploading tails of at most min(512 MiB, ingest x 10 s). Not "
           "measurements: the models rest on " + short_runs(runs) + ".")
    return Figure("rebalance", "Cluster rebalance (simulated)", png_bytes(fig), cap, runs)


def fig_move_progress(t) -> Figure:
    """Bytes remaining over time for the largest copy move of each system, and every sample's ETA
    against the time the move really had left (the numbers `bench reassign --verify` prints)."""
    plt = pyplot()
    title = "Move progress: bytes remaining and ETA"
    rows = [r for r in t["move_progress"] if r["remaining_bytes"] is not None]
    if not rows:
        msg = "No move_progress samples of a copy move recorded (shared-storage moves copy nothing)."
        return Figure("move_progress", title, png_bytes(_empty(plt, msg)), msg, [])
    by_move: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_move[(r["system"], r["run_key"], r["action_id"], r["topic"], r["partition"])].append(r)
    end_rel = {(m["run_key"], m["action_id"], m["topic"], m["partition"]): m["end_ts"] - m["request_ts"]
               for m in t["moves"] if m.get("end_ts") is not None and m.get("request_ts") is not None}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    runs, top = [], 0.0
    for system in systems_of(rows):
        moves = [k for k in by_move if k[0] == system]
        k = max(moves, key=lambda k: (max(r["to_move_bytes"] or 0 for r in by_move[k]), k))
        pts = sorted(by_move[k], key=lambda r: r["t_rel_s"])
        ax.plot([r["t_rel_s"] for r in pts], [r["remaining_bytes"] / 1e6 for r in pts], color=system_color(system),
                lw=1.4, marker=".", ms=3, label=f"{system_short(system)}: {run_name(k[1])} {k[3]}-{k[4]}")
        runs.append(k[1])
        xs, ys = [], []
        for key in moves:
            end = end_rel.get(key[1:])
            for r in by_move[key]:
                if end is not None and r["eta_s"] is not None and end > r["t_rel_s"]:
                    xs.append(end - r["t_rel_s"])
                    ys.append(r["eta_s"])
            if end is not None:
                runs.append(key[1])
        if xs:
            ax2.scatter(xs, ys, s=10, color=system_color(system), alpha=0.6, label=system_short(system))
            top = max(top, max(xs), max(ys))
    ax.set_xlabel("seconds since the move request")
    ax.set_ylabel("bytes remaining (MB)")
    ax.set_ylim(bottom=0)
    ax.set_title("Bytes the new replicas still have to copy")
    ax.legend(fontsize=8)
    if top > 0:
        ax2.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="ETA = time left")
        ax2.fill_between([0, top], [0, 0.8 * top], [0, 1.2 * top], color="grey", alpha=0.12, label="within 20 %")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("time the move really had left (s)")
    ax2.set_ylabel("ETA at that moment (s)")
    ax2.set_title("ETA against the truth, every sample of every move")
    fig.tight_layout()
    runs = sorted(set(runs))
    cap = ("Left: remaining = each new replica's offset lag times the leader's bytes per offset "
           "(bench/run/move_progress.py), sampled every 0.5 s by the run's protocol observer, for the largest "
           "copy move of each system. Right: the ETA of each sample (remaining over the rate at which remaining "
           "fell in the last 5 s) against the time from that sample to the end of the move. Shared-storage moves "
           "copy nothing between brokers and have no bytes to show. From " + short_runs(runs) + ".")
    return Figure("move_progress", title, png_bytes(fig), cap, runs)


FIGURES = (fig_move_time, fig_bytes_moved, fig_timeline, fig_consumers, fig_links, fig_unavailable, fig_phases,
           fig_move_progress, fig_projection, fig_rebalance)


__all__ = ["FIGURES", "Figure", "phase_bars"]
