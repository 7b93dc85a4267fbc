"""Object-store latency (scenario `network.object_store_latency`): the setting (bench/latency.py),
the delaying proxy's semantics (bench/run/objstore_proxy.py, in-process against a fake store),
the cluster launcher's proxy next to the object store (bench/run/cluster.py) and the probe
(`python -m bench objstore-probe`, bench/run/objstore_probe.py) with the systems' own S3 client.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import random
import socket
import subprocess
import sys

import pytest

from bench.latency import Latency, canonical, emulated, parse_latency
from bench.run.cluster import Cluster, ClusterError
from bench.run.objstore_probe import probe, probe_requests
from bench.run.objstore_proxy import DelayProxy
from bench.scenario import ScenarioError, parse_scenario
from systems.core.process import alive
from tests.clients import netns_unavailable
from tests.conftest import ROOT

MS = 1e-3


# -- the setting --------------------------------------------------------------------------------

def _scenario(network: dict, kind: str = "shared", **system) -> dict:
    return {"name": "lat", "system": {"kind": kind, "brokers": 3, **system},
            "workload": {"topics": [{"name": "t", "partitions": 1}], "message_bytes": 100,
                         "produce_rate_msgs_per_s": 10, "duration_s": 1},
            "network": network}


@pytest.mark.parametrize("value,stored,text", [
    ("20ms", "20ms", "20ms"),
    ("0.05s", "50ms", "50ms"),
    ("500us", "0.5ms", "0.5ms"),
    ("0ms", "0ms", "0ms"),
    (0, "0ms", "0ms"),
    ({"p99": "150ms", "p50": "30ms", "p90": "60ms"}, {"p50": "30ms", "p90": "60ms", "p99": "150ms"},
     "p50=30ms,p90=60ms,p99=150ms"),
    ("p50=30ms,p99.9=1s", {"p50": "30ms", "p99.9": "1000ms"}, "p50=30ms,p99.9=1000ms"),
])
def test_latency_forms(value, stored, text):
    sc = parse_scenario(_scenario({"object_store_latency": value}), "<t>")
    assert sc.network.object_store_latency == stored
    assert sc.object_store_latency() == text
    assert parse_latency(stored).text == text  # written back, read again: the same
    # accepted with emulated links too
    sc = parse_scenario(_scenario({"link_rate": "1gbit", "object_store_latency": value}), "<t>")
    assert sc.network.object_store_latency == stored


@pytest.mark.parametrize("value,reason", [
    (20, "give a unit: 20 is not a duration (write 20ms or 20s)"),
    ("20", "'20' is not a duration such as 20ms"),
    ("-5ms", "'-5ms' is not a duration"),
    ("2min", "'2min' is not a duration"),
    ("90s", "'90s' is above 60s"),
    (True, "must be a duration such as 20ms"),
    ({"p50": "30ms"}, "a distribution needs at least two percentiles"),
    ({"p50": "30ms", "p90": "20ms"}, "p90: 20ms is below a lower percentile's value (30ms)"),
    ({"p50": "30ms", "median": "20ms"}, "'median' is not a percentile"),
    ({"p50": "30ms", "p120": "90ms"}, "'p120': a percentile is above p0 and at most p100"),
    ({"p50": "30ms", "p90": 60}, "p90: give a unit"),
    ("p50=30ms,p90", "'p90': expected pNN=DURATION"),
])
def test_bad_latency_names_the_field(value, reason):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_scenario({"object_store_latency": value}), "x.yaml")
    assert f"x.yaml: network.object_store_latency: {reason}" in str(e.value)


def test_latency_is_recorded_per_system():
    # a system without an object store has no latency to record (one scenario serves every system)
    assert parse_scenario(_scenario({"object_store_latency": "20ms"}, kind="replication"), "<t>") \
        .object_store_latency() is None
    assert parse_scenario(_scenario({}), "<t>").object_store_latency() == "0ms"
    assert parse_scenario(_scenario({}, kind="tiered"), "<t>").object_store_latency() == "0ms"
    with pytest.raises(ScenarioError, match="network.object_store_latency: the object store of a cluster the "
                                            "harness does not start"):
        parse_scenario(_scenario({"object_store_latency": "20ms"}, kind="external", bootstrap="127.0.0.1:9"), "x")
    # a matrix over the setting: one run id per value
    from bench.scenario import expand
    data = _scenario({})
    data["matrix"] = {"network.object_store_latency": ["0ms", "50ms", {"p50": "30ms", "p99": "150ms"}]}
    ids = [rid for rid, _ in expand(parse_scenario(data, "<t>"))]
    assert ids == ["lat__network.object_store_latency=0ms", "lat__network.object_store_latency=50ms",
                   "lat__network.object_store_latency=p50=30ms+p99=150ms"]


def test_distribution_is_drawn_from_its_percentiles():
    lat = parse_latency({"p50": "30ms", "p90": "60ms", "p99": "150ms"})
    assert emulated("0ms") is None and emulated(None) is None and emulated("1ms") == Latency(((1.0, 0.001),))
    assert canonical(None) is None
    # at the given points, between them (linear), below the lowest (its value), above (exponential)
    assert lat.quantile(0.5) == pytest.approx(0.030) and lat.quantile(0.9) == pytest.approx(0.060)
    assert lat.quantile(0.99) == pytest.approx(0.150) and lat.quantile(0.7) == pytest.approx(0.045)
    assert lat.quantile(0.1) == lat.quantile(0.0) == pytest.approx(0.030)
    theta = lat.tail_theta_s
    assert theta == pytest.approx(0.090 / math.log(10))  # through the p90 and p99 points
    assert lat.quantile(0.999) == pytest.approx(0.150 + theta * math.log(10))
    assert parse_latency({"p50": "30ms", "p100": "90ms"}).tail_theta_s is None
    draw = lat.sampler(random.Random(1))
    xs = sorted(draw() for _ in range(40000))
    for q, want in ((0.5, 0.030), (0.9, 0.060), (0.99, 0.150), (0.999, lat.quantile(0.999))):
        assert xs[int(q * len(xs))] == pytest.approx(want, rel=0.05), q
    assert parse_latency("20ms").sampler()() == 0.020


# -- the proxy, against a fake store ----------------------------------------------------------------

def _pattern(n: int) -> bytes:
    return (bytes(range(251)) * (n // 251 + 1))[:n]


async def _fake_store(chunk_gap_s: float = 0.0):
    """A store that answers each line `GET n size\\n` with `OK n\\n` then `size` bytes of a
    pattern, in two writes `chunk_gap_s` apart; `log` records when each request line arrived."""
    log: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()

    async def serve(r, w):
        while True:
            line = await r.readline()
            if not line:
                log.append(("eof", loop.time()))
                w.close()
                return
            _, n, size = line.decode().split()
            log.append((n, loop.time()))
            body = _pattern(int(size))
            w.write(f"OK {n}\n".encode() + body[:len(body) // 2])
            await w.drain()
            if chunk_gap_s:
                await asyncio.sleep(chunk_gap_s)
            w.write(body[len(body) // 2:])
            await w.drain()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1], log


async def _exchange(r, w, n: int, size: int, split: bool = False):
    """One request (its line in two writes 20 ms apart with `split`); -> (time its last byte was
    sent, time the first response byte came, time the last one came, body)."""
    loop = asyncio.get_running_loop()
    line = f"GET {n} {size}\n".encode()
    if split:
        w.write(line[:3])
        await w.drain()
        await asyncio.sleep(0.02)
    w.write(line[3:] if split else line)
    await w.drain()
    t_sent = loop.time()
    first = await r.readexactly(1)
    t_first = loop.time()
    rest = await r.readexactly(len(f"OK {n}\n") - 1 + size)
    return t_sent, t_first, loop.time(), (first + rest)[len(f"OK {n}\n"):]


def test_proxy_delays_each_response_first_byte_only():
    async def main():
        srv, port, log = await _fake_store(chunk_gap_s=0.05)
        proxy = DelayProxy(("127.0.0.1", 0), ("127.0.0.1", port), parse_latency("40ms"))
        pport = await proxy.start()
        r, w = await asyncio.open_connection("127.0.0.1", pport)
        out = []
        for n, size, split in ((1, 10, False), (2, 2 << 20, True), (3, 100, False)):  # keep-alive: one connection
            out.append(await _exchange(r, w, n, size, split))
        w.write_eof()  # the client's close reaches the store
        await asyncio.sleep(0.1)
        assert await r.read() == b""  # ... and the store's close reaches the client
        await proxy.close()
        srv.close()
        return out, log, proxy.stats

    out, log, stats = asyncio.run(main())
    for (t_sent, t_first, t_last, body), n in zip(out, (10, 2 << 20, 100)):
        assert body == _pattern(n)  # every byte, in order
        # the first byte no earlier than the request's last + 40 ms (the proxy forwarded that
        # byte after the client sent it), not much later either
        assert 0.040 <= t_first - t_sent < 0.040 + 0.015, t_first - t_sent
        # the rest follows as the store sends it (its second half 50 ms after the first), not
        # held again: done by 50 ms after the request, not 40 + 50
        assert 0.050 <= t_last - t_sent < 0.050 + 0.015 + (0.02 if n > 1e6 else 0), t_last - t_sent
    assert [e for e, _ in log] == ["1", "2", "3", "eof"]
    assert stats["exchanges"] == 3 and stats["connections"] == 1 and stats["open_connections"] == 0
    assert stats["bytes_down"] == sum(len(f"OK {i}\n") + n for i, n in ((1, 10), (2, 2 << 20), (3, 100)))


def test_proxy_draws_per_exchange_and_passes_request_bytes_at_once():
    async def main():
        srv, port, log = await _fake_store()
        proxy = DelayProxy(("127.0.0.1", 0), ("127.0.0.1", port),
                           parse_latency({"p50": "10ms", "p100": "30ms"}), seed=7)
        pport = await proxy.start()
        r, w = await asyncio.open_connection("127.0.0.1", pport)
        loop = asyncio.get_running_loop()
        waits, arrivals = [], []
        for n in range(40):
            t_sent, t_first, _, _ = await _exchange(r, w, n, 10)
            waits.append(t_first - t_sent)
            arrivals.append(log[-1][1] - t_sent)  # the store saw the request when it was sent
        w.close()
        await proxy.close()
        srv.close()
        return waits, arrivals, loop

    waits, arrivals, _ = asyncio.run(main())
    assert all(0.010 <= x < 0.045 for x in waits), waits
    assert len({round(x, 3) for x in waits}) > 5  # drawn per exchange, not once
    assert sorted(arrivals)[len(arrivals) // 2] < 0.003, arrivals  # request bytes are not held


def test_proxy_closes_at_once_when_the_store_is_down():
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    dead = free.getsockname()[1]
    free.close()

    async def main():
        proxy = DelayProxy(("127.0.0.1", 0), ("127.0.0.1", dead), parse_latency("50ms"))
        pport = await proxy.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r, w = await asyncio.open_connection("127.0.0.1", pport)
        w.write(b"GET 1 10\n")
        try:
            got = await asyncio.wait_for(r.read(), 2)
        except ConnectionResetError:
            got = b""
        took = loop.time() - t0
        await proxy.close()
        return got, took, proxy.stats

    got, took, stats = asyncio.run(main())
    assert got == b"" and took < 0.5 and stats["upstream_refused"] == 1


# -- the cluster's proxy and the probe -----------------------------------------------------------------

def _refused(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


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


def test_latency_the_launcher_refuses(tmp_path):
    with pytest.raises(ClusterError, match="system 'replication' has no object store"):
        Cluster("replication", 1, str(tmp_path / "r"), object_store_latency="20ms")
    with pytest.raises(ClusterError, match="--object-store-latency: '20' is not a duration"):
        Cluster("shared", 1, str(tmp_path / "r"), object_store_latency="20")
    with pytest.raises(ClusterError, match="plain-HTTP"):
        Cluster("shared", 1, str(tmp_path / "r"), {"s3.secure": "true"}, object_store_latency="20ms")
    assert not (tmp_path / "r").exists()


_NO_NETNS = netns_unavailable()


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.skipif(_NO_NETNS is not None, reason=_NO_NETNS or "")
def test_cluster_start_with_links_and_latency_then_probe(tmp_path, capsys):
    """`bench cluster start --link-rate ... --object-store-latency 50ms`: the proxy runs in the
    object store's namespace on its address; `bench objstore-probe` from this namespace (through
    the client link) measures 50 ms at p50 within 10 %, the client's own time included."""
    d = str(tmp_path / "c")
    r = _bench("cluster", "start", "--dir", d, "--system", "shared", "--brokers", "1", "--link-rate", "1gbit",
               "--object-store-latency", "50ms")
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
        p = _bench("objstore-probe", "--dir", d, "--requests", "30", "--json")
        assert p.returncode == 0, (p.stdout, p.stderr)
        res = json.loads(p.stdout)
        print("\nprobe at 50ms over 1gbit links:", json.dumps({k: res[k] for k in ("nodes", "direct", "rtt_error")}))
        assert all(abs(e) <= 0.10 for e in res["rtt_error"].values()), res
        assert res["within_tolerance"] and res["proxy_exchanges"] == res["probe_requests"], res
    finally:
        Cluster.load(d).stop()  # what `bench cluster stop` does
    assert not alive(proxy.pid, d)


