"""The object-storage client without a server (systems/shared/objstore.py): its settings, a closed
endpoint refused at once, the token bucket shared by threads and asyncio. Against a real
SeaweedFS process: tests/systems/test_objstore.py."""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from systems.shared.objstore import ObjectStore, ObjectStoreUnavailable, S3Config, TokenBucket

MiB = 1024 * 1024
ACCESS_KEY = "benchAccessKey01"
SECRET_KEY = "s3cr3t-Never-Print-Me-7f3a9c"
BUCKET = "test-objstore"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_config_from_dict_env_credentials(monkeypatch):
    monkeypatch.setenv("TEST_OBJSTORE_AK", "ak-from-env")
    monkeypatch.setenv("TEST_OBJSTORE_SK", "sk-from-env")
    cfg = S3Config.from_dict({"endpoint": "127.0.0.1:9000", "bucket": "b",
                              "access_key_env": "TEST_OBJSTORE_AK",
                              "secret_key_env": "TEST_OBJSTORE_SK",
                              "upload_bytes_per_s": 1000})
    assert (cfg.access_key, cfg.secret_key, cfg.upload_bytes_per_s) == ("ak-from-env", "sk-from-env", 1000)
    assert "sk-from-env" not in repr(cfg)
    with pytest.raises(ValueError, match="unknown"):
        S3Config.from_dict({**cfg.to_dict(include_credentials=True), "nope": 1})
    with pytest.raises(ValueError, match="missing"):
        S3Config.from_dict({"endpoint": "127.0.0.1:9000", "bucket": "b"})
    with pytest.raises(ValueError):
        S3Config(endpoint="http://127.0.0.1:9000", access_key="a", secret_key="s", bucket="b")
    with pytest.raises(ValueError):
        S3Config(endpoint="127.0.0.1:9000", access_key="a", secret_key="s", bucket="b",
                 bandwidth_bytes_per_s=0)


def test_unreachable_endpoint_fails_fast():
    port = _free_port()  # nothing listens there
    cfg = S3Config(endpoint=f"127.0.0.1:{port}", access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                   bucket=BUCKET)
    with ObjectStore(cfg) as st:
        for call in (lambda: st.put("k", b"v"), lambda: st.get("k"), st.ensure_bucket,
                     lambda: asyncio.run(st.aget("k"))):
            t0 = time.monotonic()
            with pytest.raises(ObjectStoreUnavailable) as ei:
                call()
            assert time.monotonic() - t0 < 5.0
            assert f"127.0.0.1:{port}" in str(ei.value) and BUCKET in str(ei.value)


def test_token_bucket_threads_and_asyncio_share_the_rate():
    rate = 4 * MiB
    tb = TokenBucket(rate, burst_bytes=256 * 1024)
    # 4 threads x 0.5 MiB + 2 MiB from asyncio = 4 MiB; minus the 0.25 MiB burst -> >= 0.93 s.
    t0 = time.monotonic()
    threads = [threading.Thread(target=tb.acquire, args=(MiB // 2,)) for _ in range(4)]
    for t in threads:
        t.start()
    asyncio.run(asyncio.wait_for(tb.acquire_async(2 * MiB), 10))
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()
    elapsed = time.monotonic() - t0
    assert 0.85 <= elapsed < 3, elapsed
    with pytest.raises(ValueError):
        TokenBucket(0)
    with pytest.raises(ValueError):
        tb.acquire(-1)
    assert TokenBucket(rate).acquire(1) == 0.0  # starts full: small requests do not wait
