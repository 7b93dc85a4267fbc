"""Controller side of the replication-copy system: ISR changes (AlterPartition)
and KIP-455 partition reassignment.

A reassignment sets replicas = target + removing, with `adding` the new
replicas; they copy the log from the leader and, once they are all in the
ISR, the controller completes the move in one partition change: replicas =
target, removing replicas dropped (their brokers delete the files), and the
leader moved to the first target replica if the old one is leaving.
"""
from __future__ import annotations

import logging

from systems.core import errors
from systems.core.controller import Controller, ControllerExtension
from systems.core.metadata import PartitionInfo
from systems.core.rpc import RpcError

log = logging.getLogger("controller.replication")


class ReplicationExtension(ControllerExtension):
    def __init__(self, ctl: Controller):
        self.ctl = ctl
        ctl.handlers["alter_partition"] = self.alter_partition

    # -- reassignment ---------------------------------------------------------
    def validate_reassignment(self, p: PartitionInfo, target: list[int]):
        return None

    def reassign(self, p: PartitionInfo, target: list[int] | None) -> list[dict]:
        original = [r for r in p.replicas if r not in p.adding]
        if target is None:
            change = {"replicas": original, "isr": [r for r in p.isr if r in original] or original[:1],
                      "adding": [], "removing": []}
            self.ctl.events.emit("reassignment_cancelled", topic=p.topic, partition=p.partition,
                                 replicas=original)
            return [self._finish(p, change)]
        if target == original and not p.reassigning:
            return []
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        self.ctl.events.emit("reassignment_started", topic=p.topic, partition=p.partition, **{"from": original},
                             to=target, adding=adding, removing=removing)
        if not adding:
            # Nothing to copy: complete at once (e.g. shrinking or reordering).
            return [self._finish(p, self._completion(p, target))]
        change = {"replicas": target + removing, "adding": adding, "removing": removing,
                  "isr": [r for r in p.isr if r in target + removing]}
        return [self._finish(p, change)]

    def _completion(self, p: PartitionInfo, target: list[int]) -> dict:
        isr = [r for r in p.isr if r in target]
        return {"replicas": list(target), "isr": isr or [target[0]], "adding": [], "removing": []}

    def _finish(self, p: PartitionInfo, change: dict) -> dict:
        """Turn a replica-set change into a partition_change with a valid leader."""
        probe = PartitionInfo(p.topic, p.topic_id, p.partition, change.get("replicas", p.replicas),
                              change.get("isr", p.isr), p.leader, p.leader_epoch, p.partition_epoch,
                              change.get("adding", p.adding), change.get("removing", p.removing))
        if p.leader not in probe.replicas or p.leader not in probe.isr or not self.ctl.is_live(p.leader):
            # The leader is leaving (or gone): the first target replica in the ISR takes over.
            probe.leader = -2  # force a new election in elect()
            elected = self.ctl.elect(probe)
            change["leader"] = elected.get("leader", -1)
            change["leader_epoch"] = p.leader_epoch + 1
            if "isr" in elected:
                change["isr"] = elected["isr"]
        change["partition_epoch"] = p.partition_epoch + 1
        return {"type": "partition_change", "topic_id": p.topic_id, "partition": p.partition, **change}

    # -- AlterPartition -------------------------------------------------------
    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                              leader_epoch: int, partition_epoch: int, isr: list[int]):
        """The leader proposes a new ISR (shrink when a follower lags, expand when
        it caught up). Stale proposals are refused, as Kafka's AlterPartition."""
        ctl = self.ctl
        async with ctl._lock:
            b = ctl.image.brokers.get(broker_id)
            if b is None or b.epoch != broker_epoch:
                raise RpcError("stale broker epoch", errors.STALE_BROKER_EPOCH)
            ti = ctl.image.topics_by_id.get(topic_id)
            p = ti.partitions.get(partition) if ti else None
            if p is None:
                raise RpcError("unknown partition", errors.UNKNOWN_TOPIC_OR_PARTITION)
            if p.leader != broker_id or p.leader_epoch != leader_epoch:
                raise RpcError("not the leader at this epoch", errors.FENCED_LEADER_EPOCH)
            if p.partition_epoch != partition_epoch:
                raise RpcError(f"partition epoch {partition_epoch} is stale (now {p.partition_epoch})",
                               errors.INVALID_REQUEST)
            isr = [r for r in p.replicas if r in isr]
            if broker_id not in isr:
                raise RpcError("the leader must stay in the ISR", errors.INVALID_REQUEST)
            if any(not ctl.is_live(r) for r in isr if r not in p.isr):
                raise RpcError("cannot add a fenced broker to the ISR", errors.INVALID_REQUEST)
            if p.adding and all(r in isr for r in p.adding):
                target = [r for r in p.replicas if r not in p.removing]
                probe = PartitionInfo(p.topic, p.topic_id, p.partition, p.replicas, isr, p.leader, p.leader_epoch,
                                      p.partition_epoch, p.adding, p.removing)
                rec = self._finish(probe, self._completion(probe, target))
                ctl.commit([rec])
                ctl.events.emit("reassignment_completed", topic=p.topic, partition=p.partition, replicas=target,
                                leader=rec.get("leader", p.leader))
                log.info("reassignment of %s-%d complete: %s", p.topic, p.partition, target)
            elif isr != p.isr:
                ctl.commit([{"type": "partition_change", "topic_id": topic_id, "partition": partition, "isr": isr,
                             "partition_epoch": p.partition_epoch + 1}])
            q = ctl.image.partition(p.topic, p.partition)
            return {"isr": q.isr, "partition_epoch": q.partition_epoch, "leader_epoch": q.leader_epoch,
                    "offset": ctl.metalog.end_offset - 1}


def extend_controller(ctl: Controller) -> None:
    ctl.extensions.append(ReplicationExtension(ctl))
