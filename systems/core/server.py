"""Kafka wire protocol server on asyncio, using kafka-python's schema classes.

Framing: 4-byte big-endian size, then a request header and body. Requests on a
connection are started in arrival order (a handler's synchronous part - e.g. a
produce's append - runs before the next request's), may complete out of order,
and responses are written strictly in request order, as Kafka clients expect.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from . import errors

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_KEY_VER = struct.Struct(">hh")
MAX_IN_FLIGHT = 32


@dataclass(frozen=True)
class Api:
    request: type
    min_version: int
    max_version: int
    handler: Callable[..., Awaitable]  # async (request, header, conn) -> response | None


class Connection:
    def __init__(self, reader, writer, peer):
        self.reader, self.writer, self.peer = reader, writer, peer
        self.announced = False  # the first decoded request was reported (KafkaServer.on_client)


class KafkaServer:
    def __init__(self, max_request_bytes: int = 100 * 1024 * 1024):
        self.apis: dict[int, Api] = {}
        self.max_request_bytes = max_request_bytes
        self.server: asyncio.base_events.Server | None = None
        self.connections: set[Connection] = set()
        # Called once per connection with its first decoded request: (conn, header, request).
        self.on_client: Callable[[Connection, object, object], None] | None = None
        self.register(ApiVersionsRequest, 0, 3, self._api_versions)

    def register(self, request_cls, min_version: int, max_version: int, handler) -> None:
        assert max_version <= request_cls.max_version, request_cls
        self.apis[request_cls.API_KEY] = Api(request_cls, min_version, max_version, handler)

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, limit=1 << 20)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in list(self.connections):
            c.writer.close()

    # -- ApiVersions ----------------------------------------------------------
    async def _api_versions(self, req, header, conn):
        return ApiVersionsResponse(
            version=header.request_api_version, error_code=0, throttle_time_ms=0,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version)
                      for k, a in sorted(self.apis.items())])

    def _api_versions_unsupported(self, correlation_id: int) -> bytes:
        # Kafka answers an ApiVersions request of a version it does not know with
        # a v0 response carrying UNSUPPORTED_VERSION and its ranges, so the client
        # can retry with a version both sides speak.
        resp = ApiVersionsResponse(
            version=0, error_code=errors.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version)
                      for k, a in sorted(self.apis.items())])
        resp.with_header(correlation_id=correlation_id)
        return resp.encode(header=True, framed=True)

    # -- connections ----------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, writer.get_extra_info("peername"))
        self.connections.add(conn)
        pending: deque = deque()
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        wake = asyncio.Event()
        closing = False

        async def write_loop():
            while True:
                while not pending:
                    if closing:
                        return
                    wake.clear()
                    await wake.wait()
                fut = pending[0]
                try:
                    out = await fut
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("request handler failed for %s; closing connection", conn.peer)
                    writer.close()
                    return
                pending.popleft()
                slots.release()
                if out is not None:
                    writer.write(out)
                    await writer.drain()

        writer_task = asyncio.create_task(write_loop())
        try:
            while True:
                head = await reader.readexactly(4)
                size, = _SIZE.unpack(head)
                if size < 8 or size > self.max_request_bytes:
                    # Refuse before reading (or allocating) the body, as Kafka does
                    # for sizes over socket.request.max.bytes.
                    log.warning("closing %s: request size %d outside [8, %d]", conn.peer, size,
                                self.max_request_bytes)
                    break
                frame = await reader.readexactly(size)
                await slots.acquire()
                work = self._dispatch(frame, conn)
                if work is False:
                    break
                pending.append(work)
                wake.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # Shutdown: asyncio's stream callback would log a cancelled handler as an error.
            pass
        finally:
            closing = True
            wake.set()
            if writer.is_closing() or not pending:
                writer_task.cancel()
            try:
                await asyncio.wait_for(writer_task, 30)
            except (asyncio.CancelledError, asyncio.TimeoutError, ConnectionError):
                pass
            for fut in pending:
                fut.cancel()
            writer.close()
            self.connections.discard(conn)

    def _dispatch(self, frame: bytes, conn: Connection):
        """Decode one request and start its handler. Returns a future of the
        encoded response (None when no response is due), or False to close."""
        api_key, version = _KEY_VER.unpack_from(frame, 0)
        api = self.apis.get(api_key)
        if api is None:
            log.warning("closing %s: unsupported api key %d (UNSUPPORTED_VERSION)", conn.peer, api_key)
            return False
        if not api.min_version <= version <= api.max_version:
            if api_key == ApiVersionsRequest.API_KEY:
                cid, = _SIZE.unpack_from(frame, 4)
                return _done(self._api_versions_unsupported(cid))
            log.warning("closing %s: %s v%d not supported (v%d-%d), UNSUPPORTED_VERSION", conn.peer,
                        api.request.__name__, version, api.min_version, api.max_version)
            return False
        try:
            req = api.request.decode(frame, version=version, header=True)
        except Exception as e:  # any malformed body: Kafka closes the connection
            log.warning("closing %s: malformed %s v%d: %s: %s", conn.peer, api.request.__name__, version,
                        type(e).__name__, e)
            return False
        bad = _null_field(api.request.fields, req, version)
        if bad is not None:  # Kafka's parser refuses a null where the schema allows none
            log.warning("closing %s: malformed %s v%d: %s is null", conn.peer, api.request.__name__, version, bad)
            return False
        header = req.header
        if not conn.announced:
            conn.announced = True
            if self.on_client is not None:
                try:
                    self.on_client(conn, header, req)
                except Exception:
                    log.exception("client hook failed for %s", conn.peer)
        return asyncio.ensure_future(self._run(api, req, header, conn))

    async def _run(self, api: Api, req, header, conn) -> bytes | None:
        resp = await api.handler(req, header, conn)
        if resp is None:
            return None
        # The version must be set before with_header(): kafka-python derives the
        # header's (flexible or not) encoding from it.
        resp.API_VERSION = header.request_api_version
        resp.with_header(correlation_id=header.correlation_id)
        return resp.encode(header=True, framed=True)


def _null_field(fields: dict, obj, version: int) -> str | None:
    """Name of an array or string field that decoded as null (length -1 on the wire) although
    its schema does not allow null in this version; None if there is none."""
    for attr, f in fields.items():
        if not f.for_version_q(version) or f.tagged_field_q(version):
            continue
        v = getattr(obj, attr, None)
        if v is None:
            if (f.is_array() or f._type_str in ("string", "bytes")) and not f.nullable_for_version_q(version):
                return f.name
        elif f.is_struct_array():
            for item in v:
                bad = _null_field(f.fields, item, version)
                if bad is not None:
                    return f"{f.name}.{bad}"
        elif f.is_struct() and not f.is_array():
            bad = _null_field(f.fields, v, version)
            if bad is not None:
                return f"{f.name}.{bad}"
    return None


def _done(value) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
