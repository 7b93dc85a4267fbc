"""An asyncio Kafka protocol client connection (broker-to-broker: replica fetch).

Requests and responses are kafka-python's schema classes; the connection
pipelines requests and matches responses by correlation id.
"""
from __future__ import annotations

import asyncio
import io
import itertools
import struct

from kafka.protocol.api_header import ResponseHeader

_SIZE = struct.Struct(">i")


class ConnectionClosed(Exception):
    pass


class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str):
        self.host, self.port, self.client_id = host, port, client_id
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future, type, int]] = {}
        self._reader = self._writer = None
        self._task = None

    async def connect(self, timeout: float = 5.0) -> None:
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=1 << 20), timeout)
        self._task = asyncio.create_task(self._read_loop())

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _read_loop(self) -> None:
        try:
            while True:
                n, = _SIZE.unpack(await self._reader.readexactly(4))
                frame = await self._reader.readexactly(n)
                cid, = _SIZE.unpack_from(frame, 0)
                entry = self._pending.pop(cid, None)
                if entry is None:
                    continue
                fut, resp_cls, version = entry
                try:
                    flexible = resp_cls.flexible_version_q(version) and resp_cls.API_KEY != 18
                    if flexible:
                        hdr = io.BytesIO(bytes(frame[:256]))
                        ResponseHeader.decode(hdr, flexible=True)
                        pos = hdr.tell()
                    else:
                        pos = 4
                    resp = resp_cls.decode(memoryview(frame)[pos:], version=version)
                    if not fut.done():
                        fut.set_result(resp)
                except Exception as e:  # a response we cannot decode: fail that call only
                    if not fut.done():
                        fut.set_exception(e)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self._fail_all()

    def _fail_all(self) -> None:
        for fut, _, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed(f"connection to {self.host}:{self.port} closed"))
        self._pending.clear()
        if self._writer is not None:
            self._writer.close()

    async def request(self, req, response_cls, timeout: float = 30.0):
        if not self.connected:
            raise ConnectionClosed(f"not connected to {self.host}:{self.port}")
        cid = next(self._ids)
        req.with_header(correlation_id=cid, client_id=self.client_id)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, response_cls, req.API_VERSION)
        self._writer.write(req.encode(header=True, framed=True))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(cid, None)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()
