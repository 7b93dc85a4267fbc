"""Classic consumer-group coordination (Kafka's GroupCoordinator), the same on both systems.

Group state and committed offsets live in the internal topic `__consumer_offsets`, an ordinary
partitioned topic of the system: the copy system replicates it through the ISR, the shared
system keeps it in streams in object storage. Records use Kafka's formats (OffsetCommitKey v1 /
OffsetCommitValue v3, GroupMetadataKey v2 / GroupMetadataValue v3, null value = tombstone) and
are appended the way a produce with acks=all is, so a commit is answered once durable the way
the system makes data durable.

A group's coordinator is the leader of partition abs(hash(group id)) % N (Kafka's rule). When a
broker starts leading an offsets partition it reads that partition from start to end to rebuild
its groups and offsets (COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it stops leading, the
state is dropped (NOT_COORDINATOR, the clients find the new coordinator).

Not done: log compaction of the offsets topic (it is created with cleanup.policy=compact but
never compacted, so a load reads every commit ever written), offset retention/expiry,
transactional offset commits, KIP-848 consumer groups, and static membership beyond replacing
a member that rejoins with the same group.instance.id.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from dataclasses import dataclass, field

from kafka import errors as _e
from kafka.protocol.admin import (DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse)
from kafka.protocol.consumer import (HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse,
                                     OffsetCommitResponse, OffsetFetchResponse, SyncGroupResponse)
from kafka.protocol.metadata import FindCoordinatorResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from . import errors
from .rpc import RpcError, RpcUnavailable

log = logging.getLogger("groups")

OFFSETS_TOPIC = "__consumer_offsets"

NONE = errors.NONE
COORDINATOR_LOAD_IN_PROGRESS = _e.CoordinatorLoadInProgressError.errno
COORDINATOR_NOT_AVAILABLE = _e.CoordinatorNotAvailableError.errno
NOT_COORDINATOR = _e.NotCoordinatorError.errno
ILLEGAL_GENERATION = _e.IllegalGenerationError.errno
INCONSISTENT_GROUP_PROTOCOL = _e.InconsistentGroupProtocolError.errno
INVALID_GROUP_ID = _e.InvalidGroupIdError.errno
UNKNOWN_MEMBER_ID = _e.UnknownMemberIdError.errno
INVALID_SESSION_TIMEOUT = _e.InvalidSessionTimeoutError.errno
REBALANCE_IN_PROGRESS = _e.RebalanceInProgressError.errno
INVALID_COMMIT_OFFSET_SIZE = _e.InvalidCommitOffsetSizeError.errno
OFFSET_METADATA_TOO_LARGE = _e.OffsetMetadataTooLargeError.errno
MEMBER_ID_REQUIRED = _e.MemberIdRequiredError.errno
GROUP_ID_NOT_FOUND = _e.GroupIdNotFoundError.errno
NON_EMPTY_GROUP = _e.NonEmptyGroupError.errno
FENCED_INSTANCE_ID = _e.FencedInstanceIdError.errno
GROUP_MAX_SIZE_REACHED = _e.GroupMaxSizeReachedError.errno

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
TICK_S = 0.1


def partition_for(group_id: str, n: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % n, with Java's String.hashCode over UTF-16 units."""
    h = 0
    for unit in struct.unpack(f">{len(group_id.encode('utf-16-be')) // 2}H", group_id.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -0x80000000 else abs(h)) % n


# -- __consumer_offsets record formats (Kafka's, non-flexible versions) ---------------------------
class _W:
    def __init__(self):
        self.b = bytearray()

    def i16(self, v):
        self.b += struct.pack(">h", v)
        return self

    def i32(self, v):
        self.b += struct.pack(">i", v)
        return self

    def i64(self, v):
        self.b += struct.pack(">q", v)
        return self

    def str(self, s):
        if s is None:
            return self.i16(-1)
        e = s.encode()
        self.i16(len(e)).b.extend(e)
        return self

    def bytes(self, v):
        v = v or b""
        self.i32(len(v)).b.extend(v)
        return self


class _R:
    def __init__(self, b):
        self.b, self.p = b, 0

    def _u(self, fmt, n):
        v, = struct.unpack_from(fmt, self.b, self.p)
        self.p += n
        return v

    def i16(self):
        return self._u(">h", 2)

    def i32(self):
        return self._u(">i", 4)

    def i64(self):
        return self._u(">q", 8)

    def str(self):
        n = self.i16()
        if n < 0:
            return None
        s = bytes(self.b[self.p:self.p + n]).decode()
        self.p += n
        return s

    def bytes(self):
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.b[self.p:self.p + n])
        self.p += n
        return v


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_W().i16(1).str(group).str(topic).i32(partition).b)


def offset_value(o: "Committed") -> bytes:
    return bytes(_W().i16(3).i64(o.offset).i32(o.leader_epoch).str(o.metadata).i64(o.commit_ts).b)


def group_key(group: str) -> bytes:
    return bytes(_W().i16(2).str(group).b)


