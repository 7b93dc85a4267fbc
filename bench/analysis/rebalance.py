"""Whole-cluster rebalance simulator: a plan of partition moves executed the way Cruise Control's
executor does it, on a fluid model of the brokers' bandwidth. Pure Python (no Spark, no numpy),
deterministic, event-driven (no time step). Per event it re-rates only the moves at the two
brokers of the move that changed (equal), or those and the younger moves a change reaches (fifo).
Measured on the 2-core box (tests/test_rebalance.py): 1 PB, 500 -> 550 brokers, RF 3, ~11k
moves at Cruise Control's default concurrency 5: 0.3 s (equal), 0.4 s (fifo). All at once
(concurrency None) each new broker has ~220 moves in transfer: 1.8 s (equal), 15 s (fifo); a
drain of 5 of 500 brokers (1.2k moves) all at once: 0.1 s / 1 s. Keep sweeps inside Spark tasks
to a concurrency limit (what operators run anyway) or fewer, larger synthetic partitions.

Physics (one :class:`SimMove` per partition move):

* **Rate**: a move in transfer carries bytes at ``min(out_cap[src] / n_out(src),
  in_cap[dst] / n_in(dst))`` (equal share: each broker's cap split evenly among the moves in
  transfer leaving / entering it; ``in_cap=None`` = no cap on the receiving side). The caps are
  what a move may use: the copy system's replication throttle is a per-broker quota (leader quota
  on the source, follower quota on the target, systems/replication/throttle.py), so moves sharing a
  broker share its quota. Equal share is max-min fair whenever the moves of a broker are all
  limited by that broker (one source draining, one new broker filling); where some are limited
  elsewhere it leaves their unused share idle, so it errs slow.
  ``sharing="fifo"``: each broker's cap goes to its moves in the order they started, the oldest
  taking all it can (what its other broker leaves it), the next the rest. That is how a Kafka
  byte-rate quota shared by several fetchers behaves (a fetch is served whenever the quota is not
  in debt and may overdraw it by a whole response, so whoever fetches first takes the budget;
  measured in the drain runs: the first of two concurrent copies off one broker took ~90 % of its
  throttle). What differs between the two is not the bytes per second a broker carries but
  whether moves finish in lockstep: equal shares of equal moves end together, so their fixed
  parts leave the link idle; first-come shares stagger them, so one move's fixed part overlaps
  the next one's transfer. With ingest it matters more: all at once, equal shares keep every
  copy open for the whole rebalance, each carrying its partition's ingest all that time (11k
  moves onto 50 new brokers: 95 h equal vs 61 h fifo; 60 h at concurrency 5).
* **Ingest**: a copy must also carry what producers write while it runs: its remaining bytes
  shrink at ``rate - ingest``; a move whose ingest is at least its rate never catches up (while
  that lasts; it may catch up when other moves finish and its share grows). A queued move's
  partition grows while it waits (``bytes + ingest * wait``), unless ``retention`` keeps
  partitions at their steady size (a projected cluster; a short measured run has no retention).
* **Fixed cost**: ``fixed_s`` after its bytes are carried the move is complete in the cluster
  (copy: ISR join, leader election; shared: the model's ``c`` plus opening the stream's objects).
  A move holds its concurrency slots until then, as in the executor (and the harness, which frees
  a slot when the metadata shows the new leader). Its producers' first ack from the new leader
  comes ``ack_lag_s`` later (the client's metadata refresh, plus a new connection if it had none
  to that broker: ~0.2 s to a broker it writes to already, 0.6-1.9 s to a fresh one in our runs);
  the lag holds no slot, so it is paid once at the end, not once per round.
* **Concurrency** = ``num.concurrent.partition.movements.per.broker``: at most that many moves in
  flight per broker, counting the moves it is the source or the target of. Moves start in plan
  order; one that does not fit waits while later ones that fit start (the executor, and the
  harness's bench/run/timeline.py ``MoveScheduler``, do the same). ``None`` = all at once. A
  complete move frees its slots when the executor next checks (``check_interval_s``: Cruise
  Control's ``execution.progress.check.interval.ms``, 10 s by default, which dominates moves of a
  second or two; the harness polls metadata every ~0.1 s; 0 = at once).

``producer_seconds_above_target`` (what producers feel, in partition-seconds): the sum over moves
of ``handover_s`` (the window the producers of a moved partition wait at the switch), plus, when
``link`` and ``ingest_by_broker`` are given, per broker the seconds in which its inbound link
(where producers' bytes arrive) carries ingest + move traffic into it above
``LINK_TARGET`` (90 %) of the link, weighted by the partitions led there (``leaders_by_broker``,
default 1 per broker).

:func:`predict_run` rebuilds one measured run (rows of the aggregate's ``moves`` table) as
SimMoves and predicts its time to rebalance: first request -> last move's first ack.
"""
from __future__ import annotations

