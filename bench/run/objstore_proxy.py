"""A delaying TCP proxy in front of the object store: what a far object store looks like to the
nodes, emulated outside the systems' code (scenario `network.object_store_latency`).

The cluster launcher (bench/run/cluster.py) starts it as a process of the cluster, in the object
store's network namespace when links are emulated (else on 127.0.0.1), on the endpoint every
broker and the controller are given (`s3.endpoint`); it forwards to the real store. A system
cannot tell it from a far server: its requests go to an address and port, and answers come late.

Semantics, per connection (HTTP/1.1 as the S3 clients speak it, keep-alive included):
- request bytes (client -> store) pass through at once, in order;
- a *turn* starts when the client sent bytes since the store last answered; the first byte the
  store sends after that is the first byte of a response, released no earlier than (the time the
  last byte of the request was handed to the store's socket + one latency drawn for it);
- later bytes of the same response follow in order at once (they wait only behind that first
  byte); byte order in either direction never changes;
- a close or half-close (EOF) on one side is passed on to the other; an error (reset) on either
  side aborts both.
A turn is an HTTP exchange for a client that waits for each response before the next request (no
pipelining), as urllib3 (the minio SDK) does; an `Expect: 100-continue` interim response would be a
turn of its own (the minio SDK sends none). The rule reads no HTTP, so TLS passes through it too.
Connection set-up is not delayed: the nodes keep their connections open (a pool per process).

Timing: the release is a timer of the event loop (asyncio, ~1 ms resolution); the store's own
time to answer overlaps the latency (a store slower than the latency adds what exceeds it).

Run: python -m bench.run.objstore_proxy --listen HOST:PORT --upstream HOST:PORT --latency 20ms
     [--port-file F] [--stats-file F] [--seed N]
Port 0 picks a free port (written to --port-file). SIGTERM/SIGINT: close every connection, write
the stats, exit 0. Stats (JSON, rewritten every second while they change): connections,
exchanges (turns), bytes each way, seconds of latency added.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import sys
import time

from bench.latency import Latency, parse_latency

CHUNK = 256 * 1024  # read size: large enough that a GiB costs few loop iterations
log = logging.getLogger("bench.objstore_proxy")


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{endpoint!r} is not host:port")
    return host, int(port)


class _Turn:
    """One connection's state shared by its two directions."""

    __slots__ = ("pending", "t_last", "idle")

    def __init__(self) -> None:
        self.pending = False  # the client sent bytes since the store last answered
        self.t_last = 0.0  # loop time the last request bytes were in the store's socket
        self.idle = asyncio.Event()  # no request bytes on their way to the store
        self.idle.set()


