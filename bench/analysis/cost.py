"""What a move costs in money: its bytes between brokers priced as cross-zone transfer, its
object-store requests priced by kind, with a price table from a file (default: AWS us-east-1 list
prices, `prices/aws-us-east-1.yaml`, its sources and date in the file).

Zones: see ZONES_NOTE.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.analysis.model import family_of
from bench.history.names import OBJSTORE_REQUEST_KINDS

DEFAULT_PRICES = Path(__file__).with_name("prices") / "aws-us-east-1.yaml"
GB = 1e9  # providers bill transfer per GB of 10^9 bytes
ZONES_NOTE = ("The systems here set no `broker.rack`, so every broker is priced as its own zone, the layout of a "
              "replication-factor-3 cluster spread over three zones (Kafka's rack-aware placement puts a "
              "partition's replicas in different racks): every byte a move sends between brokers crosses a zone. "
              "Bytes to and from object storage pay no transfer within one region, only their requests.")
_KEYS = {"name", "currency", "recorded", "sources", "note", "cross_zone_per_gb", "requests_per_1000"}


class PriceError(ValueError):
    """A price file that cannot be read or lacks a price; the message names the file and key."""


@dataclass(frozen=True)
class Prices:
    name: str
    currency: str
    recorded: str
    sources: tuple[str, ...]
    note: str
    cross_zone_per_gb: float
    requests_per_1000: dict[str, float]
    path: str

    def cite(self) -> str:
        return f"{self.name}, recorded {self.recorded} ({Path(self.path).name}): " + "; ".join(self.sources)


def load_prices(path: str | Path | None = None) -> Prices:
    p = Path(path) if path is not None else DEFAULT_PRICES
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as e:
        raise PriceError(f"cannot read price file {p}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise PriceError(f"price file {p} is not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise PriceError(f"price file {p}: expected a mapping of {sorted(_KEYS)}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise PriceError(f"price file {p}: unknown key(s) {unknown}; known: {sorted(_KEYS)}")
    missing = sorted(k for k in ("name", "currency", "recorded", "sources", "cross_zone_per_gb",
                                 "requests_per_1000") if raw.get(k) is None)
    if missing:
        raise PriceError(f"price file {p}: missing {missing}")
    req = raw["requests_per_1000"]
    if not isinstance(req, dict) or sorted(req) != sorted(OBJSTORE_REQUEST_KINDS):
        raise PriceError(f"price file {p}: requests_per_1000 must price exactly {list(OBJSTORE_REQUEST_KINDS)}")
    prices = {"cross_zone_per_gb": raw["cross_zone_per_gb"], **{f"requests_per_1000.{k}": v for k, v in req.items()}}
    for k, v in prices.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise PriceError(f"price file {p}: {k} must be a number >= 0, got {v!r}")
    sources = raw["sources"] if isinstance(raw["sources"], list) else [raw["sources"]]
    return Prices(str(raw["name"]), str(raw["currency"]), str(raw["recorded"]), tuple(map(str, sources)),
                  str(raw.get("note") or ""), float(raw["cross_zone_per_gb"]),
                  {k: float(v) for k, v in req.items()}, str(p))


def move_cost(prices: Prices, inter_broker_bytes: float | None, requests: dict[str, Any] | None) -> dict[str, Any]:
    """{transfer, requests, total} in the table's currency; a part whose inputs are unknown is
    None (and so is the total)."""
    transfer = None if inter_broker_bytes is None else inter_broker_bytes / GB * prices.cross_zone_per_gb
    if requests is None or any(requests.get(k) is None for k in OBJSTORE_REQUEST_KINDS):
        req = None
    else:
        req = sum(float(requests[k]) * prices.requests_per_1000[k] / 1000 for k in OBJSTORE_REQUEST_KINDS)
    return {"transfer": transfer, "requests": req,
            "total": None if transfer is None or req is None else transfer + req}


def requests_of(move: dict[str, Any]) -> dict[str, Any] | None:
    """A moves-table row's request counts by kind, or None where the run journaled none."""
    out = {k: move.get(f"objstore_{k}_requests") for k in OBJSTORE_REQUEST_KINDS}
    return None if all(v is None for v in out.values()) else out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def cost_by_config(prices: Prices, moves: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per configuration: its single-partition measured moves' median bytes, requests and cost."""
    by: dict[str, list[dict[str, Any]]] = {}
    for m in moves:
        if m.get("move_seconds") is None or m.get("partitions_in_action") not in (1, None):
            continue
        if m.get("bytes_moved_inter_broker") is None or requests_of(m) is None:
            continue
        by.setdefault(m["config_key"], []).append(m)
    out = {}
    for key, ms in by.items():
        costs = [move_cost(prices, m["bytes_moved_inter_broker"], requests_of(m)) for m in ms]
        out[key] = {
            "moves": len(ms), "system": ms[0]["system"],
            "inter_broker_bytes": _median([float(m["bytes_moved_inter_broker"]) for m in ms]),
            "objstore_bytes": _median([float(m.get("bytes_moved_objstore") or 0) for m in ms]),
            "requests": {k: _median([float(requests_of(m)[k]) for m in ms]) for k in OBJSTORE_REQUEST_KINDS},
            # each move's (bytes to/from object storage, requests): a close's PUTs grow with the tail it uploads
            "points": [(float(m.get("bytes_moved_objstore") or 0), requests_of(m)) for m in ms],
            "transfer": _median([c["transfer"] for c in costs]),
            "requests_cost": _median([c["requests"] for c in costs]),
            "total": _median([c["total"] for c in costs]),
            "total_max": max(c["total"] for c in costs),
        }
    return out


def requests_at(points: list[tuple[float, dict[str, Any]]], tail: float) -> tuple[dict[str, float], str] | None:
    """Each request kind per move for a move uploading ``tail`` bytes, where the measured moves show
    a kind growing with the bytes they sent to object storage (a close uploads its tail in parts, one
    PUT each): the line a + b x bytes fitted on them, its slope two standard errors from 0; the
    other kinds at their median. With what it rests on in words; None where no kind grows."""
    x = np.array([b for b, _ in points], dtype=float)
    if len(x) < 3 or np.ptp(x) <= 0:
        return None
    out: dict[str, float] = {}
    grows = []
    for k in OBJSTORE_REQUEST_KINDS:
        y = np.array([float(r[k]) for _, r in points])
        b, a = np.polyfit(x, y, 1)
        res = y - (a + b * x)
        se = math.sqrt(float(res @ res) / (len(x) - 2) / float(((x - x.mean()) ** 2).sum()))
        if b > 2 * se:
            out[k] = float(max(0.0, a + b * tail))
            grows.append(f"{k.upper()} {a:.2g} + 1 per {1 / b / 1e6:.3g} MB")
        else:
            out[k] = float(np.median(y))
    if not grows:
        return None
    beyond = tail / float(x.max())
    return out, (f"{', '.join(grows)} to object storage (fitted on {len(x)} moves up to {x.max() / 1e6:.3g} MB); "
                 f"the case's tail {tail / 1e6:,.0f} MB" + (f": {beyond:.3g}x beyond them" if beyond > 1 else ""))


def headline_costs(prices: Prices, headline: list[dict[str, Any]], measured: dict[str, dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """The headline cases priced. A family that copies (replication, tiered) sends the case's
    projected bytes between brokers, known only where its time is validated; a family that opens
    objects (shared) sends none, and its requests per move are the measured median of that system's
    moves (an open makes a fixed few whatever the partition's size: its objects are referenced, not
    copied), except a kind that grows with the tail the close uploads (PUTs, one per upload part):
    that one at the case's tail (:func:`requests_at`, saying how far beyond the measured tails);
    times the case's moves. A case the network cannot carry has no cost."""
    per_system: dict[str, list[dict[str, Any]]] = {}
    for c in measured.values():
        per_system.setdefault(c["system"], []).append(c)
    out = []
    for h in headline:
        ms = per_system.get(h["system"])
        fam = family_of(h["system"])
        copies = fam is None or not fam.opens_objects
        per_move = ({k: statistics.median([c["requests"][k] for c in ms]) for k in OBJSTORE_REQUEST_KINDS}
                    if ms else None)
        tail = ((h.get("validity") or {}).get("tail") or {}).get("projected")
        basis = None
        if per_move is not None and not copies and tail is not None:
            fitted = requests_at([pt for c in ms for pt in c.get("points", ())], float(tail))
            if fitted is not None:
                per_move, basis = fitted
        n = h.get("moves")
        reqs = {k: v * n for k, v in per_move.items()} if per_move is not None and n else None
        ib = h.get("bytes_moved") if copies else 0.0
        why = None
        if h.get("status") == "infeasible":
            why = "the network cannot carry this case"
        elif per_move is None:
            why = "no measured move of this system journaled its requests"
        elif not n:
            why = "the case's moves are not simulated"
        elif ib is None:
            why = "its bytes between brokers follow its time, which is not validated"
        row = {"case": h.get("case"), "system": h["system"], "link_gbit_s": h.get("link_gbit_s"),
               "status": h.get("status"), "moves": n, "inter_broker_bytes": ib, "requests": reqs,
               "requests_basis": basis,
               "basis_moves": sum(c["moves"] for c in ms) if ms else 0, "why": why}
        c = move_cost(prices, ib, reqs) if why is None else {"transfer": None, "requests": None, "total": None}
        row.update(transfer=c["transfer"], requests_cost=c["requests"], total=c["total"])
        out.append(row)
    return out
