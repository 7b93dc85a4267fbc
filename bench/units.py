"""Byte sizes, read and written the same way everywhere: scenario files and overrides
(``parse_bytes``), run summaries, tables and figures (``format_bytes``); link rates; and the one
number format of tables and labels (``fmt_num``)."""
from __future__ import annotations

import math
import re
from fractions import Fraction
from numbers import Real
from typing import Any

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_DECIMAL = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
MISSING = "–"  # what the report tables show for an absent value


def parse_bytes(value: Any) -> Any:
    """``4096``, ``"4KiB"``, ``"1.5 GiB"``, ``"100MB"`` -> int bytes. Binary (KiB) and decimal (KB)
    units are both accepted and mean what they say; bare ``k``/``m`` are rejected as ambiguous."""
    if isinstance(value, bool):
        raise ValueError("must be a byte size like 4096 or '64MiB'")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"must be a whole number of bytes, got {value}")
        return int(value)
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m and m.group(2).lower() in _UNITS:
            n = Fraction(m.group(1)) * _UNITS[m.group(2).lower()]  # exact: "8.2TB" is 8.2e12 bytes
            if n.denominator != 1:
                raise ValueError(f"must be a whole number of bytes, got {value!r}")
            return int(n)
        raise ValueError(f"must be a byte size like 4096 or '64MiB', got {value!r}")
    return value  # let the int validator produce its usual type error


def _exact(n: float, units: tuple[tuple[str, int], ...]) -> str | None:
    """``n`` in the largest unit it reaches, if that takes at most one decimal (1.5 GiB, 8.2 TB)."""
    for unit, mult in units:
        if abs(n) >= mult:
            tenths = n * 10 / mult
            return f"{tenths / 10:g} {unit}" if tenths == round(tenths) else None
    return None


def format_bytes(n: Any, *, exact: bool = False) -> str:
    """A byte count for people: ``64 MiB``, ``1.5 GiB``, ``8.2 TB``, ``1000 B``.

    A value that is round in binary or in decimal units is written exactly in that unit (so it
    reads back with :func:`parse_bytes` as the same number: scenario values look as they were
    written); any other value is rounded to one decimal in binary units (``37.8 MiB``), or, with
    ``exact=True`` (keys that group runs must not merge two sizes), in the largest binary unit
    that divides it (``1280 MiB``), else in bytes."""
    if isinstance(n, bool) or not isinstance(n, Real) or not math.isfinite(n):  # Real: numpy scalars too
        return MISSING
    if abs(n) < 1024:
        return f"{n:.0f} B"
    found = _exact(n, _BINARY) or _exact(n, _DECIMAL)
    if found:
        return found
    if exact:  # whole units, else bytes
        unit, mult = next(((u, m) for u, m in _BINARY if n % m == 0), ("B", 1))
        return f"{n / mult:.0f} {unit}"
    unit, mult = next((u, m) for u, m in _BINARY if abs(n) >= m)
    return f"{n / mult:.1f} {unit}"


# Link rates, in tc's syntax (bench/run/network.py shapes links with them).
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
          "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12}
MIN_RATE_BITS = 1e6  # below this one tbf burst (>= 64 KiB, bench/run/network.py) lasts half a second


def rate_bits(rate: str) -> float:
    """tc's rate syntax ("100mbit", "1gbit", "50mbps") -> bits per second; ValueError if not."""
    m = _RATE.match(str(rate).strip())
    if not m:
        raise ValueError(f"link rate {rate!r} is not a tc rate such as 100mbit, 1gbit or 50mbps")
    bits = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    if bits < MIN_RATE_BITS:
        raise ValueError(f"link rate {rate!r} is below 1mbit")
    return bits



FMT_MAX_DECIMALS = 4  # below 0.0001 a table shows 0: no figure here is meaningful at that scale


def fmt_num(x: Any) -> str:
    """The one number format of summary.md and the report: 3 significant digits in plain
    notation, whole from 1000 up (1160, never 1.16e+03), at most 4 decimals (never 3.14e-16)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return MISSING
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return str(x)
    if x == 0 or abs(x) >= 1000:
        return f"{x:.0f}"
    decimals = min(FMT_MAX_DECIMALS, max(0, 2 - math.floor(math.log10(abs(x)))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


__all__ = ["MISSING", "fmt_num", "format_bytes", "parse_bytes", "rate_bits"]
