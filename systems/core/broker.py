"""The broker process: Kafka APIs over the wire, partitions, metadata following.

Storage designs plug in as a Backend (see systems/replication and
systems/shared); everything a client sees - metadata, produce/fetch semantics,
idempotence, admin forwarding - lives here and is the same for both.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import signal
import time
import uuid

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
                                  DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
                                  DeleteGroupsRequest, DescribeGroupsRequest, ElectLeadersRequest,
                                  ElectLeadersResponse, IncrementalAlterConfigsRequest, ListGroupsRequest,
                                  IncrementalAlterConfigsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)
from kafka.protocol.consumer import (FetchRequest, FetchResponse, HeartbeatRequest, JoinGroupRequest,
                                     LeaveGroupRequest, ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest,
                                     OffsetFetchRequest, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
                                     SyncGroupRequest)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (InitProducerIdRequest, InitProducerIdResponse, ProduceRequest,
                                     ProduceResponse)

from . import errors
from .config import (TOPIC_CONFIGS, TOPIC_DEFAULTS, TOPIC_SYNONYMS, ConfigError, check, describe_value, known,
                     resolve)
from .events import EventLog
from .groups import OFFSETS_TOPIC, GroupCoordinator
from .metadata import MetadataImage, PartitionInfo
from .rpc import RpcClient, RpcError, RpcUnavailable
from .server import KafkaServer

log = logging.getLogger("broker")
LATEST, EARLIEST = -1, -2
EARLIEST_LOCAL, LATEST_TIERED = -4, -5  # ListOffsets v8 / v9 (tiered storage)
# DescribeConfigs config_source values (Kafka's DescribeConfigsResponse.ConfigSource)
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# DescribeConfigs config_type values
BOOLEAN, STRING, INT, LONG, DOUBLE, PASSWORD = 1, 2, 3, 5, 6, 9


class Backend:
    """What a storage design provides to the broker runtime."""

    name = "base"
    # Partitions keep a leader epoch cache and answer OffsetForLeaderEpoch (KIP-101).
    leader_epoch_cache = False
    # The backend's own settings besides systems.core.config.DEFAULTS, with their defaults: the
    # broker refuses any other key at startup.
    CONFIG_DEFAULTS: dict[str, object] = {}

    def __init__(self, broker: "Broker"):
        self.broker = broker

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def open_partition(self, info: PartitionInfo):
        raise NotImplementedError

    def remove_partition(self, part, deleted: bool) -> None:
        """The broker no longer hosts this partition (moved away or topic deleted)."""
        part.delete()

    def on_metadata(self, changed: list[tuple[str, object, dict]]) -> None:
        """Called after each batch of metadata records is applied."""

    async def replica_fetch(self, req, header):
        """Fetch from a follower (replica_id >= 0); only replicating backends serve it."""
        return None

    def metrics(self) -> dict:
        return {}

    def log_dir(self) -> str:
        """The directory DescribeLogDirs names as this broker's (only) log dir."""
        return os.path.abspath(self.broker.dir)

    def replica_log(self, part) -> tuple[int, int]:
        """(partition_size, offset_lag) of this broker's replica for DescribeLogDirs: the bytes of
        its log here, and how far it is behind the leader (0 for the leader)."""
        return int(part.store.size_bytes), 0


