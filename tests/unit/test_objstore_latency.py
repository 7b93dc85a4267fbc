"""Object-store latency (scenario `network.object_store_latency`): the setting (bench/latency.py),
the delaying proxy's semantics (bench/run/objstore_proxy.py, in-process against a fake store) and
what the cluster launcher refuses before it starts anything."""
from __future__ import annotations

import asyncio
import math
import random
import socket

import pytest

from bench.latency import Latency, canonical, emulated, parse_latency
from bench.run.cluster import Cluster, ClusterError
from bench.run.objstore_proxy import DelayProxy
from bench.scenario import ScenarioError, parse_scenario

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


def test_latency_the_launcher_refuses(tmp_path):
    with pytest.raises(ClusterError, match="system 'replication' has no object store"):
        Cluster("replication", 1, str(tmp_path / "r"), object_store_latency="20ms")
    with pytest.raises(ClusterError, match="--object-store-latency: '20' is not a duration"):
        Cluster("shared", 1, str(tmp_path / "r"), object_store_latency="20")
    with pytest.raises(ClusterError, match="plain-HTTP"):
        Cluster("shared", 1, str(tmp_path / "r"), {"s3.secure": "true"}, object_store_latency="20ms")
    assert not (tmp_path / "r").exists()
