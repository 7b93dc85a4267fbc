"""What the runner watches while a run goes on: the cluster's metadata as a client sees it, the
cluster's reassignments and replica sizes as the Kafka protocol reports them, the CPU and memory of
every process, and, with emulated links, the bytes on every link. All write their observations
into the run's history.

The metadata poller and the protocol observer need nothing but the Kafka protocol, so they watch
any cluster the same way; on the harness's own systems their view runs side by side with the
brokers' journals (bench/history/journal.py), and the two can be compared."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from typing import Any

import psutil

from bench.history.names import (EVENT_CPU_SAMPLE, EVENT_FD_SAMPLE, EVENT_HOST_SAMPLE, EVENT_OBJSTORE_CENSUS, EVENT_LEADER_CHANGE, EVENT_LINK_SAMPLE,
                                 EVENT_LOG_DIRS, EVENT_UNTIERED,
                                 EVENT_MOVE_PROGRESS, EVENT_REASSIGNMENT_CLEARED, EVENT_REASSIGNMENT_LISTED, EVENT_RSS_SAMPLE,
                                 LOG_DIRS_EVERY, POLL_INTERVAL_S, PROTOCOL_POLL_S, SOURCE_CLIENT)
from bench.history.store import event_row
from bench.run.move_progress import Observation, Tracker, describe_log_dirs, leader_offsets
from bench.run.network import Network, rate_bits

# The poll constants live with the history's vocabulary (bench/history/names.py); bench.check.summary
# and the report still import them from here until issue 27's integration.
log = logging.getLogger("bench.run.observe")


def poll_metadata(run: Any, client, topics: list[str]) -> None:
    """Every 100 ms: leader / replicas / ISR of every partition as a client sees them, into
    ``run.state.metadata``; a change of leader becomes a ``leader_change`` event (source
    "client") carrying the ``action_id`` of the move that was moving the partition, if any."""
    last: dict[tuple[str, int], int] = {}
    while not run.state.stop.is_set():
        t0 = time.time()
        try:
            md = client.list_topics(timeout=2)
        except Exception as exc:  # a broker down: keep trying
            log.debug("metadata poll failed: %s", exc)
            run.state.stop.wait(POLL_INTERVAL_S)
            continue
        ts = time.time()
        snap = {}
        for name in topics:
            tmd = md.topics.get(name)
            if tmd is None or tmd.error is not None and not tmd.partitions:
                continue
            for p, pm in tmd.partitions.items():
                snap[(name, p)] = {"leader": pm.leader, "replicas": list(pm.replicas), "isr": list(pm.isrs)}
        with run.state.lock:
            run.state.metadata.update(snap)
            run.state.metadata_ts = ts
        rows = []
        for tp, m in sorted(snap.items()):
            if last.get(tp) != m["leader"]:
                d = {"topic": tp[0], "partition": tp[1], "leader": m["leader"], "replicas": m["replicas"],
                     "isr": m["isr"], "source": SOURCE_CLIENT, "previous": last.get(tp)}
                aid = run.windows.action_for(tp, ts)
                if aid is not None:
                    d["action_id"] = aid
                rows.append(event_row(EVENT_LEADER_CHANGE, ts, d, topic=tp[0], partition=tp[1]))
                last[tp] = m["leader"]
        if rows:
            run.history.extend(rows)
        run.state.stop.wait(max(0.0, POLL_INTERVAL_S - (time.time() - t0)))


def sample_processes(run: Any, until: float) -> None:
    """Every second during the load: CPU % (of one core) of the load process (with the Locust
    workers it started: one figure, whatever runs the producers), the consumer process,
    the harness itself
    and every cluster process, as ``cpu_sample`` events (what limits throughput), and their
    resident memory in bytes and open file descriptors, as ``rss_sample`` and ``fd_sample`` events
    at the same ts (what a soak judges); the whole host's CPU over the same second, as
    ``host_sample`` events (:func:`host_busy`: what bench/check/host.py judges saturation on).
    With ``checks.objstore_census_s``, the object store's objects and bytes per key group every
    that many seconds (``objstore_census``)."""
    procs: dict[str, psutil.Process] = {}
    host_prev = host_reading()
    census_every = run.sc.checks.objstore_census_s
    store = census_store(run.cluster) if census_every else None
    next_census = time.time()

    def track(name: str, pid: int | None) -> None:
        if pid and name not in procs:
            try:
                procs[name] = psutil.Process(pid)
                procs[name].cpu_percent(None)
            except psutil.Error:
                pass

    workers: dict[int, psutil.Process] = {}  # the load's own Locust workers (load.workers), counted as "load"
    while time.time() < until and not run.state.stop.is_set() and not run.state.load_over.is_set():
        track("load", run.load_proc.pid if run.load_proc else None)
        try:
            for ch in procs["load"].children(recursive=True) if "load" in procs else ():
                if ch.pid not in workers:
                    ch.cpu_percent(None)
                    workers[ch.pid] = ch
        except psutil.Error:
            pass
        consumers = getattr(run, "consumers", None)
        track("consume", consumers.proc.pid if consumers is not None and consumers.proc else None)
        track("harness", os.getpid())
        if run.cluster is not None:
            for name, pid in run.cluster.processes():
                if name in procs and procs[name].pid != pid:
                    del procs[name]  # restarted
                track(name, pid)
        run.state.stop.wait(1.0)
        host_now = host_reading()
        ts = host_now[0]
        host = host_busy(host_prev, host_now)
        host_prev = host_now
        cpu, rss, fds = {}, {}, {}
        for name, pr in list(procs.items()):
            try:
                with pr.oneshot():
                    cpu[name] = round(pr.cpu_percent(None), 1)
                    rss[name] = pr.memory_info().rss
                    fds[name] = pr.num_fds()
            except psutil.Error:  # gone (a killed broker): no sample, tracked again once restarted
                procs.pop(name, None)
        for pid, ch in list(workers.items()):
            try:
                with ch.oneshot():
                    cpu["load"] = round(cpu.get("load", 0.0) + ch.cpu_percent(None), 1)
                    rss["load"] = rss.get("load", 0) + ch.memory_info().rss
                    fds["load"] = fds.get("load", 0) + ch.num_fds()
            except psutil.Error:  # a worker that ended (or was killed)
                workers.pop(pid, None)
        cpu["_machine"] = host["busy_pct"]
        run.event(EVENT_CPU_SAMPLE, cpu, ts=ts)
        run.event(EVENT_RSS_SAMPLE, rss, ts=ts)
        run.event(EVENT_FD_SAMPLE, fds, ts=ts)
        run.event(EVENT_HOST_SAMPLE, host, ts=ts)
        if store is not None and ts >= next_census:
            next_census = ts + census_every
            try:
                run.event(EVENT_OBJSTORE_CENSUS, store.census(), ts=time.time())
            except Exception as exc:  # noqa: BLE001 - a stopped store (a fault): no count this time
                log.info("object store census: %s", exc)
    if store is not None:
        store.close()


def census_store(cluster: Any):
    """A client of the cluster's object store for censuses (straight to the store, past any
    latency proxy, uncapped), or None for a cluster without one the harness knows."""
    if cluster is None or getattr(cluster, "profile", None) is None or cluster.profile.object_store is None:
        return None
    config = getattr(cluster, "config", None) or {}
    if not config.get("s3.endpoint"):
        return None
    from systems.shared.objstore import ObjectStore
    from systems.shared.settings import s3_config

    info = getattr(cluster, "object_store_info", None) or {}
    store = ObjectStore(s3_config({k: v for k, v in config.items() if not k.endswith("bytes.per.s")}
                                  | {"s3.endpoint": info.get("endpoint") or config["s3.endpoint"]}))
    return store


PSI_CPU = "/proc/pressure/cpu"


def host_reading() -> tuple[float, Any, int | None]:
    """(time.time(), psutil.cpu_times(), the kernel's CPU pressure stall total: microseconds during
    which some runnable task waited for a CPU, None without PSI)."""
    stall = None
    try:
        with open(PSI_CPU, encoding="ascii") as f:
            some = f.readline().split()  # some avg10=.. avg60=.. avg300=.. total=<us>
        stall = int(some[-1].split("=")[1]) if some and some[0] == "some" else None
    except (OSError, ValueError, IndexError):
        pass
    return time.time(), psutil.cpu_times(), stall


def host_busy(before: tuple[float, Any, int | None], after: tuple[float, Any, int | None]) -> dict[str, Any]:
    """The whole host's CPU between two :func:`host_reading` readings: the ``host_sample`` payload
    (bench/history/names.py). Shares of all cores, in %; busy is what is neither idle nor waiting
    for I/O (psutil.cpu_percent's definition, htop's; guest time is already in user). Computed from
    the two readings, not from psutil.cpu_percent(None), whose interval runs from the calling
    thread's previous call (the first sample of a run would span nothing). ``cpu_pressure_pct``:
    the share of the interval during which some runnable task waited for a CPU (the kernel's PSI;
    None without it): recorded beside the busy share, not part of the saturation rule."""
    (t0, a, p0), (t1, b, p1) = before, after
    d = {f: max(0.0, getattr(b, f) - getattr(a, f)) for f in b._fields}
    total = sum(d.values()) - d.get("guest", 0.0) - d.get("guest_nice", 0.0)

    def pct(x: float) -> float:
        return round(100.0 * x / total, 1) if total > 0 else 0.0

    idle = d.get("idle", 0.0) + d.get("iowait", 0.0)
    try:
        load_1m = round(os.getloadavg()[0], 2)
    except OSError:
        load_1m = None
    return {"busy_pct": pct(total - idle), "user_pct": pct(d.get("user", 0.0) + d.get("nice", 0.0)),
            "system_pct": pct(d.get("system", 0.0) + d.get("irq", 0.0) + d.get("softirq", 0.0)),
            "iowait_pct": pct(d.get("iowait", 0.0)), "steal_pct": pct(d.get("steal", 0.0)),
            "interval_s": round(t1 - t0, 3), "cpus": psutil.cpu_count(), "load_1m": load_1m,
            "cpu_pressure_pct": (round(min(100.0, (p1 - p0) / 1e4 / (t1 - t0)), 1)
                                 if p0 is not None and p1 is not None and t1 > t0 else None)}


def link_bytes(network: Network) -> dict[str, tuple[int, int]]:
    """node -> (bytes it sent, bytes it received) so far, from the kernel's counters of the
    bridge-side veth ends (all in the switch namespace, so one `ip` call reads every link): what
    the bridge port received the node sent, and the other way round."""
    out = subprocess.run(["ip", "-n", network.switch, "-s", "-j", "link", "show"],
                         capture_output=True, text=True, timeout=5, check=True).stdout
    by_dev = {d["ifname"]: d["stats64"] for d in json.loads(out) if "stats64" in d}
    res = {}
    for node in [*network.nodes, "client"]:
        st = by_dev.get(network.veth(node) + "p")
        if st is not None:
            res[node] = (st["rx"]["bytes"], st["tx"]["bytes"])
    return res


def sample_links(run: Any, network: Network, until: float) -> None:
    """Every second during the load: bytes per second each link carried in each direction over
    the last interval, with the link's rate at the time, as ``link_sample`` events."""
    prev, t_prev = link_bytes(network), time.time()
    while time.time() < until and not run.state.stop.is_set() and not run.state.load_over.is_set():
        run.state.stop.wait(1.0)
        try:
            now = link_bytes(network)
        except (subprocess.SubprocessError, ValueError) as exc:  # a failed read: the next one spans both
            log.debug("link counters: %s", exc)
            continue
        ts = time.time()
        dt = ts - t_prev
        detail = {}
        for node, (tx, rx) in now.items():
            if node in prev and dt > 0:
                detail[node] = {"tx_bytes_per_s": round((tx - prev[node][0]) / dt, 1),
                                "rx_bytes_per_s": round((rx - prev[node][1]) / dt, 1),
                                "rate_bits": rate_bits(network.rates[node])}
        prev, t_prev = now, ts
        run.event(EVENT_LINK_SAMPLE, detail, ts=ts)