import heapq
import itertools
import math
import random
import statistics
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

# This file is shipped alone to Spark executors: it knows no move-model family. Its callers say
# whether a move copies between brokers (their family's ``copies``; a tiered copy carries only the
# local tail its leader names, as its ``bytes``) or hands a partition over (an upload, then an open).
LINK_TARGET = 0.9  # a link above this share of its rate queues producers' bytes
SHARING = ("equal", "fifo")
# The harness's watcher sees a finished move within about a metadata poll and a watcher poll
# (bench/run/observe.py and timeline.py both poll every 0.1 s).
HARNESS_CHECK_S = 0.1
Cap = Union[float, Mapping[int, float]]


@dataclass(frozen=True)
class SimMove:
    key: str  # e.g. "topic-3"
    src: int  # broker the bytes leave (copy: the partition's leader at the request; shared: the old owner)
    dst: int  # broker that receives (copy) / opens (shared)
    bytes: float  # bytes to carry at the request (copy: partition bytes B; shared: unuploaded tail)
    ingest_bytes_per_s: float  # written into the partition while it moves, carried too (copy); 0 for shared
    fixed_s: float  # per-move fixed cost after the transfer (model's c; shared: c + open(n_objects))


@dataclass
class SimResult:
    seconds: float  # first request -> last move's first ack (inf if some move never finishes)
    bytes_moved: float  # sum over moves of bytes at their start + ingest carried during the transfer
    moves: list[tuple[str, float, float]] = field(default_factory=list)  # (key, start_s, first ack s), by end
    never: list[str] = field(default_factory=list)  # moves that never catch up (and never finish)
    producer_seconds_above_target: float = 0.0


def _cap(cap: Cap | None, b: int) -> float:
    if cap is None:
        return math.inf
    if isinstance(cap, Mapping):
        return float(cap.get(b, math.inf))
    return float(cap)