class DelayProxy:
    """Listens on (host, port), forwards each connection to `upstream`, delays each response's
    first byte (module docstring)."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], latency: Latency,
                 seed: int | None = None):
        self.listen, self.upstream, self.latency = listen, upstream, latency
        self.draw = latency.sampler(random.Random(seed))
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._conns: set[asyncio.Task] = set()
        self.stats = {"connections": 0, "open_connections": 0, "upstream_refused": 0, "exchanges": 0,
                      "bytes_up": 0, "bytes_down": 0, "latency_added_s": 0.0, "release_late_s": 0.0,
                      "store_slower": 0}

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1],
                                                 reuse_address=True, limit=CHUNK)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.wait(self._conns, timeout=2)

    def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        t = asyncio.get_running_loop().create_task(self._serve(cr, cw))
        self._conns.add(t)
        t.add_done_callback(self._conns.discard)

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        st = self.stats
        st["connections"] += 1
        try:
            ur, uw = await asyncio.open_connection(*self.upstream, limit=CHUNK)
        except OSError:
            # The store is not there: the client's connection goes at once, as a refused one would.
            st["upstream_refused"] += 1
            cw.transport.abort()
            return
        st["open_connections"] += 1
        # A drain() returns only once everything written is in the kernel's socket buffer: the
        # time taken after it is the time the request's last byte was forwarded.
        uw.transport.set_write_buffer_limits(high=0)
        cw.transport.set_write_buffer_limits(high=CHUNK)
        turn = _Turn()
        up = asyncio.ensure_future(self._up(cr, uw, turn))
        down = asyncio.ensure_future(self._down(ur, cw, turn))
        try:
            pending = {up, down}
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(t.exception() is not None for t in done):
                    break  # an error on either side: abort both (below)
        except asyncio.CancelledError:
            pass
        finally:
            for t in (up, down):
                t.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
            clean = all(t.done() and not t.cancelled() and t.exception() is None for t in (up, down))
            for w in (cw, uw):
                if clean:
                    w.close()
                else:
                    w.transport.abort()
            st["open_connections"] -= 1

    async def _up(self, cr: asyncio.StreamReader, uw: asyncio.StreamWriter, turn: _Turn) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data = await cr.read(CHUNK)
            if not data:
                break
            turn.pending = True
            turn.idle.clear()
            uw.write(data)
            await uw.drain()
            turn.t_last = loop.time()
            turn.idle.set()
            self.stats["bytes_up"] += len(data)
        if uw.can_write_eof():
            uw.write_eof()  # the client's half-close, passed on

    async def _down(self, ur: asyncio.StreamReader, cw: asyncio.StreamWriter, turn: _Turn) -> None:
        loop = asyncio.get_running_loop()
        st = self.stats
        while True:
            data = await ur.read(CHUNK)
            if not data:
                break
            if turn.pending:  # the first byte of a response
                turn.pending = False
                await turn.idle.wait()  # the request's last bytes are in the store's socket
                release = turn.t_last + self.draw()
                st["exchanges"] += 1
                wait = release - loop.time()
                if wait > 0:
                    st["latency_added_s"] += wait
                    await asyncio.sleep(wait)
                    st["release_late_s"] += loop.time() - release  # the timer's lateness
                else:
                    st["store_slower"] += 1  # the store took longer than the latency drawn
            cw.write(data)
            await cw.drain()
            st["bytes_down"] += len(data)
        if cw.can_write_eof():
            cw.write_eof()


async def _main(args: argparse.Namespace) -> int:
    lat = parse_latency(args.latency)
    listen, upstream = split_endpoint(args.listen), split_endpoint(args.upstream)
    proxy = DelayProxy(listen, upstream, lat, args.seed)
    port = await proxy.start()

    def write_stats() -> None:
        if args.stats_file:
            tmp = args.stats_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump({**proxy.stats, "latency": lat.text, "pid": os.getpid(), "ts": time.time()}, f)
            os.replace(tmp, args.stats_file)

    write_stats()  # before the port file: a reader never sees an earlier process's counters as ours
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    log.info("listening on %s:%d, forwarding to %s:%d, latency %s", listen[0], port, *upstream, lat.text)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    last = None
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        now = (proxy.stats["exchanges"], proxy.stats["bytes_up"], proxy.stats["bytes_down"],
               proxy.stats["connections"])
        if now != last:
            write_stats()
            last = now
    await proxy.close()
    write_stats()
    log.info("stopped: %s", json.dumps(proxy.stats))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run.objstore_proxy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, metavar="HOST:PORT", help="where the nodes connect (port 0: a free one)")
    ap.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the object store")
    ap.add_argument("--latency", required=True, help="20ms, or p50=30ms,p90=60ms,p99=150ms (bench/latency.py)")
    ap.add_argument("--port-file", help="write the listening port here once listening")
    ap.add_argument("--stats-file", help="JSON counters, rewritten every second while they change")
    ap.add_argument("--seed", type=int, help="seed of the latency draws (default: random)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parse_latency(args.latency)
        split_endpoint(args.listen), split_endpoint(args.upstream)
    except ValueError as e:
        ap.error(str(e))
    try:
        return asyncio.run(_main(args))
    except OSError as e:  # the port is taken, the address not ours
        print(f"objstore proxy: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
