"""The S3 client the shared-storage brokers use (minio SDK 7.2.20), with a bandwidth cap.

- `S3Config`: where and how to connect; its repr never shows credentials.
- `TokenBucket`: a byte-rate limiter usable from threads and from asyncio.
- `ObjectStore`: put/get/range/list/delete (+ async variants on a thread pool), every transfer
  paid through the token buckets, with counters in `stats()`.
- `purpose(tag)`: requests made inside it (in a coroutine, and the tasks and pool calls it
  starts) are also counted under `tag` by kind (`REQUEST_KINDS`), for `take_requests(tag)`: how a
  move's close and open say what they asked of the object store, apart from the WAL's uploads and
  the readers' GETs running beside them.
- Errors are one family: `ObjectStoreError` and its subclasses `ObjectStoreUnavailable`,
  `ObjectNotFound`, `ObjectStoreAuthError`. Messages name the endpoint and bucket, never a key.

Bandwidth model (per ObjectStore instance; brokers use one instance per process, so the cap is
per process): `bandwidth_bytes_per_s` caps uploads + downloads together (a shared NIC);
`upload_bytes_per_s` / `download_bytes_per_s` cap one direction each. A transfer pays every
bucket that applies. Downloads are paced while the body streams (TCP backpressure slows the
server). Uploads are paid before the request is sent (the SDK wants the whole body as one
bytes object), so an upload of N bytes starts after ~N/rate seconds and then goes at full speed:
the total time matches the cap, the instantaneous shape does not.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import io
import os
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Mapping, TypeVar

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import InvalidResponseError, MinioException, S3Error, ServerError
from minio.helpers import MAX_PART_SIZE, MIN_PART_SIZE

__all__ = [
    "S3Config", "TokenBucket", "ObjectStore", "REQUEST_KINDS", "purpose",
    "ObjectStoreError", "ObjectStoreUnavailable", "ObjectNotFound", "ObjectStoreAuthError",
]

T = TypeVar("T")

# Download read size, and the unit in which a large request pays its tokens: small enough that
# concurrent transfers interleave, large enough that the per-chunk overhead is negligible.
_CHUNK_BYTES = 256 * 1024

_AUTH_CODES = frozenset({
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AuthorizationHeaderMalformed",
    "InvalidToken", "ExpiredToken", "MissingSecurityHeader", "InvalidSecurity",
    "AllAccessDisabled", "AccessForbidden", "RequestTimeTooSkewed",
})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NoSuchObject", "NoSuchVersion"})
_UNAVAILABLE_CODES = frozenset({
    "ServiceUnavailable", "SlowDown", "InternalError", "RequestTimeout", "XMinioServerNotInitialized",
})

# S3's request kinds as providers bill them: PutObject, GetObject (a range read is one), ListObjectsV2
# (one per call: the prefixes listed here stay under its 1000-key page), HeadObject and DeleteObject(s)
# (one DeleteObjects call per 1000 keys).
REQUEST_KINDS = ("put", "get", "list", "head", "delete")
_PURPOSE: contextvars.ContextVar[str | None] = contextvars.ContextVar("objstore_purpose", default=None)


@contextlib.contextmanager
def purpose(tag: str | None):
    """Count the object-store requests made inside this block under `tag` as well (None: under
    none, for work a tagged block starts that is not its own)."""
    token = _PURPOSE.set(tag)
    try:
        yield
    finally:
        _PURPOSE.reset(token)


# ---------------------------------------------------------------------------------------------
# errors

class ObjectStoreError(Exception):
    """Any failure of an object-store operation. `code` is the S3 error code when there is one."""

    def __init__(self, message: str, *, endpoint: str | None = None, bucket: str | None = None,
                 key: str | None = None, op: str | None = None, code: str | None = None):
        super().__init__(message)
        self.endpoint = endpoint
        self.bucket = bucket
        self.key = key
        self.op = op
        self.code = code


class ObjectStoreUnavailable(ObjectStoreError):
    """The endpoint could not be reached or kept failing (refused, timeout, 5xx after retries)."""


class ObjectNotFound(ObjectStoreError):
    """The key does not exist."""


class ObjectStoreAuthError(ObjectStoreError):
    """The endpoint refused our credentials (wrong key, wrong secret, or access denied)."""


def _class_for_code(code: str | None) -> type[ObjectStoreError]:
    if code in _NOT_FOUND_CODES:
        return ObjectNotFound
    if code in _AUTH_CODES:
        return ObjectStoreAuthError
    if code in _UNAVAILABLE_CODES:
        return ObjectStoreUnavailable
    return ObjectStoreError


# ---------------------------------------------------------------------------------------------
# config

def _positive_or_none(name: str, value) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{name} must be > 0 or None, got {value!r}")


@dataclass(frozen=True, repr=False)
class S3Config:
    """Connection settings. Rates are bytes per second; None = unlimited.

    Timeouts bound failure time: an unreachable endpoint fails after about
    connect_timeout_s * (max_retries + 1) (immediately if the port refuses connections).
    """
    endpoint: str  # "host:port", no scheme
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    bucket: str
    region: str = "us-east-1"
    secure: bool = False  # TLS
    bandwidth_bytes_per_s: float | None = None  # uploads + downloads together
    upload_bytes_per_s: float | None = None
    download_bytes_per_s: float | None = None
    burst_bytes: int | None = None  # token bucket depth; None = 100 ms at the rate (>= 64 KiB)
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 30.0
    max_retries: int = 2  # retries of connection errors and 5xx replies, per request
    max_concurrency: int = 8  # thread pool for async calls, and HTTP connection pool size

    def __post_init__(self):
        if not self.endpoint or "://" in self.endpoint or "/" in self.endpoint:
            raise ValueError(f"endpoint must be 'host:port' without scheme, got {self.endpoint!r}")
        if not self.bucket:
            raise ValueError("bucket must be set")
        for name in ("bandwidth_bytes_per_s", "upload_bytes_per_s", "download_bytes_per_s",
                     "burst_bytes", "connect_timeout_s", "read_timeout_s"):
            _positive_or_none(name, getattr(self, name))
        if self.max_retries < 0 or self.max_concurrency < 1:
            raise ValueError("max_retries must be >= 0 and max_concurrency >= 1")

    def __repr__(self) -> str:
        # Credentials are left out on purpose: configs end up in logs and run directories.
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"S3Config({shown})"

    __str__ = __repr__

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "S3Config":
        """Build from a JSON-style dict. Credentials may be given inline (`access_key`,
        `secret_key`) or, better for files that get copied into run directories, by the names of
        environment variables holding them (`access_key_env`, `secret_key_env`)."""
        d = dict(d)
        for name in ("access_key", "secret_key"):
            env_name = d.pop(f"{name}_env", None)
            if env_name and name not in d:
                if env_name not in os.environ:
                    raise ValueError(f"{name}_env names {env_name!r}, which is not set")
                d[name] = os.environ[env_name]
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown S3Config keys: {unknown}")
        missing = sorted(n for n in ("endpoint", "access_key", "secret_key", "bucket") if n not in d)
        if missing:
            raise ValueError(f"S3Config is missing: {missing}")
        return cls(**d)

    def to_dict(self, include_credentials: bool = False) -> dict[str, Any]:
        """JSON-ready dict; credentials only if asked (round-trips through from_dict then)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if include_credentials or f.name not in ("access_key", "secret_key")}