def simulate(moves: Sequence[SimMove], out_cap: Cap, in_cap: Cap | None = None, concurrency: int | None = None, *,
             handover_s: float = 0.0, link: Cap | None = None, ingest_by_broker: Mapping[int, float] | None = None,
             leaders_by_broker: Mapping[int, float] | None = None, sharing: str = "equal",
             check_interval_s: float = 0.0, ack_lag_s: float = 0.0, retention: bool = False) -> SimResult:
    """Execute ``moves`` (in plan order) from t = 0, the request; see the module doc for the physics
    (``sharing``: "equal" or "fifo"; ``check_interval_s``: how often the executor looks for
    finished moves, so a complete move frees its slots at the next multiple of it; ``ack_lag_s``:
    from a move's completion in the cluster to its producers' first ack from the new leader;
    ``retention``: partitions at their steady size (log retention deletes what producers add), so a
    queued partition does not grow while it waits; else, as in a short run, it grows by its ingest)."""
    if concurrency is not None and concurrency < 1:
        raise ValueError("concurrency must be >= 1 or None")
    if sharing not in SHARING:
        raise ValueError(f"sharing must be one of {', '.join(SHARING)}")
    fifo = sharing == "fifo"
    n = len(moves)
    if n == 0:
        return SimResult(0.0, 0.0)
    src = [m.src for m in moves]
    dst = [m.dst for m in moves]
    ing = [max(0.0, float(m.ingest_bytes_per_s)) for m in moves]
    rem = [0.0] * n  # bytes left at last[i]
    last = [0.0] * n
    gross = [0.0] * n  # current share (bytes/s through the links)
    carried = [0.0] * n  # bytes carried by a finished transfer
    start = [math.nan] * n
    version = [0] * n
    state = [0] * n  # 0 waiting, 1 transfer, 2 fixed, 3 complete
    out_set: dict[int, set[int]] = defaultdict(set)
    in_set: dict[int, set[int]] = defaultdict(set)
    slots: dict[int, int] = defaultdict(int)
    waiting_at: dict[int, deque[int]] = defaultdict(deque)  # plan-ordered waiting moves per broker
    for i in range(n):
        for b in {src[i], dst[i]}:
            waiting_at[b].append(i)
    events: list[tuple[float, int, int, int]] = []  # (t, kind 0 transfer done / 1 complete, i, version)
    done: list[tuple[str, float, float]] = []

    # Producers above target: inbound traffic per broker (ingest + moves entering it).
    track = link is not None and ingest_by_broker is not None
    inbound: dict[int, float] = defaultdict(float)
    hot: set[int] = set()
    hot_weight = 0.0
    above = 0.0

    def weight(b: int) -> float:
        return float(leaders_by_broker.get(b, 0.0)) if leaders_by_broker is not None else 1.0

    def retarget(b: int) -> None:
        nonlocal hot_weight
        if not track:
            return
        over = ingest_by_broker.get(b, 0.0) + inbound[b] > LINK_TARGET * _cap(link, b)
        if over and b not in hot:
            hot.add(b)
            hot_weight += weight(b)
        elif not over and b in hot:
            hot.discard(b)
            hot_weight -= weight(b)

    if track:
        for b in ingest_by_broker:
            retarget(b)

    def settle(i: int, t: float) -> None:
        if t > last[i]:
            rem[i] = max(0.0, rem[i] - (gross[i] - ing[i]) * (t - last[i]))
            last[i] = t

    pos = [0] * n  # start order (fifo priority)
    next_pos = itertools.count().__next__
    ocap = {b: _cap(out_cap, b) for b in set(src)}
    icap = {b: _cap(in_cap, b) for b in set(dst)}
    push = heapq.heappush

    def apply(i: int, share: float, t: float) -> None:
        """Move ``i`` carries at ``share`` from ``t``: settle, and a new finish event."""
        g = gross[i]
        if t > last[i]:  # settle the bytes carried at the old share
            rem[i] = max(0.0, rem[i] - (g - ing[i]) * (t - last[i]))
            last[i] = t
        if track:
            inbound[dst[i]] += share - g
            retarget(dst[i])
        gross[i] = share
        net = share - ing[i]
        version[i] += 1
        if rem[i] <= 0.0 or math.isinf(share):  # nothing left, or no cap at all: done now
            push(events, (t, 0, i, version[i]))
        elif net > 0.0:
            push(events, (t + rem[i] / net, 0, i, version[i]))

    def left(cap_: float, on: set[int], p: int) -> float:
        """What a broker's cap leaves a move that started ``p``-th (fifo)."""
        return cap_ if math.isinf(cap_) else cap_ - sum(gross[k] for k in on if pos[k] < p)

    def rerate(brokers: Iterable[int], t: float, fresh: Iterable[int] = ()) -> None:
        """New shares for the moves in transfer at ``brokers`` (their counts changed); ``fresh``
        moves just started and need a first finish event even if their share is unchanged."""
        fresh = set(fresh)
        cand = set(fresh)
        for b in brokers:
            cand |= out_set[b]
            cand |= in_set[b]
        if not fifo:
            for i in cand:
                share = min(ocap[src[i]] / len(out_set[src[i]]), icap[dst[i]] / len(in_set[dst[i]]))
                if share != gross[i] or i in fresh:  # else limited on its other side: unchanged
                    apply(i, share, t)
            return
        # fifo: a move's share depends only on older moves at its brokers, so going oldest first
        # and following a change only to younger moves at the changed move's brokers reaches
        # every move whose share changes, each after all older ones are final.
        heap = [(pos[i], i) for i in cand]
        heapq.heapify(heap)
        seen: set[int] = set()
        while heap:
            p, i = heapq.heappop(heap)
            if i in seen:
                continue
            seen.add(i)
            s_, d_ = src[i], dst[i]
            share = max(0.0, min(left(ocap[s_], out_set[s_], p), left(icap[d_], in_set[d_], p)))
            if share == gross[i] and i not in fresh:
                continue
            apply(i, share, t)
            for k in out_set[s_] | in_set[d_]:
                if pos[k] > p and k not in seen:
                    heapq.heappush(heap, (pos[k], k))

    def fits(i: int) -> bool:
        return concurrency is None or (slots[src[i]] < concurrency and slots[dst[i]] < concurrency)

    def first_fit(b: int) -> int | None:
        q = waiting_at[b]
        while q and state[q[0]] != 0:  # drop started ones from the front
            q.popleft()
        if slots[b] >= concurrency:
            return None
        for i in q:
            if state[i] == 0 and fits(i):
                return i
        return None

    def admit(brokers: Sequence[int], t: float) -> None:
        """Start the waiting moves involving ``brokers`` (whose slots just freed) that fit now,
        in plan order (only those can: every other waiting move's brokers are as full as
        before), and re-rate."""
        started: list[int] = []
        changed: set[int] = set()
        while True:
            cands = [i for i in map(first_fit, brokers) if i is not None]
            if not cands:
                break
            i = min(cands)
            state[i] = 1
            for b in {src[i], dst[i]}:
                slots[b] += 1
            start[i] = t
            rem[i] = float(moves[i].bytes) + (0.0 if retention else ing[i] * t)  # grown while it waited
            last[i] = t
            out_set[src[i]].add(i)
            pos[i] = next_pos()
            in_set[dst[i]].add(i)
            changed.update((src[i], dst[i]))
            started.append(i)
        rerate(changed, t, started)

    def release(i: int, t: float) -> None:
        for b in {src[i], dst[i]}:
            slots[b] -= 1
        if concurrency is not None:
            admit(sorted({src[i], dst[i]}), t)

    t = 0.0
    if concurrency is None:
        for i in range(n):
            state[i] = 1
            start[i], rem[i], last[i] = 0.0, float(moves[i].bytes), 0.0
            out_set[src[i]].add(i)
            pos[i] = next_pos()
            in_set[dst[i]].add(i)
        rerate((), 0.0, range(n))
    else:
        for i in range(n):  # plan order over all brokers
            if fits(i):
                state[i] = 1
                for b in {src[i], dst[i]}:
                    slots[b] += 1
                start[i], rem[i], last[i] = 0.0, float(moves[i].bytes), 0.0
                out_set[src[i]].add(i)
                pos[i] = next_pos()
                in_set[dst[i]].add(i)
        rerate((), 0.0, [i for i in range(n) if state[i] == 1])
    limit = 2 * len(events) + 1024
    while events:
        if len(events) > limit:  # drop superseded finish events (re-rates leave one per change)
            events[:] = [e for e in events if e[1] != 0 or (state[e[2]] == 1 and e[3] == version[e[2]])]
            heapq.heapify(events)
            limit = 2 * len(events) + 1024
        te, kind, i, ver = heapq.heappop(events)
        if kind == 0 and (state[i] != 1 or ver != version[i]):
            continue
        if track and te > t and len(done) < n:  # until the last move is complete
            above += hot_weight * (te - t)
        t = te
        if kind == 0:  # bytes carried: leave the links, then the fixed part
            settle(i, t)
            state[i] = 2
            # what crossed: the bytes at its start and what was written while it ran
            carried[i] = float(moves[i].bytes) + ing[i] * (t - start[i] if retention else t)
            out_set[src[i]].discard(i)
            in_set[dst[i]].discard(i)
            if track:
                inbound[dst[i]] -= gross[i]
                retarget(dst[i])
            gross[i] = 0.0
            rerate((src[i], dst[i]), t)
            heapq.heappush(events, (t + max(0.0, moves[i].fixed_s), 1, i, 0))
        elif kind == 1:  # complete; its slots free when the executor next looks
            state[i] = 3
            done.append((moves[i].key, start[i], t + ack_lag_s))
            if check_interval_s > 0 and concurrency is not None:
                heapq.heappush(events, (math.ceil(t / check_interval_s - 1e-6) * check_interval_s, 2, i, 0))
            else:
                release(i, t)
        else:
            release(i, t)
    never = [moves[i].key for i in range(n) if state[i] == 1]
    complete = len(done) == n
    return SimResult(
        seconds=max(e for _, _, e in done) if complete else math.inf,
        bytes_moved=sum(carried[i] for i in range(n) if state[i] >= 2),
        moves=done, never=never,
        producer_seconds_above_target=handover_s * len(done) + (above if track else 0.0),
    )


