"""In-process fuzzing of the request decoder, the API handlers and the record-batch path.

No sockets: one real Broker object (replication backend, a data directory in tmp, a metadata
image holding one leader partition, and no controller - forwarded admin requests get
RpcUnavailable at once) receives frames straight into `KafkaServer._dispatch`, exactly what
`_serve` hands it after the size check (so every frame is 8..max bytes). Inputs come from
hypothesis (derandomized, so a run is reproducible):

- frames: valid requests of every API and version the broker registers (built with
  kafka-python's schema classes, some with content: produce batches, fetch/list offsets of the
  partition, topics, configs, reassignments), then mutated (byte flips, 16/32-bit boundary
  values, inserts, deletes, truncation, splices of two requests) or replaced by a valid header
  and a random body;
- record batches: valid idempotent v2 batches, mutated, with or without the CRC recomputed
  (so mutations past the CRC reach the deeper checks), passed to `records.validate_produce`
  and to the partition's `append` (producer-state and log path).

Zero crashes means: `_dispatch` only returns a future or False (close the connection); every
future either completes with an encoded response frame (or None for acks=0) or is still
waiting (a long-poll fetch) when abandoned; `validate_produce` / `append` only raise
`KafkaError` (a Kafka error code for the client). Any other exception fails the test with the
input that caused it. Counts are printed (`-s`).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import struct
import uuid
from collections import Counter

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from systems.core import errors, records
from systems.core.broker import Broker, load_backend
from systems.registry import profile
from systems.core.rpc import RpcUnavailable
from systems.core.server import Connection

FRAMES = int(os.environ.get("FUZZ_FRAMES", 100_000))
BATCHES = int(os.environ.get("FUZZ_BATCHES", 50_000))
EXTRA = 7  # frames per hypothesis example besides the drawn one (see mutate_fast)
MAX_REQUEST = 1 << 20
TOPIC_ID = "8a0c3b5e-9f59-4c0e-9d43-2b1d2f1f3a01"

pytestmark = pytest.mark.timeout(300)


# -- a broker in this process -----------------------------------------------------------------

class InProcess:
    def __init__(self, tmp):
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._setup(str(tmp)))
        self.conn = Connection(None, None, ("fuzz", 0))

    async def _setup(self, d):
        b = Broker(1, "127.0.0.1", 9092, d, ("127.0.0.1", 9), {"socket.request.max.bytes": MAX_REQUEST},
                   load_backend(profile("replication").backend))

        async def no_controller(method, **params):
            raise RpcUnavailable("fuzz: no controller")
        b.rpc.call = no_controller
        b.cluster_id = "fuzz-cluster"
        recs = [{"type": "register_broker", "id": 1, "host": "127.0.0.1", "port": 9092, "epoch": 1},
                {"type": "unfence_broker", "id": 1, "epoch": 1},
                {"type": "topic", "name": "fuzz", "topic_id": TOPIC_ID, "configs": {}}]
        recs += [{"type": "partition", "topic_id": TOPIC_ID, "partition": i, "replicas": [1], "isr": [1],
                  "leader": 1, "leader_epoch": 0, "partition_epoch": 0} for i in range(2)]
        changed = []
        for off, rec in enumerate(recs):
            kind, old = b.image.apply(off, rec)
            changed.append((kind, old, rec))
        b._apply_changes(changed)
        assert b.partitions[("fuzz", 0)].is_leader
        self.broker = b

    def close(self):
        for p in self.broker.partitions.values():
            p.close()
        self.loop.close()

    def feed(self, frame: bytes) -> str:
        """One request frame (without the size prefix) -> outcome name; raises on a crash."""
        return self.loop.run_until_complete(self._feed(frame))

    async def _feed(self, frame: bytes) -> str:
        work = self.broker.server._dispatch(frame, self.conn)
        if work is False:
            return "closed"
        done, _ = await asyncio.wait([work], timeout=0.02)
        if not done:
            work.cancel()
            try:
                await work
            except asyncio.CancelledError:
                pass
            return "waiting"
        out = work.result()  # a handler exception is a crash: it propagates from here
        if out is None:
            return "no_response"
        out = bytes(out)
        size, = struct.unpack_from(">i", out)
        assert size == len(out) - 4, "response frame size does not match its body"
        return "answered"


# -- seeds: valid requests of every registered API and version ----------------------------------

def _batch(values, pid=-1, epoch=-1, seq=-1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i if i % 2 else None, value=v,
                 headers=[("h", b"x")] if i == 1 else [])
    return bytes(b.build())


def _filled(cls, v):
    """A request with content for the APIs where an empty one would skip the interesting code."""
    from kafka.protocol.admin import (AlterPartitionReassignmentsRequest as APR, CreateTopicsRequest as CT,
                                      DeleteTopicsRequest as DT, DescribeConfigsRequest as DC,
                                      IncrementalAlterConfigsRequest as IAC)
    from kafka.protocol.consumer import FetchRequest as F, ListOffsetsRequest as LO
    from kafka.protocol.metadata import MetadataRequest as M
    from kafka.protocol.producer import InitProducerIdRequest as IP, ProduceRequest as P
    n = cls.__name__
    if n == "ProduceRequest":
        topic = {"name": "fuzz"} if v <= 12 else {"topic_id": uuid.UUID(TOPIC_ID)}
        return P[v](transactional_id=None, acks=-1 if v % 2 else 1, timeout_ms=1000, topic_data=[
            P.TopicProduceData(**topic, partition_data=[P.TopicProduceData.PartitionProduceData(
                index=v % 2, records=_batch([b"value-%d" % v] * 3))])])
    if n == "FetchRequest":
        topic = {"topic": "fuzz"} if v <= 12 else {"topic_id": uuid.UUID(TOPIC_ID)}
        return F[v](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
            F.FetchTopic(**topic, partitions=[F.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)])])
    if n == "ListOffsetsRequest":
        return LO[v](replica_id=-1, isolation_level=0, topics=[LO.ListOffsetsTopic(name="fuzz", partitions=[
            LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                     timestamp=[-1, -2, 0][v % 3])])])
    if n == "MetadataRequest":
        return M[v](topics=[M.MetadataRequestTopic(name="fuzz", topic_id=None)] if v >= 1 else ["fuzz"],
                    allow_auto_topic_creation=False)
    if n == "CreateTopicsRequest":
        return CT[v](topics=[CT.CreatableTopic(name="new", num_partitions=2, replication_factor=1, assignments=[],
                                               configs=[])], timeout_ms=1000, validate_only=False)
    if n == "DeleteTopicsRequest":
        if v >= 6:
            return DT[v](topics=[DT.DeleteTopicState(name="fuzz", topic_id=None)], timeout_ms=1000)
        return DT[v](topic_names=["fuzz"], timeout_ms=1000)
    if n == "AlterPartitionReassignmentsRequest":
        return APR[v](timeout_ms=1000, topics=[APR.ReassignableTopic(name="fuzz", partitions=[
            APR.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[2])])])
    if n == "IncrementalAlterConfigsRequest":
        return IAC[v](resources=[IAC.AlterConfigsResource(resource_type=2, resource_name="fuzz", configs=[
            IAC.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])],
            validate_only=False)
    if n == "DescribeConfigsRequest":
        return DC[v](resources=[DC.DescribeConfigsResource(resource_type=[2, 4][v % 2],
                                                           resource_name="fuzz" if v % 2 == 0 else "1",
                                                           configuration_keys=None)],
                     include_synonyms=False, include_documentation=False)
    if n == "InitProducerIdRequest":
        return IP[v](transactional_id=None, transaction_timeout_ms=1000)
    return None


def _seeds() -> list[bytes]:
    from systems.core.server import KafkaServer
    srv = KafkaServer()
    from types import SimpleNamespace

    from systems.core.groups import GroupCoordinator

    b = Broker.__new__(Broker)  # only to read the API table the broker registers
    b.server = srv
    b.groups = GroupCoordinator.__new__(GroupCoordinator)  # its handlers, never called here
    b.backend = SimpleNamespace(leader_epoch_cache=True)  # every API, the copy system's included
    Broker._register_apis(b)
    out = []
    for key, api in sorted(srv.apis.items()):
        for v in range(api.min_version, api.max_version + 1):
            reqs = [api.request[v]()]
            try:
                f = _filled(api.request, v)
                if f is not None:
                    reqs.append(f)
            except Exception as e:  # a schema field this version lacks: keep the empty one
                print(f"seed {api.request.__name__} v{v}: {type(e).__name__} {e}")
            for r in reqs:
                r.with_header(correlation_id=7, client_id="fuzz")
                out.append(bytes(r.encode(header=True, framed=True))[4:])
    return out


SEEDS = _seeds()
API_KEYS = sorted({struct.unpack_from(">h", s)[0] for s in SEEDS})
BOUNDARY16 = [0, 1, 0x7FFF, 0x8000, 0xFFFF]
BOUNDARY32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]


@st.composite
def frames(draw):
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "boundary", "insert", "delete", "truncate",
                                 "splice", "random_body"]))
    if kind == "random_body":
        key = draw(st.sampled_from(API_KEYS + [-1, 99]))
        ver = draw(st.integers(-1, 20))
        body = draw(st.binary(max_size=200))
        return struct.pack(">hhi", key, ver, draw(st.integers(-2**31, 2**31 - 1))) + body
    f = bytearray(draw(st.sampled_from(SEEDS)))
    if kind == "mutate":
        for _ in range(draw(st.integers(1, 6))):
            f[draw(st.integers(4, len(f) - 1))] = draw(st.integers(0, 255))
    elif kind == "boundary":
        for _ in range(draw(st.integers(1, 3))):
            if len(f) >= 12 and draw(st.booleans()):
                i = draw(st.integers(8, len(f) - 4))
                struct.pack_into(">I", f, i, draw(st.sampled_from(BOUNDARY32)))
            else:
                i = draw(st.integers(8, len(f) - 2))
                struct.pack_into(">H", f, i, draw(st.sampled_from(BOUNDARY16)))
    elif kind == "insert":
        i = draw(st.integers(8, len(f)))
        f[i:i] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "delete":
        i = draw(st.integers(8, len(f) - 1))
        del f[i:i + draw(st.integers(1, 16))]
    elif kind == "truncate":
        f = f[:draw(st.integers(8, len(f)))]
    else:  # splice: the head of one request on the tail of another
        g = draw(st.sampled_from(SEEDS))
        f = f[:draw(st.integers(8, len(f)))] + g[draw(st.integers(0, len(g) - 1)):]
    return bytes(f)


def mutate_fast(rng: random.Random) -> bytes:
    """The same mutations as `frames()`, driven by a seeded random.Random: hypothesis draws one
    frame and a seed per example, the seed gives EXTRA more frames (hypothesis' own bookkeeping
    costs ~1 ms an example, the broker ~0.3 ms a frame)."""
    kind = rng.choice(["mutate", "mutate", "mutate", "boundary", "insert", "delete", "truncate", "splice",
                       "random_body"])
    if kind == "random_body":
        return struct.pack(">hhi", rng.choice(API_KEYS + [-1, 99]), rng.randint(-1, 20),
                           rng.randint(-2**31, 2**31 - 1)) + rng.randbytes(rng.randint(0, 200))
    f = bytearray(rng.choice(SEEDS))
    if kind == "mutate":
        for _ in range(rng.randint(1, 6)):
            f[rng.randint(4, len(f) - 1)] = rng.randint(0, 255)
    elif kind == "boundary":
        for _ in range(rng.randint(1, 3)):
            if len(f) >= 12 and rng.random() < 0.5:
                struct.pack_into(">I", f, rng.randint(8, len(f) - 4), rng.choice(BOUNDARY32))
            else:
                struct.pack_into(">H", f, rng.randint(8, len(f) - 2), rng.choice(BOUNDARY16))
    elif kind == "insert":
        i = rng.randint(8, len(f))
        f[i:i] = rng.randbytes(rng.randint(1, 16))
    elif kind == "delete":
        i = rng.randint(8, len(f) - 1)
        del f[i:i + rng.randint(1, 16)]
    elif kind == "truncate":
        f = f[:rng.randint(8, len(f))]
    else:
        g = rng.choice(SEEDS)
        f = f[:rng.randint(8, len(f))] + g[rng.randint(0, len(g) - 1):]
    return bytes(f)


@pytest.fixture(scope="module")
def inproc(tmp_path_factory):
    # Every refused frame logs a warning; 100,000 of them would dominate the run.
    quiet = [logging.getLogger(n) for n in ("systems", "broker", "replication")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    b = InProcess(tmp_path_factory.mktemp("fuzz-broker"))
    yield b
    b.close()
    for q, lv in zip(quiet, levels):
        q.setLevel(lv)


@pytest.mark.slow
def test_fuzz_request_decoder_and_handlers(inproc):
    outcomes = Counter()
    assert len(SEEDS) > 100, len(SEEDS)

    @settings(max_examples=FRAMES // (EXTRA + 1), deadline=None, derandomize=True, database=None,
              print_blob=True, suppress_health_check=list(HealthCheck))
    @given(frames(), st.integers(0, 2**64 - 1))
    def run(frame, seed):
        rng = random.Random(seed)
        for f in [frame] + [mutate_fast(rng) for _ in range(EXTRA)]:
            if len(f) < 8:  # _serve closes these before dispatch
                f = f + b"\0" * (8 - len(f))
            try:
                outcomes[inproc.feed(f)] += 1
            except Exception as e:
                raise AssertionError(f"crash on frame {f!r}: {type(e).__name__}: {e}") from e

    run()
    total = sum(outcomes.values())
    print(f"\nrequest fuzz: {total} frames, {len(SEEDS)} seed requests, outcomes {dict(outcomes)}")
    assert total >= FRAMES - EXTRA
    assert outcomes["answered"] > 0.05 * total and outcomes["closed"] > 0.05 * total, outcomes
    # The broker still serves a well-formed request after all that.
    metadata = next(f for f in SEEDS if struct.unpack_from(">h", f)[0] == 3)
    assert inproc.feed(metadata) == "answered"


@st.composite
def batches(draw):
    pid = draw(st.sampled_from([-1, 5000, 5001]))
    seq = draw(st.integers(0, 50)) if pid >= 0 else -1
    values = draw(st.lists(st.binary(max_size=40), min_size=1, max_size=5))
    b = bytearray(_batch(values, pid, 0 if pid >= 0 else -1, seq))
    kind = draw(st.sampled_from(["mutate", "mutate_fix_crc", "header_field", "truncate", "extend", "valid"]))
    if kind in ("mutate", "mutate_fix_crc"):
        for _ in range(draw(st.integers(1, 4))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
    elif kind == "header_field":  # a header field to a boundary value, CRC fixed
        off, fmt = draw(st.sampled_from([(8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (43, ">q"), (51, ">h"),
                                         (53, ">i"), (57, ">i")]))
        lim = {">b": 7, ">h": 15, ">i": 31, ">q": 63}[fmt]
        struct.pack_into(fmt, b, off, draw(st.sampled_from([0, 1, -1, 2**lim - 1, -2**lim])))
    elif kind == "truncate":
        b = b[:draw(st.integers(0, len(b) - 1))]
    elif kind == "extend":
        b += draw(st.binary(min_size=1, max_size=80))
    if kind in ("mutate_fix_crc", "header_field") and len(b) >= records.HEADER_SIZE:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


HEADER_FIELDS = [(8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (43, ">q"), (51, ">h"), (53, ">i"), (57, ">i")]


def batch_fast(rng: random.Random) -> bytes:
    """The same batches and mutations as `batches()`, from a seeded random.Random."""
    pid = rng.choice([-1, 5000, 5001])
    seq = rng.randint(0, 50) if pid >= 0 else -1
    values = [rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 5))]
    b = bytearray(_batch(values, pid, 0 if pid >= 0 else -1, seq))
    kind = rng.choice(["mutate", "mutate_fix_crc", "header_field", "truncate", "extend", "valid"])
    if kind in ("mutate", "mutate_fix_crc"):
        for _ in range(rng.randint(1, 4)):
            b[rng.randint(0, len(b) - 1)] = rng.randint(0, 255)
    elif kind == "header_field":
        off, fmt = rng.choice(HEADER_FIELDS)
        lim = {">b": 7, ">h": 15, ">i": 31, ">q": 63}[fmt]
        struct.pack_into(fmt, b, off, rng.choice([0, 1, -1, 2**lim - 1, -2**lim]))
    elif kind == "truncate":
        b = b[:rng.randint(0, len(b) - 1)]
    elif kind == "extend":
        b += rng.randbytes(rng.randint(1, 80))
    if kind in ("mutate_fix_crc", "header_field") and len(b) >= records.HEADER_SIZE:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.slow
def test_fuzz_record_batches(inproc):
    part = inproc.broker.partitions[("fuzz", 1)]
    before = sum(1 for _ in records.iter_batches(part.read(0, 1 << 30, part.log_end_offset)))
    outcomes = Counter()

    @settings(max_examples=BATCHES // (EXTRA + 1), deadline=None, derandomize=True, database=None,
              print_blob=True, suppress_health_check=list(HealthCheck))
    @given(batches(), st.integers(0, 2**64 - 1))
    def run(first, seed):
        rng = random.Random(seed)
        for b in [first] + [batch_fast(rng) for _ in range(EXTRA)]:
            try:
                one(b)
            except Exception as e:
                raise AssertionError(f"crash on batch {b!r}: {type(e).__name__}: {e}") from e

    def one(b):
        try:
            records.validate_produce(b)
            outcomes["valid"] += 1
        except errors.KafkaError as e:
            outcomes[f"validate:{e.code}"] += 1
        leo = part.log_end_offset
        try:
            base, last = part.append(b, 1 << 20)
            assert 0 <= base <= last < part.log_end_offset, (base, last, part.log_end_offset)
            outcomes["appended" if part.log_end_offset > leo else "duplicate"] += 1
        except errors.KafkaError as e:
            outcomes[f"append:{e.code}"] += 1

    run()
    total = sum(v for k, v in outcomes.items() if k == "valid" or k.startswith("validate:"))
    print(f"\nrecord-batch fuzz: {total} batches, outcomes {dict(outcomes)}")
    assert total >= BATCHES - EXTRA
    assert outcomes["appended"] > 0
    # What was appended reads back as whole batches with good CRCs.
    data = part.read(0, 1 << 30, part.log_end_offset)
    n = 0
    for pos, h in records.iter_batches(data):
        assert records.check_crc(data, pos, h)
        n += 1
    assert n - before == outcomes["appended"]