# ---------------------------------------------------------------------------------------------
# throttle

class TokenBucket:
    """Byte-rate limiter: `rate_bytes_per_s` sustained, up to `burst_bytes` at once.

    Reservation style: a caller takes its tokens at once (the balance may go negative) and then
    sleeps until the balance it consumed would have refilled. Requests larger than a chunk are
    paid chunk by chunk, so concurrent callers interleave instead of one 64 MiB request blocking
    everyone for its whole duration. The lock is held only for arithmetic, so the same bucket
    serves threads (`acquire`) and asyncio tasks (`acquire_async`) together.
    """

    def __init__(self, rate_bytes_per_s: float, burst_bytes: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if not rate_bytes_per_s > 0:
            raise ValueError(f"rate_bytes_per_s must be > 0, got {rate_bytes_per_s!r}")
        if burst_bytes is None:
            burst_bytes = max(64 * 1024, int(rate_bytes_per_s / 10))
        if burst_bytes < 1:
            raise ValueError(f"burst_bytes must be >= 1, got {burst_bytes!r}")
        self.rate = float(rate_bytes_per_s)
        self.burst = int(burst_bytes)
        self.chunk = min(self.burst, _CHUNK_BYTES)
        self._clock = clock
        self._tokens = float(self.burst)  # start full
        self._last = clock()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TokenBucket(rate_bytes_per_s={self.rate:g}, burst_bytes={self.burst})"

    def _reserve(self, n: int) -> float:
        """Take n tokens now; return how long the caller must wait before using them."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= n
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def _chunks(self, n: int) -> Iterable[int]:
        if n < 0:
            raise ValueError(f"cannot acquire a negative amount ({n})")
        while n > 0:
            c = min(n, self.chunk)
            yield c
            n -= c

    def acquire(self, n: int) -> float:
        """Block until n bytes may pass; return the seconds spent waiting."""
        waited = 0.0
        for c in self._chunks(n):
            w = self._reserve(c)
            if w > 0:
                time.sleep(w)
                waited += w
        return waited

    async def acquire_async(self, n: int) -> float:
        """Like acquire(), but sleeps with asyncio so the event loop keeps running."""
        waited = 0.0
        for c in self._chunks(n):
            w = self._reserve(c)
            if w > 0:
                await asyncio.sleep(w)
                waited += w
        return waited


# ---------------------------------------------------------------------------------------------
# store

class ObjectStore:
    """Blocking and asyncio access to one bucket. Thread-safe; close() when done."""

    def __init__(self, config: S3Config):
        self.config = config
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=config.connect_timeout_s, read=config.read_timeout_s),
            # Connection errors, read errors and 5xx are retried a few times, quickly; 4xx never.
            # Retry-After is ignored so that a failing call stays bounded in time.
            retries=urllib3.Retry(total=config.max_retries, backoff_factor=0.2,
                                  status_forcelist=[500, 502, 503, 504],
                                  respect_retry_after_header=False),
            maxsize=config.max_concurrency + 2,
        )
        self._client = Minio(config.endpoint, access_key=config.access_key,
                             secret_key=config.secret_key, secure=config.secure,
                             region=config.region,  # known region: no GetBucketLocation round trip
                             http_client=self._http)
        burst = config.burst_bytes
        self._shared = (TokenBucket(config.bandwidth_bytes_per_s, burst)
                        if config.bandwidth_bytes_per_s else None)
        self._up = TokenBucket(config.upload_bytes_per_s, burst) if config.upload_bytes_per_s else None
        self._down = (TokenBucket(config.download_bytes_per_s, burst)
                      if config.download_bytes_per_s else None)
        self._upload_buckets = [b for b in (self._shared, self._up) if b]
        self._download_buckets = [b for b in (self._shared, self._down) if b]
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=config.max_concurrency, thread_name_prefix="objstore")
        self._stats_lock = threading.Lock()
        self._stats = dict(bytes_uploaded=0, bytes_downloaded=0, put_count=0, get_count=0,
                           delete_count=0, list_count=0, error_count=0,
                           throttle_wait_upload_s=0.0, throttle_wait_download_s=0.0)
        self._requests: dict[str, dict[str, int]] = {}  # purpose -> kind -> requests
        self._closed = False

    def __repr__(self) -> str:
        return f"ObjectStore(endpoint={self.config.endpoint!r}, bucket={self.config.bucket!r})"

    __str__ = __repr__

    def __enter__(self) -> "ObjectStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> "ObjectStore":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._executor.shutdown(wait=True)
            self._http.clear()

    # -- counters ---------------------------------------------------------------------------
    def _count(self, **deltas) -> None:
        with self._stats_lock:
            for k, v in deltas.items():
                self._stats[k] += v

    def _request(self, kind: str, n: int = 1) -> None:
        tag = _PURPOSE.get()
        if tag is not None:
            with self._stats_lock:
                by_kind = self._requests.setdefault(tag, dict.fromkeys(REQUEST_KINDS, 0))
                by_kind[kind] += n

    def take_requests(self, tag: str) -> dict[str, int]:
        """The requests counted under `tag` (every kind, 0 where none), forgotten here."""
        with self._stats_lock:
            return self._requests.pop(tag, None) or dict.fromkeys(REQUEST_KINDS, 0)

    def stats(self) -> dict[str, float]:
        """Snapshot of the counters (bytes are payload bytes; waits are throttle sleeps)."""
        with self._stats_lock:
            s = dict(self._stats)
        s["throttle_wait_s"] = s["throttle_wait_upload_s"] + s["throttle_wait_download_s"]
        return s

    # -- throttle helpers -------------------------------------------------------------------
    def _pay(self, buckets: list[TokenBucket], n: int) -> float:
        # Each bucket is paid in turn; paying one delays the other's refill accounting by the
        # same amount, so the slower cap governs, as for two links in series.
        return sum(b.acquire(n) for b in buckets)

    async def _apay(self, buckets: list[TokenBucket], n: int) -> float:
        waited = 0.0
        for b in buckets:
            waited += await b.acquire_async(n)
        return waited

    # -- error translation ------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for secret in (self.config.secret_key, self.config.access_key):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _error(self, exc: BaseException, op: str, key: str | None) -> ObjectStoreError:
        cfg = self.config
        where = f"s3://{cfg.bucket}/{key}" if key is not None else f"s3://{cfg.bucket}"
        prefix = f"{op} {where} at {cfg.endpoint}"
        code = None
        if isinstance(exc, S3Error):
            code = exc.code
            detail = f"{exc.code}: {exc.message}"
            cls = _class_for_code(code)
            if code == "NoSuchBucket":
                detail += " (call ensure_bucket() first)"
        elif isinstance(exc, InvalidResponseError):
            status = getattr(exc, "_code", None)
            detail = f"non-S3 reply, HTTP {status}"
            cls = (ObjectStoreAuthError if status in (401, 403)
                   else ObjectStoreUnavailable if isinstance(status, int) and status >= 500
                   else ObjectStoreError)
        elif isinstance(exc, ServerError):
            detail = f"server error: {exc}"
            cls = ObjectStoreUnavailable
        elif isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
            # MaxRetryError (refused / timed out after retries), ProtocolError (connection
            # dropped mid-body), ReadTimeoutError, plain socket errors.
            reason = getattr(exc, "reason", None) or exc
            detail = f"unreachable: {type(reason).__name__}: {reason}"
            cls = ObjectStoreUnavailable
        else:
            detail = f"{type(exc).__name__}: {exc}"
            cls = ObjectStoreError
        return cls(self._scrub(f"{prefix} failed: {detail}"), endpoint=cfg.endpoint,
                   bucket=cfg.bucket, key=key, op=op, code=code)

    def _call(self, op: str, key: str | None, fn: Callable[[], T], kind: str | None = None, n: int = 1) -> T:
        if kind is not None:
            self._request(kind, n)
        try:
            return fn()
        except ObjectStoreError:
            self._count(error_count=1)
            raise
        except (MinioException, urllib3.exceptions.HTTPError, OSError) as e:
            self._count(error_count=1)
            raise self._error(e, op, key) from e

    # -- blocking API -----------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent, race-safe)."""
        def run():
            if self._client.bucket_exists(self.config.bucket):
                return
            try:
                self._client.make_bucket(self.config.bucket)
            except S3Error as e:
                if e.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
        self._call("ensure_bucket", None, run)

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` (overwrites). Throttled by the upload cap(s)."""
        data = bytes(data) if not isinstance(data, bytes) else data
        waited = self._pay(self._upload_buckets, len(data))
        self._count(throttle_wait_upload_s=waited)
        self._put_now(key, data)

    def _put_now(self, key: str, data: bytes) -> None:
        n = len(data)
        # part_size >= size makes the SDK send one PutObject (no multipart) up to 5 GiB: fewer
        # round trips, and the body is already in memory.
        part = min(max(n, MIN_PART_SIZE), MAX_PART_SIZE)
        self._call("put", key, lambda: self._client.put_object(
            self.config.bucket, key, io.BytesIO(data), n, part_size=part, num_parallel_uploads=1), "put")
        self._count(bytes_uploaded=n, put_count=1)

    def get(self, key: str) -> bytes:
        """The whole object. Raises ObjectNotFound if absent."""
        return self._get(key, 0, 0, "get")

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (fewer if the object ends first; S3 semantics)."""
        if offset < 0 or length < 0:
            raise ValueError(f"offset and length must be >= 0, got {offset}, {length}")
        if length == 0:
            return b""  # the SDK would read length 0 as "to the end"
        return self._get(key, offset, length, "get_range")

    def _get(self, key: str, offset: int, length: int, op: str) -> bytes:
        buckets = self._download_buckets

        def run() -> bytes:
            resp = self._client.get_object(self.config.bucket, key, offset=offset, length=length)
            try:
                if not buckets:
                    return resp.read()
                parts, waited = [], 0.0
                try:
                    # Pay for each chunk as it arrives; sleeping here stops reading the socket,
                    # so the sender is held back too.
                    for chunk in resp.stream(_CHUNK_BYTES):
                        parts.append(chunk)
                        waited += self._pay(buckets, len(chunk))
                finally:
                    self._count(throttle_wait_download_s=waited)
                return b"".join(parts)
            finally:
                resp.close()
                resp.release_conn()

        data = self._call(op, key, run, "get")
        self._count(bytes_downloaded=len(data), get_count=1)
        return data

    def delete(self, key: str) -> None:
        """Remove `key`. Deleting a missing key succeeds (S3 semantics)."""
        self._call("delete", key, lambda: self._client.remove_object(self.config.bucket, key), "delete")
        self._count(delete_count=1)

    def delete_many(self, keys: Iterable[str]) -> None:
        """Remove many keys with batched DeleteObjects calls; raises if any key failed."""
        keys = list(keys)
        if not keys:
            return

        def run():
            # The SDK returns a lazy iterator of per-key errors: it must be consumed.
            errors = list(self._client.remove_objects(
                self.config.bucket, (DeleteObject(k) for k in keys)))
            if errors:
                first = errors[0]
                cfg = self.config
                raise _class_for_code(first.code)(
                    self._scrub(f"delete_many s3://{cfg.bucket} at {cfg.endpoint} failed: "
                                f"{len(errors)} of {len(keys)} keys, first {first.name!r}: "
                                f"{first.code}: {first.message}"),
                    endpoint=cfg.endpoint, bucket=cfg.bucket, key=first.name,
                    op="delete_many", code=first.code)
        self._call("delete_many", None, run, "delete", -(-len(keys) // 1000))
        self._count(delete_count=len(keys))

    def list(self, prefix: str = "") -> list[str]:
        """All keys under `prefix` (recursive), in S3's lexicographic order."""
        keys = self._call("list", prefix, lambda: [
            o.object_name for o in self._client.list_objects(
                self.config.bucket, prefix=prefix or None, recursive=True)], "list")
        self._count(list_count=1)
        return keys

    def census(self, depth: int = 2) -> dict[str, dict[str, int]]:
        """Objects and bytes per group of keys, a group being the keys' first ``depth`` path
        components (``<prefix>/wal``, ``<prefix>/sso``, ...): what a soak watches for leaks."""
        def run() -> dict[str, dict[str, int]]:
            out: dict[str, dict[str, int]] = {}
            for o in self._client.list_objects(self.config.bucket, recursive=True):
                e = out.setdefault("/".join(o.object_name.split("/")[:depth]), {"objects": 0, "bytes": 0})
                e["objects"] += 1
                e["bytes"] += int(o.size or 0)
            return out

        found = self._call("list", None, run)
        self._count(list_count=1)
        return found

    def exists(self, key: str) -> bool:
        def run() -> bool:
            try:
                self._client.stat_object(self.config.bucket, key)
                return True
            except S3Error as e:
                if e.code in _NOT_FOUND_CODES:
                    return False
                raise
        return self._call("exists", key, run, "head")

    # -- asyncio API ------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args) -> T:
        loop = asyncio.get_running_loop()
        # The pool thread runs in the caller's context, so a purpose() around the await holds there.
        return await loop.run_in_executor(self._executor, contextvars.copy_context().run, functools.partial(fn, *args))

    async def aput(self, key: str, data: bytes) -> None:
        # Throttle on the loop (asyncio.sleep) so waiting uploads do not hold pool threads.
        data = bytes(data) if not isinstance(data, bytes) else data
        waited = await self._apay(self._upload_buckets, len(data))
        self._count(throttle_wait_upload_s=waited)
        await self._run(self._put_now, key, data)

    async def aget(self, key: str) -> bytes:
        return await self._run(self.get, key)

    async def aget_range(self, key: str, offset: int, length: int) -> bytes:
        return await self._run(self.get_range, key, offset, length)

    async def adelete(self, key: str) -> None:
        await self._run(self.delete, key)

    async def adelete_many(self, keys: Iterable[str]) -> None:
        await self._run(self.delete_many, list(keys))

    async def alist(self, prefix: str = "") -> list[str]:
        return await self._run(self.list, prefix)

    async def aexists(self, key: str) -> bool:
        return await self._run(self.exists, key)
