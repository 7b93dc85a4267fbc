"""Object-storage layer against a real SeaweedFS (`weed mini`) process: no mocks.

One server serves the whole module (start ~1 s, stop ~3 s); the lifecycle tests start their
own. Every wait below is bounded by a deadline or a pytest timeout.
"""
from __future__ import annotations

import asyncio
import glob
import io
import os
import signal
import socket
import time
import traceback

import psutil
import pytest
from minio import Minio
from minio.error import S3Error

from systems.shared.objstore import (
    ObjectNotFound,
    ObjectStore,
    ObjectStoreAuthError,
    ObjectStoreError,
    ObjectStoreUnavailable,
    REQUEST_KINDS,
    S3Config,
    purpose,
)
from systems.shared.seaweed import GRPC_PORT_OFFSET, SeaweedError, SeaweedServer

MiB = 1024 * 1024
ACCESS_KEY = "benchAccessKey01"
SECRET_KEY = "s3cr3t-Never-Print-Me-7f3a9c"
BUCKET = "test-objstore"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("seaweed")
    srv = SeaweedServer(root / "data", access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                        log_path=root / "weed.log")
    try:
        srv.start(timeout=30)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def store(server):
    with ObjectStore(server.s3_config(BUCKET)) as st:
        st.ensure_bucket()
        yield st


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- data path -----------------------------------------------------------------------------

def test_put_get_range_list_delete_roundtrip(store):
    before = store.stats()
    store.ensure_bucket()  # idempotent
    store.put("rt/a", b"hello world")
    store.put("rt/b", b"")
    store.put("other/c", b"x")
    assert store.get("rt/a") == b"hello world"
    assert store.get("rt/b") == b""
    assert store.get_range("rt/a", 6, 5) == b"world"
    assert store.get_range("rt/a", 6, 100) == b"world"  # S3: a range past the end is cut short
    assert store.get_range("rt/a", 0, 0) == b""
    assert store.list("rt/") == ["rt/a", "rt/b"]
    assert "other/c" in store.list()
    assert store.exists("rt/a") and not store.exists("rt/missing")

    big = os.urandom(20 * MiB)
    store.put("rt/big", big)
    assert store.get("rt/big") == big
    assert store.get_range("rt/big", 7 * MiB + 3, 5 * MiB) == big[7 * MiB + 3:12 * MiB + 3]

    store.put("rt/a", b"overwritten")
    assert store.get("rt/a") == b"overwritten"
    store.delete("rt/a")
    store.delete("rt/a")  # deleting a missing key is not an error (S3 semantics)
    assert not store.exists("rt/a")
    with pytest.raises(ObjectNotFound) as ei:
        store.get("rt/a")
    assert ei.value.key == "rt/a" and ei.value.code == "NoSuchKey"
    with pytest.raises(ObjectNotFound):
        store.get_range("rt/a", 0, 10)

    store.delete_many(["rt/b", "rt/big", "other/c"])
    store.delete_many([])
    assert store.list("rt/") == [] and "other/c" not in store.list()

    after = store.stats()
    assert after["put_count"] - before["put_count"] == 5
    assert after["bytes_uploaded"] - before["bytes_uploaded"] == 11 + 0 + 1 + 20 * MiB + 11
    assert after["bytes_downloaded"] - before["bytes_downloaded"] >= 20 * MiB + 5 * MiB
    assert after["get_count"] - before["get_count"] == 7  # failed gets and 0-length ranges: none
    assert after["error_count"] - before["error_count"] == 2
    assert after["throttle_wait_s"] == before["throttle_wait_s"] == 0.0


def test_async_api_does_not_block_the_loop(server):
    # 2 MiB at 4 MiB/s with a small burst takes ~0.45 s; a ticker must keep running meanwhile.
    cfg = server.s3_config(BUCKET, bandwidth_bytes_per_s=4 * MiB, burst_bytes=64 * 1024)
    payload = os.urandom(2 * MiB)

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        async with ObjectStore(cfg) as st:
            t = asyncio.create_task(ticker())
            await asyncio.wait_for(st.aput("async/a", payload), 20)
            stop.set()
            await t
            assert await st.aget("async/a") == payload
            assert await st.aget_range("async/a", 10, 4) == payload[10:14]
            assert await st.aexists("async/a")
            assert await st.alist("async/") == ["async/a"]
            await st.adelete("async/a")
            assert not await st.aexists("async/a")
            with pytest.raises(ObjectNotFound):
                await st.aget("async/a")
            results = await asyncio.gather(*(st.aput(f"async/{i}", b"v%d" % i) for i in range(8)))
            assert results == [None] * 8
            await st.adelete_many([f"async/{i}" for i in range(8)])
            assert await st.alist("async/") == []
        return ticks

    ticks = asyncio.run(main())
    assert ticks >= 10, f"event loop was blocked (only {ticks} ticks in ~0.45 s)"


