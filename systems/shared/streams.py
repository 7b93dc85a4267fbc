"""Stream metadata: the state the controller keeps in its durable metadata log.

Both the controller and every broker apply the same records to a StreamRegistry (brokers see
them through their metadata follow loop), so the mapping partition -> streams -> object ranges
is one replicated state machine. Records (all plain dicts in the metadata log):

  stream_create  stream_id topic_id partition kind(data|meta)         state CLOSED, epoch -1
  stream_open    stream_id epoch owner owner_epoch                     state OPENED by a broker incarnation
  stream_commit  key size writer ranges[{stream_id epoch start end pos len ipos ilen max_ts}]
                 a data range extends the stream (start must equal its end);
                 a meta range replaces the meta stream's previous one (only the latest is live)
  stream_close   stream_id epoch cause [handoff]                       state CLOSED; a meta stream's
                 handoff: the partition's final state at a snapshot close, for the next owner
                 (kept until the meta stream commits a newer document)
  shared_move    move_id topic_id partition from to ts                 a move in progress
  shared_move_done move_id topic_id partition how
  shared_failover  broker broker_epoch ts                              an incarnation lost: replay its WAL
  shared_failover_done broker broker_epoch
  remove_topic   (core record) drops the topic's streams; their objects become garbage
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Internal RPC error codes (not Kafka codes; brokers map them).
STREAM_FENCED = 10001
STREAM_NOT_CLOSED = 10002
STREAM_NOT_FOUND = 10003
STREAM_OUT_OF_ORDER = 10004

OPENED, CLOSED = "OPENED", "CLOSED"


@dataclass
class Stream:
    id: int
    topic_id: str
    partition: int
    kind: str
    epoch: int = -1
    owner: int = -1
    owner_epoch: int = -1
    state: str = CLOSED
    start: int = 0
    end: int = 0
    ranges: list = field(default_factory=list)  # dicts with key added
    # The meta document the last snapshot close handed over: newer than any in object storage
    # until the meta stream commits one (which drops it).
    handoff: dict | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "topic_id": self.topic_id, "partition": self.partition, "kind": self.kind,
                "epoch": self.epoch, "owner": self.owner, "owner_epoch": self.owner_epoch,
                "state": self.state, "start": self.start, "end": self.end, "ranges": list(self.ranges),
                "handoff": self.handoff}


class StreamRegistry:
    def __init__(self):
        self.streams: dict[int, Stream] = {}
        self.by_partition: dict[tuple[str, int], dict[str, int]] = {}
        self.next_id = 1
        self.obj_refs: dict[str, int] = {}
        self.garbage: set[str] = set()
        self.moves: dict[tuple[str, int], dict] = {}
        self.failovers: dict[tuple[int, int], dict] = {}
        self.dead: set[tuple[int, int]] = set()  # broker incarnations failed over
        self.next_move_id = 1
        self.last_move: dict[tuple[str, int], dict] = {}  # kept after the move is done

    # -- queries --------------------------------------------------------------
    def partition_streams(self, topic_id: str, partition: int) -> tuple[Stream | None, Stream | None]:
        ids = self.by_partition.get((topic_id, partition)) or {}
        return self.streams.get(ids.get("data")), self.streams.get(ids.get("meta"))

    def owned_by(self, broker: int, broker_epoch: int) -> list[Stream]:
        return [s for s in self.streams.values()
                if s.state == OPENED and s.owner == broker and s.owner_epoch == broker_epoch]

    # -- apply ----------------------------------------------------------------
    def _ref(self, key: str, d: int) -> None:
        n = self.obj_refs.get(key, 0) + d
        if n <= 0:
            self.obj_refs.pop(key, None)
            self.garbage.add(key)
        else:
            self.obj_refs[key] = n
            self.garbage.discard(key)

    def apply(self, rec: dict) -> None:
        t = rec.get("type")
        if t == "stream_create":
            s = Stream(rec["stream_id"], rec["topic_id"], rec["partition"], rec["kind"])
            self.streams[s.id] = s
            self.by_partition.setdefault((s.topic_id, s.partition), {})[s.kind] = s.id
            self.next_id = max(self.next_id, s.id + 1)
        elif t == "stream_open":
            s = self.streams.get(rec["stream_id"])
            if s is not None:
                s.epoch, s.owner, s.owner_epoch, s.state = rec["epoch"], rec["owner"], rec["owner_epoch"], OPENED
        elif t == "stream_close":
            s = self.streams.get(rec["stream_id"])
            if s is not None and s.epoch == rec["epoch"]:
                s.state = CLOSED
                if "handoff" in rec:
                    s.handoff = rec["handoff"]
        elif t == "stream_commit":
            for r in rec["ranges"]:
                s = self.streams.get(r["stream_id"])
                if s is None:
                    continue
                r = dict(r, key=rec["key"])
                self._ref(rec["key"], 1)
                if s.kind == "meta":
                    s.handoff = None
                    for old in s.ranges:
                        self._ref(old["key"], -1)
                    s.ranges = [r]
                    s.start = r["start"]
                else:
                    s.ranges.append(r)
                s.end = r["end"]
            if rec["key"] not in self.obj_refs:
                self.garbage.add(rec["key"])  # nothing of it was kept
        elif t == "remove_topic":
            for key in [k for k in self.by_partition if k[0] == rec["topic_id"]]:
                for sid in self.by_partition.pop(key).values():
                    s = self.streams.pop(sid, None)
                    for r in s.ranges if s else []:
                        self._ref(r["key"], -1)
            for key in [k for k in self.moves if k[0] == rec["topic_id"]]:
                self.moves.pop(key)
        elif t == "shared_move":
            self.moves[(rec["topic_id"], rec["partition"])] = rec
            self.last_move[(rec["topic_id"], rec["partition"])] = rec
            self.next_move_id = max(self.next_move_id, rec["move_id"] + 1)
        elif t == "shared_move_done":
            m = self.moves.get((rec["topic_id"], rec["partition"]))
            if m is not None and m["move_id"] == rec["move_id"]:
                self.moves.pop((rec["topic_id"], rec["partition"]))
        elif t == "shared_failover":
            self.failovers[(rec["broker"], rec["broker_epoch"])] = rec
            self.dead.add((rec["broker"], rec["broker_epoch"]))
        elif t == "shared_failover_done":
            self.failovers.pop((rec["broker"], rec["broker_epoch"]), None)
