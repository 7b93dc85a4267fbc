"""The cluster's object-store latency proxy (bench/run/cluster.py) and the probe
(`python -m bench objstore-probe`, bench/run/objstore_probe.py) with the systems' own S3 client:
on loopback and in the object store's network namespace."""
from __future__ import annotations

import json
import os
import socket

import pytest

from bench.run.cluster import Cluster
from bench.run.objstore_probe import probe, probe_requests
from systems.core.process import alive
from tests.support.cli import bench


# -- the cluster's proxy and the probe -----------------------------------------------------------------

def _refused(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


@pytest.mark.slow
def test_proxy_lives_and_dies_with_the_object_store(tmp_path):
    """Without links the proxy runs on 127.0.0.1 in front of the store; the nodes get its
    endpoint; stopping the store stops it (connections refused, as before); starting the store
    again starts it on the same port; cluster.json names it; `stop` leaves nothing."""
    d = str(tmp_path / "c")
    c = Cluster("shared", 1, d, {}, object_store_latency="20ms")
    os.makedirs(os.path.join(d, "run"))
    try:
        c.start_object_store(timeout=60)
        store, proxy = c.object_store_info["endpoint"], c.object_store_proxy
        assert c.config["s3.endpoint"] == f"127.0.0.1:{proxy.port}" != store
        assert alive(proxy.pid, d) and ("objstore-proxy", proxy.pid) in c.processes()
        saved = Cluster.load(d)
        assert saved.object_store_latency.text == "20ms" and saved.object_store_proxy == proxy
        res = probe(d, requests=30)
        print("\nprobe at 20ms:", json.dumps({k: res[k] for k in ("nodes", "direct", "added_p50_ms")}))
        assert res["proxy_exchanges"] == res["probe_requests"]  # one exchange per HTTP request
        # What the proxy adds, p50 through it less p50 straight to the store at the same client:
        assert res["within_tolerance"], res
        # The round trip itself: the latency plus the client's own time per request (its round
        # trip to the store without the proxy).
        for op in ("put", "get"):
            assert 20 <= res["nodes"][op]["p50_ms"] <= 22 + res["direct"][op]["p50_ms"], res

        c.stop_object_store()  # the objstore-down fault
        assert not alive(proxy.pid, d) and _refused(c.config["s3.endpoint"])
        c.start_object_store(timeout=60)
        assert c.object_store_proxy.port == proxy.port and c.object_store_proxy.pid != proxy.pid
        assert c.config["s3.endpoint"] == f"127.0.0.1:{proxy.port}"
        assert c.object_store_info["endpoint"] == store  # the store's own, not the proxy's
        assert probe(d, requests=5, direct=False)["proxy_exchanges"] == probe_requests(5)
    finally:
        c.stop()
    assert not alive(c.object_store_proxy.pid, d) and not c.object_store_running()


@pytest.mark.slow  # ~15 s; make bench's scenarios run on links with the store 30 ms away
def test_cluster_start_with_links_and_latency_then_probe(tmp_path, capsys):
    """`bench cluster start --link-rate ... --object-store-latency 50ms`: the proxy runs in the
    object store's namespace on its address; `bench objstore-probe` from this namespace (through
    the client link) measures 50 ms at p50 within 10 %, the client's own time included."""
    d = str(tmp_path / "c")
    r = bench("cluster", "start", "--dir", d, "--system", "shared", "--brokers", "1", "--link-rate", "1gbit",
               "--object-store-latency", "50ms", timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert "behind a latency proxy" in r.stdout and "(50ms to first byte" in r.stdout, r.stdout
        c = Cluster.load(d)
        ns = c.network.namespace("objstore")
        proxy = c.object_store_proxy
        assert proxy.host == c.network.node_address("objstore") == c.object_store.host
        assert os.stat(f"/proc/{proxy.pid}/ns/net").st_ino == os.stat(f"/run/netns/{ns}").st_ino
        from bench.cli import build_parser

        args = build_parser().parse_args(["cluster", "status", "--dir", d])
        assert args.func(args) == 0
        out = capsys.readouterr().out
        assert f"latency proxy {proxy.host}:{proxy.port}  pid {proxy.pid}  up  50ms to first byte" in out, out
        p = bench("objstore-probe", "--dir", d, "--requests", "30", "--json")
        assert p.returncode == 0, (p.stdout, p.stderr)
        res = json.loads(p.stdout)
        print("\nprobe at 50ms over 1gbit links:", json.dumps({k: res[k] for k in ("nodes", "direct", "rtt_error")}))
        assert all(abs(e) <= 0.10 for e in res["rtt_error"].values()), res
        assert res["within_tolerance"] and res["proxy_exchanges"] == res["probe_requests"], res
    finally:
        Cluster.load(d).stop()  # what `bench cluster stop` does
    assert not alive(proxy.pid, d)