# -- end to end: a shared move and a tiered move at 50 ms vs 0 ms ------------------------------------

def _latency_runs(run_scenario, data: dict) -> dict[str, dict]:
    """The scenario at 0ms and at 50ms (a matrix: everything else equal) -> latency -> summary."""
    data = {**data, "matrix": {"network.object_store_latency": ["0ms", "50ms"]}}
    out = {}
    out_dirs = run_scenario(data)
    for run_dir, s in out_dirs:
        assert s["error"] is None and s["checks"]["valid"] is True, (run_dir, s["error"], s["checks"])
        assert s["params"]["object_store_latency"] == s["configuration"]["object_store_latency"]
        out[s["params"]["object_store_latency"]] = s
    assert sorted(out) == ["0ms", "50ms"]
    for run_dir, s in out_dirs:
        # 0ms adds nothing: no proxy, the nodes reach the store itself; 50ms: they reach the proxy
        c = json.loads((run_dir / "cluster" / "cluster.json").read_text())
        if s["params"]["object_store_latency"] == "0ms":
            assert c["object_store_proxy"] is None and c["object_store_latency"] is None
            assert c["config"]["s3.endpoint"] == c["object_store_info"]["endpoint"]
        else:
            assert c["object_store_latency"] == "50ms"
            assert c["config"]["s3.endpoint"] == f"127.0.0.1:{c['object_store_proxy']['port']}"
            stats = json.loads((run_dir / "cluster" / "objstore-proxy.stats.json").read_text())
            print(f"\nproxy of {run_dir.name}: {stats}")
            assert stats["exchanges"] > 0 and stats["open_connections"] == 0
    return out