def test_requests_are_counted_under_the_purpose_that_made_them(store):
    """A move's close and open count their own requests (purpose), in the tasks and pool threads
    they start, apart from requests made beside them at the same time (a WAL upload)."""
    async def main():
        async def beside():  # started outside the purpose: none of its requests are the move's
            for i in range(3):
                await store.aput(f"purpose/wal-{i}", b"w")

        async def move():
            with purpose("close:t-0"):
                await asyncio.gather(*(store.aput(f"purpose/sso-{i}", b"s") for i in range(2)))  # tasks
                await store.aget_range("purpose/sso-0", 0, 1)
                await store.alist("purpose/")
                await store.aexists("purpose/sso-1")
                await store.adelete_many([f"purpose/sso-{i}" for i in range(2)])

        await asyncio.gather(beside(), move())

    asyncio.run(main())
    assert store.take_requests("close:t-0") == {"put": 2, "get": 1, "list": 1, "head": 1, "delete": 1}
    assert store.take_requests("close:t-0") == dict.fromkeys(REQUEST_KINDS, 0)  # taken: forgotten
    store.put("purpose/outside", b"x")  # no purpose: counted nowhere but stats()
    assert store.take_requests("close:t-0") == dict.fromkeys(REQUEST_KINDS, 0)
    store.delete_many([f"purpose/wal-{i}" for i in range(3)] + ["purpose/outside"])


# --- credentials ---------------------------------------------------------------------------

def test_wrong_secret_and_wrong_access_key_refused(server, store):
    store.put("auth/x", b"secret data")
    for cfg in (server.s3_config(BUCKET, secret_key="wrong-secret-key-123"),
                S3Config(endpoint=server.endpoint, access_key="unknownAK", secret_key=SECRET_KEY,
                         bucket=BUCKET)):
        with ObjectStore(cfg) as bad:
            for call in (lambda: bad.get("auth/x"), lambda: bad.put("auth/y", b"z"),
                         lambda: bad.list(""), bad.ensure_bucket, lambda: bad.exists("auth/x")):
                with pytest.raises(ObjectStoreAuthError):
                    call()
    assert not store.exists("auth/y")


def test_anonymous_access_refused(server, store):
    store.put("anon/x", b"data")
    anon = Minio(server.endpoint, secure=False, region="us-east-1")
    with pytest.raises(S3Error) as ei:
        anon.get_object(BUCKET, "anon/x")
    assert ei.value.code == "AccessDenied"
    with pytest.raises(S3Error):
        list(anon.list_objects(BUCKET))
    with pytest.raises(S3Error):
        anon.put_object(BUCKET, "anon/y", io.BytesIO(b"z"), 1)
    with pytest.raises(S3Error):
        anon.list_buckets()
    assert not store.exists("anon/y")


def test_credentials_only_in_environment(server):
    proc = psutil.Process(server.pid)
    assert SECRET_KEY not in " ".join(proc.cmdline())
    env = proc.environ()
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET_KEY and env["AWS_ACCESS_KEY_ID"] == ACCESS_KEY
    assert SECRET_KEY not in server.log_path.read_text(errors="replace")
    assert SECRET_KEY not in repr(server) and SECRET_KEY not in str(server)


def test_secret_never_shown(server, store):
    cfg = store.config
    texts = [repr(cfg), str(cfg), repr(store), str(store), str(cfg.to_dict())]
    errors = []
    for bad_cfg, call in (
        (server.s3_config(BUCKET, secret_key=SECRET_KEY + "x"), lambda st: st.get("k")),
        (cfg, lambda st: st.get("does/not/exist")),
        (S3Config(endpoint=f"127.0.0.1:{_free_port()}", access_key=ACCESS_KEY,
                  secret_key=SECRET_KEY, bucket=BUCKET, connect_timeout_s=1.0), lambda st: st.list()),
    ):
        with ObjectStore(bad_cfg) as st:
            with pytest.raises(ObjectStoreError) as ei:
                call(st)
        errors.append(ei.value)
        texts += [str(ei.value), repr(ei.value),
                  "".join(traceback.format_exception(ei.value))]  # includes the SDK cause
    assert [type(e) for e in errors] == [ObjectStoreAuthError, ObjectNotFound, ObjectStoreUnavailable]
    for t in texts:
        assert SECRET_KEY not in t and ACCESS_KEY not in t
    for e in errors:
        assert e.bucket == BUCKET and BUCKET in str(e) and e.endpoint in str(e)
    assert "secret_key" not in cfg.to_dict() and "access_key" not in cfg.to_dict()
    assert S3Config.from_dict(cfg.to_dict(include_credentials=True)) == cfg


# --- failure modes -------------------------------------------------------------------------