# -- synthetic clusters ------------------------------------------------------------------------

Partition = tuple[str, float, float]  # (key, bytes, ingest bytes/s)


def partition_sizes(total_bytes: float, n_partitions: int, dist: str = "lognormal", sigma: float = 1.0,
                    seed: int = 0) -> list[float]:
    """``n_partitions`` sizes summing to ``total_bytes``: ``lognormal`` (a few big partitions, many
    small: shape ``sigma``, seeded) or ``equal``."""
    if n_partitions < 1:
        raise ValueError("n_partitions must be >= 1")
    if dist == "equal":
        return [total_bytes / n_partitions] * n_partitions
    if dist != "lognormal":
        raise ValueError(f"unknown dist {dist!r} (lognormal, equal)")
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0.0, sigma) for _ in range(n_partitions)]
    k = total_bytes / sum(raw)
    return [x * k for x in raw]


def _placement(brokers: int, partitions: Sequence[Partition], rf: int, seed: int) -> list[list[int]]:
    """Round-robin replicas over brokers 1..brokers in a seeded order of the partitions (so sizes
    are not lined up with broker ids), as the harness places topics; replicas[0] leads."""
    if not 1 <= rf <= brokers:
        raise ValueError(f"rf must be in 1..{brokers}")
    order = list(range(len(partitions)))
    random.Random(seed).shuffle(order)
    out: list[list[int]] = [[] for _ in partitions]
    for j, p in enumerate(order):
        out[p] = [1 + (j + r) % brokers for r in range(rf)]
    return out


