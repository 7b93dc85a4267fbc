"""Controller extension of the shared-storage system: streams, moves, broker-loss failover.

Registered by `extend_controller(ctl)` (the launcher passes `--extension
systems.shared.controller`). What it adds to the core controller:

- streams per partition (a data and a meta stream), created with the topic; their
  owner/epoch/state and object ranges are records in the durable metadata log (streams.py);
- RPCs for brokers: `shared_open_streams` (new epoch; STREAM_NOT_CLOSED while another live
  incarnation holds it), `shared_commit` (object ranges; a fenced epoch or incarnation is
  rejected with STREAM_FENCED), `shared_close_streams` (the source's step 4, after which the
  controller elects the target: step 5);
- reassignment (step 1): the partition change names the target as sole replica with leader -1
  (no election); a timeout elects the target anyway if the source never closes;
- failover: a fenced broker's partitions get new owners at once; the controller replays the lost
  incarnation's WAL objects from object storage (the not-yet-uploaded tail), commits that tail to
  the streams, closes them and then elects the new owners. The lost incarnation may not come back
  under the same broker epoch (its heartbeats get STALE_BROKER_EPOCH, so it registers anew).
"""
from __future__ import annotations

import asyncio
import logging
import time

from systems.core import errors
from systems.core.controller import Controller, ControllerExtension
from systems.core.metadata import PartitionInfo
from systems.core.rpc import RpcError
from systems.shared import formats
from systems.shared.objstore import ObjectStore, ObjectStoreError
from systems.shared.settings import DEFAULTS as CONFIG_DEFAULTS  # noqa: F401  (the controller's known keys)
from systems.shared.settings import SharedSettings, failpoint, s3_config
from systems.shared.streams import (OPENED, STREAM_FENCED, STREAM_NOT_CLOSED, STREAM_NOT_FOUND,
                                    STREAM_OUT_OF_ORDER, StreamRegistry)

log = logging.getLogger("shared.controller")