def group_value(g: "Group") -> bytes:
    w = _W().i16(3).str(g.protocol_type or "").i32(g.generation).str(g.protocol).str(g.leader)
    w.i64(int(g.state_ts * 1000)).i32(len(g.members))
    for m in g.members.values():
        w.str(m.member_id).str(m.group_instance_id).str(m.client_id).str(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes(m.metadata(g.protocol)).bytes(m.assignment)
    return bytes(w.b)


@dataclass
class Committed:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ts: int


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = field(default_factory=time.monotonic)
    join_fut: asyncio.Future | None = None
    sync_fut: asyncio.Future | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, md in self.protocols:
            if name == protocol:
                return md
        return b""


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)  # MEMBER_ID_REQUIRED members -> expiry
    offsets: dict[tuple[str, int], Committed] = field(default_factory=dict)
    state_ts: float = field(default_factory=time.time)
    rebalance_start: float = 0.0  # monotonic, when PreparingRebalance began
    join_deadline: float = 0.0
    join_max_deadline: float = 0.0
    initial_delay: bool = False  # an Empty group's first rebalance waits group.initial.rebalance.delay.ms
    sync_pending: set[str] = field(default_factory=set)
    sync_deadline: float = 0.0

    def transition(self, state: str) -> None:
        self.state = state
        self.state_ts = time.time()

    def static_member(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.group_instance_id == instance_id), None)

    def fenced(self, member_id: str, instance_id: str | None) -> bool:
        m = self.static_member(instance_id)
        return m is not None and m.member_id != member_id

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool({n for n, _ in protocols} & self.candidate_protocols())

    def select_protocol(self) -> str:
        cands = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in cands)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [n for n, _ in first.protocols if n in cands]
        return max(order, key=lambda n: (votes.get(n, 0), -order.index(n)))


@dataclass
class Shard:
    """One __consumer_offsets partition this broker leads."""
    index: int
    part: object
    epoch: int
    loaded: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    task: asyncio.Task | None = None


