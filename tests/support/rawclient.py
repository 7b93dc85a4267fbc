"""A bare Kafka protocol connection for tests that must send what real clients won't."""
from __future__ import annotations

import socket
import struct

from kafka.record.default_records import DefaultRecordBatchBuilder


class RawConn:
    def __init__(self, host: str, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.cid = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes | None:
        """One response frame, or None if the broker closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        n, = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def request(self, req, response_cls):
        self.cid += 1
        req.with_header(correlation_id=self.cid, client_id="raw-test")
        self.send_raw(bytes(req.encode(header=True, framed=True)))
        frame = self.recv_frame()
        if frame is None:
            return None
        # Response header: correlation id, then (flexible versions) a tag buffer.
        assert struct.unpack_from(">i", frame)[0] == self.cid
        flexible = response_cls.flexible_version_q(req.API_VERSION) and response_cls.API_KEY != 18
        return response_cls.decode(frame[5:] if flexible else frame[4:], version=req.API_VERSION)

    def closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closed this connection (EOF) within timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


def batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, base_sequence: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
    return bytes(b.build())
