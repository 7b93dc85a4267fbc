"""Controller <-> broker RPC: length-prefixed JSON frames over TCP.

Kafka's own broker-to-controller APIs (BrokerRegistration, BrokerHeartbeat,
metadata fetch over Raft) have no schemas in kafka-python, and this channel is
internal, so it is a small request/response protocol with multiplexed ids.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import struct

log = logging.getLogger(__name__)
MAX_FRAME = 64 << 20
_LEN = struct.Struct(">i")


class RpcError(Exception):
    """The remote side answered with an error."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class RpcUnavailable(Exception):
    """The remote side could not be reached."""


async def _read_frame(reader: asyncio.StreamReader):
    n, = _LEN.unpack(await reader.readexactly(4))
    if n < 0 or n > MAX_FRAME:
        raise ValueError(f"bad rpc frame size {n}")
    return json.loads(await reader.readexactly(n))


def _frame(obj) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return _LEN.pack(len(data)) + data


class RpcServer:
    def __init__(self, handlers: dict):
        self.handlers = handlers
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int):
        self.server = await asyncio.start_server(self._conn, host, port)
        return self.server.sockets[0].getsockname()[1]

    async def _conn(self, reader, writer):
        lock = asyncio.Lock()

        async def run(msg):
            try:
                fn = self.handlers[msg["method"]]
                result = await fn(**(msg.get("params") or {}))
                out = {"id": msg["id"], "result": result}
            except RpcError as e:
                out = {"id": msg["id"], "error": str(e), "code": e.code}
            except Exception as e:  # an internal bug must not kill the server
                log.exception("rpc %s failed", msg.get("method"))
                out = {"id": msg.get("id"), "error": f"{type(e).__name__}: {e}"}
            async with lock:
                writer.write(_frame(out))
                await writer.drain()

        tasks = set()
        try:
            while True:
                msg = await _read_frame(reader)
                t = asyncio.create_task(run(msg))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            writer.close()

    async def stop(self):
        if self.server:
            self.server.close()


class RpcClient:
    """A reconnecting client; calls fail with RpcUnavailable while the peer is down."""

    def __init__(self, host: str, port: int, connect_timeout: float = 2.0):
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._writer = None
        self._reader_task = None
        self._connect_lock = asyncio.Lock()

    async def _ensure(self):
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), self.connect_timeout)
            except (OSError, asyncio.TimeoutError) as e:
                raise RpcUnavailable(f"controller {self.host}:{self.port} unreachable: {e}") from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer))

    async def _read_loop(self, reader, writer):
        try:
            while True:
                msg = await _read_frame(reader)
                fut = self._pending.pop(msg.get("id"), None)
                if fut and not fut.done():
                    if "error" in msg:
                        fut.set_exception(RpcError(msg["error"], msg.get("code")))
                    else:
                        fut.set_result(msg.get("result"))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            for fut in list(self._pending.values()):
                if not fut.done():
                    fut.set_exception(RpcUnavailable("connection to controller lost"))
            self._pending.clear()

    async def call(self, method: str, timeout: float = 10.0, **params):
        await self._ensure()
        mid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[mid] = fut
        self._writer.write(_frame({"id": mid, "method": method, "params": params}))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self._pending.pop(mid, None)
            raise RpcUnavailable(f"controller call {method} timed out after {timeout}s") from None

    async def close(self):
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()


def call_sync(host: str, port: int, method: str, timeout: float = 5.0, **params):
    """One blocking RPC call (for the launcher and tools outside asyncio)."""
    import socket

    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(_frame({"id": 1, "method": method, "params": params}))
        buf = b""
        while len(buf) < 4:
            chunk = s.recv(4 - len(buf))
            if not chunk:
                raise RpcUnavailable(f"{host}:{port} closed the connection")
            buf += chunk
        n, = _LEN.unpack(buf)
        body = bytearray()
        while len(body) < n:
            chunk = s.recv(min(1 << 20, n - len(body)))
            if not chunk:
                raise RpcUnavailable(f"{host}:{port} closed the connection")
            body += chunk
    msg = json.loads(body)
    if "error" in msg:
        raise RpcError(msg["error"], msg.get("code"))
    return msg["result"]
