"""The controller's durable, append-only metadata log.

One JSON record per line, prefixed by its CRC32C: `crc<TAB>{"offset":..,"record":..}`.
Appends are fsynced before the controller answers, so an acknowledged change
survives kill -9; on open, a torn or corrupt tail is cut off.
"""
from __future__ import annotations

import json
import logging
import os

import crc32c

log = logging.getLogger(__name__)


class MetadataLog:
    def __init__(self, path: str):
        self.path = path
        self.records: list[dict] = []
        good = 0
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            pos = 0
            while pos < len(data):
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                line = data[pos:nl]
                try:
                    crc_hex, body = line.split(b"\t", 1)
                    if int(crc_hex, 16) != crc32c.crc32c(body):
                        raise ValueError("crc")
                    entry = json.loads(body)
                    if entry["offset"] != len(self.records):
                        raise ValueError("offset gap")
                except ValueError:
                    log.warning("metadata log %s: bad record at byte %d, truncating", path, pos)
                    break
                self.records.append(entry["record"])
                pos = nl + 1
                good = pos
            if good < len(data):
                with open(path, "r+b") as f:
                    f.truncate(good)
        self._f = open(path, "ab")

    @property
    def end_offset(self) -> int:
        """Offset the next record will get."""
        return len(self.records)

    def append(self, recs: list[dict]) -> int:
        """Durably append records; returns the offset of the last one."""
        out = bytearray()
        for r in recs:
            body = json.dumps({"offset": len(self.records), "record": r}, separators=(",", ":")).encode()
            out += b"%08x\t" % crc32c.crc32c(body) + body + b"\n"
            self.records.append(r)
        self._f.write(out)
        self._f.flush()
        os.fsync(self._f.fileno())
        return len(self.records) - 1

    def close(self) -> None:
        self._f.close()
