"""What the object-store latency proxy (bench/run/objstore_proxy.py) costs, on loopback:

- its throughput ceiling: MB/s one connection carries through it (a raw TCP stream into a sink,
  the proxy's own limit) and large PUTs with the systems' S3 client (4 at once, 64 MiB each, into
  the embedded SeaweedFS) through it and straight to the store;
- its CPU: seconds per GB forwarded and per 1,000 small requests (1 KiB PUTs and GETs, 8 clients
  at once, 20 ms latency), from psutil on its pid.

Rounds are measured durations (tests/benchmarks/runs.py CLOCK): seconds per GB through the proxy
(ceiling) and CPU seconds per 1,000 requests; every figure lands in extra_info and is printed
(docs/measurements/objstore-latency.md). `pytest tests/benchmarks/test_objstore_latency_bench.py
--benchmark-only -s`.
"""
from __future__ import annotations

import os
import socket
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from bench.run.cluster import Cluster
from systems.core import process
from tests.benchmarks.runs import CLOCK, MiB
from tests.conftest import ROOT

ROUNDS = 5


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


class _Proxy:
    """The proxy as its own process (as the cluster runs it), stopped by PID."""

    def __init__(self, tmp, upstream: str, latency: str = "20ms"):
        self.port_file = str(tmp / f"proxy-{uuid.uuid4().hex[:6]}.port")
        self.pid, self.port = process.spawn_module(
            ["bench.run.objstore_proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, "--latency", latency,
             "--port-file", self.port_file],
            log_path=str(tmp / "proxy.log"), cwd=ROOT, port_file=self.port_file, timeout=20, name="proxy")

    def stop(self) -> None:
        process.stop(self.pid, self.port_file, 5)


def _sink() -> tuple[socket.socket, list[int]]:
    """A TCP server that reads everything a connection sends, then answers b"ok" and closes."""
    srv = socket.create_server(("127.0.0.1", 0))
    got = [0]

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            buf = bytearray(4 * MiB)
            with conn:
                while True:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    got[0] += n
                conn.sendall(b"ok")

    threading.Thread(target=serve, daemon=True).start()
    return srv, got


def _stream(port: int, nbytes: int) -> float:
    """Send nbytes on one connection, half-close, wait for the answer; -> seconds."""
    chunk = os.urandom(4 * MiB)
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        while sent < nbytes:
            s.sendall(chunk)
            sent += len(chunk)
        s.shutdown(socket.SHUT_WR)
        assert s.recv(16) == b"ok"
    return time.perf_counter() - t0


def _machine() -> dict:
    return {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}


