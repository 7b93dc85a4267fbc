"""bench/units.py: the one byte-size reader and writer."""
from __future__ import annotations

import numpy as np
import pytest

from bench.units import MISSING, format_bytes, parse_bytes


def test_parse_bytes():
    assert parse_bytes("256MiB") == 256 * 2**20
    assert parse_bytes("1.5 GiB") == 3 * 2**29
    assert parse_bytes("100MB") == 100_000_000
    assert parse_bytes(4096) == 4096
    for bad in ("12 parsecs", "4k", "0.5B", True):
        with pytest.raises(ValueError):
            parse_bytes(bad)


def test_format_bytes_is_exact_when_round_and_one_decimal_otherwise():
    assert format_bytes(64 * 2**20) == "64 MiB" and format_bytes(1000) == "1000 B"
    assert format_bytes(3 * 2**29) == "1.5 GiB" and format_bytes(8.2e12) == "8.2 TB"
    assert format_bytes(125_000_000) == "125 MB"
    assert format_bytes(39_636_172) == "37.8 MiB"
    assert format_bytes(2**20 + 1) == "1.0 MiB"
    assert format_bytes(None) == format_bytes(float("nan")) == MISSING
    assert format_bytes(np.int64(10**7)) == "10 MB"  # matplotlib hands tick values over as numpy scalars


def test_round_values_read_back_and_exact_mode_never_rounds():
    for n in (4096, 64 * 2**20, 3 * 2**29, 100_000_000, 8_200_000_000_000):
        assert parse_bytes(format_bytes(n)) == n
    assert format_bytes(39_636_172, exact=True) == "39636172 B"
    assert format_bytes(5 * 2**28, exact=True) == "1280 MiB"  # 1.25 GiB: not one decimal
    assert format_bytes(2**20 + 1, exact=True) != format_bytes(2**20, exact=True)
