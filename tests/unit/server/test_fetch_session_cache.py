"""The fetch session cache's room and eviction rules (FetchSessionCacheShard), without a socket."""
from __future__ import annotations

from types import SimpleNamespace

from broker_impl.server.fetch_session import (EVICTION_MS, FINAL_EPOCH, INVALID_SESSION_ID, SESSION_ID_RANGE,
                                              FetchSessionCache, FetchTarget, next_epoch)


def _target(partition: int) -> FetchTarget:
    fp = SimpleNamespace(partition=partition, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20,
                         current_leader_epoch=-1, last_fetched_epoch=-1)
    return FetchTarget("t", bytes(16), fp)


def _answer(hw: int = 0):
    return SimpleNamespace(records=b"", high_watermark=hw, log_start_offset=0, error_code=0,
                           preferred_read_replica=-1, diverging_epoch=None)


def _open(cache: FetchSessionCache, partitions: int, now: int, follower: bool = False) -> int:
    ctx = cache.new_context(12, 0, 0, follower, [_target(p) for p in range(partitions)], [], now)
    return ctx.respond([(t, _answer()) for t in ctx.targets], now)[1]


def test_epochs_wrap_past_the_last_int_to_one_and_final_stays_final() -> None:
    assert [next_epoch(0), next_epoch(7), next_epoch(0x7FFFFFFF), next_epoch(FINAL_EPOCH)] == [1, 8, 1, FINAL_EPOCH]


def test_session_ids_lie_in_their_shards_range() -> None:
    cache = FetchSessionCache(slots=16, seed=1)
    ids = [_open(cache, 1, 0) for _ in range(16)]
    assert all(sid != INVALID_SESSION_ID for sid in ids) and len(set(ids)) == 16
    assert [int(sid / SESSION_ID_RANGE) for sid in ids[:8]] == list(range(8))   # new sessions go round the shards


def test_a_full_shard_evicts_only_a_stale_or_a_less_valuable_old_session() -> None:
    cache = FetchSessionCache(slots=8, seed=2)    # one session per shard
    first = [_open(cache, 3, now=0) for _ in range(8)]
    assert len(cache) == 8
    # young sessions (used, created less than 120 s ago) are not evicted: no session
    assert _open(cache, 5, now=1000) == INVALID_SESSION_ID
    # a follower's session may evict a consumer's even while young
    assert _open(cache, 1, now=2000, follower=True) != INVALID_SESSION_ID
    assert len(cache) == 8
    # past the eviction time a stale session makes room for anyone
    assert _open(cache, 1, now=EVICTION_MS + 5000) != INVALID_SESSION_ID
    assert sum(1 for sid in first if cache.shard_of(sid).sessions.get(sid)) == 6
