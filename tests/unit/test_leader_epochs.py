"""Leader-epoch based truncation of the replication-copy system (KIP-101, KIP-279), without a
process or a network: the epoch cache's lookups, its checkpoint, and divergent-suffix truncation
between real partition replicas (local logs). The failure that lost acked records, on a real
cluster: tests/systems/test_epoch_truncation.py.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

from systems.core.log import LocalLog
from systems.core.metadata import PartitionInfo
from systems.replication.backend import UNDEFINED, LeaderEpochCache, ReplicaPartition, truncation_step
from tests.support.rawclient import batch


# -- the epoch cache ------------------------------------------------------------------------
def _cache(entries, path=None) -> LeaderEpochCache:
    c = LeaderEpochCache(path)
    for e, s in entries:
        c.assign(e, s)
    return c


def test_epoch_cache_lookup():
    c = _cache([(0, 0), (2, 10), (5, 20)])
    leo = 30
    assert c.end_offset_for(5, leo) == (5, 30)  # the latest epoch ends at the log end
    assert c.end_offset_for(2, leo) == (2, 20)  # ends where the next larger epoch starts
    assert c.end_offset_for(3, leo) == (2, 20)  # unknown epoch: the largest one below it
    assert c.end_offset_for(4, leo) == (2, 20)
    assert c.end_offset_for(1, leo) == (0, 10)
    assert c.end_offset_for(6, leo) == (UNDEFINED, UNDEFINED)  # newer than any
    assert c.end_offset_for(-1, leo) == (UNDEFINED, UNDEFINED)
    assert LeaderEpochCache(None).end_offset_for(0, 5) == (UNDEFINED, UNDEFINED)
    # Older than every entry (its data gone from the log): the first entry's start.
    assert _cache([(3, 40), (4, 50)]).end_offset_for(1, 60) == (1, 40)


def test_epoch_cache_assign_truncate_and_checkpoint(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    c = _cache([(0, 0), (1, 5), (3, 9)], path)
    c.assign(3, 12)  # same epoch, later start: nothing new
    assert c.entries == [(0, 0), (1, 5), (3, 9)]
    c.assign(2, 7)  # non-monotonic entries (epoch >= 2 or start >= 7) go first
    assert c.entries == [(0, 0), (1, 5), (2, 7)]
    c.truncate_from_end(7)
    assert c.entries == [(0, 0), (1, 5)]
    again = LeaderEpochCache(path)
    assert again.load() and again.entries == [(0, 0), (1, 5)]
    c.truncate_from_start(6)
    assert c.entries == [(1, 6)]
    c.clear()
    assert LeaderEpochCache(path).load() and LeaderEpochCache(path).entries == []
    assert not LeaderEpochCache(str(tmp_path / "missing")).load()


def test_truncation_step_kip279_rounds():
    # The follower has epochs 1 and 3 the leader never had; the leader has 2 and 4 instead.
    follower = _cache([(0, 0), (1, 4), (3, 8)])
    leader = _cache([(0, 0), (2, 4), (4, 6)])
    leo, l_leo = 12, 10
    rounds = []
    done = False
    while not done:
        le, lend = leader.end_offset_for(follower.latest_epoch, l_leo)
        off, done = truncation_step(follower, leo, le, lend)
        rounds.append((follower.latest_epoch, le, lend, off, done))
        leo = min(leo, off)
        follower.truncate_from_end(leo)
        assert len(rounds) < 5
    # Asked 3: the leader's largest epoch <= 3 is 2 (ends at 6), one the follower lacks: cut to
    # where its own epochs <= 2 end (8) and ask again; asked 1: the leader answers epoch 0 ending
    # at 4, which the follower has, ending at 4 too: the logs agree up to 4.
    assert rounds == [(3, 2, 6, 8, False), (1, 0, 4, 4, True)]
    assert leo == 4 and follower.entries == [(0, 0)]


# -- replicas without a network --------------------------------------------------------------
def _replica(tmp_path, broker_id: int, leader: int, epoch: int) -> ReplicaPartition:
    backend = SimpleNamespace(broker=SimpleNamespace(id=broker_id), follow=lambda p, leader: None,
                              unfollow=lambda p: None)
    store = LocalLog(str(tmp_path / f"b{broker_id}" / "t-0"))
    info = PartitionInfo("t", "tid", 0, [1, 2], [1, 2], leader, epoch, 0)
    p = ReplicaPartition(backend, info, store)
    p.on_metadata(info)
    return p


def _elect(p: ReplicaPartition, leader: int, epoch: int) -> None:
    p.on_metadata(PartitionInfo("t", "tid", 0, [1, 2], [1, 2], leader, epoch, 0))


def _produce(leader: ReplicaPartition, n: int, tag: bytes, pid: int = 7) -> None:
    """n idempotent batches of 2 records from producer `pid`, sequences continuing."""
    entry = leader.producers.producers.get(pid)
    seq = entry.last_seq + 1 if entry is not None else 0
    for i in range(n):
        leader.append(batch([tag + b"%d" % i, tag + b"%d'" % i], producer_id=pid, epoch=0,
                            base_sequence=seq + 2 * i), 1 << 20)


def _replicate(follower: ReplicaPartition, leader: ReplicaPartition) -> None:
    follower.append_replicated(leader.read(follower.log_end_offset, 1 << 20, upto=leader.log_end_offset))


def _resolve(follower: ReplicaPartition, leader: ReplicaPartition) -> int:
    """What the fetcher does for a partition pending truncation; returns the rounds used."""
    rounds = 0
    while follower.pending_truncation:
        follower.on_epoch_end_offset(*leader.end_offset_for_epoch(follower.epochs.latest_epoch))
        rounds += 1
        assert rounds < 5
    return rounds


def _values(p: ReplicaPartition) -> list[bytes]:
    from kafka.record.default_records import DefaultRecordBatch
    out = []
    data = p.read(p.log_start_offset, 1 << 24, upto=p.log_end_offset)
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        out += [r.value for r in DefaultRecordBatch(data[pos:pos + size])]
        pos += size
    return out


def test_follower_keeps_records_above_its_hw(tmp_path):
    """The bug: records the follower holds above its (lagging) HW are on the new leader too,
    so they stay; truncating to the HW dropped them."""
    a = _replica(tmp_path, 1, leader=1, epoch=0)
    b = _replica(tmp_path, 2, leader=1, epoch=0)
    _produce(a, 3, b"x")
    _replicate(b, a)
    assert b.log_end_offset == 6 and b.hw == 0  # the HW comes with the next fetch response
    _elect(a, 2, 1)
    _elect(b, 2, 1)  # b leads epoch 1 with everything
    assert b.log_end_offset == 6 and b.epochs.entries == [(0, 0), (1, 6)]
    assert a.pending_truncation
    assert _resolve(a, b) == 1 and a.log_end_offset == 6
    # And as a follower of a leader that has them: nothing dropped either.
    _elect(b, 1, 2)
    _elect(a, 1, 2)
    assert b.pending_truncation and _resolve(b, a) == 1 and b.log_end_offset == 6
    assert _values(b) == _values(a) and len(_values(b)) == 6


def test_divergent_suffix_truncated_exactly(tmp_path):
    """The old leader holds batches of its epoch the new leader never got: exactly those go,
    and after refetching both logs are equal."""
    a = _replica(tmp_path, 1, leader=1, epoch=0)
    b = _replica(tmp_path, 2, leader=1, epoch=0)
    _produce(a, 3, b"x")  # offsets 0-5, epoch 0, replicated
    _replicate(b, a)
    _elect(a, 1, 1)
    _elect(b, 1, 1)
    _produce(a, 2, b"lost")  # offsets 6-9, epoch 1, only on a (never acked by the ISR)
    _elect(b, 2, 2)  # b leads epoch 2 from offset 6 (a unreachable, unclean or not)
    _produce(b, 3, b"y", pid=8)  # offsets 6-11, epoch 2
    _elect(a, 2, 2)
    assert a.pending_truncation and a.log_end_offset == 10
    hw_before = a.hw
    assert _resolve(a, b) == 1
    assert a.log_end_offset == 6 and a.epochs.entries == [(0, 0)] and a.hw == min(hw_before, 6)
    # The producer state forgets the dropped batches with them (sequences 6-9 of producer 7).
    assert [bt.last_offset for bt in a.producers.producers[7].batches] == [1, 3, 5]
    _replicate(a, b)
    assert _values(a) == _values(b)
    assert a.epochs.entries == b.epochs.entries == [(0, 0), (2, 6)]
    assert not any(v.startswith(b"lost") for v in _values(a))
    # The checkpoint on disk follows: reopened, a has the same epochs.
    a.store.close()
    re = _replica(tmp_path, 1, leader=2, epoch=2)
    assert re.epochs.entries == [(0, 0), (2, 6)] and re.log_end_offset == 12


def test_checkpoint_rebuilt_from_the_log(tmp_path):
    a = _replica(tmp_path, 1, leader=1, epoch=0)
    _produce(a, 2, b"x")
    _elect(a, 1, 3)
    _produce(a, 1, b"y")
    assert a.epochs.entries == [(0, 0), (3, 4)]
    a.store.close()
    os.unlink(os.path.join(a.store.dir, "leader-epoch-checkpoint"))
    again = _replica(tmp_path, 1, leader=1, epoch=3)
    assert again.epochs.entries == [(0, 0), (3, 4)]
    # A checkpoint with an entry past the log end (the tail lost by kill -9): cut on open.
    again.store.close()
    with open(os.path.join(a.store.dir, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n3\n0 0\n3 4\n4 6\n")
    third = _replica(tmp_path, 1, leader=2, epoch=4)
    assert third.epochs.entries == [(0, 0), (3, 4)]
