"""Link budgets: what a broker's link already carries before a move starts, and what is left for it.

A move's bytes leave one broker (the copy's leader, the handover's old owner) over the same link its
steady work uses. Each family lists that steady traffic (:meth:`MoveFamily.steady_terms`: copy and
tiered copy: replication to the followers and the consumers' reads, a tiered leader's uploads too;
handover: the WAL writes and the uploads to object storage and the consumers' reads), derived from
the partition's ingest, its replication factor and its consumer groups. The move gets what is left
of the link, or its throttle when that is lower. A case whose steady traffic alone fills the link
is ``infeasible``: it gets the arithmetic, never a time.

One direction of a full-duplex link: the sender's egress (what every term above is), in payload
bytes: a link carries ``WIRE_PAYLOAD_SHARE`` of its rate as TCP payload (a throttle counts payload).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def mb(x: float) -> str:
    """``125 MB/s``, ``0.819 MB/s``, ``2,825 MB/s``."""
    v = x / 1e6
    return f"{v:,.0f} MB/s" if abs(v) >= 100 else f"{v:.3g} MB/s"


# The share of a link's rate one TCP flow carries as payload: on an Ethernet NIC with a 1500-byte
# MTU and TCP timestamps (Linux's default) each 1514-byte frame carries 1448 bytes (95.6 %); on
# this harness's tbf links (GSO packets, one header per 64 KiB) TCP's sawtooth against the 20 ms
# queue does the same: a 100mbit tbf gave 12.0 of 12.5 MB/s (96 %).
WIRE_PAYLOAD_SHARE = 1448 / 1514


@dataclass(frozen=True)
class LinkBudget:
    """The sending broker's link in one direction and the steady traffic on it."""

    link_bytes_per_s: float | None  # None: no emulated link (loopback): no budget
    terms: tuple[tuple[str, float], ...] = field(default_factory=tuple)  # (what, bytes/s)

    @property
    def steady(self) -> float:
        return float(sum(v for _, v in self.terms))

    @property
    def payload(self) -> float:
        """The link's rate in TCP payload bytes/s (inf without a link)."""
        return math.inf if self.link_bytes_per_s is None else self.link_bytes_per_s * WIRE_PAYLOAD_SHARE

    @property
    def left(self) -> float:
        """What a move may use of the link (inf without a link)."""
        return self.payload - self.steady

    @property
    def infeasible(self) -> bool:
        return self.link_bytes_per_s is not None and self.steady >= self.payload

    def cap(self, throttle_bytes_per_s: float | None) -> float:
        """The move's cap: its throttle, or what the steady traffic leaves of the link when lower."""
        t = math.inf if not throttle_bytes_per_s else float(throttle_bytes_per_s)
        return min(t, self.left)

    def binds(self, throttle_bytes_per_s: float | None) -> bool:
        """Whether the link's rest, not the throttle, caps the move."""
        return self.link_bytes_per_s is not None and self.left < (throttle_bytes_per_s or math.inf)

    def arithmetic(self) -> str:
        """``replication to 2 followers 200 MB/s + ... = 300 MB/s >= the 125 MB/s link``."""
        parts = " + ".join(f"{what} {mb(v)}" for what, v in self.terms if v > 0) or "nothing"
        if self.link_bytes_per_s is None:
            return f"steady egress: {parts}; no emulated link"
        op = ">=" if self.infeasible else "<"
        tail = ("" if self.infeasible else f"; {mb(self.left)} left for the move")
        return (f"the sender's steady egress {parts} = {mb(self.steady)} {op} its {mb(self.link_bytes_per_s)} "
                f"link ({mb(self.payload)} of TCP payload){tail}")


__all__ = ["WIRE_PAYLOAD_SHARE", "LinkBudget", "mb"]
