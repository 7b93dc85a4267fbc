"""The shared system's move budget (shared.move.upload.bytes.per.s) paces a close's upload the way
a shaper paces a transfer: the PUT starts at once and the upload ends when its bytes have both
travelled and been paid for at the cap. Paying first and then sending charged each byte twice
(at the cap, then at the link): a 2.3 MB tail under a 6.25 MB/s budget on a 100 Mbit/s link took
0.55 s where the cap alone allows 0.37 s (issue 32's shared estimate).
"""
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from systems.shared.backend import SharedBackend
from systems.shared.objstore import ObjectStoreUnavailable, TokenBucket

EPOCH = 3


class Store:
    """Records when each PUT starts; fails the first `failures` PUTs."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.starts: list[float] = []

    async def aput(self, key: str, body: bytes) -> None:
        self.starts.append(time.monotonic())
        if self.failures:
            self.failures -= 1
            raise ObjectStoreUnavailable("down")


def _backend(store: Store) -> SharedBackend:
    b = SharedBackend.__new__(SharedBackend)  # only what _put_retry touches
    b.store, b.broker = store, SimpleNamespace(epoch=EPOCH)
    return b


def test_a_paced_put_starts_before_its_budget_is_paid_and_ends_after():
    rate, burst, n = 1_000_000, 64 * 1024, 300_000
    budget = TokenBucket(rate, burst)
    store = Store()

    async def main() -> tuple[float, float]:
        t0 = time.monotonic()
        await _backend(store)._put_retry("k", b"x" * n, [SimpleNamespace(incarnation=EPOCH)], budget)
        return t0, time.monotonic()

    t0, t1 = asyncio.run(main())
    (start,) = store.starts
    assert t1 - t0 >= (n - burst) / rate  # not done until the cap allowed it ...
    assert start - t0 < (t1 - t0) / 2  # ... but sent at once, not after the payment


def test_a_retried_put_pays_its_budget_once():
    rate, burst, n = 1_000_000, 64 * 1024, 200_000
    budget = TokenBucket(rate, burst)
    paid: list[int] = []
    pay = budget.acquire_async

    async def acquire_async(k: int) -> float:
        paid.append(k)
        return await pay(k)

    budget.acquire_async = acquire_async
    store = Store(failures=1)

    async def main() -> None:
        await _backend(store)._put_retry("k", b"x" * n, [SimpleNamespace(incarnation=EPOCH)], budget)

    asyncio.run(main())
    assert len(store.starts) == 2 and paid == [n]
