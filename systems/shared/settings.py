"""Settings of the shared-storage system, read from the broker/controller config dict.

Names follow the issue (and Kafka's dotted style); every value may arrive as a string
(`--config key=value`). Credentials are never put in a repr or a log line: they come from
`s3.access.key` / `s3.secret.key` or, as the launcher does it, from the file named by
`s3.credentials.file` (JSON {"access_key", "secret_key"}, mode 0600), so they stay out of
command lines and cluster.json.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the object-store client only where it is used: the profile reads DEFAULTS
    from systems.shared.objstore import S3Config

MiB = 1 << 20

DEFAULTS = {
    "s3.endpoint": None,
    "s3.access.key": None,
    "s3.secret.key": None,
    "s3.credentials.file": None,
    "s3.bucket": "reassign-bench",
    "s3.region": "us-east-1",
    "s3.secure": "false",
    "s3.prefix": None,  # default: the cluster id, so clusters can share a bucket
    "s3.bandwidth.bytes.per.s": None,  # per process, uploads + downloads together
    "s3.upload.bytes.per.s": None,
    "s3.download.bytes.per.s": None,
    "s3.max.concurrency": 8,
    "wal.batch.interval.ms": 100,  # an ack waits for its WAL object's PUT: docs/measurements/automq.md
    "wal.batch.max.bytes": 8 * MiB,
    "wal.max.inflight": 4,  # WAL objects being written at once
    "wal.max.pending.bytes": 128 * MiB,  # appended but not yet durable: above it, produce is refused
    "wal.upload.threshold.bytes": 32 * MiB,  # durable but not yet in stream objects
    "wal.upload.interval.ms": 10000,
    "wal.upload.max.backlog.bytes": 128 * MiB,  # above it WAL writes (so acks) wait for uploads
    "s3.upload.part.bytes": 8 * MiB,  # an upload is split into objects of this size, PUT in parallel
    "log.cache.bytes": 256 * MiB,  # per broker: tail kept in memory after upload
    "s3.read.block.bytes": 8 * MiB,  # object range read size for cold fetches
    "shared.move.timeout.ms": 15000,  # controller elects the target anyway after this
    # Bytes/s per broker for the uploads of a partition's close (a move's forced upload of its
    # unuploaded tail, and its meta): a move's traffic under the operator's move budget. Unlike
    # s3.upload.bytes.per.s it leaves the WAL and the background uploads alone. None: uncapped.
    "shared.move.upload.bytes.per.s": None,
    # How a move hands a partition over. upload: the seed article's six steps (the source persists
    # the meta stream and force-uploads the unuploaded tail into a stream object, the target reads
    # the meta back). snapshot: AutoMQ V6 (#3495): the tail's WAL objects are committed to the stream
    # by reference and the final partition state goes to the target through the controller, so
    # nothing is written to or read from object storage between the close and the open; WAL
    # objects then serve as stream-set objects in steady state too (each byte PUT once).
    "shared.handoff": "upload",
    # Tests only: the process kills itself (SIGKILL) at this step of a move (FAILPOINTS), so a
    # kill -9 lands exactly between two steps of the handoff.
    "shared.failpoint": None,
    "offsets.topic.replication.factor": 1,  # durability from object storage, as for every topic here
}


def _get(cfg: dict, key: str):
    v = cfg.get(key)
    return DEFAULTS.get(key) if v is None else v


def _int(cfg: dict, key: str) -> int:
    return int(_get(cfg, key))


def _opt_float(cfg: dict, key: str) -> float | None:
    v = _get(cfg, key)
    if v in (None, "", "0", 0):
        return None
    return float(v)


def _bool(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class SharedSettings:
    wal_batch_interval_s: float
    wal_batch_max_bytes: int
    wal_max_inflight: int
    wal_max_pending_bytes: int
    upload_threshold_bytes: int
    upload_interval_s: float
    upload_max_backlog_bytes: int
    upload_part_bytes: int
    cache_bytes: int
    read_block_bytes: int
    move_timeout_s: float
    prefix: str | None
    move_upload_bytes_per_s: float | None = None
    handoff: str = "upload"
    failpoint: str | None = None

    @classmethod
    def from_config(cls, cfg: dict) -> "SharedSettings":
        return cls(
            wal_batch_interval_s=_int(cfg, "wal.batch.interval.ms") / 1000,
            wal_batch_max_bytes=_int(cfg, "wal.batch.max.bytes"),
            wal_max_inflight=max(1, _int(cfg, "wal.max.inflight")),
            wal_max_pending_bytes=_int(cfg, "wal.max.pending.bytes"),
            upload_threshold_bytes=_int(cfg, "wal.upload.threshold.bytes"),
            upload_interval_s=_int(cfg, "wal.upload.interval.ms") / 1000,
            upload_max_backlog_bytes=_int(cfg, "wal.upload.max.backlog.bytes"),
            upload_part_bytes=_int(cfg, "s3.upload.part.bytes"),
            cache_bytes=_int(cfg, "log.cache.bytes"),
            read_block_bytes=_int(cfg, "s3.read.block.bytes"),
            move_timeout_s=_int(cfg, "shared.move.timeout.ms") / 1000,
            prefix=_get(cfg, "s3.prefix"),
            move_upload_bytes_per_s=_opt_float(cfg, "shared.move.upload.bytes.per.s"),
            handoff=_handoff(cfg),
            failpoint=_failpoint(cfg),
        )

    @property
    def by_reference(self) -> bool:
        """WAL objects become stream-set objects through their ranges (no second PUT)."""
        return self.handoff == "snapshot"


HANDOFFS = ("upload", "snapshot")


def _handoff(cfg: dict) -> str:
    v = str(_get(cfg, "shared.handoff"))
    if v not in HANDOFFS:
        raise ValueError(f"shared.handoff must be one of {', '.join(HANDOFFS)}, got {v!r}")
    return v


# Where a failpoint may kill the process: the source's close (after it stopped writes; after its
# WAL is durable; after the controller took the handoff), the controller's close of the streams
# (committed, not yet elected), the target (serving).
FAILPOINTS = ("source.closing", "source.before_handoff", "source.after_handoff", "controller.before_elect",
              "target.serving")


def _failpoint(cfg: dict) -> str | None:
    v = _get(cfg, "shared.failpoint")
    if v in (None, ""):
        return None
    if v not in FAILPOINTS:
        raise ValueError(f"shared.failpoint must be one of {', '.join(FAILPOINTS)}, got {v!r}")
    return str(v)


def failpoint(settings: "SharedSettings", name: str, events) -> None:
    """Kill this process (SIGKILL, as kill -9 does) if the failpoint ``name`` is set, once per
    process directory (a marker beside its event journal), so the restarted process goes on."""
    if settings.failpoint == name:
        import os
        import signal

        marker = f"{events.path}.failpoint-{name}"
        if os.path.exists(marker):
            return
        open(marker, "w").close()
        events.emit("shared_failpoint", name=name)
        os.kill(os.getpid(), signal.SIGKILL)


def credentials(cfg: dict) -> tuple[str, str]:
    ak, sk = cfg.get("s3.access.key"), cfg.get("s3.secret.key")
    path = cfg.get("s3.credentials.file")
    if (not ak or not sk) and path:
        with open(path) as f:
            d = json.load(f)
        ak, sk = ak or d["access_key"], sk or d["secret_key"]
    if not ak or not sk:
        raise ValueError("shared storage needs S3 credentials: set s3.access.key and s3.secret.key "
                         "or s3.credentials.file")
    return ak, sk


def s3_config(cfg: dict) -> "S3Config":
    from systems.shared.objstore import S3Config

    endpoint = _get(cfg, "s3.endpoint")
    if not endpoint:
        raise ValueError("shared storage needs s3.endpoint (host:port)")
    ak, sk = credentials(cfg)
    return S3Config(
        endpoint=str(endpoint), access_key=ak, secret_key=sk, bucket=str(_get(cfg, "s3.bucket")),
        region=str(_get(cfg, "s3.region")), secure=_bool(_get(cfg, "s3.secure")),
        bandwidth_bytes_per_s=_opt_float(cfg, "s3.bandwidth.bytes.per.s"),
        upload_bytes_per_s=_opt_float(cfg, "s3.upload.bytes.per.s"),
        download_bytes_per_s=_opt_float(cfg, "s3.download.bytes.per.s"),
        max_concurrency=_int(cfg, "s3.max.concurrency"),
        connect_timeout_s=10.0, read_timeout_s=30.0, max_retries=1,
    )
