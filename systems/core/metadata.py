"""The cluster metadata image and the records that change it.

The controller appends records to its durable metadata log; every broker
follows that log by offset and applies the same records to its own image, as
KRaft brokers do. Records are plain dicts with a "type":

  register_broker  id host port rack epoch        (a registered broker starts fenced)
  fence_broker     id epoch
  unfence_broker   id epoch
  topic            name topic_id configs
  partition        topic_id partition replicas isr leader leader_epoch partition_epoch
                   [adding removing]
  partition_change topic_id partition + any of: replicas isr leader leader_epoch
                   partition_epoch adding removing
  remove_topic     topic_id
  producer_ids     broker next            (next free producer id after a block)
  config           resource (topic name or "" for cluster/broker id) key value (None removes)
Backends may add their own record types; the image keeps them in `extra`.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None
    epoch: int
    fenced: bool = True


@dataclass
class PartitionInfo:
    topic: str
    topic_id: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


PARTITION_FIELDS = ("replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding", "removing")


class MetadataImage:
    def __init__(self) -> None:
        self.offset = -1  # offset of the last applied record
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[str, TopicInfo] = {}
        self.next_producer_id = 1000
        self.configs: dict[str, dict[str, str]] = {}  # resource -> {key: value}
        self.extra: dict = {}

    def apply(self, offset: int, rec: dict) -> tuple[str, object]:
        """Apply one record. Returns (kind, old value) for delta consumers."""
        self.offset = offset
        t = rec["type"]
        if t == "register_broker":
            old = self.brokers.get(rec["id"])
            self.brokers[rec["id"]] = BrokerInfo(rec["id"], rec["host"], rec["port"], rec.get("rack"), rec["epoch"], True)
            return t, old
        if t in ("fence_broker", "unfence_broker"):
            b = self.brokers.get(rec["id"])
            if b is not None and b.epoch == rec["epoch"]:
                b.fenced = t == "fence_broker"
            return t, b
        if t == "topic":
            ti = TopicInfo(rec["name"], rec["topic_id"], dict(rec.get("configs") or {}))
            self.topics[ti.name] = ti
            self.topics_by_id[ti.topic_id] = ti
            return t, None
        if t == "partition":
            ti = self.topics_by_id[rec["topic_id"]]
            p = PartitionInfo(ti.name, ti.topic_id, rec["partition"], list(rec["replicas"]), list(rec["isr"]),
                              rec["leader"], rec["leader_epoch"], rec["partition_epoch"],
                              list(rec.get("adding") or []), list(rec.get("removing") or []))
            ti.partitions[p.partition] = p
            return t, None
        if t == "partition_change":
            ti = self.topics_by_id.get(rec["topic_id"])
            if ti is None:
                return t, None
            p = ti.partitions[rec["partition"]]
            old = copy.copy(p)
            for k in PARTITION_FIELDS:
                if k in rec:
                    v = rec[k]
                    setattr(p, k, list(v) if isinstance(v, list) else v)
            return t, old
        if t == "remove_topic":
            ti = self.topics_by_id.pop(rec["topic_id"], None)
            if ti is not None:
                self.topics.pop(ti.name, None)
                self.configs.pop(ti.name, None)
            return t, ti
        if t == "producer_ids":
            self.next_producer_id = rec["next"]
            return t, None
        if t == "config":
            res = self.configs.setdefault(rec["resource"], {})
            old = res.get(rec["key"])
            if rec.get("value") is None:
                res.pop(rec["key"], None)
            else:
                res[rec["key"]] = rec["value"]
            return t, old
        self.extra.setdefault(t, []).append(rec)
        return t, None

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        ti = self.topics.get(topic)
        return ti.partitions.get(index) if ti else None

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted((b for b in self.brokers.values() if not b.fenced), key=lambda b: b.id)

    def topic_config(self, topic: str, key: str, default=None):
        ti = self.topics.get(topic)
        dyn = self.configs.get(topic, {})
        if key in dyn:
            return dyn[key]
        if ti is not None and key in ti.configs:
            return ti.configs[key]
        return default
