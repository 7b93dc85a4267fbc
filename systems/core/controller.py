"""The controller process: a single-node, KRaft-like metadata quorum.

It owns the durable metadata log, registers brokers, fences those that stop
heartbeating, elects partition leaders, and executes the admin operations that
brokers forward to it. Brokers learn every change by following the log.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import re
import signal
import time
import uuid

from . import errors
from .config import TOPIC_CONFIGS, TOPIC_DEFAULTS, ConfigError, as_bool, resolve
from .events import EventLog
from .metadata import MetadataImage, PartitionInfo
from .metalog import MetadataLog
from .rpc import RpcError, RpcServer

log = logging.getLogger("controller")
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
PRODUCER_ID_BLOCK = 1000


class ControllerExtension:
    """Hooks a storage design adds to the controller (registered by a module's
    `extend_controller(ctl)` function, named with --extension)."""

    def on_record(self, offset: int, rec: dict) -> None:
        """Every committed record, after it is applied to the image."""

    def on_topic_created(self, topic_id: str) -> list[dict]:
        """Extra records to commit for a new topic."""
        return []

    def on_partitions_created(self, topic_id: str, partitions: list[int]) -> list[dict]:
        """Extra records to commit for partitions added to an existing topic (CreatePartitions)."""
        return []

    def elect_leader(self, p: PartitionInfo, election_type: int) -> tuple[int, str | None, list[dict]] | None:
        """ElectLeaders for one partition: (error code, message, records), or None for the
        core's election (Kafka's: the preferred replica if it is in the ISR)."""
        return None

    def validate_reassignment(self, p: PartitionInfo, target: list[int]) -> tuple[int, str] | None:
        return None

    def on_broker_fenced(self, broker_id: int) -> list[dict] | None:
        """Records for a broker's loss, or None to keep the core's elections from the ISR."""
        return None

    def on_broker_unfenced(self, broker_id: int) -> list[dict] | None:
        """Records for a broker's return, or None to keep the core's elections."""
        return None

    def heartbeat_refused(self, broker_id: int, epoch: int) -> str | None:
        """Why this broker incarnation may no longer heartbeat (it must register again), or None."""
        return None

    def reassign(self, p: PartitionInfo, target: list[int] | None) -> list[dict]:
        """Records that start (or, for target None, cancel) a reassignment."""
        raise NotImplementedError

    def reassignment_pending(self, p: PartitionInfo) -> bool:
        """A move in progress that is not visible as adding/removing replicas."""
        return False


class Controller:
    def __init__(self, data_dir: str, config: dict | None = None, config_defaults: dict | None = None):
        # config_defaults: the system's own keys (its extension modules' CONFIG_DEFAULTS);
        # an unknown key raises ConfigError before anything is created or opened.
        self.config = resolve(config, config_defaults)
        self.dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        self.metalog = MetadataLog(os.path.join(data_dir, "metadata.log"))
        self.events = EventLog(os.path.join(data_dir, "events.jsonl"), "controller")
        self.image = MetadataImage()
        for off, rec in enumerate(self.metalog.records):
            self.image.apply(off, rec)
        cid_path = os.path.join(data_dir, "cluster_id")
        if not os.path.exists(cid_path):
            with open(cid_path, "w") as f:
                f.write(uuid.uuid4().hex[:22])
        with open(cid_path) as f:
            self.cluster_id = f.read().strip()
        # Liveness is not durable: after a restart every unfenced broker gets a
        # fresh session before it can be fenced.
        now = time.monotonic()
        self.last_seen: dict[int, float] = {b: now for b in self.image.brokers}
        self._new_records = asyncio.Event()
        self._lock = asyncio.Lock()
        self.handlers = {
            "register_broker": self.register_broker,
            "heartbeat": self.heartbeat,
            "fetch_metadata": self.fetch_metadata,
            "create_topics": self.create_topics,
            "delete_topics": self.delete_topics,
            "alloc_producer_ids": self.alloc_producer_ids,
            "alter_configs": self.alter_configs,
            "alter_reassignments": self.alter_reassignments,
            "elect_leaders": self.elect_leaders,
            "create_partitions": self.create_partitions,
            "describe": self.describe,
        }
        # Storage designs extend the controller (see ControllerExtension); the
        # one with `reassign` set executes partition reassignments.
        self.extensions: list[ControllerExtension] = []
        log.info("controller replayed %d metadata records", self.metalog.end_offset)

    def start_extensions(self) -> None:
        """Replay the log into extensions registered after construction."""
        for off, rec in enumerate(self.metalog.records):
            for ext in self.extensions:
                ext.on_record(off, rec)

    # -- log --------------------------------------------------------------
    def commit(self, recs: list[dict]) -> int:
        """Append records durably and apply them; returns last offset."""
        if not recs:
            return self.metalog.end_offset - 1
        start = self.metalog.end_offset
        last = self.metalog.append(recs)
        for i, r in enumerate(recs):
            self.image.apply(start + i, r)
            self._journal(r)
            for ext in self.extensions:
                ext.on_record(start + i, r)
        self._new_records.set()
        self._new_records = asyncio.Event()
        return last

    def _journal(self, r: dict) -> None:
        """Leader and ISR changes, with timestamps, for the harness."""
        if r["type"] not in ("partition", "partition_change"):
            return
        ti = self.image.topics_by_id.get(r["topic_id"])
        if ti is None:
            return
        if "leader" in r:
            self.events.emit("leader_change", topic=ti.name, partition=r["partition"], leader=r["leader"],
                             leader_epoch=r.get("leader_epoch"))
        if "isr" in r:
            self.events.emit("isr_change", topic=ti.name, partition=r["partition"], isr=r["isr"])

    # -- elections ----------------------------------------------------------
    def is_live(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and not b.fenced

    def manual_assignment_error(self, replicas: list[int], rf: int | None = None) -> str | None:
        """Kafka's ReplicationControlManager.validateManualPartitionAssignment, with its messages:
        the replicas are walked in broker id order, so the lowest unknown or repeated broker is the
        one named; ``rf``: the replica count the other partitions have."""
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        prev = None
        for b in sorted(replicas):
            if b not in self.image.brokers:
                return f"The manual partition assignment includes broker {b}, but no such broker is registered."
            if b == prev:
                return f"The manual partition assignment includes the broker {b} more than once."
            prev = b
        if rf is not None and len(replicas) != rf:
            return (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
                    f"this is not consistent with previous partitions, which have {rf} replica(s).")
        return None

    def setting(self, key: str):
        """A cluster-wide setting: a dynamic default (IncrementalAlterConfigs on broker "") wins
        over the static value."""
        v = self.image.configs.get("broker:", {}).get(key)
        return self.config[key] if v is None else v

    def unclean_allowed(self, topic: str) -> bool:
        return as_bool(self.image.topic_config(topic, "unclean.leader.election.enable",
                                               self.setting("unclean.leader.election.enable")))

    def elect(self, p: PartitionInfo, exclude: set[int] = frozenset(), isr: list[int] | None = None) -> dict:
        """Leader election for one partition as Kafka does it: the first replica
        (in replica order) that is in the ISR and alive; with unclean election
        enabled, any live replica; otherwise no leader (-1)."""
        isr = list(p.isr if isr is None else isr)
        candidates = [r for r in p.target_replicas + [r for r in p.replicas if r in p.removing]
                      if r in isr and self.is_live(r) and r not in exclude]
        change: dict = {}
        if candidates:
            leader = candidates[0]
        elif self.unclean_allowed(p.topic):
            live = [r for r in p.replicas if self.is_live(r) and r not in exclude]
            leader = live[0] if live else -1
            if leader >= 0:
                isr = [leader]
                log.warning("unclean leader election for %s-%d: %d", p.topic, p.partition, leader)
        else:
            leader = -1
        if isr != p.isr:
            change["isr"] = isr
        if leader != p.leader:
            change["leader"] = leader
            change["leader_epoch"] = p.leader_epoch + 1
        if change:
            change["partition_epoch"] = p.partition_epoch + 1
        return change

    def partition_change(self, p: PartitionInfo, change: dict) -> dict | None:
        if not change:
            return None
        return {"type": "partition_change", "topic_id": p.topic_id, "partition": p.partition, **change}

    def on_broker_fenced(self, broker_id: int) -> list[dict]:
        for ext in self.extensions:
            recs = ext.on_broker_fenced(broker_id)
            if recs is not None:
                return recs
        recs = []
        for ti in self.image.topics.values():
            for p in ti.partitions.values():
                if broker_id not in p.replicas:
                    continue
                isr = p.isr
                # KRaft keeps the last ISR member even when it is fenced, so
                # the partition can come back with its data (leader -1 meanwhile).
                if broker_id in isr and len(isr) > 1:
                    isr = [r for r in isr if r != broker_id]
                if p.leader == broker_id or isr != p.isr:
                    rec = self.partition_change(p, self.elect(p, exclude={broker_id}, isr=isr))
                    if rec:
                        recs.append(rec)
        return recs

    def on_broker_unfenced(self, broker_id: int) -> list[dict]:
        for ext in self.extensions:
            recs = ext.on_broker_unfenced(broker_id)
            if recs is not None:
                return recs
        recs = []
        for ti in self.image.topics.values():
            for p in ti.partitions.values():
                if p.leader == -1 and broker_id in p.replicas:
                    rec = self.partition_change(p, self.elect(p))
                    if rec:
                        recs.append(rec)
        return recs

    async def fence_loop(self):
        while True:
            await asyncio.sleep(0.1)
            timeout = self.config["broker.session.timeout.ms"] / 1000
            now = time.monotonic()
            async with self._lock:
                for b in list(self.image.brokers.values()):
                    if not b.fenced and now - self.last_seen.get(b.id, now) > timeout:
                        log.warning("fencing broker %d: no heartbeat for %.1fs", b.id, now - self.last_seen[b.id])
                        self.fence(b.id)

    def fence(self, broker_id: int) -> None:
        b = self.image.brokers[broker_id]
        self.commit([{"type": "fence_broker", "id": broker_id, "epoch": b.epoch}])
        self.commit(self.on_broker_fenced(broker_id))

    # -- broker lifecycle ---------------------------------------------------
    async def register_broker(self, id: int, host: str, port: int, rack=None):
        async with self._lock:
            old = self.image.brokers.get(id)
            recs = []
            if old is not None and not old.fenced:
                # A restarted broker: fence its old incarnation first.
                recs = [{"type": "fence_broker", "id": id, "epoch": old.epoch}]
                self.commit(recs)
                self.commit(self.on_broker_fenced(id))
            epoch = self.metalog.end_offset
            self.commit([{"type": "register_broker", "id": id, "host": host, "port": port, "rack": rack,
                          "epoch": epoch}])
            self.last_seen[id] = time.monotonic()
            log.info("registered broker %d at %s:%d epoch %d", id, host, port, epoch)
            return {"epoch": epoch, "cluster_id": self.cluster_id}

    async def heartbeat(self, id: int, epoch: int, metadata_offset: int):
        for ext in self.extensions:
            why = ext.heartbeat_refused(id, epoch)
            if why:
                raise RpcError(why, errors.STALE_BROKER_EPOCH)
        b = self.image.brokers.get(id)
        if b is None or b.epoch != epoch:
            raise RpcError(f"stale broker epoch {epoch} for broker {id}", errors.STALE_BROKER_EPOCH)
        self.last_seen[id] = time.monotonic()
        if b.fenced and metadata_offset >= epoch:
            async with self._lock:
                if self.image.brokers[id].fenced and self.image.brokers[id].epoch == epoch:
                    self.commit([{"type": "unfence_broker", "id": id, "epoch": epoch}])
                    self.commit(self.on_broker_unfenced(id))
                    log.info("unfenced broker %d", id)
        return {"fenced": self.image.brokers[id].fenced}

    async def fetch_metadata(self, from_offset: int, max_wait_ms: int = 500, max_records: int = 5000):
        if from_offset >= self.metalog.end_offset and max_wait_ms > 0:
            ev = self._new_records
            try:
                await asyncio.wait_for(ev.wait(), max_wait_ms / 1000)
            except asyncio.TimeoutError:
                pass
        recs = self.metalog.records[from_offset:from_offset + max_records]
        return {"from": from_offset, "records": recs, "end_offset": self.metalog.end_offset}

    async def describe(self):
        return {"cluster_id": self.cluster_id, "end_offset": self.metalog.end_offset,
                "brokers": [{"id": b.id, "host": b.host, "port": b.port, "fenced": b.fenced, "epoch": b.epoch}
                            for b in sorted(self.image.brokers.values(), key=lambda b: b.id)]}

    async def alloc_producer_ids(self, broker_id: int):
        async with self._lock:
            first = self.image.next_producer_id
            self.commit([{"type": "producer_ids", "broker": broker_id, "next": first + PRODUCER_ID_BLOCK}])
            return {"first": first, "count": PRODUCER_ID_BLOCK}

    # -- topics -------------------------------------------------------------
    def _validate_topic(self, t: dict) -> tuple[int, str] | None:
        name = t["name"]
        if not name or len(name) > 249 or name in (".", "..") or not _TOPIC_RE.match(name):
            return errors.INVALID_TOPIC, f"Topic name {name!r} is illegal: it must be 1-249 of [a-zA-Z0-9._-]"
        if name in self.image.topics:
            return errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        for k in (t.get("configs") or {}):
            if k not in TOPIC_CONFIGS:
                return errors.INVALID_CONFIG, f"Unknown topic config name: {k}"
        return self.check_topic_configs(name, t.get("configs") or {})

    def check_topic_configs(self, topic: str, configs: dict) -> tuple[int, str] | None:
        """Values Kafka refuses (its messages): tiered storage on a cluster without it, a local
        retention above the total one, numbers that are not numbers."""
        for k in ("retention.bytes", "retention.ms", "local.retention.bytes", "local.retention.ms", "segment.bytes"):
            v = configs.get(k)
            if v is not None:
                try:
                    int(v)
                except (TypeError, ValueError):
                    return errors.INVALID_CONFIG, f"Invalid value {v} for configuration {k}: Not a number of type LONG"
        if as_bool(str(configs.get("remote.storage.enable", "false"))) and \
                not as_bool(self.config.get("remote.log.storage.system.enable", False)):
            return errors.INVALID_CONFIG, (f"Tiered Storage functionality is disabled in the broker. Topic {topic} "
                                           "cannot be configured with remote log storage.")
        for kind in ("bytes", "ms"):
            local = int(configs.get(f"local.retention.{kind}", -2))
            total = int(configs.get(f"retention.{kind}", TOPIC_DEFAULTS[f"retention.{kind}"]))
            if local == -2:
                continue  # the same as retention.*
            if local < -2 or total != -1 and (local == -1 or local > total):
                return errors.INVALID_CONFIG, (f"Invalid value {local} for configuration local.retention.{kind}: "
                                               f"it must be -2, or at most retention.{kind} ({total}; -1 only if "
                                               f"retention.{kind} is -1 too)")
        return None

    def plan_assignment(self, t: dict) -> tuple[list[list[int]] | None, tuple[int, str] | None]:
        live = [b.id for b in self.image.live_brokers()]
        if t.get("assignments"):
            if t.get("num_partitions", -1) != -1 or t.get("replication_factor", -1) != -1:
                return None, (errors.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                              "replicasAssignments were set. Both cannot be used at the same time.")
            by_index = {}
            for a in t["assignments"]:
                if a["partition"] in by_index:
                    return None, (errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"Found multiple manual partition assignments for partition {a['partition']}")
                by_index[a["partition"]] = list(a["brokers"])
            if sorted(by_index) != list(range(len(by_index))):
                return None, (errors.INVALID_REPLICA_ASSIGNMENT,
                              "partitions should be a consecutive 0-based integer sequence")
            plan = [by_index[i] for i in range(len(by_index))]
            for i, reps in enumerate(plan):
                msg = self.manual_assignment_error(reps, len(plan[0]) if i else None)
                if msg:
                    return None, (errors.INVALID_REPLICA_ASSIGNMENT, msg)
            return plan, None
        n = t.get("num_partitions", -1)
        rf = t.get("replication_factor", -1)
        # KIP-464: -1 takes the cluster's defaults.
        n = int(self.setting("num.partitions")) if n == -1 else n
        rf = int(self.setting("default.replication.factor")) if rf == -1 else rf
        if n <= 0:
            return None, (errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if rf <= 0:
            return None, (errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if rf > len(live):
            return None, (errors.INVALID_REPLICATION_FACTOR,
                          f"Unable to replicate the partition {rf} time(s): The target replication factor of "
                          f"{rf} cannot be reached because only {len(live)} broker(s) are registered.")
        start = len(self.image.topics) % len(live)
        return [[live[(start + i + j) % len(live)] for j in range(rf)] for i in range(n)], None

    async def create_topics(self, topics: list[dict], validate_only: bool = False):
        results = []
        async with self._lock:
            for t in topics:
                err = self._validate_topic(t)
                plan = None
                if err is None:
                    plan, err = self.plan_assignment(t)
                if err is not None:
                    results.append({"name": t["name"], "error_code": err[0], "error_message": err[1]})
                    continue
                topic_id = str(uuid.uuid4())
                res = {"name": t["name"], "error_code": 0, "error_message": None, "topic_id": topic_id,
                       "num_partitions": len(plan), "replication_factor": len(plan[0])}
                results.append(res)
                if validate_only:
                    continue
                recs = [{"type": "topic", "name": t["name"], "topic_id": topic_id, "configs": t.get("configs") or {}}]
                for i, reps in enumerate(plan):
                    isr = [r for r in reps if self.is_live(r)] or list(reps)
                    leader = next((r for r in reps if self.is_live(r)), -1)
                    recs.append({"type": "partition", "topic_id": topic_id, "partition": i, "replicas": reps,
                                 "isr": isr, "leader": leader, "leader_epoch": 0, "partition_epoch": 0})
                self.commit(recs)
                for ext in self.extensions:
                    self.commit(ext.on_topic_created(topic_id))
                log.info("created topic %s (%s) with %d partitions", t["name"], topic_id, len(plan))
        return {"results": results, "offset": self.metalog.end_offset - 1}

    async def delete_topics(self, names: list[str] | None = None, topic_ids: list[str] | None = None):
        results = []
        async with self._lock:
            for name in names or []:
                ti = self.image.topics.get(name)
                if ti is None:
                    results.append({"name": name, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                                    "error_message": "This server does not host this topic-partition."})
                    continue
                self.commit([{"type": "remove_topic", "topic_id": ti.topic_id}])
                results.append({"name": name, "topic_id": ti.topic_id, "error_code": 0})
            for tid in topic_ids or []:
                ti = self.image.topics_by_id.get(tid)
                if ti is None:
                    results.append({"name": None, "topic_id": tid, "error_code": errors.UNKNOWN_TOPIC_ID,
                                    "error_message": "This server does not host this topic ID."})
                    continue
                self.commit([{"type": "remove_topic", "topic_id": tid}])
                results.append({"name": ti.name, "topic_id": tid, "error_code": 0})
        return {"results": results, "offset": self.metalog.end_offset - 1}

    async def alter_reassignments(self, partitions: list[dict]):
        """KIP-455 entry point. partitions: [{topic, partition, replicas (None cancels)}].
        Validation is common to all systems; execution belongs to the system's extension."""
        ext = next((e for e in self.extensions if type(e).reassign is not ControllerExtension.reassign), None)
        results = []
        async with self._lock:
            for item in partitions:
                topic, idx, target = item["topic"], item["partition"], item.get("replicas")
                res = {"topic": topic, "partition": idx, "error_code": 0, "error_message": None}
                results.append(res)
                p = self.image.partition(topic, idx)
                err = None
                # Kafka's messages (ReplicationControlManager.alterPartitionReassignment).
                if p is None:
                    err = (errors.UNKNOWN_TOPIC_OR_PARTITION,
                           f"Unable to find partition {topic}:{idx}." if topic in self.image.topics
                           else f"Unable to find a topic named {topic}.")
                elif ext is None:
                    err = (errors.INVALID_REQUEST, "this system does not support reassignment")
                elif target is None:
                    if not p.reassigning and not ext.reassignment_pending(p):
                        err = (errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
                elif (msg := self.manual_assignment_error(target)) is not None:
                    err = (errors.INVALID_REPLICA_ASSIGNMENT, msg)
                else:
                    err = ext.validate_reassignment(p, target)
                if err is not None:
                    res["error_code"], res["error_message"] = err
                    continue
                self.commit(ext.reassign(p, target))
        return {"results": results, "offset": self.metalog.end_offset - 1}

    # -- ElectLeaders (KIP-460) and CreatePartitions -------------------------------
    def _elect_one(self, p: PartitionInfo, election_type: int) -> tuple[int, str | None, list[dict]]:
        for ext in self.extensions:
            res = ext.elect_leader(p, election_type)
            if res is not None:
                return res
        name = f"{p.topic}-{p.partition}"
        if election_type == 0:  # PREFERRED: the first replica of the (target) assignment, if in the ISR
            target = p.target_replicas
            preferred = target[0] if target else -1
            if p.leader == preferred:
                return errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", []
            if preferred not in p.isr or not self.is_live(preferred):
                return (errors.PREFERRED_LEADER_NOT_AVAILABLE, f"Failed to elect leader for partition {name} "
                        f"under strategy PreferredLeaderElectionStrategy: preferred replica {preferred} is "
                        f"{'not in the ISR' if preferred not in p.isr else 'not alive'}", [])
            change = {"leader": preferred, "leader_epoch": p.leader_epoch + 1, "partition_epoch": p.partition_epoch + 1}
            return errors.NONE, None, [self.partition_change(p, change)]
        # UNCLEAN: only a partition without a leader; the ISR first, then any live replica.
        if p.leader >= 0 and self.is_live(p.leader):
            return errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", []
        isr_live = [r for r in p.replicas if r in p.isr and self.is_live(r)]
        live = [r for r in p.replicas if self.is_live(r)]
        if not live:
            return (errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"Failed to elect leader for partition {name} under "
                    "strategy UncleanLeaderElectionStrategy: no replica is alive", [])
        leader = (isr_live or live)[0]
        change = {"leader": leader, "leader_epoch": p.leader_epoch + 1, "partition_epoch": p.partition_epoch + 1}
        if leader not in p.isr:
            change["isr"] = [leader]
            log.warning("unclean leader election (ElectLeaders) for %s: %d", name, leader)
        return errors.NONE, None, [self.partition_change(p, change)]

    async def elect_leaders(self, election_type: int, partitions: list | None = None):
        """partitions: [[topic, index], ...] or None for all. With None, partitions whose election
        was not needed are left out of the results, as Kafka does."""
        results = []
        async with self._lock:
            if partitions is None:
                wanted = [(ti.name, i) for ti in sorted(self.image.topics.values(), key=lambda t: t.name)
                          for i in sorted(ti.partitions)]
            else:
                wanted = [(t, int(i)) for t, i in partitions]
            for topic, idx in wanted:
                p = self.image.partition(topic, idx)
                if election_type not in (0, 1):
                    err, msg, recs = errors.INVALID_REQUEST, f"Unknown election type {election_type}", []
                elif p is None:
                    err, msg, recs = (errors.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition.", [])
                else:
                    err, msg, recs = self._elect_one(p, election_type)
                if partitions is None and err == errors.ELECTION_NOT_NEEDED:
                    continue
                self.commit([r for r in recs if r])
                results.append({"topic": topic, "partition": idx, "error_code": err, "error_message": msg})
        return {"results": results, "offset": self.metalog.end_offset - 1}

    def _plan_new_partitions(self, ti, t: dict) -> tuple[list[list[int]] | None, tuple[int, str] | None]:
        current = len(ti.partitions)
        count = t["count"]
        if count < current:
            return None, (errors.INVALID_PARTITIONS, f"The topic {ti.name} currently has {current} partition(s); "
                          f"{count} would not be an increase.")
        if count == current:
            return None, (errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        rf = len(ti.partitions[0].replicas) if 0 in ti.partitions else 1
        add = count - current
        if t.get("assignments") is not None:
            plan = [list(a) for a in t["assignments"]]
            if len(plan) != add:
                return None, (errors.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {add} additional partition(s), "
                              f"but only {len(plan)} assignment(s) were specified.")
            for reps in plan:
                msg = self.manual_assignment_error(reps, rf)
                if msg:
                    return None, (errors.INVALID_REPLICA_ASSIGNMENT, msg)
            return plan, None
        live = [b.id for b in self.image.live_brokers()]
        if rf > len(live):
            return None, (errors.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): "
                          f"The target replication factor of {rf} cannot be reached because only {len(live)} "
                          "broker(s) are registered.")
        return [[live[(current + i + j) % len(live)] for j in range(rf)] for i in range(add)], None

    async def create_partitions(self, topics: list[dict], validate_only: bool = False):
        """topics: [{name, count, assignments (list of broker lists, or None)}]."""
        results = []
        names = [t["name"] for t in topics]
        async with self._lock:
            for t in topics:
                res = {"name": t["name"], "error_code": 0, "error_message": None}
                results.append(res)
                ti = self.image.topics.get(t["name"])
                if names.count(t["name"]) > 1:
                    err = (errors.INVALID_REQUEST, f"Duplicate topic {t['name']} in the request.")
                elif ti is None:
                    err = (errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t['name']}' does not exist.")
                else:
                    plan, err = self._plan_new_partitions(ti, t)
                if err is not None:
                    res["error_code"], res["error_message"] = err
                    continue
                if validate_only:
                    continue
                first = len(ti.partitions)
                recs = []
                for i, reps in enumerate(plan, start=first):
                    isr = [r for r in reps if self.is_live(r)] or list(reps)
                    leader = next((r for r in reps if self.is_live(r)), -1)
                    recs.append({"type": "partition", "topic_id": ti.topic_id, "partition": i, "replicas": reps,
                                 "isr": isr, "leader": leader, "leader_epoch": 0, "partition_epoch": 0})
                self.commit(recs)
                for ext in self.extensions:
                    self.commit(ext.on_partitions_created(ti.topic_id, list(range(first, first + len(plan)))))
                log.info("topic %s: %d -> %d partitions", ti.name, first, first + len(plan))
        return {"results": results, "offset": self.metalog.end_offset - 1}

    async def alter_configs(self, changes: list[dict]):
        """changes: [{resource, key, value (None deletes)}]; resource is a topic
        name or "broker:<id>" / "broker:" for the cluster-wide default."""
        results = []
        async with self._lock:
            recs = []
            for c in changes:
                res = c["resource"]
                if not res.startswith("broker:") and res not in self.image.topics:
                    results.append({"resource": res, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                                    "error_message": f"Topic {res} does not exist"})
                    continue
                if not res.startswith("broker:") and c.get("value") is not None:
                    ti = self.image.topics[res]
                    err = self.check_topic_configs(res, {**ti.configs, **self.image.configs.get(res, {}),
                                                         c["key"]: c["value"]})
                    if err is not None:
                        results.append({"resource": res, "error_code": err[0], "error_message": err[1]})
                        continue
                recs.append({"type": "config", "resource": res, "key": c["key"], "value": c.get("value")})
                results.append({"resource": res, "error_code": 0})
            self.commit(recs)
        return {"results": results, "offset": self.metalog.end_offset - 1}


async def amain(args) -> None:
    overrides = json.loads(args.config) if args.config else {}
    mods = [importlib.import_module(m) for m in args.extension or []]
    own = {k: v for m in mods for k, v in getattr(m, "CONFIG_DEFAULTS", {}).items()}
    try:
        ctl = Controller(args.dir, overrides, own)
    except ConfigError as e:
        raise SystemExit(f"controller: {e}") from None
    for mod in mods:
        mod.extend_controller(ctl)
    ctl.start_extensions()
    server = RpcServer(ctl.handlers)
    port = await server.start(args.host, args.port)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    log.info("controller listening on %s:%d", args.host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    fencer = asyncio.create_task(ctl.fence_loop())
    await stop.wait()
    fencer.cancel()
    await server.stop()
    ctl.metalog.close()
    log.info("controller stopped")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="metadata controller")
    p.add_argument("--dir", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--config", help="JSON object of settings")
    p.add_argument("--extension", action="append", help="module with extend_controller(ctl)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
