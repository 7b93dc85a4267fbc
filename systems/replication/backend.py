"""Storage for the replication-copy system: each replica keeps a local segmented log."""
from __future__ import annotations

import json
import os
import shutil

from systems.core.broker import Backend
from systems.core.log import LocalLog
from systems.core.metadata import PartitionInfo
from systems.core.partition import Partition


class ReplicationBackend(Backend):
    name = "replication"

    def partition_dir(self, info: PartitionInfo) -> str:
        return os.path.join(self.broker.dir, "data", f"{info.topic}-{info.partition}")

    def open_partition(self, info: PartitionInfo) -> Partition:
        d = self.partition_dir(info)
        meta = os.path.join(d, "partition.metadata")
        if os.path.exists(meta):
            with open(meta) as f:
                if json.load(f).get("topic_id") != info.topic_id:
                    # Left over from a deleted topic of the same name.
                    shutil.rmtree(d)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(meta):
            with open(meta, "w") as f:
                json.dump({"topic_id": info.topic_id}, f)
        store = LocalLog(d, segment_bytes=int(self.broker.config["log.segment.bytes"]))
        return Partition(self.broker.id, info, store)


BACKEND = ReplicationBackend