def _sim_moves(partitions: Sequence[Partition], before: list[list[int]], plan: list[tuple[int, int, int]],
               copies: bool, fixed_s: float) -> list[SimMove]:
    """(partition index, broker leaving, broker joining) -> SimMoves: a copy is fed by the
    partition's leader at the request and carries its ingest; a handover is uploaded by the old
    owner and carries no ingest (``bytes`` is then the partition's tail)."""
    out = []
    for p, old, new in plan:
        key, b, r = partitions[p]
        if copies:  # a tiered copy's `bytes` is what it copies: the local tail
            out.append(SimMove(key, before[p][0], new, float(b), float(r), fixed_s))
        else:
            out.append(SimMove(key, old, new, float(b), 0.0, fixed_s))
    return out


def plan_scale_out(brokers: int, add: int, partitions: Sequence[Partition], rf: int, seed: int = 0, *,
                   copies: bool = True, fixed_s: float = 0.0) -> list[SimMove]:
    """``add`` brokers join ``brokers``: replicas move from the most loaded broker (by replica
    count; ties to the lower id) to each new broker in turn until each holds its share (total
    replicas // all brokers), as bench/scenario/actions/plans.py ``rebalance_plan`` does for one."""
    cur = _placement(brokers, partitions, rf, seed)
    before = [list(r) for r in cur]
    load: dict[int, list[int]] = {b: [] for b in range(1, brokers + add + 1)}
    for p, reps in enumerate(cur):
        for b in reps:
            load[b].append(p)
    share = sum(len(v) for v in load.values()) // len(load)
    rng = random.Random(seed + 1)
    for b in load:
        rng.shuffle(load[b])  # which of a donor's partitions leaves: seeded
    plan: list[tuple[int, int, int]] = []
    new_ids = list(range(brokers + 1, brokers + add + 1))
    donors = [(-len(load[b]), b) for b in range(1, brokers + 1)]  # most loaded first
    heapq.heapify(donors)
    progress = True
    while progress:
        progress = False
        for new in new_ids:
            if len(load[new]) >= share:
                continue
            skipped = []
            while donors and -donors[0][0] > share:
                neg, donor = heapq.heappop(donors)
                lst = load[donor]
                j = next((j for j in range(len(lst) - 1, -1, -1) if new not in cur[lst[j]]), None)
                if j is None:  # every partition of this donor is on `new` already
                    skipped.append((neg, donor))
                    continue
                cand = lst[j]
                lst[j] = lst[-1]
                lst.pop()
                load[new].append(cand)
                cur[cand] = [new if r == donor else r for r in cur[cand]]
                plan.append((cand, donor, new))
                heapq.heappush(donors, (-len(lst), donor))
                progress = True
                break
            for d in skipped:
                heapq.heappush(donors, d)
    return _sim_moves(partitions, before, plan, copies, fixed_s)