class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        self.shards: dict[int, Shard] = {}
        self._creating: asyncio.Task | None = None
        self._tick: asyncio.Task | None = None

    # -- settings ------------------------------------------------------------------
    def _int(self, key: str) -> int:
        return int(self.broker.setting(key))

    # -- leadership of offsets partitions -------------------------------------------------
    def start(self) -> None:
        self._tick = asyncio.get_running_loop().create_task(self._tick_loop())

    def stop(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
        for idx in list(self.shards):
            self._drop(idx)

    def sync(self) -> None:
        """Start loading partitions this broker now leads; drop the state of those it no longer
        leads. Called after metadata changes and every tick (the shared system's partitions turn
        leader only once their streams are recovered)."""
        mine = {}
        for (topic, idx), part in self.broker.partitions.items():
            if topic == OFFSETS_TOPIC and part.is_leader:
                mine[idx] = part
        for idx in list(self.shards):
            sh = self.shards[idx]
            part = mine.get(idx)
            if part is None or part is not sh.part or part.leader_epoch != sh.epoch:
                self._drop(idx)
        for idx, part in mine.items():
            if idx not in self.shards:
                sh = self.shards[idx] = Shard(idx, part, part.leader_epoch)
                sh.task = asyncio.get_running_loop().create_task(self._load(sh))

    def _drop(self, idx: int) -> None:
        sh = self.shards.pop(idx)
        if sh.task is not None and not sh.task.done():
            sh.task.cancel()
        for g in sh.groups.values():
            for m in g.members.values():
                _resolve(m.join_fut, {"error": NOT_COORDINATOR})
                _resolve(m.sync_fut, {"error": NOT_COORDINATOR})
        if sh.loaded:
            log.info("no longer coordinator for %s-%d (%d groups dropped)", OFFSETS_TOPIC, idx, len(sh.groups))

    async def _load(self, sh: Shard) -> None:
        t0 = time.monotonic()
        part = sh.part
        end = part.log_end_offset
        off = part.log_start_offset
        n_offsets = 0
        try:
            while off < end:
                data = part.read(off, 1 << 20, end)
                if not data:
                    # A cold read on the shared system: the block is being fetched.
                    fut = part.data_waiter()
                    try:
                        await asyncio.wait_for(fut, 1.0)
                    except asyncio.TimeoutError:
                        pass
                    continue
                mr = MemoryRecords(bytes(data))
                advanced = False
                while True:
                    batch = mr.next_batch()
                    if batch is None:
                        break
                    for rec in batch:
                        if rec.offset < off:
                            continue
                        n_offsets += self._replay(sh, rec.key, rec.value)
                    nxt = batch.base_offset + batch.last_offset_delta + 1 if hasattr(batch, "last_offset_delta") \
                        else None
                    if nxt is not None and nxt > off:
                        off, advanced = nxt, True
                if not advanced:
                    log.warning("%s-%d: no progress loading at offset %d", OFFSETS_TOPIC, sh.index, off)
                    await asyncio.sleep(0.2)
                elif time.monotonic() - t0 > 10 and int(time.monotonic() - t0) % 10 == 0:
                    log.info("%s-%d: still loading, at offset %d of %d", OFFSETS_TOPIC, sh.index, off, end)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, sh.index)
            self.shards.pop(sh.index, None)  # the next tick retries
            return
        now = time.monotonic()
        for g in sh.groups.values():
            for m in g.members.values():
                m.last_heartbeat = now  # the members get a full session to find the new coordinator
        sh.loaded = True
        secs = now - t0
        self.broker.events.emit("coordinator_loaded", partition=sh.index, leader_epoch=sh.epoch,
                                groups=len(sh.groups), offsets=sum(len(g.offsets) for g in sh.groups.values()),
                                records=n_offsets, end_offset=end, seconds=round(secs, 4))
        log.info("coordinator for %s-%d (epoch %d): %d groups loaded in %.3fs", OFFSETS_TOPIC, sh.index, sh.epoch,
                 len(sh.groups), secs)

    def _replay(self, sh: Shard, key: bytes | None, value: bytes | None) -> int:
        if not key:
            return 0
        r = _R(key)
        kv = r.i16()
        if kv in (0, 1):
            gid, topic, p = r.str(), r.str(), r.i32()
            if value is None:
                g = sh.groups.get(gid)
                if g is not None:
                    g.offsets.pop((topic, p), None)
                return 1
            v = _R(value)
            vv = v.i16()
            off = v.i64()
            epoch = v.i32() if vv >= 3 else -1
            md = v.str()
            ts = v.i64()
            g = sh.groups.get(gid)
            if g is None:
                g = sh.groups[gid] = Group(gid)
            g.offsets[(topic, p)] = Committed(off, epoch, md or "", ts)
            return 1
        if kv == 2:
            gid = r.str()
            if value is None:
                sh.groups.pop(gid, None)
                return 1
            v = _R(value)
            vv = v.i16()
            g = sh.groups.get(gid)
            if g is None:
                g = sh.groups[gid] = Group(gid)
            g.protocol_type = v.str() or None
            g.generation = v.i32()
            g.protocol = v.str()
            g.leader = v.str()
            if vv >= 2:
                g.state_ts = v.i64() / 1000
            g.members = {}
            for _ in range(v.i32()):
                mid = v.str()
                inst = v.str() if vv >= 3 else None
                cid, host = v.str(), v.str()
                rto = v.i32() if vv >= 1 else 0
                sto = v.i32()
                if vv < 1:
                    rto = sto
                sub, asg = v.bytes(), v.bytes()
                g.members[mid] = Member(mid, inst, cid, host, rto, sto, g.protocol_type or "",
                                        [(g.protocol or "", sub or b"")], asg or b"")
            g.state = STABLE if g.members else EMPTY
            return 1
        return 0

    # -- lookups --------------------------------------------------------------------
    def n_partitions(self) -> int:
        ti = self.broker.image.topics.get(OFFSETS_TOPIC)
        return len(ti.partitions) if ti is not None else 0

    def shard_for(self, group_id: str) -> tuple[Shard | None, int]:
        n = self.n_partitions()
        if n == 0:
            return None, NOT_COORDINATOR
        idx = partition_for(group_id, n)
        sh = self.shards.get(idx)
        if sh is not None and sh.part.is_leader and sh.part.leader_epoch == sh.epoch:
            return (sh, NONE) if sh.loaded else (None, COORDINATOR_LOAD_IN_PROGRESS)
        info = self.broker.image.partition(OFFSETS_TOPIC, idx)
        if info is not None and info.leader == self.broker.id:
            return None, COORDINATOR_LOAD_IN_PROGRESS  # elected, still opening or loading
        return None, NOT_COORDINATOR

    # -- durable writes -------------------------------------------------------------
    async def _append(self, sh: Shard, recs: list[tuple[bytes, bytes | None]]) -> int:
        """Append records to the shard's partition as a produce with acks=all would; Kafka's
        mapping of the append's error to a coordinator error."""
        part = sh.part
        if self.shards.get(sh.index) is not sh or not part.is_leader or part.leader_epoch != sh.epoch:
            return NOT_COORDINATOR
        now_ms = int(time.time() * 1000)
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i, (k, v) in enumerate(recs):
            b.append(i, timestamp=now_ms, key=k, value=v, headers=[])
        batch = bytes(b.build())
        err = part.check_min_isr() if hasattr(part, "check_min_isr") else NONE
        if err == NONE:
            try:
                max_msg = int(self.broker.image.topic_config(OFFSETS_TOPIC, "max.message.bytes",
                                                             self.broker.setting("message.max.bytes")))
                _, last = part.append(batch, max_msg)
            except errors.KafkaError as e:
                err = e.code
            except OSError as e:
                log.error("append to %s-%d failed: %s", OFFSETS_TOPIC, sh.index, e)
                err = errors.KAFKA_STORAGE_ERROR
        if err == NONE:
            err = await part.wait_acked(last, -1, self._int("offsets.commit.timeout.ms") / 1000)
        if err in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                   errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT):
            return COORDINATOR_NOT_AVAILABLE
        if err in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
            return NOT_COORDINATOR
        if err in (errors.MESSAGE_TOO_LARGE, errors.INVALID_RECORD, errors.CORRUPT_MESSAGE):
            return INVALID_COMMIT_OFFSET_SIZE
        return err

    # -- timers -------------------------------------------------------------------
    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.sync()
                now = time.monotonic()
                for sh in list(self.shards.values()):
                    if sh.loaded:
                        for g in list(sh.groups.values()):
                            self._expire(sh, g, now)
            except Exception:
                log.exception("group coordinator tick failed")

    def _expire(self, sh: Shard, g: Group, now: float) -> None:
        for mid, deadline in list(g.pending.items()):
            if now > deadline:
                del g.pending[mid]
                if g.state == PREPARING:
                    self._try_complete_join(sh, g)
        for m in list(g.members.values()):
            if m.join_fut is not None or m.sync_fut is not None:
                continue  # a member waiting on the coordinator is alive
            if now - m.last_heartbeat > m.session_timeout_ms / 1000:
                self._remove_member(sh, g, m, "session_timeout")
        if g.state == PREPARING and now >= g.join_deadline:
            self._complete_join(sh, g)
        elif g.state == COMPLETING and g.sync_pending and now >= g.sync_deadline:
            for mid in list(g.sync_pending):
                m = g.members.get(mid)
                if m is not None:
                    self._remove_member(sh, g, m, "rebalance_timeout", rebalance=False)
            g.sync_pending.clear()
            if g.state == COMPLETING:
                self._prepare_rebalance(sh, g)

    # -- the state machine -------------------------------------------------------------
    def _remove_member(self, sh: Shard, g: Group, m: Member, reason: str, rebalance: bool = True) -> None:
        g.members.pop(m.member_id, None)
        g.sync_pending.discard(m.member_id)
        _resolve(m.join_fut, {"error": UNKNOWN_MEMBER_ID})
        m.join_fut = None
        _resolve(m.sync_fut, {"error": UNKNOWN_MEMBER_ID})
        m.sync_fut = None
        self.broker.events.emit("group_member_removed", group=g.group_id, member=m.member_id, reason=reason,
                                generation=g.generation)
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)
        if not rebalance:
            return
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(sh, g)
        elif g.state == PREPARING:
            self._try_complete_join(sh, g)

    def _prepare_rebalance(self, sh: Shard, g: Group) -> None:
        now = time.monotonic()
        if g.state == COMPLETING:
            for m in g.members.values():
                m.assignment = b""
                _resolve(m.sync_fut, {"error": REBALANCE_IN_PROGRESS})
                m.sync_fut = None
        g.sync_pending.clear()
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0) / 1000
        if g.state == EMPTY:
            delay = self._int("group.initial.rebalance.delay.ms") / 1000
            g.initial_delay = delay > 0
            g.join_deadline = now + min(delay, timeout)
            g.join_max_deadline = now + timeout
        else:
            g.initial_delay = False
            g.join_deadline = now + timeout
        if g.state != PREPARING:
            g.rebalance_start = now
        g.transition(PREPARING)
        self._try_complete_join(sh, g)

    def _try_complete_join(self, sh: Shard, g: Group) -> None:
        if g.state != PREPARING:
            return
        if g.initial_delay:
            if time.monotonic() >= g.join_deadline:
                self._complete_join(sh, g)
            return
        if not g.pending and all(m.join_fut is not None for m in g.members.values()):
            self._complete_join(sh, g)

    def _complete_join(self, sh: Shard, g: Group) -> None:
        if g.state != PREPARING:
            return
        for m in list(g.members.values()):
            if m.join_fut is None:
                self._remove_member(sh, g, m, "rebalance_timeout", rebalance=False)
        g.pending.clear()
        g.generation += 1
        if not g.members:
            g.protocol = None
            g.protocol_type = g.protocol_type if g.offsets else None
            g.leader = None
            g.transition(EMPTY)
            asyncio.get_running_loop().create_task(self._store_group(sh, g, g.generation))
            return
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.protocol = g.select_protocol()
        g.transition(COMPLETING)
        g.sync_pending = set(g.members)
        g.sync_deadline = time.monotonic() + max(m.rebalance_timeout_ms for m in g.members.values()) / 1000
        now = time.monotonic()
        for m in g.members.values():
            res = {"error": NONE, "generation": g.generation, "protocol_type": g.protocol_type,
                   "protocol": g.protocol, "leader": g.leader, "member_id": m.member_id,
                   "members": [(o.member_id, o.group_instance_id, o.metadata(g.protocol)) for o in g.members.values()]
                   if m.member_id == g.leader else []}
            _resolve(m.join_fut, res)
            m.join_fut = None
            m.is_new = False
            m.last_heartbeat = now

    async def _store_group(self, sh: Shard, g: Group, generation: int) -> int:
        err = await self._append(sh, [(group_key(g.group_id), group_value(g))])
        if err != NONE:
            log.warning("storing group %s generation %d failed: %s", g.group_id, generation, errors.name(err))
        return err

    def _join_response(self, m: Member, g: Group) -> dict:
        return {"error": NONE, "generation": g.generation, "protocol_type": g.protocol_type, "protocol": g.protocol,
                "leader": g.leader, "member_id": m.member_id,
                "members": [(o.member_id, o.group_instance_id, o.metadata(g.protocol)) for o in g.members.values()]
                if m.member_id == g.leader else []}

    # -- FindCoordinator ------------------------------------------------------------
    async def handle_find_coordinator(self, req, header, conn):
        v = header.request_api_version
        key_type = getattr(req, "key_type", 0) if v >= 1 else 0
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        results = []
        if key_type == 0 and self.n_partitions() == 0:
            await self._create_offsets_topic()
        for key in keys:
            if key_type != 0:
                results.append((key, errors.INVALID_REQUEST, "only group coordinators (key type 0) are supported",
                                None))
                continue
            if key is None:
                results.append((key, INVALID_GROUP_ID, "group id is null", None))
                continue
            n = self.n_partitions()
            if n == 0:
                results.append((key, COORDINATOR_NOT_AVAILABLE, "the offsets topic is being created", None))
                continue
            info = self.broker.image.partition(OFFSETS_TOPIC, partition_for(key, n))
            b = self.broker.image.brokers.get(info.leader) if info is not None and info.leader >= 0 else None
            if b is None or b.fenced:
                results.append((key, COORDINATOR_NOT_AVAILABLE, "the coordinator is not available", None))
            else:
                results.append((key, NONE, None, b))
        R = FindCoordinatorResponse
        if v >= 4:
            return R(version=v, throttle_time_ms=0, coordinators=[
                R.Coordinator(key=k, node_id=b.id if b else -1, host=b.host if b else "", port=b.port if b else -1,
                              error_code=e, error_message=msg) for k, e, msg, b in results])
        k, e, msg, b = results[0]
        return R(version=v, throttle_time_ms=0, error_code=e, error_message=msg, node_id=b.id if b else -1,
                 host=b.host if b else "", port=b.port if b else -1)

    async def _create_offsets_topic(self) -> None:
        """Kafka's lazy creation of __consumer_offsets on the first FindCoordinator."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        try:
            await asyncio.wait_for(asyncio.shield(self._creating), 10)
        except (asyncio.TimeoutError, Exception) as e:
            log.warning("creating %s: %s", OFFSETS_TOPIC, e)

    async def _create(self) -> None:
        live = len(self.broker.image.live_brokers())
        if live == 0:
            return
        rf = min(self._int("offsets.topic.replication.factor"), live)
        t = {"name": OFFSETS_TOPIC, "num_partitions": self._int("offsets.topic.num.partitions"),
             "replication_factor": rf, "assignments": [],
             "configs": {"cleanup.policy": "compact", "compression.type": "producer"}}
        try:
            res = (await self.broker.forward("create_topics", topics=[t]))["results"][0]
        except (RpcUnavailable, RpcError) as e:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, e)
            return
        if res["error_code"] not in (NONE, errors.TOPIC_ALREADY_EXISTS):
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, res.get("error_message"))
        else:
            log.info("created %s: %d partitions, replication factor %d", OFFSETS_TOPIC, t["num_partitions"], rf)

    # -- JoinGroup ---------------------------------------------------------------------
    async def handle_join_group(self, req, header, conn):
        v = header.request_api_version
        res = await self._join(req, header, conn, v)
        R = JoinGroupResponse
        err = res["error"]
        return R(version=v, throttle_time_ms=0, error_code=err, generation_id=res.get("generation", -1),
                 protocol_type=res.get("protocol_type"),
                 protocol_name=res.get("protocol") if res.get("protocol") is not None or v >= 7 else "",
                 leader=res.get("leader") or "", skip_assignment=False, member_id=res.get("member_id", ""),
                 members=[R.JoinGroupResponseMember(member_id=mid, group_instance_id=inst, metadata=md)
                          for mid, inst, md in res.get("members", [])])

    async def _join(self, req, header, conn, v: int) -> dict:
        gid = req.group_id
        member_id = req.member_id or ""
        instance = req.group_instance_id if v >= 5 else None
        session_ms = req.session_timeout_ms
        rebalance_ms = req.rebalance_timeout_ms if v >= 1 and req.rebalance_timeout_ms >= 0 else session_ms
        protocols = [(p.name, bytes(p.metadata or b"")) for p in req.protocols]
        if not gid:
            return {"error": INVALID_GROUP_ID, "member_id": member_id}
        sh, err = self.shard_for(gid)
        if err != NONE:
            return {"error": err, "member_id": member_id}
        if not self._int("group.min.session.timeout.ms") <= session_ms <= self._int("group.max.session.timeout.ms"):
            return {"error": INVALID_SESSION_TIMEOUT, "member_id": member_id}
        g = sh.groups.get(gid)
        if g is None:
            if member_id:
                return {"error": UNKNOWN_MEMBER_ID, "member_id": member_id}
            g = sh.groups[gid] = Group(gid)
        if g.state == DEAD:
            return {"error": COORDINATOR_NOT_AVAILABLE, "member_id": member_id}
        if not g.supports(req.protocol_type, protocols):
            return {"error": INCONSISTENT_GROUP_PROTOCOL, "member_id": member_id}
        host = conn.peer[0] if isinstance(conn.peer, tuple) else str(conn.peer)
        client_id = header.client_id or ""
        now = time.monotonic()
        if not member_id:
            if len(g.members) + len(g.pending) >= self._int("group.max.size"):
                return {"error": GROUP_MAX_SIZE_REACHED, "member_id": member_id}
            new_id = f"{instance or client_id}-{uuid.uuid4()}"
            if instance is None and v >= 4:
                # KIP-394: a new member first learns its id, then joins with it.
                g.pending[new_id] = now + session_ms / 1000
                return {"error": MEMBER_ID_REQUIRED, "member_id": new_id}
            old = g.static_member(instance)
            if old is not None:
                # The same static instance restarted: it replaces its old member (fenced from now on).
                _resolve(old.join_fut, {"error": FENCED_INSTANCE_ID})
                old.join_fut = None
                _resolve(old.sync_fut, {"error": FENCED_INSTANCE_ID})
                old.sync_fut = None
                g.members.pop(old.member_id, None)
                g.sync_pending.discard(old.member_id)
                if g.leader == old.member_id:
                    g.leader = new_id
            return await self._add_member(sh, g, new_id, instance, client_id, host, rebalance_ms, session_ms,
                                          req.protocol_type, protocols)
        if member_id in g.pending:
            del g.pending[member_id]
            return await self._add_member(sh, g, member_id, instance, client_id, host, rebalance_ms, session_ms,
                                          req.protocol_type, protocols)
        if g.fenced(member_id, instance):
            return {"error": FENCED_INSTANCE_ID, "member_id": member_id}
        m = g.members.get(member_id)
        if m is None:
            return {"error": UNKNOWN_MEMBER_ID, "member_id": member_id}
        m.last_heartbeat = now
        if g.state == PREPARING:
            return await self._update_member(sh, g, m, rebalance_ms, session_ms, protocols)
        if g.state == COMPLETING:
            if protocols == m.protocols:
                return self._join_response(m, g)  # a retried join: the same generation again
            return await self._update_member(sh, g, m, rebalance_ms, session_ms, protocols, rebalance=True)
        if g.state in (STABLE, EMPTY):
            if m.member_id == g.leader or protocols != m.protocols:
                return await self._update_member(sh, g, m, rebalance_ms, session_ms, protocols, rebalance=True)
            return self._join_response(m, g)
        return {"error": UNKNOWN_MEMBER_ID, "member_id": member_id}

    async def _add_member(self, sh, g, member_id, instance, client_id, host, rebalance_ms, session_ms, ptype,
                          protocols) -> dict:
        m = Member(member_id, instance, client_id, host, rebalance_ms, session_ms, ptype, protocols, is_new=True)
        if not g.members:
            g.protocol_type = ptype
        g.members[member_id] = m
        if g.leader is None or g.leader not in g.members:
            g.leader = member_id
        m.join_fut = asyncio.get_running_loop().create_future()
        fut = m.join_fut
        if g.state == PREPARING and g.initial_delay:
            # Kafka's InitialDelayedJoin: each new member extends the wait, up to the rebalance timeout.
            delay = self._int("group.initial.rebalance.delay.ms") / 1000
            g.join_deadline = min(time.monotonic() + delay, g.join_max_deadline)
        if g.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(sh, g)
        else:
            self._try_complete_join(sh, g)
        return await fut

    async def _update_member(self, sh, g, m, rebalance_ms, session_ms, protocols, rebalance: bool = False) -> dict:
        m.rebalance_timeout_ms, m.session_timeout_ms, m.protocols = rebalance_ms, session_ms, protocols
        if m.join_fut is None or m.join_fut.done():
            m.join_fut = asyncio.get_running_loop().create_future()
        fut = m.join_fut  # a join repeated while one is pending gets the same answer
        if rebalance or g.state != PREPARING:
            self._prepare_rebalance(sh, g)
        else:
            self._try_complete_join(sh, g)
        return await fut

    # -- SyncGroup ---------------------------------------------------------------------
    async def handle_sync_group(self, req, header, conn):
        v = header.request_api_version
        res = await self._sync(req, v)
        return SyncGroupResponse(version=v, throttle_time_ms=0, error_code=res["error"],
                                 protocol_type=res.get("protocol_type"), protocol_name=res.get("protocol"),
                                 assignment=res.get("assignment", b""))

    async def _sync(self, req, v: int) -> dict:
        sh, err = self.shard_for(req.group_id)
        if err != NONE:
            return {"error": err}
        g = sh.groups.get(req.group_id)
        instance = req.group_instance_id if v >= 3 else None
        if g is None:
            return {"error": UNKNOWN_MEMBER_ID}
        if g.state == DEAD:
            return {"error": COORDINATOR_NOT_AVAILABLE}
        if g.fenced(req.member_id, instance):
            return {"error": FENCED_INSTANCE_ID}
        m = g.members.get(req.member_id)
        if m is None:
            return {"error": UNKNOWN_MEMBER_ID}
        if req.generation_id != g.generation:
            return {"error": ILLEGAL_GENERATION}
        if v >= 5 and ((req.protocol_type is not None and req.protocol_type != g.protocol_type)
                       or (req.protocol_name is not None and req.protocol_name != g.protocol)):
            return {"error": INCONSISTENT_GROUP_PROTOCOL}
        m.last_heartbeat = time.monotonic()
        if g.state == EMPTY:
            return {"error": UNKNOWN_MEMBER_ID}
        if g.state == PREPARING:
            return {"error": REBALANCE_IN_PROGRESS}
        if g.state == STABLE:
            return {"error": NONE, "assignment": m.assignment, "protocol_type": g.protocol_type,
                    "protocol": g.protocol}
        # CompletingRebalance
        g.sync_pending.discard(m.member_id)
        fresh = m.sync_fut is None or m.sync_fut.done()
        if fresh:
            m.sync_fut = asyncio.get_running_loop().create_future()
        fut = m.sync_fut  # a sync repeated while one is pending gets the same answer
        if m.member_id == g.leader and fresh:
            assignments = {a.member_id: bytes(a.assignment or b"") for a in req.assignments}
            gen = g.generation
            for mid, o in g.members.items():
                o.assignment = assignments.get(mid, b"")
            err = await self._store_group(sh, g, gen)
            if self.shards.get(sh.index) is sh and sh.groups.get(g.group_id) is g and g.generation == gen \
                    and g.state == COMPLETING:
                if err != NONE:
                    for o in g.members.values():
                        o.assignment = b""
                        _resolve(o.sync_fut, {"error": err})
                        o.sync_fut = None
                    self._prepare_rebalance(sh, g)
                else:
                    g.transition(STABLE)
                    g.sync_pending.clear()
                    self.broker.events.emit(
                        "group_rebalanced", group=g.group_id, generation=g.generation, members=len(g.members),
                        protocol=g.protocol, seconds=round(time.monotonic() - g.rebalance_start, 4))
                    now = time.monotonic()
                    for o in g.members.values():
                        _resolve(o.sync_fut, {"error": NONE, "assignment": o.assignment,
                                              "protocol_type": g.protocol_type, "protocol": g.protocol})
                        o.sync_fut = None
                        o.last_heartbeat = now
        return await fut

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------
    async def handle_heartbeat(self, req, header, conn):
        v = header.request_api_version
        return HeartbeatResponse(version=v, throttle_time_ms=0, error_code=self._heartbeat(req, v))

    def _heartbeat(self, req, v: int) -> int:
        sh, err = self.shard_for(req.group_id)
        if err != NONE:
            return err
        g = sh.groups.get(req.group_id)
        if g is None:
            return UNKNOWN_MEMBER_ID
        if g.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if g.fenced(req.member_id, req.group_instance_id if v >= 3 else None):
            return FENCED_INSTANCE_ID
        m = g.members.get(req.member_id)
        if m is None:
            return UNKNOWN_MEMBER_ID
        if req.generation_id != g.generation:
            return ILLEGAL_GENERATION
        if g.state == EMPTY:
            return UNKNOWN_MEMBER_ID
        m.last_heartbeat = time.monotonic()
        return REBALANCE_IN_PROGRESS if g.state == PREPARING else NONE

    async def handle_leave_group(self, req, header, conn):
        v = header.request_api_version
        R = LeaveGroupResponse
        if v >= 3:
            who = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            who = [(req.member_id, None)]
        top, per = self._leave(req.group_id, who)
        if v < 3:
            top = top if top != NONE else per[0]
            return R(version=v, throttle_time_ms=0, error_code=top, members=[])
        return R(version=v, throttle_time_ms=0, error_code=top, members=[
            R.MemberResponse(member_id=mid, group_instance_id=inst, error_code=e) for (mid, inst), e in zip(who, per)])

    def _leave(self, gid: str, who: list) -> tuple[int, list[int]]:
        sh, err = self.shard_for(gid)
        if err != NONE:
            return err, []
        g = sh.groups.get(gid)
        if g is None:
            return NONE, [UNKNOWN_MEMBER_ID] * len(who)
        if g.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE, []
        out = []
        for mid, inst in who:
            if inst is not None:
                m = g.static_member(inst)
                if m is None:
                    out.append(UNKNOWN_MEMBER_ID)
                    continue
                if mid and m.member_id != mid:
                    out.append(FENCED_INSTANCE_ID)
                    continue
            else:
                m = g.members.get(mid)
                if m is None:
                    if mid in g.pending:
                        del g.pending[mid]
                        self._try_complete_join(sh, g)
                        out.append(NONE)
                    else:
                        out.append(UNKNOWN_MEMBER_ID)
                    continue
            self._remove_member(sh, g, m, "leave")
            out.append(NONE)
        return NONE, out

    # -- OffsetCommit / OffsetFetch --------------------------------------------------------
    async def handle_offset_commit(self, req, header, conn):
        v = header.request_api_version
        R = OffsetCommitResponse
        gen = req.generation_id_or_member_epoch if v >= 1 else -1
        member_id = req.member_id if v >= 1 else ""
        instance = req.group_instance_id if v >= 7 else None
        items = []  # (topic key for the response, name, partition, offset, epoch, metadata)
        for t in req.topics:
            name = t.name if v <= 9 else self.broker.topic_name(None, t.topic_id)
            for p in t.partitions:
                items.append(((t.name, t.topic_id), name, p.partition_index, p.committed_offset,
                              p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata))
        codes = await self._commit(req.group_id, gen, member_id or "", instance, items, v)
        by_topic: dict = {}
        for (tkey, _, idx, *_rest), e in zip(items, codes):
            by_topic.setdefault(tkey, []).append(
                R.OffsetCommitResponseTopic.OffsetCommitResponsePartition(partition_index=idx, error_code=e))
        return R(version=v, throttle_time_ms=0, topics=[
            R.OffsetCommitResponseTopic(name=n, topic_id=tid, partitions=ps) for (n, tid), ps in by_topic.items()])

    async def _commit(self, gid: str, gen: int, member_id: str, instance, items: list, v: int) -> list[int]:
        def all_(code):
            return [code] * len(items)
        if not gid:
            return all_(INVALID_GROUP_ID)
        sh, err = self.shard_for(gid)
        if err != NONE:
            return all_(err)
        g = sh.groups.get(gid)
        if g is None:
            if gen >= 0:
                return all_(ILLEGAL_GENERATION)
            g = sh.groups[gid] = Group(gid)  # a group that only stores offsets (simple consumers, tools)
        if g.state == DEAD:
            return all_(COORDINATOR_NOT_AVAILABLE)
        if g.fenced(member_id, instance):
            return all_(FENCED_INSTANCE_ID)
        if not (gen < 0 and g.state == EMPTY):
            if g.state == COMPLETING:
                return all_(REBALANCE_IN_PROGRESS)
            m = g.members.get(member_id)
            if m is None:
                return all_(UNKNOWN_MEMBER_ID)
            if gen != g.generation:
                return all_(ILLEGAL_GENERATION)
            m.last_heartbeat = time.monotonic()
        codes, recs, good = [], [], []
        max_md = self._int("offset.metadata.max.bytes")
        now_ms = int(time.time() * 1000)
        for _, name, idx, off, epoch, md in items:
            info = self.broker.image.partition(name, idx) if name is not None else None
            if info is None:
                codes.append(errors.UNKNOWN_TOPIC_ID if name is None and v >= 10 else errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif md is not None and len(md.encode()) > max_md:
                codes.append(OFFSET_METADATA_TOO_LARGE)
            else:
                c = Committed(off, epoch if epoch is not None else -1, md or "", now_ms)
                recs.append((offset_key(gid, name, idx), offset_value(c)))
                good.append((len(codes), (name, idx), c))
                codes.append(NONE)
        if recs:
            err = await self._append(sh, recs)
            if err == NONE:
                for _, tp, c in good:
                    g.offsets[tp] = c
            else:
                for i, _, _ in good:
                    codes[i] = err
        return codes

    async def handle_offset_fetch(self, req, header, conn):
        v = header.request_api_version
        R = OffsetFetchResponse
        if v >= 8:
            groups = []
            for rg in req.groups:
                topics = None if rg.topics is None else [
                    ((t.name if v <= 9 else None, t.topic_id if v >= 10 else None),
                     t.name if v <= 9 else self.broker.topic_name(None, t.topic_id), list(t.partition_indexes))
                    for t in rg.topics]
                err, out = self._fetch(rg.group_id, topics, v)
                groups.append(R.OffsetFetchResponseGroup(group_id=rg.group_id, error_code=err, topics=[
                    R.OffsetFetchResponseGroup.OffsetFetchResponseTopics(
                        name=tkey[0] if v <= 9 else None, topic_id=tkey[1], partitions=[
                            R.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                                partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=md,
                                error_code=pe) for i, o, e, md, pe in ps])
                    for tkey, ps in out]))
            return R(version=v, throttle_time_ms=0, groups=groups)
        topics = None if req.topics is None else [((t.name, None), t.name, list(t.partition_indexes))
                                                  for t in req.topics]
        err, out = self._fetch(req.group_id, topics, v)
        if v < 2 and err != NONE:
            # v0-1 carry errors per partition only
            out = [(tkey, [(i, -1, -1, "", err) for i, *_ in ps]) for tkey, ps in
                   [(tk, [(i, 0, 0, 0, 0) for i in idx]) for tk, _, idx in topics or []]]
        return R(version=v, throttle_time_ms=0, error_code=err, topics=[
            R.OffsetFetchResponseTopic(name=tkey[0], partitions=[
                R.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                    partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=md, error_code=pe)
                for i, o, e, md, pe in ps]) for tkey, ps in out])

    def _fetch(self, gid: str, topics, v: int) -> tuple[int, list]:
        """(group error, [(topic key, [(partition, offset, leader epoch, metadata, error)])]);
        topics None: every committed offset of the group."""
        sh, err = self.shard_for(gid) if gid else (None, INVALID_GROUP_ID)
        if err != NONE:
            return err, []
        g = sh.groups.get(gid)
        offsets = g.offsets if g is not None else {}
        if topics is None:
            by: dict = {}
            for (t, p), c in sorted(offsets.items()):
                ti = self.broker.image.topics.get(t)
                tkey = (t, uuid.UUID(ti.topic_id) if ti is not None else None)
                by.setdefault(tkey, []).append((p, c.offset, c.leader_epoch, c.metadata, NONE))
            return NONE, list(by.items())
        out = []
        for tkey, name, idxs in topics:
            ps = []
            for i in idxs:
                c = offsets.get((name, i)) if name is not None else None
                if c is None:
                    pe = errors.UNKNOWN_TOPIC_ID if name is None and v >= 10 else NONE
                    ps.append((i, -1, -1, "", pe))
                else:
                    ps.append((i, c.offset, c.leader_epoch, c.metadata, NONE))
            out.append((tkey, ps))
        return NONE, out

    # -- ListGroups / DescribeGroups / DeleteGroups -------------------------------------------
    async def handle_list_groups(self, req, header, conn):
        v = header.request_api_version
        states = {s.lower() for s in req.states_filter} if v >= 4 and req.states_filter else None
        types = {t.lower() for t in req.types_filter} if v >= 5 and req.types_filter else None
        err = NONE
        out = []
        for sh in self.shards.values():
            if not sh.loaded:
                err = COORDINATOR_LOAD_IN_PROGRESS
                continue
            for g in sh.groups.values():
                if g.state == DEAD or (states is not None and g.state.lower() not in states) or \
                        (types is not None and "classic" not in types):
                    continue
                out.append(g)
        R = ListGroupsResponse
        return R(version=v, throttle_time_ms=0, error_code=err, groups=[
            R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state,
                          group_type="classic") for g in sorted(out, key=lambda g: g.group_id)])

    async def handle_describe_groups(self, req, header, conn):
        v = header.request_api_version
        R = DescribeGroupsResponse
        out = []
        for gid in req.groups:
            sh, err = self.shard_for(gid)
            g = sh.groups.get(gid) if sh is not None else None
            if err != NONE or g is None or g.state == DEAD:
                if err == NONE and v >= 6:
                    err = GROUP_ID_NOT_FOUND
                out.append(R.DescribedGroup(error_code=err, error_message=None, group_id=gid,
                                            group_state=DEAD if err in (NONE, GROUP_ID_NOT_FOUND) else "",
                                            protocol_type="", protocol_data="", members=[]))
                continue
            stable = g.state == STABLE
            out.append(R.DescribedGroup(
                error_code=NONE, error_message=None, group_id=gid, group_state=g.state,
                protocol_type=g.protocol_type or "", protocol_data=(g.protocol or "") if stable else "",
                members=[R.DescribedGroup.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata(g.protocol) if stable else b"",
                    member_assignment=m.assignment if stable else b"") for m in g.members.values()]))
        return R(version=v, throttle_time_ms=0, groups=out)

    async def handle_delete_groups(self, req, header, conn):
        v = header.request_api_version
        R = DeleteGroupsResponse
        results = []
        for gid in req.groups_names:
            results.append((gid, await self._delete(gid)))
        return R(version=v, throttle_time_ms=0, results=[
            R.DeletableGroupResult(group_id=gid, error_code=e) for gid, e in results])

    async def _delete(self, gid: str) -> int:
        if not gid:
            return INVALID_GROUP_ID
        sh, err = self.shard_for(gid)
        if err != NONE:
            return err
        g = sh.groups.get(gid)
        if g is None or g.state == DEAD:
            return GROUP_ID_NOT_FOUND
        if g.state != EMPTY:
            return NON_EMPTY_GROUP
        recs = [(offset_key(gid, t, p), None) for (t, p) in g.offsets] + [(group_key(gid), None)]
        err = await self._append(sh, recs)
        if err == NONE and sh.groups.get(gid) is g and g.state == EMPTY:
            g.transition(DEAD)
            del sh.groups[gid]
        return err


def _resolve(fut: asyncio.Future | None, value) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)
