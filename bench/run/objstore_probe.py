"""Probe a cluster's object store as its nodes reach it: small PUT and GET round trips with the
systems' own client (the minio SDK, systems/shared/objstore.py), timed at the client, through
the endpoint the nodes are given (the latency proxy's, if any) and directly to the store.

With an emulated latency (network.object_store_latency) two figures are compared with the
setting's p50:
- `rtt_error`: the round trip's p50 through the nodes' endpoint, as the client measures it. It
  holds the latency (the store's own time overlaps it) plus the client's own time per request
  (the SDK signs, sends and parses: 1-3 ms on a busy 2-core host), which no server can take back;
- `added_error`: what the proxy adds, p50 through it less p50 straight to the store from the same
  client (the client's own time cancels; the store's own time overlaps the latency, so it reads
  low by that time: 1-5 ms for a small PUT on a busy 2-core host).
`within_tolerance`, when both paths were measured, is judged on what the proxy's rule allows: the
round trip through it is at least the latency (the first byte is held that long) and at most the
latency plus the direct round trip (the store's own time overlaps the latency), each bound widened by TOLERANCE of the setting. With one path only, on `rtt_error`.
`python -m bench objstore-probe --dir CLUSTER_DIR` prints them.
"""
from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from typing import Any

from bench.run.cluster import Cluster, ClusterError

TOLERANCE = 0.10  # p50 within 10 % of the setting


def percentiles(xs: list[float]) -> dict[str, float]:
    """p50/p90/p99 and mean of `xs` (seconds) in milliseconds (nearest-rank percentiles)."""
    s = sorted(xs)

    def rank(p: float) -> float:
        return s[min(len(s) - 1, max(0, int(round(p * len(s) + 0.5)) - 1))]

    return {"n": len(s), "p50_ms": round(statistics.median(s) * 1000, 3), "p90_ms": round(rank(0.9) * 1000, 3),
            "p99_ms": round(rank(0.99) * 1000, 3), "mean_ms": round(statistics.fmean(s) * 1000, 3)}