def plan_drain(brokers: int, drain: int | Sequence[int], partitions: Sequence[Partition], rf: int, seed: int = 0,
               *, copies: bool = True, fixed_s: float = 0.0) -> list[SimMove]:
    """Every replica on the drained broker(s) moves to the least loaded remaining broker (ties
    to the lower id) that does not hold the partition yet, as bench/scenario/actions/plans.py
    ``drain_plan`` does; partitions in key order."""
    drained = {drain} if isinstance(drain, int) else set(drain)
    cur = _placement(brokers, partitions, rf, seed)
    before = [list(r) for r in cur]
    targets = [b for b in range(1, brokers + 1) if b not in drained]
    if not targets:
        raise ValueError("no broker left to drain onto")
    load = {b: sum(1 for reps in cur if b in reps) for b in targets}
    plan = []
    for p in sorted(range(len(partitions)), key=lambda p: partitions[p][0]):
        for old in [b for b in cur[p] if b in drained]:
            choices = [b for b in targets if b not in cur[p]]
            if not choices:
                continue
            new = min(choices, key=lambda b: (load[b], b))
            load[new] += 1
            cur[p] = [new if r == old else r for r in cur[p]]
            plan.append((p, old, new))
    return _sim_moves(partitions, before, plan, copies, fixed_s)


# -- one measured run --------------------------------------------------------------------------


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def run_moves(rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
              sources: Mapping[str, int] | None = None) -> tuple[list[SimMove], float, float | None]:
    """The SimMoves of one run from its ``moves`` table rows (bench/analysis/aggregate/rows.py
    ``move_rows``), in plan order (the harness plans in (topic, partition) order), with the cap
    per broker (bytes/s: the copy system's per-broker throttle times ``efficiency``; the shared
    system's upload link times ``efficiency``) and the model's fixed part.

    Copy (and tiered copy): ``bytes`` = partition bytes at the request (a tiered copy: the
    ``copy_bytes_at_request`` its leader named, where known), ingest = bytes written during the move /
    (leader change - request), src = the leader at the request (``sources`` by "topic-partition",
    e.g. :func:`sources_from_summary`, else a ``src`` column), dst = the new leader. Handover:
    ``bytes`` = the unuploaded tail (``unuploaded_bytes``),
    fixed = ``fixed_s + open_fixed_s + open_per_object_s * objects`` (``objects`` column, if any)."""
    copies = bool(params["copies"])
    eff = float(params.get("efficiency", 1.0))
    out: list[SimMove] = []
    caps = []
    for r in sorted(rows, key=lambda r: (str(r["topic"]), int(r["partition"]))):
        key = f"{r['topic']}-{int(r['partition'])}"
        src = (sources or {}).get(key, r.get("src"))
        if src is None:
            raise ValueError(f"{key}: no source broker (pass sources=, e.g. sources_from_summary())")
        dst = int(r["new_leader"])
        cap = _num(r.get("bandwidth_bytes_per_s"))
        if cap is not None:
            caps.append(cap)
        if copies:
            req, lc = _num(r.get("request_ts")), _num(r.get("leader_change_ts"))
            during = _num(r.get("bytes_written_during_move")) or 0.0
            window = (lc - req) if req is not None and lc is not None and lc > req else _num(r.get("move_seconds"))
            ingest = during / window if window else 0.0
            # a tiered copy: the bytes the leader told the new replica to copy, else the whole log
            b = _num(r.get("copy_bytes_at_request"))
            b = b if b is not None else _num(r.get("partition_bytes"))
            if b is None:
                raise ValueError(f"{key}: no partition_bytes")
            out.append(SimMove(key, int(src), dst, b, ingest, float(params.get("fixed_s", 0.0))))
        else:
            tail = _num(r.get("unuploaded_bytes"))  # the aggregate falls back to the object-store bytes itself
            if tail is None:
                raise ValueError(f"{key}: no unuploaded_bytes")
            objs = _num(r.get("objects")) or 0.0
            fixed = (float(params.get("fixed_s", 0.0)) + float(params.get("open_fixed_s", 0.0))
                     + float(params.get("open_per_object_s", 0.0)) * objs)
            out.append(SimMove(key, int(src), dst, tail, 0.0, fixed))
    cap = eff * statistics.median(caps) if caps else None
    return out, (cap if cap is not None else math.inf), cap