def test_missing_bucket_is_a_clear_error(server):
    with ObjectStore(server.s3_config("no-such-bucket-here")) as st:
        with pytest.raises(ObjectStoreError, match="ensure_bucket") as ei:
            st.get("k")
        assert ei.value.code == "NoSuchBucket"


# --- bandwidth cap -------------------------------------------------------------------------

def test_upload_cap_is_honoured(server):
    # 8 MiB at 4 MiB/s: >= (8 MiB - burst) / rate = ~1.9 s; unthrottled it takes ~0.1 s.
    data = os.urandom(8 * MiB)
    with ObjectStore(server.s3_config(BUCKET, upload_bytes_per_s=4 * MiB)) as st:
        t0 = time.monotonic()
        st.put("cap/up", data)
        elapsed = time.monotonic() - t0
        assert 1.7 <= elapsed < 10, elapsed
        assert st.stats()["throttle_wait_upload_s"] >= 1.6
        t0 = time.monotonic()
        assert st.get("cap/up") == data  # the upload cap does not slow downloads
        assert time.monotonic() - t0 < 1.5
        st.delete("cap/up")


def test_shared_cap_paces_downloads(server, store):
    data = os.urandom(8 * MiB)
    store.put("cap/down", data)
    with ObjectStore(server.s3_config(BUCKET, bandwidth_bytes_per_s=8 * MiB)) as st:
        t0 = time.monotonic()
        assert st.get("cap/down") == data
        elapsed = time.monotonic() - t0
        assert 0.85 <= elapsed < 6, elapsed
        assert st.stats()["throttle_wait_download_s"] >= 0.75
    store.delete("cap/down")


# --- server lifecycle ----------------------------------------------------------------------

def test_all_ports_pinned_on_loopback(server):
    pinned = {p for http in server.ports.values() for p in (http, http + GRPC_PORT_OFFSET)}
    assert len(pinned) == 10
    proc = psutil.Process(server.pid)
    deadline = time.monotonic() + 10  # the admin component comes up ~0.5 s after S3
    while True:
        listening = {c.laddr for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        if {port for _, port in listening} >= pinned or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert {port for _, port in listening} == pinned
    assert {ip for ip, _ in listening} == {"127.0.0.1"}
    assert proc.children(recursive=True) == []  # weed mini is one process


def test_start_stop_lifecycle(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # weed must write nothing into the caller's working directory
    srv = SeaweedServer(tmp_path / "data")  # random credentials, random ports
    assert repr(srv) and srv.pid is None
    try:
        srv.start(timeout=30)
        pid = srv.pid
        assert psutil.pid_exists(pid) and os.getpgid(pid) == pid
        grpc_socks = [f"/tmp/seaweedfs-{c}-grpc-{p + GRPC_PORT_OFFSET}.sock" for c, p in srv.ports.items()]
        with ObjectStore(srv.s3_config("life")) as st:
            st.ensure_bucket()
            st.put("k", b"v")
    finally:
        t0 = time.monotonic()
        srv.stop()
    assert time.monotonic() - t0 < 12
    assert not psutil.pid_exists(pid)
    srv.stop()  # twice is fine
    assert srv.pid is None and not srv.is_running()
    assert list(cwd.iterdir()) == []
    assert glob.glob(f"/tmp/weed*{pid}*") == []  # glog files go under data_dir/logs
    assert not any(os.path.exists(s) for s in grpc_socks)

    # Data survives a restart (on new ports); then a hard kill still cleans up after itself.
    srv.start(timeout=30)
    pid2 = srv.pid
    socks2 = [f"/tmp/seaweedfs-{c}-grpc-{p + GRPC_PORT_OFFSET}.sock" for c, p in srv.ports.items()]
    try:
        with ObjectStore(srv.s3_config("life")) as st:
            assert st.get("k") == b"v"
        # A hung server (accepts connections, never answers) fails within the read timeout.
        os.kill(pid2, signal.SIGSTOP)
        with ObjectStore(srv.s3_config("life", read_timeout_s=1.0, max_retries=0)) as st:
            t0 = time.monotonic()
            with pytest.raises(ObjectStoreUnavailable):
                st.get("k")
            assert time.monotonic() - t0 < 5
    finally:
        srv.stop(timeout=0)  # no grace: SIGKILL path (also kills a stopped process)
    assert not psutil.pid_exists(pid2)
    assert not any(os.path.exists(s) for s in socks2)
    assert list(cwd.iterdir()) == []


def test_start_timeout_reports_log_tail(tmp_path):
    # An option weed rejects makes it exit at once: start must fail fast with its log.
    srv = SeaweedServer(tmp_path / "data", extra_args=["-no.such.flag=1"])
    t0 = time.monotonic()
    with pytest.raises(SeaweedError) as ei:
        srv.start(timeout=15)
    assert time.monotonic() - t0 < 15
    assert "no.such.flag" in str(ei.value) and "output of this run" in str(ei.value)
    assert srv.pid is None
    srv.stop()