@pytest.mark.slow
def test_shared_acks_and_move_phases_at_50ms(run_scenario):
    """The shared system acknowledges after its WAL PUT: at 50 ms the median ack latency rises by
    >= 40 ms. Its move's close makes 3 sequential object-store requests (WAL flush PUT, meta PUT,
    forced tail upload PUTs in parallel; systems/shared/backend.py _close) and its open 1 (the
    meta range GET in the replay; the open RPC reads none): close >= 3 x 50 ms, replay >= 50 ms."""
    runs = _latency_runs(run_scenario, {
        "name": "shared-latency",
        "system": {"kind": "shared", "brokers": 2,
                   "extra": {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}},
        "workload": {"topics": [{"name": "m", "partitions": 1}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 200, "duration_s": 4},
        "prefill": {"bytes_per_partition": "4MiB"},
        "actions": [{"at_s": 2, "kind": "reassign", "topic": "m", "partition": 0, "to": [2]}],
    })
    acks = {k: s["producer"]["latency_ms"]["p50"] for k, s in runs.items()}
    phases = {k: s["moves"][0]["phases"] for k, s in runs.items()}
    moves = {k: s["moves"][0]["move_seconds"] for k, s in runs.items()}
    print(f"\nshared, ack p50 ms: {acks}, move_seconds: {moves}\nmove phases s: {json.dumps(phases, indent=1)}")
    # the WAL PUT before each ack: 50 ms less the store's own time, which the latency hides
    assert acks["50ms"] - acks["0ms"] >= 40, acks
    # Each phase that makes sequential requests takes at least that many latencies; the store's
    # own time (large for the forced upload of the tail) is hidden in them, so their rise is less.
    slow, fast = phases["50ms"], phases["0ms"]
    assert slow["close.meta_persist"] >= 0.050, slow  # 1 PUT (the meta stream object) + the commit RPC
    assert slow["close.force_upload"] >= 0.050, slow  # 1 round of parallel PUTs (the tail) + the commit RPC
    assert slow["open.replay"] >= 0.050, slow  # 1 GET (the meta stream's last range)
    assert slow["open.replay"] - fast["open.replay"] >= 0.030, phases
    # RPCs to the controller only: no object-store request, no rise
    assert slow["close.stream_close"] < 0.040 and slow["open.open"] < 0.040, slow


def _history_events(run_dir, name: str) -> list[dict]:
    import pyarrow.compute as pc

    from bench.history.store import read_history

    t = read_history(run_dir / "history.parquet")
    t = t.filter(pc.fill_null(pc.equal(t["event"], name), False))
    return [{**(json.loads(d) if d else {}), "ts": ts} for d, ts in zip(t["detail"].to_pylist(), t["ts"].to_pylist())]


@pytest.mark.slow
def test_tiered_aux_state_at_50ms(run_scenario):
    """A tiered move's new replica reads its start from object storage (systems/tiered/remote.py):
    a LIST of the partition's directory, a GET of each segment manifest (one after the other),
    then the last segment's epochs and snapshot (two GETs at once): the phase tier.aux_state
    takes at least (2 + manifests) x 50 ms (at 0ms it is tens of ms)."""
    [(run_dir, s)] = run_scenario({
        "name": "tiered-latency",
        "system": {"kind": "tiered", "brokers": 4, "segment_bytes": "1MiB", "local_retention_bytes": "8MiB",
                   "extra": {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500,
                             "remote.log.manager.task.interval.ms": 200}},
        "workload": {"topics": [{"name": "t", "partitions": 1}], "message_bytes": 1000,
                     "produce_rate_msgs_per_s": 200, "duration_s": 4},
        "prefill": {"bytes_per_partition": "4MiB"},
        "actions": [{"at_s": 2, "kind": "reassign", "topic": "t", "partition": 0, "replace": 1, "by": 4}],
        "network": {"object_store_latency": "50ms"},
    })
    assert s["error"] is None and s["checks"]["valid"] is True, (run_dir, s["error"], s["checks"])
    (move,) = s["moves"]
    (built,) = [e for e in _history_events(run_dir, "tiered_replica_built") if e.get("topic") == "t"]
    # the segments tiered before the rebuild, from the brokers' journals kept with the run
    uploads = set()
    for f in (run_dir / "cluster").glob("broker-*/events.jsonl"):
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "tiered_upload" and e.get("topic") == "t" and e["ts"] < built["ts"]:
                uploads.add(e["base_offset"])
    manifests = len(uploads)
    print(f"\ntiered at 50ms: phases {move['phases']}, {manifests} segment manifests, move {move['move_seconds']} s")
    assert manifests >= 1 and built["segment_base"] is not None, built
    assert move["phases"]["tier.aux_state"] >= (2 + manifests) * 0.050, (move["phases"], manifests)