class Broker:
    def __init__(self, broker_id: int, host: str, port: int, data_dir: str, controller: tuple[str, int],
                 config: dict | None, backend_cls, port_file: str | None = None):
        self.id = broker_id
        self.host, self.port = host, port
        own = getattr(backend_cls, "CONFIG_DEFAULTS", {})
        self.config_defaults = known(own)  # every key this broker knows, with its default
        self.static_config = check(config or {}, own)  # the --config values (ConfigError if unknown)
        self.config = resolve(config, own)
        self.dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        self.controller_addr = controller
        self.rpc = RpcClient(*controller)
        self.image = MetadataImage()
        self.partitions: dict[tuple[str, int], object] = {}
        self.epoch = -1
        self.cluster_id = None
        self.port_file = port_file
        self.server = KafkaServer(self.config["socket.request.max.bytes"])
        self.server.on_client = self._on_client
        self.events = EventLog(os.path.join(data_dir, "events.jsonl"), broker_id)
        self.backend: Backend = backend_cls(self)
        self.groups = GroupCoordinator(self)
        self._offset_waiters: list[tuple[int, asyncio.Future]] = []
        self._pid_next = 0
        self._pid_end = 0
        self._pid_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        # Per client id since the last journal line: Metadata requests, and produce answers with an
        # error by partition and error (what each client library meets during a move, and how
        # often it asks where a partition went: journaled by _journal_clients).
        self.client_counts: dict[str, dict] = {}
        self._register_apis()

    # -- lifecycle ----------------------------------------------------------
    def _register_apis(self) -> None:
        s = self.server
        s.register(MetadataRequest, 0, 12, self.handle_metadata)
        s.register(ProduceRequest, 3, 12, self.handle_produce)
        s.register(FetchRequest, 4, 16, self.handle_fetch)
        s.register(ListOffsetsRequest, 1, 9, self.handle_list_offsets)
        s.register(CreateTopicsRequest, 2, 7, self.handle_create_topics)
        s.register(DeleteTopicsRequest, 1, 6, self.handle_delete_topics)
        s.register(InitProducerIdRequest, 0, 5, self.handle_init_producer_id)
        s.register(DescribeClusterRequest, 0, 1, self.handle_describe_cluster)
        s.register(AlterPartitionReassignmentsRequest, 0, 0, self.handle_alter_reassignments)
        s.register(ListPartitionReassignmentsRequest, 0, 0, self.handle_list_reassignments)
        s.register(IncrementalAlterConfigsRequest, 0, 1, self.handle_incremental_alter_configs)
        s.register(DescribeConfigsRequest, 1, 4, self.handle_describe_configs)
        s.register(DescribeLogDirsRequest, 0, 5, self.handle_describe_log_dirs)
        s.register(ElectLeadersRequest, 0, 2, self.handle_elect_leaders)
        s.register(CreatePartitionsRequest, 0, 3, self.handle_create_partitions)
        if self.backend.leader_epoch_cache:
            # v2-4: the versions kafka-python's schema has (v3+ carries the follower's replica id).
            s.register(OffsetForLeaderEpochRequest, 2, 4, self.handle_offset_for_leader_epoch)
        # Consumer groups: every version kafka-python's schemas know (systems/core/groups.py).
        g = self.groups
        s.register(FindCoordinatorRequest, 0, 6, g.handle_find_coordinator)
        s.register(JoinGroupRequest, 0, 9, g.handle_join_group)
        s.register(SyncGroupRequest, 0, 5, g.handle_sync_group)
        s.register(HeartbeatRequest, 0, 4, g.handle_heartbeat)
        s.register(LeaveGroupRequest, 0, 5, g.handle_leave_group)
        s.register(OffsetCommitRequest, 0, 10, g.handle_offset_commit)
        s.register(OffsetFetchRequest, 0, 10, g.handle_offset_fetch)
        s.register(ListGroupsRequest, 0, 5, g.handle_list_groups)
        s.register(DescribeGroupsRequest, 0, 6, g.handle_describe_groups)
        s.register(DeleteGroupsRequest, 0, 2, g.handle_delete_groups)

    def _on_client(self, conn, header, req) -> None:
        """One journal line per client connection, from its first request (the brokers' own
        replica fetchers connect as `replica-fetcher-<broker id>`)."""
        peer = conn.peer
        fields = {"client_id": header.client_id,
                  "peer": f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer),
                  "client_software_name": None, "client_software_version": None}
        if isinstance(req, ApiVersionsRequest) and header.request_api_version >= 3:
            fields["client_software_name"] = req.client_software_name
            fields["client_software_version"] = req.client_software_version
        self.events.emit("client_connected", **fields)

    async def start(self) -> None:
        self.port = await self.server.start(self.host, self.port)
        await self.backend.start()
        await self._register()
        self._tasks.append(asyncio.create_task(self._follow_metadata()))
        self._tasks.append(asyncio.create_task(self._heartbeat_loop()))
        self._tasks.append(asyncio.create_task(self._journal_clients()))
        self.groups.start()
        if self.port_file:
            tmp = self.port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(self.port))
            os.replace(tmp, self.port_file)
        log.info("broker %d listening on %s:%d (%s backend)", self.id, self.host, self.port, self.backend.name)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        self.groups.stop()
        await self.server.stop()
        await self.backend.stop()
        for p in self.partitions.values():
            p.close()
        await self.rpc.close()

    async def _register(self) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                res = await self.rpc.call("register_broker", id=self.id, host=self.host, port=self.port)
                self.epoch, self.cluster_id = res["epoch"], res["cluster_id"]
                log.info("registered with controller, broker epoch %d", self.epoch)
                return
            except RpcUnavailable as e:
                if time.monotonic() > deadline:
                    raise SystemExit(f"broker {self.id}: controller unreachable for 120 s: {e}")
                await asyncio.sleep(0.2)

    CLIENT_JOURNAL_S = 0.25
    CLIENT_TIMES_MAX = 16  # Metadata request times kept per client and line: a bound on the line

    def _client(self, client_id: str | None) -> dict:
        return self.client_counts.setdefault(client_id or "", {"metadata": 0, "metadata_ts": [], "produce_errors": {},
                                                                "produce_error_ts": {}})

    async def _journal_clients(self) -> None:
        """Every 0.25 s, one ``client_requests`` line per client id that asked for metadata or got
        a produce error since the last one: {client_id, metadata, metadata_ts (the first
        CLIENT_TIMES_MAX of those requests' times), produce_errors: {"topic-p": {error: n}},
        produce_error_ts: {"topic-p": the first error's time}} (over that interval). The times show
        when a client looked for a moved partition's new leader, which the counts alone cannot."""
        while True:
            await asyncio.sleep(self.CLIENT_JOURNAL_S)
            counts, self.client_counts = self.client_counts, {}
            for cid, c in counts.items():
                self.events.emit("client_requests", client_id=cid, metadata=c["metadata"],
                                 metadata_ts=c["metadata_ts"], produce_errors=c["produce_errors"],
                                 produce_error_ts=c["produce_error_ts"])

    async def _heartbeat_loop(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            try:
                await self.rpc.call("heartbeat", timeout=max(1.0, interval * 2), id=self.id, epoch=self.epoch,
                                    metadata_offset=self.image.offset)
            except RpcUnavailable:
                pass
            except RpcError as e:
                if e.code == errors.STALE_BROKER_EPOCH:
                    log.warning("controller no longer knows broker epoch %d; registering again", self.epoch)
                    await self._register()
                    continue
                log.warning("heartbeat failed: %s", e)
            # Heartbeat fast until unfenced, so startup does not wait a full interval.
            b = self.image.brokers.get(self.id)
            await asyncio.sleep(interval if b is not None and not b.fenced and b.epoch == self.epoch else 0.05)

    async def _follow_metadata(self) -> None:
        while True:
            try:
                res = await self.rpc.call("fetch_metadata", timeout=10, from_offset=self.image.offset + 1,
                                          max_wait_ms=500)
            except (RpcUnavailable, RpcError):
                await asyncio.sleep(0.2)
                continue
            changed = []
            for i, rec in enumerate(res["records"]):
                kind, old = self.image.apply(res["from"] + i, rec)
                changed.append((kind, old, rec))
            if changed:
                try:
                    self._apply_changes(changed)
                except Exception:
                    log.exception("applying metadata changes failed")
                self._wake_offset_waiters()

    def _wake_offset_waiters(self) -> None:
        keep = []
        for off, fut in self._offset_waiters:
            if self.image.offset >= off:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((off, fut))
        self._offset_waiters = keep

    async def wait_metadata(self, offset: int, timeout: float = 10.0) -> None:
        if self.image.offset >= offset:
            return
        fut = asyncio.get_running_loop().create_future()
        self._offset_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            log.warning("metadata offset %d not reached in %.0fs", offset, timeout)

    def _apply_changes(self, changed) -> None:
        touched: set[tuple[str, int]] = set()
        for kind, old, rec in changed:
            if kind in ("partition", "partition_change"):
                ti = self.image.topics_by_id.get(rec["topic_id"])
                if ti is not None:
                    touched.add((ti.name, rec["partition"]))
            elif kind == "remove_topic" and old is not None:
                for p in old.partitions:
                    touched.add((old.name, p))
        for key in sorted(touched):
            info = self.image.partition(*key)
            local = self.partitions.get(key)
            if info is not None and self.id in info.replicas:
                if local is not None and local.topic_id != info.topic_id:
                    self.backend.remove_partition(self.partitions.pop(key), deleted=True)
                    local = None
                if local is None:
                    local = self.backend.open_partition(info)
                    self.partitions[key] = local
                local.on_metadata(info)
            elif local is not None:
                self.backend.remove_partition(self.partitions.pop(key), deleted=info is None)
        self.backend.on_metadata(changed)
        self.groups.sync()

    # -- helpers ------------------------------------------------------------
    def setting(self, key: str):
        """A broker setting as Kafka resolves it: dynamic for this broker, dynamic cluster default
        (IncrementalAlterConfigs), then static (--config) or default."""
        for res in (f"broker:{self.id}", "broker:"):
            v = self.image.configs.get(res, {}).get(key)
            if v is not None:
                return v
        return self.config.get(key)

    def controller_id(self) -> int:
        # KRaft brokers name a live broker as "controller": admin requests sent
        # there are forwarded to the real controller.
        live = self.image.live_brokers()
        return live[0].id if live else self.id

    def topic_name(self, name, topic_id) -> str | None:
        if topic_id is not None and str(topic_id) != "00000000-0000-0000-0000-000000000000":
            ti = self.image.topics_by_id.get(str(topic_id))
            return ti.name if ti else None
        return name

    def leader_partition(self, topic: str, index: int):
        """(partition, error) for a request that needs this broker to lead."""
        p = self.partitions.get((topic, index))
        if p is not None and p.serving:
            return p, errors.NONE
        info = self.image.partition(topic, index)
        if info is None:
            return None, errors.UNKNOWN_TOPIC_OR_PARTITION
        return None, errors.NOT_LEADER_OR_FOLLOWER

    # -- Metadata -----------------------------------------------------------
    async def handle_metadata(self, req, header, conn):
        v = header.request_api_version
        c = self._client(header.client_id)
        c["metadata"] += 1
        if len(c["metadata_ts"]) < self.CLIENT_TIMES_MAX:
            c["metadata_ts"].append(round(time.time(), 4))
        R = MetadataResponse
        if req.topics is None:
            names = sorted(self.image.topics)
        else:
            names = []
            for t in req.topics:
                n = self.topic_name(t.name, t.topic_id if v >= 10 else None)
                names.append(n if n is not None else t.name)
        brokers = [R.MetadataResponseBroker(node_id=b.id, host=b.host, port=b.port, rack=b.rack)
                   for b in self.image.live_brokers()]
        topics = []
        for name in names:
            ti = self.image.topics.get(name) if name is not None else None
            if ti is None:
                topics.append(R.MetadataResponseTopic(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                                      topic_id=None, is_internal=False, partitions=[]))
                continue
            parts = []
            for p in sorted(ti.partitions.values(), key=lambda p: p.partition):
                offline = [r for r in p.replicas if r not in self.image.brokers or self.image.brokers[r].fenced]
                parts.append(R.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=errors.LEADER_NOT_AVAILABLE if p.leader < 0 else errors.NONE,
                    partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=offline))
            topics.append(R.MetadataResponseTopic(error_code=errors.NONE, name=name, topic_id=uuid.UUID(ti.topic_id),
                                                  is_internal=name == OFFSETS_TOPIC, partitions=parts))
        return R(version=v, throttle_time_ms=0, brokers=brokers, cluster_id=self.cluster_id,
                 controller_id=self.controller_id(), topics=topics)

    # -- Produce ------------------------------------------------------------
    async def handle_produce(self, req, header, conn):
        v = header.request_api_version
        acks = req.acks
        results = []  # (topic_name, topic_id, index, error, base, last, part, message)
        for td in req.topic_data:
            name = td.name if v <= 12 else self.topic_name(None, td.topic_id)
            for pd in td.partition_data:
                err, base, last, part, msg = errors.NONE, -1, -1, None, None
                if acks not in (0, 1, -1):
                    err = errors.INVALID_REQUIRED_ACKS
                elif name is None or pd.records is None:
                    err = errors.UNKNOWN_TOPIC_OR_PARTITION if name is None else errors.CORRUPT_MESSAGE
                elif name == OFFSETS_TOPIC:
                    # Kafka: clients may not write to an internal topic; only the coordinator does.
                    err, msg = errors.INVALID_TOPIC, f"Cannot append to internal topic {name}"
                else:
                    part, err = self.leader_partition(name, pd.index)
                    if part is not None:
                        try:
                            if acks == -1:
                                err = part.check_min_isr() if hasattr(part, "check_min_isr") else errors.NONE
                            if err == errors.NONE:
                                max_msg = int(self.image.topic_config(name, "max.message.bytes",
                                                                      self.setting("message.max.bytes")))
                                base, last = part.append(pd.records, max_msg)
                        except errors.KafkaError as e:
                            err, msg = e.code, e.message
                        except OSError as e:
                            log.error("append to %s-%d failed: %s", name, pd.index, e)
                            err, msg = errors.KAFKA_STORAGE_ERROR, str(e)
                results.append((td.name, td.topic_id, pd.index, err, base, last, part if err == 0 else None, msg))
        if acks == 0:
            return None
        timeout = req.timeout_ms / 1000
        waits = [r[6].wait_acked(r[5], acks, timeout) if r[6] is not None else None for r in results]
        done = await asyncio.gather(*(w for w in waits if w is not None))
        it = iter(done)
        R = ProduceResponse
        by_topic: dict = {}
        for (tname, tid, idx, err, base, last, part, msg), w in zip(results, waits):
            if w is not None:
                err = next(it)
            if err:
                c = self._client(header.client_id)
                errs = c["produce_errors"].setdefault(f"{tname}-{idx}", {})
                errs[errors.name_of(err)] = errs.get(errors.name_of(err), 0) + 1
                c["produce_error_ts"].setdefault(f"{tname}-{idx}", round(time.time(), 4))
            pr = R.TopicProduceResponse.PartitionProduceResponse(
                index=idx, error_code=err, base_offset=base if err == 0 else -1, log_append_time_ms=-1,
                log_start_offset=part.log_start_offset if part is not None else -1, record_errors=[],
                error_message=msg if err else None)
            by_topic.setdefault((tname, tid), []).append(pr)
        return R(version=header.request_api_version, throttle_time_ms=0,
                 responses=[R.TopicProduceResponse(name=n, topic_id=tid, partition_responses=prs)
                            for (n, tid), prs in by_topic.items()])

    # -- Fetch --------------------------------------------------------------
    async def handle_fetch(self, req, header, conn):
        v = header.request_api_version
        replica_id = req.replica_state.replica_id if v >= 15 and req.replica_state is not None else req.replica_id
        if replica_id is not None and replica_id >= 0:
            resp = await self.backend.replica_fetch(req, header)
            if resp is not None:
                return resp
        deadline = time.monotonic() + req.max_wait_ms / 1000
        while True:
            resp, total, parts, any_error = self._fetch_once(req, v)
            remaining = deadline - time.monotonic()
            if total >= req.min_bytes or any_error or remaining <= 0 or not parts:
                return resp
            waiters = [p.data_waiter() for p in parts]
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()

    def _fetch_once(self, req, v):
        R = FetchResponse
        budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
        total = 0
        any_error = False
        parts_seen = []
        topics = []
        for ft in req.topics:
            name = ft.topic if v <= 12 else self.topic_name(None, ft.topic_id)
            presp = []
            for fp in ft.partitions:
                err, hw, lso, records = errors.NONE, -1, -1, b""
                log_start = -1
                if name is None:
                    err = errors.UNKNOWN_TOPIC_ID if v >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    part, err = self.leader_partition(name, fp.partition)
                    if part is not None:
                        err = part.check_epoch(fp.current_leader_epoch)
                    if err == errors.NONE:
                        parts_seen.append(part)
                        hw = lso = part.hw
                        log_start = part.log_start_offset
                        if fp.fetch_offset < log_start or fp.fetch_offset > part.log_end_offset:
                            err = errors.OFFSET_OUT_OF_RANGE
                        elif fp.fetch_offset < hw and budget > 0:
                            limit = min(fp.partition_max_bytes, budget)
                            records = part.read(fp.fetch_offset, limit)
                            if total > 0 and len(records) > budget:
                                records = b""  # only the first batch of the response may overshoot
                            total += len(records)
                            budget -= len(records)
                if err != errors.NONE:
                    any_error = True
                presp.append(R.FetchableTopicResponse.PartitionData(
                    partition_index=fp.partition, error_code=err, high_watermark=hw, last_stable_offset=lso,
                    log_start_offset=log_start, aborted_transactions=[] if v >= 4 else None,
                    preferred_read_replica=-1, records=records))
            topics.append(R.FetchableTopicResponse(topic=ft.topic, topic_id=ft.topic_id, partitions=presp))
        resp = R(version=v, throttle_time_ms=0, error_code=errors.NONE, session_id=0, responses=topics)
        return resp, total, parts_seen, any_error

    # -- ListOffsets --------------------------------------------------------
    async def handle_list_offsets(self, req, header, conn):
        R = ListOffsetsResponse
        topics = []
        for t in req.topics:
            presp = []
            for p in t.partitions:
                part, err = self.leader_partition(t.name, p.partition_index)
                ts, off = -1, -1
                if part is not None:
                    err = part.check_epoch(p.current_leader_epoch)
                if err == errors.NONE:
                    if p.timestamp == LATEST:
                        off = part.hw
                    elif p.timestamp == EARLIEST:
                        off = part.log_start_offset
                    elif p.timestamp in (EARLIEST_LOCAL, LATEST_TIERED):
                        # KIP-405 (v8) / KIP-1023 (v9): where a new replica starts copying.
                        off, err = part.tier_offset(p.timestamp == LATEST_TIERED, replica=req.replica_id)
                    elif p.timestamp >= 0:
                        off, ts = part.offset_for_timestamp(p.timestamp)
                    else:
                        err = errors.UNSUPPORTED_VERSION
                presp.append(R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=err, timestamp=ts, offset=off,
                    leader_epoch=part.leader_epoch if part is not None else -1))
            topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=presp))
        return R(version=header.request_api_version, throttle_time_ms=0, topics=topics)

    # -- OffsetForLeaderEpoch (KIP-101: a follower's truncation point; KIP-320: consumers) ----
    async def handle_offset_for_leader_epoch(self, req, header, conn):
        R = OffsetForLeaderEpochResponse
        topics = []
        for t in req.topics:
            presp = []
            for p in t.partitions:
                epoch, end = -1, -1
                part = self.partitions.get((t.topic, p.partition))
                if part is None:
                    _, err = self.leader_partition(t.topic, p.partition)
                else:
                    # Kafka checks the caller's current epoch first, then leadership.
                    err = part.check_epoch(p.current_leader_epoch)
                    if err == errors.NONE and not part.serving:
                        err = errors.NOT_LEADER_OR_FOLLOWER
                if err == errors.NONE:
                    epoch, end = part.end_offset_for_epoch(p.leader_epoch)
                presp.append(R.OffsetForLeaderTopicResult.EpochEndOffset(
                    error_code=err, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=presp))
        return R(version=header.request_api_version, throttle_time_ms=0, topics=topics)

    # -- admin (forwarded to the controller) ---------------------------------
    async def forward(self, method: str, **params):
        """Run an admin operation at the controller; wait until this broker's
        metadata includes its effect so the client's next request sees it."""
        res = await self.rpc.call(method, timeout=30, **params)
        await self.wait_metadata(res.get("offset", -1))
        return res

    async def _forward_topics(self, method: str, topics: list[dict], **kw) -> list[dict]:
        """The controller's per-topic results of ``method``; REQUEST_TIMED_OUT for every topic
        when the controller cannot be reached (the client retries)."""
        try:
            return (await self.forward(method, topics=topics, **kw))["results"]
        except (RpcUnavailable, RpcError) as e:
            return [{"name": t["name"], "error_code": errors.REQUEST_TIMED_OUT, "error_message": str(e)}
                    for t in topics]

    async def handle_create_topics(self, req, header, conn):
        v = header.request_api_version
        R = CreateTopicsResponse
        topics = [{"name": t.name, "num_partitions": t.num_partitions, "replication_factor": t.replication_factor,
                   "assignments": [{"partition": a.partition_index, "brokers": list(a.broker_ids)}
                                   for a in t.assignments],
                   "configs": {c.name: c.value for c in t.configs}} for t in req.topics]
        results = await self._forward_topics("create_topics", topics, validate_only=bool(req.validate_only))
        out = []
        for r in results:
            out.append(R.CreatableTopicResult(
                name=r["name"], topic_id=uuid.UUID(r["topic_id"]) if r.get("topic_id") else None,
                error_code=r["error_code"], error_message=r.get("error_message"),
                num_partitions=r.get("num_partitions", -1), replication_factor=r.get("replication_factor", -1),
                configs=[]))
        return R(version=v, throttle_time_ms=0, topics=out)

    async def handle_delete_topics(self, req, header, conn):
        v = header.request_api_version
        R = DeleteTopicsResponse
        if v >= 6:
            names = [t.name for t in req.topics if t.name]
            ids = [str(t.topic_id) for t in req.topics if not t.name and t.topic_id]
        else:
            names, ids = list(req.topic_names), []
        try:
            res = await self.forward("delete_topics", names=names, topic_ids=ids)
            results = res["results"]
        except (RpcUnavailable, RpcError) as e:
            results = [{"name": n, "error_code": errors.REQUEST_TIMED_OUT, "error_message": str(e)} for n in names]
        return R(version=v, throttle_time_ms=0, responses=[
            R.DeletableTopicResult(name=r.get("name"), topic_id=uuid.UUID(r["topic_id"]) if r.get("topic_id") else None,
                                   error_code=r["error_code"], error_message=r.get("error_message"))
            for r in results])

    async def handle_alter_reassignments(self, req, header, conn):
        R = AlterPartitionReassignmentsResponse
        items = [{"topic": t.name, "partition": p.partition_index,
                  "replicas": list(p.replicas) if p.replicas is not None else None}
                 for t in req.topics for p in t.partitions]
        try:
            res = await self.forward("alter_reassignments", partitions=items)
            results = res["results"]
        except (RpcUnavailable, RpcError) as e:
            return R(version=header.request_api_version, throttle_time_ms=0, error_code=errors.REQUEST_TIMED_OUT,
                     error_message=str(e), responses=[])
        by_topic: dict[str, list] = {}
        for r in results:
            by_topic.setdefault(r["topic"], []).append(R.ReassignableTopicResponse.ReassignablePartitionResponse(
                partition_index=r["partition"], error_code=r["error_code"], error_message=r["error_message"]))
        return R(version=header.request_api_version, throttle_time_ms=0, error_code=0, error_message=None,
                 responses=[R.ReassignableTopicResponse(name=n, partitions=ps) for n, ps in by_topic.items()])

    async def handle_list_reassignments(self, req, header, conn):
        R = ListPartitionReassignmentsResponse
        wanted = None
        if req.topics is not None:
            wanted = {(t.name, i) for t in req.topics for i in t.partition_indexes}
        by_topic: dict[str, list] = {}
        for ti in sorted(self.image.topics.values(), key=lambda t: t.name):
            for p in sorted(ti.partitions.values(), key=lambda p: p.partition):
                if not p.reassigning or (wanted is not None and (ti.name, p.partition) not in wanted):
                    continue
                by_topic.setdefault(ti.name, []).append(R.OngoingTopicReassignment.OngoingPartitionReassignment(
                    partition_index=p.partition, replicas=list(p.replicas), adding_replicas=list(p.adding),
                    removing_replicas=list(p.removing)))
        return R(version=0, throttle_time_ms=0, error_code=0, error_message=None,
                 topics=[R.OngoingTopicReassignment(name=n, partitions=ps) for n, ps in by_topic.items()])

    async def handle_incremental_alter_configs(self, req, header, conn):
        """Topic (type 2) and broker (type 4) configs; SET (0) and DELETE (1)."""
        R = IncrementalAlterConfigsResponse
        out, changes, index = [], [], []
        for res in req.resources:
            err, msg = errors.NONE, None
            if res.resource_type == 2:
                resource = res.resource_name
            elif res.resource_type == 4:
                resource = f"broker:{res.resource_name}"
            else:
                err, msg = errors.INVALID_REQUEST, f"resource type {res.resource_type} not supported"
            mine = []
            for c in res.configs if err == errors.NONE else []:
                if c.config_operation not in (0, 1):
                    err, msg = errors.INVALID_REQUEST, "only SET and DELETE config operations are supported"
                    break
                mine.append({"resource": resource, "key": c.name,
                             "value": c.value if c.config_operation == 0 else None})
            out.append([err, msg, res.resource_type, res.resource_name])
            if err == errors.NONE and not req.validate_only:
                index.append((len(out) - 1, len(mine)))
                changes += mine
        if changes:
            try:
                results = (await self.forward("alter_configs", changes=changes))["results"]
                pos = 0
                for i, n in index:
                    bad = [r for r in results[pos:pos + n] if r["error_code"]]
                    if bad:
                        out[i][0], out[i][1] = bad[0]["error_code"], bad[0].get("error_message")
                    pos += n
            except (RpcUnavailable, RpcError) as e:
                for i, _ in index:
                    out[i][0], out[i][1] = errors.REQUEST_TIMED_OUT, str(e)
        return R(version=header.request_api_version, throttle_time_ms=0, responses=[
            R.AlterConfigsResourceResponse(error_code=e, error_message=m, resource_type=t, resource_name=n)
            for e, m, t, n in out])

    def _broker_layers(self, key: str, broker: str | None) -> list[tuple[str, str | None, int]]:
        """Where a broker setting's value comes from, highest precedence first:
        [(name, value, config_source)] (Kafka's synonyms)."""
        out = []
        for res, src in (((f"broker:{broker}", DYNAMIC_BROKER_CONFIG),) if broker is not None else ()) + \
                (("broker:", DYNAMIC_DEFAULT_BROKER_CONFIG),):
            v = self.image.configs.get(res, {}).get(key)
            if v is not None:
                out.append((key, str(v), src))
        if self.static_config.get(key) is not None:
            out.append((key, describe_value(key, self.static_config[key]), STATIC_BROKER_CONFIG))
        if key in self.config_defaults:
            out.append((key, describe_value(key, self.config_defaults[key]), DEFAULT_CONFIG))
        return out

    def _topic_layers(self, ti, key: str) -> list[tuple[str, str | None, int]]:
        out = []
        for src in (self.image.configs.get(ti.name, {}), ti.configs):
            if src.get(key) is not None:
                out.append((key, str(src[key]), DYNAMIC_TOPIC_CONFIG))
                break
        if key in TOPIC_SYNONYMS:
            out += self._broker_layers(TOPIC_SYNONYMS[key], str(self.id))
        elif key in TOPIC_DEFAULTS:
            out.append((key, TOPIC_DEFAULTS[key], DEFAULT_CONFIG))
        return out

    def _config_entry(self, R, name: str, layers: list, synonyms: bool, read_only: bool = False):
        sensitive = "secret" in name or "access.key" in name
        value, source = (layers[0][1], layers[0][2]) if layers else (None, DEFAULT_CONFIG)
        default = self.config_defaults.get(name, TOPIC_DEFAULTS.get(name))
        if sensitive:
            ctype = PASSWORD
        elif isinstance(default, bool) or value in ("true", "false"):
            ctype = BOOLEAN
        elif isinstance(default, float):
            ctype = DOUBLE
        elif isinstance(default, int) or name.endswith((".rate", ".ms", ".bytes")):
            ctype = LONG if name.endswith((".ms", ".bytes", ".rate")) else INT
        else:
            ctype = STRING
        S = R.DescribeConfigsResult.DescribeConfigsResourceResult
        return S(name=name, value=None if sensitive else value, read_only=read_only, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=sensitive,
                 synonyms=[S.DescribeConfigsSynonym(name=n, value=None if sensitive else v, source=src)
                           for n, v, src in layers] if synonyms else [],
                 config_type=ctype, documentation=None)

    async def handle_describe_configs(self, req, header, conn):
        """Topic (type 2) and broker (type 4) resources, every known setting with Kafka's
        config_source (DYNAMIC_TOPIC 1, DYNAMIC_BROKER 2, DYNAMIC_DEFAULT_BROKER 3, STATIC_BROKER 4,
        DEFAULT 5). A broker resource is a broker id or "" (the cluster-wide defaults: dynamic
        defaults over the static settings every broker of the cluster is started with)."""
        R = DescribeConfigsResponse
        synonyms = bool(getattr(req, "include_synonyms", False))
        results = []
        for res in req.resources:
            err, msg, entries = errors.NONE, None, []
            keys = res.configuration_keys
            if res.resource_type == 2:
                ti = self.image.topics.get(res.resource_name)
                if ti is None:
                    err, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
                else:
                    names = TOPIC_CONFIGS | set(ti.configs) | set(self.image.configs.get(ti.name, {}))
                    entries = [self._config_entry(R, k, self._topic_layers(ti, k), synonyms) for k in sorted(names)
                               if keys is None or k in keys]
            elif res.resource_type == 4:
                name = res.resource_name
                bid = None
                if name:
                    try:
                        bid = int(name)
                    except ValueError:
                        bid = None
                    if bid is None or (bid != self.id and bid not in self.image.brokers):
                        err, msg = errors.INVALID_REQUEST, (f"Unexpected broker id, expected {self.id} or empty "
                                                            f"string, but received {name}")
                if err == errors.NONE:
                    scope = str(bid) if bid is not None else None
                    names = set(self.config_defaults) | set(self.image.configs.get("broker:", {}))
                    if scope is not None:
                        names |= set(self.image.configs.get(f"broker:{scope}", {}))
                    entries = [self._config_entry(R, k, self._broker_layers(k, scope), synonyms)
                               for k in sorted(names) if keys is None or k in keys]
                    fixed = {"log.dirs": self.backend.log_dir()}
                    if bid is not None:
                        fixed.update({"broker.id": str(bid), "node.id": str(bid)})
                    entries += [self._config_entry(R, k, [(k, v, STATIC_BROKER_CONFIG)], synonyms, read_only=True)
                                for k, v in sorted(fixed.items()) if keys is None or k in keys]
            else:
                err, msg = errors.INVALID_REQUEST, f"resource type {res.resource_type} not supported"
            results.append(R.DescribeConfigsResult(
                error_code=err, error_message=msg, resource_type=res.resource_type, resource_name=res.resource_name,
                configs=entries))
        return R(version=header.request_api_version, throttle_time_ms=0, results=results)

    # -- DescribeLogDirs, ElectLeaders, CreatePartitions -------------------------------
    async def handle_describe_log_dirs(self, req, header, conn):
        """One log dir per broker with every replica it holds (topics null: all); unknown topics
        and partitions are left out, as Kafka does."""
        R = DescribeLogDirsResponse
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:
            wanted = {}
            for t in req.topics:
                wanted.setdefault(t.topic, set()).update(t.partitions)
        by_topic: dict[str, list] = {}
        for (topic, idx), part in sorted(self.partitions.items()):
            if wanted is not None and idx not in wanted.get(topic, ()):
                continue
            size, lag = self.backend.replica_log(part)
            by_topic.setdefault(topic, []).append(R.DescribeLogDirsResult.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=idx, partition_size=size, offset_lag=lag, is_future_key=False))
        path = self.backend.log_dir()
        try:
            st = os.statvfs(path)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        result = R.DescribeLogDirsResult(
            error_code=errors.NONE, log_dir=path, total_bytes=total, usable_bytes=usable, is_cordoned=False,
            topics=[R.DescribeLogDirsResult.DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in by_topic.items()])
        return R(version=header.request_api_version, throttle_time_ms=0, error_code=errors.NONE, results=[result])

    async def handle_elect_leaders(self, req, header, conn):
        v = header.request_api_version
        R = ElectLeadersResponse
        election_type = req.election_type if v >= 1 else 0
        parts = None
        if req.topic_partitions is not None:
            parts = [[t.topic, i] for t in req.topic_partitions for i in t.partitions]
        try:
            results = (await self.forward("elect_leaders", election_type=election_type, partitions=parts))["results"]
        except (RpcUnavailable, RpcError) as e:
            if v >= 1:
                return R(version=v, throttle_time_ms=0, error_code=errors.REQUEST_TIMED_OUT,
                         replica_election_results=[])
            results = [{"topic": t, "partition": i, "error_code": errors.REQUEST_TIMED_OUT, "error_message": str(e)}
                       for t, i in parts or []]
        by_topic: dict[str, list] = {}
        for r in results:
            by_topic.setdefault(r["topic"], []).append(R.ReplicaElectionResult.PartitionResult(
                partition_id=r["partition"], error_code=r["error_code"], error_message=r.get("error_message")))
        return R(version=v, throttle_time_ms=0, error_code=errors.NONE, replica_election_results=[
            R.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])

    async def handle_create_partitions(self, req, header, conn):
        R = CreatePartitionsResponse
        topics = [{"name": t.name, "count": t.count,
                   "assignments": [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None}
                  for t in req.topics]
        results = await self._forward_topics("create_partitions", topics, validate_only=bool(req.validate_only))
        return R(version=header.request_api_version, throttle_time_ms=0, results=[
            R.CreatePartitionsTopicResult(name=r["name"], error_code=r["error_code"],
                                          error_message=r.get("error_message")) for r in results])

    # -- producers ----------------------------------------------------------
    async def handle_init_producer_id(self, req, header, conn):
        R = InitProducerIdResponse
        v = header.request_api_version
        if req.transactional_id is not None:
            log.warning("InitProducerId with transactional id %r refused: transactions not supported",
                        req.transactional_id)
            return R(version=v, throttle_time_ms=0, error_code=errors.INVALID_TXN_STATE, producer_id=-1,
                     producer_epoch=-1)
        pid, epoch = getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1)
        if pid is not None and pid >= 0 and epoch is not None and 0 <= epoch < 32766:
            # KIP-360: an idempotent producer bumps its epoch after an error.
            return R(version=v, throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch + 1)
        try:
            pid = await self._next_producer_id()
        except (RpcUnavailable, RpcError) as e:
            log.warning("cannot allocate producer id: %s", e)
            return R(version=v, throttle_time_ms=0, error_code=errors.REQUEST_TIMED_OUT, producer_id=-1,
                     producer_epoch=-1)
        return R(version=v, throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)

    async def _next_producer_id(self) -> int:
        async with self._pid_lock:
            if self._pid_next >= self._pid_end:
                blk = await self.rpc.call("alloc_producer_ids", broker_id=self.id)
                self._pid_next, self._pid_end = blk["first"], blk["first"] + blk["count"]
            pid = self._pid_next
            self._pid_next += 1
            return pid

    async def handle_describe_cluster(self, req, header, conn):
        R = DescribeClusterResponse
        brokers = [b for b in sorted(self.image.brokers.values(), key=lambda b: b.id)
                   if not b.fenced or getattr(req, "include_fenced_brokers", False)]
        return R(version=header.request_api_version, throttle_time_ms=0, error_code=0, error_message=None,
                 endpoint_type=1, cluster_id=self.cluster_id, controller_id=self.controller_id(),
                 brokers=[R.DescribeClusterBroker(broker_id=b.id, host=b.host, port=b.port, rack=b.rack,
                                                  is_fenced=b.fenced) for b in brokers])


def load_backend(module: str):
    """The module named by --backend (a system profile's `backend`) exports BACKEND."""
    return importlib.import_module(module).BACKEND


async def amain(args) -> None:
    host, port = args.controller.rsplit(":", 1)
    overrides = json.loads(args.config) if args.config else {}
    try:
        broker = Broker(args.id, args.host, args.port, args.dir, (host, int(port)), overrides,
                        load_backend(args.backend), args.port_file)
    except ConfigError as e:
        raise SystemExit(f"broker {args.id}: {e}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    await broker.start()
    await stop.wait()
    log.info("broker %d stopping", args.id)
    await broker.stop()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Kafka-protocol broker")
    p.add_argument("--id", type=int, required=True)
    p.add_argument("--backend", required=True, help="module exporting BACKEND (systems.<name>.backend)")
    p.add_argument("--dir", required=True)
    p.add_argument("--controller", required=True, help="host:port of the controller")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--config", help="JSON object of settings")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