def round_trips(endpoints: dict[str, str], config: dict[str, Any], requests: int,
                size: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per endpoint (name -> host:port): `requests` PUTs of `size` bytes then as many GETs, one
    at a time on one kept-alive connection per endpoint, each timed around the SDK call. The
    endpoints take turns request by request, so a change of the host's load meets them alike.
    The objects are deleted afterwards. -> name -> {"put": percentiles, "get": percentiles}."""
    from systems.shared.objstore import ObjectStore
    from systems.shared.settings import s3_config

    # the systems' bandwidth caps are theirs: the probe measures the path, uncapped
    caps = ("s3.bandwidth.bytes.per.s", "s3.upload.bytes.per.s", "s3.download.bytes.per.s")
    base = {k: v for k, v in config.items() if k not in caps}
    prefix = f"objstore-probe/{uuid.uuid4().hex}"
    body = os.urandom(size)
    stores = {name: ObjectStore(s3_config({**base, "s3.endpoint": ep})) for name, ep in endpoints.items()}
    times: dict[str, dict[str, list[float]]] = {name: {"put": [], "get": []} for name in stores}
    try:
        for name, st in stores.items():
            st.put(f"{prefix}/{name}/warm", body)  # the connection is open before anything is timed
            st.get(f"{prefix}/{name}/warm")
        for op in ("put", "get"):
            for i in range(requests):
                for name, st in stores.items():
                    k = f"{prefix}/{name}/{i:06d}"
                    t0 = time.perf_counter()
                    if op == "put":
                        st.put(k, body)
                    else:
                        got = st.get(k)
                    times[name][op].append(time.perf_counter() - t0)
                    if op == "get" and len(got) != size:
                        raise ClusterError(f"GET {k} returned {len(got)} bytes, {size} were PUT")
        for name, st in stores.items():
            st.delete_many([f"{prefix}/{name}/warm", *(f"{prefix}/{name}/{i:06d}" for i in range(requests))])
    finally:
        for st in stores.values():
            st.close()
    return {name: {op: percentiles(xs) for op, xs in t.items()} for name, t in times.items()}


def probe_requests(requests: int) -> int:
    """HTTP requests round_trips makes: the timed PUTs and GETs, the warm-up PUT and GET, and
    DeleteObjects calls of up to 1,000 keys each."""
    return 2 * requests + 2 + -(-(requests + 1) // 1000)


def proxy_stats(c: Cluster) -> dict[str, Any]:
    try:
        with open(c.proxy_stats_file) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def probe(cluster_dir: str, requests: int = 100, size: int = 1024, direct: bool = True) -> dict[str, Any]:
    """Round trips through the nodes' endpoint (and directly to the store, with `direct`);
    the verdict against the cluster's latency setting."""
    c = Cluster.load(cluster_dir)
    if c.profile.object_store is None:
        raise ClusterError(f"system {c.system!r} has no object store")
    if not c.object_store_running() and c.object_store is not None:
        raise ClusterError(f"the object store of {cluster_dir} is not running")
    nodes_ep = c.config.get("s3.endpoint")
    store_ep = c.object_store_info.get("endpoint") or nodes_ep
    lat = c.object_store_latency
    out: dict[str, Any] = {"cluster": c.dir, "requests": requests, "bytes": size,
                           "latency": lat.text if lat else "0ms",
                           "setting_p50_ms": round(lat.median_s * 1000, 3) if lat else 0.0,
                           "nodes_endpoint": nodes_ep, "store_endpoint": store_ep,
                           "proxy_pid": c.object_store_proxy.pid if c.object_store_proxy else None}
    before = proxy_stats(c).get("exchanges", 0)
    endpoints = {"nodes": nodes_ep}
    if direct and store_ep != nodes_ep:
        endpoints["direct"] = store_ep
    out.update(round_trips(endpoints, c.config, requests, size))
    if c.object_store_proxy is not None:
        time.sleep(1.2)  # the proxy rewrites its counters every second
        # one exchange per request if the proxy tells exchanges apart as the client makes them
        out["proxy_exchanges"] = proxy_stats(c).get("exchanges", 0) - before
        out["probe_requests"] = probe_requests(requests)
    if lat is not None:
        want = lat.median_s * 1000
        out["rtt_error"] = {op: round(out["nodes"][op]["p50_ms"] / want - 1, 4) for op in ("put", "get")}
        if "direct" in out:
            out["added_p50_ms"] = {op: round(out["nodes"][op]["p50_ms"] - out["direct"][op]["p50_ms"], 3)
                                   for op in ("put", "get")}
            out["added_error"] = {op: round(v / want - 1, 4) for op, v in out["added_p50_ms"].items()}
            slack = TOLERANCE * want
            out["allowed_p50_ms"] = {op: [round(want - slack, 3),
                                          round(want + out["direct"][op]["p50_ms"] + slack, 3)]
                                     for op in ("put", "get")}
            out["within_tolerance"] = all(lo <= out["nodes"][op]["p50_ms"] <= hi
                                          for op, (lo, hi) in out["allowed_p50_ms"].items())
        else:
            out["within_tolerance"] = all(abs(e) <= TOLERANCE for e in out["rtt_error"].values())
    return out


def render(res: dict[str, Any]) -> str:
    lines = [f"object store {res['store_endpoint']}; nodes use {res['nodes_endpoint']}"
             + (f" (latency proxy, pid {res['proxy_pid']}, {res['latency']} to first byte)" if res["proxy_pid"]
                else " (no latency emulated)"),
             f"{res['requests']} PUTs then {res['requests']} GETs of {res['bytes']} B, one at a time, timed at "
             f"the client (minio SDK):",
             f"  {'':14} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}"]
    for path in ("nodes", "direct"):
        for op in ("put", "get"):
            r = (res.get(path) or {}).get(op)
            if r:
                name = f"{op.upper()} {'via proxy' if path == 'nodes' and res['proxy_pid'] else path}"
                cells = " ".join(f"{r[k]:8.2f}" for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms"))
                lines.append(f"  {name:14} {cells}")
    if "proxy_exchanges" in res:
        lines.append(f"the proxy counted {res['proxy_exchanges']} exchanges for the probe's "
                     f"{res['probe_requests']} requests")
    if "rtt_error" in res:
        want = res["setting_p50_ms"]
        err = ", ".join(f"{op.upper()} {e:+.1%}" for op, e in res["rtt_error"].items())
        lines.append(f"round trip p50 vs the setting's p50 ({want:g} ms): {err} (the client's own time included)")
        if "added_error" in res:
            err = ", ".join(f"{op.upper()} {res['added_p50_ms'][op]:.2f} ms ({e:+.1%})"
                            for op, e in res["added_error"].items())
            lines.append(f"added by the proxy at p50 (via proxy - direct; the store's own time overlaps it): {err}")
            allowed = ", ".join(f"{op.upper()} {lo:.1f}-{hi:.1f} ms" for op, (lo, hi) in res["allowed_p50_ms"].items())
            lines.append(f"-> p50 via proxy {'within' if res['within_tolerance'] else 'NOT within'} what the rule "
                         f"allows (latency .. latency + direct, +-{TOLERANCE:.0%} of the setting): {allowed}")
        else:
            lines.append(f"-> {'within' if res['within_tolerance'] else 'NOT within'} {TOLERANCE:.0%} of the setting")
    return "\n".join(lines)
