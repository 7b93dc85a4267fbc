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
        )


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