def measured_seconds(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Time to rebalance of one run: last move's first ack - first request (None if any unknown)."""
    acks = [_num(r.get("first_ack_ts")) for r in rows]
    reqs = [_num(r.get("request_ts")) for r in rows]
    if not rows or any(a is None for a in acks) or any(q is None for q in reqs):
        return None
    return max(acks) - min(reqs)


def predict_run(moves_rows: Sequence[Mapping[str, Any]], model_params: Mapping[str, Any], *,
                concurrency: int | None = None, sources: Mapping[str, int] | None = None,
                sharing: str = "fifo", check_interval_s: float = HARNESS_CHECK_S) -> dict[str, Any]:
    """Predicted time to rebalance of one measured run (its ``moves`` rows, one run_key) next to the
    measured one. ``model_params``: ``{copies: True (the move family copies between brokers) | False
    (a handover), fixed_s, efficiency (copy: share
    of the throttle achieved; handover: share of the upload link), open_fixed_s,
    open_per_object_s, ack_lag_s}`` (``fixed_s``: request -> leader change beyond the transfer;
    ``ack_lag_s``: leader change -> first ack, default 0). ``concurrency`` as the run's move action had it (None = all at once).
    ``sharing`` "fifo" by default: our replication system's throttle is a Kafka-style quota (see
    :func:`simulate`)."""
    sim_moves, cap, _ = run_moves(moves_rows, model_params, sources)
    copy = bool(model_params["copies"])
    # copy: the per-broker throttle is both a leader (out) and a follower (in) quota; handover:
    # only the old owner's upload is capped (the new owner reads metadata).
    res = simulate(sim_moves, cap, cap if copy else None, concurrency, sharing=sharing,
                   check_interval_s=check_interval_s, ack_lag_s=float(model_params.get("ack_lag_s", 0.0)))
    meas = measured_seconds(moves_rows)
    return {
        "moves": len(sim_moves), "concurrency": concurrency, "cap_bytes_per_s": cap,
        "predicted_seconds": res.seconds, "measured_seconds": meas,
        "error_pct": (100.0 * (res.seconds - meas) / meas) if meas and math.isfinite(res.seconds) else None,
        "never": res.never, "bytes_moved": res.bytes_moved, "schedule": res.moves,
    }


def sources_from_summary(summary: Mapping[str, Any]) -> dict[str, int]:
    """"topic-partition" -> leader at the request (``from[0]`` of summary.json's moves)."""
    out = {}
    for m in summary.get("moves") or ():
        frm = m.get("from")
        if frm:
            out[f"{m['topic']}-{int(m['partition'])}"] = int(frm[0])
    return out