def poll_protocol(run: Any, admin, topics: list[str]) -> None:
    """The protocol-only view of moves, every :data:`PROTOCOL_POLL_S` seconds until the run stops:

    * ListPartitionReassignments: a partition that appears is a ``reassignment_listed`` event
      {replicas, adding, removing}, one that is gone again ``reassignment_cleared`` (the cluster's
      own "move complete", to within one poll);
    * DescribeLogDirs of each broker (every :data:`LOG_DIRS_EVERY` ticks): a ``log_dirs`` event
      {sizes: {"topic-partition": {broker: bytes}}, lags: {...: {broker: offset lag}}} for the
      run's topics (a broker that does not answer is left out of that sample), and with it a
      ``move_progress`` event per moving partition: bytes to move, done and remaining, rate and
      ETA, as `bench reassign --verify` prints them (bench/run/move_progress.py).

    Both carry the ``action_id`` of the move that was moving the partition, if any."""
    listed: dict[tuple[str, int], dict] = {}
    listed_now: dict[tuple[str, int], dict] = {}
    wanted = set(topics)
    tracker = Tracker(copies=run.sc.profile.copies_on_move)
    tiering = run.sc.profile.tiering
    tiers = tiering(run.sc.settings(), run.sc.system.extra) if tiering else None
    tick = 0
    while not run.state.stop.is_set():
        t0 = time.time()
        try:
            ongoing = admin.list_partition_reassignments(timeout_ms=2000)
        except Exception as exc:  # a broker down or the controller moving: next tick
            log.debug("ListPartitionReassignments failed: %s", exc)
            ongoing = None
        ts = time.time()
        if ongoing is not None:
            now: dict[tuple[str, int], dict] = {}
            for tp, r in ongoing.items():
                if tp.topic in wanted:
                    now[(tp.topic, tp.partition)] = {"replicas": list(r.get("replicas") or []),
                                                     "adding": list(r.get("adding_replicas") or []),
                                                     "removing": list(r.get("removing_replicas") or [])}
            rows = []
            listed_now = now
            for tp in sorted(set(now) - set(listed)):
                rows.append(_tp_event(run, EVENT_REASSIGNMENT_LISTED, tp, ts, now[tp]))
                listed[tp] = {**now[tp], "ts": ts}
            for tp in sorted(set(listed) - set(now)):
                seen = listed.pop(tp)
                rows.append(_tp_event(run, EVENT_REASSIGNMENT_CLEARED, tp, ts,
                                      {"replicas": seen["replicas"], "listed_seconds": round(ts - seen["ts"], 3)}))
            if rows:
                run.history.extend(rows)
        if tick % LOG_DIRS_EVERY == 0:
            sizes, lags = sample_log_dirs(run, admin, wanted)
            if tiers is not None and sizes:
                sample_untiered(run, admin, tiers, sizes)
            if ongoing is not None and (listed or tracker.tracking):
                record_move_progress(run, admin, tracker, time.time(), dict(listed_now), sizes, lags)
        tick += 1
        run.state.stop.wait(max(0.0, PROTOCOL_POLL_S - (time.time() - t0)))