class SharedController(ControllerExtension):
    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.reg = StreamRegistry()
        self.settings = SharedSettings.from_config(ctl.config)
        self.store = ObjectStore(s3_config(ctl.config))
        self.prefix = self.settings.prefix or ctl.cluster_id
        self.replay_end = ctl.metalog.end_offset
        self._move_t0: dict[int, float] = {}  # move_id -> wall time of the request
        self._recovering: set[tuple[int, int]] = set()
        self._tasks: list[asyncio.Task] = []

    # -- hooks ----------------------------------------------------------------
    @property
    def image(self):
        return self.ctl.image

    def on_record(self, offset: int, rec: dict) -> None:
        self.reg.apply(rec)
        if offset < self.replay_end:
            return
        t = rec.get("type")
        if t == "shared_move":
            t0 = self._move_t0.get(rec["move_id"])
            self.ctl.events.emit("shared_move_committed", move_id=rec["move_id"], topic=self._topic(rec),
                                 partition=rec["partition"], **{"from": rec["from"]}, to=rec["to"],
                                 cause=rec.get("cause", "reassign"),
                                 commit_ms=round((time.time() - t0) * 1000, 3) if t0 else None)

    def _topic(self, rec: dict) -> str | None:
        ti = self.image.topics_by_id.get(rec["topic_id"])
        return ti.name if ti else None

    def on_topic_created(self, topic_id: str) -> list[dict]:
        return self.on_partitions_created(topic_id, sorted(self.image.topics_by_id[topic_id].partitions))

    def on_partitions_created(self, topic_id: str, partitions: list[int]) -> list[dict]:
        recs, nid = [], self.reg.next_id
        for i in partitions:
            for kind in ("data", "meta"):
                recs.append({"type": "stream_create", "stream_id": nid, "topic_id": topic_id, "partition": i,
                             "kind": kind})
                nid += 1
        return recs

    def elect_leader(self, p: PartitionInfo, election_type: int):
        """ElectLeaders: the partition has one owner (its only replica), so there is nothing to
        choose. Owner leading: ELECTION_NOT_NEEDED. Otherwise the owner is being handed over (a
        move or a failover in progress, which elects the new owner itself once its streams are
        closed) or lost: electing here would skip that handover, so the election is refused."""
        if p.leader >= 0 and p.leader == p.replicas[0]:
            return errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", []
        code = errors.PREFERRED_LEADER_NOT_AVAILABLE if election_type == 0 else errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return (code, f"{p.topic}-{p.partition} has no serving owner now: the shared-storage controller elects "
                "the owner itself when its handover (move or failover) completes", [])

    def validate_reassignment(self, p: PartitionInfo, target: list[int]) -> tuple[int, str] | None:
        if len(target) != 1:
            return (errors.INVALID_REPLICA_ASSIGNMENT,
                    f"the shared-storage system keeps one replica per partition (data lives in object "
                    f"storage): the target must be exactly one broker, got {target}")
        if not self.ctl.is_live(target[0]):
            return errors.INVALID_REPLICA_ASSIGNMENT, f"broker {target[0]} is not alive"
        if (p.topic_id, p.partition) in self.reg.moves:
            return (errors.REASSIGNMENT_IN_PROGRESS,
                    f"a move of {p.topic}-{p.partition} is already in progress")
        return None

    def reassign(self, p: PartitionInfo, target: list[int] | None) -> list[dict]:
        if target is None:
            # Cancel: a shared move cannot be rolled back once the source started closing;
            # it completes on its own within seconds (or by the controller's timeout).
            return []
        if p.replicas == target and p.leader == target[0]:
            return []
        return self._move_records(p, target[0], p.leader if p.leader >= 0 else p.replicas[0], "reassign")

    def reassignment_pending(self, p: PartitionInfo) -> bool:
        return (p.topic_id, p.partition) in self.reg.moves

    def _move_records(self, p: PartitionInfo, to: int, frm: int, cause: str) -> list[dict]:
        move_id = self.reg.next_move_id
        self.reg.next_move_id += 1  # several moves may be built before any is applied
        self._move_t0[move_id] = time.time()
        self.ctl.events.emit("shared_move_requested", move_id=move_id, topic=p.topic, partition=p.partition,
                             **{"from": frm}, to=to, cause=cause)
        return [{"type": "partition_change", "topic_id": p.topic_id, "partition": p.partition,
                 "replicas": [to], "isr": [to], "leader": -1, "leader_epoch": p.leader_epoch + 1,
                 "partition_epoch": p.partition_epoch + 1},
                {"type": "shared_move", "move_id": move_id, "topic_id": p.topic_id, "partition": p.partition,
                 "from": frm, "to": to, "cause": cause, "ts": time.time()}]

    def _partitions(self):
        for ti in list(self.image.topics.values()):
            for p in list(ti.partitions.values()):
                yield p

    # -- elections --------------------------------------------------------------
    def try_elect(self, topic_id: str, partition: int, force: str | None = None) -> list[dict]:
        """Step 5: once the partition's streams are closed, elect the move's target."""
        m = self.reg.moves.get((topic_id, partition))
        ti = self.image.topics_by_id.get(topic_id)
        if m is None or ti is None:
            return []
        p = ti.partitions[partition]
        data, meta = self.reg.partition_streams(topic_id, partition)
        if force is None and any(s is not None and s.state == OPENED for s in (data, meta)):
            return []
        if not self.ctl.is_live(m["to"]):
            return []
        t0 = self._move_t0.get(m["move_id"], m["ts"])
        self.ctl.events.emit("shared_move_elected", move_id=m["move_id"], topic=p.topic, partition=partition,
                             **{"from": m["from"]}, to=m["to"], how=force or "closed",
                             since_request_s=round(time.time() - t0, 4))
        # Open the streams for the target in the same append as its election (AutoMQ #1169): it
        # serves as soon as it sees the change, with no open request and no NOT_LEADER window. A
        # forced election leaves the open to the target (the old owner may still hold them).
        to = self.image.brokers.get(m["to"])
        opens = [] if force is not None or to is None else [
            {"type": "stream_open", "stream_id": s.id, "epoch": s.epoch + 1, "owner": m["to"],
             "owner_epoch": to.epoch, "cause": "elect"} for s in (data, meta) if s is not None]
        return opens + [{"type": "partition_change", "topic_id": topic_id, "partition": partition, "replicas": [m["to"]],
                 "isr": [m["to"]], "leader": m["to"], "leader_epoch": p.leader_epoch + 1,
                 "partition_epoch": p.partition_epoch + 1},
                {"type": "shared_move_done", "move_id": m["move_id"], "topic_id": topic_id,
                 "partition": partition, "how": force or "closed"}]

    def _load(self) -> dict[int, int]:
        n = {b.id: 0 for b in self.image.live_brokers()}
        for p in self._partitions():
            for r in p.replicas:
                if r in n:
                    n[r] += 1
        return n

    def on_broker_fenced(self, broker_id: int) -> list[dict]:
        """A broker incarnation is gone: its partitions get new owners now; its WAL is replayed
        (failover task) before they are elected."""
        b = self.image.brokers.get(broker_id)
        recs = []
        if b is not None and (broker_id, b.epoch) not in self.reg.dead:
            recs.append({"type": "shared_failover", "broker": broker_id, "broker_epoch": b.epoch, "ts": time.time()})
            self.ctl.events.emit("shared_failover_started", broker=broker_id, broker_epoch=b.epoch)
        load = {k: v for k, v in self._load().items() if k != broker_id}
        for p in self._partitions():
            if broker_id not in p.replicas and p.leader != broker_id:
                continue
            if not load:
                if p.leader == broker_id:  # nobody to take it: offline until a broker returns
                    recs.append({"type": "partition_change", "topic_id": p.topic_id, "partition": p.partition,
                                 "leader": -1, "leader_epoch": p.leader_epoch + 1,
                                 "partition_epoch": p.partition_epoch + 1})
                continue
            to = min(load, key=lambda k: (load[k], k))
            load[to] += 1
            m = self.reg.moves.get((p.topic_id, p.partition))
            frm = m["from"] if m is not None and m["to"] == broker_id else broker_id
            recs += self._move_records(p, to, frm, "failover")
        return recs

    def on_broker_unfenced(self, broker_id: int) -> list[dict]:
        """Partitions left without any owner (no live broker when theirs died) go to a live one."""
        recs = []
        for p in self._partitions():
            if p.leader != -1 or (p.topic_id, p.partition) in self.reg.moves:
                continue
            to = next((r for r in p.replicas if self.ctl.is_live(r)), broker_id)
            recs += self._move_records(p, to, -1, "unfence")
        return recs

    # -- RPCs -----------------------------------------------------------------------
    def _check_incarnation(self, broker: int, broker_epoch: int) -> None:
        b = self.image.brokers.get(broker)
        if b is None or b.epoch != broker_epoch or b.fenced or (broker, broker_epoch) in self.reg.dead:
            raise RpcError(f"broker {broker} epoch {broker_epoch} is fenced", STREAM_FENCED)

    def heartbeat_refused(self, broker_id: int, epoch: int) -> str | None:
        if (broker_id, epoch) in self.reg.dead:
            # Its streams were taken over: it must come back as a new incarnation.
            return f"broker {broker_id} epoch {epoch} was failed over"
        return None

    async def open_streams(self, broker: int, broker_epoch: int, topic_id: str, partition: int):
        async with self.ctl._lock:
            self._check_incarnation(broker, broker_epoch)
            ti = self.image.topics_by_id.get(topic_id)
            if ti is None or partition not in ti.partitions:
                raise RpcError(f"unknown partition {topic_id}-{partition}", STREAM_NOT_FOUND)
            p = ti.partitions[partition]
            if p.leader != broker:
                raise RpcError(f"broker {broker} is not the leader of {p.topic}-{partition} "
                               f"(leader {p.leader})", STREAM_FENCED)
            data, meta = self.reg.partition_streams(topic_id, partition)
            if data is None or meta is None:
                raise RpcError(f"no streams for {p.topic}-{partition}", STREAM_NOT_FOUND)
            recs = []
            for s in (data, meta):
                if s.state == OPENED:
                    if (s.owner, s.owner_epoch) == (broker, broker_epoch):
                        continue
                    holder = self.image.brokers.get(s.owner)
                    why = ("being recovered from its WAL" if (s.owner, s.owner_epoch) in self.reg.dead
                           else "still open")
                    if holder is not None and holder.epoch == s.owner_epoch and not holder.fenced:
                        why = "still open by a live broker"
                    raise RpcError(f"stream {s.id} is {why} (owner {s.owner} epoch {s.owner_epoch})",
                                   STREAM_NOT_CLOSED)
                recs.append({"type": "stream_open", "stream_id": s.id, "epoch": s.epoch + 1, "owner": broker,
                             "owner_epoch": broker_epoch})
            self.ctl.commit(recs)
            return {"data": data.to_dict(), "meta": meta.to_dict()}

    async def commit_object(self, broker: int, broker_epoch: int, objects: list[dict]):
        """objects: [{key, size, ranges}], committed together (one record per object)."""
        async with self.ctl._lock:
            self._check_incarnation(broker, broker_epoch)
            recs, rejected = self._commit_records(broker, broker_epoch, objects)
            self.ctl.commit(recs)
            return {"rejected": rejected, "offset": self.ctl.metalog.end_offset - 1}

    def _commit_records(self, broker: int, broker_epoch: int, objects: list[dict]) -> tuple[list[dict], dict]:
        rejected: dict[str, int] = {}
        ends: dict[int, int] = {}
        recs = []
        for o in objects:
            ok = []
            for r in o["ranges"]:
                sid = r["stream_id"]
                s = self.reg.streams.get(sid)
                if s is None:
                    rejected[str(sid)] = STREAM_NOT_FOUND
                elif (s.state != OPENED or s.owner != broker or s.owner_epoch != broker_epoch
                      or s.epoch != r["epoch"]):
                    rejected[str(sid)] = STREAM_FENCED
                elif s.kind == "data" and r["start"] != ends.get(sid, s.end):
                    rejected.setdefault(str(sid), STREAM_OUT_OF_ORDER)
                else:
                    ok.append(r)
                    ends[sid] = r["end"]
            if ok:
                recs.append({"type": "stream_commit", "key": o["key"], "size": o["size"],
                             "writer": {"broker": broker, "broker_epoch": broker_epoch}, "ranges": ok})
        return recs, rejected

    async def close_streams(self, broker: int, broker_epoch: int, topic_id: str, partition: int,
                            epochs: dict, elect: bool = True, objects: list[dict] | None = None,
                            handoff: dict | None = None):
        """The source's close (step 4), then the election (step 5). A snapshot handoff also commits
        the tail's WAL ranges (``objects``) and leaves the partition's final state (``handoff``) on
        the meta stream, in the same metadata-log append: the target opens from it with no
        object-store request. A rejected commit closes nothing (the source fences itself)."""
        async with self.ctl._lock:
            self._check_incarnation(broker, broker_epoch)
            recs, rejected = self._commit_records(broker, broker_epoch, objects or [])
            if rejected:
                return {"rejected": rejected, "elected": None, "offset": self.ctl.metalog.end_offset - 1}
            for sid, ep in epochs.items():
                s = self.reg.streams.get(int(sid))
                if s is None:
                    continue
                if s.state != OPENED or s.owner != broker or s.owner_epoch != broker_epoch or s.epoch != ep:
                    rejected[sid] = STREAM_FENCED
                    continue
                rec = {"type": "stream_close", "stream_id": s.id, "epoch": ep, "cause": "close"}
                if handoff is not None and s.kind == "meta":
                    rec["handoff"] = handoff
                recs.append(rec)
            self.ctl.commit(recs)
            failpoint(self.settings, "controller.before_elect", self.ctl.events)
            elected = None
            if elect:
                el = self.try_elect(topic_id, partition)
                if el:
                    self.ctl.commit(el)
                    elected = next(r["leader"] for r in el if r["type"] == "partition_change")
            return {"rejected": rejected, "elected": elected, "offset": self.ctl.metalog.end_offset - 1}

    # -- background: failover, move timeouts, garbage ---------------------------------
    async def run(self) -> None:
        n = 0
        while True:
            await asyncio.sleep(0.2)
            n += 1
            try:
                for key in list(self.reg.failovers):
                    if key not in self._recovering:
                        self._recovering.add(key)
                        self._tasks.append(asyncio.create_task(self._failover(*key)))
                await self._move_timeouts()
                if n % 25 == 0 and self.reg.garbage:
                    await self._collect_garbage()
            except Exception:
                log.exception("shared controller loop")

    async def _move_timeouts(self) -> None:
        now = time.time()
        async with self.ctl._lock:
            recs = []
            for (tid, part), m in list(self.reg.moves.items()):
                t0 = self._move_t0.get(m["move_id"], m["ts"])
                if now - t0 > self.settings.move_timeout_s:
                    data, meta = self.reg.partition_streams(tid, part)
                    lost = [s for s in (data, meta) if s is not None and s.state == OPENED
                            and (s.owner, s.owner_epoch) in self.reg.dead]
                    if not lost:  # a dead source's streams are closed by its failover instead
                        recs += self.try_elect(tid, part, force="timeout")
                else:
                    recs += self.try_elect(tid, part)
            if recs:
                self.ctl.commit(recs)

    async def _collect_garbage(self) -> None:
        keys = sorted(self.reg.garbage)
        try:
            await self.store.adelete_many(keys)
            self.reg.garbage.difference_update(keys)
        except ObjectStoreError as e:
            log.warning("garbage collection failed: %s", e)

    async def _failover(self, broker: int, broker_epoch: int) -> None:
        delay = 0.2
        while (broker, broker_epoch) in self.reg.failovers:
            try:
                await self._recover_wal(broker, broker_epoch)
                break
            except ObjectStoreError as e:
                log.warning("WAL recovery of broker %d epoch %d waits for object storage: %s",
                            broker, broker_epoch, e)
            except Exception:
                log.exception("WAL recovery of broker %d epoch %d failed", broker, broker_epoch)
            await asyncio.sleep(delay)
            delay = min(2.0, delay * 2)
        self._recovering.discard((broker, broker_epoch))

    @staticmethod
    def _last_wal_seq(s, prefix: str) -> int:
        """The sequence of the last WAL object of ``prefix`` the stream's ranges reference (0: none)."""
        for r in reversed(s.ranges):
            if r["key"].startswith(prefix):
                return _wal_seq(r["key"])
        return 0

    async def _recover_wal(self, broker: int, broker_epoch: int) -> None:
        t0 = time.monotonic()
        prefix = f"{self.prefix}/wal/{broker}/{broker_epoch}/"
        owned = {s.id: s for s in self.reg.owned_by(broker, broker_epoch)}
        # WAL objects committed by reference (snapshot handoff) hold nothing to replay up to the
        # oldest of the owned streams' last referenced ones: read only what follows it.
        done = min((self._last_wal_seq(s, prefix) for s in owned.values()), default=0)
        listed = sorted(await self.store.alist(prefix))
        keys = [k for k in listed if _wal_seq(k) > done]
        sem = asyncio.Semaphore(8)

        async def get(k):
            async with sem:
                return await self.store.aget(k)

        bufs = await asyncio.gather(*(get(k) for k in keys))
        ends = {sid: s.end for sid, s in owned.items()}
        stopped: set[int] = set()
        pending: dict[int, list] = {}
        wal_bytes = 0
        for k, buf in zip(keys, bufs):
            wal_bytes += len(buf)
            try:
                _, entries = formats.decode_wal(buf)
            except formats.FormatError as e:
                log.warning("skipping WAL object %s: %s", k, e)
                continue
            for e in entries:
                s = owned.get(e.stream_id)
                if s is None or e.epoch != s.epoch or e.stream_id in stopped or e.last < ends[e.stream_id]:
                    continue
                if e.base != ends[e.stream_id]:
                    stopped.add(e.stream_id)  # a gap: nothing after it was ever acknowledged
                    continue
                pending.setdefault(e.stream_id, []).append((e.base, e.last, e.max_ts, e.data))
                ends[e.stream_id] = e.last + 1
        sso = formats.SsoBuilder()
        for sid, batches in sorted(pending.items()):
            sso.add_data(sid, owned[sid].epoch, batches)
        key = None
        if sso.ranges:
            key = f"{self.prefix}/sso/recovery-{broker}-{broker_epoch}/{int(time.time() * 1000):016d}"
            await self.store.aput(key, sso.build())
        async with self.ctl._lock:
            recs = []
            if key:
                recs.append({"type": "stream_commit", "key": key, "size": sso.size,
                             "writer": {"controller": True, "recovery_of": [broker, broker_epoch]},
                             "ranges": [r for r in sso.ranges
                                        if self.reg.streams.get(r["stream_id"]) is not None
                                        and self.reg.streams[r["stream_id"]].end == r["start"]]})
            for s in self.reg.owned_by(broker, broker_epoch):
                recs.append({"type": "stream_close", "stream_id": s.id, "epoch": s.epoch, "cause": "failover"})
            recs.append({"type": "shared_failover_done", "broker": broker, "broker_epoch": broker_epoch})
            self.ctl.commit(recs)
            el = []
            for (tid, part) in list(self.reg.moves):
                el += self.try_elect(tid, part)
            if el:
                self.ctl.commit(el)
        self.ctl.events.emit("shared_wal_recovered", broker=broker, broker_epoch=broker_epoch,
                             wal_objects=len(keys), wal_bytes=wal_bytes, recovered_bytes=sso.size,
                             streams=len(owned), recovered_streams=len(pending),
                             recovery_ms=round((time.monotonic() - t0) * 1000, 3))
        # What a stream references stays (the garbage collector deletes it once nothing does).
        drop = [k for k in listed if k not in self.reg.obj_refs]
        if drop:
            try:
                await self.store.adelete_many(drop)
            except ObjectStoreError as e:
                log.warning("could not delete replayed WAL objects of broker %d: %s", broker, e)


def _wal_seq(key: str) -> int:
    return int(key.rsplit("/", 1)[-1])


def extend_controller(ctl: Controller) -> SharedController:
    ext = SharedController(ctl)
    # Its on_broker_fenced / on_broker_unfenced / heartbeat_refused hooks replace the core's
    # fencing: any broker can serve any partition, so a lost broker's partitions are handed
    # to live ones instead of waiting with leader -1.
    ctl.extensions.append(ext)
    ctl.handlers.update({
        "shared_open_streams": ext.open_streams,
        "shared_commit": ext.commit_object,
        "shared_close_streams": ext.close_streams,
    })
    try:
        ext.store.ensure_bucket()
    except ObjectStoreError as e:
        log.warning("object storage not reachable at start-up (will retry on use): %s", e)
    ext._tasks.append(asyncio.get_event_loop().create_task(ext.run()))
    return ext