@pytest.mark.benchmark(timer=CLOCK)
def test_proxy_throughput_ceiling(benchmark, tmp_path):
    srv, got = _sink()
    proxy = _Proxy(tmp_path, f"127.0.0.1:{srv.getsockname()[1]}")
    size = 1024 * MiB
    try:
        _stream(proxy.port, 64 * MiB)  # warm
        raw, direct, cpu_per_gb = [], [], []
        for _ in range(ROUNDS):
            c0 = _cpu(proxy.pid)
            s = _stream(proxy.port, size)
            cpu_per_gb.append((_cpu(proxy.pid) - c0) / (size / 1e9))
            raw.append(s)
            direct.append(_stream(srv.getsockname()[1], size))
    finally:
        proxy.stop()
        srv.close()
    mb_s = [size / s / 1e6 for s in raw]
    direct_mb_s = [size / s / 1e6 for s in direct]

    # large PUTs with the systems' S3 client, 4 at once, through the proxy and straight to the store
    d = str(tmp_path / "store")
    c = Cluster("shared", 1, d, {}, object_store_latency="20ms")
    os.makedirs(os.path.join(d, "run"))
    put_via, put_direct, put_cpu_per_gb = [], [], []
    try:
        c.start_object_store(timeout=60)
        from systems.shared.objstore import ObjectStore
        from systems.shared.settings import s3_config

        body = os.urandom(64 * MiB)
        via = ObjectStore(s3_config(c.config))
        direct_st = ObjectStore(s3_config({**c.config, "s3.endpoint": c.object_store_info["endpoint"]}))
        try:
            with ThreadPoolExecutor(4) as pool:
                for r in range(ROUNDS):  # through the proxy, then straight to the store, round after round
                    for st, out in ((via, put_via), (direct_st, put_direct)):
                        c0 = _cpu(c.object_store_proxy.pid)
                        t0 = time.perf_counter()
                        list(pool.map(lambda i: st.put(f"bench/{r}-{i}", body), range(4)))
                        out.append(4 * len(body) / (time.perf_counter() - t0) / 1e6)
                        if out is put_via:
                            put_cpu_per_gb.append((_cpu(c.object_store_proxy.pid) - c0) / (4 * len(body) / 1e9))
                        st.delete_many([f"bench/{r}-{i}" for i in range(4)])
        finally:
            via.close()
            direct_st.close()
    finally:
        c.stop()

    CLOCK.rounds(benchmark, [s / (size / 1e9) for s in raw])  # seconds per GB through the proxy
    info = {"stream_mb_per_s": [round(x) for x in mb_s], "stream_direct_mb_per_s": [round(x) for x in direct_mb_s],
            "stream_cpu_s_per_gb": [round(x, 3) for x in cpu_per_gb],
            "put_4x64MiB_via_proxy_mb_per_s": [round(x) for x in put_via],
            "put_4x64MiB_direct_mb_per_s": [round(x) for x in put_direct],
            "put_cpu_s_per_gb": [round(x, 3) for x in put_cpu_per_gb], **_machine()}
    benchmark.extra_info.update(info)
    med = {k: statistics.median(v) for k, v in info.items() if isinstance(v, list)}
    print(f"\nproxy ceiling, medians of {ROUNDS} rounds: {med} (machine {_machine()})")
    assert med["stream_mb_per_s"] > 100  # far above the links the suite emulates (1gbit = 125 MB/s)


@pytest.mark.benchmark(timer=CLOCK)
def test_proxy_cpu_per_request(benchmark, tmp_path):
    d = str(tmp_path / "store")
    c = Cluster("shared", 1, d, {}, object_store_latency="20ms")
    os.makedirs(os.path.join(d, "run"))
    n, clients = 1000, 8
    per_1000, rates = [], []
    try:
        c.start_object_store(timeout=60)
        from systems.shared.objstore import ObjectStore
        from systems.shared.settings import s3_config

        body = os.urandom(1024)
        with ObjectStore(s3_config({**c.config, "s3.max.concurrency": clients})) as st, \
                ThreadPoolExecutor(clients) as pool:
            st.put("bench/warm", body)
            for r in range(ROUNDS):
                keys = [f"bench/{r}/{i}" for i in range(n // 2)]
                c0 = _cpu(c.object_store_proxy.pid)
                t0 = time.perf_counter()
                list(pool.map(lambda k: st.put(k, body), keys))
                list(pool.map(st.get, keys))
                wall = time.perf_counter() - t0
                per_1000.append((_cpu(c.object_store_proxy.pid) - c0) / (n / 1000))
                rates.append(n / wall)
                st.delete_many(keys)
    finally:
        c.stop()
    CLOCK.rounds(benchmark, per_1000)  # CPU seconds per 1,000 requests
    info = {"cpu_s_per_1000_requests": [round(x, 4) for x in per_1000],
            "requests_per_s": [round(x) for x in rates], "clients": clients, "latency": "20ms",
            "request": "1 KiB PUT, then GET", **_machine()}
    benchmark.extra_info.update(info)
    print(f"\nproxy CPU per 1,000 requests, median of {ROUNDS}: {statistics.median(per_1000):.4f} s "
          f"({statistics.median(rates):.0f} requests/s from {clients} clients) {info}")