def _tp_event(run: Any, name: str, tp: tuple[str, int], ts: float, detail: dict) -> dict:
    d = {"topic": tp[0], "partition": tp[1], **detail}
    aid = run.windows.action_for(tp, ts)
    if aid is not None:
        d["action_id"] = aid
    return event_row(name, ts, d, topic=tp[0], partition=tp[1])


def sample_log_dirs(run: Any, admin, topics: set[str]) -> tuple[dict, dict]:
    sizes, lags = describe_log_dirs(admin, run.cluster.broker_ids(), topics)
    if sizes:
        run.event(EVENT_LOG_DIRS, {"sizes": sizes, "lags": lags})
    return sizes, lags


def sample_untiered(run: Any, admin, tiers: dict[str, float], sizes: dict) -> None:
    """An ``untiered_sample`` event: per partition, the bytes its leader holds after the last tiered
    offset, what a new replica starting there (KIP-1023) would copy if moved now: the offsets from
    ListOffsets (LATEST_TIERED, EARLIEST_LOCAL, LATEST: the same question the new replica asks),
    turned into bytes with the leader's DescribeLogDirs size (:func:`untiered_bytes`)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    with run.state.lock:
        leaders = {tp: m["leader"] for tp, m in run.state.metadata.items() if m.get("leader", -1) >= 0}
    tps = [TopicPartition(*tp) for tp in sorted(leaders) if f"{tp[0]}-{tp[1]}" in sizes]
    if not tps:
        return
    try:
        offs = {spec: admin.list_partition_offsets({tp: spec for tp in tps}, timeout_ms=2000)
                for spec in (OffsetSpec.LATEST, OffsetSpec.EARLIEST_LOCAL, OffsetSpec.LATEST_TIERED)}
    except Exception as exc:  # noqa: BLE001 - a leader moving or down: no sample this tick
        log.debug("untiered sample failed: %s", exc)
        return
    out = {}
    for tp in tps:
        key, leader = f"{tp.topic}-{tp.partition}", leaders[(tp.topic, tp.partition)]
        local = sizes[key].get(str(leader))
        if local is None or any(tp not in o for o in offs.values()):
            continue
        end, start = offs[OffsetSpec.LATEST][tp].offset, offs[OffsetSpec.EARLIEST_LOCAL][tp].offset
        last = offs[OffsetSpec.LATEST_TIERED][tp].offset  # -1: nothing tiered yet
        out[key] = {"leader": leader, "end": end, "local_start": start, "last_tiered": last, "local_bytes": local,
                    "untiered_bytes": untiered_bytes(local, start, end, last,
                                                     run.prefilled.get((tp.topic, tp.partition)))}
    if out:
        run.event(EVENT_UNTIERED, {**tiers, "partitions": out})


def untiered_bytes(local: int, start: int, end: int, last_tiered: int, prefill: dict | None) -> int:
    """The bytes of offsets ``last_tiered + 1 .. end`` of a local log of ``local`` bytes holding
    ``start .. end``: the prefill's records (``{bytes, messages, first_offset, last_offset}``:
    large) at their own size, the rest at theirs (the local bytes left per offset), so that a
    prefill's few large records do not inflate the load's many small ones."""
    if last_tiered < start or end <= start:
        return local
    lo, n = last_tiered + 1, end - start
    pre_n = pre_bytes = in_tail = 0
    if prefill and prefill.get("messages") and prefill.get("first_offset") is not None:
        p0, p1 = int(prefill["first_offset"]), int(prefill["last_offset"])
        per = prefill["bytes"] / prefill["messages"]
        pre_n = max(0, min(p1, end - 1) - max(p0, start) + 1)  # prefill records still local
        in_tail = max(0, min(p1, end - 1) - max(p0, lo) + 1)  # ... and untiered
        pre_bytes = pre_n * per
    rest_n = n - pre_n
    per_rest = (local - pre_bytes) / rest_n if rest_n > 0 else 0.0
    tail = in_tail * (pre_bytes / pre_n if pre_n else 0.0) + (end - lo - in_tail) * max(per_rest, 0.0)
    return int(max(0, min(local, round(tail))))


def record_move_progress(run: Any, admin, tracker: Tracker, ts: float, ongoing: dict, sizes: dict, lags: dict) -> None:
    """A ``move_progress`` event per moving partition (bench/run/move_progress.py, the numbers
    `bench reassign --verify` prints), from this tick's listing and log-dir sample, the poller's
    leaders and ISRs, and the leaders' offsets."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    obs = Observation(ts, ongoing)
    with run.state.lock:
        md = {tp: run.state.metadata.get(tp) for tp in ongoing}
    for tp, m in md.items():
        if m is not None:
            obs.leaders[tp], obs.isr[tp] = m["leader"], list(m["isr"])
        key = f"{tp[0]}-{tp[1]}"
        if key in sizes:
            obs.sizes[tp] = {int(b): v for b, v in sizes[key].items()}
            obs.lags[tp] = {int(b): v for b, v in lags[key].items()}
    if tracker.copies:
        led = [TopicPartition(*tp) for tp in ongoing if obs.leaders.get(tp, -1) >= 0]
        obs.offsets = leader_offsets(admin, led, OffsetSpec, 2000)
    rows = [_tp_event(run, EVENT_MOVE_PROGRESS, (p.topic, p.partition), ts,
                      {k: v for k, v in p.to_dict().items() if k not in ("topic", "partition")})
            for p in tracker.update(obs)]
    if rows:
        run.history.extend(rows)
