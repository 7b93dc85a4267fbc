"""A shared partition object that was closed or fenced opens afresh when its broker is made its
leader again under a newer leader epoch on the same replica set (the core keeps one object per
replica): a sole broker restarted before its session expired first sees itself leader from the old
metadata, is fenced (leader -1: no other broker to fail over to), closes the half-open partition,
and gets it back from the controller's next election. A stale epoch never reopens it (a source that
just closed for a move still sees its own, older, leadership).

Runs against a stand-in backend: its open records the epoch, its close marks the partition closed
as the real one does when the close is over."""
from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

from systems.core.metadata import PartitionInfo
from systems.shared.backend import CLOSED, RECOVERING, SharedPartition


def test_a_closed_partition_led_again_under_a_newer_epoch_opens_afresh():
    async def go() -> None:
        opens: list[int] = []

        async def recover(p):
            opens.append(p.info.leader_epoch)

        def start_close(p, why):
            p.ended_at_epoch, p.state, p.closed, p.leading = p.info.leader_epoch, CLOSED, True, False

        backend = SimpleNamespace(broker=SimpleNamespace(id=1), recover=recover, start_close=start_close)
        info = PartitionInfo("t", "tid", 0, [1], [1], 1, 0, 0)
        p = SharedPartition(backend, info)
        p.on_metadata(info)  # the old image: led at epoch 0, an open starts
        await asyncio.sleep(0)
        assert p.state == RECOVERING and opens == [0]
        p.on_metadata(replace(info, leader=-1, leader_epoch=1))  # fenced: no leader, it closes
        await asyncio.sleep(0)
        assert p.state == CLOSED and p.closed
        p.on_metadata(replace(info, leader_epoch=1))  # not newer than its close: stays closed
        await asyncio.sleep(0)
        assert p.state == CLOSED and opens == [0]
        p.on_metadata(replace(info, leader_epoch=3))  # the controller's election: a fresh open
        await asyncio.sleep(0)
        assert p.state == RECOVERING and not p.closed and opens == [0, 3]
        assert p.data_sid == -1 and p.store.ranges == []  # nothing of the old open carried over

    asyncio.run(go())
